-- isolation.setid: the end check for set-user-ID and set-group-ID files
-- (API.md, "What may come back from the sandbox"; issue 27.4). Shared by
-- `isolate` and the session manager, run after the session's processes are
-- gone.
--
-- bwrap's nosuid holds on the sandbox's mounts only: a setuid file left in
-- the workdir runs as its owner on the host, for any local user (a root
-- launch: a setuid-root shell). sandbox_seccomp_filter() refuses every way
-- to set the bits; this check is the second line, for what the filter does
-- not cover (seccomp = "tty", docker and podman, a kernel path the filter
-- misses): every regular file of the workdir and the read-write binds that
-- has either bit and whose status changed since the launch (ctime: chmod,
-- creation, a write) gets both bits cleared, one line each, its path
-- escaped as the events escape (bytes outside 0x20-0x7e and `\` as \xNN).
-- Files that had the bits before the launch and were not touched are the
-- user's own and stay as they are.
local uv = require("luv")
local textmod = require("isolation.text")

local M = {}

local SETID = 3072 -- 06000
-- ctime is kept by a coarse clock (a tick behind the wall clock): a file
-- changed right at the launch still counts as changed in the session.
local SLACK = 0.05

local escape = textmod.escape
M.escape = escape

local shquote = textmod.shquote

local function now()
  local sec, usec = uv.gettimeofday()
  return sec + usec / 1e6
end

--- What to check at the end of a session of `spec`: its workdir and its
--- read-write binds (paths as the host resolves them; `home` for binds
--- written $HOME/...), and the time of the launch. nil when the spec has
--- no sandbox (mode "").
function M.watch(spec, home)
  local cfg = spec.config or {}
  if cfg.mode == "" or cfg.mode == nil or type(spec.workdir) ~= "string" then return nil end
  local places = {}
  local function add(p)
    if type(p) ~= "string" then return end
    if p:sub(1, 6) == "$HOME/" then
      if not (home and home:sub(1, 1) == "/") then return end
      p = home .. p:sub(6)
    end
    local real = uv.fs_realpath(p)
    if real then places[#places + 1] = real end
  end
  add(spec.workdir)
  for _, b in ipairs(type(spec.binds) == "table" and spec.binds or {}) do add(b) end
  return { places = places, since = now() - SLACK }
end

-- Clears both bits of the regular file at path (st: its lstat), never
-- through a symbolic link swapped in since: the file is opened and changed
-- by its descriptor only when that is the same inode; when it cannot be
-- opened (no read permission), by path after a second lstat. true, or nil,
-- err.
local function clear(path, st)
  local c = uv.constants
  local new = (math.tointeger(st.mode) or 0) & ~SETID & 4095
  local fd = uv.fs_open(path, c.O_RDONLY | c.O_NONBLOCK | c.O_NOCTTY, 0)
  if fd then
    local fst = uv.fs_fstat(fd)
    local ok, err = false, "replaced while it was being checked"
    if fst and fst.type == "file" and fst.ino == st.ino and fst.dev == st.dev then ok, err = uv.fs_fchmod(fd, new) end
    uv.fs_close(fd)
    if ok then return true end
    return nil, err
  end
  local again = uv.fs_lstat(path)
  if not (again and again.type == "file" and again.ino == st.ino) then return nil, "not a regular file" end
  local ok, err = uv.fs_chmod(path, new)
  if ok then return true end
  return nil, err
end

--- After the session: clears the set-id bits of every regular file changed
--- since watch() that has one. Returns the cleared paths, whether the check
--- failed (a directory it could not read, a file it could not change), and
--- the report lines (escaped, one per file).
function M.check(w)
  if not w or #w.places == 0 then return {}, false, {} end
  local cleared, lines, failed = {}, {}, false
  local words = {}
  for i, p in ipairs(w.places) do words[i] = shquote(p) end
  -- find(1) walks in C (a workdir may hold a million files); -print0: any
  -- byte of a name survives. Its errors (an unreadable directory) fail the
  -- check: a file there was not looked at.
  local f = io.popen("find " .. table.concat(words, " ") .. " -type f -perm /6000 -print0 2>/dev/null")
  local out = f and f:read("a") or ""
  local ok = f and f:close()
  if not ok then
    failed = true
    lines[#lines + 1] = "setid: the check for set-user-ID and set-group-ID files could not read every directory of "
      .. escape(table.concat(w.places, " ")) .. ": a file there may keep them"
  end
  for path in out:gmatch("([^%z]+)%z") do
    local st = uv.fs_lstat(path)
    if st and st.type == "file" and (math.tointeger(st.mode) or 0) & SETID ~= 0
      and st.ctime.sec + st.ctime.nsec / 1e9 >= w.since then
      local mode = math.tointeger(st.mode) & 4095
      local cok, err = clear(path, st)
      if cok then
        cleared[#cleared + 1] = path
        lines[#lines + 1] = string.format("setid: cleared the set-user-ID/set-group-ID bits of %s (mode %04o -> %04o,"
          .. " owner uid %d): made in the session, it would run as its owner on the host", escape(path), mode,
          mode & ~SETID, math.tointeger(st.uid))
      else
        failed = true
        lines[#lines + 1] = string.format("setid: could not clear the set-user-ID/set-group-ID bits of %s (mode %04o):"
          .. " %s; remove it or chmod u-s,g-s it before running anything there", escape(path), mode, tostring(err))
      end
    end
  end
  return cleared, failed, lines
end

return M
