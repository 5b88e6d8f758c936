-- isolation.cli.signals: where a signal isolate receives goes (the
-- command, not bwrap), read from the process table, and whether the
-- terminal delivered it to the whole group already.
local uv = require("luv")

local M = {}

-- comm and parent pid of every process, from /proc/<pid>/stat.
local function process_table()
  local procs = {}
  local dir = uv.fs_scandir("/proc")
  while dir do
    local name = uv.fs_scandir_next(dir)
    if not name then break end
    if name:match("^%d+$") then
      local f = io.open("/proc/" .. name .. "/stat")
      local stat = f and f:read("l")
      if f then f:close() end
      local comm, ppid = (stat or ""):match("^%d+ %((.*)%) %S+ (%d+)")
      if comm then procs[tonumber(name)] = { comm = comm, ppid = tonumber(ppid) } end
    end
  end
  return procs
end

-- Where a signal goes, the way a terminal would deliver it: to the command
-- rather than to bwrap. bwrap does not relay signals, and bwrap killed by
-- one would take the command down with SIGKILL (--die-with-parent) before
-- it could clean up. So under bwrap every process in the sandbox except
-- bwrap's own gets it (the command then ends, and bwrap exits with its
-- status); otherwise the child itself (the command, or docker, which
-- relays it). procs is process_table()'s; returns the pids.
local function signal_targets(procs, pid)
  -- With limits, bwrap runs under the cgroup or time shell, or prlimit:
  -- the sandbox is below the first bwrap among the child's descendants.
  if procs[pid] and procs[pid].comm ~= "bwrap" then
    local queue = { pid }
    while #queue > 0 do
      local p = table.remove(queue, 1)
      if procs[p].comm == "bwrap" then pid = p; break end
      for c, info in pairs(procs) do
        if info.ppid == p then queue[#queue + 1] = c end
      end
    end
  end
  if not (procs[pid] and procs[pid].comm == "bwrap") then return { pid } end
  local children, targets, queue = {}, {}, { pid }
  for p, info in pairs(procs) do
    children[info.ppid] = children[info.ppid] or {}
    table.insert(children[info.ppid], p)
  end
  while #queue > 0 do
    local p = table.remove(queue)
    for _, c in ipairs(children[p] or {}) do
      if procs[c].comm ~= "bwrap" then targets[#targets + 1] = c end
      queue[#queue + 1] = c
    end
  end
  if #targets == 0 then targets[1] = pid end
  return targets
end

local function forward(pid, signame)
  for _, t in ipairs(signal_targets(process_table(), pid)) do uv.kill(t, signame) end
end

-- Seconds after a forwarded signal until a bwrap sandbox that still runs
-- is ended (the reaper's grace, bridge/reap.c: LIMITS_TIME_GRACE).
local END_GRACE = 5

-- The end of a bwrap line whose processes outlived the grace: SIGKILL to
-- the first bwrap below the child (its monitor). The line then ends, and
-- the reaper in front of it kills what is left: the sandbox's init, with
-- its PID namespace (whatever the sandbox did to its parent-death signal).
-- The signals above go to the sandbox's processes, not to the reaper, so
-- without this a command that ignores them kept isolate running.
local function end_bwrap(pid)
  local procs = process_table()
  local queue = { pid }
  while #queue > 0 do
    local p = table.remove(queue, 1)
    if procs[p] and procs[p].comm == "bwrap" then
      uv.kill(p, "sigkill")
      return
    end
    for c, info in pairs(procs) do
      if info.ppid == p then queue[#queue + 1] = c end
    end
  end
end

local KEYBOARD = { sigint = true, sigquit = true }

-- True when isolate runs in the foreground process group of its
-- controlling terminal, where the terminal's keyboard signals reach every
-- process of the group (/proc/self/stat: pgrp, tty_nr, tpgid).
local function in_terminal_foreground()
  local f = io.open("/proc/self/stat")
  local stat = f and f:read("l")
  if f then f:close() end
  local fields = (stat or ""):match("^.*%)(.*)$") or "" -- after the command name, which may hold ")"
  local pgrp, tty, tpgid = fields:match("^ %S+ %-?%d+ (%-?%d+) %-?%d+ (%-?%d+) (%-?%d+)")
  return tty ~= nil and tty ~= "0" and pgrp == tpgid
end

-- A pipe holding the seccomp filter (isolation.sandbox_seccomp_filter(),
-- or tty_seccomp_filter() with --seccomp tty), its write end closed:
-- the read end (close-on-exec, like every descriptor luv makes) is given to
-- bwrap as --seccomp 3, which reads it to EOF. The program is a few kilo-
-- bytes, far less than a pipe holds, so the write cannot block. Returns the

M.process_table, M.signal_targets, M.forward = process_table, signal_targets, forward
M.KEYBOARD, M.in_terminal_foreground = KEYBOARD, in_terminal_foreground
M.END_GRACE, M.end_bwrap = END_GRACE, end_bwrap

return M
