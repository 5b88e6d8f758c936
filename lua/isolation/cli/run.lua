-- isolation.cli.run: the run mode, once prepare has checked the spec: a
-- session of a session manager of isolate's own (the proxy with the
-- summary's counters on its events, the session's filter file, the
-- reaper, the drain, the teardown and the end checks are the manager's),
-- the terminal's signals forwarded, then the summary. Returns the status.
local uv = require("luv")
local session = require("isolation.session")
local common = require("isolation.cli.common")
local proxyopts = require("isolation.cli.proxyopts")
local signals_mod = require("isolation.cli.signals")
local summarymod = require("isolation.cli.summary")

local say, die = common.say, common.die
local EXIT_FAILURE = common.EXIT_FAILURE

-- bwrap exits 1 when it cannot set the sandbox up, with a line of its own
-- ("setting up uid map: Permission denied") that tells a user little. After
-- an exit 1, the probes that bwrap needs run again: when one fails, the
-- command cannot have started, and its verdict and fix are printed; when
-- all pass, the 1 was the command's own and nothing is added.
local function explain_bwrap_failure(cfg)
  local ok, failed = pcall(require("isolation.preflight").why_bwrap_fails, { network = cfg.network ~= "allow" })
  if not ok or not failed then return end
  say("isolate: bwrap cannot start a sandbox here (", failed.name, "): ", failed.detail)
  local first = true
  for l in (failed.fix .. "\n"):gmatch("(.-)\n") do
    say(first and "isolate: fix: " or "isolate:      ", l)
    first = false
  end
  say("isolate: `isolate doctor` checks the rest")
end

-- An isolate killed with SIGKILL leaves its directory behind: its
-- session manager's runtime_dir, with a socket nobody listens on and its
-- session's filter file. The next start removes such leftovers of this
-- user: in a directory named like ours (isolate.XXXXXX), this user's,
-- 0700, two seconds old or more (a socket younger may be between its bind
-- and its listen), session.recover removes the dead sockets and the filter
-- files of processes that are gone, and keeps a live isolate's; the
-- directory is then removed when that left it empty, or when it has been
-- empty for a minute (a killed run without a proxy or a filter leaves
-- nothing else; a live one's needs its directory no more once started).
-- Never another user's, never a directory with anything else in it.
local LEFTOVER_MIN_AGE = 2
local EMPTY_LEFTOVER_AGE = 60
local SHARED_FILTERS = { "sandbox-seccomp.bpf", "tty-seccomp.bpf" }

-- What isolate's manager puts in its directory: the socket, the
-- session's filter file (the process's id in its name).
local SESSION_FILTER_NAME = "^proxy%.%d+%-%x+%.%a+%-seccomp%.bpf$"

-- How many entries dir holds, or nil when one is not isolate's kind.
local function isolate_entries(dir)
  local n, scan = 0, uv.fs_scandir(dir)
  while scan do
    local name, kind = uv.fs_scandir_next(scan)
    if not name then break end
    local ours = (name == "proxy.sock" and kind == "socket")
      or (kind == "file" and name:find(SESSION_FILTER_NAME))
    if not ours then return nil end
    n = n + 1
  end
  return n
end

local function remove_leftovers(base)
  local uid, now = uv.getuid(), os.time()
  local scan = uv.fs_scandir(base)
  while scan do
    local name = uv.fs_scandir_next(scan)
    if not name then break end
    local dir = base .. "/" .. name
    local st = name:match("^isolate%.%w%w%w%w%w%w$") and uv.fs_lstat(dir)
    local age = st and now - st.mtime.sec
    if st and st.type == "directory" and st.uid == uid and math.tointeger(st.mode) & 4095 == 448
      and age >= LEFTOVER_MIN_AGE then
      local before = isolate_entries(dir)
      if before and before > 0 then session.recover(dir) end
      if before and isolate_entries(dir) == 0 and (before > 0 or age >= EMPTY_LEFTOVER_AGE) then
        uv.fs_rmdir(dir) -- fails, and keeps it, if anything appeared there meanwhile
      end
    end
  end
