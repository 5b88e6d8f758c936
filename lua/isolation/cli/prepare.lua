-- isolation.cli.prepare: from the parsed options to a checked launch spec
-- and the proxy's allowlist, before anything starts: the config, the
-- programs on PATH, the workdir and binds, the tools, the environment,
-- the limits, the command's text, the root masks, the protected paths and
-- the whole line checked by isolation.wrap.
local uv = require("luv")
local isolation = require("isolation")
local protect = require("isolation.protect")
local hostpaths = require("isolation.hostpaths")
local toolsmod = require("isolation.tools")
local cli = require("isolation.cli.common")
local hostcheck = require("isolation.cli.paths")
local args_mod = require("isolation.cli.args")
local config = require("isolation.cli.config")
local routes = require("isolation.cli.routes")

local say, die, die_usage, absolute = cli.say, cli.die, cli.die_usage, cli.absolute
local EXIT_USAGE = cli.EXIT_USAGE

local M = {}

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
  o.routes = routes.for_run(o, cfg, spec)
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

-- The config and what the options say against each other and the
-- target, before a file is looked at; the programs the run needs.
local function checked_config(o)
  local cfg = config.build(o)
  args_mod.resolve_table(o.resolve) -- its syntax, before anything starts
  local target = o.target or "local"
  local ok, terr = isolation.validate_for_target(cfg, target)
  if not ok then die_usage(terr) end
  if target ~= "local" and not o.dry_run then
    die_usage("--target " .. target .. " is checked, not run: isolate runs commands on this machine"
      .. " (use --dry-run, or --target local)")
  end
  if target == "local" and not o.dry_run then require_program(ENGINE_PROGRAMS[cfg.mode]) end
  return cfg, target
end

local function check_tool_options(o, cfg)
  if o.no_tools and #o.tools > 0 then die_usage("--tool and --no-tools contradict each other") end
  if #o.tools > 0 and cfg.mode ~= "bwrap" then
    die_usage("--tool works with --mode bwrap only (got --mode " .. (o.mode or cfg.mode) .. "): a container runs"
      .. " the image's programs, and --mode none has no sandbox to bind into")
  end
end

-- The programs under $HOME the command needs, bound read-only (a bwrap
-- run without --no-tools); each is a place the sandbox reads.
local function add_tools(o, spec, home, places)
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

-- The home, the resolved workdir and binds, and the tools: the places the
-- sandbox can write or read, for the checks of the host's own paths.
local function places_of(o, cfg, spec, target)
  if cfg.mode == "" or target ~= "local" then return {} end
  local home, from_passwd = hostcheck.sandbox_home()
  hostcheck.check_paths_resolved(o, spec, home)
  if from_passwd then o.home = home end
  local places = hostcheck.writable_places(o, spec, home)
  if cfg.mode == "bwrap" and not o.no_tools then add_tools(o, spec, home, places) end
  return places
end

-- The bash text of the command the line runs.
local function command_text(o, cfg)
  local text = cli.command_line(o.command)
  if cfg.mode ~= "bwrap" and o.command[1]:sub(1, 1) == "%" then
    -- bash takes a first word starting with %, quoted or not, for a job
    -- (`fg %1`); exec runs it as the program it names.
    text = "exec -- " .. text
  end
  if cfg.mode == "bwrap" then
    -- bwrap is started with SIGINT, SIGQUIT and SIGHUP ignored (see run), so
    -- that Ctrl-C or a hang-up at the terminal cannot kill it and, through
    -- --die-with-parent, SIGKILL the command before it handles the signal.
    -- The command gets the default dispositions back here; its bridge keeps
    -- ignoring them. env reads a first word "-" as -i even after --: that
    -- program is run by exec in a bash that env starts.
    local via = o.command[1] == "-" and [[bash -c 'exec -- "$@"' bash ]] or ""
    text = "exec env --default-signal=INT,QUIT,HUP -- " .. via .. text
  end
  return text
end

-- A root launch: what only root may read here is masked inside, added to
-- the masks of the tools' credentials (isolation.tools), and said.
local function mask_root_files(spec)
  local files, dirs = hostpaths.root_masks()
  for _, m in ipairs({ { "mask_files", files }, { "mask_dirs", dirs } }) do
    if m[2] then
      local list = spec[m[1]] or {}
      for _, p in ipairs(m[2]) do list[#list + 1] = p end
      spec[m[1]] = list
    end
  end
  if uv.getuid() == 0 then
    io.stderr:write("isolate: the sandbox runs as root (uid 0 inside, without capabilities): it owns what it"
      .. " creates in the workdir; files only root may read (/etc/shadow, /etc/sudoers, ssh host keys, ...) are"
      .. " masked; run isolate as an ordinary user where you can\n")
  end
end

-- The host's own paths kept out of the sandbox's places, the proxy's
-- directory placed outside them, the protected paths, and the whole line
-- checked before anything starts.
local function check_line(o, spec, places, allow)
  if #places > 0 then hostcheck.check_host_paths(o, places) end
  o.tmp_base = hostcheck.tmp_base(places)
  if not o.tmp_base then
    die_usage("no place for the proxy's socket outside the sandbox's writable places: TMPDIR, /tmp and"
      .. " XDG_RUNTIME_DIR are all inside the workdir or a --bind; set TMPDIR to a directory outside them")
  end
  -- The proxy's socket is made at run time, so its place is held by the
  -- path it will have.
  if allow then spec.proxy_socket = o.tmp_base .. "/isolate.XXXXXX/proxy.sock" end
  local warnings, perr = protect.prepare(spec, os.getenv("HOME"))
  if not warnings then die_usage(perr) end
  for _, w in ipairs(warnings) do say("isolate: ", w) end
  local line, werr = isolation.wrap(spec)
  if not line then
    -- the environment's fields, named as the options that gave them
    die_usage((tostring(werr):gsub("env_pass%[%d+%]", "--env"):gsub("env_set key", "--setenv NAME")
      :gsub("env_set%.", "--setenv "):gsub("^isolation: routes", "--secret: routes")))
  end
end

--- The launch spec of parsed options `o` (a command given), checked
--- whole, and the proxy's allowlist (nil without --network deny). Raises
--- an Exit for a usage error or a missing program.
function M.spec(o)
  local cfg, target = checked_config(o)
  local spec = build_spec(o, cfg)
  if cfg.mode == "bwrap" and cfg.network == "deny" and (spec.bridge or "socat") == "socat" and target == "local"
    and not o.dry_run then
    require_program(SOCAT) -- the relay runs the host's socat inside the sandbox
  end
  check_tool_options(o, cfg)
  local places = places_of(o, cfg, spec, target)
  spec.limits, spec.limits_via = limits_for(o, cfg, target)
  spec.command = command_text(o, cfg)
  if cfg.mode == "bwrap" and target == "local" then mask_root_files(spec) end
  if cfg.mode == "bwrap" then
    -- the sandbox cannot type into the terminal (TIOCSTI, TIOCLINUX) nor
    -- reach the keyrings, ...: run gives bwrap the filter on this descriptor
    spec.seccomp_fd = 3
  end
  local allow = allowlist(o, cfg) -- also checks --hook-url
  if cfg.network ~= "deny" then allow = nil end
  check_line(o, spec, places, allow)
  return spec, allow
end

return M
