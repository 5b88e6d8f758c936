-- Helpers for the bridge specs: start and find bridge processes (the
-- built-in one and socat with the seed's argument order), free ports, and
-- small luv servers and clients on one loop, every wait bounded in time.
local uv = require("luv")
local helpers = require("helpers")

local M = {}

-- An error inside a luv callback makes luv end the whole process: busted
-- would stop mid-file and leave bridges and listeners running. Callbacks
-- given to the handles the specs use are run under pcall instead; the
-- first error is raised again by run_until, on the spec's own stack.
local callback_error
local function safe(fn)
  return function(...)
    local ok, err = pcall(fn, ...)
    if not ok and not callback_error then callback_error = debug.traceback(tostring(err)) end
  end
end
local GUARDED = { "read_start", "start", "connect", "write", "shutdown", "listen", "close" }
local guarded_methods

--- Runs the callbacks of tcp, pipe and timer handles under pcall until
--- unguard(): for the bridge specs only (other spec files keep luv's own
--- behaviour).
function M.guard()
  if guarded_methods then return end
  guarded_methods = {}
  for _, h in ipairs({ uv.new_tcp(), uv.new_pipe(false), uv.new_timer() }) do
    local methods = getmetatable(h).__index
    local saved = {}
    for _, name in ipairs(guarded_methods[methods] and {} or GUARDED) do
      local orig = methods[name]
      if orig then
        saved[name] = orig
        methods[name] = function(self, ...)
          local args = table.pack(...)
          for i = 1, args.n do
            if type(args[i]) == "function" then args[i] = safe(args[i]) end
          end
          return orig(self, table.unpack(args, 1, args.n))
        end
      end
    end
    guarded_methods[methods] = guarded_methods[methods] or saved
    h:close()
  end
  uv.run("nowait")
end

function M.unguard()
  for methods, saved in pairs(guarded_methods or {}) do
    for name, orig in pairs(saved) do methods[name] = orig end
  end
  guarded_methods = nil
end

-- Exactly the seed's (and the contract's) bridge line. socat's listen backlog is
-- its default, 5: a burst of more clients at once gets connections reset.
M.SOCAT_FMT = "socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:%s"

--- The bridge program under test: the sanitizer build in a sanitizer run.
function M.bin()
  local asan = "build/asan/isolation-bridge"
  if os.getenv("ISOLATION_SANITIZER") and helpers.read(asan) then
    return asan
  end
  return "build/isolation-bridge"
end

--- A loopback port that was free a moment ago.
M.free_port = require("support.proxy").closed_port

