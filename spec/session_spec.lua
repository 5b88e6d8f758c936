local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local tty = require("support.tty")
local upstream = require("support.upstream")
local isolation = require("isolation")
local policy = require("isolation.policy")
local session = require("isolation.session")

local shq = helpers.shquote

local function mode_of(path)
  local st = uv.fs_lstat(path)
  return st and (math.tointeger(st.mode) or 0) & 511
end

local exists = helpers.exists

local function project_with(default)
  local p = { id = "p" }
  assert(policy.patch_project(p, { isolation = default }))
  return p
end

-- A manager in a fresh temporary directory whose launcher starts real child
-- processes (the wrap() line itself where bwrap runs, else `command` bare)
-- and records what the manager asked of it.
local function fixture(opts)
  local f = { root = helpers.tmpdir(), launches = 0, stops = 0, ended = {} }
  f.dir = f.root .. "/run/sessions"
  f.work = f.root .. "/work"
  assert(uv.fs_mkdir(f.work, 448))
  local o = {
    runtime_dir = f.dir,
    launcher = function(cmdline, s)
      f.launches = f.launches + 1
      f.cmdline = cmdline
      f.at_launch = { socket = s.proxy_socket and uv.fs_lstat(s.proxy_socket) }
      local line = cmdline
      if f.bare and (f.force_bare or not helpers.bwrap_works()) then line = f.bare end
      return glue.start(line, f.root .. "/launch-" .. f.launches .. ".log")
    end,
    alive = function(h) return glue.alive(h) end,
    stop = function(h)
      f.stops = f.stops + 1
      glue.stop(h)
    end,
    on_end = function(s, why) f.ended[#f.ended + 1] = s.id .. ":" .. why end,
  }
  for k, v in pairs(opts or {}) do o[k] = v end
  f.mgr = assert(session.manager(o))
  return f
end

local function cleanup(f)
  if f.mgr then f.mgr:close() end
  if f.up then f.up:stop() end
  helpers.rmtree(f.root)
end

-- Sends one GET through a session proxy's socket; returns the status or nil, err.
local function get_via(path, url)
  local status, err, done
  glue.get_via(path, url, function(s, e)
    status, err, done = s, e, true
  end)
  glue.run_until(function() return done end, 20)
  return status, err
end

-- One proxy kept open while a block counts fds: the module's proxy thread
-- (and its loop's fds) then lives across the block's tests instead of
-- starting with the first proxy of a test and ending after its last.
local pin
local function pin_proxy_thread()
  if pin then return end
  pin = assert(isolation.proxy({ allow = {}, listen = "127.0.0.1:0" }))
  -- One request through a unix-socket proxy first: libuv opens a reserve fd
  -- for each loop once, lazily, and it must not count as a leak later.
  local dir = helpers.tmpdir()
  local up = upstream.start()
  local p = assert(isolation.proxy({ allow = { "127.0.0.1:" .. up.http_port }, unix = dir .. "/warm.sock" }))
  local done
  glue.get_via(dir .. "/warm.sock", "http://127.0.0.1:" .. up.http_port .. "/small", function() done = true end)
  glue.run_until(function() return done end, 20)
  p:close()
  up:stop()
  helpers.rmtree(dir)
end
local function unpin_proxy_thread()
  if pin then pin:close() end
  pin = nil
end

-- The fd count comes back to `fds` (connections end on the proxy's thread).
-- A socat process listening on dir/name (a unix socket), started in the
-- background; `fork` keeps it serving after its first client.
local function socat_listener(dir, name, fork)
  return glue.start("exec socat UNIX-LISTEN:" .. shq(dir .. "/" .. name) .. (fork and ",fork" or "") .. " /dev/null")
end

local function assert_fds(fds)
  local ok = glue.wait(function() return helpers.fd_count() == fds end, 10)
  if not ok then -- say which, for the report
    local dir = "/proc/" .. helpers.pid() .. "/fd"
    local scan, list = uv.fs_scandir(dir), {}
    while true do
      local name = uv.fs_scandir_next(scan)
      if not name then break end
      list[#list + 1] = name .. " -> " .. tostring(uv.fs_readlink(dir .. "/" .. name))
    end
    assert.is_true(ok, "open fds: " .. helpers.fd_count() .. ", expected " .. fds .. ": " .. table.concat(list, ", "))
  end
end

describe("session.manager", function()
  local f
  after_each(function() if f then cleanup(f) end f = nil end)

  it("creates runtime_dir and its missing parents, 0700", function()
    f = fixture()
    assert.equal(448, mode_of(f.dir))
    assert.equal(448, mode_of(f.root .. "/run"))
    assert.equal(f.dir, f.mgr.runtime_dir)
  end)

  it("refuses an existing runtime_dir that others can open, and leaves it as it was", function()
    local root = helpers.tmpdir()
    local dir = root .. "/shared"
    assert(uv.fs_mkdir(dir, 493))
    uv.fs_chmod(dir, 493) -- 0755
    local mgr, err = session.manager({ runtime_dir = dir, launcher = function() end })
    assert.is_nil(mgr)
    assert.matches("mode 0755", err, 1, true)
    assert.matches("0700", err, 1, true)
    assert.equal(493, mode_of(dir))
    helpers.rmtree(root)
  end)

  it("refuses, at manager() time, a runtime_dir too long for a unix socket address", function()
    local root = helpers.tmpdir()
    local dir = root .. "/" .. string.rep("d", 100)
    local mgr, err = session.manager({ runtime_dir = dir, launcher = function() end })
    assert.is_nil(mgr)
    assert.matches("too long for a unix socket address", err, 1, true)
    assert.is_false(exists(dir))
    helpers.rmtree(root)
  end)

  it("refuses a relative runtime_dir and one with ..", function()
    local mgr, err = session.manager({ runtime_dir = "run/sessions", launcher = function() end })
    assert.is_nil(mgr)
    assert.matches("absolute", err)
    mgr, err = session.manager({ runtime_dir = "/tmp/../tmp/x", launcher = function() end })
    assert.is_nil(mgr)
    assert.matches("%.%.", err)
  end)

  it("raises for an unknown option, a wrong type, or alive without launcher", function()
    assert.has_error(function() session.manager({ runtime_dir = "/tmp/x", alive = function() end }) end)
    assert.has_error(function() session.manager({ runtime_dir = "/tmp/x", launcher = print, colour = 1 }) end)
    assert.has_error(function() session.manager({ runtime_dir = "/tmp/x", launcher = print, alive = true }) end)
  end)
end)

describe("session launch policy", function()
  local f
  setup(pin_proxy_thread)
  teardown(unpin_proxy_thread)
  after_each(function() if f then cleanup(f) end f = nil end)

  it("gives a fresh launch the project default", function()
    f = fixture()
    f.bare = "sleep 30"
    local s = assert(f.mgr:launch({ id = "s1", project = project_with({ mode = "bwrap" }), agent = "claude",
      workdir = f.work, command = "sleep 30" }))
    assert.same({ mode = "bwrap", network = "allow" }, s.launch_configuration.isolation)
    assert.equal("🔒 bwrap", s.badge)
    assert.equal("running", s.state)
    assert.is_nil(s.proxy_socket)
    -- bwrap, started with the clean environment, behind the closer of
    -- inherited descriptors (spec/escape_spec.lua)
    local closer, line = f.cmdline:match("^('bash' '%-c' '[^']*' 'isolation%-close%-fds' )(.*)$")
    assert.truthy(closer, f.cmdline)
    -- behind the reaper that ends the line only when its processes are gone
    -- (spec/session_end_spec.lua), which starts bwrap from an empty
    -- environment itself (--env -i)
    assert.matches("^'[^']*/isolation%-bridge' '%-%-reap' '5' '%-%-env' '%-%-' '%-i' 'HOME='\"%$HOME\" .* 'bwrap' ",
      helpers.line_body(line))
    assert.is_true(glue.alive(s.handle))
    assert.equal(s, f.mgr:get("s1"))
  end)

  it("lets an explicit opt-out win over a sandboxed default", function()
    f = fixture()
    local p = project_with({ mode = "bwrap", network = "deny" })
    local s = assert(f.mgr:launch({ id = "s1", project = p, isolation = { mode = "" }, agent = "claude",
      workdir = f.work, command = "sleep 30" }))
    assert.same({ mode = "", network = "allow" }, s.launch_configuration.isolation)
    assert.is_nil(s.badge)
    assert.is_nil(s.proxy_socket)
    assert.same({}, glue.sockets(f.dir))
    assert.equal("'bash' '-c' '--' 'sleep 30'", f.cmdline)
  end)

  it("uses the project default for an override that is JSON null", function()
    f = fixture()
    f.bare = "sleep 30"
    local s = assert(f.mgr:launch({ id = "s1", project = project_with({ mode = "bwrap" }),
      isolation = require("cjson").null, workdir = f.work, command = "sleep 30" }))
    assert.equal("🔒 bwrap", s.badge)
  end)

  it("keeps a continuation's captured isolation over a later default edit and over an override", function()
    f = fixture()
    f.bare = "sleep 30"
    local p = project_with({ mode = "bwrap" })
    local s = assert(f.mgr:launch({ id = "s1", project = p, profile_name = "fast", yolo = true,
      workdir = f.work, command = "sleep 30" }))
    local saved = assert(policy.encode_launch(s.launch_configuration))
    assert(f.mgr:kill("s1"))
    -- the saved launch configuration gains a field this module does not know
    saved = saved:gsub("^{", '{"handoff_from":"s0",')
    assert(policy.patch_project(p, { isolation = { mode = "docker" } }))
    local c = assert(f.mgr:launch({ id = "s1", project = p, isolation = { mode = "" }, continuation = saved,
      workdir = f.work, command = "sleep 30" }))
    assert.same({ mode = "bwrap", network = "allow" }, c.launch_configuration.isolation)
    assert.equal("🔒 bwrap", c.badge)
    assert.equal("fast", c.launch_configuration.profile_name)
    assert.is_true(c.launch_configuration.yolo)
    assert.equal("s0", c.launch_configuration.handoff_from)
    assert.equal(saved, policy.encode_launch(c.launch_configuration))
  end)

  it("refuses to launch an id that is running, and launches it again once it ended", function()
    f = fixture()
    local req = { id = "s1", workdir = f.work, command = "sleep 30" }
    assert(f.mgr:launch(req))
    local s, err = f.mgr:launch(req)
    assert.is_nil(s)
    assert.matches("already running", err)
    assert.equal(1, f.launches)
    assert(f.mgr:kill("s1"))
    assert(f.mgr:launch(req))
    assert.equal(2, f.launches)
    assert.equal(1, #f.mgr:sessions())
  end)

  it("refuses a deny launch on an ssh target before any proxy exists", function()
    f = fixture()
    local fds = helpers.fd_count()
    local p = project_with({ mode = "bwrap", network = "deny" })
    local s, err = f.mgr:launch({ id = "s1", project = p, target = "ssh", agent = "claude",
      workdir = f.work, command = "claude", hook_url = "http://127.0.0.1:9110/hook/s1" })
    assert.is_nil(s)
    assert.matches("local target", err)
    assert.equal(0, f.launches)
    assert.same({}, glue.sockets(f.dir))
    assert.is_nil(f.mgr:get("s1"))
    assert_fds(fds)
  end)

  it("refuses a bad override, hook URL or launch spec before anything starts", function()
    f = fixture()
    local p = project_with({ mode = "bwrap", network = "deny" })
    local bad = {
      { { isolation = { mode = "bwrap", network = "block" } }, "network" },
      { { hook_url = "not a url" }, "hook_url" },
      { { workdir = "relative/dir" }, "workdir" },
      { { command = "" }, "command" },
      { { target = "mars" }, "mars" },
    }
    for _, case in ipairs(bad) do
      local req = { id = "s1", project = p, agent = "claude", workdir = f.work, command = "claude" }
      for k, v in pairs(case[1]) do req[k] = v end
      local s, err = f.mgr:launch(req)
      assert.is_nil(s)
      assert.is_string(err)
      assert.matches(case[2], err, 1, true)
    end
    assert.equal(0, f.launches)
    assert.same({}, glue.sockets(f.dir))
  end)

  it("derives safe socket names from any id", function()
    f = fixture()
    local p = project_with({ mode = "bwrap", network = "deny" })
    local ids = { "s1", "../../escape", "a/b", "x y", "..", string.rep("L", 200), "ünï" }
    local seen = {}
    for _, id in ipairs(ids) do
      local s = assert(f.mgr:launch({ id = id, project = p, workdir = f.work, command = "sleep 30" }))
      local dirname, base = s.proxy_socket:match("^(.*)/([^/]+)$")
      assert.equal(f.dir, dirname)
      assert.is_nil(base:find("^%.%.?$"))
      assert.is_true(#s.proxy_socket <= 107)
      assert.is_nil(seen[s.proxy_socket])
      seen[s.proxy_socket] = true
      assert.equal("socket", uv.fs_lstat(s.proxy_socket).type)
    end
    assert.equal(f.dir .. "/s1.sock", f.mgr:get("s1").proxy_socket)
    assert.equal(#ids, #glue.sockets(f.dir))
    assert.is_false(exists(f.root .. "/escape.sock"))
    assert.is_false(exists(f.root .. "/run/escape.sock"))
  end)

  it("opens no proxy for docker with network none: --network none has no route to one", function()
    f = fixture()
    f.bare = "true"
    f.force_bare = true
    local s = assert(f.mgr:launch({ id = "d1", isolation = { mode = "docker", network = "none" }, agent = "codex",
      workdir = f.work, command = "codex", tty = false }))
    assert.equal("🔒 docker · no network", s.badge)
    assert.is_nil(s.proxy_socket)
    assert.same({}, glue.sockets(f.dir))
    assert.matches("'--network' 'none'", f.cmdline, 1, true)
  end)

  it("opens a proxy for docker with network deny, mounted for the built-in bridge", function()
    f = fixture()
    f.bare = "true"
    f.force_bare = true
    local s = assert(f.mgr:launch({ id = "d2", isolation = { mode = "docker", network = "deny" }, agent = "codex",
      workdir = f.work, command = "codex", tty = false, bridge_path = "/opt/isolation-bridge" }))
    assert.equal("🔒 docker · deny", s.badge)
    assert.is_string(s.proxy_socket)
    assert.matches("'--network' 'none'", f.cmdline, 1, true)
    assert.truthy(f.cmdline:find("'" .. s.proxy_socket .. ":/run/isolation/proxy.sock:ro'", 1, true), f.cmdline)
    assert.truthy(f.cmdline:find("'/opt/isolation-bridge:/run/isolation/bridge:ro'", 1, true), f.cmdline)
  end)

  it("ends the session even when stop fails, and says so", function()
    f = fixture({ stop = function() error("tmux: can't find session") end })
    local s = assert(f.mgr:launch({ id = "s1", isolation = { mode = "bwrap", network = "deny" },
      workdir = f.work, command = "sleep 30" }))
    local ok, err = f.mgr:kill("s1")
    assert.is_nil(ok)
    assert.matches("can't find session", err, 1, true)
    assert.equal("ended", s.state)
    assert.is_false(exists(s.proxy_socket))
    glue.stop(s.handle)
  end)

  it("leaves a session running when its alive probe raises, and logs one line", function()
    local lines = {}
    f = fixture({ alive = function() error("probe broke") end, log = function(l) lines[#lines + 1] = l end })
    local s = assert(f.mgr:launch({ id = "s1", workdir = f.work, command = "sleep 30" }))
    assert.equal(0, f.mgr:poll())
    assert.equal("running", s.state)
    assert.equal(1, #lines)
    assert.matches('alive probe for session "s1" failed: .*probe broke', lines[1])
  end)

  it("returns nil, err for kill or archive of an unknown id", function()
    f = fixture()
    local ok, err = f.mgr:kill("nope")
    assert.is_nil(ok)
    assert.matches("no session", err)
    ok, err = f.mgr:archive("nope")
    assert.is_nil(ok)
    assert.matches("no session", err)
  end)
end)

describe("session proxies", function()
  local f
  setup(pin_proxy_thread)
  teardown(unpin_proxy_thread)
  after_each(function() if f then cleanup(f) end f = nil end)

  -- A deny launch whose proxy admits the test upstream by an IP pattern.
  local function deny_launch(id, command, extra)
    f.up = f.up or upstream.start()
    f.bare = command
    local allow = "127.0.0.1:" .. f.up.http_port
    local req = { id = id, project = project_with({ mode = "bwrap", network = "deny", allow_hosts = { allow } }),
      agent = "claude", workdir = f.work, command = command, hook_url = "http://127.0.0.1:9110/hook/" }
    for k, v in pairs(extra or {}) do req[k] = v end
    return f.mgr:launch(req)
  end

  local function upstream_url(path)
    return "http://127.0.0.1:" .. f.up.http_port .. (path or "/small")
  end

  it("starts the session's own proxy: a request from the sandbox goes through it; kill tears it down", function()
    if helpers.skip_without_bwrap() then return end
    f = fixture()
    local fds = helpers.fd_count()
    local out = f.work .. "/out"
    f.up = upstream.start()
    local url = upstream_url("/small")
    local command = table.concat({
      "curl -s -o /dev/null -w '%{http_code}' " .. shq(url) .. " > out.allowed",
      "curl -s -o /dev/null -w '%{http_code}' http://denied.example.net/ > out.denied",
      "curl -s --noproxy '*' -m 5 -o /dev/null -w '%{http_code}' " .. shq(url) .. " > out.direct",
      "echo done > out",
      "sleep 60",
    }, "; ")
    local s = assert(deny_launch("s1", command))
    assert.equal("🔒 bwrap · deny", s.badge)
    assert.equal(f.dir .. "/s1.sock", s.proxy_socket)
    assert.equal("socket", f.at_launch.socket.type) -- the proxy existed before the launcher ran
    assert.equal(384, mode_of(s.proxy_socket))        -- 0600
    assert.matches(shq(s.proxy_socket), f.cmdline, 1, true)
    assert.is_true(glue.wait(function() return exists(out) end, 30), "the sandboxed command did not finish: "
      .. tostring(helpers.read(f.root .. "/launch-1.log")))
    assert.equal("200", helpers.read(f.work .. "/out.allowed"))
    assert.equal("403", helpers.read(f.work .. "/out.denied"))
    assert.equal("000", helpers.read(f.work .. "/out.direct")) -- no route but the proxy
    assert.is_true(f.up:wait(function(st) return st.requests >= 1 end, 5))
    assert.equal(1, f.up:stats().requests)
    local st = s.proxy:stats()
    assert.equal(1, st.allowed)
    assert.equal(1, st.denied)

    assert.is_true(f.mgr:kill("s1"))
    assert.equal(1, f.stops)
    assert.equal("ended", s.state)
    assert.is_nil(s.proxy)
    assert.is_false(exists(s.proxy_socket))
    assert.is_false(glue.alive(s.handle))
    assert.same({ "s1:killed" }, f.ended)
    f.up:stop()
    assert_fds(fds)
  end)

  for _, bridge in ipairs({ "pass (the default)", "socat" }) do
    it("bridge " .. bridge .. ": the sandbox reaches only its proxy; its end frees what it held", function()
      if helpers.skip_without_bwrap() then return end
      f = fixture()
      local fds = helpers.fd_count()
      f.up = upstream.start()
      local command = "curl -s -o /dev/null -w '%{http_code}' " .. shq(upstream_url("/small")) .. " > out.allowed; "
        .. "curl -s --noproxy '*' -m 5 -o /dev/null -w '%{http_code}' " .. shq(upstream_url("/small"))
        .. " > out.direct; echo done > out"
      local extra = bridge == "socat" and { bridge = "socat" } or nil
      local s = assert(deny_launch("s1", command, extra))
      if bridge == "socat" then
        assert.is_nil(f.cmdline:find("--pass", 1, true), f.cmdline)
      else
        -- bwrap execs the starter itself (the line's folds taken out)
        assert.truthy(f.cmdline:gsub("'\\\n'", ""):find("'--pass'", 1, true), f.cmdline)
      end
      assert.is_true(glue.wait(function() return exists(f.work .. "/out") end, 30), "the sandboxed command did not "
        .. "finish: " .. tostring(helpers.read(f.root .. "/launch-1.log")))
      assert.equal("200", helpers.read(f.work .. "/out.allowed"))
      assert.equal("000", helpers.read(f.work .. "/out.direct"))
      -- the sandbox has ended: the proxy holds no connection (nor listener) of it
      assert.is_true(glue.wait(function() return s.proxy:stats().active == 0 end, 10),
        "active: " .. s.proxy:stats().active)
      assert.is_true(glue.wait(function() f.mgr:poll() return s.state == "ended" end, 10))
      f.up:stop()
      assert_fds(fds)
    end)
  end

  -- Launches a deny session whose process lives `secs` seconds, checks that
  -- its proxy answers, and returns it.
  local function serving_session(id, secs)
    local s = assert(deny_launch(id, "sleep " .. secs))
    assert.equal("socket", uv.fs_lstat(s.proxy_socket).type)
    assert.equal(200, get_via(s.proxy_socket, upstream_url()))
    return s
  end

  local function assert_torn_down(s, fds)
    assert.equal("ended", s.state)
    assert.is_nil(s.proxy)
    assert.is_false(exists(s.proxy_socket))
    local status = get_via(s.proxy_socket, upstream_url())
    assert.is_nil(status)
    if fds then assert_fds(fds) end
  end

  it("admits the hook's host:port without allow_hosts, and nothing else on loopback", function()
    f = fixture()
    f.up = upstream.start()
    f.bare = "sleep 60"
    local hook = "http://127.0.0.1:" .. f.up.http_port .. "/hook/s1"
    local s = assert(f.mgr:launch({ id = "s1", isolation = { mode = "bwrap", network = "deny" }, agent = "claude",
      workdir = f.work, command = "sleep 60", hook_url = hook }))
    assert.equal(200, get_via(s.proxy_socket, upstream_url("/small")))
    assert.equal(403, get_via(s.proxy_socket, "http://127.0.0.1:" .. f.up.raw_port .. "/"))
    assert.equal(403, get_via(s.proxy_socket, "http://other.example.net/"))
    local st = s.proxy:stats()
    assert.equal(1, st.allowed)
    assert.equal(2, st.denied)
  end)

  it("archive stops the process and tears the proxy down", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    local s = serving_session("s1", 60)
    assert.is_true(f.mgr:archive("s1"))
    assert.is_true(s.archived)
    assert.equal(1, f.stops)
    assert.is_false(glue.alive(s.handle))
    assert.same({ "s1:archived" }, f.ended)
    assert_torn_down(s, fds)
    assert.equal(s, f.mgr:get("s1"))
  end)

  it("poll ends a session whose process died, and only that one", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    local short = serving_session("short", 1)
    local long = serving_session("long", 60)
    assert.equal(0, f.mgr:poll())
    assert.is_true(glue.wait(function() return not glue.alive(short.handle) end, 20))
    assert.equal(1, f.mgr:poll())
    assert.equal(0, f.mgr:poll())
    assert.equal("running", long.state)
    assert.equal(0, f.stops)
    assert.same({ "short:exited" }, f.ended)
    assert_torn_down(short)
    assert.equal(200, get_via(long.proxy_socket, upstream_url()))
    assert(f.mgr:kill("long"))
    assert_torn_down(long, fds)
  end)

  it("a launcher that fails tears the proxy down and returns nil, err", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    local seen
    f.mgr = assert(session.manager({ runtime_dir = f.dir, launcher = function(_, s)
      seen = s.proxy_socket and uv.fs_lstat(s.proxy_socket)
      return nil, "tmux: no server running"
    end }))
    local s, err = deny_launch("s1", "sleep 60")
    assert.is_nil(s)
    assert.matches("tmux: no server running", err, 1, true)
    assert.equal("socket", seen.type)
    assert.same({}, glue.sockets(f.dir))
    assert.is_nil(f.mgr:get("s1"))
    assert_fds(fds)
  end)

  it("a launcher that raises tears the proxy down and returns nil, err", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    f.mgr = assert(session.manager({ runtime_dir = f.dir, launcher = function() error("exploded") end }))
    local s, err = deny_launch("s1", "sleep 60")
    assert.is_nil(s)
    assert.matches("exploded", err, 1, true)
    assert.same({}, glue.sockets(f.dir))
    assert_fds(fds)
  end)

  it("close ends every session; each tears down exactly once", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    local a, b = serving_session("a", 60), serving_session("b", 60)
    assert(f.mgr:kill("a"))
    assert.is_true(f.mgr:close())
    assert.is_true(f.mgr:close())
    assert.is_true(f.mgr:kill("a"))
    assert.is_true(f.mgr:archive("b"))
    assert.same({ "a:killed", "b:closed" }, f.ended)
    assert.equal(2, f.stops)
    assert_torn_down(a)
    assert_torn_down(b, fds)
    local s, err = deny_launch("c", "sleep 60")
    assert.is_nil(s)
    assert.matches("closed", err)
  end)

  it("polls on luv's loop, the session proxies serving meanwhile", function()
    f = fixture({ loop = uv, poll_interval = 0.1 })
    f.up = upstream.start()
    local s = assert(deny_launch("s1", "sleep 1"))
    assert.equal(200, get_via(s.proxy_socket, upstream_url()))
    assert.is_true(glue.run_until(function() return s.state == "ended" end, 30))
    assert.same({ "s1:exited" }, f.ended)
    assert.is_false(exists(s.proxy_socket))
  end)

  it("serves a sandboxed request while the orchestrator runs luv's loop", function()
    if helpers.skip_without_bwrap() then return end
    f = fixture({ loop = uv, poll_interval = 0.1 })
    f.up = upstream.start()
    local s = assert(deny_launch("s1", "curl -s -o /dev/null -w '%{http_code}' " .. shq(upstream_url())
      .. " > out.tmp; mv out.tmp out"))
    local out = f.work .. "/out"
    assert.is_true(glue.run_until(function() return exists(out) end, 30),
      tostring(helpers.read(f.root .. "/launch-1.log")))
    assert.equal("200", helpers.read(out))
    assert.is_true(glue.run_until(function() return s.state == "ended" end, 30))
    assert.is_false(exists(s.proxy_socket))
  end)

  it("runs 200 deny sessions at once, each proxy answering, and leaves nothing behind", function()
    f = fixture()
    f.up = upstream.start()
    local fds = helpers.fd_count()
    local p = project_with({ mode = "bwrap", network = "deny", allow_hosts = { "127.0.0.1:" .. f.up.http_port } })
    local N = 200
    -- 200 sandboxes at once would be a load test of bwrap on a shared
    -- machine; each launch runs a real `sleep` instead, and the test talks
    -- to every session proxy straight through its socket.
    f.force_bare = true
    local list = {}
    for i = 1, N do
      f.bare = "sleep 120"
      list[i] = assert(f.mgr:launch({ id = "bulk-" .. i, project = p, workdir = f.work, command = "sleep 120",
        hook_url = "http://127.0.0.1:9110/hook/" }))
    end
    assert.equal(N, #glue.sockets(f.dir))
    -- every proxy answers, in batches of 50 at once
    local ok = 0
    for first = 1, N, 50 do
      local pending = 0
      for i = first, math.min(N, first + 49) do
        pending = pending + 1
        glue.get_via(list[i].proxy_socket, upstream_url(), function(status)
          pending = pending - 1
          if status == 200 then ok = ok + 1 end
        end)
      end
      glue.run_until(function() return pending == 0 end, 60)
    end
    assert.equal(N, ok)
    for i = 1, N do assert.equal(1, list[i].proxy:stats().allowed) end
    assert.is_true(f.mgr:close())
    assert.equal(N, f.stops)
    assert.equal(N, #f.ended)
    assert.same({}, glue.sockets(f.dir))
    for i = 1, N do assert.is_false(glue.alive(list[i].handle)) end
    assert_fds(fds)
  end)
end)

describe("session TTY seccomp filter", function()
  local f
  setup(pin_proxy_thread)
  teardown(unpin_proxy_thread)
  after_each(function() if f then cleanup(f) end f = nil end)

  local function inode(path)
    local st = uv.fs_lstat(path)
    return st and st.ino
  end

  -- A manager whose launcher runs the line at a real terminal, as a tmux
  -- pane would, and waits for the probe's answers (s.handle.answers).
  local function pty_fixture()
    local fx = fixture({
      launcher = function(cmdline)
        local a, all = tty.at_terminal("exec " .. cmdline, f.work)
        return { answers = a, all = all }
      end,
      alive = function() return false end,
      stop = function() end,
    })
    tty.write_probe(fx.work)
    return fx
  end

  local function probe_launch(mgr, id, network)
    f.up = f.up or upstream.start()
    return assert(mgr:launch({ id = id, isolation = { mode = "bwrap", network = network }, workdir = f.work,
      command = "bash probe.sh " .. tty.probe_args(), hook_url = "http://127.0.0.1:" .. f.up.http_port .. "/hook" }))
  end

  -- The file a line's last word opens: " 3<'<path>'".
  local function line_filter(cmdline)
    return (cmdline:gsub("'\\\n'", "")):match(" 3<'([^']*)'$")
  end

  local function session_file_pattern(dir, base, name)
    return "^" .. dir:gsub("%p", "%%%0") .. "/" .. base:gsub("%p", "%%%0") .. "%." .. math.tointeger(uv.os_getpid())
      .. "%-%x+%." .. name:gsub("%p", "%%%0") .. "$"
  end

  it("keeps the filter in runtime_dir, 0600; each local bwrap launch's line opens a copy of its own, removed at the"
    .. " end", function()
    f = fixture()
    local path = f.dir .. "/sandbox-seccomp.bpf"
    assert.equal(path, f.mgr.seccomp_file)
    assert.equal("file", uv.fs_lstat(path).type)
    assert.equal(384, mode_of(path))
    assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(path))
    f.bare = "sleep 30"
    local seen = {}
    for _, target in ipairs({ "local", { kind = "local" } }) do
      for _, network in ipairs({ "allow", "deny" }) do
        local s = assert(f.mgr:launch({ id = "s-" .. network, isolation = { mode = "bwrap", network = network },
          target = target, workdir = f.work, command = "sleep 30" }))
        -- bwrap's option (before its "--"; deny's pass starter then sets no
        -- more options of its own: the proxy variables are bwrap's --setenv)
        local line = f.cmdline:gsub("'\\\n'", "")
        assert.truthy(line:find(network == "allow" and " '--seccomp' '3' '--' 'bash' '-c' "
          or " '--seccomp' '3' '--setenv' ", 1, true), f.cmdline)
        local own = line_filter(f.cmdline)
        assert.matches(session_file_pattern(f.dir, "s-" .. network, "sandbox-seccomp.bpf"), own)
        assert.is_nil(seen[own], "a file of its own per launch")
        seen[own] = true
        assert.equal(own, s.seccomp_file)
        assert.equal("file", uv.fs_lstat(own).type)
        assert.equal(384, mode_of(own))
        assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(own))
        assert.equal(s.cmdline, f.cmdline)
        assert(f.mgr:kill(s.id))
        assert.is_false(exists(own), "removed when the session ends")
      end
    end
    assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(path))
  end)

  it("seccomp = \"tty\" gives the narrower filter in its own file; another value is refused before anything starts",
    function()
    f = fixture()
    f.bare = "sleep 30"
    local s = assert(f.mgr:launch({ id = "t", isolation = { mode = "bwrap" }, workdir = f.work,
      command = "sleep 30", seccomp = "tty" }))
    local tty_path = line_filter(f.cmdline)
    assert.matches(session_file_pattern(f.dir, "t", "tty-seccomp.bpf"), tty_path)
    assert.equal(isolation.tty_seccomp_filter(), helpers.read(tty_path))
    assert.equal(384, mode_of(tty_path))
    assert(f.mgr:kill(s.id))
    assert.is_false(exists(tty_path))
    -- the default's file is still the default's
    assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(f.mgr.seccomp_file))
    for _, v in ipairs({ "sandbox", require("cjson").null }) do
      s = assert(f.mgr:launch({ id = "d", isolation = { mode = "bwrap" }, workdir = f.work, command = "sleep 30",
        seccomp = v }))
      assert.matches(session_file_pattern(f.dir, "d", "sandbox-seccomp.bpf"), line_filter(f.cmdline))
      assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(line_filter(f.cmdline)))
      assert(f.mgr:kill(s.id))
    end
    local launches = f.launches
    for _, bad in ipairs({ "none", "TTY", 1, true, {} }) do
      local r, err = f.mgr:launch({ id = "b", isolation = { mode = "bwrap", network = "deny" }, workdir = f.work,
        command = "sleep 30", seccomp = bad })
      assert.is_nil(r)
      assert.matches('^isolation: seccomp must be "sandbox" %(the default%) or "tty" %(got ', err)
      assert.equal(launches, f.launches)
      assert.same({}, glue.sockets(f.dir))
    end
  end)

  it("a launch at a real terminal cannot type into it (allow and deny); without the filter it could", function()
    if helpers.skip_without_bwrap() or not tty.have_script() then return end
    f = pty_fixture()
    for _, network in ipairs({ "allow", "deny" }) do
      local s = probe_launch(f.mgr, "p-" .. network, network)
      tty.assert_refused(s.handle.answers, s.handle.all)
      assert.equal(1, f.mgr:poll())
    end
    -- control: the same session's line without its last word, the redirection,
    -- and without --seccomp: the terminal takes the keystroke
    local s = f.mgr:get("p-allow")
    -- (joined first: a root launch's masks make a long line, continued with backslash-newline)
    local line = s.cmdline:gsub("'\\\n'", ""):gsub(" 3<'[^']*'$", ""):gsub(" '%-%-seccomp' '3'", "")
    assert.is_nil(line:find("seccomp", 1, true))
    local a, all = tty.at_terminal("exec " .. line, f.work)
    assert.equal("ok", a.DONE, all)
    if a.STI == "INJECTED" then
      assert.are_not.equal(tty.EPERM, a.LINUX, all)
    else
      io.stderr:write("SKIP (control): this kernel refuses TIOCSTI by itself (" .. tostring(a.STI) .. ")\n")
    end
  end)

  it("recover and close leave the shared file; a second manager on the same directory keeps it and works",
    function()
    if helpers.skip_without_bwrap() or not tty.have_script() then return end
    f = pty_fixture()
    local path = f.mgr.seccomp_file
    local ino = inode(path)
    assert.equal(0, session.recover(f.dir))
    assert.equal(ino, inode(path))
    assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(path))
    local s = probe_launch(f.mgr, "one", "allow")
    tty.assert_refused(s.handle.answers, s.handle.all)
    assert.is_true(f.mgr:close())
    assert.equal(ino, inode(path))
    -- a second manager: recover runs again, the file is the same file
    local first = f.mgr
    f.mgr = assert(session.manager({ runtime_dir = f.dir, launcher = first._launcher, alive = first._alive }))
    assert.equal(path, f.mgr.seccomp_file)
    assert.equal(ino, inode(path))
    s = probe_launch(f.mgr, "two", "allow")
    tty.assert_refused(s.handle.answers, s.handle.all)
    assert.equal(ino, inode(path))
    assert.equal(384, mode_of(path))
    assert.is_true(f.mgr:close())
    -- nothing else was left in the directory: no temporary file, no session copy
    local code, listing = helpers.run("ls -A " .. shq(f.dir))
    assert.equal(0, code)
    assert.equal("sandbox-seccomp.bpf\n", listing)
  end)

  it("a shared file that is wrong (content, mode, a symlink, an allow-all program) or gone changes nothing a launch"
    .. " loads; the next manager replaces it in one rename", function()
    f = fixture()
    f.bare = "sleep 30"
    local path = f.mgr.seccomp_file
    local prog = isolation.sandbox_seccomp_filter()
    local breakers = {
      function() helpers.write(path, prog:sub(1, 8)) end,            -- half a program
      function() helpers.write(path, ("\0"):rep(#prog)) end,         -- same size, other bytes
      function() uv.fs_chmod(path, 420) end,                          -- 0644
      function() uv.fs_unlink(path) end,                              -- gone
      function()                                                      -- a symlink to a right-looking file
        helpers.write(f.root .. "/elsewhere.bpf", prog)
        uv.fs_chmod(f.root .. "/elsewhere.bpf", 384)
        uv.fs_unlink(path)
        assert(uv.fs_symlink(f.root .. "/elsewhere.bpf", path))
      end,
      function()                                                      -- renamed over: allow everything
        helpers.write(path .. ".new", "\6\0\0\0\0\0\255\127")
        assert(uv.fs_rename(path .. ".new", path))
      end,
    }
    for i, breaker in ipairs(breakers) do
      breaker()
      local s = assert(f.mgr:launch({ id = "r", isolation = { mode = "bwrap" }, workdir = f.work,
        command = "sleep 30" }))
      local own = line_filter(f.cmdline)
      assert.equal(own, s.seccomp_file)
      assert.are_not.equal(path, own, "case " .. i)
      assert.equal(prog, helpers.read(own), "case " .. i)
      assert(f.mgr:kill("r"))
      local m = assert(session.manager({ runtime_dir = f.dir, launcher = function() end }))
      assert.equal("file", uv.fs_lstat(path).type, "case " .. i)
      assert.equal(384, mode_of(path), "case " .. i)
      assert.equal(prog, helpers.read(path), "case " .. i)
      m:close()
    end
    assert.equal(prog, helpers.read(f.root .. "/elsewhere.bpf")) -- the symlink's target untouched
    local code, listing = helpers.run("ls -A " .. shq(f.dir))
    assert.equal(0, code)
    assert.equal("sandbox-seccomp.bpf\n", listing)
  end)

  it("a session's filter file that cannot be made fails the launch before anything starts", function()
    f = fixture()
    local fds = helpers.fd_count()
    -- the random part made predictable, and a directory put at that name
    local random = uv.random
    uv.random = function(n) return ("\171"):rep(n) end
    local name = f.dir .. "/s1." .. math.tointeger(uv.os_getpid()) .. "-" .. ("ab"):rep(6) .. ".sandbox-seccomp.bpf"
    assert(uv.fs_mkdir(name, 448))
    local ok, s, err = pcall(f.mgr.launch, f.mgr, { id = "s1", isolation = { mode = "bwrap", network = "deny" },
      workdir = f.work, command = "sleep 30" })
    uv.random = random
    assert(ok, s)
    assert.is_nil(s)
    assert.matches("cannot write the sandbox seccomp filter", err, 1, true)
    assert.equal(0, f.launches)
    assert.is_nil(f.mgr:get("s1"))
    assert.same({}, glue.sockets(f.dir))
    assert_fds(fds)
    assert(uv.fs_rmdir(name))
    f.bare = "sleep 30"
    s = assert(f.mgr:launch({ id = "s1", isolation = { mode = "bwrap" }, workdir = f.work, command = "sleep 30" }))
    assert.equal(isolation.sandbox_seccomp_filter(), helpers.read(s.seccomp_file))
  end)

  it("recover removes the session copies of a manager that is gone, and keeps a live one's", function()
    f = fixture()
    local prog = isolation.sandbox_seccomp_filter()
    -- a pid that is gone: a child that exited
    local _, out = helpers.run("sh -c 'echo $$'")
    local dead = f.dir .. "/x." .. tonumber(out) .. "-0123456789ab.sandbox-seccomp.bpf"
    local live = f.dir .. "/y.1-0123456789ab.tty-seccomp.bpf" -- pid 1 is always there
    local other = f.dir .. "/notes.txt"
    for _, p in ipairs({ dead, live, other }) do helpers.write(p, prog) end
    session.recover(f.dir)
    assert.is_false(exists(dead))
    assert.is_true(exists(live))
    assert.is_true(exists(other))
  end)

  it("leaves it out where the line does not run here (ssh), and for docker and mode \"\"", function()
    f = fixture()
    f.bare = "true"
    f.force_bare = true
    local cases = {
      { "ssh", { mode = "bwrap", network = "allow" } },
      { { kind = "ssh", host = "agent.example.com" }, { mode = "bwrap", network = "allow" } },
      { "local", { mode = "docker", network = "allow" } },
      { "ssh", { mode = "docker", network = "allow" } },
      { "local", { mode = "" } },
      { "pct", { mode = "" } },
    }
    for i, case in ipairs(cases) do
      local s = assert(f.mgr:launch({ id = "n" .. i, isolation = case[2], target = case[1], workdir = f.work,
        command = "true", tty = false }))
      assert.is_nil(f.cmdline:find("seccomp", 1, true), f.cmdline)
      assert.is_nil(f.cmdline:find("-seccomp.bpf", 1, true), f.cmdline)
      assert.is_nil(f.cmdline:find(" %d<'"), f.cmdline)
      assert(f.mgr:kill(s.id))
    end
  end)
end)

describe("session.recover", function()
  it("removes the dead sockets of a manager killed with SIGKILL and leaves live ones and other files", function()
    local root = helpers.tmpdir()
    local dir = root .. "/run"
    local work = root .. "/work"
    assert(uv.fs_mkdir(work, 448))
    -- The manager runs in a child lua5.4 with two deny sessions, then is killed.
    local script = [[
      package.path = "lua/?.lua;spec/?.lua;" .. package.path
      package.cpath = "build/?.so;" .. package.cpath
      local uv = require("luv")
      local session = require("isolation.session")
      local glue = require("support.glue")
      local dir, work = arg[1], arg[2]
      local mgr = assert(session.manager({ runtime_dir = dir, launcher = function()
        return glue.start("sleep 300")
      end }))
      local pids = {}
      for _, id in ipairs({ "k1", "k2" }) do
        local s = assert(mgr:launch({ id = id, workdir = work, command = "sleep 300",
          isolation = { mode = "bwrap", network = "deny" } }))
        pids[#pids + 1] = s.handle.pid
      end
      io.write("ready ", math.tointeger(uv.os_getpid()), " ", table.concat(pids, " "), "\n")
      io.stdout:flush()
      uv.sleep(300000)
    ]]
    helpers.write(root .. "/manager.lua", script)
    local child = assert(io.popen("exec " .. helpers.NO_SANITIZER .. "lua5.4 "
      .. shq(root .. "/manager.lua") .. " " .. shq(dir) .. " " .. shq(work), "r"))
    local line = child:read("l") or ""
    local pid, pids = line:match("^ready (%d+) (.*)$")
    assert.is_truthy(pid, "the child manager did not start: " .. line)
    assert.same({ "k1.sock", "k2.sock" }, glue.sockets(dir))
    assert.is_true(os.execute("kill -KILL " .. pid))
    child:close()
    for p in pids:gmatch("%d+") do glue.stop({ pid = tonumber(p) }) end

    -- Beside the dead sockets: a live proxy, a regular file, a fifo, a directory.
    local live = assert(isolation.proxy({ allow = {}, unix = dir .. "/live.sock" }))
    helpers.write(dir .. "/notes.txt", "keep")
    assert.equal(0, helpers.run("mkfifo " .. shq(dir .. "/fifo")))
    assert(uv.fs_mkdir(dir .. "/sub", 448))
    local n, removed = session.recover(dir)
    assert.equal(2, n)
    table.sort(removed)
    assert.same({ dir .. "/k1.sock", dir .. "/k2.sock" }, removed)
    assert.same({ "live.sock" }, glue.sockets(dir))
    assert.equal("keep", helpers.read(dir .. "/notes.txt"))
    assert.is_true(exists(dir .. "/fifo"))
    assert.is_true(exists(dir .. "/sub"))
    -- the live one still answers
    local status = get_via(dir .. "/live.sock", "http://denied.example.net/")
    assert.equal(403, status)
    assert.equal(0, session.recover(dir))
    live:close()
    helpers.rmtree(root)
  end)

  it("runs when a manager is made", function()
    local root = helpers.tmpdir()
    local dir = root .. "/run"
    assert(uv.fs_mkdir(dir, 448))
    -- a socket nobody listens on: its listener was killed with SIGKILL
    local listener = socat_listener(dir, "old.sock")
    assert.is_true(glue.wait(function() return exists(dir .. "/old.sock") end, 20))
    glue.stop(listener)
    assert.is_false(glue.alive(listener))
    assert.same({ "old.sock" }, glue.sockets(dir))
    local mgr = assert(session.manager({ runtime_dir = dir, launcher = function() end }))
    assert.same({}, glue.sockets(dir))
    mgr:close()
    helpers.rmtree(root)
  end)

  it("works inside a luv callback, where the loop cannot be run again", function()
    local root = helpers.tmpdir()
    local dir = root .. "/run"
    assert(uv.fs_mkdir(dir, 448))
    local dead = socat_listener(dir, "dead.sock")
    local live = socat_listener(dir, "live.sock", true)
    assert.is_true(glue.wait(function() return #glue.sockets(dir) == 2 end, 20))
    glue.stop(dead)
    local n, removed
    local timer = uv.new_timer()
    timer:start(10, 0, function()
      assert.equal("default", uv.loop_mode())
      n, removed = session.recover(dir)
      timer:close()
    end)
    uv.run("default")
    assert.equal(1, n)
    assert.same({ dir .. "/dead.sock" }, removed)
    assert.same({ "live.sock" }, glue.sockets(dir))
    assert.is_true(glue.alive(live))
    glue.stop(live)
    helpers.rmtree(root)
  end)

  it("returns 0 for a directory that does not exist", function()
    assert.equal(0, session.recover("/tmp/isolation-spec.does-not-exist/run"))
  end)
end)
