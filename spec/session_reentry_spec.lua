-- The manager's own callbacks may call the manager back: a launcher that
-- kills the session it is launching (the user pressed stop while tmux was
-- still starting), a stop or on_end callback that calls kill, archive, poll
-- or close. Each session must end exactly once (one stop, one on_end, its
-- proxy closed and its socket removed), and a kill during the launch wins.
local uv = require("luv")
local helpers = require("helpers")
local glue = require("support.glue")
local session = require("isolation.session")

local exists = helpers.exists

-- A manager in a fresh directory whose launcher starts `sleep 60` (a real
-- process; the line itself is not run) and then runs f.during(s, handle),
-- where a spec calls the manager back.
local function fixture(opts)
  local f = { root = helpers.tmpdir(), stops = {}, ended = {}, handles = {} }
  f.dir = f.root .. "/run"
  f.work = f.root .. "/work"
  assert(uv.fs_mkdir(f.work, 448))
  local o = {
    runtime_dir = f.dir,
    launcher = function(_, s)
      local h = glue.start("exec sleep 60")
      f.handles[s.id] = h
      f.socket_at_launch = s.proxy_socket and exists(s.proxy_socket)
      if f.during then return f.during(s, h) end
      return h
    end,
    alive = function(h, s)
      if f.on_alive then f.on_alive(h, s) end
      return glue.alive(h)
    end,
    stop = function(h, s)
      f.stops[s.id] = (f.stops[s.id] or 0) + 1
      glue.stop(h)
      if f.on_stop then f.on_stop(h, s) end
    end,
    on_end = function(s, why)
      f.ended[#f.ended + 1] = s.id .. ":" .. why
      if f.on_end then f.on_end(s, why) end
    end,
  }
  for k, v in pairs(opts or {}) do o[k] = v end
  f.mgr = assert(session.manager(o))
  return f
end

local function cleanup(f)
  f.during, f.on_stop, f.on_end, f.on_alive = nil, nil, nil, nil
  f.mgr:close()
  for _, h in pairs(f.handles) do glue.stop(h) end
  helpers.rmtree(f.root)
end

local function launch(f, id)
  return f.mgr:launch({ id = id, isolation = { mode = "bwrap", network = "deny" }, workdir = f.work,
    command = "sleep 60" })
end

local function sorted(t)
  table.sort(t)
  return t
end

describe("a kill during the launch", function()
  local f
  after_each(function() if f then cleanup(f) end f = nil end)

  it("wins when the launcher has already started the process: stopped, proxy closed, socket removed", function()
    f = fixture()
    local killed, kerr
    f.during = function(s, h)
      killed, kerr = f.mgr:kill(s.id)
      return h
    end
    local s, err = launch(f, "s1")
    assert.is_true(killed, kerr)
    assert.is_nil(s)
    assert.matches("killed during launch", err, 1, true)
    assert.is_true(f.socket_at_launch)
    assert.is_false(exists(f.dir .. "/s1.sock"))
    assert.is_false(glue.alive(f.handles.s1))
    assert.equal(1, f.stops.s1)
    assert.is_nil(f.mgr:get("s1"))
    assert.same({}, f.mgr:sessions())
    -- the id is free again
    f.during = nil
    s = assert(launch(f, "s1"))
    assert.equal("running", s.state)
    assert(f.mgr:kill("s1"))
    assert.same({ "s1:killed" }, f.ended)
  end)

  it("wins when the launcher then fails, or raises", function()
    f = fixture()
    f.during = function(s)
      assert(f.mgr:kill(s.id))
      return nil, "tmux: no server running"
    end
    local s, err = launch(f, "s1")
    assert.is_nil(s)
    assert.matches("killed during launch", err, 1, true)
    f.during = function(s2)
      assert(f.mgr:kill(s2.id))
      error("exploded")
    end
    s, err = launch(f, "s2")
    assert.is_nil(s)
    assert.matches("killed during launch", err, 1, true)
    assert.same({}, glue.sockets(f.dir))
    assert.is_nil(f.stops.s1) -- no handle came back: nothing to stop
    assert.same({}, f.ended)
  end)

  it("an archive during the launch wins the same way", function()
    f = fixture()
    f.during = function(s, h)
      assert(f.mgr:archive(s.id))
      return h
    end
    local s, err = launch(f, "s1")
    assert.is_nil(s)
    assert.matches("archived during launch", err, 1, true)
    assert.is_false(glue.alive(f.handles.s1))
    assert.same({}, glue.sockets(f.dir))
  end)

  it("a close during the launch stops the launched process too", function()
    f = fixture()
    f.during = function(_, h)
      assert(f.mgr:close())
      return h
    end
    local s, err = launch(f, "s1")
    assert.is_nil(s)
    assert.matches("closed during the launch", err, 1, true)
    assert.is_false(glue.alive(f.handles.s1))
    assert.equal(1, f.stops.s1)
    assert.same({}, glue.sockets(f.dir))
  end)

  it("a kill of the launching id from inside stop of the killed launch is not a second stop", function()
    f = fixture()
    f.during = function(s, h)
      assert(f.mgr:kill(s.id))
      return h
    end
    f.on_stop = function(_, s) assert.is_true(f.mgr:kill(s.id)) end
    local s, err = launch(f, "s1")
    assert.is_nil(s)
    assert.matches("killed during launch", err, 1, true)
    assert.equal(1, f.stops.s1)
  end)
end)

describe("ending from inside the manager's callbacks", function()
  local f
  after_each(function() if f then cleanup(f) end f = nil end)

  it("a stop callback that calls kill on its own session ends it once", function()
    f = fixture()
    assert(launch(f, "s1"))
    local inner
    f.on_stop = function(_, s) inner = { f.mgr:kill(s.id) } end
    assert.is_true(f.mgr:kill("s1"))
    assert.same({ true }, inner)
    assert.equal(1, f.stops.s1)
    assert.same({ "s1:killed" }, f.ended)
    assert.same({}, glue.sockets(f.dir))
  end)

  it("a stop callback that calls archive, poll and close: every session ends once, the first as killed", function()
    f = fixture()
    assert(launch(f, "a"))
    assert(launch(f, "b"))
    f.on_stop = function(_, s)
      if s.id == "a" then
        assert.is_true(f.mgr:archive("a"))
        f.mgr:poll() -- a's process is gone already: poll must not end it a second time, as "exited"
        assert.is_true(f.mgr:close())
      end
    end
    assert.is_true(f.mgr:kill("a"))
    assert.same({ a = 1, b = 1 }, f.stops)
    assert.same({ "a:killed", "b:closed" }, sorted(f.ended))
    assert.equal("ended", f.mgr:get("a").state)
    assert.equal("ended", f.mgr:get("b").state)
    assert.same({}, glue.sockets(f.dir))
  end)

  it("an on_end callback that calls kill, archive, poll and close ends each session once", function()
    f = fixture()
    for _, id in ipairs({ "a", "b", "c" }) do assert(launch(f, id)) end
    f.on_end = function(s)
      assert.is_true(f.mgr:kill(s.id))
      assert.is_true(f.mgr:archive(s.id))
      f.mgr:poll()
      if s.id == "a" then
        assert.is_true(f.mgr:kill("b"))
        assert.is_true(f.mgr:close())
      end
    end
    assert.is_true(f.mgr:kill("a"))
    assert.same({ a = 1, b = 1, c = 1 }, f.stops)
    assert.same({ "a:killed", "b:killed", "c:closed" }, sorted(f.ended))
    assert.same({}, glue.sockets(f.dir))
  end)

  it("poll whose alive probe or on_end calls kill ends each session once", function()
    f = fixture()
    assert(launch(f, "a"))
    assert(launch(f, "b"))
    glue.stop(f.handles.a) -- a died on its own
    f.on_end = function(s) if s.id == "a" then f.mgr:kill("a") end end
    f.on_alive = function(_, s) if s.id == "b" then assert.is_true(f.mgr:kill("b")) end end
    assert.equal(1, f.mgr:poll())
    assert.same({ "a:exited", "b:killed" }, sorted(f.ended))
    assert.is_nil(f.stops.a)
    assert.equal(1, f.stops.b)
  end)

  it("on luv's loop: a stop that calls kill does not take the orchestrator down", function()
    local root = helpers.tmpdir()
    helpers.write(root .. "/orch.lua", [[
      package.path = "lua/?.lua;spec/?.lua;" .. package.path
      package.cpath = "build/?.so;" .. package.cpath
      local uv = require("luv")
      local session = require("isolation.session")
      local dir = arg[1]
      local stops, mgr = 0, nil
      mgr = assert(session.manager({ runtime_dir = dir .. "/run", loop = uv, poll_interval = 0.05,
        launcher = function() return {} end,
        alive = function() return true end,
        stop = function(_, s) stops = stops + 1; mgr:kill(s.id) end }))
      uv.fs_mkdir(dir .. "/work", 448) -- beside runtime_dir: a workdir containing it is refused
      assert(mgr:launch({ id = "s1", isolation = { mode = "bwrap", network = "deny" }, workdir = dir .. "/work",
        command = "true" }))
      local t = uv.new_timer()
      t:start(100, 0, function() print("kill", mgr:kill("s1"), stops); t:close() end)
      uv.run()
      print("after the loop", stops)
    ]])
    local p = io.popen("cd " .. helpers.shquote(assert(uv.cwd())) .. " && " .. helpers.NO_SANITIZER .. "lua5.4 "
      .. helpers.shquote(root .. "/orch.lua") .. " " .. helpers.shquote(root) .. " 2>&1; echo status $?")
    local out = p:read("a")
    p:close()
    helpers.rmtree(root)
    assert.matches("kill\ttrue\t1\nafter the loop\t1\nstatus 0\n", out, 1, true)
  end)
end)
