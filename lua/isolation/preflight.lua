-- isolation.preflight: what this machine can do, probed for real.
--
-- The most common failure of a bwrap sandbox is that it does not start and
-- nobody can tell why (an AppArmor rule on Ubuntu, a container without user
-- namespaces, a missing socat). Each check here tries the thing itself (makes
-- the namespace, installs the filter, runs the bridge, launches a deny
-- sandbox against a real proxy) and, when it fails, reads the kernel settings
-- that explain it, so that `fix` names one concrete action.
--
-- Everything the probes read or run is injectable (opts.proc_sys, opts.bwrap,
-- ...), so that specs can present a restricted Ubuntu or a kernel without
-- user namespaces without changing this machine.
local uv = require("luv")
local isolation = require("isolation")

local M = {}

local shquote = require("isolation.text").shquote

-- Runs a shell command line with a time bound; returns the exit status
-- (128+n for signal n) and its output (stdout and stderr together).
local function sh(cmdline, seconds)
  local f = io.popen("timeout -k 1 " .. (seconds or 10) .. " sh -c " .. shquote(cmdline) .. " 2>&1 </dev/null")
  local out = f:read("a")
  local _, how, code = f:close()
  if how == "signal" then code = 128 + code end
  return code, out
end

-- The first line that says something (docker starts its error with a
-- blank line).
local function first_line(s)
  return (s:match("%S[^\n]*") or ""):gsub("%s+$", "")
end

local function read_setting(root, name)
  local f = io.open(root .. "/" .. name, "r")
  if not f then return nil end
  local v = f:read("l")
  f:close()
  return v and v:match("^%s*(.-)%s*$")
end

