-- isolation.policy: which isolation a launch gets.
--
-- A project has a default (stored as normalized JSON in
-- project.default_isolation_json); a launch may override it; a continuation
-- (a resumed or handed-off session) keeps exactly the isolation it was first
-- launched with, never a later edit of the project's default.
--
-- JSON: Debian's lua-cjson 2.1.0 has no array metatable, decodes every number
-- as a float, and cannot tell `[]` from `{}` after decoding. A launch
-- configuration must round-trip exactly and keep fields we do not know, so
-- this module carries a small strict codec of its own: arrays decoded from
-- JSON carry `policy.array_mt` (an empty one encodes as `[]` again),
-- integers stay integers, JSON null is `cjson.null`, object keys are written
-- sorted (the same value always gives the same text), and duplicate keys are
-- refused (two parsers must never disagree about which one counts).
local cjson = require("cjson")
local isolation = require("isolation")

local M = {}

local NULL = cjson.null
local ARRAY = cjson.array_mt or cjson.empty_array_mt or { __name = "isolation.json.array" }
local MAX_DEPTH = 64

--- The metatable that marks a table as a JSON array (an empty one encodes as `[]`).
M.array_mt = ARRAY

-- Shows a value inside an error message, shortened and on one line.
local function show(v)
  if v == NULL then return "null" end
  if type(v) == "string" then
    local s = v
    if #s > 60 then s = s:sub(1, 57) .. "..." end
    return (string.format("%q", s):gsub("\\\n", "\\n"))
  end
  if type(v) == "table" then return "a table" end
  return tostring(v)
end
M._show = show

------------------------------------------------------------------------------
-- JSON encoding

local escapes = {
  ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t",
}

local function encode_string(s, where)
  if not utf8.len(s) then
    return nil, "isolation: " .. where .. " is not valid UTF-8"
  end
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function encode_number(n, where)
  if math.type(n) == "integer" then return string.format("%d", n) end
  if n ~= n or n == math.huge or n == -math.huge then
    return nil, "isolation: " .. where .. " must be a finite number (got " .. tostring(n) .. ")"
  end
  local s
  for digits = 14, 17 do
    s = string.format("%." .. digits .. "g", n)
    if tonumber(s) == n then break end
  end
  -- Keep a float a float: 1.0 must not come back as the integer 1.
  if not s:find("[.eEn]") then s = s .. ".0" end
  return s
end

-- True when t is a non-empty sequence 1..n with nothing else in it.
local function is_sequence(t)
  local n = #t
  if n == 0 then return false end
  local count = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end

local encode_value

local function encode_table(t, where, depth, key)
  -- depth 0 is the outermost table: at most MAX_DEPTH tables, as decoded
  if depth >= MAX_DEPTH then
    return nil, "isolation: " .. where .. " is nested too deeply (more than " .. MAX_DEPTH .. " levels)"
  end
  local out = {}
  -- An empty allow_hosts is an array even when the table carries no mark.
  if getmetatable(t) == ARRAY or is_sequence(t) or (next(t) == nil and key == "allow_hosts") then
    for i = 1, #t do
      local s, err = encode_value(t[i], where .. "[" .. i .. "]", depth + 1)
      if not s then return nil, err end
      out[i] = s
    end
    for k in pairs(t) do
      if math.type(k) ~= "integer" or k < 1 or k > #t then
        return nil, "isolation: " .. where .. " mixes array items and keys (key " .. show(k) .. ")"
      end
    end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then
      return nil, "isolation: " .. where .. " has a key that is not a string (" .. show(k) .. ")"
    end
    if k:find("\0", 1, true) then
      return nil, "isolation: " .. where .. " key must not contain a NUL byte (got " .. show(k) .. ")"
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for i, k in ipairs(keys) do
    local ks, err = encode_string(k, where .. " key")
    if not ks then return nil, err end
    local vs
    vs, err = encode_value(t[k], where .. "." .. k, depth + 1, k)
    if not vs then return nil, err end
    out[i] = ks .. ":" .. vs
  end
  return "{" .. table.concat(out, ",") .. "}"
end

encode_value = function(v, where, depth, key)
  local ty = type(v)
  if v == NULL then return "null" end
  if ty == "string" then return encode_string(v, where) end
  if ty == "number" then return encode_number(v, where) end
  if ty == "boolean" then return tostring(v) end
  if ty == "table" then return encode_table(v, where, depth, key) end
  return nil, "isolation: " .. where .. " cannot be written as JSON (got a " .. ty .. ")"
end

--- Encodes a Lua value as JSON text: sorted keys, `[]` for arrays marked
--- with `array_mt`, integers as integers. Returns the text or nil, err.
function M.json_encode(v, where)
  return encode_value(v, where or "value", 0)
end

------------------------------------------------------------------------------
-- JSON decoding

local decode_value

local function json_error(what, text, pos)
  return nil, "isolation: " .. what .. " is not valid JSON (" .. text .. " at byte " .. pos .. ")"
end

local function skip_ws(s, pos)
  return s:find("[^ \t\r\n]", pos) or #s + 1
end

