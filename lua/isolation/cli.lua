-- isolation.cli: the `isolate` command (bin/isolate is a few lines over
-- it, as busted's bin/busted is over busted.runner). `isolate --help` is
-- the reference; docs/reference/cli.md the details.
--
-- Runs one command sandboxed (bwrap or docker), behind the egress
-- allowlist proxy when the network is denied; `isolate proxy` runs a proxy
-- in the foreground; `isolate doctor` probes the machine.
--
-- Nothing here calls os.exit: a usage error or a failure raises an Exit
-- value that main() turns into the message and the status it returns, so
-- that the option parser, the config file reader and the process table
-- can be called in-process (spec/cli_spec.lua) and return nil, message,
-- status instead of ending the caller.
local uv = require("luv")
local isolation = require("isolation")
local protect = require("isolation.protect")
local hostpaths = require("isolation.hostpaths")
local setid = require("isolation.setid")
local json = require("isolation.json")
local textmod = require("isolation.text")
local toolsmod = require("isolation.tools")

local M = {}

-- Every line isolate writes to stderr goes through here: its pieces joined
-- and escaped as one line (isolation.text), so that no byte a sandbox put
-- in a path or a name (ESC, BEL, CR, LF, 0x9b) reaches the terminal or
-- starts a line of its own. The proxy's event lines are the exception:
-- the proxy escaped their fields already, where it made the event, in the
-- same format (src/proxy/proxy_event.c): escaping them again would double
-- each backslash.
local function say(...)
  io.stderr:write(textmod.escape(table.concat({ ... })), "\n")
end

local EXIT_USAGE = 2
-- isolate's own failures at run time (the proxy cannot start, bash cannot be
-- spawned): 125, as env(1) and timeout(1) do, so that they are not taken
-- for the command's own status.
local EXIT_FAILURE = 125

local HELP = [[
Usage: isolate [options] -- command [args...]
       isolate proxy (--unix PATH | --listen ADDR) --allow PATTERN... [options]
       isolate doctor

Runs one command in a sandbox and exits with its status (128+n after signal
n). The command is the arguments after --, run exactly as given (each is
shell-quoted into the `bash -c` line the sandbox runs). With the network
denied under bwrap, an egress allowlist proxy runs for the command's
lifetime on a unix socket in a private temporary directory, bridged into
the sandbox's empty network namespace; HTTP_PROXY and HTTPS_PROXY point at
it inside.

Options:
  --mode bwrap|docker|podman|none
                             the tier (default bwrap); podman: rootless, with
                             --userns=keep-id
  --network allow|deny|none  default deny (only the allowlist proxy, for bwrap,
                             docker and podman); none: no route at all; allow
                             with --mode none, which cannot enforce either
  --allow-host PATTERN       repeatable: a host the proxy admits, added to the
                             defaults (the agent's model API hosts, package
                             registries, the --hook-url host). Patterns: name,
                             *.name, name:port, 10.0.0.1, [::1]:8080, 10.0.0.0/8
  --no-default-hosts         the package registries are not admitted: the
                             allowlist is --allow-host, the config's
                             allow_hosts, the --hook-url host and the agent's
                             model API hosts
  --agent NAME               claude, codex, gemini or another name: binds the
                             agent's own config under $HOME, admits its model API
  --workdir DIR              bound read-write, the start directory (default: the
                             current directory); never $HOME or above it, nor
                             in a system directory (/etc, /usr, /run, ...)
  --bind PATH                repeatable: bound read-write at the same path
  --ro-bind PATH             repeatable: bound read-only at the same path
                             (PATH may start with the literal token $HOME/)
  --gpu                      the host's GPU device nodes inside (/dev/nvidia*,
                             /dev/nvidia-caps, /dev/dri, /dev/kfd, /dev/dxg, those
                             present), nothing else of its /dev; bwrap, docker
                             and podman
  --tool PATH                repeatable: an installation (a directory, or a program
                             whose installation is found) bound read-only at the
                             same path, its bin directory first on PATH; bwrap
  --no-tools                 bind no tools: the command's program is not looked
                             for under $HOME (by default its installation there,
                             nvm, pyenv, rustup, claude's, ..., is bound read-only)
  --protect PATH             repeatable: a path relative to the workdir, read-only
                             inside, added to isolation.PROTECTED (.git/hooks,
                             .git/config, .vscode, .claude/settings.json, ...)
  --no-protect               no protected paths: the sandbox may write what the
                             host runs later (.git/hooks, .git/config, ...)
  --agent-config read-write|read-only
                             the agent's own config: read-write (default; the
                             parts that name commands read-only) or read-only
  --ca-cert FILE             a CA certificate, bound read-only as a single file
  --bridge pass|builtin|socat
                             the in-sandbox way to the proxy (default pass: the
                             sandbox's listener is handed to the proxy, which
                             accepts on it; builtin and socat relay each
                             connection; socat when the bridge program is
                             not built)
  --seccomp sandbox|tty      bwrap's system-call filter (default sandbox: no
                             TIOCSTI/TIOCLINUX, no kernel keyrings, ...; see
                             docs/reference/launch-spec.md); tty refuses only
                             the two ioctls
  --target local|ssh|pct|sandbox
                             checked against the config before anything starts
                             (default local); isolate itself runs commands on
                             this machine, so another target needs --dry-run
  --config FILE              a JSON config {"mode", "network", "docker_image",
                             "allow_hosts"}; options on the line win, and
                             --allow-host adds to its allow_hosts
  --hook-url URL             the controller's hook URL: its host:port is admitted
  --allow-private            let admitted names resolve to loopback, link-local,
                             private or reserved addresses (the proxy refuses
                             them otherwise; an IP/CIDR --allow-host admits one)
  --resolve NAME:ADDR[,ADDR] the proxy resolves NAME to these addresses instead of
                             asking DNS (repeatable; like curl --resolve)
  --env NAME                 repeatable: pass NAME from this environment into the
                             sandbox (only when set here). The sandbox starts
                             clean: PATH, the locale, TERM, TZ, USER, LOGNAME,
                             HOME and the --agent's own keys, nothing else
  --setenv NAME=VALUE        repeatable: set NAME to VALUE inside
  --inherit-env              pass the whole environment, secrets included
  --secret [NAME=]ENV@URL[#HEADER]
                             repeatable, deny only: a credential route; the
                             proxy adds ENV's value (bearer, basic:USER or a
                             header name) to requests for
                             $ISOLATION_ROUTE_<NAME>; inside, ENV is only a
                             placeholder
  --git                      the --secret routes also serve git (insteadOf)
  --upstream-ca FILE         verify the routes' upstreams against this PEM file
  --no-routes                with --agent: pass its key in, keep its API hosts
  --memory SIZE              the sandbox's memory in all (SIZE: bytes, or 512M, 2G)
  --pids N                   at most N processes in the sandbox (its own shell and
                             bwrap's count)
  --tmpfs-size SIZE          the size of each of the private /tmp and $HOME
  --cpus N                   at most N cores (1.5: one and a half)
  --time SECONDS             end the command after SECONDS (SIGTERM, SIGKILL 5 s
                             later); the exit status is then 124
                             --memory, --pids and --cpus under bwrap need a
                             systemd user scope, a writable cgroup, or rlimits:
                             isolate picks the strongest that works here and
                             says which; none is an error (exit 125)
  --dry-run                  print the mounts, the allowlist and the argv (one
                             element a line); run nothing
  --json                     with --dry-run: print only the argv, as a JSON array
  --verbose                  print each proxy decision as it happens (stderr)
  --learn                    learn mode: the proxy admits hosts that are not on
                             the allowlist (the address rule, strict parsing and
                             the TLS server name check still apply) and isolate
                             prints at exit the --allow-host options, and a
                             --config JSON, that would have admitted them
  --log FILE                 the audit log: one JSON object a line per proxy
                             decision, appended as it happens (created 0600)
  --help, --version

Without --verbose, isolate prints on exit which hosts the proxy denied:
those not on the allowlist (admit with --allow-host HOST) apart from
allowed names refused for the address they resolve to (admit with an
IP/CIDR --allow-host or --allow-private). SIGINT, SIGQUIT, SIGTERM and SIGHUP
reach the command (under bwrap: the sandbox's processes, not bwrap, which
Ctrl-C cannot kill). Only descriptors 0, 1 and 2 enter the sandbox. Under
bwrap a seccomp filter refuses TIOCSTI and TIOCLINUX, so that the command
cannot type into your terminal, and the kernel keyrings (bwrap reads it on
descriptor 3). Exit
status: the command's; 2 for a usage error; 125 when isolate itself fails
(the proxy cannot start, bwrap is not on PATH: `isolate doctor` says what
is missing).

Examples:
  isolate -- make test                      bwrap, network denied, the proxy
  isolate --allow-host '*.example.com' --agent claude -- claude
  isolate --network allow -- ./build.sh     filesystem containment only
  isolate --dry-run -- npm ci               what would be mounted and run

isolate proxy: runs an allowlist proxy in the foreground. Prints its
address ("unix:/path" or "127.0.0.1:PORT") as the first line of stdout,
then one line per request on stderr, until SIGINT or SIGTERM; removes its
socket and exits 0.
  --unix PATH                listen on a unix socket (created 0600)
  --listen ADDR              127.0.0.1:PORT or [::1]:PORT (0: any free port)
  --allow PATTERN...         the allowlist (repeatable; patterns may follow)
  --allow-private            let names resolve to private/loopback addresses
  --no-token                 --listen: accept any local client (no token)
  --accept-listeners N       --unix: hold up to N (0 to 64) listeners that
                             sandboxes hand over the socket (bridge pass)
  --quiet                    no per-request lines
With --listen the proxy makes a random token that every request must
carry (any local user can reach a TCP port): the second line of stdout is
the proxy URL with it (http://isolation:TOKEN@127.0.0.1:PORT; the same
user and password work for socks5h://).
]]

