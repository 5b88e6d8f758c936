-- isolation.cli.run: the run mode, once prepare has checked the spec: the
-- proxy in a private directory (with the summary's counters on its
-- events), bwrap's seccomp program on a pipe, the line under bash, the
-- signals forwarded, then the drain, the teardown, the end checks
-- (protected paths, set-id files) and the summary. Returns the status.
local uv = require("luv")
local isolation = require("isolation")
local endcheck = require("isolation.endcheck")
local common = require("isolation.cli.common")
local proxyopts = require("isolation.cli.proxyopts")
local signals_mod = require("isolation.cli.signals")
local summarymod = require("isolation.cli.summary")

local say, die, die_usage = common.say, common.die, common.die_usage
local EXIT_FAILURE = common.EXIT_FAILURE

local function seccomp_pipe(kind)
  local prog = kind == "tty" and isolation.tty_seccomp_filter() or isolation.sandbox_seccomp_filter()
  local fds, err = uv.pipe({ nonblock = false }, { nonblock = false })
  if not fds then return nil, "cannot make a pipe: " .. tostring(err) end
  local n, werr = uv.fs_write(fds.write, prog)
  uv.fs_close(fds.write)
  if n ~= #prog then
    uv.fs_close(fds.read)
    return nil, "cannot write to the pipe: " .. tostring(werr or n)
  end
  return fds.read
end

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

-- An isolate killed with SIGKILL leaves its proxy directory behind, with a
-- socket nobody listens on. The next start removes such leftovers of this
-- user, by the rule session.recover follows: only a directory named like
-- ours (isolate.XXXXXX), this user's, 0700, holding nothing but a socket
-- proxy.sock on which a connect is refused; never another user's, never a
-- directory with anything else in it. A socket younger than two seconds is
-- left (another isolate may be between its bind and its listen).
local LEFTOVER_MIN_AGE = 2

local function sole_entry(dir)
  local scan = uv.fs_scandir(dir)
  local first = scan and uv.fs_scandir_next(scan)
  if not first or uv.fs_scandir_next(scan) then return nil end
  return first
end

local function remove_leftovers(base)
  local session = require("isolation.session")
  local uid, now = uv.getuid(), os.time()
  local scan = uv.fs_scandir(base)
  while scan do
    local name = uv.fs_scandir_next(scan)
    if not name then break end
    local dir = base .. "/" .. name
    local st = name:match("^isolate%.%w%w%w%w%w%w$") and uv.fs_lstat(dir)
    if st and st.type == "directory" and st.uid == uid and math.tointeger(st.mode) & 4095 == 448
      and sole_entry(dir) == "proxy.sock" then
      local sock = dir .. "/proxy.sock"
      local sst = uv.fs_lstat(sock)
      if sst and sst.type == "socket" and sst.uid == uid and now - sst.ctime.sec >= LEFTOVER_MIN_AGE
        and session._remove_dead_socket(sock) then
        uv.fs_rmdir(dir) -- fails, and keeps it, if anything appeared there meanwhile
      end
    end
  end
end


-- The command has ended, and with it every connection of the sandbox; the
-- proxy sees them close a moment later. An event is given when its request
-- ends, so the loop runs until the proxy has no connection left (at most a
-- second): the last tunnels reach on_event and the log before the close.
local DRAIN_MS = 1000
local function drain(proxy)
  if not proxy then return end
  local deadline = uv.now() + DRAIN_MS
  local tick = uv.new_timer()
  tick:start(10, 10, function() end)
  while proxy:stats().active > 0 and uv.now() < deadline do uv.run("once") end
  tick:close()
  uv.run("nowait")
end

-- The proxy's directory, socket and proxy of a run, removed by teardown.
local function teardown(r)
  if r.proxy then r.proxy:close(); r.proxy = nil end
  if r.dir then
    if r.socket then os.remove(r.socket) end
    uv.fs_rmdir(r.dir)
    r.dir = nil
  end
end

-- The proxy in a private directory (0700) of o.tmp_base; its socket goes
-- into the spec, its events to the summary (and stderr with --verbose).
local function start_proxy(r, o, spec, allow, summary)
  local err
  r.dir, err = uv.fs_mkdtemp(o.tmp_base .. "/isolate.XXXXXX")
  if not r.dir then die("cannot make a private directory for the proxy socket: " .. tostring(err)) end
  uv.fs_chmod(r.dir, tonumber("700", 8))
  r.socket = r.dir .. "/proxy.sock"
  spec.proxy_socket = r.socket
  local stderr = io.stderr
  local on_event = function(ev)
    if o.verbose then stderr:write("isolate: proxy: ", common.event_line(ev), "\n") end
    summary:record(ev)
  end
  r.proxy, err = isolation.proxy(proxyopts.options(o, spec, allow, { unix = r.socket, loop = uv,
    on_event = on_event }))
  o.routes = nil -- the values now live in the proxy alone
  if not r.proxy then
    teardown(r)
    proxyopts.failed(err)
  end
  if o.learn then
    say("isolate: learn mode: the proxy admits every host that is not on the allowlist (the address"
      .. " rule, strict parsing and the TLS name check still apply): the command's network is not contained")
  end
  if o.verbose then
    say(string.format("isolate: proxy on %s admits %d patterns: %s", r.proxy:address(), #allow,
      table.concat(allow, " ")))
  end
