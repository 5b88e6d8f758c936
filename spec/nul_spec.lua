-- A NUL byte in any string the module is given is an error naming the
-- field (the API contract's conventions): never a value cut short at the NUL. C code
-- that read such a string with strcmp or as a C string saw "\0bwrap" as
-- mode "", "\0deny" as network "allow", a key "mode\0evil" as mode, and
-- opened proxy{unix = "/dir/p.sock\0x"} at /dir/p.sock.
--
-- The property: for every string field of every entry point, a NUL
-- inserted at every position (start, middle, end) gives nil, err whose
-- message names the field and says NUL, and nothing is created.
local isolation = require("isolation")
local helpers = require("helpers")
local policy = require("isolation.policy")
local scheduler = require("isolation.scheduler")

-- s with one NUL inserted at each position 0..#s (the start, every middle
-- position, the end); "" gives just "\0".
local function with_nul(s)
  local out = {}
  for i = 0, #s do out[#out + 1] = s:sub(1, i) .. "\0" .. s:sub(i + 1) end
  return out
end

-- Start, middle and end only: for checks that start a process each.
local function with_nul_ends(s)
  local all = with_nul(s)
  if #all <= 3 then return all end
  return { all[1], all[(#all + 1) // 2], all[#all] }
end

local deepcopy = require("support.tables").deep_copy

-- A copy of t with t[path[1]][path[2]]... set to v.
local function with_value(t, path, v)
  local c = deepcopy(t)
  local at = c
  for i = 1, #path - 1 do at = at[path[i]] end
  at[path[#path]] = v
  return c
end

-- A copy of t whose key k (at the top level) is renamed to nk.
local function with_key(t, k, nk)
  local c = deepcopy(t)
  c[nk], c[k] = c[k], nil
  return c
end

local function show(s)
  return (string.format("%q", s):gsub("\n", "n"))
end

-- nil, err naming `field` and saying that a NUL byte is the problem.
local function assert_refused(field, v, res, err, what)
  what = what or field
  assert.is_nil(res, what .. ": " .. show(v) .. " was accepted")
  assert.is_string(err, what)
  assert.truthy(err:find(field, 1, true), what .. ": the message does not name " .. field .. ": " .. err)
  assert.truthy(err:find("NUL", 1, true), what .. ": the message does not say NUL: " .. err)
end

local CONFIG_FIELDS = {
  { "mode", { mode = "bwrap" } },
  { "mode", { mode = "docker" } },
  { "mode", { mode = "" } },
  { "network", { mode = "bwrap", network = "deny" } },
  { "network", { mode = "bwrap", network = "allow" } },
  { "network", { mode = "bwrap", network = "" } },
  { "docker_image", { mode = "docker", docker_image = "debian:bookworm-slim" } },
}

describe("a NUL byte in isolation.config", function()
  for _, case in ipairs(CONFIG_FIELDS) do
    local field, base = case[1], case[2]
    it("is refused at every position of " .. field .. " " .. show(base[field]), function()
      assert.is_table(isolation.config(base))
      for _, v in ipairs(with_nul(base[field])) do
        local cfg, err = isolation.config(with_value(base, { field }, v))
        assert_refused(field, v, cfg, err, "config " .. field)
      end
    end)
  end

  it("is refused at every position of allow_hosts[2]", function()
    local base = { mode = "bwrap", network = "deny", allow_hosts = { "a.example.com", "*.example.net:443" } }
    assert.is_table(isolation.config(base))
    for _, v in ipairs(with_nul(base.allow_hosts[2])) do
      local cfg, err = isolation.config(with_value(base, { "allow_hosts", 2 }, v))
      assert_refused("allow_hosts[2]", v, cfg, err, "config allow_hosts")
    end
  end)

  it("is refused at every position of every key (mode\\0evil does not pass as mode)", function()
    local base = { mode = "bwrap", network = "deny", docker_image = "debian:bookworm-slim", allow_hosts = {} }
    for k in pairs(base) do
      for _, nk in ipairs(with_nul(k)) do
        local cfg, err = isolation.config(with_key(base, k, nk))
        assert_refused("config key", nk, cfg, err, "config key " .. k)
      end
    end
  end)
end)

-- A valid spec for each builder; every string field is then given a NUL.
local SPEC = {
  config = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } },
  agent = "claude",
  workdir = "/tmp/isolation-nul/work",
  command = "echo hi",
  proxy_socket = "/tmp/isolation-nul/proxy.sock",
  binds = { "/tmp/isolation-nul/cache" },
  ro_binds = { "$HOME/.gitconfig" },
  ca_cert = "/tmp/isolation-nul/ca.pem",
  bridge = "builtin",
  bridge_path = "/tmp/isolation-nul/isolation-bridge",
  seccomp_file = "/tmp/isolation-nul/filter.bpf",
  tty = false,
}

local SPEC_FIELDS = {
  { "agent", { "agent" } },
  { "workdir", { "workdir" } },
  { "command", { "command" } },
  { "proxy_socket", { "proxy_socket" } },
  { "binds[1]", { "binds", 1 } },
  { "ro_binds[1]", { "ro_binds", 1 } },
  { "ca_cert", { "ca_cert" } },
  { "bridge", { "bridge" } },
  { "bridge_path", { "bridge_path" } },
  { "seccomp_file", { "seccomp_file" } },
  { "mode", { "config", "mode" } },
  { "network", { "config", "network" } },
  { "allow_hosts[1]", { "config", "allow_hosts", 1 } },
}

local BUILDERS = { "bwrap_argv", "docker_argv", "argv", "wrap", "dry_run" }

describe("a NUL byte in a launch spec", function()
  for _, name in ipairs(BUILDERS) do
    local build = isolation[name]
    for _, case in ipairs(SPEC_FIELDS) do
      local field, path = case[1], case[2]
      it("is refused by " .. name .. " at every position of " .. field, function()
        local base = SPEC
        if name == "docker_argv" and path[1] == "proxy_socket" then
          base = with_value(SPEC, { "config", "mode" }, "docker")
        end
        local ok, berr = build(base)
        assert.truthy(ok, berr)
        local at = base
        for _, p in ipairs(path) do at = at[p] end
        for _, v in ipairs(with_nul(at)) do
          local res, err = build(with_value(base, path, v))
          assert_refused(field, v, res, err, name .. " " .. field)
        end
      end)
    end

    it("is refused by " .. name .. " in the bridge \"socat\" and in docker_image", function()
      local socat = with_value(SPEC, { "bridge" }, "socat")
      -- docker deny refuses socat itself (the image may have none)
      if name ~= "docker_argv" then assert.truthy(build(socat)) end
      for _, v in ipairs(with_nul("socat")) do
        assert_refused("bridge", v, build(with_value(socat, { "bridge" }, v)))
      end
      local docker = with_value(SPEC, { "config" }, { mode = "docker", docker_image = "example.net/img:1" })
      assert.truthy(build(docker))
      for _, v in ipairs(with_nul("example.net/img:1")) do
        assert_refused("docker_image", v, build(with_value(docker, { "config", "docker_image" }, v)))
      end
    end)

    it("is refused by " .. name .. " at every position of every spec key", function()
      for k in pairs(SPEC) do
        for _, nk in ipairs(with_nul(k)) do
          local res, err = build(with_key(SPEC, k, nk))
          assert_refused("launch spec key", nk, res, err, name .. " key " .. k)
        end
      end
    end)
  end

  it("keeps ro_binds: a key \"ro_binds\\0\" does not pass for a key that is then ignored", function()
    -- the attack: a misspelt key that check_keys took for ro_binds while
    -- the reader found no ro_binds, so the read-only mount was dropped
    local spec = with_key(SPEC, "ro_binds", "ro_binds\0")
    spec.ro_binds = nil
    local line, err = isolation.wrap(spec)
    assert.is_nil(line)
    assert.matches("launch spec key", err, 1, true)
  end)
end)

describe("a NUL byte in validate_for_target", function()
  for _, kind in ipairs({ "local", "ssh", "pct", "sandbox" }) do
    it("is refused at every position of target " .. kind .. " and target.kind", function()
      assert.is_true(isolation.validate_for_target({ mode = "" }, kind))
      for _, v in ipairs(with_nul(kind)) do
        assert_refused("target", v, isolation.validate_for_target({ mode = "" }, v))
        assert_refused("target.kind", v, isolation.validate_for_target({ mode = "" }, { kind = v }))
      end
    end)
  end

  it("is refused in the config it checks", function()
    for _, case in ipairs(CONFIG_FIELDS) do
      local field, base = case[1], case[2]
      for _, v in ipairs(with_nul(base[field])) do
        assert_refused(field, v, isolation.validate_for_target(with_value(base, { field }, v), "local"))
      end
    end
  end)
end)

describe("a NUL byte in host patterns and hosts", function()
  it("in a pattern of host_allowed is nil, err naming patterns[i]", function()
    local pats = { "a.example.com", "example.com:443" }
    assert.is_true(isolation.host_allowed(pats, "example.com", 443))
    for _, v in ipairs(with_nul(pats[2])) do
      local ok, err = isolation.host_allowed(with_value(pats, { 2 }, v), "example.com", 443)
      assert_refused("patterns[2]", v, ok, err, "host_allowed pattern")
    end
  end)

  it("in the host of host_allowed is false (a boolean API), for names and IP literals", function()
    for _, host in ipairs({ "example.com", "10.0.0.1", "::1", "[::1]" }) do
      local pats = { "example.com", "10.0.0.0/8", "[::1]" }
      assert.is_true(isolation.host_allowed(pats, host))
      for _, v in ipairs(with_nul(host)) do
        assert.is_false(isolation.host_allowed(pats, v), show(v))
      end
    end
  end)

  it("in default_allow_hosts' agent or hook_url is nil, err naming it", function()
    assert.is_table(isolation.default_allow_hosts("claude", "http://localhost:8080/hook"))
    for _, v in ipairs(with_nul("claude")) do
      assert_refused("agent", v, isolation.default_allow_hosts(v, nil))
    end
    for _, v in ipairs(with_nul("http://localhost:8080/hook")) do
      assert_refused("hook_url", v, isolation.default_allow_hosts("claude", v))
    end
  end)
end)

describe("a NUL byte in proxy options", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function entries(path)
    local code, out = helpers.run("ls -A " .. helpers.shquote(path))
    assert.equal(0, code)
    return out
  end

  local function opts()
    return {
      allow = { "example.com", "*.example.net" },
      unix = dir .. "/p.sock",
      resolve = { ["up.example.com"] = { "127.0.0.1", "::1" } },
      sni = "match",
      allow_private = true,
    }
  end

  local function refused(field, o, v)
    local p, err = isolation.proxy(o)
    if p then p:close() end
    assert_refused(field, v, p, err, "proxy " .. field)
    assert.equal("", entries(dir), "a file was created for " .. show(v))
  end

  it("accepts the base options (the property below is not vacuous)", function()
    local p = assert(isolation.proxy(opts()))
    assert.equal("unix:" .. dir .. "/p.sock", p:address())
    p:close()
  end)

  it("in unix is refused at every position and creates no socket file", function()
    for _, v in ipairs(with_nul(dir .. "/p.sock")) do
      local o = opts()
      o.unix = v
      refused("unix", o, v)
    end
  end)

  it("leaves a stale socket at the cut path alone", function()
    -- a dead socket at dir/p.sock: proxy{unix = dir/p.sock\0x} must not
    -- take it for its own path and replace it
    local uv = require("luv")
    local pipe = uv.new_pipe(false)
    assert(pipe:bind(dir .. "/p.sock"))
    pipe:close()
    uv.run("nowait")
    local before = entries(dir)
    local p, err = isolation.proxy({ allow = { "example.com" }, unix = dir .. "/p.sock\0x" })
    assert_refused("unix", "p.sock\0x", p, err, "proxy unix")
    assert.equal(before, entries(dir))
  end)

  it("in listen is refused at every position", function()
    for _, v in ipairs(with_nul("127.0.0.1:0")) do
      local o = opts()
      o.unix, o.listen = nil, v
      refused("listen", o, v)
    end
  end)

  it("in allow[i] is refused at every position", function()
    for _, v in ipairs(with_nul("*.example.net")) do
      local o = opts()
      o.allow[2] = v
      refused("allow[2]", o, v)
    end
  end)

  it("in sni is refused at every position of match and off", function()
    for _, s in ipairs({ "match", "off" }) do
      for _, v in ipairs(with_nul(s)) do
        local o = opts()
        o.sni = v
        refused("sni", o, v)
      end
    end
  end)

  it("in a resolve name or address is refused at every position", function()
    for _, v in ipairs(with_nul("up.example.com")) do
      local o = opts()
      o.resolve = { [v] = { "127.0.0.1" } }
      refused("resolve", o, v)
    end
    for _, v in ipairs(with_nul("::1")) do
      local o = opts()
      o.resolve = { ["up.example.com"] = { "127.0.0.1", v } }
      refused("resolve[\"up.example.com\"]", o, v)
    end
  end)

  it("in an option key is refused at every position", function()
    for k in pairs(opts()) do
      for _, nk in ipairs(with_nul(k)) do
        refused("proxy option", with_key(opts(), k, nk), nk)
      end
    end
  end)

  it("in set_allow is refused at every position and keeps the allowlist", function()
    local p = assert(isolation.proxy(opts()))
    for _, v in ipairs(with_nul("example.org")) do
      local ok, err = p:set_allow({ "example.com", v })
      assert_refused("allow[2]", v, ok, err, "set_allow")
    end
    p:close()
  end)
end)

describe("a NUL byte through the Lua glue", function()
  local function json_string(s)
    return '"' .. s:gsub("%z", "\\u0000") .. '"'
  end

  it("policy: a stored default, a PATCH, a POST, a launch configuration, a badge", function()
    for _, case in ipairs(CONFIG_FIELDS) do
      local field, base = case[1], case[2]
      for _, v in ipairs(with_nul(base[field])) do
        local cfg = with_value(base, { field }, v)
        local text = assert(policy.json_encode(cfg))
        assert.truthy(text:find("\\u0000", 1, true))
        assert_refused(field, v, policy.project_default({ default_isolation_json = text }))
        local project = { default_isolation_json = '{"mode":"bwrap"}' }
        assert_refused(field, v, policy.patch_project(project, '{"isolation":' .. text .. '}'))
        assert.equal('{"mode":"bwrap"}', project.default_isolation_json)
        assert_refused(field, v, policy.session_isolation({}, { isolation = cfg }))
        assert_refused(field, v, policy.effective(nil, cfg))
        assert_refused(field, v, policy.decode_launch('{"isolation":' .. text .. '}'))
        assert_refused(field, v, policy.for_continuation('{"isolation":' .. text .. '}'))
        assert_refused(field, v, policy.for_continuation({ isolation = cfg }))
        assert_refused(field, v, policy.badge(cfg))
        assert_refused(field, v, scheduler.task_isolation(cfg, { id = "t" }, function() end))
      end
    end
  end)

  it("policy: for_continuation and the badge cannot disagree (\\u0000deny)", function()
    -- the issue: decode_launch kept "\u0000deny", for_continuation gave
    -- network allow, and the badge said bwrap
    local text = '{"isolation":{"mode":"bwrap","network":"\\u0000deny"}}'
    assert.is_nil(policy.decode_launch(text))
    assert.is_nil(policy.for_continuation(text))
    assert.is_nil(policy.badge({ mode = "bwrap", network = "\0deny" }))
  end)

  it("policy: a launch configuration's profile_name and object keys", function()
    for _, v in ipairs(with_nul("default")) do
      assert_refused("profile_name", v, policy.decode_launch('{"profile_name":' .. json_string(v) .. '}'))
      assert_refused("profile_name", v, policy.encode_launch({ profile_name = v }))
    end
    for _, v in ipairs(with_nul("isolation")) do
      -- "isolation\u0000" must not pass as a field nobody reads while a
      -- reader that stops at the NUL takes it for isolation
      assert_refused("key", v, policy.decode_launch('{' .. json_string(v) .. ':{"mode":"bwrap"}}'))
      assert_refused("key", v, policy.json_encode({ [v] = 1 }))
    end
  end)
end)

describe("a NUL byte in isolate --config", function()
  local cli = require("support.cli")
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function json_string(s)
    return '"' .. s:gsub("%z", "\\u0000") .. '"'
  end

  -- The command would leave the canary if it ran; exit 2, the field named.
  local function refused(text, field)
    helpers.write(dir .. "/c.json", text)
    local code, out, err = cli.isolate({ "--config", dir .. "/c.json", "--", "touch", dir .. "/canary" },
      { cwd = dir, timeout = 30 })
    assert.equal(2, code, text .. ": " .. out .. err)
    assert.truthy(err:find(field, 1, true), text .. ": " .. err)
    assert.truthy(err:find("NUL", 1, true), text .. ": " .. err)
    assert.is_nil(helpers.read(dir .. "/canary"), text .. ": the command ran")
  end

  it("in mode (\\u0000bwrap ran the command with no sandbox) and network", function()
    for _, v in ipairs(with_nul_ends("bwrap")) do refused('{"mode":' .. json_string(v) .. '}', "mode") end
    for _, v in ipairs(with_nul_ends("")) do refused('{"mode":' .. json_string(v) .. '}', "mode") end
    for _, v in ipairs(with_nul_ends("deny")) do
      refused('{"mode":"bwrap","network":' .. json_string(v) .. '}', "network")
    end
  end)

  it("in docker_image, allow_hosts and a key", function()
    for _, v in ipairs(with_nul_ends("debian:bookworm-slim")) do
      refused('{"mode":"docker","network":"allow","docker_image":' .. json_string(v) .. '}', "docker_image")
    end
    for _, v in ipairs(with_nul_ends("example.com")) do
      refused('{"mode":"bwrap","network":"deny","allow_hosts":[' .. json_string(v) .. ']}', "allow_hosts[1]")
    end
    for _, v in ipairs(with_nul_ends("mode")) do refused('{' .. json_string(v) .. ':"bwrap"}', "key") end
  end)
end)

describe("a NUL byte in a session manager's launch request", function()
  local launchers = require("support.launchers")
  local c, root, mgr

  before_each(function()
    c = launchers.counting()
    root, mgr = c.root, c.mgr
  end)
  after_each(function() c:close() end)

  local function request()
    return {
      id = "s1", agent = "claude", workdir = root .. "/work", command = "echo hi",
      hook_url = "http://localhost:8080/hook", binds = { root .. "/work/cache" }, target = "local",
      profile_name = "default", isolation = { mode = "bwrap", network = "deny", allow_hosts = { "example.com" } },
    }
  end

  -- Nothing launched and nothing but the filter file in the runtime dir.
  local function refused(field, req, v)
    local s, err = mgr:launch(req)
    assert_refused(field, v, s, err, "launch " .. field)
    assert.equal(0, c.launched)
    local code, out = helpers.run("ls -A " .. helpers.shquote(root .. "/run"))
    assert.equal(0, code)
    assert.equal("sandbox-seccomp.bpf\n", out)
  end

  it("launches the base request (the property below is not vacuous)", function()
    assert.truthy(mgr:launch(request()))
    assert.equal(1, c.launched)
  end)

  local FIELDS = {
    { "id", { "id" } }, { "agent", { "agent" } }, { "workdir", { "workdir" } }, { "command", { "command" } },
    { "hook_url", { "hook_url" } }, { "binds[1]", { "binds", 1 } }, { "target", { "target" } },
    { "profile_name", { "profile_name" } }, { "mode", { "isolation", "mode" } },
    { "network", { "isolation", "network" } }, { "allow_hosts[1]", { "isolation", "allow_hosts", 1 } },
  }
  for _, case in ipairs(FIELDS) do
    local field, path = case[1], case[2]
    it("is refused at the start, middle and end of " .. field, function()
      local at = request()
      for _, p in ipairs(path) do at = at[p] end
      for _, v in ipairs(with_nul_ends(at)) do refused(field, with_value(request(), path, v), v) end
    end)
  end
end)
