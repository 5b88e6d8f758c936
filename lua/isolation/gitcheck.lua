-- isolation.gitcheck: the end check of the git directories of a workdir,
-- for `isolate` and the session manager (through isolation.protect).
--
-- The sandbox writes the workdir; the host's git runs there later. Git
-- reads a git directory it finds (a .git directory, the gitdir a .git file
-- names, or any directory that looks like a bare repository, found the way
-- git's is_git_directory() finds them) and runs what its config and hooks
-- name, and writes through what it takes for its own files (a symbolic link
-- at .git/logs/HEAD leads an append to any host file). This module checks
-- each git directory below the workdir against what git itself writes
-- there (an allowlist, not a list of dangerous names), for every entry
-- changed in the session (ctime after the launch: the sandbox can move a
-- ctime forward, never back):
--
--   * only regular files and directories (no symbolic link, FIFO, socket or
--     device);
--   * HEAD and refs hold an object id or `ref: ` plus a valid ref name, and
--     the names of refs are valid (git check-ref-format, in Lua);
--   * config (and config.worktree) keeps only the keys git init and git
--     clone write and a few that run nothing: the file is moved aside and a
--     new one with only those keys written;
--   * hooks/ keeps only git's *.sample files; info/ only what git writes
--     there (exclude, sparse-checkout, refs); commondir only as git worktree
--     add writes it; an operation in progress (rebase-merge/, rebase-apply/,
--     sequencer/: a todo can `exec`) is moved aside.
--
-- Each failing entry is moved aside alone into a quarantine directory
-- inside its git directory, named by its path with "/" written %2F, so a
-- repository cloned inside keeps its objects, refs, index and work tree.
--
-- The walk bounds directories, not entries: a walk cut short is a failure
-- with its reason, never a silent pass.
local uv = require("luv")
local hostpaths = require("isolation.hostpaths")

local M = {}

-- The walk's bound: directories read. A larger tree is a failure.
M.DIR_LIMIT = 200000
-- Repositories named one line each, at most; then one line counts the rest.
M.NAMED = 20

local READ_MAX = 1 << 20

-- Report lines hold names as they are: isolate and the session manager
-- escape every line where it leaves them (isolation.text), once.

------------------------------------------------------------------------------
-- Ref names: git check-ref-format (refs.c check_refname_component), for a
-- full name (at least two components).

local BAD_CHAR = "[%z\1-\32\127~^:?*%[\\]"

--- Is `name` a ref name git accepts (git check-ref-format without
--- --allow-onelevel)?
function M.valid_refname(name)
  if type(name) ~= "string" or name == "" or name == "@" then return false end
  if name:find(BAD_CHAR) or name:find("..", 1, true) or name:find("@{", 1, true) then return false end
  if name:sub(-1) == "." or name:sub(-1) == "/" or name:sub(1, 1) == "/" then return false end
  local n = 0
  for comp in (name .. "/"):gmatch("([^/]*)/") do
    n = n + 1
    if comp == "" or comp:sub(1, 1) == "." or comp:sub(-5) == ".lock" then return false end
  end
  return n >= 2
end

local function is_oid(s)
  return (#s == 40 or #s == 64) and not s:find("[^0-9a-f]")
end

--- Is `data` what git writes to HEAD or a loose ref: an object id, or
--- `ref: ` plus a valid name under refs/?
function M.valid_ref_content(data)
  local body = data:match("^(.-)\n?$")
  if is_oid(body) then return true end
  local target = body:match("^ref: (.*)$")
  return target ~= nil and target:sub(1, 5) == "refs/" and M.valid_refname(target)
end

local function valid_packed_refs(data)
  for line in data:gmatch("([^\n]*)\n") do
    if not line:find("^# pack%-refs with:") then
      local oid, name = line:match("^(%x+) (.+)$")
      if oid then
        if not is_oid(oid) or not M.valid_refname(name) then return false end
      elseif not (line:sub(1, 1) == "^" and is_oid(line:sub(2))) then
        return false
      end
    end
  end
  return data == "" or data:sub(-1) == "\n"
end

------------------------------------------------------------------------------
-- Config: parsed as git does, then written again with the allowed keys only
-- (what is written is this module's own text: a difference between this
-- parser and git's can drop a key, never let one through).

-- section (lowercase) -> key (lowercase) -> true; SUB: with a subsection
local ALLOWED = {
  core = { repositoryformatversion = true, filemode = true, bare = true, logallrefupdates = true, symlinks = true,
    ignorecase = true, precomposeunicode = true, autocrlf = true },
  extensions = { objectformat = true },
  pull = { rebase = true },
  user = { name = true, email = true },
}
local ALLOWED_SUB = {
  remote = { url = true, pushurl = true, fetch = true },
  branch = { remote = true, merge = true, rebase = true },
  -- git submodule add: what `git submodule init` would write from
  -- .gitmodules (update, which may name a command, is not kept)
  submodule = { url = true, active = true },
}
M.CONFIG_ALLOWED = { plain = ALLOWED, sub = ALLOWED_SUB }

--- Parses git config text: an array of {section, sub, key, value} (section
--- and key lowercased; value nil for a bare key), and an error at the first
--- line git would refuse (what comes after it is dropped).
function M.parse_config(text)
  local out = {}
  local i, n = 1, #text
  local section, sub
  local function err(what) return out, string.format("%s at byte %d", what, i) end
  while i <= n do
    local c = text:sub(i, i)
    if c == " " or c == "\t" or c == "\r" or c == "\n" then
      i = i + 1
    elseif c == "#" or c == ";" then
      local e = text:find("\n", i, true)
      i = e and e + 1 or n + 1
    elseif c == "[" then
      local name, after = text:match("^%[([%w%-%.]+)()", i)
      if not name then return err("a bad section header") end
      i = after
      sub = nil
      if text:sub(i, i) == " " or text:sub(i, i) == "\t" then
        i = text:find("[^ \t]", i) or n + 1
        if text:sub(i, i) ~= '"' then return err("a bad section header") end
        i = i + 1
        local parts = {}
        while true do
          local ch = text:sub(i, i)
          if ch == "" or ch == "\n" or ch == "\0" then return err("an unterminated subsection") end
          if ch == '"' then break end
          if ch == "\\" then
            i = i + 1
            ch = text:sub(i, i)
            if ch == "" or ch == "\n" then return err("an unterminated subsection") end
          end
          parts[#parts + 1] = ch
          i = i + 1
        end
        sub = table.concat(parts)
        i = i + 1
        if text:sub(i, i) ~= "]" then return err("a bad section header") end
        section = name:lower()
        if section:find(".", 1, true) then return err("a bad section header") end
      else
        if text:sub(i, i) ~= "]" then return err("a bad section header") end
        local dot = name:find(".", 1, true)
        if dot then
          section, sub = name:sub(1, dot - 1):lower(), name:sub(dot + 1):lower()
        else
          section = name:lower()
        end
      end
      i = i + 1
    elseif c:find("%a") then
      if not section then return err("a key before any section") end
      local key, after = text:match("^([%a][%w%-]*)()", i)
      i = after
      i = text:find("[^ \t]", i) or n + 1
      local ch = text:sub(i, i)
      if ch == "" or ch == "\n" or ch == "#" or ch == ";" or ch == "\r" then
        out[#out + 1] = { section = section, sub = sub, key = key:lower() }
      elseif ch ~= "=" then
        return err("a bad key")
      else
        i = i + 1
        local parts, quoted, pending = {}, false, ""
        while true do
          ch = text:sub(i, i)
          if ch == "" or (ch == "\n" and not quoted) then break end
          if ch == "\n" then return err("a newline inside quotes") end
          i = i + 1
          if ch == "\\" then
            local e = text:sub(i, i)
            i = i + 1
            local map = { ["\n"] = "", n = "\n", t = "\t", b = "\b", ['"'] = '"', ["\\"] = "\\" }
            if not map[e] then return err("a bad escape") end
            parts[#parts + 1] = pending .. map[e]
            pending = ""
          elseif ch == '"' then
            quoted = not quoted
            parts[#parts + 1] = pending
            pending = ""
          elseif not quoted and (ch == "#" or ch == ";") then
            local e = text:find("\n", i, true)
            i = e or n + 1
            break
          elseif not quoted and (ch == " " or ch == "\t" or ch == "\r") then
            if #parts > 0 or pending ~= "" then pending = pending .. ch end
          else
            parts[#parts + 1] = pending .. ch
            pending = ""
          end
        end
        if quoted then return err("an unterminated quote") end
        out[#out + 1] = { section = section, sub = sub, key = key:lower(), value = table.concat(parts) }
      end
    else
      return err("an unexpected character")
    end
  end
  return out
end

local function allowed(e, worktree_ok)
  if e.sub == nil and e.section == "core" and e.key == "worktree" then
    return worktree_ok ~= nil and e.value ~= nil and worktree_ok(e.value)
  end
  if e.sub == nil then return ALLOWED[e.section] ~= nil and ALLOWED[e.section][e.key] == true end
  return ALLOWED_SUB[e.section] ~= nil and ALLOWED_SUB[e.section][e.key] == true
end

local function quote(v)
  if v ~= "" and not v:find('^[ \t]') and not v:find('[ \t]$') and not v:find('[#;"\\\n\t]') then return v end
  return '"' .. v:gsub('[\\"\n\t]', { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\t"] = "\\t" }) .. '"'
end

--- The config text with the allowed keys only, and the names of the keys
--- removed (`section[.sub].key`, escaped; a parse error is named too).
--- core.worktree is kept when worktree_ok(value) says so (a submodule's git
--- directory names its work tree: one inside the workdir).
function M.filter_config(text, worktree_ok)
  local entries, perr = M.parse_config(text)
  local kept, removed, order = {}, {}, {}
  for _, e in ipairs(entries) do
    local name = e.section .. (e.sub and ("." .. e.sub) or "") .. "." .. e.key
    local bad = (e.value and e.value:find("[%z\1-\8\11-\31\127]")) or (e.sub and e.sub:find("[%z\n]"))
    if allowed(e, worktree_ok) and not bad then
      local head = e.sub and string.format('[%s "%s"]', e.section, e.sub:gsub('[\\"]', "\\%0"))
        or "[" .. e.section .. "]"
      if not kept[head] then
        kept[head] = {}
        order[#order + 1] = head
      end
      local t = kept[head]
      t[#t + 1] = "\t" .. e.key .. (e.value and (" = " .. quote(e.value)) or "")
    else
      removed[#removed + 1] = tostring(name)
    end
  end
  if perr then removed[#removed + 1] = "everything after " .. perr end
  local lines = {}
  for _, h in ipairs(order) do
    lines[#lines + 1] = h
    for _, l in ipairs(kept[h]) do lines[#lines + 1] = l end
  end
  return table.concat(lines, "\n") .. (#lines > 0 and "\n" or ""), removed
end

------------------------------------------------------------------------------
-- Files

-- never a FIFO's wait, never a link's target
local function read_file(path) return hostpaths.read_regular(path, READ_MAX, true) end

local function changed(path, start)
  local st = uv.fs_lstat(path)
  return st ~= nil and st.ctime.sec + st.ctime.nsec / 1e9 > start, st
end

-- Does the directory whose entries are `names` look like a git directory
-- (git's is_git_directory: a valid HEAD, and objects/ and refs/ or a
-- commondir that provides them)? Loose on the commondir (present, of any
-- kind): more is checked, never less. Like git, only HEAD's first 40 bytes
-- count (.git/logs has a HEAD that starts with an object id, and refs/, but
-- no objects/).
local function looks_gitdir(dir, names)
  if not names.HEAD or not ((names.objects and names.refs) or names.commondir) then return false end
  local path = dir .. "/HEAD"
  if names.HEAD == "link" then
    local t = uv.fs_readlink(path)
    return t ~= nil and t:sub(1, 5) == "refs/"
  end
  local data = read_file(path)
  if not data then return names.HEAD ~= "file" and names.HEAD ~= "directory" end
  if data:sub(1, 4) == "ref:" then return data:match("^ref:[ \t]*refs/") ~= nil end
  return is_oid(data:sub(1, 40)) or is_oid(data:sub(1, 64))
end

local TYPE_WORDS = { link = "a symbolic link", fifo = "a FIFO", socket = "a socket", char = "a device",
  block = "a device" }

local function kind_of(path, kind)
  if kind == nil or kind == "unknown" then
    local st = uv.fs_lstat(path)
    kind = st and st.type or "missing"
  end
  return kind
end

------------------------------------------------------------------------------
-- The walk

-- Walks the workdir; returns gitdirs ({path, parent, bad = {rel -> why},
-- order}), dotgits (.git entries that are not directories) and the reason
-- the walk was cut short, or nil.
local function walk(workdir, start)
  local gitdirs, dotgits = {}, {}
  local stack = { { workdir, nil } }
  local dirs = 0
  while #stack > 0 do
    local top = table.remove(stack)
    local d, ctx = top[1], top[2]
    dirs = dirs + 1
    if dirs > M.DIR_LIMIT then
      return gitdirs, dotgits, string.format("more than %d directories below %s", M.DIR_LIMIT, tostring(workdir))
    end
    local h, serr = uv.fs_scandir(d)
    if not h then return gitdirs, dotgits, "cannot read " .. tostring(d) .. ": " .. tostring(serr) end
    local entries, names = {}, {}
    while true do
      local name, kind = uv.fs_scandir_next(h)
      if not name then break end
      kind = kind_of(d .. "/" .. name, kind)
      entries[#entries + 1] = { name, kind }
      names[name] = kind
    end
    if looks_gitdir(d, names) then
      ctx = { path = d, parent = ctx, bad = {}, order = {} }
      gitdirs[#gitdirs + 1] = ctx
    end
    for _, e in ipairs(entries) do
      local name, kind = e[1], e[2]
      local path = d .. "/" .. name
      if kind == "directory" then
        stack[#stack + 1] = { path, ctx }
      else
        if name == ".git" and kind ~= "directory" then dotgits[#dotgits + 1] = { path = path, kind = kind, dir = d } end
        if ctx and kind ~= "file" and TYPE_WORDS[kind] then
          local ch = changed(path, start)
          if ch then
            local g = ctx
            local rel = path:sub(#g.path + 2)
            if not g.bad[rel] then
              g.bad[rel] = TYPE_WORDS[kind]
              g.order[#g.order + 1] = rel
            end
          end
        end
      end
    end
  end
  return gitdirs, dotgits, nil
end

local function mark(g, rel, why)
  if not g.bad[rel] then
    g.order[#g.order + 1] = rel
    g.bad[rel] = why
  end
end

local HOOK_SAMPLE = "%.sample$"
local INFO_ALLOWED = { exclude = true, ["sparse-checkout"] = true, refs = true }

-- A directory's entries, only when it is a real directory: a symbolic link
-- that was there at launch (.git/hooks -> elsewhere) is the user's, and
-- nothing is moved through it.
local function scan_real(path)
  local st = uv.fs_lstat(path)
  return st and st.type == "directory" and uv.fs_scandir(path) or nil
end

-- The entries of g changed in the session that git would not have written
-- (appended to g.bad); configs to filter in g.configs.
local function check_gitdir(g, start, realwd)
  local gd = g.path
  -- HEAD and the refs
  local ch = changed(gd .. "/HEAD", start)
  if ch and not g.bad.HEAD then
    local data = read_file(gd .. "/HEAD")
    if data and not M.valid_ref_content(data) then mark(g, "HEAD", "not an object id or a valid ref") end
  end
  local stack = { "refs" }
  local dirs = 0
  while #stack > 0 do
    local rel = table.remove(stack)
    dirs = dirs + 1
    local h = dirs < M.DIR_LIMIT and scan_real(gd .. "/" .. rel)
    while h do
      local name, kind = uv.fs_scandir_next(h)
      if not name then break end
      local r = rel .. "/" .. name
      kind = kind_of(gd .. "/" .. r, kind)
      if kind == "directory" then
        stack[#stack + 1] = r
      elseif kind == "file" and not g.bad[r] and changed(gd .. "/" .. r, start) then
        if not M.valid_refname(r) then
          mark(g, r, "not a valid ref name")
        else
          local data = read_file(gd .. "/" .. r)
          if data and not M.valid_ref_content(data) then mark(g, r, "not an object id or a valid ref") end
        end
      end
    end
  end
  if changed(gd .. "/packed-refs", start) and not g.bad["packed-refs"] then
    local data = read_file(gd .. "/packed-refs")
    if data and not valid_packed_refs(data) then mark(g, "packed-refs", "a line that is not a valid packed ref") end
  end
  -- config, hooks, info, commondir, operations in progress
  g.configs = {}
  for _, rel in ipairs({ "config", "config.worktree" }) do
    local c, st = changed(gd .. "/" .. rel, start)
    if c and st.type == "file" and not g.bad[rel] then g.configs[#g.configs + 1] = rel end
  end
  for _, dir in ipairs({ "hooks", "info" }) do
    local h = scan_real(gd .. "/" .. dir)
    while h do
      local name, kind = uv.fs_scandir_next(h)
      if not name then break end
      local r = dir .. "/" .. name
      kind = kind_of(gd .. "/" .. r, kind)
      if not g.bad[r] and changed(gd .. "/" .. r, start) then
        if dir == "hooks" and not (kind == "file" and name:find(HOOK_SAMPLE)) then
          mark(g, r, "a hook made or changed inside the sandbox (only git's *.sample files are kept)")
        elseif dir == "info" and not (kind == "file" and INFO_ALLOWED[name]) then
          mark(g, r, "not a file git writes in info/")
        end
      end
    end
  end
  if changed(gd .. "/commondir", start) and not g.bad.commondir then
    -- as git worktree add writes it: <common>/worktrees/<name>/commondir
    -- naming <common>
    local data = read_file(gd .. "/commondir") or ""
    local target = data:match("^([^\n]*)\n?$") or ""
    if target:sub(1, 1) ~= "/" then target = gd .. "/" .. target end
    local real = uv.fs_realpath(target)
    local parent = gd:match("^(.*)/worktrees/[^/]+$")
    local rparent = parent and uv.fs_realpath(parent)
    if not (real and rparent and real == rparent and (real == realwd or real:sub(1, #realwd + 1) == realwd .. "/")) then
      mark(g, "commondir", "a commondir git worktree add did not write")
    end
  end
  for _, rel in ipairs({ "rebase-merge", "rebase-apply", "sequencer" }) do
    local path = gd .. "/" .. rel
    if uv.fs_lstat(path) and not g.bad[rel] then
      local any = changed(path, start)
      local h = not any and scan_real(path)
      while h do
        local name = uv.fs_scandir_next(h)
        if not name then break end
        if changed(path .. "/" .. name, start) then
          any = true
          break
        end
      end
      if any then mark(g, rel, "an operation in progress changed inside the sandbox (its todo can run commands)") end
    end
  end
end

------------------------------------------------------------------------------
-- Moving aside

local function flat(rel)
  return "%2F" .. rel:gsub("%%", "%%25"):gsub("/", "%%2F")
end

local function quarantine_dir(g, stamp)
  if g.qdir then return g.qdir end
  for k = 0, 99 do
    local q = g.path .. "/isolation-quarantine-" .. stamp .. (k > 0 and ("-" .. k) or "")
    local ok, err, code = uv.fs_mkdir(q, 448)
    if ok then
      g.qdir = q
      return q
    end
    if code ~= "EEXIST" then return nil, err end
  end
  return nil, "every quarantine name is taken"
end

local function move(g, rel, stamp)
  local q, err = quarantine_dir(g, stamp)
  if not q then return nil, err end
  local ok, rerr = uv.fs_rename(g.path .. "/" .. rel, q .. "/" .. flat(rel))
  if not ok then return nil, rerr end
  return true
end

local function write_new(path, data)
  local fd, err = uv.fs_open(path, "wx", 420)
  if not fd then return nil, err end
  local ok, werr = uv.fs_write(fd, data, 0)
  uv.fs_close(fd)
  return ok, werr
end

--- After the session: checks every git directory below `workdir` changed
--- since `start` (seconds, as gettimeofday) and moves aside each failing
--- entry. Returns moved, failed ({path, was = "git", now = why, moved_to |
--- error}), the lines that report them (one per repository) and, when the
--- walk was cut short, why (a failure: the caller says so and fails).
function M.check(workdir, start, stamp)
  local realwd = uv.fs_realpath(workdir) or workdir
  local gitdirs, dotgits, cut = walk(realwd, start)
  local moved, failed, lines = {}, {}, {}
  local named = 0
  local function say(line)
    named = named + 1
    if named <= M.NAMED then lines[#lines + 1] = line end
  end
  -- .git entries that are not directories: a .git file made or changed
  -- inside that names a git directory outside the workdir, and any other
  -- kind made or changed (git follows a link; a FIFO hangs it)
  for _, dg in ipairs(dotgits) do
    local why
    if changed(dg.path, start) then
      if dg.kind == "file" then
        local data = read_file(dg.path) or ""
        local target = data:match("^gitdir: *([^\n]-) *\n?$")
        if target and target:sub(1, 1) ~= "/" then target = dg.dir .. "/" .. target end
        local real = target and uv.fs_realpath(target)
        if not (real and (real == realwd or real:sub(1, #realwd + 1) == realwd .. "/")) then
          why = "a .git file naming a git directory outside the workdir"
        end
      else
        why = "a .git " .. (TYPE_WORDS[dg.kind] or dg.kind) .. " (git writes a directory or a file)"
      end
    end
    if why then
      local to = dg.path .. ".isolation-quarantine-" .. stamp
      local ok, err
      if uv.fs_lstat(to) then ok, err = nil, "exists" else ok, err = uv.fs_rename(dg.path, to) end
      local entry = { path = dg.path, was = "git", now = why }
      if ok then
        entry.moved_to = to
        moved[#moved + 1] = entry
        say(string.format("git: %s: %s, made or changed inside the sandbox: moved aside to %s (put it back: mv %s %s)",
          tostring(dg.path), why, tostring(to), tostring(to), tostring(dg.path)))
      else
        entry.error = tostring(err)
        failed[#failed + 1] = entry
        say(string.format("git: %s: %s, made or changed inside the sandbox: could NOT be moved aside (%s): remove it "
          .. "before git runs on the host", tostring(dg.path), why, tostring(err)))
      end
    end
  end
  for _, g in ipairs(gitdirs) do
    check_gitdir(g, start, realwd)
    local done, bad, notes = {}, {}, {}
    for _, rel in ipairs(g.order) do
      local entry = { path = g.path .. "/" .. rel, was = "git", now = g.bad[rel] }
      local ok, err = move(g, rel, stamp)
      if ok then
        entry.moved_to = g.qdir .. "/" .. flat(rel)
        moved[#moved + 1] = entry
        done[#done + 1] = tostring(rel) .. " (" .. g.bad[rel] .. ")"
      else
        entry.error = tostring(err)
        failed[#failed + 1] = entry
        bad[#bad + 1] = tostring(rel) .. " (" .. g.bad[rel] .. ": " .. tostring(err) .. ")"
      end
    end
    for _, rel in ipairs(g.configs) do
      local path = g.path .. "/" .. rel
      local text = read_file(path) or ""
      local new, removed = M.filter_config(text, function(v)
        local real = uv.fs_realpath(v:sub(1, 1) == "/" and v or (g.path .. "/" .. v))
        return real ~= nil and (real == realwd or real:sub(1, #realwd + 1) == realwd .. "/")
      end)
      if #removed > 0 then
        local entry = { path = path, was = "git", now = "config keys removed: " .. table.concat(removed, ", ") }
        local ok, err = move(g, rel, stamp)
        if ok then ok, err = write_new(path, new) end
        if ok then
          entry.moved_to = g.qdir .. "/" .. flat(rel)
          moved[#moved + 1] = entry
          notes[#notes + 1] = string.format("%s (the keys %s removed; the new %s keeps only the keys git init and "
            .. "git clone write)", rel, table.concat(removed, ", "), rel)
        else
          entry.error = tostring(err)
          failed[#failed + 1] = entry
          bad[#bad + 1] = string.format("%s (keys %s: %s)", rel, table.concat(removed, ", "), tostring(err))
        end
      end
    end
    for _, n in ipairs(notes) do done[#done + 1] = n end
    if #done > 0 then
      say(string.format("git: %s: moved aside to %s, each named by its path with '/' written %%2F: %s; put one back "
        .. "(after checking it) with mv %s/%%2F<path with each / written %%2F> %s/<path>", g.path, g.qdir,
        table.concat(done, "; "), g.qdir, g.path))
    end
    if #bad > 0 then
      say(string.format("git: %s: could NOT be moved aside: %s; check them before git runs on the host", g.path,
        table.concat(bad, "; ")))
    end
  end
  if named > M.NAMED then
    lines[#lines + 1] = string.format("git: and %d more repositories below %s with entries moved aside the same way",
      named - M.NAMED, tostring(realwd))
  end
  if cut then
    lines[#lines + 1] = "git: the end check was cut short (" .. cut .. "): a git directory the sandbox made or "
      .. "changed past that point is not checked; do not run git there before looking"
  end
  return moved, failed, lines, cut
end

return M
