-- Real container engines for the specs, without any registry: a private
-- dockerd on a socket in a temporary directory (started when no daemon
-- answers), and images imported from tarballs made of this machine's own
-- files. No spec pulls anything.
--
--   local containers = require("support.containers")
--   local eng, why = containers.docker()   -- nil, reason when none can run
--   eng.env                                -- "DOCKER_HOST=unix://..." for a line
--   containers.image(eng, "isolation-spec-tools", {"bash", "cat", ...})
--   containers.image(eng, name, programs, {["/etc/passwd"] = "...", ["/bin/sh"] = {link = "/usr/bin/dash"}})
--   containers.empty_image(eng, "isolation-spec-empty")  -- no file at all
--   eng:stop()                             -- stops our dockerd, removes its dirs
--   local pod, why = containers.podman()   -- rootless podman (as root: as nobody)
--   pod.prefix, pod.env, pod.dir, pod.uid  -- how to run a line as its user
local helpers = require("helpers")
local shq = helpers.shquote

local M = {}

local function run(cmd)
  return helpers.run(cmd)
end

-- Unmounts, deepest first, whatever is still mounted under dir (the vfs
-- layers of a daemon hold read-only directories rmtree cannot remove).
local function unmount_under(dir)
  run("grep -o " .. shq(dir .. "[^ ]*") .. " /proc/mounts | sort -r | xargs -r -n1 umount -l")
end

local Engine = {}
Engine.__index = Engine

--- `docker ...` with this engine's DOCKER_HOST (and the given tail).
function Engine:cmd(tail)
  return self.env .. " docker " .. tail
end

function Engine:stop()
  if self.stopped then return end
  self.stopped = true
  if not self.dir then return end
  -- our own daemon only: its pid file, in our private directory
  local pid = helpers.read(self.dir .. "/pid")
  if pid and pid:match("^%d+") then
    run("kill " .. pid:match("^%d+") .. "; for i in $(seq 100); do kill -0 " .. pid:match("^%d+")
      .. " 2>/dev/null || break; sleep 0.1; done")
  end
  unmount_under(self.dir)
  helpers.rmtree(self.dir)
end

-- The busted process that runs the specs: a private daemon's directory
-- names it (`owner`), so that a later run can tell a daemon whose run was
-- killed (a cancelled CI job, ^C) from one a run still uses.
local OWNER = tostring(require("luv").os_getpid())