-- One line; the library's "isolation: " prefixes dropped (isolate says who).
local function one_line(msg)
  return (tostring(msg):gsub("^isolation: ", ""):gsub(": isolation: ", ": "):gsub("%s*\n%s*", " "))
end

-- What ends isolate: raised, caught by main() (or by the wrappers the
-- specs call), never by anything in between.
local Exit = { __name = "isolation.cli.exit" }
Exit.__tostring = function(e) return "isolate: exit " .. e.status .. (e.message and (": " .. e.message) or "") end

local function exit_with(status, msg)
  error(setmetatable({ status = status, message = msg and one_line(msg) }, Exit), 0)
end

local function die_usage(msg) exit_with(EXIT_USAGE, msg) end

local function die(msg) exit_with(EXIT_FAILURE, msg) end

-- Quotes one word for bash. Plain words stay bare so that --dry-run reads
-- well; anything else is single-quoted, where only ' itself needs care.
-- A bare word must not be a reserved word in command position, nor hold
-- `=` (an assignment), `~`, globs or any other character bash interprets.
local RESERVED = {}
for w in ([=[! case coproc do done elif else esac fi for function if in select then
  time until while { } [[ ]] ]=]):gmatch("%S+") do RESERVED[w] = true end

local function shquote(s, first)
  if s:match("^[%w@%%+:,./_-]+$") and not (first and RESERVED[s]) then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function command_line(words)
  local out = {}
  for i, w in ipairs(words) do out[i] = shquote(w, i == 1) end
  return table.concat(out, " ")
end

-- JSON text of an array of strings, each written by the codec policy and
-- session use (cjson would write "/" as "\/"), ", " between them as
-- isolate has always printed; nil, err for a string that is not UTF-8.
local function json_array(list, where)
  local out = {}
  for i, s in ipairs(list) do
    local text, err = json.encode(s, where .. "[" .. i .. "]")
    if not text then return nil, err end
    out[i] = text
  end
  return "[" .. table.concat(out, ", ") .. "]"
end

-- config()'s message for one pattern, told in terms of the option.
local function pattern_error(opt, pattern, err)
  local msg, n = tostring(err):gsub("^isolation: ", ""):gsub("^allow_hosts%[1%]", opt)
  if n == 0 then msg = string.format("%s %q: %s", opt, pattern, msg) end
  return msg
end

