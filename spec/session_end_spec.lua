-- A session ends when its processes are gone (bridge/reap.c). The attack:
-- a process of the sandbox ptraces its init (PID 1 inside, the same uid)
-- and clears the parent-death signal bwrap set on it, stops the pass
-- bridge's keeper, and setsid's a child that writes the workdir a moment
-- later. Before the reaper, isolate returned 0 while that child ran on
-- with the workdir read-write (and its write landed after the end checks).
-- Now the line's status comes back only after every process below it is
-- gone: checked by the child's mark in /proc right when isolate returns
-- (or on_end is called), and by its file, which never appears.
local uv = require("luv")
local helpers = require("helpers")
local cli = require("support.cli")
local launchers = require("support.launchers")
local session = require("isolation.session")

local q = helpers.shquote

-- $1: the mark. Each step says on stdout what it did.
local ATTACK = [[
mark=$1
if command -v gdb >/dev/null 2>&1; then
  gdb -p 1 -batch -ex 'call (int)prctl(1,0,0,0,0)' >"gdb-$mark.log" 2>&1
  grep -q '^\$1 = 0' "gdb-$mark.log" && echo "init: parent-death signal cleared"
fi
for d in /proc/[0-9]*; do
  [ "$(cat "$d/comm" 2>/dev/null)" = isolation-bridg ] && kill -STOP "${d#/proc/}" && echo "keeper stopped"
done
setsid sh -c 'trap "" TERM HUP INT; sleep 2; echo survived > "late-$0"' "$mark" </dev/null >/dev/null 2>&1 &
echo "attack done"
]]

local have_gdb = helpers.run("command -v gdb") == 0

local function new_mark()
  return "isolation-reap-" .. helpers.pid() .. "-" .. uv.hrtime()
end

