-- isolation.agentcfg: the agent's own config (~/.claude, ~/.codex,
-- ~/.gemini), by what may be written rather than by what may not. Shared by
-- `isolate` and the session manager through isolation.protect (prepare,
-- watch, check), which both call.
--
-- The builders bind each agent config directory read-write, with the parts
-- known to name commands read-only over themselves (isolation.
-- AGENT_PROTECTED): a list of dangerous names, and the next name is found.
-- This module, which may look, turns that into an allowlist:
--
-- - prepare: every entry of the config directory at launch that is not a
--   place the agent writes (isolation.AGENT_WRITABLE) is bound read-only
--   over itself (spec.ro_binds): settings, policies, trusted folders,
--   skills, the agent's own program (~/.claude/local), whatever a new
--   version adds. A mount point cannot be written, renamed or removed.
-- - check, at the end: an entry made inside that is not a writable place
--   (a new policies/ or trustedFolders.json) is moved aside; a symbolic
--   link, FIFO, socket or device made inside a writable place (history.jsonl
--   replaced by a link to ~/.bashrc, which the host's agent appends to) is
--   moved aside; a symbolic link of the directory changed inside is moved
--   aside and put back. ~/.claude.json, which claude rewrites all the time,
--   stays writable, but each change to a key that names a program the
--   host's claude starts (MCP servers, hooks) or lets it run one without
--   asking (trust, allowed tools) is undone: the changed file is kept aside
--   and those keys alone get their launch values back.
--
-- The directory itself stays writable (not read-only with writable holes):
-- gemini takes a lock (projects.json.lock, a directory) and renames a
-- temporary file over projects.json at every start, codex keeps SQLite
-- databases whose journals are made next to them, and claude writes its
-- files by rename; in a read-only directory each of those fails.
local uv = require("luv")
local isolation = require("isolation")
local json = require("isolation.json")

local M = {}

--- Keys of ~/.claude.json that name a program the host's claude runs, or
--- let it run one without asking: at the top level, and the second list in
--- each projects[<path>] entry. A change to any of them is undone.
M.CLAUDE_JSON_KEYS = { "mcpServers", "hooks", "apiKeyHelper", "statusLine", "env", "permissions", "allowedTools",
  "awsAuthRefresh", "awsCredentialExport", "otelHeadersHelper", "enabledMcpjsonServers", "disabledMcpjsonServers",
  "enableAllProjectMcpServers" }
M.CLAUDE_JSON_PROJECT_KEYS = { "mcpServers", "hooks", "allowedTools", "enabledMcpjsonServers",
  "disabledMcpjsonServers", "enableAllProjectMcpServers", "hasTrustDialogAccepted", "hasTrustDialogHooksAccepted" }

--- The most directories the end check walks in the writable places of one
--- session; a walk cut short is a failure that says so.
M.WALK_DIRS = 20000

-- spec -> what prepare() found, for watch()
local found_at_prepare = setmetatable({}, { __mode = "k" })

-- the one escape (isolation.text): for the error message, which no writer escapes again
local esc = require("isolation.text").escape

local function is_quarantine(name)
  return name:find(".isolation-quarantine-", 1, true) ~= nil
end

-- The agent's config directories and files, each {rel, writable = {name = true}} with rel relative to $HOME.
local function layout(agent)
  local config = isolation.AGENT_CONFIG[agent or ""]
  if not config then return nil end
  local roots = {}
  for _, p in ipairs(config) do
    roots[#roots + 1] = { rel = p:sub(#"$HOME/" + 1), writable = {} }
  end
  local file_roots = {}
  for _, w in ipairs(isolation.AGENT_WRITABLE[agent]) do
    local rel = w:sub(#"$HOME/" + 1)
    local placed = false
    for _, r in ipairs(roots) do
      if rel:sub(1, #r.rel + 1) == r.rel .. "/" and not rel:find("/", #r.rel + 2, true) then
        r.writable[rel:sub(#r.rel + 2)] = true
        placed = true
      end
    end
    if not placed then file_roots[rel] = true end
  end
  return roots, file_roots
end

-- A new name the agent makes next to a writable one while writing it: a
-- lock (projects.json.lock), a temporary file (projects.json.<uuid>.tmp), a
-- database journal (state_5.sqlite-wal).
local function writable_name(root, name)
  if root.writable[name] then return true end
  for w in pairs(root.writable) do
    local c = name:sub(#w + 1, #w + 1)
    if name:sub(1, #w) == w and (c == "." or c == "-") then return true end
  end
  return false
end

local function applies(spec, home)
  local cfg = spec.config or {}
  return (cfg.mode == "bwrap" or cfg.mode == "docker" or cfg.mode == "podman")
    and spec.agent_config ~= "read-only" and type(home) == "string" and home:sub(1, 1) == "/"
    and isolation.AGENT_CONFIG[spec.agent or ""] ~= nil
end

local function listed(list, v)
  for _, x in ipairs(list or {}) do if x == v then return true end end
  return false
end

-- {name = {type, target}} of a directory's entries (nil when it is no directory)
local function entries(dir)
  local st = uv.fs_stat(dir)
  if not (st and st.type == "directory") then return nil end
  local out = {}
  local h = uv.fs_scandir(dir)
  while h do
    local name = uv.fs_scandir_next(h)
    if not name then break end
    local lst = uv.fs_lstat(dir .. "/" .. name)
    if lst then
      out[name] = { type = lst.type, target = lst.type == "link" and uv.fs_readlink(dir .. "/" .. name) or nil }
    end
  end
  return out
end

--- Before the launch (after isolation.protect's own prepare): binds
--- read-only each entry of the agent's config directories that is not a
--- place the agent writes (appended to spec.ro_binds as "$HOME/..."), and
--- records what was there. Returns an array of warnings, or nil, err.
function M.prepare(spec, home)
  if not applies(spec, home) then return {} end
  if spec.ro_binds ~= nil and type(spec.ro_binds) ~= "table" then return {} end -- the builder names it
  local roots = layout(spec.agent)
  local container = spec.config.mode ~= "bwrap"
  local ro = {}
  for i, v in ipairs(spec.ro_binds or {}) do ro[i] = v end
  local seen = {}
  for _, r in ipairs(roots) do
    local list = entries(home .. "/" .. r.rel)
    seen[r.rel] = list
    local names = {}
    for name in pairs(list or {}) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local e = list[name]
      local p = "$HOME/" .. r.rel .. "/" .. name
      -- a link cannot be bound as itself (bwrap and docker follow it): the
      -- end check puts it back if it was changed
      if e.type ~= "link" and not writable_name(r, name) and not is_quarantine(name)
        and not (not container and listed(isolation.AGENT_PROTECTED[spec.agent], p)) and not listed(ro, p) then
        if container and name:find("[:,]") then
          return nil, "isolation: agent config: " .. esc(home .. "/" .. r.rel .. "/" .. name) .. " cannot be "
            .. "bound read-only by docker or podman (a ':' or ',' in its name); rename it, or use agent_config = "
            .. '"read-only" (--agent-config read-only)'
        end
        ro[#ro + 1] = p
      end
    end
  end
  spec.ro_binds = ro
  found_at_prepare[spec] = seen
  return {}
end

-- the first 64 MiB of a regular file and its lstat, or nil
local function read_regular(path)
  local fd = uv.fs_open(path, 0x800, 0) -- O_RDONLY | O_NONBLOCK: never wait on a FIFO
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data
  if st and st.type == "file" and st.size <= 64 * 1024 * 1024 then data = uv.fs_read(fd, st.size, 0) end
  uv.fs_close(fd)
  if data then return data, st end
  return nil
end

--- The state the end check compares with, taken just before the launch; nil
--- when nothing applies.
function M.watch(spec, home)
  if not applies(spec, home) then return nil end
  local roots, file_roots = layout(spec.agent)
  local seen = found_at_prepare[spec] or {}
  local w = { home = home, roots = {}, files = {} }
  local s, us = uv.gettimeofday()
  w.start = s + us / 1e6 - 0.02 -- ctime is the kernel's coarse clock
  for _, r in ipairs(roots) do
    local before = seen[r.rel] or entries(home .. "/" .. r.rel)
    w.roots[#w.roots + 1] = { rel = r.rel, writable = r.writable, before = before }
  end
  for rel in pairs(file_roots) do
    local path = home .. "/" .. rel
    local data, st = read_regular(path)
    if data then
      w.files[#w.files + 1] = { path = path, data = data, mode = st.mode, uid = st.uid, gid = st.gid }
    end
  end
  return w
end

-- Renames path aside (never replacing anything); the new path, or nil, err.
local function move_aside(path, stamp)
  for k = 0, 99 do
    local to = path .. ".isolation-quarantine-" .. stamp .. (k > 0 and ("-" .. k) or "")
    if not uv.fs_lstat(to) then
      local ok, err = os.rename(path, to)
      if ok then return to end
      return nil, err
    end
  end
  return nil, "every quarantine name is taken"
end

local function deep_equal(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  if getmetatable(a) ~= getmetatable(b) then return false end
  for k, v in pairs(a) do if not deep_equal(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

-- The text of `now` with the program keys of `was` put back, and the names
-- of the keys that changed (empty: nothing to undo); nil when either text
-- is not a JSON object (the whole file is then put back).
local function undo_keys(was_text, now_text)
  local was = json.decode(was_text, "~/.claude.json")
  local now = json.decode(now_text, "~/.claude.json")
  if type(was) ~= "table" or type(now) ~= "table" or getmetatable(was) or getmetatable(now) then return nil end
  local changed = {}
  for _, k in ipairs(M.CLAUDE_JSON_KEYS) do
    if not deep_equal(was[k], now[k]) then
      changed[#changed + 1] = k
      now[k] = copy(was[k])
    end
  end
  local wp = type(was.projects) == "table" and was.projects or {}
  if now.projects ~= nil and (type(now.projects) ~= "table" or getmetatable(now.projects)) then
    changed[#changed + 1] = "projects"
    now.projects = copy(was.projects)
  elseif type(now.projects) == "table" then
    local paths, order = {}, {}
    for p in pairs(now.projects) do order[#order + 1] = p end
    table.sort(order)
    for _, p in ipairs(order) do
      local v = now.projects[p]
      if type(v) ~= "table" or getmetatable(v) then
        -- a project entry that is no object: only the launch's may stay
        if not deep_equal(v, wp[p]) then paths[#paths + 1] = p end
      else
        for _, k in ipairs(M.CLAUDE_JSON_PROJECT_KEYS) do
          local old = type(wp[p]) == "table" and wp[p][k] or nil
          if not deep_equal(v[k], old) then
            changed[#changed + 1] = "projects[" .. string.format("%q", p) .. "]." .. k
            v[k] = copy(old)
          end
        end
      end
    end
    table.sort(paths)
    for _, p in ipairs(paths) do
      changed[#changed + 1] = "projects[" .. string.format("%q", p) .. "]"
      now.projects[p] = copy(wp[p])
    end
  end
  if #changed == 0 then return now_text, changed end
  local text = json.encode(now, "~/.claude.json")
  if not text then return nil end
  return text .. "\n", changed
end

-- Puts `text` at path by rename; the changed file stays as aside (a hard
-- link made first, so that path is never missing). Returns aside or nil, err.
local function replace_file(path, text, f, stamp)
  local tmp = path .. ".isolation-restore-" .. stamp
  local fd, err = uv.fs_open(tmp, "wx", f.mode & 0x1ff)
  if not fd then return nil, err end
  local ok
  ok, err = uv.fs_write(fd, text, 0)
  if ok then ok, err = uv.fs_fsync(fd) end
  if ok and uv.getuid and uv.getuid() == 0 then uv.fs_fchown(fd, f.uid, f.gid) end
  uv.fs_close(fd)
  if not ok then uv.fs_unlink(tmp); return nil, err end
  local aside
  if not uv.fs_lstat(path) then -- removed (a docker bind can be): put it back
    ok, err = uv.fs_rename(tmp, path)
    if not ok then uv.fs_unlink(tmp); return nil, err end
    return "(nothing: it was removed)"
  end
  for k = 0, 99 do
    aside = path .. ".isolation-quarantine-" .. stamp .. (k > 0 and ("-" .. k) or "")
    ok, err = uv.fs_link(path, aside)
    if ok or not tostring(err):find("EEXIST", 1, true) then break end
  end
  if not ok then
    -- not a file that can be linked (a mount point on some kernels): copy it
    local data = read_regular(path)
    local afd = data and uv.fs_open(aside, "wx", 384)
    if not afd then uv.fs_unlink(tmp); return nil, err end
    uv.fs_write(afd, data, 0)
    uv.fs_close(afd)
  end
  ok, err = uv.fs_rename(tmp, path)
  if not ok then uv.fs_unlink(tmp); return nil, err end
  return aside
end

local function check_file(f, stamp, moved, failed, lines)
  local now = read_regular(f.path)
  if now == f.data then return end
  local text, changed
  if now then text, changed = undo_keys(f.data, now) end
  if text and #changed == 0 then return end
  local what
  if text then
    what = "keys that name programs the host's agent starts or lets run were changed inside the sandbox ("
      .. table.concat(changed, ", ") .. "): those keys have their launch values back, every other change is kept"
  else
    text = f.data
    what = "changed inside the sandbox into something that is no JSON object (or beyond what can be read): "
      .. "the file it was at launch is put back"
  end
  local entry = { path = f.path, was = "file", now = "changed: " .. (changed and table.concat(changed, ", ") or "") }
  local aside, err = replace_file(f.path, text, f, stamp)
  if aside then
    entry.moved_to = aside
    moved[#moved + 1] = entry
    lines[#lines + 1] = ("agent config: " .. f.path .. ": " .. what .. "; the changed file is at " .. aside)
  else
    entry.error = tostring(err)
    failed[#failed + 1] = entry
    lines[#lines + 1] = ("agent config: " .. f.path .. ": " .. what .. ", but it could NOT be put back ("
      .. tostring(err) .. "): check it before the agent runs on the host")
  end
end

local ODD = { link = "a symbolic link", fifo = "a FIFO", socket = "a socket", char = "a device", block = "a device" }

local function ctime_after(st, start)
  return st.ctime.sec + st.ctime.nsec / 1e9 > start
end

local function report_move(path, why, stamp, moved, failed, lines, restore)
  local to, err = move_aside(path, stamp)
  local entry = { path = path, was = restore and ("symlink:" .. restore) or "missing", now = why }
  if to then
    entry.moved_to = to
    local back = ""
    if restore then
      local ok, lerr = uv.fs_symlink(restore, path)
      back = ok and "; the link it replaced is back" or ("; the link it replaced could NOT be put back ("
        .. tostring(lerr) .. ")")
    end
    moved[#moved + 1] = entry
    lines[#lines + 1] = ("agent config: " .. path .. ": " .. why .. "; moved aside to " .. to .. back)
  else
    entry.error = tostring(err)
    failed[#failed + 1] = entry
    lines[#lines + 1] = ("agent config: " .. path .. ": " .. why .. ", and it could NOT be moved aside ("
      .. tostring(err) .. "): check it before the agent runs on the host")
  end
end

-- Each symbolic link, FIFO, socket or device made in the session below a
-- writable place; false when the walk was cut short.
local function walk_writable(dir, start, budget, found)
  local stack = { dir }
  while #stack > 0 do
    if budget.dirs <= 0 then return false end
    budget.dirs = budget.dirs - 1
    local d = table.remove(stack)
    local h = uv.fs_scandir(d)
    while h do
      local name, kind = uv.fs_scandir_next(h)
      if not name then break end
      local path = d .. "/" .. name
      if kind == "directory" then
        stack[#stack + 1] = path
      elseif kind ~= "file" then
        local st = uv.fs_lstat(path)
        if st and st.type == "directory" then
          stack[#stack + 1] = path
        elseif st and ODD[st.type] and ctime_after(st, start) and not is_quarantine(name) then
          found[#found + 1] = { path = path, type = st.type }
        end
      end
    end
  end
  return true
end

--- After the session (its processes gone): undoes what the sandbox changed
--- in the agent's config beyond the places it writes. Appends to moved,
--- failed ({path, was, now, moved_to | error}) and lines (escaped, one
--- line each).
function M.check(w, stamp, moved, failed, lines)
  if not w then return end
  local budget = { dirs = M.WALK_DIRS }
  local cut = {}
  -- a directory the agent writes: what the sandbox made there that the
  -- host's agent would write or read through is moved aside
  local function walk_and_report(path)
    local found = {}
    if not walk_writable(path, w.start, budget, found) then cut[#cut + 1] = path end
    for _, f in ipairs(found) do
      report_move(f.path, ODD[f.type] .. " made inside the sandbox in a place the agent writes (the host's "
        .. "agent would write or read through it)", stamp, moved, failed, lines)
    end
  end
  for _, r in ipairs(w.roots) do
    local dir = w.home .. "/" .. r.rel
    local before = r.before or {}
    local now = entries(dir) or {}
    local names = {}
    for name in pairs(now) do names[#names + 1] = name end
    for name, e in pairs(before) do
      if e.type == "link" and not now[name] then names[#names + 1] = name end
    end
    table.sort(names)
    for _, name in ipairs(names) do
      local e, b = now[name], before[name]
      local path = dir .. "/" .. name
      local was_link = b and b.type == "link" and b.target
      local same = e and b and e.type == b.type and e.target == b.target
      if is_quarantine(name) or same then
        -- as it was (what is not writable was bound read-only)
        if same and e.type == "directory" and writable_name(r, name) then
          walk_and_report(path)
        end
      elseif not e then
        -- a link of the directory removed inside: put it back
        local ok, err = uv.fs_symlink(was_link, path)
        lines[#lines + 1] = ("agent config: " .. path .. ": the symbolic link to " .. was_link .. " was removed "
          .. "inside the sandbox; " .. (ok and "it is back" or ("it could NOT be put back (" .. tostring(err) .. ")")))
      elseif was_link then
        report_move(path, "the symbolic link to " .. was_link .. " was replaced inside the sandbox", stamp, moved,
          failed, lines, was_link)
      elseif ODD[e.type] then
        report_move(path, ODD[e.type] .. " made inside the sandbox in the agent's config (the host's agent would "
          .. "write or read through it)", stamp, moved, failed, lines)
      elseif not writable_name(r, name) then
        report_move(path, "made inside the sandbox, and not a place the agent writes (isolation.AGENT_WRITABLE): "
          .. "the host's agent may load it", stamp, moved, failed, lines)
      elseif e.type == "directory" then
        walk_and_report(path)
      end
    end
  end
  for _, path in ipairs(cut) do
    failed[#failed + 1] = { path = path, was = "directory", now = "not checked", error = "walk cut short" }
    lines[#lines + 1] = ("agent config: " .. path .. ": NOT checked: the end check walks at most "
      .. M.WALK_DIRS .. " directories of the agent's writable places; a symbolic link made there may lead the "
      .. "host's agent to write elsewhere")
  end
  for _, f in ipairs(w.files) do check_file(f, stamp, moved, failed, lines) end
end

return M
