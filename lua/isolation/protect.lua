-- isolation.protect: the run-time half of protected paths, shared by
-- `isolate` and the session manager. The builders are pure and bind each
-- protected path only when it exists (--ro-bind-try); this module, which may
-- look, adds what only the file system knows (the real hooks and config of
-- a worktree's or submodule's .git file), gives docker only the paths that
-- exist (docker would create a missing one as a root-owned directory),
-- records before the launch what is missing, and after the session moves
-- aside whatever the sandbox created in a protected place.
local uv = require("luv")
local isolation = require("isolation")

local M = {}

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

--- Sets spec.protect to the run-time list: the caller's (or
--- isolation.PROTECTED), plus isolation.protect_git(workdir) unless the
--- list is empty (protect = {} turns protection off); for docker only the
--- paths (and their parents) that exist now. Returns an array of warning
--- lines (a protected path reached through a symlink is protected only
--- where the link points inside the workdir, and not checked at the end).
function M.prepare(spec)
  local cfg = spec.config or {}
  if cfg.mode == "none" or type(spec.workdir) ~= "string" then return {} end
  local list = spec.protect
  if list == nil then list = isolation.PROTECTED end
  if type(list) ~= "table" then return {} end -- the builder names the error
  list = copy(list)
  if #list > 0 then
    local seen = {}
    for _, p in ipairs(list) do seen[p] = true end
    for _, p in ipairs(isolation.protect_git(spec.workdir)) do
      if not seen[p] then
        seen[p] = true
        list[#list + 1] = p
      end
    end
  end
  local warnings = {}
  local kept = {}
  for _, p in ipairs(list) do
    local path = spec.workdir .. "/" .. tostring(p)
    local st, code
    if type(p) == "string" then
      local _
      st, _, code = uv.fs_lstat(path)
    end
    if st and st.type == "link" then
      warnings[#warnings + 1] = "protect: " .. path .. " is a symlink: what it points to is read-only only "
        .. "when it is inside the workdir, and the link is not checked when the session ends"
    end
    -- Below a file (.git/hooks when .git is a worktree's pointer file)
    -- nothing can be bound: bwrap's -try tolerates only a missing source.
    -- Nothing can be created there either while the file stays (a .git
    -- file is itself protected: see isolation.protect_git).
    if code ~= "ENOTDIR" and (cfg.mode ~= "docker" or type(p) ~= "string" or st) then kept[#kept + 1] = p end
  end
  spec.protect = kept
  return warnings
end

--- The state of every protected path before the launch (see
--- isolation.protect_watch), or nil, err.
function M.watch(spec)
  return isolation.protect_watch(spec, os.getenv("HOME"))
end

--- After the session: moves aside what was created or replaced in a
--- protected place. Returns moved, failed (arrays of {path, was, now,
--- moved_to | error}) and the lines that report them.
function M.check(watch)
  local moved, failed = isolation.protect_check(watch, os.date("!%Y%m%dT%H%M%SZ"))
  local lines = {}
  for _, m in ipairs(moved) do
    lines[#lines + 1] = string.format("protect: %s was created or replaced inside the sandbox (%s before, %s "
      .. "after); moved aside to %s", m.path, m.was, m.now, m.moved_to)
  end
  for _, f in ipairs(failed) do
    lines[#lines + 1] = string.format("protect: %s was created or replaced inside the sandbox (%s before, %s "
      .. "after) and could NOT be moved aside (%s): check it before a host program runs it", f.path, f.was,
      f.now, f.error)
  end
  return moved, failed, lines
end

return M