describe("a session ends when its processes are gone", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local work, home
  before_each(function() work, home = helpers.tmpdir(), helpers.tmpdir() end)
  after_each(function() helpers.rmtree(work); helpers.rmtree(home) end)

  local function isolate(args, mark)
    local argv = {}
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    for _, a in ipairs({ "--workdir", work, "--", "bash", "-c", ATTACK, "attack", mark }) do argv[#argv + 1] = a end
    return cli.isolate(argv, { env = { "HOME=" .. home }, cwd = work, timeout = 60 })
  end

  -- what survived: processes that carry the mark, and, 3 s later, its file
  local function assert_nothing_left(mark, out)
    assert.are.same({}, cli.pgrep(mark), "a process of the sandbox outlived its end\n" .. tostring(out))
    uv.sleep(3000)
    assert.are.same({}, cli.pgrep(mark))
    assert.is_nil(uv.fs_lstat(work .. "/late-" .. mark), "the sandbox wrote the workdir after its end")
  end

  for _, case in ipairs({
    { "--network none", { "--network", "none" } },
    { "deny, bridge pass (its keeper stopped too)", { "--network", "deny", "--bridge", "pass" }, "keeper stopped" },
    { "deny, bridge builtin", { "--network", "deny", "--bridge", "builtin" } },
    { "deny, bridge socat", { "--network", "deny", "--bridge", "socat" } },
  }) do
    local name, args, said = case[1], case[2], case[3]
    it("isolate " .. name .. ": ptrace of its init, parent-death signal cleared, a setsid child: "
      .. "nothing runs after isolate returns", function()
      if name:find("socat", 1, true) and helpers.run("command -v socat") ~= 0 then return pending("no socat") end
      local mark = new_mark()
      local status, out, err = isolate(args, mark)
      assert.are.equal(0, status, out .. err)
      assert.truthy(out:find("attack done", 1, true), out .. err)
      if said then assert.truthy(out:find(said, 1, true), out) end
      if have_gdb then
        assert.truthy(out:find("init: parent-death signal cleared", 1, true), "the attack's first step failed:\n"
          .. out .. tostring(helpers.read(work .. "/gdb-" .. mark .. ".log")))
      end
      assert_nothing_left(mark, out)
      if not have_gdb then pending("no gdb here: only the setsid child was tried, not the cleared signal") end
    end)
  end

  it("isolate: the line's reaper SIGKILLed from outside (the OOM killer, an operator) after the sandbox cleared its "
    .. "init's parent-death signal: isolate ends what the reaper left, and nothing runs after it returns (before: "
    .. "the setsid child wrote the workdir after isolate returned)", function()
    local mark = new_mark()
    local p = cli.spawn({ cli.ISOLATE, "--network", "none", "--workdir", work, "--", "bash", "-c",
      ATTACK .. "\ntouch ready; sleep 30", "attack", mark }, { env = { "HOME=" .. home }, cwd = work })
    assert.is_true(cli.wait_for(function() return helpers.exists(work .. "/ready") or p.status ~= nil end, 60))
    assert.is_nil(p.status, p.err)
    -- the line's reaper: outside the sandbox (no process of it can see it),
    -- the first program of the line, its argv carrying the mark
    local reaper = cli.reaper_of(mark)
    assert.truthy(reaper, "no reaper found")
    assert(uv.kill(reaper, "sigkill"))
    local status, out, err = p.wait(60)
    assert.are.equal(128 + 9, status, out .. err)
    if have_gdb then
      assert.truthy(out:find("init: parent-death signal cleared", 1, true), "the attack's first step failed:\n"
        .. out .. tostring(helpers.read(work .. "/gdb-" .. mark .. ".log")))
    end
    assert.truthy(err:find("the line's reaper was killed from outside", 1, true), err)
    assert_nothing_left(mark, out)
    if not have_gdb then pending("no gdb here: the init kept its parent-death signal, which ended it anyway") end
  end)

  it("isolate --time 2: the attack runs past the limit in no process (the limit's SIGKILL reaches the "
    .. "namespace)", function()
    local mark = new_mark()
    local argv = { "--network", "none", "--time", "2", "--workdir", work, "--", "bash", "-c",
      ATTACK .. "\nsleep 30", "attack", mark }
    local t0 = uv.hrtime()
    local status, out, err = cli.isolate(argv, { env = { "HOME=" .. home }, cwd = work, timeout = 60 })
    assert.are.equal(124, status, out .. err)
    assert.is_true((uv.hrtime() - t0) / 1e9 < 15, "the limit did not end the run")
    assert_nothing_left(mark, out)
  end)

  it("isolate: SIGTERM to isolate, the command and a setsid'd child ignoring it: isolate returns within the "
    .. "grace (5 s), and nothing of the sandbox runs (before: isolate waited until the command ended by itself)",
    function()
      local mark = new_mark()
      local p = cli.spawn({ cli.ISOLATE, "--network", "none", "--workdir", work, "--", "bash", "-c",
        "trap '' TERM; setsid sh -c 'trap \"\" TERM; sleep 60' " .. mark .. " </dev/null >/dev/null 2>&1 & "
        .. "touch ready; sleep 60 # " .. mark }, { env = { "HOME=" .. home }, cwd = work })
      -- the traps are set and the setsid child runs
      assert.is_true(cli.wait_for(function() return helpers.exists(work .. "/ready") or p.status ~= nil end, 60))
      assert.is_nil(p.status, p.err)
      uv.sleep(300)
      local t0 = uv.hrtime()
      p.kill("sigterm")
      local status, out, err = p.wait(60)
      local took = (uv.hrtime() - t0) / 1e9
      assert.are.same({}, cli.pgrep(mark), out .. err)
      assert.are_not.equal(0, status)
      assert.is_true(took >= 4 and took < 15, ("took %.1f s"):format(took))
    end)

  -- The same attack on the manager's default launcher: there the line's
  -- reaper runs below the manager's own (bridge/reap.c), a subreaper that
  -- inherits bwrap, then the sandbox's init, and kills what it inherits
  -- once its command (the line's shell) has ended.
  it("session manager, default launcher: the line's reaper SIGKILLed from outside after the sandbox cleared its "
    .. "init's parent-death signal: the manager's reaper ends what it left before on_end", function()
    local left_at_end, ended = {}, {}
    local mark = new_mark()
    -- the line's shell reports its killed child on stderr: not in the spec's output
    local null = assert(uv.fs_open("/dev/null", "w", 0))
    local mgr = assert(session.manager({ runtime_dir = helpers.tmpdir() .. "/run", loop = uv, poll_interval = 0.05,
      stdio = { 0, 1, null },
      on_end = function(s)
        left_at_end[s.id] = cli.pgrep(mark)
        ended[s.id] = true
      end }))
    local ok, err = pcall(function()
      local s = assert(mgr:launch({ id = "k", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "bash -c " .. q(ATTACK .. "\ntouch ready; sleep 30") .. " attack " .. mark .. " >attack.out" }))
      assert.is_true(cli.wait_for(function() return helpers.exists(work .. "/ready") or ended.k end, 60))
      assert.is_nil(ended.k, "the session ended before the attack was done")
      -- the line's own reaper (grace 5 s), not the manager's (grace 5 + 30 s)
      local reaper = cli.reaper_of(mark, 5)
      assert.truthy(reaper, "no line reaper found")
      assert(uv.kill(reaper, "sigkill"))
      assert.is_true(cli.wait_for(function() return ended.k end, 60), "the session did not end")
      assert.are.same({}, left_at_end.k, "on_end ran while processes of the sandbox ran")
      assert.are.equal(9, s.exit_signal or (s.exit_status and s.exit_status - 128))
      local out = helpers.read(work .. "/attack.out") or ""
      if have_gdb then
        assert.truthy(out:find("init: parent-death signal cleared", 1, true), "the attack's first step failed:\n"
          .. out .. tostring(helpers.read(work .. "/gdb-" .. mark .. ".log")))
      end
      assert_nothing_left(mark, out)
    end)
    mgr:close()
    uv.fs_close(null)
    assert(ok, err)
  end)

  describe("under the session manager (a launcher of the caller's)", function()
    local mgr, exited, left_at_end
    local function start_manager()
      exited, left_at_end = {}, {}
      mgr = assert(session.manager(launchers.bash(exited, {
        runtime_dir = helpers.tmpdir() .. "/run", loop = uv, poll_interval = 0.05,
        on_end = function(s) left_at_end[s.id] = cli.pgrep(s.mark or "?") end,
      })))
    end
    after_each(function() if mgr then mgr:close() end end)

    it("on_end finds none of the sandbox's processes, whatever the attack did to its init", function()
      start_manager()
      local mark = new_mark()
      local s = assert(mgr:launch({ id = "a", isolation = { mode = "bwrap", network = "deny" }, workdir = work,
        command = "bash -c " .. q(ATTACK) .. " attack " .. mark }))
      s.mark = mark
      assert.is_true(cli.wait_for(function() return s.state == "ended" end, 30))
      assert.are.equal(0, exited.a)
      assert.are.same({}, left_at_end.a)
      assert_nothing_left(mark)
    end)

    it("kill: processes that ignore SIGTERM (and setsid'd ones) are gone within the grace (5 s)", function()
      start_manager()
      local mark = new_mark()
      local s = assert(mgr:launch({ id = "t", isolation = { mode = "bwrap", network = "none" }, workdir = work,
        command = "trap '' TERM; setsid sh -c 'trap \"\" TERM; sleep 60' " .. mark
          .. " </dev/null >/dev/null 2>&1 & touch ready; sleep 60 # " .. mark }))
      s.mark = mark
      -- the traps are set and the setsid child runs
      assert.is_true(cli.wait_for(function() return uv.fs_lstat(work .. "/ready") ~= nil end, 10))
      local t0 = uv.hrtime()
      assert(mgr:kill("t"))
      assert.is_true(cli.wait_for(function() return exited.t ~= nil end, 15), "the line did not end")
      local took = (uv.hrtime() - t0) / 1e9
      assert.is_true(took >= 4 and took < 10, ("took %.1f s"):format(took))
      assert.are.same({}, cli.pgrep(mark))
    end)
  end)
end)

describe("isolation-bridge --reap", function()
  local bridge = require("isolation").BRIDGE
  local function reap(args)
    return cli.spawn({ bridge, "--reap", table.unpack(args) }).wait(30)
  end

  it("exits with its command's status, or dies of its command's signal", function()
    assert.are.equal(7, (reap({ "0", "--", "sh", "-c", "exit 7" })))
    assert.are.equal(128 + 15, (reap({ "0", "--", "sh", "-c", "kill -TERM $$" })))
    assert.are.equal(127, (reap({ "0", "--", "/nonexistent/isolation-program" })))
  end)

  it("ends every process below it, a double-forked setsid one that ignores every signal included", function()
    local mark = new_mark()
    local status = reap({ "1", "--", "sh", "-c",
      "(setsid sh -c 'trap \"\" TERM HUP INT QUIT; sleep 60' " .. mark .. " </dev/null >/dev/null 2>&1 &) ; exit 0" })
    assert.are.equal(0, status)
    assert.are.same({}, cli.pgrep(mark))
  end)

  it("--time: SIGTERM at the limit, SIGKILL after the grace, exit 124; a command that ignores SIGTERM and a "
    .. "setsid child end too", function()
    local mark = new_mark()
    local t0 = uv.hrtime()
    local status, _, err = reap({ "1", "--time", "2", "--", "sh", "-c",
      "(setsid sh -c 'trap \"\" TERM HUP INT QUIT; sleep 60' " .. mark .. " </dev/null >/dev/null 2>&1 &); "
        .. "trap '' TERM; sleep 30; exit 0" })
    local elapsed = (uv.hrtime() - t0) / 1e9
    assert.are.equal(124, status, err)
    assert.truthy(elapsed >= 2.9 and elapsed < 6, "ended after " .. elapsed .. " s")
    assert.truthy(err:find("the time limit (2 s) is reached", 1, true), err)
    assert.are.same({}, cli.pgrep(mark))
  end)

  it("--time: a command that ends first keeps its own status and ends the wait at once", function()
    local t0 = uv.hrtime()
    assert.are.equal(3, (reap({ "5", "--time", "20", "--", "sh", "-c", "exit 3" })))
    assert.truthy((uv.hrtime() - t0) / 1e9 < 3)
  end)

  it("passes each signal on once (a signal sent to the whole group reaches the command directly too, and the "
    .. "docker client exits 1 at its third SIGTERM); the grace still ends a command that ignores it", function()
    local dir = helpers.tmpdir()
    local p = cli.spawn({ bridge, "--reap", "1", "--", "sh", "-c",
      "trap 'echo TERM >>" .. dir .. "/count' TERM; echo up >" .. dir .. "/up; while :; do sleep 0.05; done" })
    assert.is_true(helpers.wait_for(function() return helpers.read(dir .. "/up") ~= nil end, 10))
    for _ = 1, 3 do
      p.kill("sigterm")
      uv.sleep(200)
    end
    local status = p.wait(10)
    local count = helpers.read(dir .. "/count")
    helpers.rmtree(dir)
    assert.are.equal("TERM\n", count) -- before: three times
    assert.are.equal(128 + 9, status)
  end)

  it("--container: the command must be ENGINE run ...", function()
    local status, _, err = reap({ "1", "--container", "--", "true" })
    assert.are.equal(2, status)
    assert.truthy(err:find("--container: COMMAND is ENGINE run", 1, true), err)
  end)

  -- --env: a local bwrap line's env -i, done by the reaper's child (one
  -- exec fewer at every launch): the command starts from exactly the
  -- words' environment, and the reaper keeps its own
  it("--env: -i and NAME=value words make the command's whole environment, as env(1) does; the reaper keeps "
    .. "its own", function()
    local script = "env; echo ---; tr '\\0' '\\n' </proc/$PPID/environ"
    local status, out, err = cli.spawn({ bridge, "--reap", "1", "--env", "--", "-i", "A=1", "B=x=y",
      "PATH=/usr/bin:/bin", "sh", "-c", script }, { env = { "OUTER_SECRET=kept-outside" } }).wait(30)
    assert.are.equal(0, status, err)
    local inner, outer = out:match("^(.-)%-%-%-\n(.*)$")
    local names = {}
    for name in inner:gmatch("([%w_]+)=[^\n]*\n") do names[#names + 1] = name end
    table.sort(names)
    -- sh adds PWD itself (and dash nothing else); nothing of the caller's
    assert.are.same({ "A", "B", "PATH", "PWD" }, names)
    assert.truthy(inner:find("B=x=y\n", 1, true), inner)
    assert.falsy(inner:find("OUTER_SECRET", 1, true), inner)
    assert.truthy(outer:find("OUTER_SECRET=kept-outside", 1, true), outer)
    -- without -i the words are added to the caller's environment
    status, out = cli.spawn({ bridge, "--reap", "1", "--env", "--", "A=2", "sh", "-c", "env" },
      { env = { "OUTER_SECRET=kept" } }).wait(30)
    assert.are.equal(0, status)
    assert.truthy(out:find("A=2\n", 1, true) and out:find("OUTER_SECRET=kept\n", 1, true), out)
  end)

  it("--env: no program, or a word that sets no name, is the reaper's failure (125) and runs nothing", function()
    for _, words in ipairs({ { "-i" }, { "-i", "A=1" }, { "A=1", "=x", "true" } }) do
      local args = { "1", "--env", "--" }
      for _, w in ipairs(words) do args[#args + 1] = w end
      local status, _, err = reap(args)
      assert.are.equal(125, status, table.concat(words, " "))
      assert.truthy(err:find("isolation-bridge --reap --env: ", 1, true), err)
    end
  end)

  it("refuses bad arguments with its usage, exit 2", function()
    for _, args in ipairs({ {}, { "x", "--", "true" }, { "-1", "--", "true" }, { "3601", "--", "true" },
      { "5", "true" }, { "5", "--" }, { "5", "--time", "0", "--", "true" }, { "5", "--time", "x", "--", "true" },
      { "5", "--time", "31622401", "--", "true" }, { "5", "--time" }, { "5", "--other", "--", "true" },
      { "5", "--env", "--container", "--", "docker", "run", "x" } }) do
      local status, _, err = reap(args)
      assert.are.equal(2, status, table.concat(args, " "))
      assert.truthy(err:find("usage: isolation-bridge --reap GRACE", 1, true), err)
    end
  end)
end)

-- The watchdog of a container line (bridge/reap.c, --container). The
-- container is the engine daemon's, not below the reaper: a SIGKILL to the
-- reaper (an orchestrator's kill -9, the OOM killer), or to the caller's
-- whole process group, skipped its removal, and the container ran on.
-- Here the engine is a stand-in: it records each call's argv, writes the id
-- to the cidfile the reaper names (not when a file "late" exists: then the
-- test writes it, as a client that is still creating the container), and
-- its "run" execs the rest (the "container", the mark in its argv); its
-- "kill" ends that run.
describe("isolation-bridge --reap --container: the watchdog", function()
  local bridge = require("isolation").BRIDGE
  local ID = "0123abcd"
  local ENGINE = [[#!/bin/sh
d=$(dirname "$0")
printf '%s\n' "$*" >>"$d/log"
case $1 in
run)
  printf '%s' "$3" >"$d/cidpath.tmp" && mv "$d/cidpath.tmp" "$d/cidpath"
  [ -e "$d/late" ] || echo ]] .. ID .. [[ >"$3"
  echo $$ >"$d/run.pid"
  shift 3
  exec "$@" ;;
kill)
  pid=$(cat "$d/run.pid")
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -F "$(cat "$d/mark")" && kill -9 "$pid" ;;
esac
exit 0
]]
  local dir, mark

  before_each(function()
    dir, mark = helpers.tmpdir(), new_mark()
    helpers.write(dir .. "/engine", ENGINE)
    helpers.write(dir .. "/mark", mark)
    assert(uv.fs_chmod(dir .. "/engine", tonumber("755", 8)))
  end)
  after_each(function()
    for _, pid in ipairs(cli.pgrep(mark)) do uv.kill(pid, "sigkill") end
    helpers.rmtree(dir)
  end)

  -- The reaper (its cid directory in dir) over the stand-in, running
  -- `script` under bash, with the mark as its $0.
  local function start(script, opts)
    opts = opts or {}
    local argv = { bridge, "--reap", "1" }
    for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
    for _, a in ipairs({ "--container", "--", dir .. "/engine", "run", "bash", "-c", script, mark }) do
      argv[#argv + 1] = a
    end
    return cli.spawn(argv, { env = { "TMPDIR=" .. dir }, detached = opts.detached })
  end

  -- Live processes named isolation-watch whose argv (the reaper's, which
  -- forked them) names this test's stand-in.
  local function watchdogs()
    local found = {}
    for _, pid in ipairs(cli.pgrep(dir .. "/engine")) do
      local stat = helpers.read("/proc/" .. pid .. "/stat") or ""
      if stat:match("^%d+ %((.*)%) %a") == "isolation-watch" and not stat:match("%) Z ") then
        found[#found + 1] = pid
      end
    end
    return found
  end

  -- The run started (its cidfile named, and written unless late) and one
  -- watchdog is there.
  local function running(p)
    assert.is_true(cli.wait_for(function()
      return p.status ~= nil or (helpers.exists(dir .. "/run.pid") and helpers.exists(dir .. "/cidpath")
        and (helpers.exists(dir .. "/late") or (helpers.read(helpers.read(dir .. "/cidpath")) or "") ~= "")
        and #watchdogs() == 1)
    end, 20), "the line did not start, or no watchdog: " .. #watchdogs())
    assert.is_nil(p.status, p.err)
  end

  -- How many times the engine was told to kill, and to remove, the id.
  local function removals()
    local log = helpers.read(dir .. "/log") or ""
    local kills, rms = 0, 0
    for l in log:gmatch("[^\n]+") do
      if l == "kill --signal=KILL " .. ID then kills = kills + 1 end
      if l == "rm -f " .. ID then rms = rms + 1 end
    end
    return kills, rms, log
  end

  -- No cid directory left in dir (TMPDIR), nor any watchdog.
  local function nothing_left()
    assert.is_true(cli.wait_for(function() return #watchdogs() == 0 end, 10), "a watchdog ran on")
    local left = cli.ls(dir)
    for _, name in ipairs(left) do assert.is_nil(name:match("^isolation%-cid%-"), "left: " .. name) end
  end

  -- The engine removed the container once (within `seconds`), and nothing is left.
  local function removed_once(seconds)
    assert.is_true(cli.wait_for(function() return select(2, removals()) > 0 end, seconds),
      "the container was not removed: " .. select(3, removals()))
    local kills, rms, log = removals()
    assert.are.equal(1, kills, log)
    assert.are.equal(1, rms, log)
    nothing_left()
  end

  it("the reaper SIGKILLed: the watchdog has the engine kill and remove the container within seconds "
    .. "(before: nothing removed it, the container ran on)", function()
    local p = start("exec -a \"$0\" sleep 60")
    running(p)
    assert(p.kill("sigkill"))
    removed_once(5)
    assert.are.equal(137, (p.wait(10)))
  end)

  -- A reaper above this one (the session manager's default launcher puts
  -- one above every line) adopts the watchdog when the line's reaper is
  -- killed, and ends what it adopts once its command has ended: before,
  -- its SIGKILL reached the watchdog in the middle of the removal. A
  -- watchdog is known by its name and this program's own executable
  -- (an allowlist of one: the file, not the name), and spared for its own
  -- bounded life only.
  it("a reaper above it (the session manager's) adopts the watchdog of a line reaper killed from outside: it lets "
    .. "the watchdog remove the container, then ends (before: it killed the watchdog, the container ran on)",
    function()
      local argv = { bridge, "--reap", "1", "--", bridge, "--reap", "1", "--container", "--", dir .. "/engine", "run",
        "bash", "-c", "exec -a \"$0\" sleep 60", mark }
      local p = cli.spawn(argv, { env = { "TMPDIR=" .. dir } })
      running(p)
      local inner
      for _, pid in ipairs(cli.pgrep(dir .. "/engine")) do
        local comm = (helpers.read("/proc/" .. pid .. "/comm") or ""):match("^[^\n]*")
        local args = helpers.read("/proc/" .. pid .. "/cmdline") or ""
        if pid ~= p.pid and comm == "isolation-bridg" and args:find("\0--container\0", 1, true) then inner = pid end
      end
      assert(uv.kill(assert(inner, "no line reaper"), "sigkill"))
      removed_once(5)
      assert.are.equal(137, (p.wait(10)))
    end)

  it("a reaper above it kills at once a process it adopts that only has the watchdog's name (another "
    .. "executable): sparing goes by the file, not the name", function()
    assert(os.execute("cp /bin/sleep " .. helpers.shquote(dir .. "/isolation-watch")))
    local t0 = uv.hrtime()
    local status = cli.spawn({ bridge, "--reap", "1", "--", "sh", "-c",
      "(" .. helpers.shquote(dir .. "/isolation-watch") .. " 60 &); exit 0", mark }).wait(30)
    assert.are.equal(0, status)
    assert.is_true((uv.hrtime() - t0) / 1e9 < 5)
    assert.are.same({}, cli.pgrep(dir .. "/isolation-watch"))
  end)

  it("kill -9 of the reaper's whole process group (isolate's): the watchdog, in a session of its own, removes the "
    .. "container (before: nothing did)", function()
    local p = start("exec -a \"$0\" sleep 60", { detached = true })
    running(p)
    assert(uv.kill(-p.pid, "sigkill"))
    removed_once(5)
    assert.are.equal(137, (p.wait(10)))
  end)

  it("the reaper's group killed before the engine wrote the cidfile: the caller's pipes close at once (the "
    .. "watchdog holds none), and the id written 2 s later is still removed", function()
    helpers.write(dir .. "/late", "")
    local p = start("exec -a \"$0\" sleep 60", { detached = true })
    running(p)
    assert(uv.kill(-p.pid, "sigkill"))
    assert.is_true(cli.wait_for(function() return p.status ~= nil and p.closed == 2 end, 5),
      "the caller's stdout and stderr stayed open")
    assert.are.equal(137, p.status)
    assert.are.equal(1, #watchdogs(), "the watchdog gave up waiting for the id")
    uv.sleep(2000)
    assert.are.equal(0, (removals()))
    helpers.write(helpers.read(dir .. "/cidpath"), ID .. "\n")
    removed_once(5)
    p.wait(1)
  end)

  it("runs in a session of its own, holding /dev/null as stdin, stdout and stderr and one pipe that is not the "
    .. "caller's", function()
    local p = start("exec -a \"$0\" sleep 60")
    running(p)
    local w = watchdogs()[1]
    local fields = helpers.read("/proc/" .. w .. "/stat"):match("%) (.*)$")
    local sid = tonumber(select(4, fields:match("^(%S+) (%S+) (%S+) (%S+)")))
    assert.are.equal(w, sid)
    local reaper_sid = tonumber(select(4, helpers.read("/proc/" .. p.pid .. "/stat"):match("%) (.*)$")
      :match("^(%S+) (%S+) (%S+) (%S+)")))
    assert.are_not.equal(reaper_sid, sid)
    local fds = {}
    for _, fd in ipairs(cli.ls("/proc/" .. w .. "/fd")) do
      fds[tonumber(fd)] = uv.fs_readlink("/proc/" .. w .. "/fd/" .. fd)
    end
    assert.are.equal("/dev/null", fds[0])
    assert.are.equal("/dev/null", fds[1])
    assert.are.equal("/dev/null", fds[2])
    assert.truthy(fds[3] and fds[3]:match("^pipe:"), tostring(fds[3]))
    assert.are_not.equal(uv.fs_readlink("/proc/" .. p.pid .. "/fd/1"), fds[3])
    assert.are_not.equal(uv.fs_readlink("/proc/" .. p.pid .. "/fd/2"), fds[3])
    local n = 0
    for _ in pairs(fds) do n = n + 1 end
    assert.are.equal(4, n)
    assert(p.kill("sigterm"))
    assert.are.equal(143, (p.wait(10)))
  end)

  for _, case in ipairs({
    { "the command's exit", "while [ ! -e go ]; do sleep 0.05; done; exit 3", 3 },
    { "SIGTERM to the reaper (passed on to the command, not to the watchdog)", "exec -a \"$0\" sleep 60", 143,
      function(p) assert(p.kill("sigterm")) end },
    { "--time 1", "exec -a \"$0\" sleep 60", 124, nil, { "--time", "1" } },
  }) do
    local name, script, want, act, args = case[1], case[2], case[3], case[4], case[5]
    it("the normal end, " .. name .. ": the line's own status, one removal by the reaper, no watchdog left", function()
      local p = start("cd " .. helpers.shquote(dir) .. " && " .. script, { args = args })
      running(p)
      if act then act(p) else helpers.write(dir .. "/go", "") end
      local status, _, err = p.wait(20)
      assert.are.equal(want, status, err)
      local kills, rms, log = removals()
      assert.are.equal(1, kills, log)
      assert.are.equal(1, rms, log)
      nothing_left()
    end)
  end
end)
