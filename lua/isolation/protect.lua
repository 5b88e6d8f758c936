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

-- A repository nested anywhere below the workdir: the sandbox can make
-- one (git init, clone, a submodule's .git file) or change one that was
-- there, and record it as a gitlink in the workdir's own index or a
-- commit; then a plain `git status` on the host in the workdir runs git in
-- it, and so whatever its config names (core.fsmonitor, a filter driver).
-- What git reads there and runs, or that redirects where it reads it:
local NESTED_PARTS = { "config", "config.worktree", "commondir", "hooks" }
-- the walk's bound (entries seen): a larger tree is reported, not checked
M.NESTED_LIMIT = 500000
-- lines naming a nested repository each, at most; then one that counts
M.NESTED_NAMED = 20

local function ctime_after(path, start)
  local st = uv.fs_lstat(path)
  if not st then return false end
  return st.ctime.sec + st.ctime.nsec / 1e9 > start
end

local function dirname(path)
  return path:match("^(.*)/[^/]*$") or "."
end

-- O_RDONLY | O_NONBLOCK (Linux): the sandbox may have left a FIFO where a
-- file is read, and an open that waits for a writer would hang the caller
local OPEN_NONBLOCK = 0x800

-- The first line of a small regular file (a .git file's "gitdir: X", a
-- commondir), or nil.
local function first_line(path)
  local fd = uv.fs_open(path, OPEN_NONBLOCK, 0)
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data = st and st.type == "file" and uv.fs_read(fd, 4096, 0) or nil
  uv.fs_close(fd)
  return data and data:match("^([^\r\n]*)")
end

local function relative_to(base, p)
  if not p or p == "" then return nil end
  if p:sub(1, 1) == "/" then return p end
  return base .. "/" .. p
end

-- What of a git directory changed after start (a part's name), or nil;
-- hooks: the directory and each hook in it.
local function gitdir_changed(gd, start)
  for _, part in ipairs(NESTED_PARTS) do
    local path = gd .. "/" .. part
    if ctime_after(path, start) then return part end
    if part == "hooks" then
      local dir = uv.fs_scandir(path)
      while dir do
        local name = uv.fs_scandir_next(dir)
        if not name then break end
        if ctime_after(path .. "/" .. name, start) then return "hooks/" .. name end
      end
    end
  end
  return nil
end

-- Why the repository whose .git entry is `dotgit` counts as changed in the
-- session, or nil: the .git file itself, or a part of its git directory or
-- of the common directory that one names.
local function nested_changed(dotgit, kind, start)
  local gd = dotgit -- a directory, or a symlink git follows to one
  if kind ~= "directory" then
    if ctime_after(dotgit, start) then return ".git " .. (kind or "entry") end
    if kind == "file" then
      gd = relative_to(dirname(dotgit), (first_line(dotgit) or ""):match("^gitdir: *(.-) *$"))
    elseif kind ~= "link" then
      gd = nil
    end
    if not gd then return nil end
  end
  local why = gitdir_changed(gd, start)
  if why then return why end
  local common = relative_to(gd, first_line(gd .. "/commondir"))
  return common and gitdir_changed(common, start)
end

-- Every nested .git below workdir (not the workdir's own, not inside a
-- .git; no directory entered through a symlink, though a .git that is one
-- is listed: git follows it): {path, kind}; and whether the bound cut the
-- walk short.
local function nested_repos(workdir)
  local found, stack, seen = {}, { workdir }, 0
  while #stack > 0 do
    local d = table.remove(stack)
    local dir = uv.fs_scandir(d)
    while dir do
      local name, kind = uv.fs_scandir_next(dir)
      if not name then break end
      seen = seen + 1
      if seen > M.NESTED_LIMIT then return found, true end
      local path = d .. "/" .. name
      if kind == nil or kind == "unknown" then
        local st = uv.fs_lstat(path)
        kind = st and st.type
      end
      if name == ".git" then
        if d ~= workdir then found[#found + 1] = { path = path, kind = kind } end
      elseif kind == "directory" then
        stack[#stack + 1] = path
      end
    end
  end
  return found, false
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

-- Moves aside each nested repository changed in the session; appends to
-- moved / failed and lines.
local function check_nested(nested, stamp, moved, failed, lines)
  local repos, cut = nested_repos(nested.workdir)
  -- a sandbox can make thousands: each is moved, the first few are named
  local named = 0
  local function say(line)
    named = named + 1
    if named <= M.NESTED_NAMED then lines[#lines + 1] = line end
  end
  if cut then
    lines[#lines + 1] = string.format("protect: nested repositories below %s: not checked, more than %d "
      .. "entries; a repository the sandbox made or changed there may run code when git runs on the host",
      nested.workdir, M.NESTED_LIMIT)
  end
  for _, r in ipairs(repos) do
    local why = nested_changed(r.path, r.kind, nested.start)
    if why then
      local to = r.path .. ".isolation-quarantine-" .. stamp
      local ok, err
      if uv.fs_lstat(to) then
        ok, err = false, to .. " exists"
      else
        ok, err = os.rename(r.path, to)
      end
      local entry = { path = r.path, was = "repository", now = "changed: " .. why }
      if ok then
        entry.moved_to = to
        moved[#moved + 1] = entry
        say(string.format("protect: %s: a nested repository whose %s was made or changed inside the sandbox "
          .. "(git on the host, even `git status` in the workdir above it, would run what its config names); "
          .. "moved aside to %s: check its config and hooks, then rename it back", r.path, why, to))
      else
        entry.error = tostring(err)
        failed[#failed + 1] = entry
        say(string.format("protect: %s: a nested repository whose %s was made or changed inside the sandbox "
          .. "could NOT be moved aside (%s): check its config and hooks before git runs on the host", r.path, why,
          tostring(err)))
      end
    end
  end
  if named > M.NESTED_NAMED then
    lines[#lines + 1] = string.format("protect: and %d more nested repositories below %s made or changed inside the "
      .. "sandbox, each moved aside the same way (or named in the list of failures)", named - M.NESTED_NAMED,
      nested.workdir)
  end
end

--- After the session: moves aside what was created or replaced in a
--- protected place. Returns moved, failed (arrays of {path, was, now,
--- moved_to | error}) and the lines that report them.
function M.check(watch)
  -- the time, and a part the sandbox cannot guess: it could otherwise take
  -- every name the check would try (the check then fails loudly, below)
  local stamp = os.date("!%Y%m%dT%H%M%SZ") .. string.format("-%04x", math.random(0, 0xffff))
  local moved, failed = isolation.protect_check(watch.c, stamp)
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
  agentcfg.check(watch.agent, stamp, moved, failed, lines)
  if watch.nested then check_nested(watch.nested, stamp, moved, failed, lines) end
  return moved, failed, lines
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
