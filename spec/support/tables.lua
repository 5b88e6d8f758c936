-- Small table helpers the specs share: a deep copy of a request or config
-- to change in one place, the index of a value in an array, and the
-- NAME=VALUE lines a command inside a sandbox printed, as a table.
local M = {}

--- A copy of t, every nested table copied too (metatables are not).
function M.deep_copy(t)
  if type(t) ~= "table" then return t end
  local c = {}
  for k, v in pairs(t) do c[k] = M.deep_copy(v) end
  return c
end

--- The first index of v in array t at or after `from` (default 1); nil
--- when it is not there.
function M.index_of(t, v, from)
  for i = from or 1, #t do
    if t[i] == v then return i end
  end
  return nil
end

--- The lines NAME=VALUE of `out` (NAME of letters, digits and _) as a
--- table; a later line wins.
function M.kv(out)
  local t = {}
  for k, v in out:gmatch("([%w_]+)=([^\n]*)") do t[k] = v end
  return t
end

return M