end


-- The directory of a run: its session manager's runtime_dir (0700, in
-- o.tmp_base, outside every place the sandbox can write: prepare chose
-- it), which holds the proxy's socket and the seccomp filter files.
local function make_dir(o)
  local dir, err = uv.fs_mkdtemp(o.tmp_base .. "/isolate.XXXXXX")
  if not dir then die("cannot make a private directory for the proxy socket: " .. tostring(err)) end
  uv.fs_chmod(dir, tonumber("700", 8))
  return dir
end

-- The manager's shared filter files: isolate's sessions each load a
-- copy of their own, and a file without a process's id in its name would
-- keep a killed run's directory from being known for a leftover.
local function remove_shared_filters(dir)
  for _, n in ipairs(SHARED_FILTERS) do
    local st = uv.fs_lstat(dir .. "/" .. n)
    if st and st.type == "file" then uv.fs_unlink(dir .. "/" .. n) end
  end
end

-- The manager closed, and its directory removed.
local function remove_dir(r)
  if r.mgr then r.mgr:close(); r.mgr = nil end
  if r.dir then
    remove_shared_filters(r.dir)
    uv.fs_rmdir(r.dir)
    r.dir = nil
  end
end

-- The proxy's options: its events go to the summary (and stderr with
-- --verbose); it runs on isolate's loop.
local function proxy_options(o, spec, allow, summary)
  local stderr = io.stderr
  local on_event = function(ev)
    if o.verbose then stderr:write("isolate: proxy: ", common.event_line(ev), "\n") end
    summary:record(ev)
  end
  return proxyopts.options(o, spec, allow, { loop = uv, on_event = on_event })
end