end

-- What bash runs before the line, and the child's descriptors: under bwrap
-- the seccomp program on descriptor 3 (filter_fd, isolate's copy, closed
-- once the child has its own) and every other inherited descriptor closed.
local function launch_setup(r, o, spec)
  local prologue = ""
  local stdio = { 0, 1, 2 }
  local filter_fd
  if spec.config.mode == "bwrap" then
    local ferr
    filter_fd, ferr = seccomp_pipe(o.seccomp)
    if not filter_fd then teardown(r); die("cannot pass the seccomp filter to bwrap: " .. ferr) end
    stdio[4] = filter_fd -- the child's descriptor 3: spec.seccomp_fd
    -- bwrap passes every open descriptor on into the sandbox: one that
    -- isolate inherited from its own parent without close-on-exec (a socket
    -- of the orchestrator, a docker connection) would be a way out. Only
    -- the terminal's 0, 1 and 2 go in, and 3, the seccomp program, which
    -- bwrap reads to the end and closes before it starts the command.
    prologue = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ \"$fd\" -gt 3 ]; then eval \"exec $fd>&-\"; fi; done; "
      .. "trap '' INT QUIT HUP; "
  end
  if o.home then prologue = "HOME=" .. common.shquote(o.home) .. "; export HOME; " .. prologue end
  return prologue, stdio, filter_fd
end

-- Runs the line under bash until it exits, forwarding SIGINT, SIGQUIT,
-- SIGTERM and SIGHUP to the command; returns its status (128+n after
-- signal n), nil if the loop ended without one.
local function run_child(r, spec, line, prologue, stdio, filter_fd)
  local status
  local signals = {}
  local child, perr
  local grace_timer
  child, perr = uv.spawn("bash", { args = { "-c", prologue .. "exec " .. line }, stdio = stdio },
    function(code, signal)
      status = (signal and signal ~= 0) and (128 + signal) or code
      if child and not child:is_closing() then child:close() end
      for _, s in ipairs(signals) do if not s:is_closing() then s:close() end end
      if grace_timer and not grace_timer:is_closing() then grace_timer:close() end
      uv.stop()
    end)
  -- the child has its copy (or there is no child): isolate's goes
  if filter_fd then uv.fs_close(filter_fd) end
  if not child then teardown(r); die("cannot start bash: " .. tostring(perr)) end
  for _, name in ipairs({ "sigint", "sigquit", "sigterm", "sighup" }) do
    local s = uv.new_signal()
    s:start(name, function(signame)
      signame = signame or name
      -- Ctrl-C and Ctrl-\ at the terminal already reached the whole
      -- foreground group, the sandbox included (bwrap keeps the group): a
      -- second copy would be a double interrupt, which some agents take
      -- for "quit".
      if signals_mod.KEYBOARD[signame] and signals_mod.in_terminal_foreground() then return end
      if child and not child:is_closing() then
        signals_mod.forward(child:get_pid(), signame)
        -- under docker and podman the reaper got the signal and has its own
        -- grace; under bwrap the sandbox's processes got it: END_GRACE
        -- seconds after the first, the sandbox ends whatever they do
        if spec.config.mode == "bwrap" and spec.reap ~= false and not grace_timer then
          grace_timer = uv.new_timer()
          grace_timer:start(signals_mod.END_GRACE * 1000, 0, function()
            if child and not child:is_closing() then signals_mod.end_bwrap(child:get_pid()) end
          end)
        end
      end
    end)
    signals[#signals + 1] = s
  end
  common.run_loop()
  return status
end

-- The end: the checks the session manager runs too (isolation.endcheck:
-- protected paths, git directories, the agent's config, set-id files, a
-- killed line's cgroup), bwrap's own failure explained, the summary; the
-- status isolate returns (125 when the end check of the workdir was cut
-- short).
local function finish(o, spec, status, watch, summary)
  local r = endcheck.check(watch)
  for _, l in ipairs(r.lines) do say("isolate: ", l) end
  local cut = r.cut
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
--- admitting `allow` when it is given; returns isolate's exit status.
local function run(o, spec, allow)
  -- Never a reason not to run: a failure here only leaves the leftovers.
  pcall(remove_leftovers, o.tmp_base)
  if spec.limits_via == "cgroup" then pcall(require("isolation.limits").cleanup) end
  local r = {}
  local summary = summarymod.new(o.learn, o.allow_private)
  if allow then start_proxy(r, o, spec, allow, summary) end
  local line, werr = isolation.wrap(spec)
  if not line then teardown(r); die_usage(werr) end
  local prologue, stdio, filter_fd = launch_setup(r, o, spec)
  -- what is in the protected places and which files are set-id now, to
  -- be compared at the end
  local watch, wperr = endcheck.watch(spec, o.home or os.getenv("HOME"))
  if not watch then
    if filter_fd then uv.fs_close(filter_fd) end
    teardown(r); die_usage(wperr)
  end
  local status = run_child(r, spec, line, prologue, stdio, filter_fd)
  drain(r.proxy)
  teardown(r)
  return finish(o, spec, status, watch, summary)
end

return run
