#!/usr/bin/env lua5.4
-- An orchestrator on luv's loop (`lua5.4 examples/orchestrator.lua` from the
-- repo root): it serves its own hook endpoint on loopback, opens a deny-mode
-- proxy whose allowlist is default_allow_hosts(agent, hook_url), launches a
-- stand-in agent in a bwrap sandbox with the network denied, and shows, as
-- they happen, the proxy's decisions (on_event), the hook calls that reach
-- it, and the agent's output. Everything runs on one thread, one loop.

local uv = require("luv")

do -- from a checkout: the module is in build/, the Lua glue in lua/
  local real = arg and arg[0] and uv.fs_realpath(arg[0])
  local root = real and real:match("^(.*)/examples/[^/]+$")
  if root then
    package.cpath = root .. "/build/?.so;" .. package.cpath
    package.path = root .. "/lua/?.lua;" .. package.path
  end
end

local isolation = require("isolation")

local started = uv.hrtime()
local function log(who, fmt, ...)
  io.stdout:write(string.format("%6.2fs %-9s ", (uv.hrtime() - started) / 1e9, who),
    string.format(fmt, ...), "\n")
  io.stdout:flush()
end

local function give_up(fmt, ...)
  io.stderr:write("orchestrator: ", string.format(fmt, ...), "\n")
  os.exit(1)
end

if not os.execute("bwrap --ro-bind /usr /usr --ro-bind-try /lib /lib --ro-bind-try /lib64 /lib64"
    .. " --ro-bind-try /bin /bin --proc /proc --dev /dev --unshare-pid --unshare-net -- /usr/bin/true"
    .. " >/dev/null 2>&1") then
  give_up("bwrap cannot create namespaces here (or is not installed); this example needs a real sandbox")
end

-- 1. The controller's hook endpoint, a luv TCP server on this loop.
local hooks = 0
local server = uv.new_tcp()
assert(server:bind("127.0.0.1", 0))
server:listen(16, function()
  local c = uv.new_tcp()
  server:accept(c)
  local buf = ""
  c:read_start(function(_, d)
    if not d then c:close() return end
    buf = buf .. d
    local head, rest = buf:match("^(.-\r\n\r\n)(.*)$")
    local len = head and tonumber(head:lower():match("\ncontent%-length:%s*(%d+)")) or 0
    if head and #rest >= len then
      c:read_stop()
      hooks = hooks + 1
      log("[hook]", "%s %s", head:match("^(%S+ %S+)"), rest)
      c:write("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", function() c:close() end)
    end
  end)
end)
local hook_url = "http://127.0.0.1:" .. server:getsockname().port .. "/hook/s1"