-- The absolute path of a program: `name` itself when it holds a slash,
-- else the first executable of that name on PATH.
local function find_program(name, path)
  if not name then return nil end
  if name:find("/", 1, true) then
    return uv.fs_access(name, "x") and name or nil
  end
  for dir in (path or os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local p = dir .. "/" .. name
    local st = uv.fs_stat(p)
    if st and st.type == "file" and uv.fs_access(p, "x") then return p end
  end
  return nil
end

--- The absolute path of a program: `name` itself when it holds a slash,
--- else the first executable regular file of that name on `path` (default
--- $PATH); nil when there is none. isolate asks it before every run.
M.find_program = find_program

local function check(name, ok, detail, fix)
  return { name = name, ok = ok and true or false, detail = detail, fix = (not ok) and fix or nil }
end

------------------------------------------------------------------------------
-- bwrap and the namespaces

local APPARMOR_PROFILE = [[
abi <abi/4.0>,
include <tunables/global>
profile bwrap %s flags=(unconfined) {
  userns,
  include if exists <local/bwrap>
}]]

-- Why a user namespace could not be made, from the kernel's settings; the
-- order is the order in which the kernel refuses.
local function userns_diagnosis(env, message)
  local max = read_setting(env.proc_sys, "user/max_user_namespaces")
  if max == "0" then
    return "the kernel allows no user namespaces (user.max_user_namespaces = 0)",
      "sysctl -w user.max_user_namespaces=15000 (and put user.max_user_namespaces=15000 in "
        .. "/etc/sysctl.d/90-userns.conf)"
  end
  local clone = read_setting(env.proc_sys, "kernel/unprivileged_userns_clone")
  if clone == "0" and env.uid ~= 0 then
    return "unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)",
      "sysctl -w kernel.unprivileged_userns_clone=1 (and put it in /etc/sysctl.d/90-userns.conf)"
  end
  local apparmor = read_setting(env.proc_sys, "kernel/apparmor_restrict_unprivileged_userns")
  if apparmor == "1" then
    return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
      "write /etc/apparmor.d/bwrap with the profile below, then run `apparmor_parser -r /etc/apparmor.d/bwrap`:\n"
        .. APPARMOR_PROFILE:format(env.bwrap)
  end
  return "bwrap could not make a user namespace: " .. first_line(message),
    "run where user namespaces are allowed (a container started with them, or the host), or use --mode docker"
end

local function bwrap_checks(env, out)
  if not env.bwrap then
    out[#out + 1] = check("bwrap", false, "bwrap is not on PATH (" .. tostring(env.bwrap_name) .. ")",
      "apt-get install bubblewrap")
    return false
  end
  local code, text = sh(shquote(env.bwrap) .. " --version", env.timeout)
  local version = text:match("bubblewrap%s+([%d%.]+)")
  out[#out + 1] = check("bwrap", code == 0, env.bwrap .. (version and (" " .. version) or (": " .. first_line(text))),
    "apt-get install --reinstall bubblewrap")
  if code ~= 0 then return false end

  local st = uv.fs_stat(env.bwrap)
  local setuid = st and (st.mode & tonumber("4000", 8)) ~= 0
  local base = shquote(env.bwrap) .. " --ro-bind / / --dev /dev --proc /proc "
  local ucode, utext = sh(base .. "--unshare-user --unshare-pid true", env.timeout)
  if setuid then
    out[#out + 1] = check("bwrap setuid", ucode ~= 0,
      env.bwrap .. " is setuid root" .. (ucode == 0 and ", though user namespaces work here without it" or ""),
      "chmod u-s " .. env.bwrap .. " (unprivileged user namespaces work here; the setuid bit only adds attack surface)")
  else
    out[#out + 1] = check("bwrap setuid", true, "not setuid: bwrap runs with the caller's rights")
  end
  local userns_fix
  if ucode == 0 then
    out[#out + 1] = check("user namespaces", true, "bwrap made a user namespace")
  else
    local detail, fix = userns_diagnosis(env, utext)
    -- root's sandboxes need no user namespace (bwrap makes the others
    -- directly); injected settings describe another machine, so no pass.
    local root_here = env.uid == 0 and not env.proc_sys_overridden
    out[#out + 1] = check("user namespaces", root_here, root_here and (detail .. "; not needed when root launches")
      or detail, fix)
    userns_fix = fix
  end

  local ncode, ntext = sh(base .. "--unshare-net --unshare-pid true", env.timeout)
  local netns_fix = select(2, userns_diagnosis(env, ntext))
  if netns_fix == userns_fix then netns_fix = "the fix for user namespaces above" end
  out[#out + 1] = check("network namespace", ncode == 0,
    ncode == 0 and "bwrap made a network namespace (network deny and none can be enforced)"
      or ("bwrap could not make a network namespace: " .. first_line(ntext)), netns_fix)

  local filter = env.tmp .. "/filter.bpf"
  local f = assert(io.open(filter, "wb"))
  f:write(isolation.tty_seccomp_filter())
  f:close()
  local scode, stext = sh(base .. "--seccomp 3 true 3<" .. shquote(filter), env.timeout)
  out[#out + 1] = check("seccomp", scode == 0,
    scode == 0 and "bwrap installed the module's seccomp filter" or ("bwrap --seccomp failed: " .. first_line(stext)),
    "use a kernel built with CONFIG_SECCOMP_FILTER (every distribution kernel is)")
  return ncode == 0
end

------------------------------------------------------------------------------
-- The bridges and a whole deny launch

local function bridge_checks(env, out)
  local builtin_ok = false
  if env.bridge then
    -- Run with no arguments: the program must load (it is static) and
    -- answer with its usage line, exit 2.
    local code, text = sh(shquote(env.bridge), env.timeout)
    builtin_ok = code == 2 and text:find("usage: isolation%-bridge") ~= nil
    out[#out + 1] = check("bridge (built-in)", builtin_ok,
      builtin_ok and env.bridge or (env.bridge .. " does not run: " .. first_line(text)),
      "rebuild it: make build/isolation-bridge (or reinstall the rock)")
  else
    out[#out + 1] = check("bridge (built-in)", false, "isolation.BRIDGE is not set (the program was not found)",
      "make (builds build/isolation-bridge), or luarocks make")
  end
  local socat = find_program(env.socat_name)
  local socat_ok = false
  if socat then
    local code, text = sh(shquote(socat) .. " -V", env.timeout)
    socat_ok = code == 0
    out[#out + 1] = check("bridge (socat)", socat_ok,
      socat .. " " .. (text:match("socat version ([%d%.]+)") or first_line(text)), "apt-get install --reinstall socat")
  else
    out[#out + 1] = check("bridge (socat)", false, "socat is not on PATH (the default bridge)",
      "apt-get install socat, or use --bridge builtin")
  end
  return builtin_ok, socat_ok
end

-- A real deny launch: a proxy that admits nothing, a bwrap sandbox with the
-- network unshared, and a CONNECT from inside that must get the proxy's
-- 403 (and a direct connection that must fail).
local DENY_PROBE = [[
exec 3<>/dev/tcp/127.0.0.1/3128 || { echo "bridge not reached"; exit 3; }
printf 'CONNECT probe.invalid:443 HTTP/1.1\r\nHost: probe.invalid:443\r\n\r\n' >&3
IFS= read -r status <&3
echo "$status"
case "$status" in "HTTP/1.1 403"*) exit 0 ;; *) exit 4 ;; esac
]]

