-- isolation.cli.args: the options of `isolate [options] -- command`
-- parsed into a table, and the did-you-mean guess for an unknown option
-- (which `isolate proxy` uses too). --help and --version print here.
local isolation = require("isolation")
local common = require("isolation.cli.common")

local die_usage, exit_with = common.die_usage, common.exit_with

local M = {}

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

local SINGLE = {
  ["--mode"] = "mode", ["--network"] = "network", ["--agent"] = "agent", ["--workdir"] = "workdir",
  ["--ca-cert"] = "ca_cert", ["--bridge"] = "bridge", ["--target"] = "target", ["--config"] = "config",
  ["--hook-url"] = "hook_url", ["--seccomp"] = "seccomp", ["--log"] = "log", ["--agent-config"] = "agent_config",
  ["--memory"] = "memory", ["--pids"] = "pids", ["--tmpfs-size"] = "tmpfs_size", ["--cpus"] = "cpus",
  ["--time"] = "time", ["--upstream-ca"] = "upstream_ca", ["--upstream-proxy"] = "upstream_proxy",
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
    if a == "--help" then io.stdout:write(require("isolation.cli.help")); exit_with(0)
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

M.parse, M.did_you_mean, M.resolve_table = parse, did_you_mean, resolve_table

return M