-- 2. The session's proxy, in luv mode: its decisions arrive on this loop.
local runtime = assert(uv.fs_mkdtemp("/tmp/isolation-orchestrator.XXXXXX")) -- 0700
local socket = runtime .. "/s1.sock"
local agent = "claude"
local allow = assert(isolation.default_allow_hosts(agent, hook_url))
allow[#allow + 1] = "*.invalid" -- the project's own allow_hosts: admitted, yet nothing resolves
local proxy, err = isolation.proxy({
  unix = socket,
  allow = allow,
  loop = uv,
  on_event = function(ev)
    log("[proxy]", "%-5s %s %s:%s -> %s (%s)", ev.type, ev.method, ev.host, ev.port, ev.status, ev.reason)
  end,
})
if not proxy then give_up("cannot start the proxy: %s", tostring(err)) end
log("[orch]", "proxy on %s, %d allowlist patterns (the agent's model API, registries, the hook)",
  proxy:address(), #allow)

-- 3. The stand-in agent: reports to its hook, tries a host that is not on
-- the list, then one that is (*.invalid) but never resolves, then reports again.
local agent_script = table.concat({
  "echo \"agent: started in $PWD, HOME=$HOME, proxy $HTTPS_PROXY\"",
  "curl -s -o /dev/null -w 'agent: hook answered %{http_code}\\n' -d '{\"event\":\"SessionStart\"}' " .. hook_url,
  "sleep 0.3",
  "curl -s -o /dev/null -w 'agent: denied.example.net: CONNECT answered %{http_connect}\\n'"
    .. " https://denied.example.net/",
  "sleep 0.3",
  "curl -s -o /dev/null --max-time 20 -w 'agent: nowhere.invalid answered %{http_code}\\n'"
    .. " http://nowhere.invalid/",
  "curl -s -o /dev/null -w 'agent: hook answered %{http_code}\\n' -d '{\"event\":\"Stop\"}' " .. hook_url,
}, "\n")

local workdir = runtime .. "/work"
assert(uv.fs_mkdir(workdir, tonumber("755", 8)))
local spec = {
  config = { mode = "bwrap", network = "deny", allow_hosts = { "*.invalid" } },
  agent = agent,
  workdir = workdir,
  command = agent_script,
  proxy_socket = socket,
}
local line, werr = isolation.wrap(spec)
if not line then give_up("%s", tostring(werr)) end

-- 4. Launch it; stream its output; a heartbeat shows the loop never blocks.
local out, errp = uv.new_pipe(false), uv.new_pipe(false)
local status
-- bwrap passes every open descriptor into the sandbox: close all above 2
-- first, so nothing this process inherited without close-on-exec gets in.
local CLOSE_FDS = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ \"$fd\" -gt 2 ]; then"
  .. " eval \"exec $fd>&-\"; fi; done; "
-- The line mounts an empty directory at $HOME and refuses to run without a
-- usable HOME; under cron or `env -i` this example lends it one of its own.
local lent_home = runtime .. "/home"
local HOME_IF_NONE = "case ${HOME-} in /?*) ;; *) HOME='" .. lent_home .. "'; export HOME;; esac; "
local child, perr = uv.spawn("bash", { args = { "-c", CLOSE_FDS .. HOME_IF_NONE .. "exec " .. line },
  stdio = { nil, out, errp } },
  function(code, signal) status = signal ~= 0 and 128 + signal or code end)
if not child then give_up("cannot launch: %s", tostring(perr)) end
log("[orch]", "launched pid %d: bwrap, network denied, %d-byte command line", child:get_pid(), #line)

local function lines(prefix)
  local pending = ""
  return function(_, d)
    if not d then
      if pending ~= "" then log(prefix, "%s", pending) end
      return
    end
    pending = pending .. d
    for l in pending:gmatch("([^\n]*)\n") do log(prefix, "%s", l) end
    pending = pending:match("([^\n]*)$")
  end
end
out:read_start(lines("[agent]"))
errp:read_start(lines("[agent!]"))

local ticks = 0
local heartbeat = uv.new_timer()
heartbeat:start(500, 500, function() ticks = ticks + 1 end)

local deadline = uv.new_timer()
deadline:start(60000, 0, function()
  log("[orch]", "deadline: stopping the agent")
  child:kill("sigterm")
end)

-- 5. When it ends: tear the session down exactly once.
local finish = uv.new_check()
finish:start(function()
  if status == nil then return end
  finish:stop()
  finish:close()
  local s = proxy:stats()
  proxy:close()
  for _, h in ipairs({ child, out, errp, heartbeat, deadline, server }) do
    if not h:is_closing() then h:close() end
  end
  os.remove(workdir)
  uv.fs_rmdir(workdir)
  uv.fs_rmdir(lent_home)
  uv.fs_rmdir(runtime)
  log("[orch]", "agent exited %d; proxy: %d allowed, %d denied, %d errors; %d hook calls; %d heartbeats",
    status, s.allowed or 0, s.denied or 0, s.errors or 0, hooks, ticks)
  log("[orch]", "socket removed: %s", uv.fs_stat(socket) and "NO" or "yes")
end)

uv.run()
os.exit(status == 0 and 0 or 1)
