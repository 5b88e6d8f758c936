-- isolation.session: the lifecycle of isolated launches for an orchestrator.
--
-- A session with network deny owns an egress proxy on a unix socket in the
-- manager's runtime directory. The proxy lives exactly as long as the
-- session: every path that ends one (kill, archive, a death noticed by
-- poll, a launcher that fails, close) tears the proxy down exactly once and
-- removes its socket, and recover() cleans up after a manager that died
-- without doing so (the sockets of a killed process stay on disk, dead).
--
-- A local bwrap launch also gets a seccomp filter: by default
-- isolation.sandbox_seccomp_filter() (no TIOCSTI or TIOCLINUX, no kernel
-- keyrings, ...), or with `seccomp = "tty"` in the request the narrower
-- isolation.tty_seccomp_filter(). The manager keeps each in a file of the
-- runtime directory, and the launch line opens it for bwrap
-- (seccomp_file), since a launcher gets a command line, not a descriptor.
local uv = require("luv")
local isolation = require("isolation")
local json = require("isolation.json")
local policy = require("isolation.policy")
local protect = require("isolation.protect")
local textmod = require("isolation.text")
local limits = require("isolation.limits")
local hostpaths = require("isolation.hostpaths")
local endcheck = require("isolation.endcheck")
local routes = require("isolation.routes")
local tools = require("isolation.tools")

local M = {}

local NULL = json.null
local show = json.show

-- sun_path holds 108 bytes with the terminating NUL.
local SUN_PATH_MAX = 107
-- Ids outside this charset (or too long to fit) get a hashed name: "h=" and
-- 16 hex digits. "=" never appears in a plain name, so the two kinds of
-- names cannot collide, and neither can contain "/" or be "." or "..".
local PLAIN_ID = "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
local HASHED_NAME_LEN = #"h=" + 16 + #".sock"

-- Put in front of a local bwrap line: bwrap passes every open descriptor on
-- into the sandbox, and the launcher's shell has whatever the orchestrator
-- (or its own parent: a CI runner's pipe, a docker connection) holds
-- without close-on-exec. Only 0, 1, 2 and the line's own 3 (the seccomp
-- file, which bwrap reads and closes) go on. bash, since dash takes one-
-- digit descriptors only; a subshell of its own, so that a line typed into
-- an interactive shell closes nothing of that shell's.
local CLOSE_INHERITED = "'bash' '-c' 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; "
  .. "if [ \"$fd\" -gt 3 ]; then eval \"exec $fd>&-\"; fi; done; exec \"$@\"' 'isolation-close-fds' "

