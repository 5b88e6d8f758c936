-- isolation.endcheck: what may come back from a session, checked once its
-- processes are gone (API.md, "What may come back from the sandbox"). One
-- sequence for `isolate` and the session manager, so that a check added
-- here reaches both: the protected places, the git directories and the
-- agent's config (isolation.protect, which runs isolation.gitcheck and
-- isolation.agentcfg), then the set-id files (isolation.setid), then the
-- cgroup a killed line of the same kind may have left (isolation.limits).
-- The report lines hold paths as they are; whoever prints or hands them
-- over escapes them, once (isolation.text).
local protect = require("isolation.protect")
local setid = require("isolation.setid")
local limits = require("isolation.limits")

local M = {}

--- Before the launch of `spec` (prepared by protect.prepare): the state
--- the end compares with (`home`: the launching $HOME, for binds written
--- $HOME/...). Returns the watch, or nil, err.
function M.watch(spec, home)
  local pw, err = protect.watch(spec)
  if not pw then return nil, err end
  return { protect = pw, setid = setid.watch(spec, home), limits_via = spec.limits_via }
end

--- After the session's processes are gone. Returns a table: `moved` and
--- `failed` (protect's entries), `setid_cleared` and `setid_failed`,
--- `lines` (every report line, in that order) and `cut` (why the walk of
--- the workdir was cut short: a failure the caller reports, or nil).
function M.check(w)
  local r = { lines = {}, moved = {}, failed = {} }
  local plines, slines
  r.moved, r.failed, plines, r.cut = protect.check(w.protect)
  r.setid_cleared, r.setid_failed, slines = setid.check(w.setid)
  for _, list in ipairs({ plines, slines }) do
    for _, l in ipairs(list or {}) do r.lines[#r.lines + 1] = l end
  end
  -- the line removes its own cgroup; this takes one a killed line left
  if w.limits_via == "cgroup" then pcall(limits.cleanup) end
  return r
end

return M