-- A zombie is not alive: where PID 1 does not reap (this machine's), a
-- killed run's process stays one, and kill -0 still finds it.
local function alive(pid)
  local stat = helpers.read("/proc/" .. pid .. "/stat")
  return stat ~= nil and not stat:match("^%d+ %(.*%) [ZX]")
end

-- Stops the private dockerds and podman pause processes of spec runs that
-- were killed before their teardown, and removes their directories. Only
-- a directory made by helpers.tmpdir whose owner is gone, and only a
-- process whose command line names that directory (a pid file left by a
-- daemon that died may name a pid reused since).
local function reap_orphans()
  local _, list = run("ls -d /tmp/isolation-spec.*/owner 2>/dev/null")
  for file in list:gmatch("[^\n]+") do
    local dir = file:match("^(/tmp/isolation%-spec%.[%w]+)/owner$")
    local owner = (helpers.read(file) or ""):match("^(%d+)")
    if dir and owner and not alive(owner) then
      for _, pidfile in ipairs({ dir .. "/pid", dir .. "/xdg/libpod/tmp/pause.pid" }) do
        local pid = (helpers.read(pidfile) or ""):match("^(%d+)")
        local cmdline = pid and (helpers.read("/proc/" .. pid .. "/cmdline") or "") or ""
        local environ = pid and (helpers.read("/proc/" .. pid .. "/environ") or "") or ""
        if pid and (cmdline:find(dir, 1, true) or environ:find(dir, 1, true)) then
          run("kill " .. pid .. "; for i in $(seq 100); do kill -0 " .. pid .. " 2>/dev/null || break; sleep 0.1; done")
        end
      end
      unmount_under(dir)
      helpers.rmtree(dir)
    end
  end
end

local function answers(env)
  local code = run(env .. " timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1")
  return code == 0
end

--- A docker engine: the running daemon when one answers, else our own.
function M.docker()
  if run("command -v docker >/dev/null && command -v dockerd >/dev/null") ~= 0 then
    return nil, "docker.io is not installed (make test installs it)"
  end
  if os.getenv("DOCKER_HOST") and answers("DOCKER_HOST=" .. shq(os.getenv("DOCKER_HOST"))) then
    return setmetatable({ env = "DOCKER_HOST=" .. shq(os.getenv("DOCKER_HOST")) }, Engine)
  end
  if run("id -u | grep -qx 0") ~= 0 then
    return nil, "no docker daemon answers, and only root can start one"
  end
  reap_orphans()
  local dir = helpers.tmpdir()
  helpers.write(dir .. "/owner", OWNER .. "\n")
  local env = "DOCKER_HOST=unix://" .. dir .. "/docker.sock"
  -- vfs and cgroupfs: no overlay or systemd needed; no bridge and no
  -- iptables: the specs use --network none only
  local code = run("(setsid dockerd --host unix://" .. dir .. "/docker.sock --data-root " .. dir
    .. "/data --exec-root " .. dir .. "/exec --pidfile " .. dir .. "/pid --iptables=false"
    .. " --ip6tables=false --ip-masq=false --bridge=none --storage-driver vfs"
    .. " --exec-opt native.cgroupdriver=cgroupfs >" .. dir .. "/log 2>&1 </dev/null &)")
  local eng = setmetatable({ env = env, dir = dir }, Engine)
  for _ = 1, 150 do
    if code == 0 and answers(env) then return eng end
    run("sleep 0.2")
  end
  local log = helpers.read(dir .. "/log") or ""
  eng:stop()
  return nil, "dockerd did not start here: " .. (log:sub(-600))
end

local Podman = {}
Podman.__index = Podman

function Podman:cmd(tail)
  return self.prefix .. " env " .. self.env .. " podman " .. tail
end

function Podman:stop()
  if self.stopped then return end
  self.stopped = true
  run(self.prefix .. " env " .. self.env .. " podman rm -af >/dev/null 2>&1")
  -- rootless podman keeps a pause process holding its user namespace
  local pause = helpers.read(self.dir .. "/xdg/libpod/tmp/pause.pid")
  if pause and pause:match("^%d+") then run("kill " .. pause:match("^%d+")) end
  if self.restore then
    for file, text in pairs(self.restore) do
      -- only our own line is taken out again; anything else stays
      local now = helpers.read(file) or ""
      local f = assert(io.open(file, "wb"))
      f:write((now:gsub(text, "", 1)))
      f:close()
    end
  end
  unmount_under(self.dir)
  if self.uid ~= 0 and not self.as_root then run(self:cmd("unshare rm -rf " .. shq(self.dir .. "/graph"))) end
  helpers.rmtree(self.dir)
end

--- Rootless podman with private storage (vfs) in a temporary directory.
--- As root, it runs as nobody (uid 65534), with subordinate ids for that
--- user added to /etc/subuid and /etc/subgid for the run (and removed by
--- stop) when it has none: rootless is the only mode --userns=keep-id has.
function M.podman()
  if run("command -v podman >/dev/null && command -v newuidmap >/dev/null") ~= 0 then
    return nil, "podman (and uidmap's newuidmap) is not installed (make test installs it)"
  end
  reap_orphans()
  local root = run("id -u | grep -qx 0") == 0
  local dir = helpers.tmpdir()
  helpers.write(dir .. "/owner", OWNER .. "\n")
  local eng = setmetatable({ dir = dir, prefix = "", uid = 0 }, Podman)
  if root then
    eng.prefix, eng.uid, eng.as_root = "setpriv --reuid=65534 --regid=65534 --clear-groups", 65534, true
    eng.restore = {}
    for _, file in ipairs({ "/etc/subuid", "/etc/subgid" }) do
      local text = helpers.read(file) or ""
      if not text:find("\nnobody:") and not text:find("^nobody:") and not text:find("\n65534:")
        and not text:find("^65534:") then
        local line = "nobody:3221225472:65536\n"
        local f = assert(io.open(file, "ab"))
        f:write(line)
        f:close()
        eng.restore[file] = line
      end
    end
  else
    local _, uid = run("id -u")
    eng.uid = tonumber(uid)
  end
  helpers.write(dir .. "/storage.conf", "[storage]\ndriver = \"vfs\"\nrunroot = \"" .. dir
    .. "/run\"\ngraphroot = \"" .. dir .. "/graph\"\n")
  helpers.write(dir .. "/containers.conf", "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"
    .. "events_logfile_path = \"" .. dir .. "/events.log\"\n")
  assert(run("mkdir -m 0700 " .. shq(dir .. "/xdg") .. " && chmod 0711 " .. shq(dir)) == 0)
  if root then assert(run("chown -R 65534:65534 " .. shq(dir)) == 0) end
  eng.env = "HOME=" .. shq(dir) .. " XDG_RUNTIME_DIR=" .. shq(dir .. "/xdg") .. " CONTAINERS_STORAGE_CONF="
    .. shq(dir .. "/storage.conf") .. " CONTAINERS_CONF=" .. shq(dir .. "/containers.conf")
  local code, _, err = run("cd " .. shq(dir) .. " && " .. eng:cmd("info >/dev/null"))
  if code ~= 0 then
    eng:stop()
    return nil, "rootless podman does not run here: " .. err:sub(-400)
  end
  return eng
end

-- Copies each program with the libraries ldd names into root.
local function copy_programs(root, programs)
  local list = {}
  for _, p in ipairs(programs) do
    local code, path = run("command -v " .. shq(p))
    assert(code == 0, "no " .. p .. " on this machine")
    list[#list + 1] = shq((path:gsub("%s+$", "")))
  end
  local script = "set -e; for f in " .. table.concat(list, " ") .. "; do "
    .. "for x in \"$f\" $(ldd \"$f\" | grep -o '/[^ ]*'); do "
    .. "mkdir -p " .. shq(root) .. "\"$(dirname \"$x\")\"; cp -L \"$x\" " .. shq(root) .. "\"$x\"; done; done"
  local code, _, err = run(script)
  assert(code == 0, err)
end

local function import(eng, root, name)
  -- mktemp made the root 0700: the image's / must be open to any user;
  -- owned by 0 inside, which rootless podman maps to its user
  assert(run("chmod 0755 " .. shq(root)) == 0)
  local code, _, err = run("tar --owner=0 --group=0 --numeric-owner -C " .. shq(root) .. " -cf - . | "
    .. eng:cmd("import - " .. shq(name)))
  assert(code == 0, "docker import failed: " .. err)
  return name
end

--- An image of the given programs (each with its libraries), /tmp, and
--- /bin/bash -> the machine's bash, built with docker import; `files`
--- (optional) maps more absolute paths to their text (an /etc/passwd),
--- or to {link = target} for a symbolic link (/bin/sh).
function M.image(eng, name, programs, files)
  local root = helpers.tmpdir()
  local ok, err = pcall(function()
    copy_programs(root, programs)
    for path, text in pairs(files or {}) do
      assert(run("mkdir -p " .. shq(root .. path:match("^(.*)/[^/]*$"))) == 0)
      if type(text) == "table" then
        assert(run("ln -s " .. shq(text.link) .. " " .. shq(root .. path)) == 0)
      else
        helpers.write(root .. path, text)
      end
    end
    assert(run("mkdir -p -m 1777 " .. shq(root .. "/tmp") .. " && mkdir -p " .. shq(root .. "/bin")
      .. " && { [ -e " .. shq(root .. "/bin/bash") .. " ] || ln -s /usr/bin/bash " .. shq(root .. "/bin/bash")
      .. "; }") == 0)
    import(eng, root, name)
  end)
  helpers.rmtree(root)
  assert(ok, err)
  return name
end

--- An image without a single file: no shell, no loader, no libc.
function M.empty_image(eng, name)
  local root = helpers.tmpdir()
  local ok, err = pcall(function()
    assert(run("mkdir " .. shq(root .. "/tmp")) == 0)
    import(eng, root, name)
  end)
  helpers.rmtree(root)
  assert(ok, err)
  return name
end

return M