local function fnv1a64(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do
    h = (h ~ s:byte(i)) * 0x100000001b3
  end
  return string.format("%016x", h)
end

-- The socket path of a session: <runtime_dir>/<id>.sock when the id is a
-- plain name that fits in a unix address, else <runtime_dir>/h=<hash>.sock.
local function socket_path(dir, id)
  if id:find(PLAIN_ID) and #dir + 1 + #id + #".sock" <= SUN_PATH_MAX then
    return dir .. "/" .. id .. ".sock"
  end
  return dir .. "/h=" .. fnv1a64(id) .. ".sock"
end
M._socket_path = socket_path

local function int(n)
  return math.tointeger(n) or math.floor(n)
end

------------------------------------------------------------------------------
-- The runtime directory

-- runtime_dir must stay in the hands of root and this user, from / down:
-- another user who can write any directory above it could move runtime_dir
-- away after manager() and put their own in its place, and the next launch
-- would bind its proxy socket and write its seccomp filter there. So every
-- component must belong to root or to this user, and none above runtime_dir
-- may be writable by group or others unless it is sticky (there, the next
-- component must be root's or ours, which the first rule already says: an
-- entry of a sticky directory can be moved only by its owner, the
-- directory's owner and root). runtime_dir itself is this user's, 0700.

local S_ISVTX = 512 -- 01000
local GROUP_OTHER_WRITE = 18 -- 0022

-- Why the directory at path (st: its lstat) cannot be part of runtime_dir,
-- or nil. `last`: path is runtime_dir itself.
local function untrusted(path, st, last)
  local uid = uv.getuid()
  if not st then return show(path) .. " does not exist" end
  if st.type ~= "directory" then return show(path) .. " is not a directory" end
  local mode = int(st.mode) & 4095
  if last then
    if st.uid ~= uid then
      return show(path) .. " belongs to uid " .. int(st.uid) .. ", not to this user (uid " .. int(uid)
        .. "): use a private directory"
    end
    if mode & 63 ~= 0 then
      return string.format("%s has mode %04o; it must be private (0700): chmod 700 it or use a private directory",
        show(path), mode)
    end
    return nil
  end
  if st.uid ~= 0 and st.uid ~= uid then
    return show(path) .. " belongs to uid " .. int(st.uid) .. ", who could move runtime_dir away and put "
      .. "their own in its place: every directory above runtime_dir must belong to root or to this user (uid "
      .. int(uid) .. ")"
  end
  if mode & GROUP_OTHER_WRITE ~= 0 and mode & S_ISVTX == 0 then
    return string.format("%s is writable by group or others (mode %04o) and not sticky: another user could "
      .. "move runtime_dir away and put their own in its place; use a directory whose every parent is "
      .. "writable only by root or by you", show(path), mode)
  end
  return nil
end

local function too_long(dir)
  if #dir + 1 + HASHED_NAME_LEN > SUN_PATH_MAX then
    return string.format("isolation: runtime_dir %s is too long for a unix socket address "
      .. "(%d bytes; at most %d, so that <runtime_dir>/<session>.sock fits in %d bytes)",
      show(dir), #dir, SUN_PATH_MAX - 1 - HASHED_NAME_LEN, SUN_PATH_MAX)
  end
end

local function runtime_error(dir, why)
  return "isolation: runtime_dir " .. show(dir) .. ": " .. why
end

-- Walks dir from / down, checking each component with lstat; `create`:
-- makes the missing ones, 0700 (each in a parent already checked). A
-- symlink (in a checked parent) is resolved and the walk starts again on
-- the real path, which is then the only one used. Returns the real dir and
-- its chain, {path, dev, ino, last} per component from "/", or nil, err,
-- and "missing" when a component does not exist and create is false.
local function walk_runtime_dir(dir, create)
  local given = dir
  for _ = 1, 40 do
    local parts = {}
    for part in dir:gmatch("[^/]+") do parts[#parts + 1] = part end
    if #parts == 0 then return nil, runtime_error(given, "resolves to / itself") end
    local long = too_long(dir)
    if long then return nil, long end
    local st = uv.fs_lstat("/")
    local why = untrusted("/", st, false)
    if why then return nil, runtime_error(given, why) end
    local chain = { { path = "/", dev = st.dev, ino = st.ino } }
    local prefix, resolved = "", nil
    for i, part in ipairs(parts) do
      prefix = prefix .. "/" .. part
      local last = i == #parts
      st = uv.fs_lstat(prefix)
      if not st then
        if not create then return nil, runtime_error(given, show(prefix) .. " does not exist"), "missing" end
        local ok, err, code = uv.fs_mkdir(prefix, 448) -- 0700
        if not ok and code ~= "EEXIST" then
          return nil, "isolation: runtime_dir: cannot create " .. show(prefix) .. " (" .. tostring(err) .. ")"
        end
        st = uv.fs_lstat(prefix)
        if st and st.type == "directory" and st.uid == uv.getuid() and int(st.mode) & 4095 ~= 448 then
          uv.fs_chmod(prefix, 448) -- a umask cannot widen it, but it may narrow it below 0700
          st = uv.fs_lstat(prefix)
        end
      end
      if st and st.type == "link" then
        -- the link itself must be in trusted hands, like a directory there
        if st.uid ~= 0 and st.uid ~= uv.getuid() then
          return nil, runtime_error(given, show(prefix) .. " is a symbolic link of uid " .. int(st.uid)
            .. ": every component of runtime_dir must belong to root or to this user")
        end
        local real = uv.fs_realpath(prefix)
        if not real then return nil, runtime_error(given, show(prefix) .. " is a broken symbolic link") end
        resolved = real .. (last and "" or "/" .. table.concat(parts, "/", i + 1))
        resolved = resolved:gsub("^//+", "/")
        break
      end
      why = untrusted(prefix, st, last)
      if why then return nil, runtime_error(given, why) end
      chain[#chain + 1] = { path = prefix, dev = st.dev, ino = st.ino, last = last }
    end
    if not resolved then return dir, chain end
    dir = resolved
  end
  return nil, runtime_error(given, "too many levels of symbolic links")
end

-- Is runtime_dir still the directory, and the chain above it still the
-- chain, that manager() checked (the same inodes, still trusted)? luv
-- cannot bind() or open relative to a directory descriptor, so every use
-- by path (a launch's socket and filter, a teardown's unlink) checks this
-- first. Once it holds, nobody but root and this user can change it.
local function chain_intact(dir, chain)
  for _, c in ipairs(chain) do
    local st = uv.fs_lstat(c.path)
    if not st or st.dev ~= c.dev or st.ino ~= c.ino then
      return nil, runtime_error(dir, show(c.path) .. " is no longer the directory that manager() checked "
        .. "(moved or replaced since): nothing is written there; make a new manager")
    end
    local why = untrusted(c.path, st, c.last)
    if why then return nil, runtime_error(dir, why) end
  end
  return true
end

local function check_runtime_dir(dir)
  if type(dir) ~= "string" then
    error("bad argument to 'manager' (runtime_dir: string expected, got " .. type(dir) .. ")", 3)
  end
  if dir:sub(1, 1) ~= "/" or dir:find("\0", 1, true) then
    return nil, "isolation: runtime_dir must be an absolute path without NUL bytes (got " .. show(dir) .. ")"
  end
  dir = dir:gsub("/+$", "")
  if dir == "" then return nil, "isolation: runtime_dir must not be / itself" end
  for part in dir:gmatch("[^/]+") do
    if part == "." or part == ".." then
      return nil, "isolation: runtime_dir must not contain . or .. (got " .. show(dir) .. ")"
    end
  end
  local long = too_long(dir)
  if long then return nil, long end
  return dir
end

------------------------------------------------------------------------------
-- The seccomp filter files

-- In runtime_dir, beside the sockets; recover() leaves them (not sockets).
-- One file per filter: a line already waiting in a shell keeps the one it
-- names.
local FILTERS = {
  sandbox = { name = "sandbox-seccomp.bpf", program = isolation.sandbox_seccomp_filter,
    what = "sandbox seccomp filter" },
  tty = { name = "tty-seccomp.bpf", program = isolation.tty_seccomp_filter, what = "TTY seccomp filter" },
}

-- Is the file at path this user's regular file, 0600, holding exactly prog?
-- lstat first: a fifo there would block the open, a symlink is not ours.
local function filter_current(path, prog)
  local st = uv.fs_lstat(path)
  if not st or st.type ~= "file" or st.uid ~= uv.getuid() or int(st.mode) & 511 ~= 384
    or st.size ~= #prog then
    return false
  end
  local fd = uv.fs_open(path, "r", 0)
  if not fd then return false end
  local fst = uv.fs_fstat(fd)
  local data = uv.fs_read(fd, #prog + 1, 0)
  uv.fs_close(fd)
  return fst ~= nil and fst.ino == st.ino and fst.dev == st.dev and data == prog
end

-- Makes <dir>/<name> hold the filter of that kind ("sandbox" when nil),
-- 0600, and returns its path. A file already right is kept (a second
-- manager on the same directory, a launch line still waiting in a shell,
-- read the same bytes); otherwise the program goes to a temporary name of
-- this process and is renamed over the old one, so that a line being run
-- reads either the old file or the whole new one, never half a program.
local function ensure_filter(dir, kind)
  local filter = FILTERS[kind or "sandbox"]
  local path = dir .. "/" .. filter.name
  local prog = filter.program()
  if filter_current(path, prog) then return path end
  local tmp = string.format("%s/.%s.%d.%s.tmp", dir, filter.name, int(uv.os_getpid()),
    ((uv.random(6) or ""):gsub(".", function(c) return string.format("%02x", c:byte()) end)))
  local function fail(what, err)
    uv.fs_unlink(tmp)
    return nil, "isolation: runtime_dir: cannot " .. what .. " the " .. filter.what .. " " .. show(path)
      .. " (" .. tostring(err) .. ")"
  end
  local fd, err = uv.fs_open(tmp, "wx", 384) -- O_CREAT | O_EXCL: never someone else's file
  if not fd then return nil, "isolation: runtime_dir: cannot write " .. show(tmp) .. " (" .. tostring(err) .. ")" end
  local n, werr = uv.fs_write(fd, prog, 0)
  local ok, cerr = uv.fs_fchmod(fd, 384) -- exactly 0600, whatever the umask made it
  uv.fs_close(fd)
  if n ~= #prog then return fail("write", werr or "short write") end
  if not ok then return fail("write", cerr) end
  ok, err = uv.fs_rename(tmp, path)
  if not ok then return fail("install", err) end
  return path
end
M._ensure_filter = ensure_filter

-- Each local bwrap launch gets a private copy of its filter, created by
-- this process (O_EXCL: never a file someone else put there), which no
-- other launch line names and nothing renames over: a sandbox that could
-- replace the shared file (the manager refuses a workdir or bind that
-- reaches runtime_dir, isolation.hostpaths) would not change what the next
-- session loads. <runtime_dir>/<session>.<pid>-<random>.<filter name>;
-- removed when the session ends, and by recover() once <pid> is gone.
local SESSION_FILTER = "^.+%.(%d+)%-%x+%.[%a]+%-seccomp%.bpf$"

local function session_filter_path(dir, id, filter)
  local base = socket_path(dir, id):match("([^/]*)%.sock$")
  local rand = (uv.random(6) or tostring(uv.hrtime())):gsub(".", function(c)
    return string.format("%02x", c:byte())
  end)
  return string.format("%s/%s.%d-%s.%s", dir, base, int(uv.os_getpid()), rand, filter.name)
end

local function write_filter(path, filter)
  local prog = filter.program()
  local fd, err = uv.fs_open(path, "wx", 384) -- O_CREAT | O_EXCL
  if not fd then
    return nil, "isolation: runtime_dir: cannot write the " .. filter.what .. " " .. show(path) .. " ("
      .. tostring(err) .. ")"
  end
  local n, werr = uv.fs_write(fd, prog, 0)
  local ok, cerr = uv.fs_fchmod(fd, 384)
  uv.fs_close(fd)
  if n ~= #prog or not ok then
    uv.fs_unlink(path)
    return nil, "isolation: runtime_dir: cannot write the " .. filter.what .. " " .. show(path) .. " ("
      .. tostring(werr or cerr or "short write") .. ")"
  end
  return true
end

local function remove_filter(path)
  if not path then return end
  local st = uv.fs_lstat(path)
  if st and st.type == "file" then uv.fs_unlink(path) end
end

------------------------------------------------------------------------------
-- Recovery

-- Is somebody listening on the unix socket at path? A real connect. When
-- luv's loop is not running we can run it once to learn the exact result;
-- inside a luv callback we cannot (uv_run is not reentrant), so the probe
-- reads the connect's outcome from getpeername and asks three times before
-- calling a socket dead (a listener with a full backlog refuses for a moment).
local function listening(path)
  local tries = uv.loop_mode() == nil and 1 or 3
  for try = 1, tries do
    local pipe = uv.new_pipe(false)
    local result
    pipe:connect(path, function(err) result = err or false end)
    local connected = pipe:getpeername() ~= nil
    if uv.loop_mode() == nil then
      for _ = 1, 10 do
        if result ~= nil then break end
        uv.run("nowait")
      end
      if result == false then connected = true end
      -- Anything but a refusal (EAGAIN: a full backlog; EACCES) means: leave it.
      if result ~= nil and result ~= false and not tostring(result):find("ECONNREFUSED") then
        connected = true
      end
    end
    pipe:close()
    if uv.loop_mode() == nil then uv.run("nowait") end
    if connected then return true end
    if try < tries then uv.sleep(20) end
  end
  return false
end

-- Removes the socket file at path if nobody listens on it. Only sockets are
-- touched, and only the same file that was probed.
local function remove_dead_socket(path)
  local st = uv.fs_lstat(path)
  if not st or st.type ~= "socket" then return false end
  if listening(path) then return false end
  local again = uv.fs_lstat(path)
  if not again or again.type ~= "socket" or again.ino ~= st.ino or again.dev ~= st.dev then return false end
  return uv.fs_unlink(path) == true
end

M._remove_dead_socket = remove_dead_socket -- isolate's leftover cleanup: the same rule

--- Removes the socket files in runtime_dir that nobody listens on (left by
--- a manager that died) and leaves live ones and everything that is not a
--- socket alone. Returns how many were removed and their paths.
function M.recover(runtime_dir)
  local dir, err = check_runtime_dir(runtime_dir)
  if not dir then return nil, err end
  local removed = {}
  pcall(limits.cleanup) -- the cgroups of launch lines that were killed
  -- In a directory that another user could have swapped in, the dead
  -- sockets would be theirs: refuse, as manager() does.
  local chain, missing
  dir, chain, missing = walk_runtime_dir(dir, false)
  if not dir then
    if missing then return 0, removed end
    return nil, chain
  end
  local scan = uv.fs_scandir(dir)
  if not scan then return 0, removed end
  while true do
    local name, kind = uv.fs_scandir_next(scan)
    if not name then break end
    if kind == "socket" or kind == "unknown" then
      local path = dir .. "/" .. name
      if remove_dead_socket(path) then removed[#removed + 1] = path end
    elseif kind == "file" and name:find(SESSION_FILTER) then
      -- a session filter of a manager that is gone (kill(pid, 0): ESRCH)
      local pid = tonumber(name:match(SESSION_FILTER))
      local alive, _, code = uv.kill(pid, 0)
      if not alive and code == "ESRCH" then uv.fs_unlink(dir .. "/" .. name) end
    end
  end
  return #removed, removed
end

------------------------------------------------------------------------------
-- The manager

local Manager = {}
Manager.__index = Manager

local MANAGER_OPTIONS = {
  runtime_dir = "string", launcher = "function", alive = "function", stop = "function",
  loop = "table", poll_interval = "number", on_end = "function", log = "function", audit_log = "string",
  max_connections = "number", stdio = "table", upstream_proxy = "string",
}

-- The default launcher's first program: it closes every descriptor above 2
-- that the orchestrator left without close-on-exec (luv passes them on to
-- a child), then execs the rest of its words. The local line's own closer
-- keeps 3 (its seccomp file); here nothing above 2 is the line's yet.
local CLOSE_ABOVE_STDIO = 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; '
  .. 'if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done; exec "$@"'
-- The same, run by the shell that then execs the line itself.
local CLOSE_ABOVE_STDIO_HERE = 'for fd in /proc/$$/fd/*; do fd=${fd##*/}; '
  .. 'if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done; '
-- Seconds a stopped session's processes get after SIGTERM before the
-- reaper kills them (as isolate's --time grace).
local DEFAULT_GRACE = 5
-- A local bwrap, docker or podman line has a reaper of its own (the
-- line's first word), which ends what is below it DEFAULT_GRACE seconds
-- after a SIGTERM: under docker and podman it then has the engine kill and
-- remove the container, which is not below any reaper (the engine's daemon
-- runs it). The manager's reaper waits that much longer before its SIGKILL,
-- which would kill the line's reaper in the middle of that removal (its
-- watchdog, which the manager's reaper then inherits and lets finish,
-- would start the removal again; bridge/reap.c: REAP_KILL_WAIT bounds each
-- engine command, REAP_WATCH_LIFE a watchdog).
local OWN_REAPER_MARGIN = 30
-- How long close() or kill() outside a running loop waits for the
-- processes: the grace (and the margin), then the reaper's own bound for a
-- SIGKILL to take effect (bridge/reap.c, REAP_KILL_WAIT), and a margin.
local DEFAULT_END_WAIT_MS = (DEFAULT_GRACE + OWN_REAPER_MARGIN + 30 + 5) * 1000

-- A session proxy's client connections at once (more get 503 too_many):
-- small, so that one agent's flood stays within its own share of the
-- process's descriptors (README, threat model).
local SESSION_MAX_CONNECTIONS = 256

--- Makes a session manager. Raises for wrong option types; returns nil, err
--- when runtime_dir is unusable (too long for a unix socket address, not
--- private, cannot be created).
function M.manager(opts)
  if type(opts) ~= "table" then
    error("bad argument #1 to 'manager' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k, v in pairs(opts) do
    local want = MANAGER_OPTIONS[k]
    if not want then error("bad argument #1 to 'manager' (unknown option " .. show(k) .. ")", 2) end
    if type(v) ~= want then
      error("bad argument #1 to 'manager' (" .. k .. ": " .. want .. " expected, got " .. type(v) .. ")", 2)
    end
  end
  if not opts.launcher then
    -- the default launcher watches its own child: a probe or a stop of the
    -- caller's would see a handle it does not know
    for _, k in ipairs({ "alive", "stop" }) do
      if opts[k] then
        error("bad argument #1 to 'manager' (" .. k .. ": only with launcher; the default launcher "
          .. "watches and stops its own child)", 2)
      end
    end
  elseif opts.stdio then
    error("bad argument #1 to 'manager' (stdio: only without launcher; it sets the default launcher's "
      .. "standard streams)", 2)
  end
  local stdio = opts.stdio
  if stdio then
    for k, v in pairs(stdio) do
      local ok = math.type(k) == "integer" and k >= 1 and k <= 3
        and ((math.type(v) == "integer" and v >= 0) or type(v) == "userdata")
      if not ok then
        error("bad argument #1 to 'manager' (stdio: up to 3 entries [1]..[3], each a descriptor number "
          .. "or a luv stream, expected; got " .. show(k) .. " = " .. show(v) .. ")", 2)
      end
    end
  end
  local interval = opts.poll_interval or 1
  if not (interval > 0 and interval < math.huge) then
    error("bad argument #1 to 'manager' (poll_interval: a positive number of seconds expected)", 2)
  end
  local mc = opts.max_connections
  if mc ~= nil and not (math.type(mc) == "integer" and mc >= 1 and mc <= 1000000) then
    return nil, "isolation: max_connections must be an integer from 1 to 1000000 (got " .. show(mc) .. ")"
  end
  local dir, err = check_runtime_dir(opts.runtime_dir)
  if not dir then return nil, err end
  -- The audit log: every session proxy appends its lines to it (the proxy
  -- opens it, and refuses a symlink, another user's file, a log others can
  -- read), each line naming its session.
  local audit_log = opts.audit_log
  if audit_log and (audit_log:sub(1, 1) ~= "/" or audit_log:find("\0", 1, true)) then
    return nil, "isolation: audit_log must be an absolute path without NUL bytes (got " .. show(audit_log) .. ")"
  end
  local chain
  dir, chain = walk_runtime_dir(dir, true)
  if not dir then return nil, chain end
  M.recover(dir)
  local filter
  filter, err = ensure_filter(dir)
  if not filter then return nil, err end
  local self = setmetatable({
    runtime_dir = dir, seccomp_file = filter, _chain = chain,
    _launcher = opts.launcher, _alive = opts.alive, _stop = opts.stop, _on_end = opts.on_end, _logf = opts.log,
    _loop = opts.loop, _stdio = stdio or { 0, 1, 2 }, _audit_log = audit_log,
    _max_connections = opts.max_connections or SESSION_MAX_CONNECTIONS,
    -- a parent proxy every session proxy dials through (checked by the
    -- first launch's proxy, which names upstream_proxy when it refuses it)
    _upstream_proxy = opts.upstream_proxy,
    _sessions = {}, _order = {}, _starting = {}, _closed = false,
  }, Manager)
  if not opts.launcher then
    self._default = true
    self._loop = self._loop or uv
    self._launcher = function(cmdline, s) return self:_spawn(cmdline, s) end
  end
  if opts.loop then
    local timer = opts.loop.new_timer()
    local ms = math.max(1, math.floor(interval * 1000 + 0.5))
    timer:start(ms, ms, function()
      -- An error inside uv.run() would end the process: report it instead.
      local pok, perr = pcall(self.poll, self)
      if not pok then self:_log("isolation: session poll failed: " .. tostring(perr)) end
    end)
    -- Polling alone does not keep the orchestrator's loop running.
    timer:unref()
    self._timer = timer
  end
  return self
end

-- One line to the manager's log function, or to stderr; a log function
-- that raises must not break what was being reported. The line is escaped
-- here, once (isolation.text): it may name paths the sandbox chose.
function Manager:_log(line)
  line = textmod.escape(line)
  if self._logf and pcall(self._logf, line) then return end
  io.stderr:write(line, "\n")
end

-- Calls a C function of the module, turning a raised error into nil, err.
local function call(f, ...)
  local ok, a, b = pcall(f, ...)
  if not ok then return nil, "isolation: " .. tostring(a):gsub("^isolation: ", "") end
  return a, b
end

-- default_allow_hosts(agent, hook_url), or with `registries` false the same
-- without its package registries (launch request default_hosts = false,
-- isolate --no-default-hosts): the agent's model hosts and the hook's host
-- stay. The registries are what default_allow_hosts gives for no agent and
-- no hook (npm's read from npm's configuration as it is for the full
-- list); the hook's entries carry a port, so none of them is one.
local function default_hosts(agent, hook_url, registries)
  local hosts, err = call(isolation.default_allow_hosts, agent or "", hook_url)
  if not hosts or registries ~= false then return hosts, err end
  local plain
  plain, err = call(isolation.default_allow_hosts, "", nil)
  if not plain then return nil, err end
  local registry, out = {}, {}
  for _, h in ipairs(plain) do registry[h] = true end
  for _, h in ipairs(hosts) do
    if not registry[h] then out[#out + 1] = h end
  end
  return out
end
M._default_hosts = default_hosts -- isolate --no-default-hosts: the same rule

local function allowlist(agent, hook_url, cfg, registries)
  local hosts, err = default_hosts(agent, hook_url, registries)
  if not hosts then return nil, err end
  local out, seen = {}, {}
  for _, list in ipairs({ hosts, cfg.allow_hosts or {} }) do
    for _, h in ipairs(list) do
      if not seen[h] then
        seen[h] = true
        out[#out + 1] = h
      end
    end
  end
  return out
end

local function is_local(target)
  return target == "local" or (type(target) == "table" and target.kind == "local")
end

local function is_tunnel(target)
  return type(target) == "table" and target.kind == "ssh" and target.tunnel == true
end

local shell_word = textmod.shquote

local function shell_line(argv)
  local words = {}
  for i, a in ipairs(argv) do words[i] = shell_word(a) end
  return table.concat(words, " ")
end

-- An ssh tunnel target: the line the launcher gets makes the remote
-- socket_dir (sshd binds the forward before the remote command runs), then
-- execs the one ssh whose remote command is the wrapped line. The remote
-- socket's name has a random part: two managers (two machines) may use the
-- same socket_dir and the same session ids.
local function tunnel_line(spec, target, local_socket)
  local t = {}
  for k, v in pairs(target) do t[k] = v end
  local rand = (uv.random(8) or tostring(uv.hrtime())):gsub(".", function(c)
    return string.format("%02x", c:byte())
  end)
  t.socket_name = local_socket:match("([^/]*)%.sock$") .. "." .. rand:sub(1, 16) .. ".sock"
  local argv, info = call(isolation.ssh_argv, spec, t)
  if not argv then return nil, info end
  return shell_line(info.prepare) .. " && exec " .. shell_line(argv), info.socket
end

local SPEC_KEYS = { "agent", "workdir", "command", "proxy_port", "socks_port", "binds", "ro_binds", "ca_cert",
  "bridge", "bridge_path", "tty", "protect", "agent_config", "limits", "limits_via", "gpu" }
-- the environment: clean by default (the library's base and AGENT_ENV)
for _, k in ipairs({ "env_pass", "env_set", "env_inherit" }) do SPEC_KEYS[#SPEC_KEYS + 1] = k end

-- A launch whose line runs on this machine: the paths as the kernel will
-- resolve them. wrap() checked their text; a symlink can still lead into
-- /etc/cron.d or to the home (the line's own run-time check compares with
-- the HOME of the shell that runs it, which may not be ours).
local function check_local_paths(spec)
  local homes = protect.resolved_homes(os.getenv("HOME"))
  local home = os.getenv("HOME")
  local function check(field, given)
    local path = given
    if path:sub(1, 6) == "$HOME/" then
      if not (home and home:sub(1, 1) == "/") then return true end -- the line refuses it
      path = home .. path:sub(6)
    end
    local real = uv.fs_realpath(path)
    if not real then return true end -- nothing there to expose; bwrap reports a missing bind
    local shown = show(given) .. (real ~= given and (" (" .. show(real) .. ")") or "")
    for _, h in ipairs(homes) do
      if hostpaths.within(h.path, real) then
        return nil, "isolation: " .. field .. " " .. shown .. " is " .. h.name .. " (" .. h.path
          .. ") or a directory above it: the sandbox would see (and, read-write, change) the whole home;"
          .. " use a directory inside it"
      end
    end
    if real ~= given then
      local probe = field == "workdir" and { workdir = real } or { [field:match("^[%w_]+")] = { real } }
      probe.command = "true"
      local ok, err = call(isolation.argv, probe)
      if not ok then
        return nil, "isolation: " .. field .. " " .. show(given) .. " resolves to " .. show(real) .. ", which "
          .. tostring(err):gsub("^isolation: %S+ ", ""):gsub(" %(got [^\n]*%)$", "")
      end
    end
    return true
  end
  local ok, err = check("workdir", spec.workdir)
  if not ok then return nil, err end
  for _, field in ipairs({ "binds", "ro_binds" }) do
    local list = spec[field]
    if type(list) == "table" then
      for i, p in ipairs(list) do
        ok, err = check(field .. "[" .. i .. "]", p)
        if not ok then return nil, err end
      end
    end
  end
  return true
end

-- Resolves the isolation and the launch configuration of a launch request.
local function resolve(req)
  if req.continuation ~= nil and req.continuation ~= NULL then
    local cfg, err = policy.for_continuation(req.continuation)
    if not cfg then return nil, err end
    local lc = req.continuation
    if type(lc) == "table" then
      local text
      text, err = policy.encode_launch(lc)
      if not text then return nil, err end
      lc = text
    end
    lc, err = policy.decode_launch(lc) -- a copy of its own, unknown fields kept
    if not lc then return nil, err end
    -- An old launch without isolation ran without it: say so explicitly now.
    if lc.isolation == nil or lc.isolation == NULL then lc.isolation = policy.effective(nil, nil) end
    return cfg, lc
  end
  local project = req.project
  if project == nil then project = {} end
  if type(project) ~= "table" then
    return nil, "isolation: project must be a table (got " .. show(project) .. ")"
  end
  local cfg, err = policy.session_isolation(project, { isolation = req.isolation })
  if not cfg then return nil, err end
  local iso = policy.effective(cfg) -- a copy: the session's own
  local lc = { profile_name = req.profile_name, yolo = req.yolo, isolation = iso }
  -- checked as a continuation will read it: a yolo of "no" or a
  -- profile_name with a NUL must not be saved for later
  local ok
  ok, err = policy.encode_launch(lc)
  if not ok then return nil, err end
  return cfg, lc
end

-- The proxy's close removed its own socket file; what is left there now
-- is removed only when dead and only while runtime_dir is still ours.
function Manager:_remove_socket(path)
  if not path then return end
  local ok, err = chain_intact(self.runtime_dir, self._chain)
  if not ok then
    self:_log(err)
    return
  end
  remove_dead_socket(path)
end

-- Ends a running session: proxy closed, socket removed, exactly once.
function Manager:_teardown(s, reason)
  if s.state ~= "running" then return false end
  s.state = "ended"
  s.end_reason = reason
  s.ended_at = os.time()
  local p = s.proxy
  s.proxy = nil
  if p then pcall(p.close, p) end
  self:_remove_socket(s.proxy_socket)
  remove_filter(s.seccomp_file)
  local moved
  if s._end_watch then
    -- the checks isolate runs too (isolation.endcheck)
    local r = endcheck.check(s._end_watch)
    s._end_watch = nil
    for _, l in ipairs(r.lines) do self:_log((s._prefix or ("isolation: session " .. show(s.id) .. ": ")) .. l) end
    moved = r.moved
    s.protect_moved, s.protect_failed = r.moved, r.failed
    s.setid_cleared, s.setid_failed = r.setid_cleared, r.setid_failed
    -- a walk cut short is a failure: on_end gets why (s.end_check_error
    -- and its fourth argument)
    s.end_check_error = r.cut or s.end_check_error
  end
  if self._on_end then
    -- on_end's text is escaped like the log's: the reason, and for each
    -- moved entry the line that reports it (`line`); path and moved_to
    -- stay the real names, for a program that renames them back.
    for _, m in ipairs(moved or {}) do m.line = textmod.escape(m.line or m.path) end
    local ok, err = pcall(self._on_end, s, textmod.escape(reason), moved,
      s.end_check_error and textmod.escape(s.end_check_error))
    if not ok then self:_log("isolation: on_end for session " .. show(s.id) .. " failed: " .. tostring(err)) end
  end
  return true
end

-- A workdir or bind that contains, or lies inside, what this manager uses
-- to build and police sandboxes is refused (isolation.hostpaths): the
-- runtime directory (its filter files and every session's proxy socket;
-- read-only binds too, since connect() needs no write to the mount), the
-- audit log, the bridge program and the module's own files.
function Manager:_check_host_paths(spec)
  local home = os.getenv("HOME")
  local places = { { name = "isolation: workdir", path = spec.workdir } }
  for _, field in ipairs({ "binds", "ro_binds", "tools" }) do
    local list = spec[field]
    for i, p in ipairs(type(list) == "table" and list or {}) do
      if type(p) == "string" then
        if p:sub(1, 6) == "$HOME/" and home and home:sub(1, 1) == "/" then p = home .. p:sub(6) end
        places[#places + 1] = { name = "isolation: " .. field .. "[" .. i .. "]", path = p,
          read_only = field ~= "binds" }
      end
    end
  end
  local guards = {
    { name = "the manager's runtime_dir", path = self.runtime_dir, ro = true,
      why = "it holds the seccomp filter files that launches load and every session's proxy socket" },
  }
  if self._audit_log then
    guards[#guards + 1] = { name = "the audit log (audit_log)", path = self._audit_log,
      why = "the sandbox could delete it and write a forged one, while the proxies append to the unlinked file" }
  end
  for _, g in ipairs(hostpaths.program_guards(spec.bridge_path)) do guards[#guards + 1] = g end
  return hostpaths.check(places, guards)
end

--- Launches a session (docs/reference/sessions.md). Returns the session, or nil, err with
--- nothing left running: no proxy, no socket file, no process.
function Manager:launch(req)
  if type(req) ~= "table" then
    error("bad argument #1 to 'launch' (table expected, got " .. type(req) .. ")", 2)
  end
  if self._closed then return nil, "isolation: this session manager is closed" end
  local id = req.id
  if type(id) ~= "string" or id == "" or id:find("\0", 1, true) then
    return nil, "isolation: id must be a non-empty string without a NUL byte (got " .. show(id) .. ")"
  end
  local old = self._sessions[id]
  if (old and old.state == "running") or self._starting[id] then
    return nil, "isolation: session " .. show(id) .. " is already running"
  end

  local cfg, lc = resolve(req)
  if not cfg then return nil, lc end
  -- true or nil: the registries of default_allow_hosts are admitted; false:
  -- they are not. Anything else is a mistake, never read as either.
  if req.default_hosts ~= nil and type(req.default_hosts) ~= "boolean" then
    return nil, "isolation: default_hosts must be true or false (false: no package registries on the allowlist;"
      .. " got " .. show(req.default_hosts) .. ")"
  end
  local target = req.target
  if target == nil then target = "local" end
  local ok, err = call(isolation.validate_for_target, cfg, target)
  if not ok then return nil, err end

  local spec = { config = cfg }
  for _, k in ipairs(SPEC_KEYS) do spec[k] = req[k] end
  -- the reaper that ends a local sandbox's processes is a program of this
  -- machine: a line for another host runs without it
  if not is_local(target) then spec.reap = false end
  -- the GPU's device nodes are listed on this machine: another host's differ
  if req.gpu == true and not is_local(target) then
    return nil, "isolation: gpu works only on a local target: its device nodes are listed on this machine (got target "
      .. show(target) .. ")"
  end
  local uses_proxy = cfg.network == "deny" -- bwrap, docker and podman alike
  -- bridge pass where it can work: the proxy on this machine takes the
  -- sandbox's listener (an ssh target forwards streams, not descriptors);
  -- bwrap, docker and podman alike (spec/containers_spec.lua)
  local modes = { bwrap = true, docker = true, podman = true }
  if uses_proxy and modes[cfg.mode] and spec.bridge == nil and is_local(target) and isolation.BRIDGE then
    spec.bridge = "pass"
  end
  local path, allow
  -- Credential routes: secrets and agent_keys (values kept only in the
  -- session's proxy; the spec gets the variables).
  local route_list, proxy_routes = {}, nil
  if req.secrets ~= nil and req.secrets ~= NULL then
    if type(req.secrets) ~= "table" then
      return nil, "isolation: secrets must be an array of {env, value, url, header, git} (got " .. show(req.secrets)
        .. ")"
    end
    for i, sec in ipairs(req.secrets) do
      local field = "isolation: secrets[" .. i .. "]"
      if type(sec) ~= "table" then return nil, field .. " must be a table (got " .. show(sec) .. ")" end
      if type(sec.env) ~= "string" or not sec.env:match("^[A-Za-z_][A-Za-z0-9_]*$") then
        return nil, field .. ".env must be a variable name (got " .. show(sec.env) .. ")"
      end
      local name = sec.name or routes.default_name(sec.url)
      if type(name) ~= "string" or not routes.host_of(sec.url) then
        return nil, field .. ".url must be https://HOST[:PORT][/PATH] (got " .. show(sec.url) .. ")"
      end
      route_list[#route_list + 1] = { name = name, env = sec.env, upstream = sec.url, header = sec.header,
        value = sec.value, git = sec.git == true }
    end
  end
  if req.agent_keys ~= nil and req.agent_keys ~= NULL then
    if type(req.agent_keys) ~= "table" then
      return nil, "isolation: agent_keys must be a table NAME -> secret (got " .. show(req.agent_keys) .. ")"
    end
    local r = routes.agent_route(req.agent, req.agent_keys)
    if r then table.insert(route_list, 1, r) end
  end
  if #route_list > 0 then
    if not uses_proxy then
      return nil, "isolation: secrets and agent_keys need network deny (the route is the proxy's)"
    end
    local keys = type(req.agent_keys) == "table" and req.agent_keys or {}
    spec.routes, proxy_routes = routes.apply(route_list, function(n) return keys[n] ~= nil end)
  end
  if uses_proxy then
    allow, err = allowlist(req.agent, req.hook_url, cfg, req.default_hosts)
    if not allow then return nil, err end
    if route_list[1] and route_list[1].url_env then
      -- the agent's model hosts leave the allowlist: only its route reaches them
      local own = call(isolation.default_allow_hosts, req.agent, nil) or {}
      local common = {}
      for _, h in ipairs(call(isolation.default_allow_hosts, "", nil) or {}) do common[h] = true end
      local drop = { [routes.host_of(route_list[1].upstream)] = true }
      for _, h in ipairs(own) do if not common[h] then drop[h] = true end end
      local kept = {}
      for _, h in ipairs(allow) do if not drop[h] then kept[#kept + 1] = h end end
      allow = kept
    end
    path = socket_path(self.runtime_dir, id)
    for _, other in pairs(self._sessions) do
      if other.state == "running" and other.proxy_socket == path then
        return nil, "isolation: session " .. show(id) .. " would share the socket of session "
          .. show(other.id) .. " (" .. path .. ")"
      end
    end
    spec.proxy_socket = path
  end
  -- The socket and the filter go into runtime_dir by path: it must still
  -- be the directory manager() checked, in hands no other user can reach.
  if uses_proxy or (cfg.mode == "bwrap" and is_local(target)) then
    ok, err = chain_intact(self.runtime_dir, self._chain)
    if not ok then return nil, err end
  end
  -- No TIOCSTI, no keyrings, ...: the line opens the filter file for
  -- bwrap. Only where the line runs on this machine: an ssh target has no
  -- such file.
  local seccomp = req.seccomp
  if seccomp == NULL then seccomp = nil end
  if seccomp ~= nil and not FILTERS[seccomp] then
    return nil, "isolation: seccomp must be \"sandbox\" (the default) or \"tty\" (got " .. show(seccomp) .. ")"
  end
  local filter
  if type(req.tools) == "table" and next(req.tools) ~= nil and not (cfg.mode == "bwrap" and is_local(target)) then
    return nil, "isolation: tools work with mode bwrap on a local target only (got mode " .. show(cfg.mode)
      .. ", target " .. show(target) .. "): a container runs the image's programs, another host has its own"
  end
  if cfg.mode == "bwrap" and is_local(target) then
    -- a root launch: what only root may read here is masked inside
    spec.mask_files, spec.mask_dirs = hostpaths.root_masks()
    -- the command's program installed under $HOME, and the request's tools
    -- (false: none), read-only (isolation.tools)
    if req.tools ~= false and req.tools ~= NULL then
      if req.tools ~= nil and type(req.tools) ~= "table" then
        return nil, "isolation: tools must be an array of paths (absolute or $HOME/...) or false (no tools; got "
          .. show(req.tools) .. ")"
      end
      local home = os.getenv("HOME")
      if type(spec.workdir) == "string" and home and home:sub(1, 1) == "/" then
        local plan
        plan, err = tools.plan({ home = home, cwd = spec.workdir, path = os.getenv("PATH"),
          program = tools.program_of(spec.command), given = req.tools, field = "tools" })
        if not plan then return nil, "isolation: " .. err end
        tools.apply(spec, plan, os.getenv("PATH"))
        for _, n in ipairs(plan.notes) do self:_log("isolation: session " .. show(id) .. ": tools: " .. n) end
      end
    end
    filter = FILTERS[seccomp or "sandbox"]
    spec.seccomp_file = session_filter_path(self.runtime_dir, id, filter)
  end
  -- Limits that need a mechanism: the strongest here, or no launch.
  local limits_how
  if cfg.mode == "bwrap" and spec.limits_via == nil and is_local(target) and limits.needs_mechanism(spec.limits) then
    self._limits_checks = self._limits_checks or limits.probe()
    spec.limits_via, limits_how = limits.choose(spec.limits, { checks = self._limits_checks })
    if not spec.limits_via and limits_how then return nil, limits_how end
  end
  -- Protected paths: what only the file system knows is added here, and
  -- only where the line runs on this machine (an ssh target's files are
  -- not ours to look at: the binds still hold there, the end check not).
  local watch
  if is_local(target) and (cfg.mode ~= "") then
    local warnings
    warnings, err = protect.prepare(spec, os.getenv("HOME"))
    if not warnings then return nil, err end
    for _, w in ipairs(warnings) do self:_log("isolation: session " .. show(id) .. ": " .. w) end
    watch, err = endcheck.watch(spec, os.getenv("HOME"))
    if not watch then return nil, err end
  elseif (cfg.mode == "docker" or cfg.mode == "podman") and spec.protect == nil then
    -- docker would create each missing protected path on the target as a
    -- root-owned directory (.git/commondir as a directory breaks git), and
    -- which exist there cannot be known from here
    spec.protect = {}
    self:_log("isolation: session " .. show(id) .. ": protect: not applied: docker on a remote target "
      .. "creates a missing protected path as a directory; pass protect with the paths that exist there")
  end
  -- wrap() is pure: build the command line before anything starts.
  local cmdline, remote_socket
  if uses_proxy and is_tunnel(target) then
    cmdline, remote_socket = tunnel_line(spec, target, path)
  else
    cmdline, err = call(isolation.wrap, spec)
    if cmdline and cfg.mode == "bwrap" and is_local(target) then cmdline = CLOSE_INHERITED .. cmdline end
  end
  if not cmdline then return nil, err or remote_socket end
  if cfg.mode ~= "" and is_local(target) then
    ok, err = check_local_paths(spec)
    if not ok then return nil, err end
    ok, err = self:_check_host_paths(spec)
    if not ok then return nil, err end
  end

  local s = {
    seccomp_file = spec.seccomp_file,
    id = id, state = "running", launch_configuration = lc, badge = policy.badge(cfg),
    isolation = policy.effective(cfg), target = target, cmdline = cmdline, started_at = os.time(),
    remote_socket = remote_socket,
    limits_via = spec.limits_via, limits_how = limits_how,
  }
  local popts
  if uses_proxy then
    popts = { allow = allow, audit_log = self._audit_log,
      accept_listeners = spec.bridge == "pass" and 2 or nil,
      session = self._audit_log and id, max_connections = req.max_connections or self._max_connections,
      routes = proxy_routes, upstream_ca_file = proxy_routes and req.upstream_ca_file or nil,
      upstream_proxy = self._upstream_proxy, route_port = proxy_routes and spec.proxy_port or nil }
  end
  return self:_start(s, { filter = filter, watch = watch, old = old, proxy = popts, socket = path })
end

-- The part of a launch that every caller shares (launch, and launch_spec
-- for isolate): the session's own copy of the filter, the proxy, the
-- launcher, and on any failure the teardown of what was made. `s` is the
-- session to be; `o.proxy` the proxy's options (nil: no proxy; `unix` is
-- set here), `o.watch` the end check's watch, `o.filter` the FILTERS entry
-- to write to s.seccomp_file. Returns s, or nil, err with nothing left.
function Manager:_start(s, o)
  local id = s.id
  s._prefix = s._prefix or ("isolation: session " .. show(id) .. ": ")
  s._end_watch = o.watch
  -- The session's own copy of the filter, written now that nothing can
  -- refuse the launch any more (but the proxy), and removed when it ends.
  if o.filter then
    local ok, err = write_filter(s.seccomp_file, o.filter)
    if not ok then return nil, err end
  end
  if o.proxy then
    -- Thread mode (unless the caller's options give a loop) even when the
    -- manager polls on luv's loop: an agent's egress must not stall while
    -- the orchestrator's Lua thread is busy (a launcher that blocks, a slow
    -- callback), and no Lua error on that thread can take the session
    -- proxies down with it.
    o.proxy.unix = o.socket
    local p, err = call(isolation.proxy, o.proxy)
    if not p then
      remove_filter(s.seccomp_file)
      return nil, err, "proxy"
    end
    s.proxy, s.proxy_socket = p, o.socket
  end

  -- While the launcher runs, the session is "starting": a kill, archive
  -- or close meanwhile (from the launcher itself, or from a callback it
  -- runs) is recorded in s._end_requested and wins once it returns.
  self._starting[id] = s
  local lok, handle, lerr = pcall(o.launcher or self._launcher, s.cmdline, s)
  local ended = s._end_requested or (self._closed and "closed") or nil
  if ended or not lok or not handle then
    if ended and lok and handle then
      s.handle = handle
      local serr = self:_stop_handle(s)
      if serr then self:_log("isolation: " .. serr) end
    end
    s.state = "ended"
    s.end_reason = ended or "launch failed"
    local p = s.proxy
    s.proxy = nil
    if p then pcall(p.close, p) end
    self:_remove_socket(s.proxy_socket)
    remove_filter(s.seccomp_file)
    self._starting[id] = nil
    if o.watch then -- a launcher may fail after it started something
      for _, l in ipairs(endcheck.check(o.watch).lines) do self:_log(s._prefix .. l) end
    end
    if ended == "closed" then return nil, "isolation: this session manager was closed during the launch" end
    if ended then return nil, "isolation: session " .. show(id) .. " was " .. ended .. " during launch" end
    local why = not lok and tostring(handle) or tostring(lerr or "the launcher returned no handle")
    return nil, "isolation: launch of session " .. show(id) .. " failed: " .. why
  end
  self._starting[id] = nil
  s.handle = handle
  if not o.old then self._order[#self._order + 1] = id end
  self._sessions[id] = s
  return s
end

--- Launches a launch spec that its caller built and checked itself
--- (isolate does) as a session of this manager: the same lifecycle as
--- launch (the session's proxy and filter file, the checks of the host's
--- own paths, the end when the processes are gone, the end checks, on_end)
--- without the policy's resolution. Needs the default launcher. `opts`:
--- proxy (the proxy's options but `unix`; nil: no proxy), seccomp
--- ("sandbox" or "tty", bwrap lines), home (whose agent config the end
--- check watches), prefix (shell text run before the line), log_prefix
--- (what the manager's lines about this session start with), stdio (the
--- child's standard streams). Returns the session, or nil, err and, when
--- the proxy refused its options, "proxy" as a third value.
function Manager:launch_spec(id, spec, opts)
  opts = opts or {}
  if type(spec) ~= "table" or type(spec.config) ~= "table" or type(opts) ~= "table" then
    error("bad argument to 'launch_spec' (a launch spec and an options table expected)", 2)
  end
  if not self._default then
    return nil, "isolation: launch_spec needs the default launcher (a manager made without launcher)"
  end
  if self._closed then return nil, "isolation: this session manager is closed" end
  if type(id) ~= "string" or id == "" or id:find("\0", 1, true) then
    return nil, "isolation: id must be a non-empty string without a NUL byte (got " .. show(id) .. ")"
  end
  local old = self._sessions[id]
  if (old and old.state == "running") or self._starting[id] then
    return nil, "isolation: session " .. show(id) .. " is already running"
  end
  spec = protect.copy_spec(spec) -- the caller's stays as it was
  local mode = spec.config.mode
  local path
  if opts.proxy then
    path = socket_path(self.runtime_dir, id)
    spec.proxy_socket = path
  end
  local filter
  if mode == "bwrap" then
    -- the session's own file, opened by the line (never a file another
    -- launch names, nor one a sandbox can reach: runtime_dir is checked
    -- against the places below)
    filter = FILTERS[opts.seccomp or "sandbox"]
    if not filter then
      return nil, "isolation: seccomp must be \"sandbox\" or \"tty\" (got " .. show(opts.seccomp) .. ")"
    end
    spec.seccomp_fd = nil
    spec.seccomp_file = session_filter_path(self.runtime_dir, id, filter)
  end
  local cmdline, err = call(isolation.wrap, spec)
  if not cmdline then return nil, err end
  local ok
  if mode ~= "" then
    ok, err = check_local_paths(spec)
    if not ok then return nil, err end
    ok, err = self:_check_host_paths(spec)
    if not ok then return nil, err end
  end
  local watch
  watch, err = endcheck.watch(spec, opts.home)
  if not watch then return nil, err end
  if opts.orphans then
    -- what the line's reaper leaves if it is killed comes to this process
    ok, err = isolation._subreaper()
    if not ok then return nil, err end
  end
  local s = {
    seccomp_file = spec.seccomp_file, id = id, state = "running", isolation = policy.effective(spec.config),
    target = "local", cmdline = cmdline, started_at = os.time(), limits_via = spec.limits_via,
    _prefix = opts.log_prefix, _sh_prefix = opts.prefix, _stdio = opts.stdio, _orphans = opts.orphans == true,
  }
  return self:_start(s, { filter = filter, watch = watch, old = old, proxy = opts.proxy, socket = path,
    launcher = function(line, sess) return self:_spawn_direct(line, sess) end })
end

local function unknown(id)
  return nil, "isolation: no session " .. show(id)
end

-- The default launcher: the line under bash, as a child of the manager's
-- loop, behind the closer of inherited descriptors and the bridge's
-- reaper (bridge/reap.c). The reaper is the child luv watches: it is a
-- subreaper for everything the line starts, and exits only once every
-- process below it is gone, so its exit is the session's end, whatever
-- the line's processes did to themselves (setsid, double forks; a local
-- bwrap line has a reaper of its own inside, for its PID namespace).
-- The handle is the manager's own; s.exit_status and s.exit_signal say
-- how the line ended.
function Manager:_spawn(cmdline, s)
  local args = { "-c", CLOSE_ABOVE_STDIO, "isolation-close-fds" }
  if isolation.BRIDGE then
    local mode = type(s.isolation) == "table" and s.isolation.mode
    local own = is_local(s.target) and (mode == "bwrap" or mode == "docker" or mode == "podman")
    local grace = DEFAULT_GRACE + (own and OWN_REAPER_MARGIN or 0)
    for _, w in ipairs({ isolation.BRIDGE, "--reap", tostring(grace), "--" }) do args[#args + 1] = w end
  end
  -- The line's shell waits for a line with a redirection (a local bwrap
  -- line opens its seccomp file) instead of exec'ing it; the reaper relays
  -- a stop to it too, and, dying of it, it would end the line at once, its
  -- grace unused. A handler (not an ignore: that would be inherited) makes
  -- it wait for the line and exit with the line's status.
  for _, w in ipairs({ "bash", "-c", "trap : TERM HUP INT QUIT\n" .. cmdline }) do args[#args + 1] = w end
  return self:_spawn_bash(args, s)
end

-- bash with these arguments as the session's child; its exit records how
-- the line ended (s.exit_status, s.exit_signal) and ends the session.
function Manager:_spawn_bash(args, s)
  local handle = {}
  local proc, pid = self._loop.spawn("bash", { args = args, stdio = s._stdio or self._stdio }, function(code, signal)
    handle.exited = true
    s.exit_status, s.exit_signal = code, signal ~= 0 and signal or nil
    if handle.process and not handle.process:is_closing() then handle.process:close() end
    self:_after_exit(s)
  end)
  if not proc then return nil, "cannot start bash: " .. tostring(pid) end
  handle.process, handle.pid = proc, pid
  return handle
end

-- launch_spec's launcher: one shell closes every inherited descriptor
-- above 2, runs the caller's prefix and execs the line. A local sandbox
-- line begins with a reaper of its own (bridge/reap.c), which is then the
-- session's child: a subreaper for everything the line starts, exiting
-- only once all of it is gone, as the default launcher's; without a
-- second one in front, the launch costs what the line alone costs.
function Manager:_spawn_direct(cmdline, s)
  return self:_spawn_bash({ "-c", CLOSE_ABOVE_STDIO_HERE .. (s._sh_prefix or "") .. "exec " .. cmdline }, s)
end

-- launch_spec's `orphans`: this process is a child subreaper, so what
-- the line's own reaper leaves when it is killed from outside comes here
-- (bwrap, then the sandbox's init); it is killed and reaped before the
-- end checks (src/launch/orphans.c). The children of the manager's other
-- running sessions are left to their own exits.
function Manager:_end_orphans(s)
  local keep = {}
  for _, other in pairs(self._sessions) do
    local h = other.handle
    if other ~= s and type(h) == "table" and h.pid and not h.exited then keep[#keep + 1] = h.pid end
  end
  local ok, n, err = pcall(isolation._end_orphans, keep)
  if ok and n then
    if n > 0 then
      self:_log(s._prefix .. "the line's reaper was killed from outside; " .. n .. " process"
        .. (n == 1 and "" or "es") .. " it left (the sandbox's init with everything in its namespace) ended")
    end
    return
  end
  s.end_check_error = s.end_check_error or tostring(ok and err or n)
  self:_log(s._prefix .. "processes of the line outlived it: " .. tostring(ok and err or n))
end

-- The line has ended, and with it every connection of its sandbox; the
-- proxy sees them close a moment later. An event is given when its
-- request ends, so the teardown waits (at most DRAIN_MS) until the proxy
-- has no connection left: the last requests reach on_event, the audit log
-- and isolate's summary before the proxy closes.
local DRAIN_MS = 1000
function Manager:_after_exit(s)
  if s.state ~= "running" then return end
  -- the line's reaper exits only once everything below it is gone; only
  -- one that died of a signal (SIGKILL from outside) can have left any
  if s._orphans and s.exit_signal then self:_end_orphans(s) end
  local p = s.proxy
  local function busy()
    local ok, st = pcall(p.stats, p)
    return ok and type(st) == "table" and (st.active or 0) > 0
  end
  if not (p and busy()) then return self:_teardown(s, s._ending or "exited") end
  local loop = self._loop
  local deadline = loop.now() + DRAIN_MS
  local timer = loop.new_timer()
  timer:start(10, 10, function()
    if s.state == "running" and s.proxy == p and busy() and loop.now() < deadline then return end
    timer:stop()
    timer:close()
    if s.state == "running" then self:_teardown(s, s._ending or "exited") end
  end)
end


-- Whether the manager's loop is idle (not inside uv.run()): only then may
-- the manager run it itself to wait for its children.
function Manager:_loop_idle()
  local loop = self._loop
  return loop ~= nil and loop.loop_mode ~= nil and loop.loop_mode() == nil
end

-- Runs the idle loop until done() or the bound; then one more non-blocking
-- iteration, which ends the closes the exits started. Other handles of the
-- orchestrator's loop run meanwhile, as under its own uv.run().
function Manager:_run_until(done)
  local loop = self._loop
  if not done() then
    local expired = false
    local timer = loop.new_timer()
    timer:start(DEFAULT_END_WAIT_MS, 0, function() expired = true end)
    while not done() and not expired do loop.run("once") end
    timer:stop()
    timer:close()
    if not done() then self:_log("isolation: sessions still running after " .. DEFAULT_END_WAIT_MS // 1000 .. " s") end
  end
  loop.run("nowait")
end

-- Calls the stop function (when one was given) on the session's handle;
-- returns nil, or what went wrong.
function Manager:_stop_handle(s)
  if self._default then
    local h = s.handle
    if h and not h.exited and h.process and not h.process:is_closing() then
      -- the reaper relays SIGTERM to the line's processes and kills what
      -- still runs DEFAULT_GRACE seconds later
      local ok, err = h.process:kill("sigterm")
      if not ok and not h.exited then return "stopping session " .. show(s.id) .. " failed: " .. tostring(err) end
    end
    return nil
  end
  if not self._stop then return nil end
  local ok, r, e = pcall(self._stop, s.handle, s)
  if not ok then
    return "stopping session " .. show(s.id) .. " failed (its proxy is closed): " .. tostring(r)
  elseif r == nil and e ~= nil then
    return "stopping session " .. show(s.id) .. " failed (its proxy is closed): " .. tostring(e)
  end
  return nil
end

-- Stops the process (when a stop function was given), then tears down.
function Manager:_end(id, reason)
  local starting = self._starting[id]
  if starting then
    starting._end_requested = starting._end_requested or reason
    return true
  end
  local s = self._sessions[id]
  if not s then return unknown(id) end
  -- _ending: a stop callback that calls kill (or archive, close) again
  -- must not stop the process a second time, nor recurse.
  if s.state ~= "running" or s._ending then return true end
  s._ending = reason
  local err = self:_stop_handle(s)
  if self._default and not err then
    -- the session ends in the child's exit callback, once its processes
    -- are gone: now, when the loop is idle; else in a later iteration
    if self:_loop_idle() then self:_run_until(function() return s.state ~= "running" end) end
    return true
  end
  self:_teardown(s, reason)
  if err then return nil, "isolation: " .. err end
  return true
end

--- Stops the session's process and tears its proxy down. true, or nil, err.
function Manager:kill(id)
  return self:_end(id, "killed")
end

--- Ends the session like kill and marks it archived. true, or nil, err.
function Manager:archive(id)
  if self._starting[id] then return self:_end(id, "archived") end
  local s = self._sessions[id]
  if not s then return unknown(id) end
  local ok, err = self:_end(id, "archived")
  s.archived = true
  return ok, err
end

--- Ends every running session whose alive probe returns false or nil.
--- Returns how many ended. A probe that raises leaves its session running
--- (and says so on stderr): only a definite "not alive" ends a session.
function Manager:poll()
  if not self._alive then return 0 end
  local n = 0
  for _, id in ipairs(self._order) do
    local s = self._sessions[id]
    if s and s.state == "running" and not s._ending then
      local ok, alive = pcall(self._alive, s.handle, s)
      if not ok then
        self:_log("isolation: alive probe for session " .. show(id) .. " failed: " .. tostring(alive))
      elseif not alive then
        if self:_teardown(s, "exited") then n = n + 1 end
      end
    end
  end
  return n
end

--- The session with this id (running or ended), or nil.
function Manager:get(id)
  return self._sessions[id]
end

--- Every session this manager knows, in launch order (a new array).
function Manager:sessions()
  local out = {}
  for _, id in ipairs(self._order) do out[#out + 1] = self._sessions[id] end
  return out
end

--- Ends every running session (stop, then teardown) and stops polling.
--- Idempotent.
function Manager:close()
  if self._timer then
    local t = self._timer
    self._timer = nil
    t:stop()
    t:close()
    -- A handle's close ends in a later iteration of its loop. Outside a
    -- running loop nothing would end it, and luv's exit-time clean-up then
    -- runs the close callback of a handle whose memory Lua has already
    -- freed (a SIGSEGV at the end of a script that calls close() after
    -- uv.run()). One non-blocking iteration ends the close now; inside a
    -- callback the running loop ends it when the callback returns.
    if self:_loop_idle() then self._loop.run("nowait") end
  end
  self._closed = true
  local err
  local idle = self._default and self:_loop_idle()
  for _, id in ipairs(self._order) do
    local s = self._sessions[id]
    if idle and s and s.state == "running" and not s._ending then
      -- stop them all first, then wait for them together
      s._ending = "closed"
      local e = self:_stop_handle(s)
      if e then err = err or ("isolation: " .. e) end
    else
      local ok, e = self:_end(id, "closed")
      if not ok then err = err or e end
    end
  end
  if idle then
    self:_run_until(function()
      for _, s in pairs(self._sessions) do
        if s.state == "running" or (s.handle and s.handle.process and not s.handle.process:is_closing()) then
          return false
        end
      end
      return true
    end)
  end
  if err then return nil, err end
  return true
end

Manager.__close = Manager.close
-- A manager collected while sessions run (the orchestrator exits without
-- close()) closes their proxies; it does not stop their processes.
Manager.__gc = function(self)
  for _, s in pairs(self._sessions) do
    if s.state == "running" and s.proxy then pcall(s.proxy.close, s.proxy) end
  end
end

return M
