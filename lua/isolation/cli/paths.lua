-- isolation.cli.paths: the host paths of a run: the sandbox's home, the
-- workdir and binds checked against the homes and what the launch spec
-- refuses, the places the sandbox can write, the module's own files kept
-- out of them, and where the proxy's private directory goes.
local uv = require("luv")
local isolation = require("isolation")
local protect = require("isolation.protect")
local hostpaths = require("isolation.hostpaths")
local common = require("isolation.cli.common")

local die, die_usage, absolute = common.die, common.die_usage, common.absolute

local M = {}

-- Where the proxy's private directory goes: $TMPDIR when it is absolute and
-- short enough for the socket's path to fit a unix address (108 bytes),
-- else /tmp, else $XDG_RUNTIME_DIR; never inside a place the sandbox can
-- write (`avoid`: the workdir and the binds, hostpaths.check's places),
-- where the sandbox would reach the socket's directory (hostpaths). nil
-- when every candidate is inside one.
local function tmp_base(avoid)
  local candidates = {}
  local function add(t)
    if t and t:sub(1, 1) == "/" then
      t = t:gsub("(.)/+$", "%1")
      if #t + #"/isolate.XXXXXX/proxy.sock" < 108 then candidates[#candidates + 1] = t end
    end
  end
  add(os.getenv("TMPDIR"))
  add("/tmp")
  add(os.getenv("XDG_RUNTIME_DIR"))
  for _, t in ipairs(candidates) do
    if hostpaths.check(avoid or {}, { { name = "the proxy's directory", path = t .. "/isolate.XXXXXX", why = "" } })
    then
      return t
    end
  end
  return nil
end

-- The home the sandbox hides behind an empty directory: $HOME, or, when
-- HOME is unset or empty (cron, a systemd unit, env -i), the passwd
-- entry's home, which isolate then exports to the line (README, choices).
-- A HOME that is set but relative, with . or .. components, or / is a
-- mistake isolate does not guess around: one line, exit 125. Returns the
-- home and whether it came from the passwd entry.
local function sandbox_home()
  local home, from_passwd = os.getenv("HOME"), false
  if home == nil or home == "" then
    local pw = uv.os_get_passwd()
    home, from_passwd = pw and pw.homedir, true
    if home == nil or home == "" then
      die("HOME is not set and this user's passwd entry has no home directory: set HOME to your home directory")
    end
  end
  local why = home:sub(1, 1) ~= "/" and "is not an absolute path"
    or ("/" .. home .. "/"):find("/%.%.?/") and "has a . or .. component"
    or (uv.fs_realpath(home) or home) == "/" and "is /"
  if why then
    die(string.format("HOME %s (got HOME=%q%s): the sandbox mounts an empty directory at $HOME;"
      .. " set HOME to your home directory", why, home, from_passwd and ", from the passwd entry" or ""))
  end
  return home, from_passwd
end


-- Refuses (usage error) a workdir or bind that is a home or above one, and
-- a bind whose resolved path the launch spec's rules refuse (a symlink into
-- /etc/cron.d): the builders see only the text. The homes are $HOME and the
-- passwd entry's, each resolved: a HOME pointed elsewhere must not make the
-- real one bindable.
local function check_paths_resolved(o, spec, home)
  local homes = protect.resolved_homes(home)
  local function check_home(opt, given, real)
    for _, h in ipairs(homes) do
      if hostpaths.within(h.path, real) then
        local resolved = real ~= given and (" (" .. real .. ")") or ""
        die_usage(string.format("%s %s%s is %s (%s) or a directory above it: the sandbox would see (and,"
          .. " read-write, change) the whole home; use a directory inside it", opt, given, resolved, h.name, h.path))
      end
    end
  end
  local wopt = o.workdir and "--workdir" or "the workdir (the current directory)"
  check_home(wopt, o.workdir or spec.workdir, spec.workdir)
  local ok, werr = isolation.argv({ workdir = spec.workdir, command = "true" })
  if not ok then
    die_usage(string.format("%s %s resolves to %s, which %s", wopt, o.workdir or uv.cwd(), spec.workdir,
      (tostring(werr):gsub("^isolation: %S+ ", ""))))
  end
  for _, kind in ipairs({ { "binds", "--bind" }, { "ro_binds", "--ro-bind" } }) do
    for _, p in ipairs(spec[kind[1]] or {}) do
      local path = p:sub(1, 6) == "$HOME/" and (home .. p:sub(6)) or p
      local real = uv.fs_realpath(path)
      if real then
        check_home(kind[2], p, real)
        local bok, err = isolation.argv({ [kind[1]] = { real }, command = "true" })
        if not bok then
          die_usage(string.format("%s %s resolves to %s, which %s", kind[2], p, real,
            (tostring(err):gsub("^isolation: %S+ ", ""))))
        end
      end
    end
  end
end

-- The places the sandbox can write (the workdir, --bind) and those it can
-- read (--ro-bind), as hostpaths.check takes them.
local function writable_places(o, spec, home)
  local places = { { name = o.workdir and "--workdir" or "the workdir (the current directory)",
    path = spec.workdir } }
  for _, kind in ipairs({ { "binds", "--bind", false }, { "ro_binds", "--ro-bind", true } }) do
    for _, p in ipairs(spec[kind[1]] or {}) do
      local path = p:sub(1, 6) == "$HOME/" and (home .. p:sub(6)) or p
      places[#places + 1] = { name = kind[2], path = path, read_only = kind[3] }
    end
  end
  return places
end

-- Refuses (usage error) a workdir or --bind that contains, or lies inside,
-- the audit log or a program of this module (isolation.hostpaths): the
-- sandbox would delete and forge the log, or replace what the host runs.
local function check_host_paths(o, places)
  local guards = hostpaths.program_guards()
  if o.log then
    table.insert(guards, 1, { name = "the audit log (--log)", path = absolute(o.log, assert(uv.cwd())),
      why = "the sandbox could delete it and write a forged one, while the proxy appends to the unlinked file" })
  end
  local ok, err = hostpaths.check(places, guards)
  if not ok then die_usage(err) end
end

M.tmp_base, M.sandbox_home, M.check_paths_resolved = tmp_base, sandbox_home, check_paths_resolved
M.writable_places, M.check_host_paths = writable_places, check_host_paths

return M
