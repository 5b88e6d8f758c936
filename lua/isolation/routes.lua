-- isolation.routes: credential routes as a launch sees them (API:
-- "Credentials that stay outside"). The secret goes to the proxy alone;
-- the launch spec gets the variables each route sets inside, never a value.
local M = {}

--- The agents whose key a route can carry: the key variables in order of
--- preference with their header, the base-URL variable the agent honours,
--- its default upstream.
M.AGENTS = {
  claude = { keys = { { "ANTHROPIC_API_KEY", "x-api-key" }, { "ANTHROPIC_AUTH_TOKEN", "bearer" } },
    url_env = "ANTHROPIC_BASE_URL", upstream = "https://api.anthropic.com" },
  codex = { keys = { { "OPENAI_API_KEY", "bearer" } }, url_env = "OPENAI_BASE_URL",
    upstream = "https://api.openai.com/v1" },
  gemini = { keys = { { "GEMINI_API_KEY", "x-goog-api-key" } }, url_env = "GOOGLE_GEMINI_BASE_URL",
    upstream = "https://generativelanguage.googleapis.com" },
}

--- The host of an https URL (lower case), or nil.
function M.host_of(url)
  local h = type(url) == "string" and url:match("^https://%[?([^/:%]@?#]+)")
  return h and h:lower() or nil
end

--- The default route name of an upstream: its host with dots as dashes.
function M.default_name(url)
  local h = M.host_of(url)
  return h and (h:gsub("[^a-z0-9-]", "-")) or nil
end

--- The inside variable of a route: ISOLATION_ROUTE_<NAME>.
function M.var(name)
  return "ISOLATION_ROUTE_" .. name:upper():gsub("-", "_")
end

--- The agent's route from keys (a function name -> value, or a table), as
--- {name, env, upstream, header, value, url_env, keys}; nil when its key
--- is not there.
function M.agent_route(agent, keys)
  local a = M.AGENTS[agent or ""]
  if not a then return nil end
  local get = type(keys) == "function" and keys or function(n) return keys[n] end
  for _, k in ipairs(a.keys) do
    local v = get(k[1])
    if type(v) == "string" and v ~= "" then
      local up = get(a.url_env)
      if not (type(up) == "string" and up:match("^https://")) then up = a.upstream end
      return { name = agent, env = k[1], upstream = up, header = k[2], value = v, url_env = a.url_env,
        keys = a.keys }
    end
  end
  return nil
end

--- Sets each route's variables in env_set (a table, changed): the base URL
--- in ISOLATION_ROUTE_<NAME> (and url_env), the placeholder in env (and, for
--- an agent's, each of its key variables present), and with git the
--- GIT_CONFIG_* insteadOf entries. Returns the proxy's routes array.
function M.apply(env_set, list, port, present)
  local proxy_routes, git = {}, {}
  for _, r in ipairs(list) do
    local base = "http://127.0.0.1:" .. port .. "/" .. r.name
    env_set[M.var(r.name)] = base
    local placeholder = "isolation-route-" .. r.name
    if r.env then env_set[r.env] = placeholder end
    if r.url_env then env_set[r.url_env] = base end
    for _, k in ipairs(r.keys or {}) do
      if present and present(k[1]) then env_set[k[1]] = placeholder end
    end
    if r.git then git[#git + 1] = { base .. "/", (r.upstream:gsub("/*$", "")) .. "/" } end
    proxy_routes[#proxy_routes + 1] = { name = r.name, upstream = r.upstream, header = r.header, value = r.value }
  end
  if #git > 0 then
    env_set.GIT_CONFIG_COUNT = tostring(#git)
    for i, g in ipairs(git) do
      env_set["GIT_CONFIG_KEY_" .. (i - 1)] = "url." .. g[1] .. ".insteadOf"
      env_set["GIT_CONFIG_VALUE_" .. (i - 1)] = g[2]
    end
  end
  return proxy_routes
end

return M