-- Runs DENY_PROBE in a bwrap deny sandbox through `bridge`, against a real
-- proxy made with proxy_opts (it admits nothing). Returns the probe's exit
-- status and output, or nil and a failed check's detail and fix when the
-- proxy or the line could not be made.
local function deny_probe(env, bridge, proxy_opts, name)
  local sock = env.tmp .. "/" .. name .. ".sock"
  proxy_opts.allow, proxy_opts.unix = {}, sock
  local p, perr = isolation.proxy(proxy_opts)
  if not p then
    return nil, "the proxy did not start: " .. tostring(perr), "check that " .. env.tmp .. " can hold a unix socket"
  end
  local work = env.tmp .. "/work"
  local home = env.tmp .. "/home"
  uv.fs_mkdir(work, tonumber("700", 8))
  uv.fs_mkdir(home, tonumber("700", 8))
  local line, lerr = isolation.wrap{
    config = { mode = "bwrap", network = "deny" }, workdir = work, command = DENY_PROBE,
    proxy_socket = sock, bridge = bridge, bridge_path = env.bridge,
  }
  local code, text
  if line then
    -- The probe's own HOME: the check is about the machine, not about the
    -- environment doctor happens to run in.
    code, text = sh("HOME=" .. shquote(home) .. "; PATH=" .. shquote(env.path_for_bwrap)
      .. "; export HOME PATH; exec " .. line, env.timeout)
  end
  p:close()
  if not line then
    return nil, "the launch line could not be built: " .. tostring(lerr), "report this as a bug"
  end
  return code, text
end

