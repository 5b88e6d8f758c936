-- isolation.policy: which isolation a launch gets.
--
-- A project has a default (stored as normalized JSON in
-- project.default_isolation_json); a launch may override it; a continuation
-- (a resumed or handed-off session) keeps exactly the isolation it was first
-- launched with, never a later edit of the project's default.
--
-- JSON goes through isolation.json, the strict codec (lua/isolation/json.lua
-- says why not lua-cjson): a launch configuration round-trips exactly, its
-- unknown fields kept.
local isolation = require("isolation")
local json = require("isolation.json")

local M = {}

local NULL = json.null
local ARRAY = json.array_mt
local show = json.show

--- The metatable that marks a table as a JSON array (an empty one encodes as `[]`).
M.array_mt = ARRAY

--- Shows a value inside an error message (isolation.json's show).
M.show = show

-- A config's allow_hosts is an array, also when it is empty and was built
-- in Lua (isolation.config returns a plain table, which the generic encoder
-- writes as {}): a copy of the config with it marked, else cfg itself.
local function shape_config(cfg)
  if type(cfg) ~= "table" or getmetatable(cfg) == ARRAY then return cfg end
  local hosts = cfg.allow_hosts
  if type(hosts) ~= "table" or next(hosts) ~= nil or getmetatable(hosts) == ARRAY then return cfg end
  local copy = {}
  for k, v in pairs(cfg) do copy[k] = v end
  copy.allow_hosts = setmetatable({}, ARRAY)
  return copy
end

--- Encodes a value as JSON text with isolation.json, shaped as policy
--- writes configs: where v is a config, or a launch configuration with an
--- isolation config, an empty allow_hosts is written `[]`. The caller's
--- table is not changed. Returns the text or nil, err.
function M.json_encode(v, where)
  v = shape_config(v)
  if type(v) == "table" and getmetatable(v) ~= ARRAY and type(v.isolation) == "table" then
    local iso = shape_config(v.isolation)
    if iso ~= v.isolation then
      local copy = {}
      for k, x in pairs(v) do copy[k] = x end
      copy.isolation = iso
      v = copy
    end
  end
  return json.encode(v, where)
end

--- Decodes JSON text strictly (isolation.json's decode).
M.json_decode = json.decode

------------------------------------------------------------------------------
-- Configs

-- Normalizes a config with the C validator; `field` names where it came from.
-- JSON null for a key inside the object means the key was not given. An
-- empty JSON object for allow_hosts is the empty array lua-cjson writes for
-- an empty Lua table (`cjson.encode(isolation.config{...})` must be
-- accepted back); the C validator refuses a non-empty one, naming it. The
-- other way round does not hold: `"isolation": []` is not an object.
local function normalize(t, field)
  if t ~= nil and (type(t) ~= "table" or getmetatable(t) == ARRAY) then
    return nil, "isolation: " .. field .. " must be an object or null (got "
      .. (type(t) == "table" and "an array" or show(t)) .. ")"
  end
  local raw = t
  if t ~= nil then
    raw = {}
    for k, v in pairs(t) do
      if v ~= NULL then raw[k] = v end
    end
  end
  local cfg, err = isolation.config(raw)
  if not cfg then
    if field ~= "isolation" and err then err = err:gsub("^isolation: ", "isolation: " .. field .. ": ", 1) end
    return nil, err
  end
  if type(cfg.allow_hosts) == "table" and getmetatable(cfg.allow_hosts) == nil then
    setmetatable(cfg.allow_hosts, ARRAY)
  end
  return cfg
end

local function none()
  return normalize(nil, "isolation")
end

local function check_project(project)
  if type(project) ~= "table" then
    error("bad argument #1 (project: table expected, got " .. type(project) .. ")", 3)
  end
end

-- A body given as a table or as JSON text; returns the table.
local function body_table(body, what)
  if type(body) == "string" then
    local t, err = M.json_decode(body, what)
    if t == nil then return nil, err end
    body = t
  end
  if type(body) ~= "table" or getmetatable(body) == ARRAY then
    return nil, "isolation: " .. what .. " must be a JSON object (got " .. show(body) .. ")"
  end
  return body
end

--- The config a launch gets: an absent or null override means the project
--- default (no isolation when there is none); a table replaces it. Returns
--- a normalized config, or nil, err.
function M.effective(project_default, override)
  if override == nil or override == NULL then
    if project_default == nil or project_default == NULL then return none() end
    return normalize(project_default, "project default")
  end
  return normalize(override, "isolation")
end

--- The project's default config, from project.default_isolation_json
--- (nil, "" or JSON null: no isolation). nil, err when the stored text is bad.
function M.project_default(project)
  check_project(project)
  local text = project.default_isolation_json
  if text == nil or text == "" or text == NULL then return none() end
  local t, err = M.json_decode(text, "default_isolation_json")
  if t == nil then return nil, err end
  if t == NULL then return none() end
  return normalize(t, "default_isolation_json")
end

--- Handles a PATCH body {"isolation": {...}} (table or JSON text): stores the
--- normalized config as JSON in project.default_isolation_json and returns
--- project; `{"isolation": null}` clears it; a body without "isolation"
--- leaves it alone. On error: nil, err, and the project is untouched.
function M.patch_project(project, body)
  check_project(project)
  local b, err = body_table(body, "PATCH body")
  if not b then return nil, err end
  local iso = b.isolation
  if iso == nil then return project end
  if iso == NULL then
    project.default_isolation_json = nil
    return project
  end
  local cfg
  cfg, err = normalize(iso, "isolation")
  if not cfg then return nil, err end
  local text
  text, err = M.json_encode(cfg, "isolation")
  if not text then return nil, err end
  project.default_isolation_json = text
  return project
end

--- The effective config for a POST body (table or JSON text, or nil) whose
--- "isolation" may be absent, null or an object. Other keys are the
--- caller's and are ignored here.
function M.session_isolation(project, body)
  check_project(project)
  local default, err = M.project_default(project)
  if not default then return nil, err end
  local override
  if body ~= nil then
    local b
    b, err = body_table(body, "POST body")
    if not b then return nil, err end
    override = b.isolation
  end
  return M.effective(default, override)
end

------------------------------------------------------------------------------
-- Launch configurations

-- Checks the fields a launch configuration knows; the rest are kept as is.
local function check_launch(lc)
  if lc.profile_name ~= nil and lc.profile_name ~= NULL and type(lc.profile_name) ~= "string" then
    return nil, "isolation: profile_name must be a string (got " .. show(lc.profile_name) .. ")"
  end
  if type(lc.profile_name) == "string" and lc.profile_name:find("\0", 1, true) then
    return nil, "isolation: profile_name must not contain a NUL byte (got " .. show(lc.profile_name) .. ")"
  end
  if lc.yolo ~= nil and lc.yolo ~= NULL and type(lc.yolo) ~= "boolean" then
    return nil, "isolation: yolo must be a boolean (got " .. show(lc.yolo) .. ")"
  end
  if lc.isolation ~= nil and lc.isolation ~= NULL then
    local cfg, err = normalize(lc.isolation, "isolation")
    if not cfg then return nil, err end
  end
  return true
end

--- Encodes a launch configuration {profile_name, yolo, isolation, ...} as
--- JSON text. Unknown fields are kept. nil, err for an invalid one.
function M.encode_launch(lc)
  if type(lc) ~= "table" then
    error("bad argument #1 to 'encode_launch' (launch configuration: table expected, got " .. type(lc) .. ")", 2)
  end
  local ok, err = check_launch(lc)
  if not ok then return nil, err end
  return M.json_encode(lc, "launch configuration")
end

--- Decodes a launch configuration from JSON text; returns a table that
--- encode_launch turns back into the same JSON. nil, err when the text is
--- not a JSON object or a known field (isolation included) is invalid.
function M.decode_launch(text)
  local lc, err = M.json_decode(text, "launch configuration")
  if lc == nil then return nil, err end
  if type(lc) ~= "table" or getmetatable(lc) == ARRAY then
    return nil, "isolation: launch configuration must be a JSON object (got " .. show(lc) .. ")"
  end
  local ok
  ok, err = check_launch(lc)
  if not ok then return nil, err end
  return lc
end

--- The isolation a continuation keeps: the one captured in its saved launch
--- configuration (table or JSON text), normalized; no isolation when the
--- saved launch had none. Never the project's current default.
function M.for_continuation(saved_launch, project)
  local _ = project -- deliberately unused: a later default edit must not leak in
  local lc, err
  if type(saved_launch) == "string" then
    lc, err = M.decode_launch(saved_launch)
    if not lc then return nil, err end
  elseif type(saved_launch) == "table" then
    lc = saved_launch
    local ok
    ok, err = check_launch(lc)
    if not ok then return nil, err end
  else
    return nil, "isolation: continuation must be a launch configuration, a table or JSON text (got "
      .. show(saved_launch) .. ")"
  end
  if lc.isolation == nil or lc.isolation == NULL then return none() end
  return normalize(lc.isolation, "isolation")
end

--- The session card's badge: nil without isolation, else "🔒 bwrap" or
--- "🔒 docker" or "🔒 podman", with " · deny" when the network is denied
--- (the allowlist proxy) and " · no network" for network none.
function M.badge(config)
  if config == nil or config == NULL then return nil end
  local cfg, err = normalize(config, "isolation")
  if not cfg then return nil, err end
  if cfg.mode == "" then return nil end
  local b = "🔒 " .. cfg.mode
  if cfg.network == "deny" then b = b .. " · deny" end
  if cfg.network == "none" then b = b .. " · no network" end
  return b
end

return M
