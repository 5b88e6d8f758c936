-- SOCKS5 on the proxy's listener (a first byte 0x05): CONNECT by name or
-- address through the same allowlist, address rules and events as HTTP
-- CONNECT; everything else refused with the SOCKS reply code.
local isolation = require("isolation")
local upstream = require("support.upstream")
local W = require("support.proxy")

local socks5 = require("support.socks5")
local be16, by_name, by_ipv4 = socks5.be16, socks5.by_name, socks5.by_ipv4

-- Greeting (no auth), then the request; returns the connection and the
-- reply code (nil when the proxy closed without a reply).
local function socks(p, request, greeting)
  local c = W.connect(p:address())
  c:send(greeting or "\5\1\0")
  c:wait(function() return #c.data >= 2 or c.eof end, 3)
  if c.data:sub(1, 2) ~= "\5\0" then return c, nil end
  c:send(request)
  c:wait(function() return #c.data >= 12 or c.eof end, 3)
  local rep = #c.data >= 12 and c.data:byte(4) or nil
  return c, rep
end

describe("isolation.proxy SOCKS5", function()
  local up

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  local function proxy(opts)
    opts.listen = opts.listen or "127.0.0.1:0"
    return assert(isolation.proxy(opts))
  end

  it("tunnels an allowed CONNECT by name (socks5h) to a loopback upstream", function()
    local p = proxy({ allow = { "pinned.example.com" }, allow_private = true,
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local c, rep = socks(p, by_name("pinned.example.com", up.raw_port))
    assert.are.equal(0, rep)
    assert.are.equal("\5\0\5\0\0\1\0\0\0\0\0\0", c.data:sub(1, 12))
    c:send("PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    local ev = {}
    W.run_until(function()
      for _, e in ipairs(p:events()) do ev[#ev + 1] = e end
      return #ev > 0
    end, 3)
    p:close()
    assert.are.equal("SOCKS5", ev[1].method)
    assert.are.equal("allowed", ev[1].code)
    assert.are.equal("pinned.example.com", ev[1].host)
  end)

  it("tunnels an allowed CONNECT by IPv4 address", function()
    local p = proxy({ allow = { "127.0.0.1:" .. up.raw_port } })
    local c, rep = socks(p, by_ipv4(127, 0, 0, 1, up.raw_port))
    assert.are.equal(0, rep)
    c:send("PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    p:close()
  end)

  it("refuses a host off the allowlist with 0x02 and a deny event, method SOCKS5", function()
    local before = up:stats().accepts
    local p = proxy({ allow = { "other.example.com" }, allow_private = true,
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local c, rep = socks(p, by_name("pinned.example.com", up.raw_port))
    assert.are.equal(2, rep)
    assert.is_true(c:wait_eof())
    c:close()
    local ev = p:events()
    p:close()
    assert.are.equal(1, #ev)
    assert.are.equal("deny", ev[1].type)
    assert.are.equal("not_allowed", ev[1].code)
    assert.are.equal("SOCKS5", ev[1].method)
    assert.are.equal(up.raw_port, ev[1].port)
    W.settle(0.05)
    assert.are.equal(before, up:stats().accepts)
  end)

  it("refuses a name pinned to a private address (0x02, private_address) without dialing", function()
    local before = up:stats().accepts
    local p = proxy({ allow = { "pinned.example.com" },
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local _, rep = socks(p, by_name("pinned.example.com", up.raw_port))
    local ev = p:events()
    p:close()
    assert.are.equal(2, rep)
    assert.are.equal("private_address", ev[1].code)
    W.settle(0.05)
    assert.are.equal(before, up:stats().accepts)
  end)

  it("refuses an allowlisted name whose port is closed with 0x05 (connection refused)", function()
    local port = W.closed_port()
    local p = proxy({ allow = { "127.0.0.1:" .. port } })
    local _, rep = socks(p, by_ipv4(127, 0, 0, 1, port))
    p:close()
    assert.are.equal(5, rep)
  end)

  it("answers BIND and UDP ASSOCIATE with 0x07 (command not supported)", function()
    local p = proxy({ allow = { "127.0.0.1" } })
    for _, cmd in ipairs({ 2, 3 }) do
      local _, rep = socks(p, "\5" .. string.char(cmd) .. "\0\1\127\0\0\1" .. be16(up.raw_port))
      assert.are.equal(7, rep, "command " .. cmd)
    end
    local ev = p:events()
    p:close()
    assert.are.equal("not_implemented", ev[1].code)
    assert.are.equal("SOCKS5", ev[1].method)
  end)

  it("refuses names with NUL or control bytes, over-long and empty names, port 0", function()
    local p = proxy({ allow = { "*.example.com" }, allow_private = true })
    local bad = {
      by_name("a\0.example.com", 80),
      by_name("a\n.example.com", 80),
      by_name(string.rep("a", 250) .. ".com", 80),
      by_name("", 80),
      by_name("pinned.example.com", 0),
      "\5\1\1\1\127\0\0\1\0\80", -- reserved byte not zero
    }
    for i, req in ipairs(bad) do
      local c, rep = socks(p, req)
      assert.are.equal(1, rep, "case " .. i)
      assert.is_true(c:wait_eof(), "case " .. i)
      c:close()
    end
    p:close()
  end)

  it("answers an unknown address type with 0x08 (address type not supported), then closes", function()
    local p = proxy({ allow = { "127.0.0.1", "*.example.com" }, allow_private = true })
    -- 0 and 2 sit between the real types 1, 3 and 4; 9 and 255 beyond them
    for _, atyp in ipairs({ 0, 2, 5, 9, 255 }) do
      local c, rep = socks(p, "\5\1\0" .. string.char(atyp) .. "\127\0\0\1" .. be16(up.raw_port))
      assert.are.equal(8, rep, "ATYP " .. atyp)
      assert.are.equal("\5\8\0\1\0\0\0\0\0\0", c.data:sub(3, 12), "ATYP " .. atyp)
      assert.is_true(c:wait_eof(), "ATYP " .. atyp)
      c:close()
    end
    local ev = {}
    W.run_until(function()
      for _, e in ipairs(p:events()) do ev[#ev + 1] = e end
      return #ev >= 5
    end, 3)
    p:close()
    assert.are.equal(5, #ev)
    for _, e in ipairs(ev) do
      assert.are.equal("SOCKS5", e.method)
      assert.are.equal("bad_request", e.code)
      assert.matches("address type", e.reason)
    end
  end)

  it("closes on a bad greeting: no methods, no acceptable method, version 4 request", function()
    local p = proxy({ allow = { "*.example.com" } })
    -- no methods at all: closed without a reply
    local c = W.connect(p:address())
    c:send("\5\0")
    assert.is_true(c:wait_eof())
    assert.are.equal("", c.data)
    c:close()
    -- only GSSAPI offered: "no acceptable methods", then closed
    c = W.connect(p:address())
    c:send("\5\1\1")
    assert.is_true(c:wait_eof())
    assert.are.equal("\5\255", c.data)
    c:close()
    -- a request of another version after a good greeting
    local rep
    c, rep = socks(p, "\4\1\0\80\127\0\0\1\0")
    assert.is_true(c:wait_eof())
    assert.are.equal(1, rep)
    c:close()
    local ev = p:events()
    p:close()
    for _, e in ipairs(ev) do assert.are.equal("bad_request", e.code) end
  end)

  it("takes greeting, request and early tunnel bytes sent in one write (optimistic client)", function()
    local p = proxy({ allow = { "127.0.0.1:" .. up.raw_port } })
    local c = W.connect(p:address())
    c:send("\5\1\0" .. by_ipv4(127, 0, 0, 1, up.raw_port) .. "PING\n")
    assert.is_true(c:wait_for("PONG"))
    assert.are.equal("\5\0\5\0\0\1\0\0\0\0\0\0", c.data:sub(1, 12))
    c:close()
    p:close()
  end)

  it("closes a stalled greeting or request at header_timeout, with a header_timeout event", function()
    local p = proxy({ allow = { "*.example.com" }, header_timeout = 0.3 })
    local c1 = W.connect(p:address())
    c1:send("\5\2\0") -- one method still missing
    local c2 = W.connect(p:address())
    c2:send("\5\1\0\5\1\0\3\30pinned") -- half a name
    assert.is_true(c1:wait_eof(3))
    assert.is_true(c2:wait_eof(3))
    assert.are.equal("", c1.data)
    assert.are.equal("\5\0", c2.data)
    c1:close()
    c2:close()
    local ev = p:events()
    p:close()
    assert.are.equal(2, #ev)
    for _, e in ipairs(ev) do
      assert.are.equal("header_timeout", e.code)
      assert.are.equal("SOCKS5", e.method)
    end
  end)

  it("keeps HTTP working on the same listener", function()
    local p = proxy({ allow = { "other.example.com" } })
    local c = W.exchange(p:address(), "CONNECT pinned.example.com:443 HTTP/1.1\r\nHost: pinned.example.com:443\r\n\r\n")
    assert.are.equal(403, c:status())
    p:close()
  end)
  describe("token", function()
    local TOKEN = "s3cr3t-Tok3n_value"
    local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    local function base64(str)
      return ((str:gsub(".", function(ch)
        local r, b = "", ch:byte()
        for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
        return r
      end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
        if #x < 6 then return "" end
        local c = 0
        for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
        return B64:sub(c + 1, c + 1)
      end) .. ({ "", "==", "=" })[#str % 3 + 1])
    end

    local function tproxy()
      return proxy({ allow = { "pinned.example.com" }, allow_private = true, token = TOKEN,
        resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    end

    local function http_connect(p, auth)
      local target = "pinned.example.com:" .. up.raw_port
      return W.exchange(p:address(), "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n" ..
        (auth and ("Proxy-Authorization: " .. auth .. "\r\n") or "") .. "\r\n")
    end

    local function no_token_in(events)
      for _, e in ipairs(events) do
        for k, v in pairs(e) do
          assert.is_nil(tostring(v):find(TOKEN, 1, true), "token in event field " .. k)
          assert.is_nil(tostring(v):find(base64("isolation:" .. TOKEN), 1, true), "credentials in event field " .. k)
        end
      end
    end

    it("HTTP: 407 with Proxy-Authenticate without it, or with a wrong user or token; 200 with it", function()
      local p = tproxy()
      local c = http_connect(p, nil)
      assert.are.equal(407, c:status())
      assert.matches('Proxy%-Authenticate: Basic realm="isolation"', c.data)
      c:close()
      for _, bad in ipairs({ "Basic " .. base64("isolation:wrong"), "Basic " .. base64("root:" .. TOKEN),
        "Basic " .. base64("isolation:" .. TOKEN .. "x"), "Bearer " .. TOKEN, "Basic " .. TOKEN }) do
        c = http_connect(p, bad)
        assert.are.equal(407, c:status(), bad)
        c:close()
      end
      local target = "pinned.example.com:" .. up.raw_port
      c = W.connect(p:address())
      c:send("CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\nProxy-Authorization: basic  " ..
        base64("isolation:" .. TOKEN) .. "\r\n\r\n")
      assert.is_true(c:wait_for("\r\n\r\n"))
      assert.are.equal(200, c:status())
      c:send("PING\n")
      assert.is_true(c:wait_for("PONG"))
      c:close()
      W.settle(0.1)
      local ev = p:events()
      p:close()
      assert.are.equal("auth_required", ev[1].code)
      no_token_in(ev)
    end)

    it("SOCKS5: refuses no-auth and a wrong password, tunnels with user isolation and the token", function()
      local p = tproxy()
      -- only "no authentication" offered: no acceptable method
      local c = W.connect(p:address())
      c:send("\5\1\0")
      assert.is_true(c:wait_eof())
      assert.are.equal("\5\255", c.data)
      c:close()
      local function auth(user, pass)
        local k = W.connect(p:address())
        k:send("\5\1\2")
        k:wait(function() return #k.data >= 2 or k.eof end, 3)
        assert.are.equal("\5\2", k.data)
        k:send("\1" .. string.char(#user) .. user .. string.char(#pass) .. pass)
        k:wait(function() return #k.data >= 4 or k.eof end, 3)
        return k, k.data:sub(3, 4)
      end
      for _, bad in ipairs({ { "isolation", "wrong" }, { "root", TOKEN }, { "isolation", TOKEN .. "x" },
        { "isolation", TOKEN:sub(1, -2) } }) do
        local k, rep = auth(bad[1], bad[2])
        assert.are.equal("\1\1", rep)
        assert.is_true(k:wait_eof())
        k:close()
      end
      local k, rep = auth("isolation", TOKEN)
      assert.are.equal("\1\0", rep)
      k:send(by_name("pinned.example.com", up.raw_port))
      k:wait(function() return #k.data >= 14 end, 3)
      assert.are.equal(0, k.data:byte(6))
      k:send("PING\n")
      assert.is_true(k:wait_for("PONG"))
      k:close()
      W.settle(0.1)
      local ev = p:events()
      p:close()
      assert.are.equal("auth_required", ev[1].code)
      assert.are.equal("SOCKS5", ev[1].method)
      no_token_in(ev)
    end)

    it("refuses a token that is not a short printable string, without echoing it", function()
      for _, t in ipairs({ "", "has space", string.rep("x", 256), 42, "nl\n" }) do
        local p, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", token = t })
        assert.is_nil(p)
        assert.matches("token", err)
        if type(t) == "string" and #t > 0 then assert.is_nil(err:find(t, 1, true)) end
      end
    end)
  end)
end)
