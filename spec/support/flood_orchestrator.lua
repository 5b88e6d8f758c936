-- An orchestrator with two session proxies, A and B, on the module's one
-- background loop, while an agent (flood_client.lua, a process of its
-- own) floods A: lua5.4 flood_orchestrator.lua DIR MODE COUNT [MAXCONN]
-- B makes CONNECT+echo exchanges throughout; the results are printed as
-- "key value" lines. NOFILE: this process's RLIMIT_NOFILE (soft and
-- hard), lowered once the agent is started (the agent keeps its own).
-- Environment: FLOOD_B_N B's exchanges under load (30), FLOOD_B_GAP_MS the
-- pause between them (20), FLOOD_HOLD_S how long the agent floods (8),
-- FLOOD_SHARE=1 B on A's loop thread (fillers take the pool's other loops
-- first), FLOOD_COUNT_LOOPS=1 print the loop threads each proxy added.
-- MODE slowdns (run inside spec/support/dns_netns.sh): A's agent asks for
-- COUNT names a second under *.example.com, which this process's DNS stub
-- (dns_stub.lua) never answers; B's exchanges alternate between
-- b.example.net (in /etc/hosts) and b-dns.example.net (the stub answers).
local uv = require("luv")
-- B's client may write to a connection its proxy has just closed (the
-- emfile run: libuv's reserve descriptor accepts and closes): EPIPE for
-- that write, not a SIGPIPE that ends this process.
local sigpipe = uv.new_signal()
sigpipe:start("sigpipe", function() end)
sigpipe:unref()

local dir, mode, count = arg[1], arg[2], tonumber(arg[3])
local maxconn, limit = tonumber(arg[4]) or 256, arg[5]
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."

local flood_mode = ({ fds = "silent", memory = "heads", bulk = "bulk", pipe = "pipe", emfile = "silent",
  slowdns = "slowdns" })[mode]
local child_in, child_out = uv.new_pipe(false), uv.new_pipe(false)
local b_n, b_gap = tonumber(os.getenv("FLOOD_B_N")) or 30, tonumber(os.getenv("FLOOD_B_GAP_MS")) or 20
local hold = os.getenv("FLOOD_HOLD_S") or "8"
local child_args = { here .. "/flood_client.lua", dir .. "/a.sock", flood_mode, tostring(count), hold }
local child = uv.spawn("lua5.4", { args = child_args,
  stdio = { child_in, child_out, 2 } }, function() end)
if limit then
  assert(os.execute("prlimit --pid " .. math.tointeger(uv.os_getpid()) .. " --nofile=" .. limit .. ":" .. limit))
end
local isolation = require("isolation")

local function out(k, v)
  io.stdout:write(k, " ", tostring(v), "\n")
  io.stdout:flush()
end

local function rss_kib()
  local ok, lines = pcall(io.lines, "/proc/self/status")
  if not ok then return -1 end
  for line in lines do
    local v = line:match("^VmRSS:%s*(%d+)")
    if v then return tonumber(v) end
  end
end

local function nofile()
  local f = io.open("/proc/self/limits")
  if not f then return -1 end
  local s = f:read("a")
  f:close()
  return s:match("Max open files%s+(%d+)")
end

-- B's upstream: an echo server.
local echo = uv.new_tcp()
assert(echo:bind("127.0.0.1", 0))
assert(echo:listen(128, function()
  local c = uv.new_tcp()
  echo:accept(c)
  c:read_start(function(err, data)
    if err or not data then c:close() return end
    c:write(data)
  end)
end))
local echo_port = echo:getsockname().port

