-- Spec support for bin/isolate and the examples: child processes driven on
-- luv's loop (stdout/stderr captured, signals, deadlines), a loopback HTTP
-- upstream in a child process, and raw requests to a proxy's unix socket.
local uv = require("luv")
local helpers = require("helpers")

local cli = {}

cli.ROOT = assert(uv.cwd())
cli.ISOLATE = cli.ROOT .. "/bin/isolate"
cli.LUA = "lua5.4"

-- The sanitizer runtime of a spec-asan run must not reach the children.
local CLEAN_ENV = helpers.no_sanitizer_args()

--- Runs the loop until pred() is true or `seconds` pass; returns pred().
--- A 20 ms tick wakes the loop, so that pred may also watch files.
function cli.wait_for(pred, seconds)
  local deadline = uv.hrtime() + seconds * 1e9
  local t = uv.new_timer()
  t:start(20, 20, function() end)
  while not pred() and uv.hrtime() < deadline do uv.run("once") end
  t:close()
  uv.run("nowait")
  return pred()
end

--- Starts a child: `argv` an array (argv[1] the program), `opts.env` an array
--- of NAME=VALUE added, `opts.cwd`, `opts.stdin` true for a pipe (p.stdin), `opts.detached` true for a session
--- and process group of its own (p.pid its id: a kill of -p.pid reaches the child's whole group and not this one).
--- Returns a table whose out/err grow as the child writes, status (128+n after signal n) once it ended, and helpers.
function cli.spawn(argv, opts)
  opts = opts or {}
  local args = {}
  for _, a in ipairs(CLEAN_ENV) do args[#args + 1] = a end
  for _, e in ipairs(opts.env or {}) do args[#args + 1] = e end
  for _, a in ipairs(argv) do args[#args + 1] = a end
  local p = { out = "", err = "", closed = 0 }
  local out, err = uv.new_pipe(false), uv.new_pipe(false)
  local stdin = opts.stdin and uv.new_pipe(false) or nil
  p.stdin = stdin
  local handle, pid = uv.spawn("env", { args = args, stdio = { stdin, out, err }, cwd = opts.cwd,
    detached = opts.detached },
    function(code, signal)
      p.status = signal ~= 0 and 128 + signal or code
    end)
  assert(handle, pid)
  p.handle, p.pid = handle, pid
  local function reader(pipe, field)
    pipe:read_start(function(_, d)
      if d then
        p[field] = p[field] .. d
      else
        pipe:close()
        p.closed = p.closed + 1
      end
    end)
  end
  reader(out, "out")
  reader(err, "err")
  --- Waits for the end (status and both streams); kills it after `seconds`.
  function p.wait(seconds)
    local done = cli.wait_for(function() return p.status ~= nil and p.closed == 2 end, seconds or 60)
    if not done then
      pcall(uv.kill, pid, "sigkill")
      cli.wait_for(function() return p.status ~= nil end, 5)
    end
    if not handle:is_closing() then handle:close() end
    if stdin and not stdin:is_closing() then stdin:close() end
    uv.run("nowait")
    return p.status, p.out, p.err
  end
  function p.kill(sig) return uv.kill(pid, sig) end
  return p
end

-- The line isolate writes once when it runs as root (spec/root_masks_spec.lua).
cli.ROOT_NOTICE = "isolate: the sandbox runs as root"

--- bin/isolate with these arguments, to completion: status, stdout, stderr.
--- The root notice is taken out of stderr unless opts.root_notice is true:
--- the specs that compare stderr whole run as root and as others alike.
function cli.isolate(args, opts)
  local argv = { cli.ISOLATE }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local status, out, err = cli.spawn(argv, opts).wait((opts and opts.timeout) or 60)
  if not (opts and opts.root_notice) and err then
    err = err:gsub(cli.ROOT_NOTICE:gsub("%p", "%%%0") .. "[^\n]*\n", "", 1)
  end
  return status, out, err
end

local UPSTREAM = [[
local uv = require("luv")
local s = uv.new_tcp()
assert(s:bind("127.0.0.1", 0))
s:listen(64, function()
  local c = uv.new_tcp()
  s:accept(c)
  local buf = ""
  c:read_start(function(_, d)
    if not d then c:close() return end
    buf = buf .. d
    if buf:find("\r\n\r\n", 1, true) then
      c:read_stop()
      local line = buf:match("^[^\r\n]*")
      io.stderr:write("upstream: ", line, "\n")
      local body = "hello from upstream " .. line .. "\n"
      c:write("HTTP/1.1 200 OK\r\nContent-Length: " .. #body .. "\r\nConnection: close\r\n\r\n" .. body,
        function() c:close() end)
    end
  end)
end)
io.stdout:write(s:getsockname().port, "\n")
io.stdout:flush()
uv.run()
]]

--- A loopback HTTP server in a child process; answers every request with
--- "hello from upstream <request line>". Returns { port, stop(), requests() }.
function cli.upstream()
  local p = cli.spawn({ cli.LUA, "-e", UPSTREAM })
  assert(cli.wait_for(function() return p.out:match("^%d+\n") end, 20), "upstream did not start: " .. p.err)
  local u = { port = tonumber(p.out:match("^(%d+)")), process = p }
  function u.stop()
    p.kill("sigterm")
    p.wait(10)
  end
  --- Request lines the upstream has seen so far.
  function u.requests()
    local list = {}
    for l in p.err:gmatch("upstream: ([^\n]*)") do list[#list + 1] = l end
    return list
  end
  return u
end

--- Sends `request` to a unix socket and returns everything read until the
--- other side closes (or `seconds` pass).
function cli.unix_request(path, request, seconds)
  local c = uv.new_pipe(false)
  local got, done, failure = {}, false, nil
  c:connect(path, function(err)
    if err then failure, done = err, true return end
    c:write(request)
    c:read_start(function(rerr, d)
      if d then got[#got + 1] = d else failure = rerr; done = true end
    end)
  end)
  cli.wait_for(function() return done end, seconds or 20)
  if not c:is_closing() then c:close() end
  uv.run("nowait")
  return table.concat(got), failure
end

--- Paths inside `dir` (names only), sorted.
function cli.ls(dir)
  local names = {}
  local h = uv.fs_scandir(dir)
  while h do
    local n = uv.fs_scandir_next(h)
    if not n then break end
    names[#names + 1] = n
  end
  table.sort(names)
  return names
end

--- Pids whose command line contains `needle`.
function cli.pgrep(needle)
  local found = {}
  local h = uv.fs_scandir("/proc")
  while h do
    local n = uv.fs_scandir_next(h)
    if not n then break end
    if n:match("^%d+$") then
      local cmd = helpers.read("/proc/" .. n .. "/cmdline")
      if cmd and cmd:find(needle, 1, true) then found[#found + 1] = tonumber(n) end
    end
  end
  return found
end

--- A line's reaper (isolation-bridge --reap, named isolation-bridg) among
--- the processes whose argv holds needle; with grace, the one started with
--- that grace (the session manager's own reaper has a longer one). Not a
--- reaper's watchdog: the same argv, named isolation-watch.
function cli.reaper_of(needle, grace)
  local want = "\0--reap\0" .. (grace and (tostring(grace) .. "\0") or "")
  for _, pid in ipairs(cli.pgrep(needle)) do
    local comm = (helpers.read("/proc/" .. pid .. "/comm") or ""):match("^[^\n]*")
    local argv = helpers.read("/proc/" .. pid .. "/cmdline") or ""
    if comm == "isolation-bridg" and argv:find(want, 1, true) then return pid end
  end
end

return cli