local function deny_launch_check(env, out, bridge, why_not)
  if not bridge then
    out[#out + 1] = check("deny launch", false, "not tried: " .. why_not, "fix the checks above first")
    return
  end
  local code, text, fix = deny_probe(env, bridge, {}, "proxy")
  if not code then
    out[#out + 1] = check("deny launch", false, text, fix)
    return
  end
  local ok = code == 0
  out[#out + 1] = check("deny launch", ok,
    ok and ("a bwrap sandbox with the network denied reached the proxy through the " .. bridge
      .. " bridge and got its 403")
      or ("a deny sandbox failed (exit " .. tostring(code) .. "): " .. first_line(text)),
    "fix the first failed check above; then run `isolate doctor` again")
end

-- What to do when the pass handover failed, from the starter's message
-- (bridge/pass.c); the built-in relay needs no descriptor passing.
local PASS_FALLBACK = "meanwhile use the relay: isolate --bridge builtin, or bridge = \"builtin\" in the launch spec"

local function pass_fix(text)
  if text:find("usage: isolation-bridge", 1, true) then
    return "the bridge program has no --pass (an older build): rebuild it: make build/isolation-bridge "
      .. "(or reinstall the rock); " .. PASS_FALLBACK
  elseif text:find("does not accept listeners", 1, true) then
    return "the proxy must be made with accept_listeners >= 2 (isolate and the session manager's proxies are); "
      .. PASS_FALLBACK
  elseif text:find("takes no descriptors", 1, true) then
    return "the proxy must be made with accept_listeners >= 2 and take the starter's listeners first (isolate's "
      .. "and the session manager's proxies do); " .. PASS_FALLBACK
  elseif text:find("refused the listener", 1, true) then
    return "the proxy refused what arrived as the listener (the reason above): something between the sandbox and "
      .. "the proxy changed the descriptor; report it with that line; " .. PASS_FALLBACK
  elseif text:find("did not take the listener", 1, true) or text:find("handover", 1, true) then
    return "a security module or seccomp policy may forbid passing descriptors over unix sockets (SCM_RIGHTS): "
      .. "allow it for bwrap's sandboxes; " .. PASS_FALLBACK
  end
  return "fix the first failed check above (the built-in bridge must run); " .. PASS_FALLBACK
end

-- The pass bridge (isolate's and the session manager's default under bwrap
-- deny): a deny sandbox whose starter makes the loopback listeners (HTTP
-- and SOCKS5), hands them to a real proxy (accept_listeners) over the bound
-- socket, and execs the
-- probe, whose CONNECT the proxy accepts on that listener and answers 403.
local function pass_check(env, out, why_not)
  if why_not then
    out[#out + 1] = check("bridge (pass)", false, "not tried: " .. why_not, "fix the checks above first")
    return
  end
  local code, text, fix = deny_probe(env, "pass", { accept_listeners = env.pass_listeners }, "pass")
  if not code then
    out[#out + 1] = check("bridge (pass)", false, text, fix)
    return
  end
  local ok = code == 0
  out[#out + 1] = check("bridge (pass)", ok,
    ok and "a deny sandbox handed its listener to the proxy (SCM_RIGHTS); the proxy accepted the probe's "
      .. "connection on it and answered 403"
      or ("the pass handover failed (exit " .. tostring(code) .. "): " .. first_line(text)),
    pass_fix(text))
end

-- The proxy's socket refuses descriptors (SO_PASSRIGHTS, Linux 6.16): else
-- a sandboxed process can send one with a request, and the kernel's close
-- of it in the proxy's thread can wait (a TCP socket with SO_LINGER and
-- unsent bytes: up to its linger time), stopping that loop's proxies.
-- Tried for real, as the other probes are (a child process: no luv loop is
-- run here, which a caller inside uv.run() could not allow): the pass
-- starter in a deny sandbox hands its listeners to a proxy that takes none.
-- The kernel refusing the send, the starter says "takes no descriptors";
-- a proxy that received them answers the message as HTTP (400), and the
-- starter says "does not accept listeners".
local function rights_check(env, out, why_not)
  local name = "proxy refuses descriptors"
  if why_not then
    out[#out + 1] = check(name, false, "not tried: " .. why_not, "fix the checks above first")
    return
  end
  local code, text, fix = deny_probe(env, "pass", { accept_listeners = 0 }, "rights")
  if not code then
    out[#out + 1] = check(name, false, text, fix)
    return
  end
  local refused = text:find("takes no descriptors", 1, true) ~= nil
  local through = text:find("does not accept listeners", 1, true) ~= nil
  out[#out + 1] = check(name, refused,
    refused and "the kernel refuses a descriptor sent to the proxy's socket (SO_PASSRIGHTS): no sandboxed "
      .. "process can make the proxy's thread wait on one"
      or through and ("a descriptor sent to the proxy's socket got through: without SO_PASSRIGHTS (Linux 6.16) "
        .. "a sandboxed process can stall its proxy's loop by sending a lingering TCP socket")
      or ("could not tell (exit " .. tostring(code) .. "): " .. first_line(text)),
    through and "run a kernel 6.16 or later (deny launches work without it; only this stall stays open)"
      or "fix the bridge (pass) check above first")
end

------------------------------------------------------------------------------
-- The terminal, limits, container engines

local function tty_check(env, out)
  local v = read_setting(env.proc_sys, "dev/tty/legacy_tiocsti")
  if v == nil then
    out[#out + 1] = check("tty injection", false,
      "the kernel has no dev.tty.legacy_tiocsti (before 6.2): TIOCSTI always works, so only the seccomp "
        .. "filter stops it",
      "use isolate or the session manager (they pass the filter), or a kernel 6.2 or later")
  else
    out[#out + 1] = check("tty injection", v == "0",
      v == "0" and "dev.tty.legacy_tiocsti = 0: the kernel refuses TIOCSTI"
        or "dev.tty.legacy_tiocsti = " .. v
          .. ": TIOCSTI works; isolate and the session manager refuse it with seccomp",
      "sysctl -w dev.tty.legacy_tiocsti=0 (and put it in /etc/sysctl.d/90-tty.conf)")
  end
end

-- A cgroup the limits could live in, found as the cgroup prologue of the
-- launch line finds it (src/launch/launch_limits.c): a child of the cgroup this
-- process is in, in the v1 memory and pids hierarchies where they are
-- mounted, else in cgroup v2 where its cgroup.controllers offers them; in
-- either case one we can make a child in that gets the limit files.
local function cgroup_probe(root)
  -- Makes a child of dir and tells whether it holds `file` (the controller's
  -- limit file: the root of a hierarchy has none of its own).
  local function child_has(dir, file)
    local child = dir .. "/isolation-preflight." .. uv.os_getpid()
    if not uv.fs_mkdir(child, tonumber("755", 8)) then return false end
    local has = uv.fs_stat(child .. "/" .. file) ~= nil
    uv.fs_rmdir(child)
    return has
  end
  local own, v2path = {}, nil
  local f = io.open("/proc/self/cgroup")
  for line in (f and f:read("a") or ""):gmatch("[^\n]+") do
    local ctls, rel = line:match("^%d+:([^:]*):(.*)$")
    if ctls == "" then v2path = rel end
    for c in (ctls or ""):gmatch("[^,]+") do own[c] = rel end
  end
  if f then f:close() end
  local function v1(ctl)
    return own[ctl] and uv.fs_stat(root .. "/" .. ctl) and (root .. "/" .. ctl .. own[ctl]:gsub("/$", "")) or nil
  end
  local mem, pids, cpu = v1("memory"), v1("pids"), v1("cpu")
  if mem and pids and child_has(mem, "memory.limit_in_bytes") and child_has(pids, "pids.max") then
    local with_cpu = cpu and child_has(cpu, "cpu.cfs_quota_us")
    return true, "cgroup v1 memory, pids" .. (with_cpu and ", cpu" or " (no cpu: limits.cpu cannot be held)")
      .. ": a child of " .. mem .. " and of " .. pids, with_cpu
  end
  for _, v2 in ipairs({ root, root .. "/unified" }) do
    local controllers = read_setting(v2, "cgroup.controllers")
    if controllers and controllers:find("memory") and controllers:find("pids") and v2path then
      local dir = v2 .. v2path:gsub("/$", "")
      if child_has(dir, "cgroup.procs") then
        return true, "cgroup v2 under " .. dir .. " (" .. controllers .. ")", controllers:find("cpu") ~= nil
      end
    end
  end
  return false, "no writable cgroup with the memory and pids controllers under " .. root
end

local function limits_checks(env, out)
  local code, text = 127, "systemd-run is not on PATH"
  if find_program(env.systemd_run_name) then
    code, text = sh(shquote(env.systemd_run_name) .. " --user --scope --quiet true", env.timeout)
  end
  out[#out + 1] = check("limits: systemd", code == 0,
    code == 0 and "a systemd user scope can be made" or ("no systemd user scope: " .. first_line(text)),
    "log in through a session with a systemd user manager (loginctl enable-linger USER), or use another mechanism")
  local ok, detail, cpu = cgroup_probe(env.cgroup_root)
  out[#out + 1] = check("limits: cgroup", ok, detail,
    "run as root, or delegate a cgroup v2 subtree with the memory and pids controllers to this user")
  out[#out].cpu = ok and cpu or nil -- isolation.limits.choose: whether cpu can be held there
  local prlimit = find_program(env.prlimit_name)
  out[#out + 1] = check("limits: rlimit", prlimit ~= nil,
    prlimit and (prlimit .. " (per-process limits: address space, open files; not a per-sandbox total)")
      or "prlimit is not on PATH", "apt-get install util-linux")
end

local function engine_check(env, out, name, program, fix)
  local path = find_program(program)
  if not path then
    out[#out + 1] = check(name, false, program .. " is not on PATH", fix)
    return
  end
  local code, text = sh(shquote(path) .. " version --format '{{.Server.Version}}'", env.timeout)
  out[#out + 1] = check(name, code == 0,
    code == 0 and (path .. ", server " .. first_line(text)) or (path .. ": no server answers: " .. first_line(text)),
    name == "docker" and "start the Docker daemon (or give this user access to its socket)"
      or "check `podman info` (rootless podman needs newuidmap and subuid ranges)")
end

------------------------------------------------------------------------------

local OPTION_TYPES = {
  proc_sys = "string", bwrap = "string", socat = "string", bridge = "string", cgroup_root = "string",
  systemd_run = "string", prlimit = "string", docker = "string", podman = "string", timeout = "number",
  uid = "number", engines = "boolean", pass_listeners = "number",
}

------------------------------------------------------------------------------
-- Statuses: ok, warn, fail

-- What isolate cannot run without: a failure of one of these is `fail`.
local REQUIRED = {
  bwrap = true, ["user namespaces"] = true, ["network namespace"] = true, seccomp = true, ["deny launch"] = true,
}
-- Optional, or a risk the defaults already close: a failure is `warn`.
-- setuid bwrap works (it only adds attack surface); TIOCSTI is refused by
-- the seccomp filter isolate and the session manager pass; limits are
-- asked for with --memory and the like, and one mechanism suffices; docker
-- and podman serve only their modes.
local OPTIONAL = {
  ["bwrap setuid"] = true, ["tty injection"] = true, ["limits: systemd"] = true, ["limits: cgroup"] = true,
  ["limits: rlimit"] = true, docker = true, podman = true,
}

-- Sets each check's `status`: "ok" when it passed, else "fail" or "warn"
-- by what a failure costs a launch here. `bridge_program`: isolation.BRIDGE
-- (or the injected bridge) exists, so that isolate's default bridge is
-- pass, which runs it; without it isolate relays through socat.
local function classify(checks, bridge_program)
  local by = {}
  for _, c in ipairs(checks) do by[c.name] = c end
  local function ok(name) return by[name] ~= nil and by[name].ok end
  for _, c in ipairs(checks) do
    local n = c.name
    local status
    if c.ok then
      status = "ok"
    elseif REQUIRED[n] then
      status = "fail"
    elseif OPTIONAL[n] then
      status = "warn"
    elseif n == "bridge (built-in)" then
      -- a program that exists but does not run breaks the default (pass)
      status = (not bridge_program and ok("bridge (socat)")) and "warn" or "fail"
    elseif n == "bridge (socat)" then
      -- only --bridge socat, and the fallback when the program is missing
      status = ok("bridge (built-in)") and "warn" or "fail"
    elseif n == "bridge (pass)" or n == "proxy refuses descriptors" then
      if c.detail:find("^not tried: the built%-in bridge") then
        status = by["bridge (built-in)"].status -- pass is not isolate's default then
      elseif c.detail:find("^not tried:") or n == "bridge (pass)" then
        status = "fail"
      else
        -- the kernel lets a descriptor through (before Linux 6.16): deny
        -- launches work; only the stall the check names stays open
        status = "warn"
      end
    else
      status = "fail"
    end
    c.status = status
  end
  return checks
end

--- The checks, in a stable order: an array of {name, ok, status, detail,
--- fix}; status "ok", "warn" (failed, but optional or handled by the
--- defaults) or "fail" (isolate's default launch needs it).
function M.run(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("bad argument #1 to 'preflight' (table expected, got " .. type(opts) .. ")", 2)
  end
  for k, v in pairs(opts) do
    if OPTION_TYPES[k] == nil then error("bad argument #1 to 'preflight' (unknown option " .. tostring(k) .. ")", 2) end
    if type(v) ~= OPTION_TYPES[k] then
      error("bad argument #1 to 'preflight' (" .. k .. ": " .. OPTION_TYPES[k] .. " expected, got "
        .. type(v) .. ")", 2)
    end
  end
  local tmp = assert(uv.fs_mkdtemp((os.getenv("TMPDIR") or "/tmp") .. "/isolation-preflight.XXXXXX"))
  local env = {
    proc_sys = opts.proc_sys or "/proc/sys", proc_sys_overridden = opts.proc_sys ~= nil,
    bwrap_name = opts.bwrap or "bwrap", socat_name = opts.socat or "socat",
    bridge = opts.bridge or isolation.BRIDGE, cgroup_root = opts.cgroup_root or "/sys/fs/cgroup",
    systemd_run_name = opts.systemd_run or "systemd-run", prlimit_name = opts.prlimit or "prlimit",
    timeout = opts.timeout or 10, uid = opts.uid or uv.getuid(), tmp = tmp,
    pass_listeners = opts.pass_listeners or 2, -- HTTP and SOCKS5
    path_for_bwrap = os.getenv("PATH") or "/usr/sbin:/usr/bin:/sbin:/bin",
  }
  env.bwrap = find_program(env.bwrap_name)
  if env.bwrap and env.bwrap_name:find("/", 1, true) then
    -- An injected bwrap must be the one the line runs too.
    env.path_for_bwrap = env.bwrap:match("^(.*)/") .. ":" .. env.path_for_bwrap
  end
  local out = {}
  local ok_run, err = pcall(function()
    local netns = bwrap_checks(env, out)
    local builtin, socat = bridge_checks(env, out)
    local bridge = builtin and "builtin" or socat and "socat" or nil
    deny_launch_check(env, out, netns and bridge or nil,
      not env.bwrap and "no bwrap" or not netns and "no network namespace" or "no bridge runs")
    pass_check(env, out, not env.bwrap and "no bwrap" or not netns and "no network namespace"
      or not builtin and "the built-in bridge does not run (the pass starter is the same program)" or nil)
    rights_check(env, out, not env.bwrap and "no bwrap" or not netns and "no network namespace"
      or not builtin and "the built-in bridge does not run (the pass starter is the same program)" or nil)
    tty_check(env, out)
    limits_checks(env, out)
    if opts.engines ~= false then
      engine_check(env, out, "docker", opts.docker or "docker", "apt-get install docker.io")
      engine_check(env, out, "podman", opts.podman or "podman", "apt-get install podman")
    end
  end)
  sh("rm -rf " .. shquote(tmp))
  if not ok_run then error(err, 0) end
  return classify(out, env.bridge ~= nil)
end

--- Only the "limits: *" checks (systemd, cgroup, rlimit): cheap enough to
--- run before each launch; isolation.limits.choose picks from them.
--- opts: cgroup_root, systemd_run, prlimit, timeout (as for run).
function M.limits_checks(opts)
  opts = opts or {}
  local env = {
    cgroup_root = opts.cgroup_root or "/sys/fs/cgroup", systemd_run_name = opts.systemd_run or "systemd-run",
    prlimit_name = opts.prlimit or "prlimit", timeout = opts.timeout or 10,
  }
  local out = {}
  limits_checks(env, out)
  return out
end

--- Why bwrap cannot start a sandbox here: the first failed check among
--- bwrap itself, the namespaces and seccomp (user namespaces only when the
--- caller is not root, who does not need them), or nil when they all pass,
--- i.e. bwrap did start and the command's own status is what came back.
--- Cheap enough (a few bwrap starts) to run after a launch that failed.
function M.why_bwrap_fails(opts)
  opts = opts or {}
  local tmp = assert(uv.fs_mkdtemp((os.getenv("TMPDIR") or "/tmp") .. "/isolation-preflight.XXXXXX"))
  local env = {
    proc_sys = opts.proc_sys or "/proc/sys", bwrap_name = opts.bwrap or "bwrap", timeout = opts.timeout or 10,
    uid = opts.uid or uv.getuid(), tmp = tmp,
  }
  env.bwrap = find_program(env.bwrap_name)
  local out = {}
  local ok, err = pcall(bwrap_checks, env, out)
  sh("rm -rf " .. shquote(tmp))
  if not ok then error(err, 0) end
  for _, c in ipairs(out) do
    if not c.ok and c.name ~= "bwrap setuid" and not (c.name == "network namespace" and opts.network == false) then
      return c
    end
  end
  return nil
end

--- True when a bwrap launch with the network denied works here.
function M.deny_works(checks)
  for _, c in ipairs(checks) do
    if c.name == "deny launch" then return c.ok end
  end
  return false
end

--- The checks that failed (status "fail") and those that warn, counted.
function M.counts(checks)
  local fails, warns = 0, 0
  for _, c in ipairs(checks) do
    if c.status == "fail" or (c.status == nil and not c.ok) then fails = fails + 1
    elseif c.status == "warn" then warns = warns + 1 end
  end
  return fails, warns
end

local LABEL = { ok = "ok", warn = "warn", fail = "FAIL" }

--- The checks as a table a person reads (ok, warn, FAIL), with each
--- failed or warning check's fix.
function M.format(checks)
  local width = 0
  for _, c in ipairs(checks) do width = math.max(width, #c.name) end
  local lines = {}
  for _, c in ipairs(checks) do
    local label = LABEL[c.status] or (c.ok and "ok" or "FAIL")
    lines[#lines + 1] = string.format("%-4s  %-" .. width .. "s  %s", label, c.name, c.detail)
    if c.fix then
      local first = true
      for l in (c.fix .. "\n"):gmatch("(.-)\n") do
        lines[#lines + 1] = string.rep(" ", 6 + width) .. (first and "  fix: " or "       ") .. l
        first = false
      end
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

return M
