-- isolation.cli.routes: credential routes, from --secret and from
-- --agent's own key: each route's secret goes to the proxy alone, the
-- sandbox gets its base URL and a placeholder in the key's variable.
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


M.for_run = routes_for

return M
