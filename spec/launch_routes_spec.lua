-- The launch spec's routes (API, "Credentials that stay outside"), in real
-- bwrap deny sandboxes built by wrap() and run by /bin/sh under an
-- environment this spec controls completely (env -i): the launching
-- environment holds the real keys; inside, every way a process can read
-- the environment (env, /proc/*/environ and cmdline, bwrap's pid 1
-- included) shows only the base URL and the placeholder. git reads the
-- insteadOf entries. dry_run names each route, its upstream and the
-- variables it sets; the spec has no field for a secret.
local isolation = require("isolation")
local helpers = require("helpers")

local q = helpers.shquote
-- the sanitizer build has no isolation.BRIDGE: the normal build's program
local BRIDGE = isolation.BRIDGE or (function()
  local f = assert(io.popen("cd \"$(dirname " .. q(debug.getinfo(1, "S").source:sub(2)) .. ")\"/.. && pwd"))
  local repo = f:read("l")
  f:close()
  return repo .. "/build/isolation-bridge"
end)()

local REAL = "sk-ant-real-key-9c1e77"
local REAL_TOKEN = "sk-ant-oauth-real-44b0"
local GH = "ghp_real_token_5a5a5a"

local PROBE = require("support.environ_probe")

local function claude_routes(extra)
  local r = { { name = "claude", url_env = "ANTHROPIC_BASE_URL",
    key_env = { "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN" }, upstream = "https://api.example.com" } }
  for _, e in ipairs(extra or {}) do r[#r + 1] = e end
  return r
end

describe("launch spec routes", function()
  local skip = helpers.skip_without_bwrap()
  local T, home, work, proxy

  setup(function()
    if skip then return end
    T = helpers.tmpdir()
    home, work = T .. "/home", T .. "/work"
    assert(os.execute("mkdir -p " .. q(home) .. " " .. q(work) .. " " .. q(T .. "/run")))
    proxy = assert(isolation.proxy({ unix = T .. "/run/proxy.sock", allow = {} }))
  end)

  teardown(function()
    if skip then return end
    proxy:close()
    helpers.rmtree(T)
  end)

  -- The line of spec run by /bin/sh under exactly PATH, HOME and the real
  -- keys (and vars); returns exit code, stdout, stderr.
  local function run(spec, vars)
    spec.config = spec.config or { mode = "bwrap", network = "deny" }
    spec.workdir = work
    spec.proxy_socket = T .. "/run/proxy.sock"
    spec.bridge, spec.bridge_path = "builtin", BRIDGE
    local line = assert(isolation.wrap(spec))
    local assigns = { q("ANTHROPIC_API_KEY=" .. REAL), q("ANTHROPIC_AUTH_TOKEN=" .. REAL_TOKEN), q("GH_TOKEN=" .. GH) }
    for k, v in pairs(vars or {}) do assigns[#assigns + 1] = q(k .. "=" .. v) end
    return helpers.run("cd " .. q(work) .. " && exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=" .. q(home)
      .. " " .. table.concat(assigns, " ") .. " timeout -k 5 60 /bin/sh -c " .. q(line))
  end

  local function env_of(out)
    local env = {}
    for l in out:gmatch("[^\n]+") do
      local k, v = l:match("^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
      if k and env[k] == nil then env[k] = v end
    end
    return env
  end

  for _, inherit in ipairs({ false, true }) do
    it("claude's key: only the placeholder and the base URL inside, the real keys nowhere (env_inherit = "
      .. tostring(inherit) .. ")", function()
      if skip then return end
      local code, out, err = run({ agent = "claude", command = PROBE, routes = claude_routes(),
        env_inherit = inherit or nil })
      assert.are.equal(0, code, err)
      for _, secret in ipairs({ REAL, REAL_TOKEN }) do
        assert.is_nil(out:find(secret, 1, true), "a real key is readable inside")
      end
      local env = env_of(out)
      assert.are.equal("isolation-route-claude", env.ANTHROPIC_API_KEY)
      assert.are.equal("isolation-route-claude", env.ANTHROPIC_AUTH_TOKEN)
      assert.are.equal("http://127.0.0.1:3128/claude", env.ANTHROPIC_BASE_URL)
      assert.are.equal("http://127.0.0.1:3128/claude", env.ISOLATION_ROUTE_CLAUDE)
      -- a variable no route names is the agent's as before (AGENT_ENV)
      if not inherit then assert.is_nil(env.GH_TOKEN) end
    end)
  end

  it("git = true: git's https URLs of the upstream go to the route (insteadOf), at proxy_port", function()
    if skip then return end
    local code, out, err = run({ command = "git config --get-urlmatch url.x https://git.example.com/o/r.git;"
      .. " git ls-remote https://git.example.com/o/r.git 2>&1; env",
      proxy_port = 3999, routes = { { name = "git-example-com", key_env = "GH_TOKEN",
        upstream = "https://git.example.com//", git = true } } })
    assert.are.equal(0, code, err)
    assert.is_nil(out:find(GH, 1, true))
    local env = env_of(out)
    assert.are.equal("isolation-route-git-example-com", env.GH_TOKEN)
    assert.are.equal("1", env.GIT_CONFIG_COUNT)
    assert.are.equal("url.http://127.0.0.1:3999/git-example-com/.insteadOf", env.GIT_CONFIG_KEY_0)
    assert.are.equal("https://git.example.com/", env.GIT_CONFIG_VALUE_0)
    assert.are.equal("http://127.0.0.1:3999/git-example-com", env.ISOLATION_ROUTE_GIT_EXAMPLE_COM)
    -- git rewrote the URL: it asked the route's address (nothing listens
    -- on 3999 in this sandbox), never git.example.com
    assert.truthy(out:find("127.0.0.1:3999/git-example-com/o/r.git", 1, true), out)
    assert.is_nil(out:find("Could not resolve host: git.example.com", 1, true), out)
  end)

  it("docker argv sets the variables with -e NAME=value and never passes a key's name through", function()
    local argv = assert(isolation.docker_argv({ config = { mode = "docker", network = "deny",
      docker_image = "img" }, agent = "claude", workdir = "/srv/w/x", command = "true",
      proxy_socket = "/tmp/p.sock", reap = false, bridge_path = BRIDGE, routes = claude_routes() }))
    local line = table.concat(argv, "\n")
    assert.truthy(line:find("\nANTHROPIC_API_KEY=isolation-route-claude\n", 1, true), line)
    assert.truthy(line:find("\nANTHROPIC_BASE_URL=http://127.0.0.1:3128/claude\n", 1, true), line)
    assert.is_nil(line:find("\nANTHROPIC_API_KEY\n", 1, true), "the real key's name is passed through")
    assert.is_nil(line:find("\nANTHROPIC_AUTH_TOKEN\n", 1, true), "the real token's name is passed through")
  end)

  it("dry_run names each route, its upstream and the variables it sets; env_set lists only its own", function()
    local text = assert(isolation.dry_run({ config = { mode = "bwrap", network = "deny" }, agent = "claude",
      workdir = "/srv/w/x", command = "true", proxy_socket = "/tmp/p.sock", reap = false, env_set = { FOO = "bar" },
      routes = claude_routes({ { name = "gh", key_env = "GH_TOKEN", upstream = "https://git.example.com",
        git = true } }) }))
    assert.truthy(text:find("\n  env_set (literal values from the spec, not shown): FOO\n", 1, true), text)
    -- the agent's names taken from the launching shell no longer include the keys
    local agent_line = text:match("\n  agent claude %(isolation%.AGENT_ENV%): ([^\n]*)")
    assert.truthy(agent_line, text)
    assert.truthy(agent_line:find("ANTHROPIC_MODEL", 1, true), agent_line)
    for _, n in ipairs({ "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL" }) do
      assert.is_nil(agent_line:find(n .. ",", 1, true), agent_line)
    end
    assert.truthy(text:find("\n  route claude: https://api.example.com (the secret stays in the proxy); "
      .. "ISOLATION_ROUTE_CLAUDE, ANTHROPIC_BASE_URL = http://127.0.0.1:3128/claude; ANTHROPIC_API_KEY, "
      .. "ANTHROPIC_AUTH_TOKEN = isolation-route-claude (a placeholder, not the key)\n", 1, true), text)
    assert.truthy(text:find("\n  route gh: https://git.example.com (the secret stays in the proxy); "
      .. "ISOLATION_ROUTE_GH = http://127.0.0.1:3128/gh; GH_TOKEN = isolation-route-gh (a placeholder, not "
      .. "the key); git's https URLs of the upstream go through it (GIT_CONFIG_* insteadOf)\n", 1, true), text)
  end)

  it("2000 generated routes tables: each is refused naming routes, or gives variables that match it", function()
    -- deterministic: the same tables on every run
    local seed = 28
    local function rnd(n)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n + 1
    end
    local pieces = { "a", "z", "0", "-", "_", "A", ".", "/", ":", "@", "?", "#", " ", "\n", "\0", "\255", "é",
      "https://", "http://", "example.com", "127.0.0.1", "[::1]", "KEY", "HOME", "HTTP_PROXY", "1X", "" }
    local function str(max)
      local t = {}
      for _ = 1, rnd(max) - 1 do t[#t + 1] = pieces[rnd(#pieces)] end
      return table.concat(t)
    end
    local function value()
      local k = rnd(8)
      if k == 1 then return nil elseif k == 2 then return rnd(100) elseif k == 3 then return rnd(2) == 1
      elseif k == 4 then return { str(4), str(4) } elseif k == 5 then return "https://" .. str(5) end
      return str(6)
    end
    local keys = { "name", "url_env", "key_env", "upstream", "git", "value", 1 }
    local accepted, refused = 0, 0
    for i = 1, 2000 do
      local routes = {}
      for j = 1, rnd(4) - 1 do
        local r = {}
        for _ = 1, rnd(6) do
          local k = keys[rnd(#keys)]
          r[k] = value()
        end
        if rnd(3) > 1 then r.name = ("r" .. j .. str(2)):lower():gsub("[^a-z0-9-]", "") end
        routes[j] = r
      end
      local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/srv/w/x", command = "true",
        proxy_socket = "/tmp/p.sock", reap = false, routes = routes }
      local argv, err = isolation.argv(spec)
      if argv then
        local line = table.concat(argv, "\n")
        for _, r in ipairs(routes) do
          assert.truthy(line:find("\nISOLATION_ROUTE_" .. r.name:upper():gsub("-", "_") .. "=http://127.0.0.1:3128/"
            .. r.name .. "\n", 1, true), "case " .. i)
        end
        assert.is_nil(line:find("\0", 1, true), "case " .. i .. ": a NUL in the argv")
        accepted = accepted + 1
      else
        assert.matches("^isolation: routes", err, 1, false, "case " .. i .. ": " .. tostring(err))
        refused = refused + 1
      end
    end
    assert.is_true(accepted > 100 and refused > 100, accepted .. " accepted, " .. refused .. " refused")
  end)

  it("refuses bad routes, naming the field and the value", function()
    local function err_of(routes, extra)
      local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/srv/w/x", command = "true",
        proxy_socket = "/tmp/p.sock", reap = false, routes = routes }
      for k, v in pairs(extra or {}) do spec[k] = v end
      local text, err = isolation.dry_run(spec)
      assert.is_nil(text)
      return err
    end
    local cases = {
      { { { name = "Bad" } }, nil, 'routes%[1%]%.name must be 1 to 63 of a%-z, 0%-9 and %- .*%(got "Bad"%)' },
      { { { name = string.rep("a", 64) } }, nil, "routes%[1%]%.name must be" },
      { { { name = "a" }, { name = "a" } }, nil, "routes%[2%] has the name of an earlier route" },
      { { { name = "a", value = "s3cret" } }, nil, 'routes%[1%] has an unknown key .* %(got "value"%)' },
      { { { name = "a", key_env = "HTTP_PROXY" } }, nil, "routes%[1%]%.key_env must not be a proxy variable" },
      { { { name = "a", key_env = "HOME" } }, nil, "routes%[1%]%.key_env must not be HOME" },
      { { { name = "a", key_env = { "OK", "1BAD" } } }, nil, 'routes%[1%]%.key_env%[2%] must be a variable name' },
      { { { name = "a", url_env = 5 } }, nil, "routes%[1%]%.url_env must be a variable name" },
      { { { name = "a", git = true } }, nil, "routes%[1%]%.git needs the route's upstream" },
      { { { name = "a", git = "yes" } }, nil, "routes%[1%]%.git must be a boolean" },
      { { { name = "a", upstream = "http://example.com" } }, nil, "routes%[1%]%.upstream must be https://" },
      { { { name = "a", upstream = "https://u@example.com" } }, nil, "routes%[1%]%.upstream must be https://" },
      { { { name = "a", upstream = "https://example.com/\nx" } }, nil, "routes%[1%]%.upstream must be https://" },
      { { { name = "a", key_env = "K" } }, { env_pass = { "K" } }, "routes%[1%] sets K, which env_pass also names" },
      { { { name = "a", url_env = "K" } }, { env_set = { K = "x" } }, "routes%[1%] sets K, which env_set" },
      { { { name = "a", key_env = "K" }, { name = "b", key_env = "K" } }, nil, "routes%[2%] sets K, which env_set or "
        .. "another route already sets" },
      { { { name = "a", upstream = "https://e.example", git = true } }, { env_set = { GIT_CONFIG_COUNT = "0" } },
        "sets GIT_CONFIG_COUNT, which env_set" },
      { { { name = "a" } }, { config = { mode = "bwrap", network = "allow" } }, "routes needs network deny" },
      { { name = "a" }, nil, "routes must be an array" },
      { "a", nil, "routes must be an array" },
    }
    for i, c in ipairs(cases) do
      local err = err_of(c[1], c[2])
      assert.matches(c[3], err, 1, false, "case " .. i .. ": " .. tostring(err))
    end
    -- an empty array is no route, anywhere
    local text = assert(isolation.dry_run({ config = { mode = "", network = "allow" }, command = "true",
      routes = {} }))
    assert.is_nil(text:find("route ", 1, true))
  end)
end)
