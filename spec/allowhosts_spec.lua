-- isolation.default_allow_hosts(agent, hook_url): the model API hosts of each
-- agent, the package registries (npm's read from npm's own configuration),
-- and the hook's host:port.
local isolation = require("isolation")
local helpers = require("helpers")

local AGENT_HOSTS = {
  claude = { "api.anthropic.com", "platform.claude.com", "console.anthropic.com" },
  codex = { "api.openai.com", "auth.openai.com", "chatgpt.com" },
  gemini = { "generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com" },
}
local REGISTRIES = {
  "pypi.org", "files.pythonhosted.org", "crates.io", "static.crates.io", "index.crates.io",
  "proxy.golang.org", "sum.golang.org", "rubygems.org", "index.rubygems.org",
  "repo.maven.apache.org", "repo1.maven.org",
}

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local index_of = require("support.tables").index_of

local function assert_no_duplicates(list)
  local seen = {}
  for _, v in ipairs(list) do
    assert.is_nil(seen[v], "duplicate " .. v)
    seen[v] = true
  end
end

-- Every entry outside the fixed lists (the npm registry, the hook's).
local function extras(list)
  local fixed = set_of(REGISTRIES)
  for _, hosts in pairs(AGENT_HOSTS) do
    for _, h in ipairs(hosts) do fixed[h] = true end
  end
  local out = {}
  for _, v in ipairs(list) do
    if not fixed[v] then out[#out + 1] = v end
  end
  return out
end

-- The pattern default_allow_hosts should derive from a registry URL.
local function pattern_of_url(url)
  local scheme, authority = url:match("^(%a+)://([^/?#]+)")
  if not scheme then return nil end
  authority = authority:gsub("^.*@", "")
  local host, port = authority:match("^(%b[])(.*)$")
  if not host then host, port = authority:match("^([^:]*)(.*)$") end
  port = port:match("^:(%d+)$")
  local default = scheme:lower() == "https" and "443" or "80"
  host = host:lower()
  if port and port ~= default then return host .. ":" .. port end
  return host
end

-- Runs default_allow_hosts in a child lua5.4 with an environment of our own.
-- The child loads the normal build: it runs without the sanitizer preload.
local CLEAN_ENV = "env -u npm_config_registry -u NPM_CONFIG_REGISTRY -u npm_config_userconfig "
  .. "-u NPM_CONFIG_USERCONFIG -u npm_config_globalconfig -u NPM_CONFIG_GLOBALCONFIG "
local function child_hosts(env, agent, hook)
  local script = string.format(
    "package.cpath = 'build/?.so'; local t = assert(require('isolation').default_allow_hosts(%s, %s)); "
      .. "for _, h in ipairs(t) do print(h) end",
    agent and string.format("%q", agent) or "nil", hook and string.format("%q", hook) or "nil")
  local code, out, err = helpers.run(CLEAN_ENV .. env .. " lua5.4 -e " .. helpers.shquote(script))
  assert.are.equal(0, code, err)
  local list = {}
  for line in out:gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

local function npm_available()
  return helpers.run("command -v npm") == 0
end

describe("default_allow_hosts", function()
  it("gives each agent its model API hosts, first, in a stable order", function()
    for agent, hosts in pairs(AGENT_HOSTS) do
      local list = assert(isolation.default_allow_hosts(agent))
      for i, h in ipairs(hosts) do
        assert.are.equal(h, list[i], agent)
      end
      for other, other_hosts in pairs(AGENT_HOSTS) do
        if other ~= agent then
          for _, h in ipairs(other_hosts) do
            assert.is_nil(index_of(list, h), agent .. " must not get " .. h)
          end
        end
      end
    end
  end)

  it("gives any other agent, or none, no model API host", function()
    for _, agent in ipairs({ "aider", "Claude", "", "claude " }) do
      local list = assert(isolation.default_allow_hosts(agent))
      for _, hosts in pairs(AGENT_HOSTS) do
        for _, h in ipairs(hosts) do assert.is_nil(index_of(list, h), agent) end
      end
    end
    assert.are.same(isolation.default_allow_hosts("aider"), isolation.default_allow_hosts(nil))
  end)

  it("includes the common package registries", function()
    local list = assert(isolation.default_allow_hosts("codex"))
    local last = 0
    for _, r in ipairs(REGISTRIES) do
      local i = index_of(list, r)
      assert.is_number(i, r)
      assert.is_true(i > last, "stable order: " .. r)
      last = i
    end
  end)

  it("gives only valid host patterns, without duplicates", function()
    local list = assert(isolation.default_allow_hosts("claude", "http://localhost:9110/hook"))
    assert_no_duplicates(list)
    assert.is_false(isolation.host_allowed(list, "unlisted.example.org", 443))
    local ok, err = isolation.config({ mode = "bwrap", network = "deny", allow_hosts = list })
    assert.is_table(ok, err)
    assert.are.same(list, ok.allow_hosts)
  end)

  it("returns a new table each call, and the same content", function()
    local a = assert(isolation.default_allow_hosts("gemini", "https://ctl.example.com/h"))
    local b = assert(isolation.default_allow_hosts("gemini", "https://ctl.example.com/h"))
    assert.are_not.equal(a, b)
    assert.are.same(a, b)
    a[1] = "changed.example.com"
    table.insert(a, "more.example.com")
    assert.are.same(b, isolation.default_allow_hosts("gemini", "https://ctl.example.com/h"))
  end)

  it("raises for wrong argument types", function()
    assert.has_error(function() isolation.default_allow_hosts({}) end)
    assert.has_error(function() isolation.default_allow_hosts("claude", {}) end)
  end)

  describe("the hook URL", function()
    local cases = {
      { "http://127.0.0.1:9110/hook/s1", { "127.0.0.1:9110" } },
      { "https://ctl.example.com/hook", { "ctl.example.com:443" } },
      { "http://ctl.example.com", { "ctl.example.com:80" } },
      { "http://ctl.example.com?x=1", { "ctl.example.com:80" } },
      { "http://ctl.example.com#frag", { "ctl.example.com:80" } },
      { "HTTP://CTL.Example.COM:8080/Path", { "ctl.example.com:8080" } },
      { "https://ctl.example.com.:8443/", { "ctl.example.com:8443" } },
      { "http://ctl.example.com:443/", { "ctl.example.com:443" } },
      { "http://[::1]:9110/hook", { "[::1]:9110" } },
      { "https://[0:0::1]/", { "[::1]:443" } },
      { "http://[2001:DB8::5]:81/", { "[2001:db8::5]:81" } },
      { "http://localhost:9110/hook/s1", { "localhost:9110", "127.0.0.1:9110", "[::1]:9110" } },
      { "https://LOCALHOST/", { "localhost:443", "127.0.0.1:443", "[::1]:443" } },
      { "http://localhost./", { "localhost:80", "127.0.0.1:80", "[::1]:80" } },
    }
    for _, case in ipairs(cases) do
      local url, want = case[1], case[2]
      it("adds " .. table.concat(want, ", ") .. " for " .. url, function()
        local list = assert(isolation.default_allow_hosts("claude", url))
        local n = #list
        for i = #want, 1, -1 do
          assert.are.equal(want[i], list[n - (#want - i)])
        end
        assert_no_duplicates(list)
        -- and the hook really is admitted on its port, and not on another
        local host = want[1]:match("^(.*):%d+$")
        local port = tonumber(want[1]:match(":(%d+)$"))
        assert.is_true(isolation.host_allowed(list, host, port))
        assert.is_false(isolation.host_allowed(list, host, port == 1 and 2 or port - 1))
      end)
    end

    it("lets the loopback addresses of a localhost hook through, on that port only", function()
      local list = assert(isolation.default_allow_hosts(nil, "http://localhost:9110/"))
      assert.is_true(isolation.host_allowed(list, "127.0.0.1", 9110))
      assert.is_true(isolation.host_allowed(list, "::1", 9110))
      assert.is_false(isolation.host_allowed(list, "127.0.0.1", 9111))
      assert.is_false(isolation.host_allowed(list, "127.0.0.2", 9110))
    end)

    it("treats nil and the empty string as no hook", function()
      local none = assert(isolation.default_allow_hosts("claude"))
      assert.are.same(none, isolation.default_allow_hosts("claude", nil))
      assert.are.same(none, isolation.default_allow_hosts("claude", ""))
      -- at most the npm registry is outside the fixed lists
      assert.is_true(#extras(none) <= 1)
    end)

    it("adds the hook once when it equals another entry", function()
      local home = helpers.tmpdir()
      local list = child_hosts("HOME=" .. helpers.shquote(home)
        .. " npm_config_registry=http://reg.example.net:4873/", nil, "http://reg.example.net:4873/hook")
      helpers.rmtree(home)
      assert.are.same({ "reg.example.net:4873" }, extras(list))
      assert_no_duplicates(list)
    end)

    local bad = {
      { "ftp://ctl.example.com/", "scheme" },
      { "ctl.example.com:9110", "scheme" },
      { "//ctl.example.com/", "scheme" },
      { "http:/ctl.example.com/", "scheme" },
      { "unix:///run/x.sock", "scheme" },
      { "http://", "host is empty" },
      { "http:///hook", "host is empty" },
      { "http://:9110/hook", "host is empty" },
      { "http://user@ctl.example.com/", "userinfo" },
      { "http://user:pw@ctl.example.com/", "userinfo" },
      { "http://ctl.example.com:0/", "port" },
      { "http://ctl.example.com:65536/", "port" },
      { "http://ctl.example.com:abc/", "port" },
      { "http://ctl.example.com:/", "port" },
      { "http://ctl.example.com:-1/", "port" },
      { "http://127.1:9110/", "host" },
      { "http://2130706433/", "host" },
      { "http://0x7f000001/", "host" },
      { "http://ctl..example.com/", "host" },
      { "http://ctl example.com/", "host" },
      { "http://::1:9110/", "host" },
      { "http://[::1/", "']'" },
      { "http://[::1]x/", "port" },
      { "http://[fe80::1%25eth0]:80/", "host" },
      { "http://[10.0.0.1]/", "host" },
    }
    for _, case in ipairs(bad) do
      local url, word = case[1], case[2]
      it("refuses " .. url, function()
        local ok, err = isolation.default_allow_hosts("claude", url)
        assert.is_nil(ok)
        assert.matches("^isolation: hook_url ", err)
        assert.is_truthy(err:find(word, 1, true), err)
        assert.is_truthy(err:find('(got "' .. url .. '")', 1, true), err)
      end)
    end
  end)

  describe("the npm registry", function()
    local home
    before_each(function() home = helpers.tmpdir() end)
    after_each(function() helpers.rmtree(home) end)

    it("comes from the user's .npmrc", function()
      helpers.write(home .. "/.npmrc", "; a comment\n@corp:registry=https://corp.example.com/\n"
        .. "registry = https://npm.example.com/sub/\n")
      local list = child_hosts("HOME=" .. helpers.shquote(home), "claude")
      assert.are.same({ "npm.example.com" }, extras(list))
      -- right after PyPI's hosts
      assert.are.equal(index_of(list, "files.pythonhosted.org") + 1, index_of(list, "npm.example.com"))
    end)

    it("keeps a port that is not the scheme's, quotes and ${VAR} expanded", function()
      helpers.write(home .. "/.npmrc", 'registry="http://${REG_HOST}:4873/"\r\n')
      local list = child_hosts("HOME=" .. helpers.shquote(home) .. " REG_HOST=reg.example.net", nil)
      assert.are.same({ "reg.example.net:4873" }, extras(list))
      helpers.write(home .. "/.npmrc", "registry=https://reg.example.net:443/\nregistry=https://last.example.net/\n")
      list = child_hosts("HOME=" .. helpers.shquote(home), nil)
      assert.are.same({ "last.example.net" }, extras(list))
    end)

    it("comes from npm_config_registry and NPM_CONFIG_REGISTRY before any npmrc", function()
      helpers.write(home .. "/.npmrc", "registry=https://npm.example.com/\n")
      local list = child_hosts("HOME=" .. helpers.shquote(home)
        .. " npm_config_registry=https://env.example.com:8443/", nil)
      assert.are.same({ "env.example.com:8443" }, extras(list))
      list = child_hosts("HOME=" .. helpers.shquote(home)
        .. " NPM_CONFIG_REGISTRY=http://upper.example.com/", nil)
      assert.are.same({ "upper.example.com" }, extras(list))
    end)

    it("comes from the file NPM_CONFIG_USERCONFIG names", function()
      helpers.write(home .. "/other.npmrc", "registry=https://user.example.org/\n")
      local list = child_hosts("HOME=" .. helpers.shquote(home) .. " NPM_CONFIG_USERCONFIG="
        .. helpers.shquote(home .. "/other.npmrc"), nil)
      assert.are.same({ "user.example.org" }, extras(list))
    end)

    it("gives no npm entry when the configured registry does not parse", function()
      for _, url in ipairs({ "ftp://npm.example.com/", "npm.example.com", "https://npm.example.com:0/" }) do
        local list = child_hosts("HOME=" .. helpers.shquote(home) .. " npm_config_registry="
          .. helpers.shquote(url), nil)
        assert.are.same({}, extras(list), url)
      end
    end)

    it("is listed once when it equals another entry", function()
      local list = child_hosts("HOME=" .. helpers.shquote(home) .. " npm_config_registry=https://pypi.org/", nil)
      assert_no_duplicates(list)
      assert.are.same({}, extras(list))
    end)

    it("matches what npm itself reports, with and without a user .npmrc", function()
      if not npm_available() then
        io.stderr:write("SKIP (npm comparison): npm is not installed\n")
        return
      end
      for _, npmrc in ipairs({ false, true }) do
        if npmrc then helpers.write(home .. "/.npmrc", "registry=https://npm.example.com:4443/\n") end
        local env = "HOME=" .. helpers.shquote(home)
        local code, out = helpers.run(CLEAN_ENV .. env .. " timeout 60 npm config get registry")
        assert.are.equal(0, code)
        local want = pattern_of_url(out:gsub("%s+$", ""))
        assert.is_string(want)
        local list = child_hosts(env, nil)
        assert.are.same({ want }, extras(list))
      end
    end)

    -- Hides the installed npm package in a bwrap sandbox (/ read-only, a tmpfs
    -- over /usr/lib/node_modules) and puts a fake `npm` first on PATH, so that
    -- only the last resort, `npm config get registry`, can answer.
    local function with_fake_npm(script_body)
      helpers.run("mkdir -p " .. helpers.shquote(home .. "/bin"))
      helpers.write(home .. "/bin/npm", "#!/bin/sh\n" .. script_body .. "\n")
      helpers.run("chmod +x " .. helpers.shquote(home .. "/bin/npm"))
      local hide = ""
      for _, dir in ipairs({ "/usr/lib/node_modules", "/usr/local/lib/node_modules", "/usr/share/nodejs" }) do
        if helpers.run("test -d " .. dir) == 0 then hide = hide .. " --tmpfs " .. dir end
      end
      local lua = "package.cpath = 'build/?.so'; local t0 = os.time(); "
        .. "local t = assert(require('isolation').default_allow_hosts(nil)); "
        .. "for _, h in ipairs(t) do print(h) end; print('seconds=' .. os.time() - t0)"
      local code, out, err = helpers.run("bwrap --ro-bind / / --dev /dev --proc /proc" .. hide
        .. " --bind " .. helpers.shquote(home) .. " " .. helpers.shquote(home) .. " -- "
        .. CLEAN_ENV .. "PATH=" .. helpers.shquote(home .. "/bin:/usr/bin:/bin") .. " HOME="
        .. helpers.shquote(home) .. " lua5.4 -e " .. helpers.shquote(lua))
      assert.are.equal(0, code, err)
      local list, seconds = {}, nil
      for line in out:gmatch("[^\n]+") do
        seconds = seconds or tonumber(line:match("^seconds=(%d+)$"))
        if not line:match("^seconds=") then list[#list + 1] = line end
      end
      return list, seconds
    end

    -- Own probe: the exact sandbox with_fake_npm uses (no new namespaces
    -- beyond the mount namespace), skipped with a printed reason when absent.
    local function skip_without_sandbox()
      local code, _, err = helpers.run("bwrap --ro-bind / / --dev /dev --proc /proc -- /bin/true")
      if code ~= 0 then
        io.stderr:write("SKIP (bwrap --ro-bind / /): " .. err .. "\n")
        return true
      end
      return false
    end

    it("falls back to `npm config get registry` when no npm package is found", function()
      if skip_without_sandbox() then return end
      local list = with_fake_npm('echo "https://fake.example.com:8443/"')
      assert.are.same({ "fake.example.com:8443" }, extras(list))
    end)

    it("gives up on a hanging `npm config get registry` after its deadline", function()
      if skip_without_sandbox() then return end
      local list, seconds = with_fake_npm("exec sleep 120")
      assert.are.same({}, extras(list))
      assert.is_true(seconds < 60, "returned after " .. tostring(seconds) .. " s")
      -- and a failing npm gives no entry either
      list = with_fake_npm("echo https://x.example.com/; exit 3")
      assert.are.same({}, extras(list))
    end)

    it("in this process matches npm's report for the current environment", function()
      if not npm_available() then
        io.stderr:write("SKIP (npm comparison): npm is not installed\n")
        return
      end
      local code, out = helpers.run("timeout 60 npm config get registry")
      assert.are.equal(0, code)
      local want = pattern_of_url(out:gsub("%s+$", ""))
      local list = assert(isolation.default_allow_hosts(nil))
      assert.is_number(index_of(list, want))
    end)
  end)
end)