local function decode_string(s, pos, what)
  -- pos is at the opening quote; find the closing one, skipping escapes.
  local i = pos + 1
  while true do
    local j = s:find('["\\%c]', i)
    if not j then return json_error(what, "unterminated string", pos) end
    local c = s:sub(j, j)
    if c == '"' then
      local token = s:sub(pos, j)
      local ok, str = pcall(cjson.decode, token)
      if not ok or type(str) ~= "string" then return json_error(what, "bad string escape", pos) end
      return str, j + 1
    elseif c == "\\" then
      i = j + 2
    else
      return json_error(what, "control character in a string", j)
    end
  end
end

-- An integer's digits (no sign, no leading zero) within 64 bits.
local function fits_64_bits(digits, negative)
  local limit = negative and "9223372036854775808" or "9223372036854775807"
  if #digits ~= #limit then return #digits < #limit end
  return digits <= limit
end

-- Integers stay exact or are refused: one beyond 64 bits would become a
-- float that is another number (Lua's tonumber rounds it, and tointeger
-- then takes -9223372036854775809 for math.mininteger). Floats must be
-- finite: 1e400 would decode as inf, which encode cannot write back.
local function decode_number(s, pos, what)
  local int = s:match("^-?0", pos) or s:match("^-?[1-9]%d*", pos)
  if not int then return json_error(what, "unexpected character", pos) end
  local stop = pos + #int
  local frac = s:match("^%.%d+", stop) or ""
  stop = stop + #frac
  local exp = s:match("^[eE][+-]?%d+", stop) or ""
  stop = stop + #exp
  local text = s:sub(pos, stop - 1)
  if frac == "" and exp == "" then
    local negative = int:sub(1, 1) == "-"
    if not fits_64_bits(negative and int:sub(2) or int, negative) then
      return json_error(what, "an integer beyond 64 bits (write it as a float, e.g. 1e20, or as a string)", pos)
    end
    return math.tointeger(tonumber(text)), stop
  end
  local n = tonumber(text) * 1.0
  if n == math.huge or n == -math.huge then
    return json_error(what, "a number that is not finite (beyond the range of a double)", pos)
  end
  return n, stop
end

local function decode_array(s, pos, what, depth)
  local t = setmetatable({}, ARRAY)
  pos = skip_ws(s, pos + 1)
  if s:sub(pos, pos) == "]" then return t, pos + 1 end
  while true do
    local v
    v, pos = decode_value(s, pos, what, depth + 1)
    if v == nil then return nil, pos end
    t[#t + 1] = v
    pos = skip_ws(s, pos)
    local c = s:sub(pos, pos)
    if c == "]" then return t, pos + 1 end
    if c ~= "," then return json_error(what, "expected ',' or ']'", pos) end
    pos = skip_ws(s, pos + 1)
  end
end

local function decode_object(s, pos, what, depth)
  local t = {}
  pos = skip_ws(s, pos + 1)
  if s:sub(pos, pos) == "}" then return t, pos + 1 end
  while true do
    if s:sub(pos, pos) ~= '"' then return json_error(what, "expected a string key", pos) end
    local k, v
    local kpos = pos
    k, pos = decode_string(s, pos, what)
    if k == nil then return nil, pos end
    -- A reader that stops at the NUL would see another key (or a duplicate).
    if k:find("\0", 1, true) then
      return nil, "isolation: " .. what .. ": an object key must not contain a NUL byte (got "
        .. show(k) .. " at byte " .. kpos .. ")"
    end
    if t[k] ~= nil then return json_error(what, "duplicate key " .. show(k), pos) end
    pos = skip_ws(s, pos)
    if s:sub(pos, pos) ~= ":" then return json_error(what, "expected ':'", pos) end
    v, pos = decode_value(s, skip_ws(s, pos + 1), what, depth + 1)
    if v == nil then return nil, pos end
    t[k] = v
    pos = skip_ws(s, pos)
    local c = s:sub(pos, pos)
    if c == "}" then return t, pos + 1 end
    if c ~= "," then return json_error(what, "expected ',' or '}'", pos) end
    pos = skip_ws(s, pos + 1)
  end
end

decode_value = function(s, pos, what, depth)
  local c = s:sub(pos, pos)
  -- depth counts the containers around this value: at most MAX_DEPTH
  if (c == "{" or c == "[") and depth >= MAX_DEPTH then
    return json_error(what, "nested too deeply: more than " .. MAX_DEPTH .. " levels", pos)
  end
  if c == "{" then return decode_object(s, pos, what, depth) end
  if c == "[" then return decode_array(s, pos, what, depth) end
  if c == '"' then return decode_string(s, pos, what) end
  if s:find("^true", pos) then return true, pos + 4 end
  if s:find("^false", pos) then return false, pos + 5 end
  if s:find("^null", pos) then return NULL, pos + 4 end
  if c == "" then return json_error(what, "unexpected end", pos) end
  return decode_number(s, pos, what)
end

--- Decodes JSON text strictly: arrays get `array_mt`, null is `cjson.null`,
--- integers stay integers, duplicate keys are an error. Returns the value or
--- nil, err naming `what`.
function M.json_decode(text, what)
  what = what or "JSON text"
  if type(text) ~= "string" then
    return nil, "isolation: " .. what .. " must be JSON text (got " .. type(text) .. ")"
  end
  if not utf8.len(text) then return nil, "isolation: " .. what .. " is not valid UTF-8" end
  local v, pos = decode_value(text, skip_ws(text, 1), what, 0)
  if v == nil then return nil, pos end
  pos = skip_ws(text, pos)
  if pos <= #text then return json_error(what, "trailing characters", pos) end
  return v
end

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
