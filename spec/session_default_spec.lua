-- The session manager's default launcher (no `launcher`, `alive` or
-- `stop`): the line runs under bash as a child of the manager's luv loop,
-- with no descriptor of the orchestrator's above 2, its standard streams
-- from `stdio`; the session ends (on_end, the end checks, the proxy
-- closed) only once every process the line started is gone, whatever they
-- did to themselves (setsid, SIGTERM ignored); close() outside the loop
-- waits for them and leaves nothing pending on the loop.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local session = require("isolation.session")

-- no network for a sandbox; none to choose without one
local function iso(mode)
  if mode == "" then return { mode = "" } end
  return { mode = mode, network = "none" }
end

local function new_mark()
  return "isolation-default-" .. helpers.pid() .. "-" .. uv.hrtime()
end

-- a line that leaves a setsid'd child ignoring SIGTERM behind, marks it is
-- ready, and then waits (or ends at once when `wait` is false)
local function stubborn(mark, wait, dir)
  return "trap '' TERM; setsid sh -c 'trap \"\" TERM HUP INT; sleep 60' " .. mark
    .. " </dev/null >/dev/null 2>&1 & touch " .. helpers.shquote(dir .. "/ready") .. (wait and "; sleep 60" or "")
    .. " # " .. mark
end

describe("session manager, default launcher", function()
  local base, work, mgr, ended
  before_each(function()
    base = helpers.tmpdir()
    work = base .. "/work"
    assert(uv.fs_mkdir(work, 448))
    ended = {}
  end)
  after_each(function()
    if mgr then mgr:close() end
    mgr = nil
    helpers.rmtree(base)
  end)

  local function manager(extra)
    local opts = {
      runtime_dir = base .. "/run", loop = uv,
      on_end = function(s, reason)
        ended[s.id] = { reason = reason, left = cli.pgrep(s.mark or "?"), status = s.exit_status,
          signal = s.exit_signal, proxy = s.proxy }
      end,
    }
    for k, v in pairs(extra or {}) do opts[k] = v end
    mgr = assert(session.manager(opts))
    return mgr
  end

  describe("refuses options that do not fit it", function()
    for _, case in ipairs({
      { "alive without launcher", { alive = function() return true end }, "alive: only with launcher" },
      { "stop without launcher", { stop = function() end }, "stop: only with launcher" },
      { "stdio with a launcher", { launcher = function() return {} end, stdio = { 0, 1, 2 } },
        "stdio: only without launcher" },
      { "stdio entry that is no descriptor", { stdio = { 0, "out", 2 } }, "stdio: up to 3 entries" },
      { "stdio entry past 3", { stdio = { [4] = 1 } }, "stdio: up to 3 entries" },
      { "negative descriptor", { stdio = { -1 } }, "stdio: up to 3 entries" },
    }) do
      it(case[1], function()
        local opts = { runtime_dir = base .. "/run" }
        for k, v in pairs(case[2]) do opts[k] = v end
        local ok, err = pcall(session.manager, opts)
        assert.is_false(ok)
        assert.truthy(tostring(err):find(case[3], 1, true), err)
        assert.is_nil(uv.fs_lstat(base .. "/run"), "a refused manager made its runtime directory")
      end)
    end
  end)

  it("runs a deny session in a real sandbox; on_end after the line ends, with its status; the proxy is closed "
    .. "and its socket gone", function()
    if helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
    local out = base .. "/out"
    local fd = assert(uv.fs_open(out, "w", 384))
    manager({ stdio = { nil, fd, fd } })
    local s = assert(mgr:launch({ id = "d1", isolation = { mode = "bwrap", network = "deny" }, workdir = work,
      command = "curl -s -o /dev/null -w '%{http_code}\\n' http://denied.example.com/; exit 3", bridge = "builtin" }))
    local sock = s.proxy_socket
    assert.truthy(uv.fs_lstat(sock))
    assert.is_true(cli.wait_for(function() return ended.d1 ~= nil end, 60), "the session did not end")
    uv.fs_close(fd)
    assert.are.equal("exited", ended.d1.reason)
    assert.are.equal(3, ended.d1.status)
    assert.are.equal("ended", s.state)
    assert.is_nil(s.proxy)
    assert.is_nil(uv.fs_lstat(sock))
    assert.are.equal("403\n", helpers.read(out))
  end)

  for _, mode in ipairs({ "bwrap", "" }) do
    local what = mode == "" and "without a sandbox (mode \"\")" or "in a bwrap sandbox"
    it("passes no descriptor above 2 of the orchestrator's to the line, " .. what, function()
      if mode == "bwrap" and helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
      -- io.open leaves its descriptor inheritable (no O_CLOEXEC)
      local secret = base .. "/orchestrator-secret"
      helpers.write(secret, "x")
      local held = assert(io.open(secret, "r"))
      local listing = work .. "/fds"
      manager()
      local s = assert(mgr:launch({ id = "f", isolation = { mode = mode }, workdir = work,
        command = "ls -l /proc/$$/fd > " .. helpers.shquote(listing) }))
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 30))
      held:close()
      -- the shell's own descriptors, listed by a child of it
      local text = assert(helpers.read(listing))
      assert.is_nil(text:find("orchestrator-secret", 1, true), text)
      local fds = {}
      for n in text:gmatch(" (%d+) %-> ") do fds[#fds + 1] = tonumber(n) end
      table.sort(fds)
      assert.are.same({ 0, 1, 2 }, fds, text)
    end)
  end

  for _, mode in ipairs({ "bwrap", "" }) do
    local what = mode == "" and "without a sandbox" or "in a bwrap sandbox"
    it("a line that ends while its setsid'd child runs on ends the session only once the child is gone, "
      .. what, function()
      if mode == "bwrap" and helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
      local mark = new_mark()
      manager()
      local s = assert(mgr:launch({ id = "o", isolation = iso(mode),
        workdir = work, command = stubborn(mark, false, work) }))
      s.mark = mark
      assert.is_true(cli.wait_for(function() return ended.o ~= nil end, 30), "the session did not end")
      assert.are.equal("exited", ended.o.reason)
      assert.are.same({}, ended.o.left, "on_end ran while a process of the line was left")
      assert.are.same({}, cli.pgrep(mark))
    end)

    it("kill outside the loop: processes that ignore SIGTERM are gone within the grace (5 s) when it returns, "
      .. what, function()
      if mode == "bwrap" and helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
      local mark = new_mark()
      manager()
      local s = assert(mgr:launch({ id = "k", isolation = iso(mode),
        workdir = work, command = stubborn(mark, true, work) }))
      s.mark = mark
      assert.is_true(cli.wait_for(function() return uv.fs_lstat(work .. "/ready") ~= nil end, 20))
      local t0 = uv.hrtime()
      assert(mgr:kill("k"))
      local took = (uv.hrtime() - t0) / 1e9
      assert.are.equal("ended", s.state)
      assert.are.equal("killed", ended.k.reason)
      assert.are.same({}, ended.k.left)
      assert.are.same({}, cli.pgrep(mark))
      assert.is_true(took >= 4 and took < 15, ("took %.1f s"):format(took))
    end)
  end

  it("close inside a luv callback stops every session; they end in later iterations, none left",
    function()
    local marks = { new_mark(), new_mark() }
    manager()
    for i, m in ipairs(marks) do
      local s = assert(mgr:launch({ id = "c" .. i, isolation = { mode = "" }, workdir = work,
        command = "sleep 60 # " .. m }))
      s.mark = m
    end
    local t = uv.new_timer()
    local closed
    t:start(200, 0, function() closed = { mgr:close() } end)
    assert.is_true(cli.wait_for(function() return ended.c1 ~= nil and ended.c2 ~= nil end, 20))
    t:close()
    assert.are.same({ true }, closed)
    assert.are.equal("closed", ended.c1.reason)
    assert.are.equal("closed", ended.c2.reason)
    assert.are.same({}, cli.pgrep(marks[1]))
    assert.are.same({}, cli.pgrep(marks[2]))
  end)

  it("a script that launches, closes without running the loop and returns ends with status 0, nothing left",
    function()
    if helpers.skip_without_bwrap() then return pending(select(2, helpers.bwrap_works())) end
    local mark = new_mark()
    local script = base .. "/script.lua"
    helpers.write(script, ([[
package.cpath = "build/?.so;" .. package.cpath
package.path = "lua/?.lua;" .. package.path
local uv = require("luv")
local session = require("isolation.session")
local mgr = assert(session.manager{runtime_dir = %q, loop = uv,
  on_end = function(s, reason) print("ended", s.id, reason) end})
assert(mgr:launch{id = "s1", isolation = {mode = "bwrap", network = "deny"}, workdir = %q,
  command = "sleep 60 # %s", bridge = "builtin"})
assert(mgr:close())
print("loop alive", uv.loop_alive())
]]):format(base .. "/run", work, mark))
    local status, out, err = cli.spawn({ cli.LUA, script }, { cwd = cli.ROOT }).wait(60)
    assert.are.equal(0, status, out .. err)
    assert.truthy(out:find("ended\ts1\tclosed\n", 1, true), out .. err)
    assert.truthy(out:find("loop alive\tfalse\n", 1, true), out .. err)
    assert.are.same({}, cli.pgrep(mark))
  end)

  it("a line that cannot be started (a standard stream that is not open) is a failed launch: nil and the "
    .. "reason, no proxy, no socket file", function()
    manager({ stdio = { nil, 987, 2 } })
    local s, err = mgr:launch({ id = "bad", isolation = { mode = "bwrap", network = "deny" }, workdir = work,
      command = "true" })
    assert.is_nil(s)
    assert.truthy(err:find("launch of session \"bad\" failed: cannot start bash", 1, true), err)
    assert.is_nil(uv.fs_lstat(base .. "/run/bad.sock"))
    assert.are.equal(0, #mgr:sessions())
  end)
end)