--- Pid of the process listening on 127.0.0.1:port, or nil.
function M.listener_pid(port)
  local f = io.open("/proc/net/tcp")
  if not f then return nil end
  local want = string.format("0100007F:%04X", port)
  local inode
  for line in f:lines() do
    local fields = {}
    for w in line:gmatch("%S+") do fields[#fields + 1] = w end
    if fields[2] == want and fields[4] == "0A" then inode = fields[10] end
  end
  f:close()
  if not inode then return nil end
  local _, out = helpers.run("find /proc/[0-9]*/fd -lname 'socket:\\[" .. inode .. "\\]' 2>/dev/null")
  return tonumber(out:match("^/proc/(%d+)/"))
end

--- Number of open fds of a process.
function M.fd_count(pid)
  local _, out = helpers.run("ls /proc/" .. pid .. "/fd")
  local n = 0
  for _ in out:gmatch("%S+") do n = n + 1 end
  return n
end

--- Number of open fds of this process, listed by a child of os.execute:
--- helpers.fd_count()'s io.popen may list its own pipe's write end too,
--- before this process has closed it (one fd more, now and then).
function M.own_fd_count()
  return M.fd_count(helpers.pid())
end

function M.alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local stat = f:read("l") or ""
  f:close()
  return not stat:match("^%d+ %b() Z")
end

--- Sends SIGTERM to pid and waits (bounded) until it is gone.
function M.kill(pid)
  if not pid then return end
  helpers.run("kill " .. pid)
  for _ = 1, 100 do
    if not M.alive(pid) then return end
    helpers.run("sleep 0.05")
  end
  helpers.run("kill -9 " .. pid)
end

--- Starts the built-in bridge; returns the child's pid, or nil, exit code, stderr.
function M.start_builtin(port, sock)
  local code, _, err = helpers.run(M.bin() .. " " .. port .. " " .. helpers.shquote(sock))
  if code ~= 0 then return nil, code, err end
  return assert(M.listener_pid(port), "no listener after the bridge exited 0")
end

-- The first seed's bug: the unix side first, dialed once for all clients.
M.SOCAT_REVERSED_FMT = "socat UNIX-CONNECT:%s TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork"

--- Starts socat exactly as the seed's launch script does; returns its pid.
--- reversed: the arguments in the first seed's (broken) order.
function M.start_socat(port, sock, reversed)
  -- SOCAT_OPTS="-d -d" SOCAT_LOG=/tmp/socat.log: socat's own account, when debugging
  local opts = "socat " .. (os.getenv("SOCAT_OPTS") or "")
  local line = reversed
    and string.format(M.SOCAT_REVERSED_FMT:gsub("^socat", opts), helpers.shquote(sock), port)
    or string.format(M.SOCAT_FMT:gsub("^socat", opts), port, helpers.shquote(sock))
  local code, out = helpers.run(line
    .. " >" .. (os.getenv("SOCAT_LOG") or "/dev/null") .. " 2>&1 & echo $!")
  assert(code == 0)
  local pid = tonumber(out:match("%d+"))
  for _ = 1, 200 do
    if M.listener_pid(port) then return pid end
    helpers.run("sleep 0.02")
  end
  error("socat did not listen on " .. port)
end

--- An echo server on a unix socket in a process of its own (for tests whose
--- client runs while this process waits in os.execute); returns its pid.
function M.start_echo_process(sock)
  local code, out = helpers.run("socat UNIX-LISTEN:" .. helpers.shquote(sock)
    .. ",fork EXEC:cat >/dev/null 2>&1 & echo $!")
  assert(code == 0)
  for _ = 1, 200 do
    if helpers.run("test -S " .. helpers.shquote(sock)) == 0 then
      return tonumber(out:match("%d+"))
    end
    helpers.run("sleep 0.02")
  end
  error("echo server did not start on " .. sock)
end

-- burst: clients at once it takes without a reset (socat: its backlog).
-- answers_refusal: the upstream's answer to a request it closed on unread
-- reaches the client (socat loses it now and then: it ends both sides on
-- the first write error).
M.bridges = {
  { name = "isolation-bridge", start = M.start_builtin, burst = 32, answers_refusal = true },
  { name = "socat (seed order)", start = M.start_socat, burst = 5, answers_refusal = false },
}

--- Runs the loop until done() is true or `seconds` passed; returns done().
function M.run_until(done, seconds)
  local timer = uv.new_timer()
  local expired = false
  -- the loop's clock stops while a spec blocks (io.popen, os.execute): a
  -- timer armed on a stale clock would expire at the first run
  uv.update_time()
  timer:start(math.floor((seconds or 10) * 1000), 0, function() expired = true end)
  while not callback_error and not done() and not expired do
    uv.run("once")
  end
  timer:close()
  uv.run("nowait")
  if callback_error then
    local err = callback_error
    callback_error = nil
    error("in a luv callback: " .. err, 2)
  end
  return done()
end

--- A unix-socket server on path; on_conn(client, index) per connection.
--- Returns the server and a table with `count` (connections accepted).
function M.unix_server(path, on_conn)
  os.remove(path)
  local server = uv.new_pipe(false)
  assert(server:bind(path))
  local stats = { count = 0 }
  assert(server:listen(128, function(err)
    assert(not err, err)
    local c = uv.new_pipe(false)
    server:accept(c)
    stats.count = stats.count + 1
    on_conn(c, stats.count)
  end))
  return server, stats
end

--- Echo handler: every byte back; ends its write side at end of stream,
--- closes at once on an error (a shutdown would never call back).
function M.echo(c)
  c:read_start(function(err, data)
    if data then
      c:write(data)
      return
    end
    c:read_stop()
    if err or not c:shutdown(function() c:close() end) then
      if not c:is_closing() then c:close() end
    end
  end)
end

--- Connects to 127.0.0.1:port; returns a record that collects what arrives
--- (`data`, `eof`, `err`, `connected`).
function M.client(port, on_connect)
  local rec = { chunks = {}, eof = false, connected = false }
  local t = uv.new_tcp()
  rec.handle = t
  t:connect("127.0.0.1", port, function(err)
    if err then
      rec.err = err
      rec.eof = true
      t:close()
      return
    end
    rec.connected = true
    t:read_start(function(rerr, data)
      if rerr then rec.err = rerr end
      if rerr or not data then
        rec.eof = true
        t:read_stop()
      else
        rec.chunks[#rec.chunks + 1] = data
      end
    end)
    if on_connect then on_connect(t, rec) end
  end)
  function rec.data() return table.concat(rec.chunks) end
  function rec.close()
    if not t:is_closing() then t:close() end
  end
  return rec
end

--- n deterministic pseudo-random bytes (seeded), for byte-exact checks.
function M.bytes(n, seed)
  local parts = {}
  local x = seed or 1
  for i = 1, n // 8 do
    x = (x * 6364136223846793005 + 1442695040888963407) & 0xffffffffffffffff
    parts[i] = string.pack("<i8", x)
  end
  local s = table.concat(parts)
  return s .. string.rep("x", n - #s)
end

return M
