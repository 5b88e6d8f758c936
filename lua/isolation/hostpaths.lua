-- isolation.hostpaths: nothing the host uses to build or police sandboxes
-- is inside any sandbox's writable places (API.md, "A session ends when its
-- processes are gone"). Shared by `isolate` and the session manager.
--
-- A workdir or read-write bind that contains, or lies inside, one of these
-- is refused before anything starts, compared after resolving symbolic
-- links (realpath; a path that does not exist yet by its nearest existing
-- parent):
--
-- - the audit log (`isolate --log`, the manager's `audit_log`): the agent
--   deletes it and writes a forged one, while the proxy appends to the
--   unlinked inode;
-- - the manager's `runtime_dir`, which holds the seccomp filter files and
--   every session's proxy socket: a session renames an allow-all program
--   over the filter the next launch loads, and reaches the other sessions'
--   proxies (also through a read-only bind: connect() needs no write to
--   the mount);
-- - the bridge program (isolation.BRIDGE, or bridge_path), which runs on
--   the host as the reaper in front of every local bwrap line, and the
--   module itself (isolation.so, the isolation.* Lua files), which the
--   host loads for the next launch: a sandbox that rewrites them runs its
--   code outside at the next launch.
local uv = require("luv")
local isolation = require("isolation")

-- A path in a message: quoted, whole, on one line.
local show = require("isolation.text").show

local M = {}

--- The path as the kernel resolves it: realpath of path, or, when it does
--- not exist (yet), of its nearest existing parent with the rest appended.
--- nil for a relative path.
function M.resolve(path)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then return nil end
  local real = uv.fs_realpath(path)
  if real then return real end
  local parent, name = path:match("^(.*)/([^/]+)/*$")
  if not parent then return path end
  if parent == "" then parent = "/" end
  local rp = M.resolve(parent)
  if not rp then return nil end
  return (rp == "/" and "" or rp) .. "/" .. name
end

--- Is dir path, or a directory above it? Both resolved, no trailing /
--- (dir "/" holds every path).
function M.within(path, dir)
  return dir == "/" or path == dir or path:sub(1, #dir + 1) == dir .. "/"
end
local within = M.within

-- O_RDONLY | O_NONBLOCK (Linux): an open never waits for a FIFO's writer;
-- with O_NOFOLLOW, a symbolic link is not followed
local O_READ_NONBLOCK, O_NOFOLLOW = 0x800, 0x20000

--- The first `max` bytes of the regular file at path; nil for anything
--- else (missing, a directory, a FIFO, a device, unreadable). The open
--- never waits on a FIFO; with `nofollow`, a symbolic link at path is
--- nil too.
function M.read_regular(path, max, nofollow)
  local fd = uv.fs_open(path, O_READ_NONBLOCK + (nofollow and O_NOFOLLOW or 0), 0)
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data = st and st.type == "file" and uv.fs_read(fd, max, 0) or nil
  uv.fs_close(fd)
  return data
end

--- The files of this module that the host runs or loads: the bridge
--- program (bridge_path when given, else isolation.BRIDGE), isolation.so
--- and the directory of the isolation.* Lua modules. An array of
--- {name, path, why}.
function M.program_guards(bridge_path)
  local out = {}
  local bridge = bridge_path or isolation.BRIDGE
  if bridge then
    out[#out + 1] = { name = "the bridge program", path = bridge,
      why = "it runs on the host (the reaper in front of every local bwrap line): the sandbox could replace it" }
  end
  local so = package.searchpath("isolation", package.cpath)
  if so then
    out[#out + 1] = { name = "the isolation module", path = so,
      why = "the host loads it for every launch: the sandbox could replace it" }
  end
  local src = debug.getinfo(1, "S").source
  local dir = src:sub(1, 1) == "@" and src:sub(2):match("^(.*)/[^/]+$")
  if dir and dir:sub(1, 1) == "/" then
    out[#out + 1] = { name = "the isolation Lua modules", path = dir,
      why = "the host loads them for every launch: the sandbox could replace them" }
  end
  return out
end

--- Refuses a writable place that contains, or lies inside, a guarded path.
--- places: array of {name, path, read_only} (as given; resolved here);
--- guards: array of {name, path, why, ro} (ro: also refused inside a
--- read-only place). Returns true, or nil and one line naming both paths
--- and why.
function M.check(places, guards)
  local resolved = {}
  for i, g in ipairs(guards) do
    resolved[i] = M.resolve(g.path)
  end
  for _, p in ipairs(places) do
    local real = M.resolve(p.path)
    if real then
      for i, g in ipairs(guards) do
        local gr = resolved[i]
        if gr and (not p.read_only or g.ro) then
          local how
          if within(gr, real) then
            how = "contains"
          elseif within(real, gr) then
            how = "lies inside"
          end
          if how then
            local shown = show(p.path) .. (real ~= p.path and (" (" .. show(real) .. ")") or "")
            local gshown = show(g.path) .. (gr ~= g.path and (" (" .. show(gr) .. ")") or "")
            return nil, string.format("%s %s %s %s %s: %s; keep it out of every place the sandbox can write"
              .. " (the workdir, read-write binds)", p.name, shown, how, g.name, gshown, g.why)
          end
        end
      end
    end
  end
  return true
end

-- What only root may read on the host, which a root launch would read
-- inside as the files' owner (bwrap's --cap-drop ALL leaves the owner's own
-- permission): API.md, "What may come back from the sandbox".
M.ROOT_ONLY = { "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
  "/etc/ssl/private", "/etc/security/opasswd" }

--- The launch spec's mask_files and mask_dirs for a root launch: each of
--- ROOT_ONLY and /etc/ssh/ssh_host_*_key that exists here (a symbolic link
--- by the path it leads to), files and directories apart. nil, nil when
--- this process is not root.
function M.root_masks()
  if uv.getuid() ~= 0 then return nil, nil end
  local paths = {}
  for _, p in ipairs(M.ROOT_ONLY) do paths[#paths + 1] = p end
  local scan = uv.fs_scandir("/etc/ssh")
  while scan do
    local name = uv.fs_scandir_next(scan)
    if not name then break end
    if name:match("^ssh_host_.*_key$") then paths[#paths + 1] = "/etc/ssh/" .. name end
  end
  local files, dirs, seen = {}, {}, {}
  for _, p in ipairs(paths) do
    local real = uv.fs_realpath(p)
    local st = real and uv.fs_stat(real)
    if st and not seen[real] then
      seen[real] = true
      if st.type == "directory" then dirs[#dirs + 1] = real else files[#files + 1] = real end
    end
  end
  return #files > 0 and files or nil, #dirs > 0 and dirs or nil
end

return M
