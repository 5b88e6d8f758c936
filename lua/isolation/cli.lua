-- isolation.cli: the `isolate` command (bin/isolate is a few lines over
-- it, as busted's bin/busted is over busted.runner). `isolate --help` is
-- the reference; docs/reference/cli.md the details.
--
-- Runs one command sandboxed (bwrap or docker), behind the egress
-- allowlist proxy when the network is denied; `isolate proxy` runs a proxy
-- in the foreground; `isolate doctor` probes the machine. This file only
-- dispatches; each concern is a module of lua/isolation/cli/:
--
--   common.lua   say, the Exit value, quoting, small formats
--   help.lua     the text of --help
--   args.lua     the options parsed, did-you-mean, --resolve
--   config.lua   the --config file and the config of a run
--   paths.lua    the home, workdir and binds checked; the proxy's place
--   routes.lua   credential routes (--secret, --agent's key)
--   prepare.lua  from the options to a checked launch spec and allowlist
--   dryrun.lua   --dry-run's output
--   run.lua      the run: proxy, launch, signals, end checks, status
--   signals.lua  where a forwarded signal goes
--   summary.lua  the end-of-run summary and learn mode's options
--   proxy.lua    `isolate proxy`
--   doctor.lua   `isolate doctor`
--
-- Nothing here calls os.exit: a usage error or a failure raises an Exit
-- value that main() turns into the message and the status it returns, so
-- that the option parser, the config file reader and the process table
-- can be called in-process (spec/cli_spec.lua) and return nil, message,
-- status instead of ending the caller.
local textmod = require("isolation.text")
local common = require("isolation.cli.common")
local args_mod = require("isolation.cli.args")
local config = require("isolation.cli.config")
local proxy = require("isolation.cli.proxy")
local signals = require("isolation.cli.signals")

local Exit, catch, die_usage = common.Exit, common.catch, common.die_usage

local M = {}

local function dispatch(args)
  if args[1] == "proxy" then return proxy.main(table.move(args, 2, #args, 1, {})) end
  if args[1] == "doctor" then return require("isolation.cli.doctor")(table.move(args, 2, #args, 1, {})) end
  local o = args_mod.parse(args)
  if o.json and not o.dry_run then die_usage("--json needs --dry-run") end
  if not o.command or #o.command == 0 then
    die_usage("no command: isolate [options] -- command [args...]")
  end
  local spec, allow = require("isolation.cli.prepare").spec(o)
  if o.dry_run then
    require("isolation.cli.dryrun")(o, spec, allow)
    return 0
  end
  return require("isolation.cli.run")(o, spec, allow)
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
    return common.EXIT_FAILURE
  end
  if result.message then common.say("isolate: ", result.message) end
  return result.status
end

--- The options of `isolate [options] -- command`, parsed: a table with
--- the options' keys (mode, network, allow_hosts, binds, command, ...), or
--- nil, message, status (2 for a usage error; 0 after --help or --version,
--- whose text went to stdout).
function M.parse(args) return catch(args_mod.parse, args) end

--- The options of `isolate proxy` (the arguments after "proxy"): a table
--- {unix, listen, allow, allow_private, quiet, no_token, accept_listeners},
--- or nil, message, status.
function M.parse_proxy(args) return catch(proxy.parse, args) end

--- A --config file's keys as a config table (JSON null keys left out, an
--- empty object for allow_hosts taken for the empty array), not yet
--- checked by isolation.config; or nil, message, 2.
function M.read_config(path) return catch(config.read_file, path) end

--- The config of parsed options `o`: the --config file's keys, the line's
--- options over them, isolate's defaults (bwrap, deny) for the rest,
--- normalized by isolation.config; or nil, message, 2.
function M.config(o) return catch(config.build, o) end

--- --resolve values as the proxy's resolve table (nil for none); or nil,
--- message, 2.
function M.resolve_table(list) return catch(args_mod.resolve_table, list) end

--- The `bash -c` text of a command's words, each quoted for bash.
M.command_line = common.command_line

--- comm and parent pid of every process: {[pid] = {comm, ppid}}.
M.process_table = signals.process_table

--- The pids a forwarded signal goes to, from a process table: under bwrap
--- every process of the sandbox but bwrap's own, else pid itself.
M.signal_targets = signals.signal_targets

return M
