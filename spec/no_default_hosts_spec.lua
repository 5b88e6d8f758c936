-- --no-default-hosts (isolate) and default_hosts = false (a session
-- manager's launch request): the allowlist is only what the user chose
-- (--allow-host, the config's allow_hosts), the hook's host and the agent's
-- model API hosts, without default_allow_hosts' package registries.
--
-- The registry tried is whatever default_allow_hosts gives for no agent
-- and no hook, taken at run time (no registry's name is written here), and
-- pinned to a loopback upstream with --resolve: no lookup, nothing leaves
-- loopback. Before: `unknown option --no-default-hosts`, and no way to
-- drop the registries but --network none.
local isolation = require("isolation")
local session = require("isolation.session")
local helpers = require("helpers")
local cli = require("support.cli")
local isolate_run = require("support.isolate_run")

-- The first registry of the defaults that is a plain name (npm's comes
-- from npm's configuration and may carry a port or a path-free URL host).
local function a_registry()
  for _, h in ipairs(assert(isolation.default_allow_hosts("", nil))) do
    if h:match("^[%w.-]+$") then return h end
  end
end

local function set(list)
  local t = {}
  for _, h in ipairs(list) do t[h] = true end
  return t
end

describe("isolate --no-default-hosts", function()
  local fx, tmp
  before_each(function()
    fx = isolate_run.new()
    tmp = fx.tmp
  end)
  after_each(function() fx:close() end)

  local function isolate(args) return fx:isolate(args) end

  -- the "proxy allowlist" lines of a dry run
  local function dry_allowlist(extra)
    local args = { "--dry-run", "--workdir", tmp }
    for _, a in ipairs(extra) do args[#args + 1] = a end
    args[#args + 1] = "--"
    args[#args + 1] = "true"
    local status, out, err = isolate(args)
    assert.are.equal(0, status, err)
    local list = {}
    local block = assert(out:match("\nproxy allowlist %([^\n]*\n(.-)\n\n"), out)
    for h in block:gmatch("  (%S+)") do list[#list + 1] = h end
    return list
  end

  it("leaves out every registry, keeps the agent's model hosts, the hook's host and --allow-host", function()
    local hook = "http://localhost:9110/hook/s1"
    local registries = set(assert(isolation.default_allow_hosts("", nil)))
    local full = assert(isolation.default_allow_hosts("claude", hook))
    local want = {}
    for _, h in ipairs(full) do
      if not registries[h] then want[#want + 1] = h end
    end
    want[#want + 1] = "only.example.com"
    local got = dry_allowlist({ "--no-default-hosts", "--agent", "claude", "--hook-url", hook,
      "--allow-host", "only.example.com" })
    assert.are.same(want, got)
    for _, h in ipairs(got) do assert.is_nil(registries[h], h) end
    assert.truthy(set(got)["localhost:9110"])
    -- without it, the registries are there (the control)
    local with = set(dry_allowlist({ "--agent", "claude", "--hook-url", hook }))
    for h in pairs(registries) do assert.truthy(with[h], h) end
  end)

  it("a registry the defaults admit gets 403 under it; --allow-host still admits it", function()
    if helpers.skip_without_bwrap() then return end
    local registry = assert(a_registry(), "default_allow_hosts has no plain name")
    local up = fx:upstream()
    local url = "http://" .. registry .. ":" .. up.port .. "/"
    local function run(extra)
      -- pinned to the upstream's loopback address: --allow-private lets an
      -- admitted name go there
      local args = { "--workdir", tmp, "--resolve", registry .. ":127.0.0.1", "--allow-private" }
      for _, a in ipairs(extra) do args[#args + 1] = a end
      for _, a in ipairs({ "--", "curl", "-s", "--max-time", "20", "-o", "/dev/null", "-w", "%{http_code}\n", url }) do
        args[#args + 1] = a
      end
      return isolate(args)
    end
    local status, out, err = run({})
    assert.are.equal(0, status, err)
    assert.are.equal("200\n", out, "the defaults admit it")
    status, out, err = run({ "--no-default-hosts" })
    assert.are.equal(0, status, err)
    assert.are.equal("403\n", out, err)
    assert.truthy(err:find("not on the allowlist (admit one with --allow-host HOST):\nisolate:   " .. registry .. ":"
      .. up.port .. " (1)\n", 1, true), err)
    status, out, err = run({ "--no-default-hosts", "--allow-host", registry })
    assert.are.equal(0, status, err)
    assert.are.equal("200\n", out, err)
    assert.are.equal(2, #up.requests())
  end)

  it("needs the proxy (network deny), like --allow-host", function()
    local status, _, err = isolate({ "--network", "allow", "--no-default-hosts", "--", "true" })
    assert.are.equal(2, status)
    assert.are.equal("isolate: --no-default-hosts has no effect here: only --network deny runs the proxy\n", err)
  end)
end)

describe("a launch request's default_hosts = false", function()
  local dir, mgr, up
  before_each(function()
    dir = helpers.tmpdir()
    assert(require("luv").fs_mkdir(dir .. "/work", tonumber("700", 8)))
    mgr = assert(session.manager({ runtime_dir = dir .. "/run", launcher = function() return {} end }))
    up = cli.upstream()
  end)
  after_each(function()
    mgr:close()
    up.stop()
    helpers.rmtree(dir)
  end)

  local function launch(id, default_hosts)
    return mgr:launch({ id = id, agent = "claude", workdir = dir .. "/work", command = "true", bridge = "builtin",
      isolation = { mode = "bwrap", network = "deny", allow_hosts = { "127.0.0.1:" .. up.port } },
      default_hosts = default_hosts })
  end

  it("refuses a registry of the defaults (403, no lookup); the config's allow_hosts still admits", function()
    local registry = assert(a_registry(), "default_allow_hosts has no plain name")
    local s = assert(launch("s1", false))
    local reply = cli.unix_request(s.proxy_socket, "CONNECT " .. registry .. ":443 HTTP/1.1\r\nHost: " .. registry
      .. ":443\r\n\r\n")
    assert.truthy(reply:find("^HTTP/1.1 403"), reply)
    reply = cli.unix_request(s.proxy_socket, "GET http://127.0.0.1:" .. up.port .. "/ok HTTP/1.1\r\nHost: 127.0.0.1:"
      .. up.port .. "\r\nConnection: close\r\n\r\n")
    assert.truthy(reply:find("^HTTP/1.1 200"), reply)
    assert.are.same({ "GET /ok HTTP/1.1" }, up.requests())
    local st = s.proxy:stats()
    assert.are.equal(1, st.denied)
    assert.are.equal(1, st.allowed)
  end)

  it("takes true or false only, naming the field", function()
    for _, v in ipairs({ "false", 0, "no" }) do
      local s, err = launch("bad", v)
      assert.is_nil(s)
      assert.truthy(err:find("default_hosts must be true or false", 1, true), err)
    end
    assert.truthy(launch("ok", true))
  end)
end)