-- Threads of this process (the proxies' loop threads among them).
local function threads()
  local n, req = 0, assert(uv.fs_scandir("/proc/self/task"))
  while uv.fs_scandir_next(req) do n = n + 1 end
  return n
end

-- slowdns: the namespace's name server, and B's names.
local stub, b_hosts, b_extra = nil, { "127.0.0.1" }, {}
if mode == "slowdns" then
  stub = dofile(here .. "/dns_stub.lua")(uv, { ["b-dns.example.net"] = "127.0.0.1" })
  b_hosts = { "b.example.net", "b-dns.example.net" }
  -- names that resolve to loopback; a B that waits for the pool (before)
  -- fails each exchange in 1 s rather than 5
  b_extra = { allow_private = true, dns_timeout = 1 }
end

local t_before = threads()
local a = assert(isolation.proxy({ allow = { mode == "slowdns" and "*.example.com" or "127.0.0.1" },
  unix = dir .. "/a.sock", max_connections = maxconn }))
local t_a = threads()
-- B shares A's loop: every other loop of the pool gets a filler first
-- (a new proxy joins the loop with the fewest, the earliest of equals).
local fillers = {}
if os.getenv("FLOOD_SHARE") == "1" then
  for i = 1, 8 do
    local t0 = threads()
    fillers[i] = assert(isolation.proxy({ allow = {}, unix = dir .. "/f" .. i .. ".sock" }))
    if threads() == t0 then break end -- the pool is full: this one shares a loop
  end
  -- The last filler joined A's loop: move it out of B's way.
  fillers[#fillers]:close()
  fillers[#fillers] = nil
end
local t_fill = threads()
local b_opts = { allow = b_hosts, unix = dir .. "/b.sock", max_connections = 256 }
for k, v in pairs(b_extra) do b_opts[k] = v end
local b = assert(isolation.proxy(b_opts))
out("loops_a", t_a - t_before)
out("loops_b", threads() - t_fill)
out("nofile", nofile())
out("rss_start", rss_kib())

-- One CONNECT+echo through B (to B's next name); calls done(ok, ms).
local b_turn = 0
local function exchange(done)
  b_turn = b_turn + 1
  local host = b_hosts[(b_turn - 1) % #b_hosts + 1]
  local c = uv.new_pipe(false)
  local t0 = uv.hrtime()
  local got, stage = "", 0
  local timer = uv.new_timer()
  local function finish(ok)
    if stage == 9 then return end
    stage = 9
    timer:close()
    if not c:is_closing() then c:close() end
    done(ok, (uv.hrtime() - t0) / 1e6)
  end
  timer:start(5000, 0, function() finish(false) end)
  c:connect(dir .. "/b.sock", function(err)
    if err then return finish(false) end
    c:read_start(function(rerr, data)
      if rerr or not data then return finish(false) end
      got = got .. data
      if stage == 0 and got:find("\r\n\r\n", 1, true) then
        if not got:find("^HTTP/1.1 200") then return finish(false) end
        stage, got = 1, ""
        c:write("ping")
      elseif stage == 1 and got == "ping" then
        finish(true)
      end
    end)
    c:write("CONNECT " .. host .. ":" .. echo_port .. " HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n")
  end)
end

local function b_series(n, done, gap)
  local ok, times = 0, {}
  local function step(i)
    if i > n then return done(ok, times) end
    exchange(function(good, ms)
      if good then ok = ok + 1 end
      times[#times + 1] = ms
      local t = uv.new_timer()
      t:start(gap or b_gap, 0, function() t:close() step(i + 1) end)
    end)
  end
  step(1)
end

local function stats(times)
  table.sort(times)
  return times[math.max(1, math.floor(#times / 2))] or -1, times[#times] or -1
end

local done_seen = false -- the agent's flood has ended (it said "done")

local function finish()
  local too_many, codes = 0, {}
  for _, e in ipairs(a:events()) do
    if e.code == "too_many" then too_many = too_many + 1 end
    codes[e.code] = (codes[e.code] or 0) + 1
  end
  local list = {}
  for k, v in pairs(codes) do list[#list + 1] = k .. ":" .. v end
  table.sort(list)
  out("a_codes", table.concat(list, ","))
  out("a_too_many_events", too_many)
  out("b_events_error", b:stats().errors)
  local b_codes, b_list = {}, {}
  for _, e in ipairs(b:events()) do b_codes[e.code] = (b_codes[e.code] or 0) + 1 end
  for k, v in pairs(b_codes) do b_list[#b_list + 1] = k .. ":" .. v end
  table.sort(b_list)
  out("b_codes", table.concat(b_list, ","))
  if stub then
    out("dns_answered", stub.answered)
    out("dns_ignored", stub.ignored)
    stub.close()
  end
  local f = io.open("/dev/null")
  out("io_open", f and "ok" or "failed")
  if f then f:close() end
  local c, cerr = isolation.proxy({ allow = {}, unix = dir .. "/c.sock" })
  out("new_proxy", c and "ok" or tostring(cerr))
  if c then c:close() end
  for _, filler in ipairs(fillers) do filler:close() end
  child:kill("sigterm")
  child_in:close()
  a:close()
  -- The flood has ended: the connections are gone and their memory freed.
  local t = uv.new_timer()
  t:start(500, 0, function()
    t:close()
    out("rss_after", rss_kib())
    b:close()
    echo:close()
    sigpipe:close()
    uv.stop()
  end)
end

local function cpu_ticks()
  local f = assert(io.open("/proc/self/stat"))
  local st = f:read("a")
  f:close()
  local fields = {}
  for w in st:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = w end
  return tonumber(fields[12]) + tonumber(fields[13])
end

-- The process itself runs out of descriptors (the orchestrator's own
-- files): B's clients are closed unanswered, the loop must not spin, and
-- B works again once files are closed.
local function emfile_run()
  local ticks0, t0 = cpu_ticks(), uv.hrtime()
  local files = {}
  while true do
    local f = io.open("/dev/null")
    if not f then break end
    files[#files + 1] = f
  end
  files[#files]:close() -- room for B's client socket, none for the accept
  files[#files] = nil
  exchange(function(ok1)
    local t = uv.new_timer()
    t:start(1000, 0, function()
      t:close()
      for _, f in ipairs(files) do f:close() end
      local ticks1, wall = cpu_ticks(), (uv.hrtime() - t0) / 1e9
      out("emfile_exchange", ok1 and "ok" or "failed")
      out("emfile_cpu_s", string.format("%.2f", (ticks1 - ticks0) / 100))
      out("emfile_wall_s", string.format("%.2f", wall))
      exchange(function(ok2)
        out("emfile_after", ok2 and "ok" or "failed")
        finish()
      end)
    end)
  end)
end

b_series(os.getenv("FLOOD_B_N") and b_n or 5, function(ok, times)
  local p50, max = stats(times)
  out("quiet_ok", ok)
  out("quiet_p50_ms", string.format("%.2f", p50))
  out("quiet_max_ms", string.format("%.2f", max))
  if mode == "emfile" then return emfile_run() end
  child_in:write("go\n")
  local buf = ""
  child_out:read_start(function(err, data)
    if err or not data then child_out:close() return end
    buf = buf .. data
    if buf:find("done ") then done_seen = true end
    local open, refused, closed = buf:match("held (%d+) (%d+) (%d+)\n")
    if open then
      buf = ""
      out("a_open", open)
      out("a_refused", refused)
      out("a_closed", closed)
      out("rss_flood", rss_kib())
      local st0, t0 = a:stats(), uv.hrtime()
      b_series(b_n, function(bok, btimes)
        local st1 = a:stats()
        local moved = st1.bytes_up + st1.bytes_down - st0.bytes_up - st0.bytes_down
        local secs = (uv.hrtime() - t0) / 1e9
        out("b_seconds", string.format("%.2f", secs))
        out("a_mb_per_s", string.format("%.0f", moved / secs / 1e6))
        out("a_requests", st1.connections - st0.connections + st1.allowed - st0.allowed)
        out("a_still", done_seen and "no" or "yes")
        local bp50, bmax = stats(btimes)
        out("b_ok", bok)
        out("b_p50_ms", string.format("%.2f", bp50))
        out("b_max_ms", string.format("%.2f", bmax))
        finish()
      end)
    end
  end)
end)
uv.run()
