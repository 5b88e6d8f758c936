-- The egress proxy in thread mode: real sockets, the real background
-- thread, a real upstream in a child process (support.upstream).
local isolation = require("isolation")
local helpers = require("helpers")
local upstream = require("support.upstream")
local W = require("support.proxy")

local MiB = 1024 * 1024
local function uv_now() local uv = require("luv"); uv.update_time(); return uv.now() end

describe("isolation.proxy (thread mode)", function()
  local up, p

  setup(function()
    up = upstream.start()
  end)

  teardown(function()
    up:stop()
  end)

  before_each(function()
    local err
    p, err = isolation.proxy({
      allow = { "up.example.com", "other.example.com:" .. up.http_port },
      listen = "127.0.0.1:0",
      resolve = { ["up.example.com"] = { "127.0.0.1" }, ["other.example.com"] = { "127.0.0.1" },
        ["denied.example.com"] = { "127.0.0.1" } },
      allow_private = true,
    })
    assert.is_truthy(p, err)
  end)

  after_each(function()
    if p then p:close() end
  end)

  local function raw_target() return "up.example.com:" .. up.raw_port end
  local function http_url(path, host) return "http://" .. (host or "up.example.com") .. ":" .. up.http_port .. path end

  it("relays 1 MiB each way through an allowed CONNECT, byte for byte", function()
    local c = W.tunnel(p:address(), raw_target(), "ECHO\n")
    assert.matches("^HTTP/1.1 200 Connection established\r\n\r\n$", c.head)
    local payload = W.pattern(7, MiB)
    c:send(payload)
    assert.is_true(c:wait(function(x) return #x.data >= MiB end, 20), "echoed " .. #c.data)
    assert.are.equal(payload, c.data)
    c:close()

    local d = W.tunnel(p:address(), raw_target(), "SRC " .. MiB .. "\n")
    assert.is_true(d:wait_eof(20))
    assert.are.equal(MiB, #d.data)
    assert.are.equal(W.pattern(0, MiB), d.data)
    d:close()
    local st = p:stats()
    assert.is_true(st.bytes_up >= MiB)
    assert.is_true(st.bytes_down >= 2 * MiB)
    assert.are.equal(2, st.allowed)
  end)

  it("passes a half-close on and keeps relaying the other way", function()
    local c = W.tunnel(p:address(), raw_target())
    c:send("ECHO\nabc")
    assert.is_true(c:wait_for("abc"))
    c:shutdown()
    -- the upstream sees our end, echoes what is left, then ends its side
    assert.is_true(c:wait_eof(5))
    assert.are.equal("abc", c.data)
    c:close()
  end)

  it("relays bytes sent behind the CONNECT head, and an end sent before the tunnel is up", function()
    local c = W.connect(p:address())
    c:send("CONNECT " .. raw_target() .. " HTTP/1.1\r\nHost: " .. raw_target() .. "\r\n\r\nECHO\nearly bytes")
    c:shutdown()
    assert.is_true(c:wait_eof(5))
    assert.are.equal("HTTP/1.1 200 Connection established\r\n\r\nearly bytes", c.data)
    c:close()
  end)

  it("keeps the downstream open after the client's half-close", function()
    local c = W.tunnel(p:address(), raw_target())
    c:send("SRC 300000\n")
    c:shutdown()
    assert.is_true(c:wait_eof(10))
    assert.are.equal(300000, #c.data)
    c:close()
  end)

  it("answers a denied CONNECT with 403 naming the host, and never reaches upstream", function()
    local before = up:stats().accepts
    local c = W.exchange(p:address(), "CONNECT denied.example.com:" .. up.raw_port
      .. " HTTP/1.1\r\nHost: denied.example.com:" .. up.raw_port .. "\r\n\r\nECHO\nleak")
    assert.are.equal(403, c:status())
    assert.matches("Connection: close", c.data)
    assert.matches("denied%.example%.com", c.data:match("\r\n\r\n(.*)$"))
    W.settle(0.2)
    assert.are.equal(before, up:stats().accepts)
    local ev = p:events()
    assert.are.equal(1, #ev)
    assert.are.same({ type = "deny", code = "not_allowed", method = "CONNECT", host = "denied.example.com",
      port = up.raw_port, status = 403, reason = ev[1].reason, bytes_up = 0, bytes_down = 0,
      duration = ev[1].duration }, ev[1])
    assert.is_true(ev[1].duration >= 0 and ev[1].duration < 1)
    assert.are.equal(1, p:stats().denied)
  end)

  it("closes after a denied CONNECT at once, and bytes sent late do not destroy the 403", function()
    local c = W.connect(p:address())
    c:pause()
    c:send("CONNECT denied.example.com:" .. up.raw_port .. " HTTP/1.1\r\nHost: denied.example.com:"
      .. up.raw_port .. "\r\n\r\n")
    W.settle(0.2)
    assert.are.equal(0, p:stats().active) -- answered and closed: nothing to drain
    c:send("late bytes, after the proxy closed")
    W.settle(0.2)
    c:resume()
    assert.is_true(c:wait_eof(5))
    c:close()
    assert.are.equal(403, c:status())
    local len = tonumber(c.data:match("Content%-Length: (%d+)"))
    assert.are.equal(len, #c.data:match("\r\n\r\n(.*)$"))
    p:events()
  end)

  it("forwards GET, POST with Content-Length and chunked POST on one kept-alive connection", function()
    local accepts = up:stats().http_accepts
    local c = W.connect(p:address())
    c:send("GET " .. http_url("/small") .. " HTTP/1.1\r\nHost: up.example.com:" .. up.http_port
      .. "\r\nProxy-Connection: keep-alive\r\n\r\n")
    assert.is_true(c:wait(function(x) return #x.data >= 100 and x.data:find("\r\n\r\n") end))
    assert.are.equal(200, c:status())
    assert.is_true(c:wait(function(x) return #(x.data:match("\r\n\r\n(.*)$") or "") >= 100 end))
    c.data = ""
    c:send("POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: up.example.com:" .. up.http_port
      .. "\r\nContent-Length: 11\r\n\r\nhello world")
    assert.is_true(c:wait_for("hello world"))
    assert.are.equal(200, c:status())
    c.data = ""
    c:send("POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: up.example.com:" .. up.http_port
      .. "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n chunk\r\n0\r\n\r\n")
    assert.is_true(c:wait_for("hello chunk"))
    assert.matches("Content%-Length: 11", c.data)
    c.data = ""
    -- the request head upstream: origin form, Host from the URI, no Proxy-*
    c:send("GET " .. http_url("/headers") .. " HTTP/1.1\r\nHost: up.example.com:" .. up.http_port
      .. "\r\nProxy-Authorization: Basic c2VjcmV0\r\nX-Keep: 1\r\n\r\n")
    assert.is_true(c:wait_for("X-Keep: 1"))
    assert.matches("\r\n\r\nGET /headers HTTP/1%.1\r\n", c.data)
    assert.is_nil(c.data:lower():find("proxy%-authorization"))
    c:close()
    -- a request's event comes when it ends, just after its last byte: wait
    local events = {}
    local deadline = os.time() + 5
    repeat
      for _, e in ipairs(p:events()) do events[#events + 1] = e end
      if #events < 4 then os.execute("sleep 0.02") end
    until #events >= 4 or os.time() > deadline
    assert.are.equal(4, #events)
    for _, e in ipairs(events) do
      assert.are.equal("allow", e.type)
      assert.are.equal(200, e.status)
    end
    -- one upstream connection carried all four requests
    assert.is_true(up:wait(function(s) return s.http_accepts == accepts + 1 end, 2))
  end)

  it("sends an HTTP/1.0 client's request upstream as HTTP/1.0, so the answer is one it can read", function()
    local c = W.connect(p:address())
    c:send("GET " .. http_url("/headers") .. " HTTP/1.0\r\n\r\n")
    assert.is_true(c:wait_eof(10))
    assert.are.equal(200, c:status())
    assert.matches("\r\n\r\nGET /headers HTTP/1%.0\r\n", c.data)
    assert.is_nil(c.data:lower():match("^[^\r]*\r\n.-transfer%-encoding: chunked.-\r\n\r\n"))
    c:close()
  end)

  it("answers pipelined forward requests in order, a body and the next head in one write", function()
    local host = "up.example.com:" .. up.http_port
    local c = W.connect(p:address())
    c:send("POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: " .. host .. "\r\nContent-Length: 5\r\n\r\nfirst"
      .. "GET " .. http_url("/small") .. " HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n"
      .. "POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: " .. host
      .. "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\nlast\r\n0\r\n\r\n")
    assert.is_true(c:wait_eof(10))
    local bodies = {}
    for body in c.data:gmatch("\r\n\r\n([^H]*)") do bodies[#bodies + 1] = body end
    assert.are.same({ "first", string.rep("s", 99) .. "\n", "last" }, bodies)
    c:close()
  end)

  it("checks every request on a kept-alive connection: the second, to a denied host, gets 403", function()
    local c = W.connect(p:address())
    c:send("GET " .. http_url("/small") .. " HTTP/1.1\r\nHost: up.example.com:" .. up.http_port .. "\r\n\r\n")
    assert.is_true(c:wait_for("sssss\n"))
    assert.are.equal(200, c:status())
    c.data = ""
    local before = up:stats().requests
    c:send("GET " .. http_url("/small", "denied.example.com") .. " HTTP/1.1\r\nHost: denied.example.com:"
      .. up.http_port .. "\r\n\r\n")
    assert.is_true(c:wait_eof())
    assert.are.equal(403, c:status())
    assert.are.equal(before, up:stats().requests)
    c:close()
  end)

  it("applies set_allow to later requests, atomically", function()
    assert.are.equal(200, W.tunnel(p:address(), raw_target()).head:match(" (%d+) ") + 0)
    assert.is_true(p:set_allow({ "other.example.com" }))
    local c = W.exchange(p:address(), "CONNECT " .. raw_target() .. " HTTP/1.1\r\nHost: " .. raw_target() .. "\r\n\r\n")
    assert.are.equal(403, c:status())
    local d = W.tunnel(p:address(), "other.example.com:" .. up.raw_port)
    assert.matches("^HTTP/1.1 200", d.head)
    d:close()
    local ok, err = p:set_allow({ "http://bad.example.com" })
    assert.is_nil(ok)
    assert.matches("isolation:", err)
    -- the failed call changed nothing
    local e = W.tunnel(p:address(), "other.example.com:" .. up.raw_port)
    assert.matches("^HTTP/1.1 200", e.head)
    e:close()
  end)

  it("keeps a tunnel opened before set_allow working after it", function()
    local c = W.tunnel(p:address(), raw_target(), "ECHO\n")
    assert.is_true(p:set_allow({}))
    c:send("still here")
    assert.is_true(c:wait_for("still here"))
    c:close()
  end)

  it("serves curl, CONNECT (-p) and forward, while the Lua thread blocks", function()
    local base = "curl -sS -m 10 -x http://" .. p:address() .. " "
    local code, out = helpers.run(base .. http_url("/bytes/100000") .. " | wc -c")
    assert.are.equal(0, code)
    assert.are.equal("100000", out:match("%d+"))
    code, out = helpers.run(base .. "-p " .. http_url("/small"))
    assert.are.equal(0, code)
    assert.are.equal(string.rep("s", 99) .. "\n", out)
    code, out = helpers.run(base .. "-d posted " .. http_url("/echo"))
    assert.are.equal(0, code)
    assert.are.equal("posted", out)
    code, out = helpers.run(base .. "-o /dev/null -w '%{http_code}' " .. http_url("/small", "denied.example.com"))
    assert.are.equal("403", out)
    local _ = code
  end)

  it("ends every connection on close and leaves no fd behind", function()
    p:close()
    p = nil
    collectgarbage()
    W.settle(0.1)
    local before = W.fd_count()
    assert.is_true(before > 3)
    local q = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0",
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, allow_private = true }))
    local conns = {}
    for i = 1, 100 do
      conns[i] = W.tunnel(q:address(), raw_target(), "PING\n")
    end
    for i = 1, 100 do assert.is_true(conns[i]:wait_for("PONG")) end
    assert.are.equal(100, q:stats().active)
    q:close()
    for i = 1, 100 do
      assert.is_true(conns[i]:wait_eof(5), "tunnel " .. i .. " still open")
      conns[i]:close()
    end
    W.settle(0.1)
    assert.are.equal(before, W.fd_count())
    assert.is_true(up:wait(function(s) return s.open == 0 end, 5))
  end)

  for _, via in ipairs({ "TCP", "a unix socket" }) do
    it("ends a client that connected over " .. via .. " and has not spoken yet, at once on close", function()
      -- a client held by the kernel before the proxy sees it (an accept
      -- deferred until its first bytes) must not outlive close()
      local dir = via ~= "TCP" and helpers.tmpdir() or nil
      local q = assert(isolation.proxy({ allow = { "up.example.com" }, header_timeout = 30,
        listen = not dir and "127.0.0.1:0" or nil, unix = dir and dir .. "/p.sock" or nil }))
      local silent = {}
      for i = 1, 5 do silent[i] = W.connect(q:address()) end
      W.settle(0.2)
      local t0 = uv_now()
      q:close()
      for i = 1, 5 do
        assert.is_true(silent[i]:wait_eof(3), "silent client " .. i .. " still connected after close()")
        silent[i]:close()
      end
      local took = uv_now() - t0
      assert.is_true(took < 1000, "took " .. took .. " ms")
      if dir then helpers.rmtree(dir) end
    end)
  end

  it("gives a request's event even when the client leaves before the answer", function()
    local uv = require("luv")
    local silent = uv.new_tcp()
    assert(silent:bind("127.0.0.1", 0))
    local accepted = {}
    assert(silent:listen(16, function()
      local h = uv.new_tcp()
      silent:accept(h)
      accepted[#accepted + 1] = h
    end))
    local port = silent:getsockname().port
    local q = assert(isolation.proxy({ allow = { "127.0.0.1:" .. port }, listen = "127.0.0.1:0" }))
    local c = W.connect(q:address())
    c:send("GET http://127.0.0.1:" .. port .. "/ HTTP/1.1\r\nHost: 127.0.0.1:" .. port .. "\r\n\r\n")
    assert.is_true(W.run_until(function() return #accepted == 1 end, 5))
    c:close()
    assert.is_true(W.run_until(function() return q:stats().active == 0 end, 5))
    local ev = q:events()
    assert.are.equal(1, #ev)
    assert.are.same({ "error", "GET", "127.0.0.1", port, 499 }, { ev[1].type, ev[1].method, ev[1].host, ev[1].port,
      ev[1].status })
    q:close()
    for _, h in ipairs(accepted) do h:close() end
    silent:close()
    uv.run("nowait")
  end)

  it("serves a pipeline longer than a head may hold, in order, without losing a byte", function()
    local q = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0", allow_private = true,
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, max_header_bytes = 1024 }))
    local host = "up.example.com:" .. up.http_port
    local parts = {}
    for i = 1, 60 do
      parts[i] = "POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: " .. host .. "\r\nContent-Length: "
        .. #tostring(i) .. "\r\n\r\n" .. i
    end
    parts[#parts + 1] = "GET " .. http_url("/small") .. " HTTP/1.1\r\nHost: " .. host .. "\r\nConnection: close\r\n\r\n"
    local c = W.connect(q:address())
    c:send(table.concat(parts)) -- about 6 KiB at once
    assert.is_true(c:wait_eof(20))
    local bodies = {}
    for body in c.data:gmatch("\r\n\r\n([^H]*)") do bodies[#bodies + 1] = body end
    assert.are.equal(61, #bodies)
    for i = 1, 60 do assert.are.equal(tostring(i), bodies[i]) end
    c:close()
    q:close()
  end)

  it("answers, then ends, when one read brings a body's end and more than a head may hold", function()
    local q = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0", allow_private = true,
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, max_header_bytes = 1024 }))
    local host = "up.example.com:" .. up.http_port
    local c = W.connect(q:address())
    c:send("POST " .. http_url("/echo") .. " HTTP/1.1\r\nHost: " .. host .. "\r\nContent-Length: 10\r\n\r\n")
    W.settle(0.3) -- the head is upstream; the body is due
    local next_req = "GET " .. http_url("/small") .. " HTTP/1.1\r\nHost: " .. host .. "\r\n\r\n"
    c:send("0123456789" .. string.rep(next_req, 50))
    assert.is_true(c:wait_eof(10))
    local _, responses = c.data:gsub("HTTP/1%.1 200", "")
    assert.are.equal(1, responses)
    assert.matches("\r\n\r\n0123456789$", c.data)
    c:close()
    q:close()
  end)

  it("reports counters", function()
    W.tunnel(p:address(), raw_target()):close()
    W.exchange(p:address(), "CONNECT denied.example.com:1 HTTP/1.1\r\nHost: denied.example.com:1\r\n\r\n")
    W.settle(0.1)
    local s = p:stats()
    assert.are.equal(2, s.connections)
    assert.are.equal(1, s.allowed)
    assert.are.equal(1, s.denied)
    assert.are.equal(0, s.errors)
    assert.is_number(s.active)
    assert.is_number(s.bytes_up)
    assert.is_number(s.bytes_down)
  end)
end)

describe("isolation.proxy unix sockets", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function mode(path)
    local code, out = helpers.run("stat -c %a " .. helpers.shquote(path))
    assert.are.equal(0, code)
    return out:match("%d+")
  end

  it("listens on a 0600 socket, serves on it, and removes it on close", function()
    local path = dir .. "/p.sock"
    local p = assert(isolation.proxy({ allow = {}, unix = path }))
    assert.are.equal("unix:" .. path, p:address())
    assert.is_nil(p:port())
    assert.are.equal("600", mode(path))
    local c = W.exchange(p:address(), "CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\n\r\n")
    assert.are.equal(403, c:status())
    p:close()
    assert.is_nil(helpers.read(path))
    assert.are.equal(1, select(1, helpers.run("test -e " .. helpers.shquote(path))))
  end)

  it("replaces a stale socket file that nobody listens on", function()
    local path = dir .. "/stale.sock"
    W.stale_socket(path)
    assert.are.equal(0, (helpers.run("test -S " .. helpers.shquote(path))))
    local p, err = isolation.proxy({ allow = {}, unix = path })
    assert.is_truthy(p, err)
    assert.are.equal("600", mode(path))
    p:close()
  end)

  it("refuses a socket somebody listens on, and leaves it alone", function()
    local path = dir .. "/live.sock"
    local a = assert(isolation.proxy({ allow = {}, unix = path }))
    local b, err = isolation.proxy({ allow = {}, unix = path })
    assert.is_nil(b)
    assert.matches("in use", err)
    -- the first still serves
    local denied = "CONNECT x.example.com:1 HTTP/1.1\r\nHost: x.example.com:1\r\n\r\n"
    assert.are.equal(403, W.exchange(a:address(), denied):status())
    a:close()
  end)

  it("refuses a path that is not a socket, and does not touch it", function()
    local path = dir .. "/file"
    helpers.write(path, "precious")
    local p, err = isolation.proxy({ allow = {}, unix = path })
    assert.is_nil(p)
    assert.matches("not a socket", err)
    assert.are.equal("precious", helpers.read(path))
    assert.is_nil((isolation.proxy({ allow = {}, unix = dir })))
    assert.are.equal(0, (helpers.run("test -d " .. helpers.shquote(dir))))
  end)

  it("refuses a path too long for a unix address", function()
    local path = dir .. "/" .. string.rep("x", 120)
    local p, err = isolation.proxy({ allow = {}, unix = path })
    assert.is_nil(p)
    assert.matches("unix", err)
    assert.matches("107", err)
  end)

  -- For i = 1, N: waits for the socket file PREFIX-i.sock to appear and
  -- connects to it the moment it does, once; gives up when `stop` exists
  -- or 60 s pass; prints what it saw. Runs in its own process, beside
  -- the proxies.
  local WATCHER = [[
local uv = require("luv")
local prefix, n_files, stop = arg[1], tonumber(arg[2]), arg[3]
local n = { files = 0, ok = 0, refused = 0, other = 0 }
local deadline = uv.hrtime() + 60e9
local function try(path)
  local c = uv.new_pipe(false)
  local res
  c:connect(path, function(err) res = err or "ok" end)
  while res == nil do uv.run("once") end
  c:close()
  uv.run("nowait")
  return res
end
local i = 1
while i <= n_files and uv.hrtime() < deadline do
  local path = prefix .. "-" .. i .. ".sock"
  if uv.fs_lstat(path) then
    n.files = n.files + 1
    local r = try(path)
    if r == "ok" then n.ok = n.ok + 1
    elseif r:find("ECONNREFUSED", 1, true) then n.refused = n.refused + 1
    else n.other = n.other + 1 end
    i = i + 1
  elseif uv.fs_lstat(stop) then
    break
  end
end
io.write(string.format("files=%d ok=%d refused=%d other=%d\n", n.files, n.ok, n.refused, n.other))
]]

  it("shows its socket file only once it accepts: a watcher connecting the moment each file appears is never "
    .. "refused; the file is gone when close() returns", function()
      -- between bind() and listen() a file that exists refuses: a
      -- supervisor waiting for it would fail. Each proxy is closed only
      -- after it accepted the watcher's connection: a connect racing the
      -- close can be refused whatever the order (the kernel looks the name
      -- up before it checks that the socket listens; README, the proxy).
      local uv = require("luv")
      local cli = require("support.cli")
      local N, prefix, stop = 500, dir .. "/ready", dir .. "/stop"
      helpers.write(dir .. "/watcher.lua", WATCHER)
      local w = cli.spawn({ cli.LUA, dir .. "/watcher.lua", prefix, tostring(N), stop })
      W.settle(0.2)
      local unaccepted, left = 0, 0
      local opened, failure = pcall(function()
        for i = 1, N do
          local path = prefix .. "-" .. i .. ".sock"
          local q, err = isolation.proxy({ allow = {}, unix = path })
          assert(q, "proxy " .. i .. ": " .. tostring(err))
          local t0 = uv.hrtime()
          while q:stats().connections == 0 and uv.hrtime() - t0 < 5e9 do uv.sleep(1) end
          if q:stats().connections == 0 then unaccepted = unaccepted + 1 end
          q:close()
          if uv.fs_lstat(path) then left = left + 1 end
          if unaccepted > 0 then break end -- the watcher was refused (or is gone)
        end
      end)
      helpers.write(stop, "") -- the watcher ends, whatever happened
      assert.is_true(opened, tostring(failure))
      local status, out, err = w.wait(60)
      assert.are.equal(0, status, err)
      local files, ok, refused = out:match("^files=(%d+) ok=(%d+) refused=(%d+)")
      assert.is_truthy(files, out .. err)
      assert.are.equal("0", refused, out)
      assert.are.equal(tostring(N), files, out)
      assert.are.equal(tostring(N), ok, out)
      assert.are.equal(0, unaccepted, out)
      assert.are.equal(0, left, "a socket file was there after close() returned")
      -- no temporary name left behind
      local _, names = helpers.run("ls -A " .. helpers.shquote(dir))
      assert.are.equal("stop\nwatcher.lua\n", names)
    end)

  it("makes a socket at the longest path a unix address takes, with a one-byte name or a long one", function()
    for _, base in ipairs({ "s", string.rep("n", 40) }) do
      local sub = dir .. "/" .. string.rep("d", 107 - #dir - 2 - #base)
      assert.are.equal(0, (helpers.run("mkdir " .. helpers.shquote(sub))))
      local path = sub .. "/" .. base
      assert.are.equal(107, #path)
      local q, err = isolation.proxy({ allow = {}, unix = path })
      assert.is_truthy(q, err)
      assert.are.equal("600", mode(path))
      local c = W.exchange(q:address(), "CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\n\r\n")
      assert.are.equal(403, c:status())
      local _, names = helpers.run("ls -A " .. helpers.shquote(sub))
      assert.are.equal(base .. "\n", names)
      q:close()
      _, names = helpers.run("ls -A " .. helpers.shquote(sub))
      assert.are.equal("", names)
    end
  end)

  it("leaves nothing in the directory when it refuses", function()
    local live = dir .. "/live.sock"
    local a = assert(isolation.proxy({ allow = {}, unix = live }))
    assert.is_nil((isolation.proxy({ allow = {}, unix = live })))
    helpers.write(dir .. "/file", "keep")
    assert.is_nil((isolation.proxy({ allow = {}, unix = dir .. "/file" })))
    assert.is_nil((isolation.proxy({ allow = {}, unix = dir .. "/missing/p.sock" })))
    local _, names = helpers.run("ls -A " .. helpers.shquote(dir))
    assert.are.equal("file\nlive.sock\n", names)
    a:close()
  end)

  it("does not remove a socket file that replaced its own", function()
    local path = dir .. "/swap.sock"
    local p = assert(isolation.proxy({ allow = {}, unix = path }))
    os.remove(path)
    W.stale_socket(path)
    p:close()
    assert.are.equal(0, (helpers.run("test -S " .. helpers.shquote(path))))
  end)
end)

describe("isolation.proxy options and lifetime", function()
  local function bad(opts, field)
    local p, err = isolation.proxy(opts)
    assert.is_nil(p)
    assert.is_string(err)
    assert.matches("^isolation: ", err)
    assert.truthy(err:find(field, 1, true), "message does not name " .. field .. ": " .. err)
  end

  it("returns nil, err naming the option for bad options", function()
    bad({ allow = {}, listen = "127.0.0.1:0", colour = "red" }, "colour")
    bad({ listen = "127.0.0.1:0" }, "allow")
    bad({ allow = { "http://x.example.com/" }, listen = "127.0.0.1:0" }, "allow")
    bad({ allow = {} }, "unix")
    bad({ allow = {}, listen = "127.0.0.1:0", unix = "/tmp/x.sock" }, "listen")
    bad({ allow = {}, listen = "0.0.0.0:0" }, "listen")
    bad({ allow = {}, listen = "10.0.0.1:0" }, "listen")
    bad({ allow = {}, listen = "localhost:0" }, "listen")
    bad({ allow = {}, listen = "127.0.0.1:70000" }, "listen")
    bad({ allow = {}, listen = "127.0.0.1:0", header_timeout = 0 }, "header_timeout")
    bad({ allow = {}, listen = "127.0.0.1:0", header_timeout = 31 }, "header_timeout")
    bad({ allow = {}, listen = "127.0.0.1:0", connect_timeout = "5" }, "connect_timeout")
    bad({ allow = {}, listen = "127.0.0.1:0", dns_timeout = -1 }, "dns_timeout")
    bad({ allow = {}, listen = "127.0.0.1:0", idle_timeout = 0 / 0 }, "idle_timeout")
    bad({ allow = {}, listen = "127.0.0.1:0", max_header_bytes = 65537 }, "max_header_bytes")
    bad({ allow = {}, listen = "127.0.0.1:0", max_header_bytes = 1.5 }, "max_header_bytes")
    bad({ allow = {}, listen = "127.0.0.1:0", max_connections = 0 }, "max_connections")
    bad({ allow = {}, listen = "127.0.0.1:0", sni = "strict" }, "sni")
    bad({ allow = {}, listen = "127.0.0.1:0", allow_private = "yes" }, "allow_private")
    bad({ allow = {}, listen = "127.0.0.1:0", resolve = { ["a.example.com"] = { "127.1" } } }, "resolve")
    bad({ allow = {}, listen = "127.0.0.1:0", resolve = { ["a.example.com"] = "127.0.0.1" } }, "resolve")
    bad({ allow = {}, listen = "127.0.0.1:0", loop = {} }, "loop")
    bad({ allow = {}, listen = "127.0.0.1:0", on_event = print }, "on_event")
    assert.has_error(function() isolation.proxy() end)
    assert.has_error(function() isolation.proxy("127.0.0.1:0") end)
  end)

  it("says in each refusal which option was wrong, what it held and what is accepted", function()
    local uv = require("luv")
    local L = "127.0.0.1:0"
    local many = {}
    for i = 1, 17 do many[i] = "127.0.0." .. i end
    local cases = {
      { { on_event = "x" }, 'on_event must be a function (got "x")' },
      { { loop = uv, on_event = 5 }, "on_event must be a function (got number 5)" },
      { { loop = {} }, "loop must be the luv module table (this one has no new_poll or new_timer) (got table)" },
      { { loop = "luv" }, 'loop must be the luv module table (got "luv")' },
      { { resolve = { ["a.example.com"] = {} } },
        'resolve["a.example.com"] must be an array of 1 to 16 IP addresses (got an empty table)' },
      { { resolve = { ["a.example.com"] = "127.0.0.1" } },
        'resolve["a.example.com"] must be an array of 1 to 16 IP addresses (got "127.0.0.1")' },
      { { resolve = { ["a.example.com"] = many } },
        'resolve["a.example.com"] must be an array of 1 to 16 IP addresses (got an array of 17)' },
      { { resolve = { ["a.example.com"] = { "127.1" } } },
        'resolve["a.example.com"] must hold IP addresses (got "127.1")' },
      { { resolve = { ["a.example.com"] = { 7 } } }, 'resolve["a.example.com"] must hold IP addresses (got number 7)' },
      { { resolve = { ["-bad-"] = { "127.0.0.1" } } }, 'resolve keys must be host names (got "-bad-")' },
      { { resolve = "a.example.com" }, 'resolve must be a table of name -> {address, ...} (got "a.example.com")' },
      { { sni = "strict" }, 'sni must be "match" or "off" (got "strict")' },
      { { sni = true }, 'sni must be "match" or "off" (got true)' },
      { { allow_private = "yes" }, 'allow_private must be a boolean (got "yes")' },
      { { header_timeout = "5" }, 'header_timeout must be a number of seconds above 0 and at most 30 (got "5")' },
      { { header_timeout = 31 }, "header_timeout must be a number of seconds above 0 and at most 30 (got number 31)" },
      { { max_connections = 1.5 }, "max_connections must be an integer from 1 to 1000000 (got number 1.5)" },
      { { allow = "x.example.com" }, 'allow must be an array of host patterns (got "x.example.com")' },
      { { allow = { "x.example.com", 443 } }, "allow[2] must be a string (got number 443)" },
      { { listen = false, unix = 5 }, "unix must be a path string (got number 5)" },
    }
    for _, case in ipairs(cases) do
      local opts = { allow = {}, listen = L }
      for k, v in pairs(case[1]) do opts[k] = v end
      if opts.listen == false then opts.listen = nil end
      local p, err = isolation.proxy(opts)
      assert.is_nil(p)
      assert.truthy(err:find("isolation: " .. case[2], 1, true), "expected: " .. case[2] .. "\n got: " .. err)
    end
    -- a wrong Lua type raises, naming the method and what it accepts,
    -- however it is called
    local p = assert(isolation.proxy({ allow = {}, listen = L }))
    local as_method = { pcall(function() p:set_allow("x") end) }
    local as_function = { pcall(p.set_allow, p, "x") }
    for _, r in ipairs({ as_method, as_function }) do
      local ok, err = r[1], r[2]
      assert.is_false(ok)
      assert.truthy(err:find("set_allow", 1, true), err)
      assert.truthy(err:find("patterns must be an array of host patterns", 1, true), err)
      assert.truthy(err:find('(got "x")', 1, true), err)
    end
    p:close()
  end)

  it("accepts listen only as exactly 127.0.0.1:PORT or [::1]:PORT, PORT canonical decimal", function()
    local uv = require("luv")
    local free = W.closed_port()
    local refused = {
      "127.0.0.2:0", "127.255.255.254:0", "127.1.2.3:" .. free, -- other loopback addresses
      "127.0.0.1:0" .. free, "127.0.0.1:00", "127.0.0.1:00000", -- leading zeros
      "127.0.0.1:+" .. free, "127.0.0.1:-1", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:",
      "127.0.0.1", "[::1]", ":0", "127.0.0.1:0 ", " 127.0.0.1:0", "127.0.0.1 :0", "127.0.0.1:0:0",
      "127.0.0.1:0x50", "127.0.0.1:1e3", "127.0.0.1.:0", "127.000.000.001:0", -- a NUL: spec/nul_spec.lua
      "[0:0:0:0:0:0:0:1]:0", "[::0001]:0", "[0::1]:0", "[::ffff:127.0.0.1]:0", "::1:0", "[::1]:0" .. free,
      "[::1]:65536", "localhost:0", "0.0.0.0:0",
    }
    for _, spec in ipairs(refused) do
      local fds, threads = W.fd_count(), helpers.settled_thread_count()
      local p, err = isolation.proxy({ allow = {}, listen = spec })
      assert.is_nil(p, spec .. " was accepted")
      assert.is_string(err)
      local shown = spec:gsub("%z", "\\x00")
      assert.truthy(err:find("^isolation: listen must be \"127%.0%.0%.1:PORT\" or \"%[::1%]:PORT\""),
        "message does not say what is accepted: " .. err)
      assert.truthy(err:find("0 to 65535", 1, true), "message does not give the port's range: " .. err)
      assert.truthy(err:find('(got "' .. shown .. '")', 1, true), "message does not quote " .. spec .. ": " .. err)
      assert.are.equal(fds, W.fd_count(), spec .. " left a descriptor open")
      -- no more than before: one joined earlier may have gone meanwhile
      assert.is_true(helpers.wait_for(function() return helpers.thread_count() <= threads end, 5),
        spec .. " left a thread running")
    end
    -- nothing bound: the free port is still free
    local c = uv.new_tcp()
    local result
    c:connect("127.0.0.1", free, function(e) result = e or "connected" end)
    assert.is_true(W.run_until(function() return result ~= nil end, 5))
    c:close()
    uv.run("nowait")
    assert.matches("ECONNREFUSED", result)
    -- a non-string: the same message, with what it held
    local p, err = isolation.proxy({ allow = {}, listen = 8080 })
    assert.is_nil(p)
    assert.truthy(err:find("(got number 8080)", 1, true), err)
    -- the accepted forms
    for _, spec in ipairs({ "127.0.0.1:0", "127.0.0.1:" .. free }) do
      local q = assert(isolation.proxy({ allow = {}, listen = spec }))
      q:close()
    end
  end)

  it("says what it is, closes idempotently, and raises when used closed", function()
    local p = assert(isolation.proxy({ allow = {}, listen = "127.0.0.1:0" }))
    assert.matches("^isolation%.proxy %(127%.0%.0%.1:%d+%)$", tostring(p))
    assert.are.equal(p:address(), "127.0.0.1:" .. p:port())
    p:close()
    p:close()
    assert.are.equal("isolation.proxy (closed)", tostring(p))
    for _, m in ipairs({ "address", "port", "stats", "events" }) do
      assert.has_error(function() p[m](p) end, "attempt to use a closed isolation.proxy")
    end
    assert.has_error(function() p:set_allow({}) end)
  end)

  it("listens on [::1] when asked", function()
    local p, err = isolation.proxy({ allow = {}, listen = "[::1]:0" })
    if not p then
      io.stderr:write("SKIP [::1]: " .. tostring(err) .. "\n")
      return
    end
    assert.matches("^%[::1%]:%d+$", p:address())
    local denied = "CONNECT x.example.com:1 HTTP/1.1\r\nHost: x.example.com:1\r\n\r\n"
    assert.are.equal(403, W.exchange(p:address(), denied):status())
    p:close()
  end)

  it("closes through <close> and through the garbage collector, removing the socket", function()
    local dir = helpers.tmpdir()
    do
      local p <close> = assert(isolation.proxy({ allow = {}, unix = dir .. "/a.sock" }))
      assert.is_truthy(helpers.run("test -S " .. dir .. "/a.sock") == 0)
      local _ = p
    end
    assert.are.equal(1, (helpers.run("test -e " .. dir .. "/a.sock")))
    do
      local q = assert(isolation.proxy({ allow = { "x.example.com" }, unix = dir .. "/b.sock" }))
      -- a tunnel left open when the proxy is collected
      local c = W.connect(q:address())
      c:send("CONNECT x.example.com:1 HTTP/1.1\r\n")
      W.settle(0.05)
      q = nil -- luacheck: ignore 311
      collectgarbage()
      collectgarbage()
      assert.is_true(c:wait_eof(5))
      c:close()
    end
    assert.are.equal(1, (helpers.run("test -e " .. dir .. "/b.sock")))
    helpers.rmtree(dir)
  end)
end)
