-- The proxy's limits: header_timeout, connect_timeout, max_connections,
-- idle_timeout, and bounded memory behind a slow reader. Every upstream is
-- on loopback (a dial timeout comes from a listener whose backlog is full).
local uv = require("luv")
local isolation = require("isolation")
local upstream = require("support.upstream")
local W = require("support.proxy")
local helpers = require("helpers")
local netns = require("support.dns_netns")

local MiB = 1024 * 1024

-- Seconds from t0 (uv.hrtime) until the proxy ended connection c.
local function seconds_until_closed(c, t0)
  local closed_at
  assert.is_true(c:wait(function(cc)
    if cc.eof and not closed_at then closed_at = uv.hrtime() end
    return cc.eof
  end, 12))
  return (closed_at - t0) / 1e9
end

describe("isolation.proxy limits", function()
  local up

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  local function proxy(opts)
    if not opts.unix then opts.listen = "127.0.0.1:0" end
    opts.allow = opts.allow or { "up.example.com" }
    opts.resolve = { ["up.example.com"] = { "127.0.0.1" } }
    opts.allow_private = true
    return assert(isolation.proxy(opts))
  end

  it("answers 408 when the whole head takes longer than header_timeout, even while bytes keep coming", function()
    local p = proxy({ header_timeout = 1 })
    local c = W.connect(p:address())
    local head = "CONNECT up.example.com:" .. up.raw_port .. " HTTP/1.1\r\nHost: up.example.com\r\n"
      .. string.rep("X-Pad: 0123456789\r\n", 40)
    local i = 0
    local t = uv.new_timer()
    t:start(0, 50, function()
      i = i + 1
      if i <= #head and not c.eof then c:send(head:sub(i, i)) end
    end)
    local t0 = uv.now()
    assert.is_true(c:wait_eof(8))
    t:stop()
    t:close()
    local took = uv.now() - t0
    assert.are.equal(408, c:status())
    assert.is_true(i < #head, "the head was complete before the timeout")
    assert.is_true(took >= 900 and took < 6000, "took " .. took .. " ms")
    local ev = p:events()
    assert.are.equal(1, #ev)
    assert.are.equal(408, ev[1].status)
    c:close()
    p:close()
  end)

  for _, via in ipairs({ "TCP", "a unix socket" }) do
    it("answers 408 to a client that connects over " .. via .. " and never sends a byte, header_timeout after connect",
      function()
        local dir = via ~= "TCP" and helpers.tmpdir() or nil
        local p = proxy({ header_timeout = 2, unix = dir and dir .. "/p.sock" })
        local c = W.connect(p:address())
        local took = seconds_until_closed(c, uv.hrtime())
        assert.are.equal(408, c:status())
        assert.is_true(took >= 1.8 and took <= 2.6, string.format("took %.3f s", took))
        assert.are.equal(1, p:stats().connections)
        c:close()
        p:close()
        if dir then helpers.rmtree(dir) end
      end)
  end

  it("times a TCP client's first head from the connection, not from its first byte", function()
    -- the proxy sees the connection at once (no accept deferral): a client
    -- that waits before it speaks has used part of its header_timeout
    local p = proxy({ header_timeout = 2 })
    local t0 = uv.hrtime()
    local c = W.connect(p:address())
    W.settle(0.5)
    c:send("CONNECT up.example.com:" .. up.raw_port .. " HTTP/1.1\r\n")
    local took = seconds_until_closed(c, t0)
    assert.are.equal(408, c:status())
    assert.is_true(took >= 1.8 and took <= 2.6, string.format("took %.3f s after connect", took))
    c:close()
    p:close()
  end)

  it("answers a TCP client that speaks at once, with a short header_timeout", function()
    local p = proxy({ header_timeout = 0.3 })
    for i = 1, 20 do
      local c = W.exchange(p:address(), "CONNECT denied.example.net:443 HTTP/1.1\r\nHost: denied.example.net\r\n\r\n")
      assert.are.equal(403, c:status(), "round " .. i)
    end
    local c = W.connect(p:address())
    c:send("CONNECT denied.example.net:443 HTTP/1.1\r\n")
    W.settle(0.1)
    c:send("Host: denied.example.net\r\n\r\n")
    assert.is_true(c:wait(function(cc) return cc:status() ~= nil end, 5))
    assert.are.equal(403, c:status())
    c:close()
    p:close()
  end)

  it("answers 502 when the upstream refuses", function()
    local p = proxy({ allow = { "127.0.0.1" } })
    local port = W.closed_port()
    local c = W.exchange(p:address(), "CONNECT 127.0.0.1:" .. port .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert.are.equal(502, c:status())
    local f = W.exchange(p:address(), "GET http://127.0.0.1:" .. port .. "/ HTTP/1.1\r\nHost: 127.0.0.1:" .. port
      .. "\r\n\r\n")
    assert.are.equal(502, f:status())
    local ev = p:events()
    assert.are.equal("error", ev[1].type)
    assert.are.equal(2, p:stats().errors)
    p:close()
  end)

  it("answers 504 when the dial does not complete within connect_timeout", function()
    -- A listener in a child process that never accepts, backlog 0: once
    -- its queue is full the kernel drops further SYNs.
    local port, release = W.stalled_port()
    local p = proxy({ allow = { "127.0.0.1" }, connect_timeout = 1 })
    local t0 = uv.now()
    local c = W.exchange(p:address(), "CONNECT 127.0.0.1:" .. port .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 10)
    local took = uv.now() - t0
    assert.are.equal(504, c:status())
    assert.is_true(took >= 900, "took " .. took .. " ms")
    p:close()
    release()
  end)

  it("answers 504 when name resolution does not finish within dns_timeout, and answers the next name", function()
    -- A name server that never answers, in a network namespace of the
    -- test's own (spec/support/dns_child.lua, scenario timeout): the lookup
    -- really hangs, and glibc gives up by itself (nothing here can hang:
    -- the run has a deadline of 60 s).
    local why = netns.unavailable()
    if why then
      pending(why)
      return
    end
    local r = netns.run({ "spec/support/dns_child.lua", "timeout" }, {}, 60)
    assert.are.equal("ok", r["end"], r.text)
    assert.are.equal(504, r.hang_status, r.text)
    assert.are.equal("dns_timeout", r.hang_code, r.text)
    assert.is_true(r.hang_ms >= 400 and r.hang_ms < 5000, r.text)
    -- the next name is answered while that lookup still hangs
    assert.are.equal(200, r.after_status, r.text)
    assert.are.equal("true", r.after_pong, r.text)
  end)

  it("answers 503 over max_connections while the connections it has keep working", function()
    local p = proxy({ max_connections = 2 })
    local target = "up.example.com:" .. up.raw_port
    local a, b = W.connect(p:address()), W.connect(p:address())
    a:send("CONNECT " .. target .. " HTTP/1.1\r\n")
    b:send("CONNECT " .. target .. " HTTP/1.1\r\n")
    W.settle(0.1)
    local c = W.exchange(p:address(), "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n")
    assert.are.equal(503, c:status())
    for _, x in ipairs({ a, b }) do
      x:send("Host: " .. target .. "\r\n\r\nPING\n")
      assert.is_true(x:wait_for("PONG"))
      assert.matches("^HTTP/1.1 200", x.data)
    end
    a:close()
    assert.is_true(W.run_until(function() return p:stats().active == 1 end, 3))
    local d = W.tunnel(p:address(), target, "PING\n")
    assert.is_true(d:wait_for("PONG"))
    d:close()
    b:close()
    p:close()
  end)

  it("keeps at most 4096 events for :events() and counts the rest as dropped", function()
    local p = proxy({ allow = {} })
    local denied = "CONNECT x.example.com:1 HTTP/1.1\r\nHost: x.example.com:1\r\n\r\n"
    local total, batch = 4100, 100
    for _ = 1, total / batch do
      local conns = {}
      for i = 1, batch do
        conns[i] = W.connect(p:address())
        conns[i]:send(denied)
      end
      for i = 1, batch do
        assert.is_true(conns[i]:wait_eof(10))
        conns[i]:close()
      end
    end
    local s = p:stats()
    assert.are.equal(total, s.denied)
    assert.are.equal(total - 4096, s.events_dropped)
    assert.are.equal(4096, #p:events())
    -- the queue is empty again and takes new events
    W.exchange(p:address(), denied)
    assert.are.equal(1, #p:events())
    p:close()
  end)

  it("closes a tunnel that stays silent both ways for idle_timeout", function()
    local p = proxy({ idle_timeout = 0.5 })
    local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "PING\n")
    assert.is_true(c:wait_for("PONG"))
    -- traffic resets the clock
    for _ = 1, 3 do
      W.settle(0.3)
      assert.is_false(c.eof)
      c:send("PING\n")
    end
    local t0 = uv.now()
    assert.is_true(c:wait_eof(5))
    assert.is_true(uv.now() - t0 >= 400)
    c:close()
    -- a kept-alive forward connection too
    local f = W.connect(p:address())
    f:send("GET http://up.example.com:" .. up.http_port .. "/small HTTP/1.1\r\nHost: up.example.com:"
      .. up.http_port .. "\r\n\r\n")
    assert.is_true(f:wait_for("ssss\n"))
    assert.is_true(f:wait_eof(5))
    f:close()
    p:close()
  end)

  for _, via in ipairs({ "TCP", "a unix socket" }) do
    it("does not buffer without bound behind a slow reader on " .. via, function()
      -- a unix client's send buffer is raised once its tunnel goes bulk:
      -- still a bound
      local dir = via ~= "TCP" and helpers.tmpdir() or nil
      local p = proxy({ unix = dir and dir .. "/p.sock" })
      local total = 32 * MiB
      local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "SRC " .. total .. "\n")
      c.keep = false
      c:pause()
      W.settle(1.5)
      local held = p:stats().bytes_down
      -- what the proxy read from upstream is at most what the client's
      -- socket buffers took plus one read buffer
      assert.is_true(held < 16 * MiB, "read " .. held .. " bytes ahead of a reader that reads nothing")
      c:resume()
      assert.is_true(c:wait(function(x) return x.nread >= total end, 60), "got " .. c.nread)
      assert.is_true(c:wait_eof(5))
      c:close()
      p:close()
      if dir then helpers.rmtree(dir) end
    end)
  end
end)
