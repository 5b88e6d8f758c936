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
local gitcheck = require("isolation.gitcheck")
local agentcfg = require("isolation.agentcfg")

local M = {}

--- Protected like isolation.PROTECTED (and added to a non-empty list the
--- same way), but bound only when present at launch, and else watched by
--- the end check: the builders bind every listed path, present or not, and
--- a line typed into a terminal (tmux send-keys) has a length limit. Every
--- other name lefthook reads a config by (the -local one is merged into
--- each hook run, and read without a main config) and its script
--- directories.
M.PROTECTED_IF_PRESENT = {
  "lefthook.yaml", "lefthook.toml", "lefthook.json", "lefthook.jsonc", "lefthook-local.yml", "lefthook-local.yaml",
  "lefthook-local.toml", "lefthook-local.json", "lefthook-local.jsonc", ".lefthook.yaml", ".lefthook.toml",
  ".lefthook.json", ".lefthook.jsonc", ".lefthook-local.yml", ".lefthook-local.yaml", ".lefthook-local.toml",
  ".lefthook-local.json", ".lefthook-local.jsonc", ".lefthook", ".lefthook-local", ".config/lefthook.yml",
  ".config/lefthook.yaml", ".config/lefthook.toml", ".config/lefthook.json", ".config/lefthook.jsonc",
  ".config/lefthook-local.yml", ".config/lefthook-local.yaml", ".config/lefthook-local.toml",
  ".config/lefthook-local.json", ".config/lefthook-local.jsonc"
}

-- spec -> the PROTECTED_IF_PRESENT paths missing at prepare(), for watch()
local missing_at_prepare = setmetatable({}, { __mode = "k" })

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