-- Where the proxy's private directory goes: $TMPDIR when it is absolute and
-- short enough for the socket's path to fit a unix address (108 bytes),
-- else /tmp, else $XDG_RUNTIME_DIR; never inside a place the sandbox can
-- write (`avoid`: the workdir and the binds, hostpaths.check's places),
-- where the sandbox would reach the socket's directory (hostpaths). nil
-- when every candidate is inside one.
local function tmp_base(avoid)
  local candidates = {}
  local function add(t)
    if t and t:sub(1, 1) == "/" then
      t = t:gsub("(.)/+$", "%1")
      if #t + #"/isolate.XXXXXX/proxy.sock" < 108 then candidates[#candidates + 1] = t end
    end
  end
  add(os.getenv("TMPDIR"))
  add("/tmp")
  add(os.getenv("XDG_RUNTIME_DIR"))
  for _, t in ipairs(candidates) do
    if hostpaths.check(avoid or {}, { { name = "the proxy's directory", path = t .. "/isolate.XXXXXX", why = "" } })
    then
      return t
    end
  end
  return nil
end

local function absolute(path, cwd)
  if path:sub(1, 1) == "/" or path:sub(1, 6) == "$HOME/" then return path end
  path = path:gsub("^%./+", "")
  return cwd .. "/" .. path
end

-- The home the sandbox hides behind an empty directory: $HOME, or, when
-- HOME is unset or empty (cron, a systemd unit, env -i), the passwd
-- entry's home, which isolate then exports to the line (README, choices).
-- A HOME that is set but relative, with . or .. components, or / is a
-- mistake isolate does not guess around: one line, exit 125. Returns the
-- home and whether it came from the passwd entry.
local function sandbox_home()
  local home, from_passwd = os.getenv("HOME"), false
  if home == nil or home == "" then
    local pw = uv.os_get_passwd()
    home, from_passwd = pw and pw.homedir, true
    if home == nil or home == "" then
      die("HOME is not set and this user's passwd entry has no home directory: set HOME to your home directory")
    end
  end
  local why = home:sub(1, 1) ~= "/" and "is not an absolute path"
    or ("/" .. home .. "/"):find("/%.%.?/") and "has a . or .. component"
    or (uv.fs_realpath(home) or home) == "/" and "is /"
  if why then
    die(string.format("HOME %s (got HOME=%q%s): the sandbox mounts an empty directory at $HOME;"
      .. " set HOME to your home directory", why, home, from_passwd and ", from the passwd entry" or ""))
  end
  return home, from_passwd
end

-- dir is path or a directory above it; both resolved, without a trailing /.
local function contains(dir, path)
  return dir == "/" or path == dir or path:sub(1, #dir + 1) == dir .. "/"
end

-- Refuses (usage error) a workdir or bind that is a home or above one, and
-- a bind whose resolved path the launch spec's rules refuse (a symlink into
-- /etc/cron.d): the builders see only the text. The homes are $HOME and the
-- passwd entry's, each resolved: a HOME pointed elsewhere must not make the
-- real one bindable.
local function check_paths_resolved(o, spec, home)
  local homes = protect.resolved_homes(home)
  local function check_home(opt, given, real)
    for _, h in ipairs(homes) do
      if contains(real, h.path) then
        local resolved = real ~= given and (" (" .. real .. ")") or ""
        die_usage(string.format("%s %s%s is %s (%s) or a directory above it: the sandbox would see (and,"
          .. " read-write, change) the whole home; use a directory inside it", opt, given, resolved, h.name, h.path))
      end
    end
  end
  local wopt = o.workdir and "--workdir" or "the workdir (the current directory)"
  check_home(wopt, o.workdir or spec.workdir, spec.workdir)
  local ok, werr = isolation.argv({ workdir = spec.workdir, command = "true" })
  if not ok then
    die_usage(string.format("%s %s resolves to %s, which %s", wopt, o.workdir or uv.cwd(), spec.workdir,
      (tostring(werr):gsub("^isolation: %S+ ", ""))))
  end
  for _, kind in ipairs({ { "binds", "--bind" }, { "ro_binds", "--ro-bind" } }) do
    for _, p in ipairs(spec[kind[1]] or {}) do
      local path = p:sub(1, 6) == "$HOME/" and (home .. p:sub(6)) or p
      local real = uv.fs_realpath(path)
      if real then
        check_home(kind[2], p, real)
        local bok, err = isolation.argv({ [kind[1]] = { real }, command = "true" })
        if not bok then
          die_usage(string.format("%s %s resolves to %s, which %s", kind[2], p, real,
            (tostring(err):gsub("^isolation: %S+ ", ""))))
        end
      end
    end
  end
end

-- The places the sandbox can write (the workdir, --bind) and those it can
-- read (--ro-bind), as hostpaths.check takes them.
local function writable_places(o, spec, home)
  local places = { { name = o.workdir and "--workdir" or "the workdir (the current directory)",
    path = spec.workdir } }
  for _, kind in ipairs({ { "binds", "--bind", false }, { "ro_binds", "--ro-bind", true } }) do
    for _, p in ipairs(spec[kind[1]] or {}) do
      local path = p:sub(1, 6) == "$HOME/" and (home .. p:sub(6)) or p
      places[#places + 1] = { name = kind[2], path = path, read_only = kind[3] }
    end
  end
  return places
end

-- Refuses (usage error) a workdir or --bind that contains, or lies inside,
-- the audit log or a program of this module (isolation.hostpaths): the
-- sandbox would delete and forge the log, or replace what the host runs.
local function check_host_paths(o, places)
  local guards = hostpaths.program_guards()
  if o.log then
    table.insert(guards, 1, { name = "the audit log (--log)", path = absolute(o.log, assert(uv.cwd())),
      why = "the sandbox could delete it and write a forged one, while the proxy appends to the unlinked file" })
  end
  local ok, err = hostpaths.check(places, guards)
  if not ok then die_usage(err) end
end

local function host_port(host, port)
  host = tostring(host or "?")
  if host:find(":", 1, true) and host:sub(1, 1) ~= "[" then host = "[" .. host .. "]" end
  return port and (host .. ":" .. tostring(port)) or host
end

local function event_line(ev)
  return string.format("%s %s %s %s (%s)", tostring(ev.type), tostring(ev.method or "-"),
    host_port(ev.host, ev.port), tostring(ev.status or "-"), tostring(ev.reason or ""))
end

-- Runs luv's loop; a callback error is reported and ends isolate instead
-- of luv's default handler exiting silently.
local function run_loop()
  local ok, err = pcall(uv.run)
  if not ok then
    if getmetatable(err) == Exit then error(err, 0) end
    die("internal error: " .. tostring(err))
  end
end

---------------------------------------------------------------------------
-- isolate proxy
---------------------------------------------------------------------------

-- The edit distance of a and b (insertions, deletions, substitutions and
-- swaps of two neighbours: a typed "hots" is one step from "host").
local function edit_distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
      end
    end
  end
  return d[#a][#b]
end

-- " (did you mean --x?)" for the one option of `tables` (sets keyed by
-- option) closest to `given`, when it is close: at most 1 edit for a name
-- of up to 4 letters, 2 for a longer one; "" when none is, or when two are
-- equally close (a guess between them would mislead).
local function did_you_mean(given, tables)
  local word = given:gsub("^%-+", "")
  local best, best_d, tie = nil, math.huge, false
  for _, t in ipairs(tables) do
    for opt in pairs(t) do
      local dist = edit_distance(given, opt) -- "-allow-host" is one step from "--allow-host"
      if dist < best_d then best, best_d, tie = opt, dist, false
      elseif dist == best_d and opt ~= best then tie = true end
    end
  end
  -- 0: the option itself, with a value it does not take (--dry-run=yes)
  if not best or tie or best_d == 0 or best_d > (#word <= 4 and 1 or 2) then return "" end
  return " (did you mean " .. best .. "?)"
end

-- The options of `isolate proxy`. The values go to isolation.proxy as
-- they are (--accept-listeners as an integer when it is one): its own
-- messages, told in terms of the options, say what it refuses.
local PROXY_VALUES = { ["--unix"] = "unix", ["--listen"] = "listen", ["--allow"] = "allow",
  ["--accept-listeners"] = "accept_listeners" }
local PROXY_FLAGS = { ["--allow-private"] = "allow_private", ["--quiet"] = "quiet", ["--no-token"] = "no_token" }

local function parse_proxy(args)
  args = table.move(args, 1, #args, 1, {}) -- a --name=value splits in two
  local o = { allow = {} }
  local i, in_allow = 1, false
  local function value(name)
    i = i + 1
    local v = args[i]
    if v == nil then die_usage(name .. " needs a value") end
    return v
  end
  while i <= #args do
    local a = args[i]
    local name, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    if name then
      if not PROXY_VALUES[name] then die_usage("proxy: " .. name .. " takes no value") end
      a = name
      table.insert(args, i + 1, inline)
    end
    if a == "--help" then io.stdout:write(HELP); exit_with(0)
    elseif a == "--allow" then o.allow[#o.allow + 1] = value(a); in_allow = true
    elseif PROXY_VALUES[a] then o[PROXY_VALUES[a]] = value(a); in_allow = false
    elseif PROXY_FLAGS[a] then o[PROXY_FLAGS[a]] = true; in_allow = false
    elseif a:sub(1, 1) == "-" then
      die_usage("proxy: unknown option " .. a .. did_you_mean(a, { PROXY_VALUES, PROXY_FLAGS, { ["--help"] = true } }))
    elseif in_allow then o.allow[#o.allow + 1] = a
    else die_usage("proxy: unexpected argument " .. a .. " (patterns follow --allow)") end
    i = i + 1
  end
  if (o.unix == nil) == (o.listen == nil) then die_usage("proxy: give exactly one of --unix PATH or --listen ADDR") end
  if o.unix and o.unix:sub(1, 1) ~= "/" then o.unix = absolute(o.unix, assert(uv.cwd())) end
  if #o.allow == 0 then die_usage("proxy: --allow PATTERN is required (at least one)") end
  for _, p in ipairs(o.allow) do
    local ok, err = isolation.config({ mode = "bwrap", network = "deny", allow_hosts = { p } })
    if not ok then die_usage("proxy: " .. pattern_error("--allow", p, err)) end
  end
  if o.accept_listeners then
    -- the proxy takes a listener only from a client of its unix socket
    if o.listen then die_usage("proxy: --accept-listeners needs --unix (listeners are handed over a unix socket)") end
    local n = o.accept_listeners:match("^%d+$") and math.tointeger(tonumber(o.accept_listeners))
    o.accept_listeners = n or o.accept_listeners
  end
  return o
end

-- isolation.proxy's message about a value isolate took from the line,
-- told in terms of its option; nil for any other failure (a socket that
-- cannot be bound is not a usage error).
local PROXY_OPTION_OF = { unix = "--unix", listen = "--listen", accept_listeners = "--accept-listeners" }
local function proxy_option_error(err)
  local field, rest = tostring(err):match("^isolation: ([%w_]+) (.*)$")
  local opt = field and PROXY_OPTION_OF[field]
  return opt and (opt .. " " .. rest) or nil
end

local function proxy_main(args)
  local o = parse_proxy(args)

  local stderr = io.stderr
  local on_event
  if not o.quiet then
    on_event = function(ev) stderr:write(event_line(ev) .. "\n") end
  end
  -- A TCP port is open to every local user: a token unless refused.
  local token
  if o.listen and not o.no_token then
    local f = io.open("/dev/urandom", "rb")
    local raw = f and f:read(16)
    if f then f:close() end
    if not raw or #raw ~= 16 then die("proxy: cannot read /dev/urandom for the token") end
    token = raw:gsub(".", function(ch) return string.format("%02x", ch:byte()) end)
  end
  local p, err = isolation.proxy({
    allow = o.allow, unix = o.unix, listen = o.listen, allow_private = o.allow_private or nil,
    loop = uv, on_event = on_event, token = token, accept_listeners = o.accept_listeners,
  })
  if not p then
    local usage = proxy_option_error(err)
    if usage then die_usage("proxy: " .. usage) end
    die("proxy: " .. tostring(err))
  end
  io.stdout:write(p:address(), "\n")
  if token then io.stdout:write("http://isolation:", token, "@", p:address(), "\n") end
  io.stdout:flush()

  local signals = {}
  local function stop()
    p:close()
    for _, s in ipairs(signals) do if not s:is_closing() then s:close() end end
    uv.stop()
  end
  for _, name in ipairs({ "sigint", "sigterm" }) do
    local s = uv.new_signal()
    s:start(name, stop)
    signals[#signals + 1] = s
  end
  run_loop()
  p:close()
  return 0
end

---------------------------------------------------------------------------
-- isolate [options] -- command
---------------------------------------------------------------------------

local SINGLE = {
  ["--mode"] = "mode", ["--network"] = "network", ["--agent"] = "agent", ["--workdir"] = "workdir",
  ["--ca-cert"] = "ca_cert", ["--bridge"] = "bridge", ["--target"] = "target", ["--config"] = "config",
  ["--hook-url"] = "hook_url", ["--seccomp"] = "seccomp", ["--log"] = "log", ["--agent-config"] = "agent_config",
  ["--memory"] = "memory", ["--pids"] = "pids", ["--tmpfs-size"] = "tmpfs_size", ["--cpus"] = "cpus",
  ["--time"] = "time", ["--upstream-ca"] = "upstream_ca",
}
local REPEATED = { ["--allow-host"] = "allow_hosts", ["--bind"] = "binds", ["--ro-bind"] = "ro_binds",
  ["--protect"] = "protect", ["--tool"] = "tools" }
local FLAGS = { ["--dry-run"] = "dry_run", ["--json"] = "json", ["--verbose"] = "verbose",
  ["--no-protect"] = "no_protect" }
REPEATED["--resolve"] = "resolve"
FLAGS["--allow-private"] = "allow_private"
REPEATED["--env"] = "env_pass"
REPEATED["--setenv"] = "env_set"
FLAGS["--inherit-env"] = "env_inherit"
FLAGS["--learn"] = "learn"
FLAGS["--no-default-hosts"] = "no_default_hosts"
FLAGS["--gpu"] = "gpu"
FLAGS["--no-tools"] = "no_tools"
REPEATED["--secret"] = "secrets"
FLAGS["--git"] = "git_routes"
FLAGS["--no-routes"] = "no_routes"
local CHOICES = {
  mode = { bwrap = true, docker = true, podman = true, none = true },
  network = { allow = true, deny = true, none = true },
  bridge = { socat = true, builtin = true, pass = true },
  seccomp = { sandbox = true, tty = true },
  target = { ["local"] = true, ssh = true, pct = true, sandbox = true },
  agent_config = { ["read-write"] = true, ["read-only"] = true },
}

local OTHER_OPTIONS = { ["--help"] = true, ["--version"] = true }

local function parse(args)
  local o = { allow_hosts = {}, binds = {}, ro_binds = {}, resolve = {}, env_pass = {}, env_set = {}, protect = {},
    secrets = {}, tools = {} }
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--" then
      o.command = table.move(args, i + 1, #args, 1, {})
      break
    end
    local name, inline = a:match("^(%-%-[%w-]+)=(.*)$")
    if name then a = name end
    if a == "--help" then io.stdout:write(HELP); exit_with(0)
    elseif a == "--version" then
      io.stdout:write("isolate ", isolation.version, " (module ",
        package.searchpath("isolation", package.cpath) or "?", ")\n")
      exit_with(0)
    elseif SINGLE[a] or REPEATED[a] then
      local v = inline
      if v == nil then
        i = i + 1
        v = args[i]
        if v == nil or v == "--" then die_usage(a .. " needs a value") end
      end
      local key = SINGLE[a] or REPEATED[a]
      if CHOICES[key] and not CHOICES[key][v] then
        local accepted = {}
        for c in pairs(CHOICES[key]) do accepted[#accepted + 1] = c end
        table.sort(accepted)
        die_usage(string.format("%s must be one of %s (got %q)", a, table.concat(accepted, ", "), v))
      end
      if v == "" then die_usage(a .. " needs a non-empty value") end
      if SINGLE[a] then o[key] = v else table.insert(o[key], v) end
    elseif FLAGS[a] and inline == nil then o[FLAGS[a]] = true
    elseif a:sub(1, 1) == "-" then die_usage("unknown option " .. a .. did_you_mean(a, { SINGLE, REPEATED, FLAGS,
      OTHER_OPTIONS }))
    else
      -- a first word close to a subcommand (isolate doctr) is a typo of it
      local sub = i == 1 and did_you_mean(a, { { doctor = true, proxy = true } }):gsub("(mean )", "%1isolate ") or ""
      die_usage("unexpected argument " .. string.format("%q", a) .. " (the command goes after --)" .. sub)
    end
    i = i + 1
  end
  return o
end

-- A config is a few hundred bytes; 1 MiB is far more than any needs.
local CONFIG_MAX_BYTES = 1024 * 1024

local FILE_KINDS = {
  directory = "a directory", char = "a character device", block = "a block device", fifo = "a FIFO",
  socket = "a socket", link = "a symbolic link",
}

-- The text of a --config file: only a regular file, at most
-- CONFIG_MAX_BYTES. /dev/zero would be read until memory runs out and a
-- FIFO would block forever, so the kind is checked before the open (no
-- device is opened at all) and again on the open descriptor (O_NONBLOCK:
-- a FIFO swapped in meanwhile cannot block the open).
local function read_config_text(path)
  local function refuse(why) die_usage("--config " .. path .. ": " .. why) end
  local function check(st)
    if st.type ~= "file" then
      refuse("not a regular file (" .. (FILE_KINDS[st.type] or st.type) .. "); give a JSON file")
    end
    if st.size > CONFIG_MAX_BYTES then
      refuse(string.format("too large (%d bytes; a config file may hold at most %d)", st.size, CONFIG_MAX_BYTES))
    end
  end
  local st, err = uv.fs_stat(path)
  if not st then refuse("cannot read it (" .. tostring(err) .. ")") end
  check(st)
  local c = uv.constants
  local fd
  fd, err = uv.fs_open(path, c.O_RDONLY | c.O_NONBLOCK | c.O_NOCTTY, 0)
  if not fd then refuse("cannot read it (" .. tostring(err) .. ")") end
  st = uv.fs_fstat(fd)
  if not st then uv.fs_close(fd); refuse("cannot read it") end
  check(st)
  local chunks, total = {}, 0
  while true do
    local data, rerr = uv.fs_read(fd, CONFIG_MAX_BYTES + 1 - total, total)
    if not data then uv.fs_close(fd); refuse("cannot read it (" .. tostring(rerr) .. ")") end
    if data == "" then break end
    chunks[#chunks + 1] = data
    total = total + #data
    if total > CONFIG_MAX_BYTES then -- it grew since the fstat
      uv.fs_close(fd)
      refuse(string.format("too large (more than %d bytes)", CONFIG_MAX_BYTES))
    end
  end
  uv.fs_close(fd)
  return table.concat(chunks)
end

local function read_config_file(path)
  local text = read_config_text(path)
  -- the strict decoder: duplicate keys are errors, and an array is told
  -- from an object (an empty object for allow_hosts is the empty array
  -- lua-cjson writes, and is taken for one)
  local t, jerr = json.decode(text, "--config " .. path)
  if t == nil then die_usage(jerr) end
  if type(t) ~= "table" or getmetatable(t) == json.array_mt then
    die_usage("--config " .. path .. ": must hold a JSON object")
  end
  local cfg = {}
  for k, v in pairs(t) do
    if v ~= json.null then cfg[k] = v end
  end
  if type(cfg.allow_hosts) == "table" then
    local list = {}
    for j, h in ipairs(cfg.allow_hosts) do list[j] = h end
    if next(cfg.allow_hosts) ~= nil and #list == 0 then list = cfg.allow_hosts end -- a map: let config() refuse it
    cfg.allow_hosts = list
  end
  return cfg
end

-- The config: the file's keys, then the line's options over them, then
-- isolate's defaults for what neither gave (bwrap, deny).
local function build_config(o)
  local cfg = o.config and read_config_file(o.config) or {}
  if o.mode then cfg.mode = (o.mode == "none") and "" or o.mode end
  if cfg.mode == nil then cfg.mode = "bwrap" end
  if o.network then
    cfg.network = o.network
  elseif o.mode == "none" then
    cfg.network = "allow"
  elseif cfg.network == nil or cfg.network == "" then
    cfg.network = (cfg.mode == "") and "allow" or "deny"
  end
  if cfg.mode == "" and cfg.network ~= "allow" then
    die_usage("mode none cannot enforce network " .. cfg.network
      .. " (use --mode bwrap, docker or podman, or --network allow)")
  end
  for _, h in ipairs(o.allow_hosts) do
    local ok, err = isolation.config({ mode = "bwrap", network = "deny", allow_hosts = { h } })
    if not ok then die_usage(pattern_error("--allow-host", h, err)) end
  end
  if #o.allow_hosts > 0 and cfg.network ~= "deny" then
    die_usage("--allow-host has no effect here: only --network deny runs the proxy")
  end
  for opt, given in pairs({ ["--allow-private"] = o.allow_private, ["--resolve"] = #o.resolve > 0,
    ["--learn"] = o.learn, ["--log"] = o.log, ["--no-default-hosts"] = o.no_default_hosts }) do
    if given and cfg.network ~= "deny" then
      die_usage(opt .. " has no effect here: only --network deny runs the proxy")
    end
  end
  if #o.allow_hosts > 0 then
    local list = {}
    for _, h in ipairs(cfg.allow_hosts or {}) do list[#list + 1] = h end
    for _, h in ipairs(o.allow_hosts) do list[#list + 1] = h end
    cfg.allow_hosts = list
  end
  local norm, err = isolation.config(cfg)
  if not norm then die_usage((o.config and ("--config " .. o.config .. ": ") or "") .. tostring(err)) end
  return norm
end

-- --env, --setenv and --inherit-env as the spec's env_pass, env_set and
-- env_inherit; the library checks the names (and says which are refused).
local function env_options(o)
  local function check(opt, name, given)
    if not name:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      die_usage(string.format("%s needs a variable name: a letter or _, then letters, digits or _ (got %q)", opt,
        given))
    end
  end
  for _, n in ipairs(o.env_pass) do check("--env", n, n) end
  local set
  for _, a in ipairs(o.env_set) do
    local name, value = a:match("^([^=]*)=(.*)$")
    if not name then die_usage(string.format("--setenv must be NAME=VALUE (got %q)", a)) end
    check("--setenv", name, a)
    set = set or {}
    set[name] = value
  end
  return #o.env_pass > 0 and o.env_pass or nil, set, o.env_inherit or nil
end

-- --secret [NAME=]ENV@URL[#HEADER]: a credential route. The secret is read
-- from the launching environment's ENV and goes to the proxy alone; the
-- spec (printable, dry run) gets the route's variables, never the value.
local SECRET_FORM = "--secret must be [NAME=]ENV@https://HOST[:PORT][/PATH][#HEADER]"
local function parse_secret(a)
  local name, rest = a:match("^([a-z0-9-]+)=(.*)$")
  rest = rest or a
  local env, url = rest:match("^([A-Za-z_][A-Za-z0-9_]*)@(.+)$")
  if not env then die_usage(string.format("%s (got %q)", SECRET_FORM, a)) end
  local header
  url, header = url:match("^([^#]*)#?(.*)$")
  local host = url:match("^https://%[?([^/:%]]+)")
  if not host then die_usage(string.format("%s: the URL must start with https:// (got %q)", SECRET_FORM, a)) end
  name = name or host:lower():gsub("[^a-z0-9-]", "-")
  return { name = name, env = env, upstream = url, header = header ~= "" and header or "bearer" }
end

-- --agent's own route when its key is set here (API: credential routes):
-- the key variables in order of preference with their header, the base-URL
-- variable the agent honours, and its default upstream.
local AGENT_ROUTES = require("isolation.routes").AGENTS

-- The agent's route as a --secret would give it, and the variable that
-- gets its base URL inside; nil when there is none to make.
local function agent_route(o, cfg)
  local a = AGENT_ROUTES[o.agent or ""]
  if not a or o.no_routes or cfg.network ~= "deny" then return nil end
  for _, k in ipairs(a.keys) do
    local v = os.getenv(k[1])
    if v and v ~= "" then
      local up = os.getenv(a.url_env)
      if not (up and up:match("^https://")) then up = a.upstream end
      return o.agent .. "=" .. k[1] .. "@" .. up .. "#" .. k[2], a.url_env
    end
  end
  return nil
end

-- The routes of --secret, with their values from the environment (nil:
-- none); the variables each sets inside go into spec.env_set.
local function routes_for(o, cfg, spec)
  local agent_secret, agent_url_env = agent_route(o, cfg)
  if agent_secret then table.insert(o.secrets, 1, agent_secret) end
  if #o.secrets == 0 then return nil end
  if cfg.network ~= "deny" then die_usage("--secret needs --network deny (the route is the proxy's)") end
  local routes, seen, git = {}, {}, {}
  local port = spec.proxy_port or 3128
  spec.env_set = spec.env_set or {}
  for _, a in ipairs(o.secrets) do
    local r = parse_secret(a)
    if seen[r.name] then die_usage(string.format("--secret: two routes are named %q", r.name)) end
    seen[r.name] = true
    local value = os.getenv(r.env)
    if not value or value == "" then
      die_usage(string.format("--secret %s: %s is not set in this environment", r.name, r.env))
    end
    for _, n in ipairs(spec.env_pass or {}) do
      if n == r.env then die_usage("--env " .. n .. " would pass the secret of --secret inside") end
    end
    local base = "http://127.0.0.1:" .. port .. "/" .. r.name
    spec.env_set["ISOLATION_ROUTE_" .. r.name:upper():gsub("-", "_")] = base
    -- the real value never arrives inside, even through --inherit-env
    spec.env_set[r.env] = "isolation-route-" .. r.name
    if agent_secret and r.name == o.agent then
      spec.env_set[agent_url_env] = base
      -- the agent's other key variables set here: placeholders too
      for _, k in ipairs(AGENT_ROUTES[o.agent].keys) do
        if os.getenv(k[1]) then spec.env_set[k[1]] = "isolation-route-" .. r.name end
      end
      o.agent_upstream_host = r.upstream:match("^https://%[?([^/:%]]+)"):lower()
    end
    if o.git_routes then git[#git + 1] = { base .. "/", (r.upstream:gsub("/*$", "")) .. "/" } end
    routes[#routes + 1] = { name = r.name, upstream = r.upstream, header = r.header, value = value }
  end
  if #git > 0 then
    spec.env_set.GIT_CONFIG_COUNT = tostring(#git)
    for i, g in ipairs(git) do
      spec.env_set["GIT_CONFIG_KEY_" .. (i - 1)] = "url." .. g[1] .. ".insteadOf"
      spec.env_set["GIT_CONFIG_VALUE_" .. (i - 1)] = g[2]
    end
  end
  return routes
end

local function build_spec(o, cfg)
  local cwd = assert(uv.cwd())
  local workdir = absolute(o.workdir or cwd, cwd)
  local real, rerr = uv.fs_realpath(workdir)
  local st = real and uv.fs_stat(real)
  local wopt = o.workdir and "--workdir" or "the workdir (the current directory)"
  if not real and not tostring(rerr):find("^ENOENT") then
    die_usage(string.format("%s %s: this user cannot reach it (%s): give the user search (x) permission on"
      .. " the directories above it, or choose another --workdir", wopt, workdir, tostring(rerr)))
  end
  if not (st and st.type == "directory") then die_usage("--workdir: no such directory: " .. workdir) end
  -- The command starts there and works on it; without read and search
  -- rights bwrap fails on a path of its own ("Can't chdir", "Can't find
  -- source path <workdir>/.git: Permission denied") that names a protected
  -- path, not what is wrong.
  if not (uv.fs_access(real, "r") and uv.fs_access(real, "x")) then
    die_usage(string.format("%s %s: this user (uid %d) cannot read it (mode %04o, owner uid %d): the command"
      .. " starts there; give the user read and search permission (chmod u+rx, or ask its owner), or choose"
      .. " another --workdir", wopt, real, uv.getuid(), math.tointeger(st.mode) & 4095, st.uid))
  end
  local bridge = o.bridge
  local engine = cfg.mode == "docker" or cfg.mode == "podman"
  if bridge == nil and cfg.network == "deny" and (cfg.mode == "bwrap" or engine and (o.target or "local") == "local")
  then
    -- pass where the bridge program exists: no relay process, no second
    -- hop; a container's starter hands its listeners to isolate's proxy
    -- as bwrap's does (spec/containers_spec.lua)
    bridge = isolation.BRIDGE and "pass" or nil
  end
  local spec = { config = cfg, agent = o.agent, workdir = real, bridge = bridge }
  local function paths(list, opt)
    local out = {}
    for j, p in ipairs(list) do
      out[j] = absolute(p, cwd)
      if out[j]:sub(1, 1) == "/" and not uv.fs_stat(out[j]) then
        die_usage(opt .. ": no such file or directory: " .. out[j])
      end
    end
    return #out > 0 and out or nil
  end
  spec.binds = paths(o.binds, "--bind")
  spec.ro_binds = paths(o.ro_binds, "--ro-bind")
  if o.ca_cert then
    spec.ca_cert = absolute(o.ca_cert, cwd)
    local cst = uv.fs_stat(spec.ca_cert)
    if not (cst and cst.type == "file") then die_usage("--ca-cert: no such file: " .. spec.ca_cert) end
  end
  if cfg.mode == "docker" or cfg.mode == "podman" then spec.tty = uv.guess_handle(0) == "tty" end
  spec.env_pass, spec.env_set, spec.env_inherit = env_options(o)
  o.routes = routes_for(o, cfg, spec)
  spec.agent_config = o.agent_config
  if o.gpu and cfg.mode ~= "" then
    spec.gpu = true
    if #isolation.gpu_devices() == 0 and not o.json then
      io.stderr:write("isolate: --gpu: no GPU device found (/dev/nvidia*, /dev/nvidia-caps, /dev/dri, /dev/kfd,"
        .. " /dev/dxg); running without one\n")
    end
  end
  if o.no_protect then
    if #o.protect > 0 then die_usage("--protect and --no-protect contradict each other") end
    spec.protect = {}
  elseif #o.protect > 0 then
    spec.protect = { table.unpack(isolation.PROTECTED) }
    for _, p in ipairs(o.protect) do spec.protect[#spec.protect + 1] = p end
  end
  return spec
end

-- --memory, --pids, --tmpfs-size, --cpus, --time: the spec's limits and the
-- mechanism that enforces them here, said on stderr; none is an error.
local function limits_for(o, cfg, target)
  local r, err, code = require("isolation.limits").from_options(o, cfg.mode, target)
  if not r then
    if code == EXIT_USAGE then die_usage(err) end
    die(err)
  end
  if r.note and not o.json then say("isolate: ", r.note) end
  return r.limits, r.via
end

local function allowlist(o, cfg)
  local list, seen = {}, {}
  local defaults, err = require("isolation.session")._default_hosts(o.agent, o.hook_url,
    not o.no_default_hosts)
  if not defaults then die_usage("--hook-url: " .. tostring(err):gsub("^isolation: ", "")) end
  -- With the agent's route, its model hosts leave the allowlist: the API is
  -- reachable only through the route, which always carries the user's key.
  if o.agent_upstream_host then
    seen[o.agent_upstream_host] = true
    local own = isolation.default_allow_hosts(o.agent) or {}
    local base = isolation.default_allow_hosts(nil) or {}
    local common = {}
    for _, h in ipairs(base) do common[h] = true end
    for _, h in ipairs(own) do if not common[h] then seen[h] = true end end
  end
  for _, src in ipairs({ defaults, cfg.allow_hosts or {} }) do
    for _, h in ipairs(src) do
      if not seen[h] then seen[h] = true; list[#list + 1] = h end
    end
  end
  return list
end

local function dry_run(o, spec, allow)
  local argv, err = isolation.argv(spec)
  if not argv then die_usage(err) end
  if o.json then
    local text, jerr = json_array(argv, "argv")
    if not text then die_usage("--json: " .. jerr .. " (JSON holds text only: use the text form)") end
    io.stdout:write(text, "\n")
    return
  end
  local text, derr = isolation.dry_run(spec)
  if not text then die_usage(derr) end
  local out = { (text:gsub("\n*$", "")) }
  for _, l in ipairs(o.tools_plan and toolsmod.describe(o.tools_plan) or {}) do out[#out + 1] = l end
  if spec.seccomp_fd then
    out[#out + 1] = "seccomp program on descriptor 3: " .. (o.seccomp == "tty"
      and "isolation.tty_seccomp_filter() (refuses TIOCSTI and TIOCLINUX)"
      or "isolation.sandbox_seccomp_filter() (refuses TIOCSTI and TIOCLINUX, the kernel keyrings,"
        .. " io_uring, bpf, perf_event_open, userfaultfd, kexec, modules, mounts, setns, unshare and clone"
        .. " with namespace flags, clone3 (ENOSYS), vsock, packet and non-route netlink sockets;"
        .. " docs/reference/launch-spec.md says why each)")
  end
  if allow then
    out[#out + 1] = ""
    out[#out + 1] = "proxy allowlist (" .. #allow .. " patterns; the socket is made at run time in "
      .. o.tmp_base .. "/isolate.XXXXXX):"
    for _, h in ipairs(allow) do out[#out + 1] = "  " .. h end
  end
  for _, r in ipairs(o.routes or {}) do
    out[#out + 1] = string.format("route %s: %s, header %s (the secret is not shown), inside ISOLATION_ROUTE_%s",
      r.name, r.upstream, r.header, (r.name:upper():gsub("-", "_")))
  end
  out[#out + 1] = ""
  out[#out + 1] = "argv (" .. #argv .. " elements, one a line):"
  for _, a in ipairs(argv) do out[#out + 1] = a end
  io.stdout:write(table.concat(out, "\n"), "\n")
end

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
-- read end, or nil and why.
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

-- --resolve NAME:ADDR[,ADDR...] options as the proxy's resolve table.
local function resolve_table(list)
  if #list == 0 then return nil end
  local t = {}
  for _, r in ipairs(list) do
    local name, addrs = r:match("^([^:]+):(.+)$")
    if not name then die_usage(string.format("--resolve must be NAME:ADDR[,ADDR...] (got %q)", r)) end
    t[name] = t[name] or {}
    for a in addrs:gmatch("[^,]+") do table.insert(t[name], a) end
  end
  return t
end

-- The exit summary and learn mode's options are built from the events'
-- structured fields only: type, code, host, port and, for a refusal by
-- address, the address and its class in their own fields. Never from a
-- reason: a reason carries text the client chose (a TLS server name), and
-- an agent that could shape a summary line could make it advise the
-- operator to paste `--allow-private` or a wildcard (issue 26, item 3).
-- Each value is checked against the form the proxy gives it before it is
-- printed; anything else prints as "?".

-- A deny event refused for the address its host resolved to (the private
-- address rule), not for its host: the address and its class, else nil.
local function refused_address(ev)
  if ev.code ~= "private_address" then return nil end
  local addr, class = ev.address, ev.address_class
  if type(addr) ~= "string" or not addr:match("^[%x:.]+$") or #addr > 45 then addr = "?" end
  if type(class) ~= "string" or not class:match("^[%a-]+$") or #class > 20 then class = "private" end
  return addr, class
end

-- A host as the proxy gives it (a name it parsed strictly and lowercased,
-- or an IP literal), else "?".
local function safe_host(host)
  host = tostring(host or "")
  if #host <= 253 and host:match("^[%w._:-]+$") then return host end
  return "?"
end

local function safe_port(port)
  return math.type(port) == "integer" and port >= 0 and port <= 65535 and port or nil
end

-- A code as the proxy gives it (a word of [a-z_]), else "?".
local function safe_code(code)
  code = tostring(code or "")
  return code:match("^[%l_]+$") and #code <= 32 and code or "?"
end

-- What each code means, for the summary: fixed text, never the reason.
local CODE_TEXT = {
  own_address = "the address is the proxy's own listener",
  sni_mismatch = "the TLS server name is not the CONNECT host",
  tls_malformed = "a TLS ClientHello the proxy cannot read",
  tls_timeout = "no complete TLS ClientHello in time",
  bad_request = "a malformed request",
  too_large = "a request head too large",
  not_implemented = "a request the proxy does not implement (Upgrade, a SOCKS5 command other than CONNECT)",
  bad_version = "an HTTP version other than 1.0 and 1.1",
  auth_required = "no valid proxy token",
  header_timeout = "the request head did not come in time",
  dns_failed = "the name did not resolve",
  dns_timeout = "the name's lookup timed out",
  connect_failed = "no address could be dialed",
  connect_timeout = "the dial timed out",
  upstream_failed = "the upstream connection broke before a response",
  bad_response = "the upstream's response was malformed",
  upstream_timeout = "the upstream did not answer in time",
  too_many = "the proxy's connection or descriptor limits",
  client_closed = "the client left before the answer",
  bad_handover = "a listener handover the proxy refused",
  internal_error = "out of memory",
}

local function code_text(code)
  return CODE_TEXT[code] or "see --verbose or --log"
end

-- The exit summary of the denials: hosts not on the allowlist, then
-- allowed hosts refused for their address, each with what would admit it,
-- then requests refused for what they sent (a TLS server name that is not
-- the CONNECT host, a malformed request): no option admits those.
local function print_denials(denied, refused, other, learn)
  local function total(list)
    local n = 0
    for _, d in ipairs(list) do n = n + d.n end
    return n
  end
  local function plural(n, word) return n .. " " .. word .. (n == 1 and "" or "s") end
  if #denied > 0 then
    say(string.format("isolate: the proxy denied %s to %s not on the allowlist"
      .. " (admit one with --allow-host HOST):", plural(total(denied), "request"), plural(#denied, "host")))
    for _, d in ipairs(denied) do say(string.format("isolate:   %s (%d)", d.key, d.n)) end
  end
  if #refused > 0 then
    say(string.format("isolate: the proxy refused %s to %s %s for the address"
      .. " %s to (loopback, link-local, private or reserved; admit the address with an IP/CIDR"
      .. " --allow-host, or every such address with --allow-private):", plural(total(refused), "request"),
      plural(#refused, "host"), learn and "admitted by learn mode or the allowlist" or "on the allowlist",
      #refused == 1 and "it resolves" or "they resolve"))
    for _, d in ipairs(refused) do
      local suggestion = d.addr ~= "?" and d.port and ("; admit with --allow-host " .. host_port(d.addr, d.port))
        or ""
      say(string.format("isolate:   %s -> %s (%s) (%d)%s", d.key, d.addr, d.class, d.n, suggestion))
    end
  end
  if #other > 0 then
    say(string.format("isolate: the proxy refused %s for what %s sent:", plural(total(other), "request"),
      total(other) == 1 and "it" or "they"))
    for _, d in ipairs(other) do
      say(string.format("isolate:   %s (%d): %s: %s", d.key, d.n, d.code, code_text(d.code)))
    end
  end
end

-- Learn mode's result: the host:port of every request the proxy admitted,
-- as --allow-host options and as a --config file's allow_hosts.
-- `unserved`: how many requests the proxy refused or could not serve (the
-- summary lists them), so that a run whose every request was refused is
-- not told it made none. `allow_private`: the run had --allow-private,
-- which admitted names resolving to private addresses; the options keep
-- it, or pasting them would be refused again for the address.
local function print_learned(used, unserved, allow_private)
  if #used == 0 then
    if unserved > 0 then
      say(string.format("isolate: learn mode: nothing to learn: the proxy served none of the"
        .. " command's %d request%s (each is listed in this summary, with the option that admits it where one"
        .. " can)", unserved, unserved == 1 and "" or "s"))
    else
      say("isolate: learn mode: the command made no request through the proxy")
    end
    return
  end
  local opts = {}
  if allow_private then opts[1] = "--allow-private" end
  for _, h in ipairs(used) do opts[#opts + 1] = "--allow-host " .. h end
  say(string.format("isolate: learn mode: the command used %d host%s; these options admit %s:",
    #used, #used == 1 and "" or "s", #used == 1 and "it" or "them"))
  say("isolate:   ", table.concat(opts, " "))
  say(allow_private and "isolate: or, in a --config file (with --allow-private on the line: a config"
    .. " has no key for it):" or "isolate: or, in a --config file:")
  -- the proxy's hosts are ASCII names and addresses: the text is JSON
  say('isolate:   {"allow_hosts": ', tostring(json_array(used, "allow_hosts")), "}")
end

-- The audit log's session field: this run, told from the others that
-- append to the same file.
local function session_id()
  return string.format("isolate-%d-%d", uv.os_getpid(), os.time())
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

local function run(o, spec, allow)
  -- Never a reason not to run: a failure here only leaves the leftovers.
  pcall(remove_leftovers, o.tmp_base)
  if spec.limits_via == "cgroup" then pcall(require("isolation.limits").cleanup) end
  local dir, proxy, socket
  local denied, denied_order = {}, {}
  local refused = {}
  local failed, failed_order = {}, {}
  -- errors and refusals of connections that named no host (a message
  -- that is no request, a refused listener handover, a client gone
  -- before its request): by code
  local hostless, hostless_order = {}, {}
  local route_uses, route_order = {}, {} -- requests per credential route
  local used, used_order = {}, {} -- learn mode: the host:port of each admitted request
  local function teardown()
    if proxy then proxy:close(); proxy = nil end
    if dir then
      if socket then os.remove(socket) end
      uv.fs_rmdir(dir)
      dir = nil
    end
  end

  if allow then
    local err
    dir, err = uv.fs_mkdtemp(o.tmp_base .. "/isolate.XXXXXX")
    if not dir then die("cannot make a private directory for the proxy socket: " .. tostring(err)) end
    uv.fs_chmod(dir, tonumber("700", 8))
    socket = dir .. "/proxy.sock"
    spec.proxy_socket = socket
    local stderr = io.stderr
    local on_event = function(ev)
      if o.verbose then stderr:write("isolate: proxy: ", event_line(ev), "\n") end
      local addr, class = refused_address(ev)
      local host, port, code = safe_host(ev.host), safe_port(ev.port), safe_code(ev.code)
      local route = ev.code == "route" and tostring(ev.reason or ""):match("^route ([a-z0-9-]+):")
      if route then
        if not route_uses[route] then route_order[#route_order + 1] = route; route_uses[route] = 0 end
        route_uses[route] = route_uses[route] + 1
      end
      if (ev.type == "report" or ev.type == "allow") and o.learn then
        local key = host_port(host, port)
        if not used[key] then
          used[key] = true
          used_order[#used_order + 1] = key
        end
      elseif (ev.type == "error" or ev.type == "deny") and (ev.host or "") == "" then
        if not hostless[code] then
          hostless_order[#hostless_order + 1] = code
          hostless[code] = { n = 0 }
        end
        hostless[code].n = hostless[code].n + 1
      elseif ev.type == "deny" then
        local key = host_port(host, port)
        -- keyed by host, address and code: a name may resolve to several
        local entry = key .. (addr and (" " .. addr) or "") .. " " .. code
        if not denied[entry] then
          denied[entry] = { key = key, n = 0, addr = addr, class = class, port = port, code = code }
          denied_order[#denied_order + 1] = entry
        end
        denied[entry].n = denied[entry].n + 1
      elseif ev.type == "error" then
        local key = host_port(host, port)
        if not failed[key] then
          failed_order[#failed_order + 1] = key
          failed[key] = string.format("%s: %s: %s", math.type(ev.status) == "integer" and ev.status or "-", code,
            code_text(code))
        end
      end
    end
    proxy, err = isolation.proxy({ allow = allow, unix = socket, loop = uv, on_event = on_event,
      accept_listeners = spec.bridge == "pass" and 2 or nil, -- HTTP and SOCKS5
      allow_private = o.allow_private or nil, resolve = resolve_table(o.resolve), report = o.learn or nil,
      audit_log = o.log and absolute(o.log, assert(uv.cwd())), session = o.log and session_id(),
      routes = o.routes, upstream_ca_file = o.routes and o.upstream_ca and absolute(o.upstream_ca, assert(uv.cwd())) })
    o.routes = nil -- the values now live in the proxy alone
    if not proxy then
      teardown()
      if tostring(err):find("audit_log", 1, true) then
        die_usage("--log " .. tostring(err):gsub("^isolation: audit_log ", ""))
      end
      if tostring(err):find("resolve", 1, true) then die_usage("--resolve: " .. tostring(err)) end
      if tostring(err):find("routes", 1, true) then die_usage("--secret: " .. tostring(err)) end
      if tostring(err):find("upstream_ca_file", 1, true) then die_usage("--upstream-ca: " .. tostring(err)) end
      die("cannot start the proxy: " .. tostring(err))
    end
    if o.learn then
      say("isolate: learn mode: the proxy admits every host that is not on the allowlist (the address"
        .. " rule, strict parsing and the TLS name check still apply): the command's network is not contained")
    end
    if o.verbose then
      say(string.format("isolate: proxy on %s admits %d patterns: %s", proxy:address(), #allow,
        table.concat(allow, " ")))
    end
  end

  local line, werr = isolation.wrap(spec)
  if not line then teardown(); die_usage(werr) end

  local status
  local signals = {}
  local child, perr
  local prologue = ""
  local stdio = { 0, 1, 2 }
  local filter_fd
  if spec.config.mode == "bwrap" then
    local ferr
    filter_fd, ferr = seccomp_pipe(o.seccomp)
    if not filter_fd then teardown(); die("cannot pass the seccomp filter to bwrap: " .. ferr) end
    stdio[4] = filter_fd -- the child's descriptor 3: spec.seccomp_fd
    -- bwrap passes every open descriptor on into the sandbox: one that
    -- isolate inherited from its own parent without close-on-exec (a socket
    -- of the orchestrator, a docker connection) would be a way out. Only
    -- the terminal's 0, 1 and 2 go in, and 3, the seccomp program, which
    -- bwrap reads to the end and closes before it starts the command.
    prologue = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ \"$fd\" -gt 3 ]; then eval \"exec $fd>&-\"; fi; done; "
      .. "trap '' INT QUIT HUP; "
  end
  -- what is missing in a protected place now, to be checked at the end
  local watch, wperr = protect.watch(spec)
  if not watch then teardown(); die_usage(wperr) end
  -- set-user-ID and set-group-ID files made in the session: cleared at the end
  local setid_watch = setid.watch(spec, o.home or os.getenv("HOME"))
  if o.home then prologue = "HOME=" .. shquote(o.home) .. "; export HOME; " .. prologue end
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
  if not child then teardown(); die("cannot start bash: " .. tostring(perr)) end
  for _, name in ipairs({ "sigint", "sigquit", "sigterm", "sighup" }) do
    local s = uv.new_signal()
    s:start(name, function(signame)
      signame = signame or name
      -- Ctrl-C and Ctrl-\ at the terminal already reached the whole
      -- foreground group, the sandbox included (bwrap keeps the group): a
      -- second copy would be a double interrupt, which some agents take
      -- for "quit".
      if KEYBOARD[signame] and in_terminal_foreground() then return end
      if child and not child:is_closing() then
        forward(child:get_pid(), signame)
        -- under docker and podman the reaper got the signal and has its own
        -- grace; under bwrap the sandbox's processes got it: END_GRACE
        -- seconds after the first, the sandbox ends whatever they do
        if spec.config.mode == "bwrap" and spec.reap ~= false and not grace_timer then
          grace_timer = uv.new_timer()
          grace_timer:start(END_GRACE * 1000, 0, function()
            if child and not child:is_closing() then end_bwrap(child:get_pid()) end
          end)
        end
      end
    end)
    signals[#signals + 1] = s
  end
  run_loop()
  drain(proxy)
  teardown()
  local _, _, plines, cut = protect.check(watch)
  for _, l in ipairs(plines) do say("isolate: ", l) end
  local _, _, slines = setid.check(setid_watch)
  for _, l in ipairs(slines) do say("isolate: ", l) end
  -- the line removes its cgroup itself; this catches one it could not
  pcall(require("isolation.limits").cleanup)
  if spec.config.mode == "bwrap" and status == 1 then explain_bwrap_failure(spec.config) end
  if not o.verbose and #denied_order > 0 then
    local not_listed, other = {}, {}
    for _, e in ipairs(denied_order) do
      local d = denied[e]
      local list = d.addr and refused or ((d.code == "?" or d.code == "not_allowed") and not_listed or other)
      table.insert(list, d)
    end
    print_denials(not_listed, refused, other, o.learn)
  end
  if o.learn then
    local unserved = #failed_order
    for _, d in pairs(denied) do unserved = unserved + d.n end
    for _, h in pairs(hostless) do unserved = unserved + h.n end
    print_learned(used_order, unserved, o.allow_private)
  end
  if not o.verbose and #failed_order > 0 then
    say(string.format("isolate: the proxy admitted but could not reach %d host%s:",
      #failed_order, #failed_order == 1 and "" or "s"))
    for _, k in ipairs(failed_order) do
      say(string.format("isolate:   %s (%s)", k, failed[k]))
    end
  end
  if #route_order > 0 then
    local parts = {}
    for _, r in ipairs(route_order) do
      parts[#parts + 1] = string.format("%s (%d request%s)", r, route_uses[r], route_uses[r] == 1 and "" or "s")
    end
    io.stderr:write("isolate: credential routes used: ", table.concat(parts, ", "), "\n")
  end
  if not o.verbose and #hostless_order > 0 then
    say("isolate: the proxy ended connections that named no host:")
    for _, code in ipairs(hostless_order) do
      local h = hostless[code]
      say(string.format("isolate:   %s (%d): %s", code, h.n, code_text(code)))
    end
  end
  if cut then
    -- a walk cut short is a failure, never a silent pass: the command's own
    -- status is said first, then isolate fails
    say(string.format("isolate: the command exited with status %d; the end check of the workdir was "
      .. "cut short (%s): exit 125", status or EXIT_FAILURE, cut))
    return 125
  end
  return status or EXIT_FAILURE
end

------------------------------------------------------------------------------
-- isolate doctor

-- The preflight table; exit 0 when a bwrap launch with the network denied
-- works here, 1 when it does not (the first failed check's fix says why).
local function doctor_main(args)
  if args[1] == "--help" then
    io.stdout:write([[
Usage: isolate doctor [--proc-sys DIR] [--bwrap PATH]

Probes what this machine can do (namespaces, seccomp, the bridges, a real
deny launch, limits, docker, podman) and prints one line per check: ok,
warn (failed, but optional or handled by the defaults: TIOCSTI, which the
seccomp filter refuses; limits; docker, podman) or FAIL (isolate's default
launch needs it), with a fix for each that is not ok. Exits 1 when a check
FAILs, 0 otherwise (warnings included). --proc-sys reads the kernel settings from a copy of
another machine's /proc/sys; --bwrap probes that bwrap.
]])
    return 0
  end
  -- --proc-sys and --bwrap check a diagnosis: another machine's settings
  -- (a copy of its /proc/sys) or another bwrap.
  local opts, i = {}, 1
  while args[i] do
    local a, v = args[i], args[i + 1]
    if a == "--proc-sys" or a == "--bwrap" then
      if not v then die_usage("doctor: " .. a .. " needs a value") end
      opts[a == "--proc-sys" and "proc_sys" or "bwrap"] = v
      i = i + 2
    else
      die_usage("doctor: unexpected argument " .. a .. " (options: --proc-sys DIR, --bwrap PATH)")
    end
  end
  local preflight = require("isolation.preflight")
  local checks = isolation.preflight(opts)
  -- the probes' details quote what bwrap and the kernel said: escaped too
  io.stdout:write(textmod.escape_lines(preflight.format(checks)))
  local works = preflight.deny_works(checks)
  local fails, warns = preflight.counts(checks)
  local function n(k, word) return k .. " " .. word .. (k == 1 and "" or "s") end
  local warned = warns > 0 and (", " .. n(warns, "warning")) or ""
  if not works then
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied does NOT work here (", n(fails, "check"),
      " failed", warned, ")\n")
  elseif fails > 0 then
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied works here, but ", n(fails, "check"),
      " failed that isolate's defaults need", warned, "\n")
  else
    io.stdout:write("isolate doctor: a bwrap sandbox with the network denied works here",
      warns > 0 and (" (" .. n(warns, "warning") .. ": optional, or handled by the defaults)") or "", "\n")
  end
  -- a warning is no failure: the status follows the failed checks alone
  return fails > 0 and 1 or 0
end

-- The programs a run needs on PATH, by mode, each with what installs it.
-- Without this check a missing bwrap's only word is env's ("env: 'bwrap':
-- No such file or directory", exit 127), which reads as the command's.
local ENGINE_PROGRAMS = {
  bwrap = { name = "bwrap", what = "bwrap (bubblewrap)",
    fix = "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap), or use --mode docker or podman" },
  docker = { name = "docker", what = "docker",
    fix = "install Docker (apt-get install docker.io), or use --mode bwrap or podman" },
  podman = { name = "podman", what = "podman",
    fix = "install podman (apt-get install podman), or use --mode bwrap or docker" },
}
local SOCAT = { name = "socat", what = "socat (the relay of --bridge socat)",
  fix = "install socat (apt-get install socat), or use --bridge builtin" }

-- One line naming the fix and `isolate doctor`, exit 125, when the
-- program `p` (an ENGINE_PROGRAMS entry) is not on PATH.
local function require_program(p)
  if not p or require("isolation.preflight").find_program(p.name) then return end
  die(string.format("%s is not on PATH (an executable file named %s in one of its directories): %s;"
    .. " `isolate doctor` checks the rest", p.what, p.name, p.fix))
end

local function dispatch(args)
  if args[1] == "proxy" then return proxy_main(table.move(args, 2, #args, 1, {})) end
  if args[1] == "doctor" then return doctor_main(table.move(args, 2, #args, 1, {})) end
  local o = parse(args)
  if o.json and not o.dry_run then die_usage("--json needs --dry-run") end
  if not o.command or #o.command == 0 then
    die_usage("no command: isolate [options] -- command [args...]")
  end
  local cfg = build_config(o)
  resolve_table(o.resolve) -- its syntax, before anything starts
  local target = o.target or "local"
  local ok, terr = isolation.validate_for_target(cfg, target)
  if not ok then die_usage(terr) end
  if target ~= "local" and not o.dry_run then
    die_usage("--target " .. target .. " is checked, not run: isolate runs commands on this machine"
      .. " (use --dry-run, or --target local)")
  end
  if target == "local" and not o.dry_run then require_program(ENGINE_PROGRAMS[cfg.mode]) end
  local spec = build_spec(o, cfg)
  if cfg.mode == "bwrap" and cfg.network == "deny" and (spec.bridge or "socat") == "socat" and target == "local"
    and not o.dry_run then
    require_program(SOCAT) -- the relay runs the host's socat inside the sandbox
  end
  local places = {}
  if o.no_tools and #o.tools > 0 then die_usage("--tool and --no-tools contradict each other") end
  if #o.tools > 0 and cfg.mode ~= "bwrap" then
    die_usage("--tool works with --mode bwrap only (got --mode " .. (o.mode or cfg.mode) .. "): a container runs"
      .. " the image's programs, and --mode none has no sandbox to bind into")
  end
  if cfg.mode ~= "" and target == "local" then
    local home, from_passwd = sandbox_home()
    check_paths_resolved(o, spec, home)
    if from_passwd then o.home = home end
    places = writable_places(o, spec, home)
    if cfg.mode == "bwrap" and not o.no_tools then
      local cwd = assert(uv.cwd())
      local given = {}
      for i, p in ipairs(o.tools) do given[i] = absolute(p, cwd) end
      local plan, tperr = toolsmod.plan({ home = home, cwd = spec.workdir, path = os.getenv("PATH"),
        program = o.command[1], given = given, field = "--tool" })
      if not plan then die_usage((tostring(tperr):gsub("^%-%-tool%[%d+%]", "--tool"))) end
      toolsmod.apply(spec, plan, os.getenv("PATH"))
      o.tools_plan = plan
      for _, t in ipairs(plan.tools) do
        places[#places + 1] = { name = "a tool (" .. t .. ")", path = t, read_only = true }
      end
      if not o.json then
        for _, n in ipairs(plan.notes) do say("isolate: tools: ", n) end
      end
    end
  end
  spec.limits, spec.limits_via = limits_for(o, cfg, target)
  spec.command = command_line(o.command)
  if cfg.mode ~= "bwrap" and o.command[1]:sub(1, 1) == "%" then
    -- bash takes a first word starting with %, quoted or not, for a job
    -- (`fg %1`); exec runs it as the program it names.
    spec.command = "exec -- " .. spec.command
  end
  if cfg.mode == "bwrap" then
    -- bwrap is started with SIGINT, SIGQUIT and SIGHUP ignored (see run), so
    -- that Ctrl-C or a hang-up at the terminal cannot kill it and, through
    -- --die-with-parent, SIGKILL the command before it handles the signal.
    -- The command gets the default dispositions back here; its bridge keeps
    -- ignoring them. env reads a first word "-" as -i even after --: that
    -- program is run by exec in a bash that env starts.
    local via = o.command[1] == "-" and [[bash -c 'exec -- "$@"' bash ]] or ""
    spec.command = "exec env --default-signal=INT,QUIT,HUP -- " .. via .. spec.command
  end
  if cfg.mode == "bwrap" and target == "local" then
    -- a root launch: what only root may read here is masked inside
    do
      -- added to the masks of the tools' credentials (isolation.tools)
      local files, dirs = hostpaths.root_masks()
      for _, m in ipairs({ { "mask_files", files }, { "mask_dirs", dirs } }) do
        if m[2] then
          local list = spec[m[1]] or {}
          for _, p in ipairs(m[2]) do list[#list + 1] = p end
          spec[m[1]] = list
        end
      end
    end
    if uv.getuid() == 0 then
      io.stderr:write("isolate: the sandbox runs as root (uid 0 inside, without capabilities): it owns what it"
        .. " creates in the workdir; files only root may read (/etc/shadow, /etc/sudoers, ssh host keys, ...) are"
        .. " masked; run isolate as an ordinary user where you can\n")
    end
  end
  if cfg.mode == "bwrap" then
    -- the sandbox cannot type into the terminal (TIOCSTI, TIOCLINUX) nor
    -- reach the keyrings, ...: run gives bwrap the filter on this descriptor
    spec.seccomp_fd = 3
  end
  local allow = allowlist(o, cfg) -- also checks --hook-url
  if cfg.network ~= "deny" then allow = nil end
  if #places > 0 then check_host_paths(o, places) end
  o.tmp_base = tmp_base(places)
  if not o.tmp_base then
    die_usage("no place for the proxy's socket outside the sandbox's writable places: TMPDIR, /tmp and"
      .. " XDG_RUNTIME_DIR are all inside the workdir or a --bind; set TMPDIR to a directory outside them")
  end
  -- The whole spec is checked before anything starts; the proxy's socket
  -- is made at run time, so its place is held by the path it will have.
  if allow then spec.proxy_socket = o.tmp_base .. "/isolate.XXXXXX/proxy.sock" end
  local warnings, perr = protect.prepare(spec, os.getenv("HOME"))
  if not warnings then die_usage(perr) end
  for _, w in ipairs(warnings) do say("isolate: ", w) end
  local line, werr = isolation.wrap(spec)
  if not line then
    -- the environment's fields, named as the options that gave them
    die_usage((tostring(werr):gsub("env_pass%[%d+%]", "--env"):gsub("env_set key", "--setenv NAME")
      :gsub("env_set%.", "--setenv ")))
  end
  if o.dry_run then
    dry_run(o, spec, allow)
    return 0
  end
  return run(o, spec, allow)
end

------------------------------------------------------------------------------
-- Entry points

-- f(...)'s results, or nil, message, status for an Exit it raised; any
-- other error is a bug and propagates.
local function catch(f, ...)
  local r = table.pack(pcall(f, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  if getmetatable(r[2]) == Exit then return nil, r[2].message, r[2].status end
  error(r[2], 0)
end

--- Runs isolate with `args` (arg[1..n]); returns the exit status. Messages
--- go to stderr, prefixed "isolate: "; a usage error is 2, isolate's own
--- failure 125, otherwise the command's status (128+n after signal n).
function M.main(args)
  local ok, result = xpcall(dispatch, function(e)
    if getmetatable(e) == Exit then return e end
    return debug.traceback(tostring(e), 2)
  end, args)
  if ok then return result end
  if getmetatable(result) ~= Exit then
    io.stderr:write(textmod.escape_lines("isolate: internal error: " .. tostring(result)), "\n")
    return EXIT_FAILURE
  end
  if result.message then say("isolate: ", result.message) end
  return result.status
end

--- The options of `isolate [options] -- command`, parsed: a table with
--- the options' keys (mode, network, allow_hosts, binds, command, ...), or
--- nil, message, status (2 for a usage error; 0 after --help or --version,
--- whose text went to stdout).
function M.parse(args) return catch(parse, args) end

--- The options of `isolate proxy` (the arguments after "proxy"): a table
--- {unix, listen, allow, allow_private, quiet, no_token, accept_listeners},
--- or nil, message, status.
function M.parse_proxy(args) return catch(parse_proxy, args) end

--- A --config file's keys as a config table (JSON null keys left out, an
--- empty object for allow_hosts taken for the empty array), not yet
--- checked by isolation.config; or nil, message, 2.
function M.read_config(path) return catch(read_config_file, path) end

--- The config of parsed options `o`: the --config file's keys, the line's
--- options over them, isolate's defaults (bwrap, deny) for the rest,
--- normalized by isolation.config; or nil, message, 2.
function M.config(o) return catch(build_config, o) end

--- --resolve values as the proxy's resolve table (nil for none); or nil,
--- message, 2.
function M.resolve_table(list) return catch(resolve_table, list) end

--- The `bash -c` text of a command's words, each quoted for bash.
M.command_line = command_line

--- comm and parent pid of every process: {[pid] = {comm, ppid}}.
M.process_table = process_table

--- The pids a forwarded signal goes to, from a process table: under bwrap
--- every process of the sandbox but bwrap's own, else pid itself.
M.signal_targets = signal_targets

return M
