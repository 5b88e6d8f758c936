-- Proxies whose lookups meet a name server that never answers, run inside
-- spec/support/dns_netns.sh (a network namespace with its own resolv.conf,
-- hosts and nsswitch.conf): lua5.4 dns_child.lua SCENARIO
-- The name server is dns_stub.lua in this process: ok.example.com and
-- dns-only.example.net get 127.0.0.1, both.example.net 127.0.0.2, and every
-- other name no answer at all. Prints "key value" lines for the spec.
--   timeout  one lookup that hangs gets 504 dns_timeout, and the next
--            name is answered while it still hangs
--   bound    a proxy's lookups that hang hold its own resolver threads
--            only: its next lookup waits in its queue; another proxy's,
--            and names in /etc/hosts, do not wait; libuv's pool full of
--            lookups that hang delays none; close() waits for none
--   hosts    names the proxy answers from /etc/hosts (aliases, case, two
--            lines for a name) and those it asks the name server for; an
--            answer from /etc/hosts meets the private-address check
local uv = require("luv")
local isolation = require("isolation")
local upstream = require("support.upstream")
local W = require("support.proxy")

local scenario = arg[1]
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local stub = dofile(here .. "/dns_stub.lua")(uv, {
  ["ok.example.com"] = "127.0.0.1",
  ["dns-only.example.net"] = "127.0.0.1",
  ["both.example.net"] = "127.0.0.2",
})
local up = upstream.start()
local port = up.raw_port

local function out(k, v)
  io.stdout:write(k, " ", tostring(v), "\n")
  io.stdout:flush()
end

local function proxy(opts)
  opts.listen = "127.0.0.1:0"
  opts.allow = { "*.example.com", "*.example.net" }
  if opts.allow_private == nil then opts.allow_private = true end
  return assert(isolation.proxy(opts))
end

local function ms_since(t0) return string.format("%.0f", (uv.hrtime() - t0) / 1e6) end

-- A CONNECT answered by the proxy: its status and how long it took.
local function ask(p, host, timeout)
  local t0 = uv.hrtime()
  local c = W.connect(p:address())
  c:send("CONNECT " .. host .. ":" .. port .. " HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n")
  c:wait_for("\r\n\r\n", timeout or 10)
  local status = c:status()
  local ms = ms_since(t0)
  local pong = false
  if status == 200 then
    c:send("PING\n")
    pong = c:wait_for("PONG", 5)
  end
  c:close()
  return status, ms, pong
end

-- CONNECTs whose lookups hang, left waiting.
local function hang(p, names)
  local conns = {}
  for i, name in ipairs(names) do
    conns[i] = W.connect(p:address())
    conns[i]:send("CONNECT " .. name .. ":443 HTTP/1.1\r\nHost: " .. name .. "\r\n\r\n")
  end
  W.settle(0.2) -- their lookups have started
  return conns
end