-- What the launcher's shell runs before the line: the home from the
-- password database when HOME was not usable, and under bwrap the
-- terminal's INT, QUIT and HUP ignored: a Ctrl-C or a hang-up must not
-- kill bwrap (and through --die-with-parent the command) before the
-- command handles it; the command gets them back (prepare's command text).
local function shell_prefix(o, spec)
  local prefix = ""
  if o.home then prefix = "HOME=" .. common.shquote(o.home) .. "; export HOME; " end
  if spec.config.mode == "bwrap" then prefix = prefix .. "trap '' INT QUIT HUP; " end
  return prefix
end

-- Forwards SIGINT, SIGQUIT, SIGTERM and SIGHUP to the session's child (the
-- line's reaper, which passes them on to the command); returns a function
-- that stops forwarding.
local function forward_signals(s, spec)
  local handles = {}
  local grace_timer
  local function child_pid()
    local h = s.handle
    if h and not h.exited then return h.pid end
  end
  for _, name in ipairs({ "sigint", "sigquit", "sigterm", "sighup" }) do
    local sig = uv.new_signal()
    sig:start(name, function(signame)
      signame = signame or name
      -- Ctrl-C and Ctrl-\ at the terminal already reached the whole
      -- foreground group, the sandbox included (bwrap keeps the group): a
      -- second copy would be a double interrupt, which some agents take
      -- for "quit".
      if signals_mod.KEYBOARD[signame] and signals_mod.in_terminal_foreground() then return end
      local pid = child_pid()
      if not pid then return end
      signals_mod.forward(pid, signame)
      -- under docker and podman the reaper got the signal and has its own
      -- grace; under bwrap the sandbox's processes got it: END_GRACE
      -- seconds after the first, the sandbox ends whatever they do
      if spec.config.mode == "bwrap" and spec.reap ~= false and not grace_timer then
        grace_timer = uv.new_timer()
        grace_timer:start(signals_mod.END_GRACE * 1000, 0, function()
          local p = child_pid()
          if p then signals_mod.end_bwrap(p) end
        end)
      end
    end)
    handles[#handles + 1] = sig
  end
  return function()
    for _, h in ipairs(handles) do if not h:is_closing() then h:close() end end
    if grace_timer and not grace_timer:is_closing() then grace_timer:close() end
  end
end

-- The end, once the session manager has ended the session (its
-- processes gone, its proxy drained and closed, the end checks said):
-- bwrap's own failure explained, the summary; the status isolate returns
-- (125 when the end check of the workdir was cut short).
local function finish(o, spec, status, cut, summary)
  if spec.config.mode == "bwrap" and status == 1 then explain_bwrap_failure(spec.config) end
  summary:print(o.verbose)
  if cut then
    -- a walk cut short is a failure, never a silent pass: the command's own
    -- status is said first, then isolate fails
    say(string.format("isolate: the command exited with status %d; the end check of the workdir was "
      .. "cut short (%s): exit 125", status or EXIT_FAILURE, cut))
    return 125
  end
  return status or EXIT_FAILURE
end

--- Runs the checked spec (prepare's) of parsed options `o`, behind a proxy
--- admitting `allow` when it is given; returns isolate's exit status. The
--- run is a session of a session manager of its own (isolation.session's
--- launch_spec): the proxy, the filter file, the checks of the host's own
--- paths, the reaper that ends the sandbox's processes, the drain and the
--- end checks are the manager's, the same code an orchestrator's sessions
--- run through; isolate adds the terminal's signals and the summary.
local function run(o, spec, allow)
  -- Never a reason not to run: a failure here only leaves the leftovers.
  pcall(remove_leftovers, o.tmp_base)
  if spec.limits_via == "cgroup" then pcall(require("isolation.limits").cleanup) end
  local summary = summarymod.new(o.learn, o.allow_private)
  local r = { dir = make_dir(o) }
  local stop_forwarding
  local err, what
  r.mgr, err = session.manager({ runtime_dir = r.dir, stdio = { 0, 1, 2 },
    log = function(line) io.stderr:write(line, "\n") end,
    on_end = function()
      if stop_forwarding then stop_forwarding() end
      uv.stop()
    end })
  if not r.mgr then remove_dir(r); die(err) end
  remove_shared_filters(r.dir)
  local s
  s, err, what = r.mgr:launch_spec("proxy", spec, {
    proxy = allow and proxy_options(o, spec, allow, summary), seccomp = o.seccomp,
    home = o.home or os.getenv("HOME"), prefix = shell_prefix(o, spec), log_prefix = "isolate: ",
    -- isolate's process is its own: under bwrap a child subreaper, so that
    -- what the line's reaper leaves when it is killed from outside (bwrap,
    -- the sandbox's init) comes back here. Not under docker and podman:
    -- there the reaper's watchdog (isolation-watch) removes the container
    -- when the reaper dies, and it would come here and be killed too; not
    -- under --mode none, whose background processes are the user's.
    orphans = spec.config.mode == "bwrap" })
  o.routes = nil -- the values now live in the proxy alone
  if not s then
    remove_dir(r)
    if what == "proxy" then proxyopts.failed(err) end
    die((tostring(err):gsub("^isolation: ", "")))
  end
  if allow and o.learn then
    say("isolate: learn mode: the proxy admits every host that is not on the allowlist (the address"
      .. " rule, strict parsing and the TLS name check still apply): the command's network is not contained")
  end
  if allow and o.verbose then
    say(string.format("isolate: proxy on %s admits %d patterns: %s", s.proxy:address(), #allow,
      table.concat(allow, " ")))
  end
  if s.state == "running" then
    stop_forwarding = forward_signals(s, spec)
    common.run_loop()
  end
  uv.run("nowait") -- the closes the end started
  local status = s.exit_signal and (128 + s.exit_signal) or s.exit_status
  local cut = s.end_check_error
  remove_dir(r)
  return finish(o, spec, status, cut, summary)
end

return run
