-- isolation.json: the strict JSON codec of policy, session and isolate.
--
-- Why not lua-cjson 2.1.0 (Debian's, which this project depends on for
-- cjson.null and its string escapes): it has no array metatable (no
-- array_mt, no empty_array_mt), so an empty array it decoded encodes as
-- `{}`; it decodes every number as a float, so 3 comes back as 3.0 and
-- integers beyond 2^53 lose digits; it takes the last of two duplicate keys
-- where other parsers take the first; and it writes "/" as "\/". A launch
-- configuration must round-trip exactly and keep fields we do not know, so
-- this codec is strict where cjson is lenient:
--
-- - arrays decoded from JSON carry `json.array_mt`, and an empty one
--   encodes as `[]` again; any other empty table encodes as `{}`;
-- - integers stay integers (within 64 bits, else refused), floats stay
--   floats (`1.0` is written `1.0`), and only finite numbers are written;
-- - JSON null is `cjson.null` (`json.null`);
-- - object keys are written sorted: the same value always gives the same
--   text;
-- - duplicate keys and keys holding a NUL byte are refused: two parsers
--   must never disagree about which key counts;
-- - control bytes in strings are refused on decode (JSON forbids them) and
--   escaped on encode; text must be valid UTF-8 both ways;
-- - at most MAX_DEPTH nested arrays and objects, both ways.
--
-- Errors are `nil, "isolation: <what> ..."`, naming where the value sits.
local cjson = require("cjson")

local M = {}

local NULL = cjson.null
local ARRAY = cjson.array_mt or cjson.empty_array_mt or { __name = "isolation.json.array" }
local MAX_DEPTH = 64

--- JSON null: cjson.null.
M.null = NULL

--- The metatable that marks a table as a JSON array (an empty one encodes as `[]`).
M.array_mt = ARRAY

--- How many arrays and objects may nest, in decoded text and in encoded tables.
M.MAX_DEPTH = MAX_DEPTH

--- Shows a value inside an error message, shortened and on one line:
--- a string quoted (at most 60 bytes of it), null as null, a table as
--- "a table".
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
M.show = show

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

local function encode_table(t, where, depth)
  -- depth 0 is the outermost table: at most MAX_DEPTH tables, as decoded
  if depth >= MAX_DEPTH then
    return nil, "isolation: " .. where .. " is nested too deeply (more than " .. MAX_DEPTH .. " levels)"
  end
  local out = {}
  if getmetatable(t) == ARRAY or is_sequence(t) then
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
    vs, err = encode_value(t[k], where .. "." .. k, depth + 1)
    if not vs then return nil, err end
    out[i] = ks .. ":" .. vs
  end
  return "{" .. table.concat(out, ",") .. "}"
end

encode_value = function(v, where, depth)
  local ty = type(v)
  if v == NULL then return "null" end
  if ty == "string" then return encode_string(v, where) end
  if ty == "number" then return encode_number(v, where) end
  if ty == "boolean" then return tostring(v) end
  if ty == "table" then return encode_table(v, where, depth) end
  return nil, "isolation: " .. where .. " cannot be written as JSON (got a " .. ty .. ")"
end

--- Encodes a Lua value as JSON text: sorted keys, `[]` for arrays marked
--- with `array_mt` (and for non-empty sequences), integers as integers.
--- Returns the text or nil, err naming `where` (default "value").
function M.encode(v, where)
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
--- nil, err naming `what` (default "JSON text").
function M.decode(text, what)
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

return M