local function last_code(p)
  local ev = p:events()
  return ev[#ev] and ev[#ev].code or "none"
end

-- The resolver threads of this process's proxies (named isolation-dns).
local function threads()
  local n, req = 0, assert(uv.fs_scandir("/proc/self/task"))
  while true do
    local tid = uv.fs_scandir_next(req)
    if not tid then break end
    local f = io.open("/proc/self/task/" .. tid .. "/comm")
    if f and f:read("l") == "isolation-dns" then n = n + 1 end
    if f then f:close() end
  end
  return n
end

if scenario == "timeout" then
  local p = proxy({ dns_timeout = 0.5 })
  local status, ms = ask(p, "hang1.example.com")
  out("hang_status", status)
  out("hang_ms", ms)
  out("hang_code", last_code(p))
  local ok_status, ok_ms, pong = ask(p, "ok.example.com")
  out("after_status", ok_status)
  out("after_ms", ok_ms)
  out("after_pong", pong)
  p:close()
elseif scenario == "bound" then
  local a, b = proxy({ dns_timeout = 1 }), proxy({ dns_timeout = 1 })
  -- libuv's pool: lookups of this process's own that hang (3 s) take
  -- every thread it lets getaddrinfo have; the proxies do not use it
  local size, finished = tonumber(os.getenv("UV_THREADPOOL_SIZE") or "4"), 0
  for i = 1, size do
    uv.getaddrinfo("pool" .. i .. ".example.com", nil, { socktype = "stream" }, function() finished = finished + 1 end)
  end
  W.settle(0.2)
  local s, ms = ask(b, "ok.example.com")
  out("pool_busy_status", s)
  out("pool_busy_ms", ms)
  out("pool_busy_finished", finished)
  -- A: five lookups that hang (resolv.conf: timeout:3 attempts:1): four
  -- hold its four resolver threads, the fifth waits
  local t_before = threads()
  local t0 = uv.hrtime()
  local held = hang(a, { "h1.example.com", "h2.example.com", "h3.example.com", "h4.example.com",
    "h5.example.com" })
  out("threads_added_a", threads() - t_before)
  -- B's lookup, and A's name in /etc/hosts, do not wait for them
  s, ms = ask(b, "ok.example.com")
  out("b_status", s)
  out("b_ms", ms)
  s, ms = ask(a, "b.example.net")
  out("a_hosts_status", s)
  out("a_hosts_ms", ms)
  -- a proxy on luv's loop (luv mode) gets its answers there too
  local l = proxy({ dns_timeout = 1, loop = uv })
  s, ms = ask(l, "ok.example.com")
  out("luv_status", s)
  out("luv_ms", ms)
  l:close()
  -- A's next lookup waits in A's queue: 504 after dns_timeout
  s, ms = ask(a, "ok.example.com")
  out("a_queued_status", s)
  out("a_queued_ms", ms)
  out("a_queued_code", last_code(a))
  out("a_queued_at_ms", ms_since(t0))
  -- once the hanging lookups give up, A's threads look names up again
  W.run_until(function() return (uv.hrtime() - t0) / 1e9 > 3.5 end, 5)
  s, ms = ask(a, "ok.example.com")
  out("a_after_status", s)
  out("a_after_ms", ms)
  for _, c in ipairs(held) do c:close() end
  -- close() returns at once while lookups hang; their threads end after
  W.settle(0.3)
  held = hang(a, { "h6.example.com", "h7.example.com" })
  local tc = uv.hrtime()
  a:close()
  b:close()
  out("close_ms", ms_since(tc))
  for _, c in ipairs(held) do c:close() end
  local deadline = uv.hrtime() + 8e9
  while threads() > 0 and uv.hrtime() < deadline do W.settle(0.05) end
  out("threads_left", threads())
  out("threads_gone_ms", ms_since(tc))
  W.run_until(function() return finished == size end, 5)
elseif scenario == "hosts" then
  local p = proxy({ dns_timeout = 0.5 })
  for _, name in ipairs({ "alias.example.net", "two.example.net", "both.example.net", "dns-only.example.net",
    "gone.example.net" }) do
    local s, ms, pong = ask(p, name)
    W.settle(0.1) -- the tunnel's event comes when it ends
    local ev = p:events()
    local e = ev[#ev] or {}
    out(name, string.format("%s %s %s %s", tostring(s), tostring(pong), e.code or "none",
      (e.reason or ""):match("tunnel to (%S+)") or "-"))
    out(name .. "_ms", ms)
  end
  out("dns_answered", stub.answered)
  p:close()
  -- an answer from /etc/hosts meets the same address check as any other
  local strict = proxy({ allow_private = false })
  local s = ask(strict, "alias.example.net")
  out("strict_status", s)
  out("strict_code", last_code(strict))
  strict:close()
else
  error("unknown scenario " .. tostring(scenario))
end
stub.close()
up:stop()
out("end", "ok")
os.exit(0)
