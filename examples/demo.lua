#!/usr/bin/env lua5.4
-- The demo (`make demo`, or `lua5.4 examples/demo.lua` from the repo root).
--
-- With nothing outside this machine: a small web server on the host's
-- loopback (a separate process), an allowlist proxy that admits only that
-- server, and one command in a real bwrap sandbox with the network denied
-- that tries five things. Prints a PASS/FAIL table and exits non-zero if any
-- line is not as expected, or if bwrap cannot run here.

local uv = require("luv")

-- From a checkout: the module is in build/, the Lua glue in lua/.
do
  local real = arg and arg[0] and uv.fs_realpath(arg[0])
  local root = real and real:match("^(.*)/examples/[^/]+$")
  if root then
    package.cpath = root .. "/build/?.so;" .. package.cpath
    package.path = root .. "/lua/?.lua;" .. package.path
  end
end

local isolation = require("isolation")

local DEADLINE = 60 -- seconds for the whole sandboxed run, on a loaded machine

local function say(...) io.stdout:write((string.format(...):gsub("%s+$", "")), "\n") end

local function fail_plainly(fmt, ...)
  io.stderr:write("demo: ", string.format(fmt, ...), "\n")
  os.exit(1)
end

-- Runs a command to completion; returns exit status, stdout, stderr.
local function capture(file, args, timeout)
  local out, err = uv.new_pipe(false), uv.new_pipe(false)
  local chunks, echunks, status = {}, {}, nil
  local handle, perr
  handle, perr = uv.spawn(file, { args = args, stdio = { nil, out, err } }, function(code, signal)
    status = signal ~= 0 and 128 + signal or code
    handle:close()
  end)
  if not handle then
    out:close(); err:close()
    return nil, "", tostring(perr)
  end
  out:read_start(function(_, d) if d then chunks[#chunks + 1] = d else out:close() end end)
  err:read_start(function(_, d) if d then echunks[#echunks + 1] = d else err:close() end end)
  local timer = uv.new_timer()
  timer:start(timeout * 1000, 0, function()
    if not handle:is_closing() then handle:kill("sigkill") end
  end)
  while status == nil or not out:is_closing() or not err:is_closing() do uv.run("once") end
  timer:close()
  return status, table.concat(chunks), table.concat(echunks)
end

-- The same probe the spec helpers use: can bwrap make pid and net namespaces?
local function bwrap_problem()
  if not uv.fs_access("/usr/bin/bwrap", "X") and not uv.fs_access("/bin/bwrap", "X") then
    return "bwrap is not installed (apt-get install bubblewrap, or `make deps`)"
  end
  local status, _, err = capture("bwrap", { "--ro-bind", "/usr", "/usr", "--ro-bind-try", "/lib", "/lib",
    "--ro-bind-try", "/lib64", "/lib64", "--ro-bind-try", "/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
    "--unshare-pid", "--unshare-net", "--", "/bin/true" }, 20)
  if status ~= 0 then return "bwrap cannot create namespaces here: " .. (err:gsub("%s+$", "")) end
  for _, tool in ipairs({ "socat", "curl" }) do
    if not (uv.fs_access("/usr/bin/" .. tool, "X") or uv.fs_access("/bin/" .. tool, "X")) then
      return tool .. " is not installed (`make deps` installs it)"
    end
  end
  return nil
end

-- The web server: a separate process, a few lines of luv, on the host's
-- loopback. It prints its port, then answers every request with a greeting.
local SERVER = [[
local uv = require("luv")
local s = uv.new_tcp()
assert(s:bind("127.0.0.1", 0))
s:listen(16, function()
  local c = uv.new_tcp()
  s:accept(c)
  local buf = ""
  c:read_start(function(_, d)
    if not d then c:close() return end
    buf = buf .. d
    if buf:find("\r\n\r\n", 1, true) then
      c:read_stop()
      local body = "hello from the demo server\n"
      c:write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " .. #body
        .. "\r\nConnection: close\r\n\r\n" .. body, function() c:close() end)
    end
  end)
end)
io.stdout:write(s:getsockname().port, "\n")
io.stdout:flush()
local stop = uv.new_signal()
stop:start("sigterm", function() os.exit(0) end)
uv.run()
]]

local function start_server()
  local out = uv.new_pipe(false)
  local handle, perr = uv.spawn(uv.exepath(), { args = { "-e", SERVER }, stdio = { nil, out, 2 } }, function()
  end)
  if not handle then fail_plainly("cannot start the web server: %s", tostring(perr)) end
  local line, buf = nil, ""
  out:read_start(function(_, d)
    if d then buf = buf .. d end
    line = buf:match("^(%d+)\n") or (not d and "") or line
  end)
  local timer = uv.new_timer()
  local late = false
  timer:start(10000, 0, function() late = true end)
  while not line and not late do uv.run("once") end
  timer:close()
  out:read_stop()
  out:close()
  if not line or line == "" then
    handle:kill("sigterm")
    fail_plainly("the web server did not start")
  end
  return handle, tonumber(line)
end

local function shquote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local problem = bwrap_problem()
if problem then
  fail_plainly("%s.\nThe demo runs a real bwrap sandbox and cannot here; nothing was run.", problem)
end

local started = uv.hrtime()
local base = assert(uv.fs_mkdtemp("/tmp/isolation-demo.XXXXXX"))
local workdir, rundir, secret = base .. "/work", base .. "/run", base .. "/secret.txt"
assert(uv.fs_mkdir(workdir, tonumber("755", 8)))
assert(uv.fs_mkdir(rundir, tonumber("700", 8)))
do
  local f = assert(io.open(secret, "w"))
  f:write("the demo's secret, outside the workdir\n")
  f:close()
end

local server, port = start_server()
local upstream = "127.0.0.1:" .. port
local socket = rundir .. "/proxy.sock"
local events = {}
local proxy, perr = isolation.proxy({
  unix = socket,
  allow = { upstream }, -- an IP pattern with its port: the one thing admitted
  loop = uv,
  on_event = function(ev) events[#events + 1] = ev end,
})
if not proxy then
  server:kill("sigterm")
  fail_plainly("cannot start the proxy: %s", tostring(perr))
end

-- What runs inside the sandbox: five attempts, one result line each.
local probe = table.concat({
  "out=$(curl -s --max-time 20 -w ' %{http_code}' http://" .. upstream .. "/ | tr -d '\\n'); echo \"allowed ${out##* }"
    .. " ${out% *}\"",
  "echo \"denied $(curl -s --max-time 20 -o /dev/null -w '%{http_code}' http://denied.example.com/)\"",
  "if (exec 3<>/dev/tcp/127.0.0.1/" .. port .. ") 2>/dev/null; then echo 'direct connected';"
    .. " else echo 'direct refused'; fi",
  "if cat " .. shquote(secret) .. " >/dev/null 2>&1; then echo 'secret readable'; else echo 'secret unreadable'; fi",
  "if echo 'written in the sandbox' > out.txt; then echo 'write ok'; else echo 'write failed'; fi",
}, "\n")

local spec = {
  config = { mode = "bwrap", network = "deny" },
  workdir = workdir,
  command = probe,
  proxy_socket = socket,
}
local line, werr = isolation.wrap(spec)
if not line then fail_plainly("wrap: %s", tostring(werr)) end

-- bwrap passes every open descriptor into the sandbox: close all above 2
-- first (under make, its jobserver pipe would go in otherwise).
local CLOSE_FDS = "for fd in /proc/$$/fd/*; do fd=${fd##*/}; if [ \"$fd\" -gt 2 ]; then"
  .. " eval \"exec $fd>&-\"; fi; done; "
-- The line mounts an empty directory at $HOME and refuses to run without a
-- usable HOME; under cron or `env -i` the demo lends it one of its own.
local HOME_IF_NONE = 'case ${HOME-} in /?*) ;; *) HOME=' .. shquote(base .. "/home") .. '; export HOME;; esac; '
local status, out, err = capture("bash", { "-c", CLOSE_FDS .. HOME_IF_NONE .. "exec " .. line }, DEADLINE)
local proxy_address = proxy:address()
proxy:close()
server:kill("sigterm")
server:close()

local got = {}
for l in out:gmatch("[^\n]+") do
  local name, rest = l:match("^(%a+) (.*)$")
  if name then got[name] = rest end
end
local written
do
  local f = io.open(workdir .. "/out.txt")
  if f then written = f:read("a"); f:close() end
end
local function has_event(kind, host)
  for _, ev in ipairs(events) do
    if ev.type == kind and ev.host == host then return true end
  end
  return false
end

local allowed_code, allowed_body = (got.allowed or ""):match("^(%d+) (.*)$")
local greeted = allowed_body == "hello from the demo server"
local checks = {
  { "GET http://" .. upstream .. "/ through the proxy", "200 + greeting",
    (allowed_code or got.allowed or "nothing") .. (greeted and " + greeting" or ""),
    allowed_code == "200" and greeted and has_event("allow", "127.0.0.1") },
  { "GET http://denied.example.com/ through the proxy", "403", got.denied or "nothing",
    got.denied == "403" and has_event("deny", "denied.example.com") },
  { "direct TCP to 127.0.0.1:" .. port .. ", no proxy", "refused",
    (got.direct or "nothing"):gsub("connected", "CONNECTED"), got.direct == "refused" },
  { "read " .. secret .. " (outside)", "unreadable",
    got.secret or "nothing", got.secret == "unreadable" },
  { "write ./out.txt in the workdir", "written",
    written and "written" or ("not written (" .. (got.write or "?") .. ")"),
    got.write == "ok" and written == "written in the sandbox\n" },
}

say("isolation demo: one command in a bwrap sandbox, network denied")
say("")
say("  web server  %s on the host's loopback (a separate process)", upstream)
say("  proxy       %s, allowlist { %q }", proxy_address, upstream)
say("  sandbox     bwrap --unshare-net, workdir %s, the proxy bridged in by socat", workdir)
say("")
local fmt = "  %-54s %-16s %-16s %s"
say(fmt, "check", "expected", "got", "")
local passed = 0
for _, c in ipairs(checks) do
  say(fmt, c[1], c[2], c[3], c[4] and "PASS" or "FAIL")
  if c[4] then passed = passed + 1 end
end
say("")
local seen = {}
for _, ev in ipairs(events) do
  seen[#seen + 1] = string.format("%s %s %s:%s %s", ev.type, ev.method, ev.host, ev.port, ev.status)
end
say("  proxy events: %s", #seen > 0 and table.concat(seen, "; ") or "none")
say("  any command, this way: bin/isolate --allow-host HOST[:PORT] -- COMMAND [ARGS...]")
say("")

os.execute("rm -rf " .. shquote(base))
local secs = (uv.hrtime() - started) / 1e9
if passed == #checks and status == 0 then
  say("all %d checks passed (%.1f s)", #checks, secs)
  os.exit(0)
end
say("%d of %d checks passed; the sandboxed command exited %s", passed, #checks, tostring(status))
if err ~= "" then say("its stderr:\n%s", err) end
os.exit(1)