local function inside(path, dir)
  return path == dir or path:sub(1, #dir + 1) == dir .. "/"
end

-- The directories a symlinked protected path may point into: bwrap binds
-- the link's target in place only when the sandbox shows it somewhere.
local function visible_dirs(spec, holder)
  local out = { uv.fs_realpath(holder) or holder }
  for _, key in ipairs({ "binds", "ro_binds" }) do
    for _, b in ipairs(type(spec[key]) == "table" and spec[key] or {}) do
      if type(b) == "string" and b:sub(1, 1) == "/" then out[#out + 1] = uv.fs_realpath(b) or b end
    end
  end
  return out
end

-- nil, or why the symlink at path (a protected path) cannot be protected.
local function symlink_problem(spec, path, holder, fix)
  local st = uv.fs_lstat(path)
  if not (st and st.type == "link") then return nil end
  local target = uv.fs_realpath(path)
  -- dangling: bwrap skips it (a missing source), the end check watches it
  if not target then return nil end
  for _, d in ipairs(visible_dirs(spec, holder)) do
    if inside(target, d) then return nil end
  end
  return "isolation: protect: " .. path .. " is a symlink to " .. target
    .. ", which the sandbox does not show: it cannot be bound read-only in place (bwrap would refuse the "
    .. "launch) and the link could be replaced from inside; " .. fix
end

--- Sets spec.protect to the run-time list: the caller's (or
--- isolation.PROTECTED), plus isolation.protect_git(workdir) unless the
--- list is empty (protect = {} turns protection off); for docker only the
--- paths (and their parents) that exist now. Returns an array of warning
--- lines (a protected path that is a symlink: its target is protected in
--- place, the link itself only by the end check), or nil, err for a
--- symlink whose target the sandbox does not show (with `home`, the same
--- for the agent's own config).
function M.prepare(spec, home)
  local cfg = spec.config or {}
  if (cfg.mode ~= "bwrap" and cfg.mode ~= "docker" and cfg.mode ~= "podman") or type(spec.workdir) ~= "string" then
    return {}
  end
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
    local missing = {}
    for _, p in ipairs(M.PROTECTED_IF_PRESENT) do
      if not seen[p] then
        seen[p] = true
        if uv.fs_lstat(spec.workdir .. "/" .. p) then list[#list + 1] = p else missing[#missing + 1] = p end
      end
    end
    missing_at_prepare[spec] = missing
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
    if st and st.type == "link" and cfg.mode ~= "docker" and cfg.mode ~= "podman" then
      local err = symlink_problem(spec, path, spec.workdir, "bind its target with ro_binds, replace the link by "
        .. "the file, or leave the path out of protect")
      if err then return nil, err end
      warnings[#warnings + 1] = "protect: " .. path .. " is a symlink: its target is read-only in place; the "
        .. "link itself can be replaced inside, and is moved aside at the end if it was"
    end
    -- Below a file (.git/hooks when .git is a worktree's pointer file)
    -- nothing can be bound: bwrap's -try tolerates only a missing source.
    -- Nothing can be created there either while the file stays (a .git
    -- file is itself protected: see isolation.protect_git).
    local container = cfg.mode == "docker" or cfg.mode == "podman"
    if code ~= "ENOTDIR" and (not container or type(p) ~= "string" or st) then kept[#kept + 1] = p end
  end
  spec.protect = kept
  local agent = isolation.AGENT_PROTECTED[spec.agent or ""]
  if agent and home and cfg.mode == "bwrap" and spec.agent_config ~= "read-only" then
    for _, p in ipairs(agent) do
      local path = home .. p:sub(#"$HOME" + 1)
      local holder = home .. "/" .. p:match("^%$HOME/([^/]+)")
      local err = symlink_problem({}, path, holder, 'replace the link by the file, or use agent_config = '
        .. '"read-only" (--agent-config read-only)')
      if err then return nil, err end
    end
  end
  -- the agent's config by what it writes: every other entry read-only
  local awarn, aerr = agentcfg.prepare(spec, home)
  if not awarn then return nil, aerr end
  for _, w in ipairs(awarn) do warnings[#warnings + 1] = w end
  return warnings
end

--- A shallow copy of a prepared spec that watch takes for the spec
--- itself: what was missing at prepare goes with it (a caller that sets
--- fields of its own, such as the session manager's launch_spec, copies).
function M.copy_spec(spec)
  local c = {}
  for k, v in pairs(spec) do c[k] = v end
  missing_at_prepare[c] = missing_at_prepare[spec]
  return c
end

--- The state of every protected path before the launch (see
--- isolation.protect_watch), or nil, err; with the workdir and the time,
--- for the nested repositories the end check looks at (unless protection
--- is off, `protect = {}`).
function M.watch(spec)
  local watched = spec
  local missing = missing_at_prepare[spec]
  if missing and #missing > 0 and type(spec.protect) == "table" then
    watched = {}
    for k, v in pairs(spec) do watched[k] = v end
    watched.protect = copy(spec.protect)
    for _, p in ipairs(missing) do watched.protect[#watched.protect + 1] = p end
  end
  local w, err = isolation.protect_watch(watched, os.getenv("HOME"))
  if not w then return nil, err end
  local cfg = spec.config or {}
  local on = type(spec.protect) ~= "table" or #spec.protect > 0
  local nested
  if on and cfg.mode ~= "" and type(spec.workdir) == "string" then
    -- ctime is the kernel's coarse clock, which may lag this one by a tick
    nested = { workdir = uv.fs_realpath(spec.workdir) or spec.workdir }
    local s, us = uv.gettimeofday()
    nested.start = s + us / 1e6 - 0.02
  end
  return { c = w, nested = nested, agent = agentcfg.watch(spec, os.getenv("HOME")) }
end

--- After the session: moves aside what was created or replaced in a
--- protected place, and each entry of a git directory that git would not
--- have written (isolation.gitcheck). Returns moved, failed (arrays of
--- {path, was, now, moved_to | error, line}), the lines that report them
--- (holding the paths as they are: whoever prints or hands them over
--- escapes them, once: isolation.text) and,
--- when the walk of the workdir was cut short, why (a failure: the caller
--- fails the run and says so).
function M.check(watch)
  -- the time, and a part the sandbox cannot guess: it could otherwise take
  -- every name the check would try (the check then fails loudly, below)
  local stamp = os.date("!%Y%m%dT%H%M%SZ") .. string.format("-%04x", math.random(0, 0xffff))
  local moved, failed = isolation.protect_check(watch.c, stamp)
  local lines = {}
  for _, m in ipairs(moved) do
    m.line = string.format("protect: %s was created or replaced inside the sandbox (%s before, %s "
      .. "after); moved aside to %s", m.path, m.was, m.now, m.moved_to)
    lines[#lines + 1] = m.line
  end
  for _, f in ipairs(failed) do
    f.line = string.format("protect: %s was created or replaced inside the sandbox (%s before, %s "
      .. "after) and could NOT be moved aside (%s): check it before a host program runs it", f.path, f.was,
      f.now, f.error)
    lines[#lines + 1] = f.line
  end
  agentcfg.check(watch.agent, stamp, moved, failed, lines)
  local cut
  if watch.nested then
    local gmoved, gfailed, glines
    gmoved, gfailed, glines, cut = gitcheck.check(watch.nested.workdir, watch.nested.start, stamp)
    for _, m in ipairs(gmoved) do moved[#moved + 1] = m end
    for _, f in ipairs(gfailed) do failed[#failed + 1] = f end
    for _, l in ipairs(glines) do lines[#lines + 1] = "protect: " .. l end
  end
  return moved, failed, lines, cut
end

--- The homes no bind may be or contain, each resolved: `home` (the
--- caller's $HOME) and the passwd entry's home, as {path, name}; a HOME
--- pointed elsewhere must not make the real one bindable.
function M.resolved_homes(home)
  local homes, seen = {}, {}
  local pw = uv.os_get_passwd and uv.os_get_passwd()
  for i, h in ipairs({ home or false, pw and pw.homedir or false }) do
    if h and h:sub(1, 1) == "/" then
      local r = uv.fs_realpath(h) or h
      if not seen[r] then
        seen[r] = true
        homes[#homes + 1] = { path = r, name = i == 1 and "$HOME" or "the passwd entry's home" }
      end
    end
  end
  return homes
end

return M
