-- isolation.cli.routes: credential routes, from --secret and from
-- --agent's own key: each route's secret goes to the proxy alone, the
-- sandbox gets its base URL and a placeholder in the key's variable.
local routes = require("isolation.routes")
local common = require("isolation.cli.common")

local die_usage = common.die_usage

local M = {}

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

-- The routes of --secret and --agent's own key when it is set here (API:
-- credential routes), with their values from the environment (nil: none).
-- The variables each sets inside go into spec.routes by the rule the
-- session manager follows (isolation.routes.apply), and the launch spec
-- builds them: the base URL, the placeholder in the key's variable, the
-- agent's base-URL variable, and with --git the insteadOf entries.
local function routes_for(o, cfg, spec)
  local agent = not o.no_routes and cfg.network == "deny" and routes.agent_route(o.agent, os.getenv) or nil
  if not agent and #o.secrets == 0 then return nil end
  if cfg.network ~= "deny" then die_usage("--secret needs --network deny (the route is the proxy's)") end
  local list, seen = {}, {}
  local function add(r)
    if seen[r.name] then die_usage(string.format("--secret: two routes are named %q", r.name)) end
    seen[r.name] = true
    r.value = os.getenv(r.env)
    if not r.value or r.value == "" then
      die_usage(string.format("--secret %s: %s is not set in this environment", r.name, r.env))
    end
    for _, n in ipairs(spec.env_pass or {}) do
      if n == r.env then die_usage("--env " .. n .. " would pass the secret of --secret inside") end
    end
    list[#list + 1] = r
  end
  if agent then add(agent) end -- --git is for the --secret routes, not the model API
  for _, a in ipairs(o.secrets) do
    local r = parse_secret(a)
    r.git = o.git_routes
    add(r)
  end
  if agent then o.agent_upstream_host = agent.upstream:match("^https://%[?([^/:%]]+)"):lower() end
  -- the launch spec gets each route's variables (names and the upstream,
  -- never a value: the real values never arrive inside, even through
  -- --inherit-env); the proxy gets the values
  local spec_routes, proxy_routes = routes.apply(list, function(n) return os.getenv(n) ~= nil end)
  spec.routes = spec_routes
  return proxy_routes
end

M.for_run = routes_for

return M
