-- isolation.cli.proxyopts: the options isolate gives its proxy, built in
-- one place for the run and for --dry-run, and the proxy's refusals told
-- in terms of isolate's own options. The dry run builds the same proxy
-- (on a loopback port, without the audit log, closed at once), so that
-- what the run would refuse (a route's header, --upstream-ca,
-- --upstream-proxy, --resolve) the dry run refuses too.
local uv = require("luv")
local isolation = require("isolation")
local common = require("isolation.cli.common")
local args_mod = require("isolation.cli.args")

local die, die_usage, absolute = common.die, common.die_usage, common.absolute

local M = {}

-- The audit log's session field: this run, told from the others that
-- append to the same file.
local function session_id()
  return string.format("isolate-%d-%d", uv.os_getpid(), os.time())
end

--- isolation.proxy's options for this run; `at` names where it listens
--- ({unix = PATH, loop = uv, on_event = f}, or {listen = "127.0.0.1:0"}
--- for the dry run's check, which writes no log).
function M.options(o, spec, allow, at)
  local opts = { allow = allow,
    accept_listeners = spec.bridge == "pass" and 2 or nil, -- HTTP and SOCKS5
    allow_private = o.allow_private or nil, resolve = args_mod.resolve_table(o.resolve), report = o.learn or nil,
    routes = o.routes, upstream_ca_file = o.routes and o.upstream_ca and absolute(o.upstream_ca, assert(uv.cwd())),
    upstream_proxy = o.upstream_proxy,
    -- the sandbox's name for the proxy: only http://127.0.0.1:<it>/<route>/ is a route
    route_port = o.routes and spec.proxy_port or nil }
  if not at.listen and o.log then
    opts.audit_log = absolute(o.log, assert(uv.cwd()))
    opts.session = session_id()
  end
  for k, v in pairs(at) do opts[k] = v end
  return opts
end

--- isolation.proxy's refusal of a value isolate took from its options,
--- told in terms of the option (exit 2); any other failure is isolate's
--- own (125).
function M.failed(err)
  err = tostring(err)
  if err:find("audit_log", 1, true) then die_usage("--log " .. err:gsub("^isolation: audit_log ", "")) end
  if err:find("resolve", 1, true) then die_usage("--resolve: " .. err) end
  if err:find("routes", 1, true) then die_usage("--secret: " .. err) end
  if err:find("upstream_ca_file", 1, true) then die_usage("--upstream-ca: " .. err) end
  if err:find("^isolation: upstream_proxy ") then
    die_usage("--upstream-proxy " .. err:gsub("^isolation: upstream_proxy ", ""))
  end
  die("cannot start the proxy: " .. err)
end

--- The dry run's check: the run's proxy, built and closed at once.
function M.check(o, spec, allow)
  local proxy, err = isolation.proxy(M.options(o, spec, allow, { listen = "127.0.0.1:0" }))
  if not proxy then M.failed(err) end
  proxy:close()
end

return M
