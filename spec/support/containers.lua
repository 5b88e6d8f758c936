-- Real container engines for the specs, without any registry: a private
-- dockerd on a socket in a temporary directory (started when no daemon
-- answers), and images imported from tarballs made of this machine's own
-- files. No spec pulls anything.
--
--   local containers = require("support.containers")
--   local eng, why = containers.docker()   -- nil, reason when none can run
--   eng.env                                -- "DOCKER_HOST=unix://..." for a line
--   containers.image(eng, "isolation-spec-tools", {"bash", "cat", ...})
--   containers.empty_image(eng, "isolation-spec-empty")  -- no file at all
--   eng:stop()                             -- stops our dockerd, removes its dirs
local helpers = require("helpers")
local shq = helpers.shquote

local M = {}

local function run(cmd)
  return helpers.run(cmd)
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
  -- the vfs layers hold read-only directories; umount what the daemon left
  run("grep -o " .. shq(self.dir .. "[^ ]*") .. " /proc/mounts | sort -r | xargs -r -n1 umount -l")
  helpers.rmtree(self.dir)
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
  local dir = helpers.tmpdir()
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
  -- mktemp made the root 0700: the image's / must be open to any user
  assert(run("chmod 0755 " .. shq(root)) == 0)
  local code, _, err = run("tar -C " .. shq(root) .. " -cf - . | " .. eng:cmd("import - " .. shq(name)))
  assert(code == 0, "docker import failed: " .. err)
  return name
end

--- An image of the given programs (each with its libraries), /tmp, and
--- /bin/bash -> the machine's bash, built with docker import.
function M.image(eng, name, programs)
  local root = helpers.tmpdir()
  local ok, err = pcall(function()
    copy_programs(root, programs)
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
