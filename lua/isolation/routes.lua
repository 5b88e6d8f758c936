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

--- The launch spec's routes (names, the upstream and the variables each
--- sets inside: the base URL in ISOLATION_ROUTE_<NAME> and url_env, the
--- placeholder in env and, for an agent's, each of its key variables
--- present; git's insteadOf with git) and the proxy's routes array (with
--- the values). The launch spec never holds a value.
function M.apply(list, present)
  local proxy_routes, spec_routes = {}, {}
  for _, r in ipairs(list) do
    local keys, seen = {}, {}
    local function key(n)
      if n and not seen[n] then seen[n] = true; keys[#keys + 1] = n end
    end
    key(r.env)
    for _, k in ipairs(r.keys or {}) do
      if present and present(k[1]) then key(k[1]) end
    end
    spec_routes[#spec_routes + 1] = { name = r.name, upstream = r.upstream, url_env = r.url_env,
      key_env = #keys > 0 and keys or nil, git = r.git or nil }
    proxy_routes[#proxy_routes + 1] = { name = r.name, upstream = r.upstream, header = r.header, value = r.value }
  end
  return spec_routes, proxy_routes
end

return M
