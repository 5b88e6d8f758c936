-- What the proxy dials: only addresses it has checked. A name that
-- resolves (here: is pinned with `resolve`) to a private address is
-- refused unless allow_private or an IP pattern admits that address.
local isolation = require("isolation")
local upstream = require("support.upstream")
local W = require("support.proxy")

describe("isolation.proxy address checks", function()
  local up

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  local function connect_status(p, target)
    local c = W.exchange(p:address(), "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n")
    return c:status(), c.data
  end

  local function proxy(opts)
    opts.listen = opts.listen or "127.0.0.1:0"
    return assert(isolation.proxy(opts))
  end

  it("refuses a name pinned to loopback, link-local, private or mixed answers, without dialing", function()
    local port = up.raw_port
    local cases = {
      { "127.0.0.1" },
      { "169.254.169.254" },
      { "10.0.0.1" },
      { "192.168.1.10" },
      { "::1" },
      { "fd00::1" },
      -- the first answer would work (loopback upstream): only the check stops it
      { "127.0.0.1", "93.184.215.14" },
      { "93.184.215.14", "127.0.0.1" },
    }
    for _, addrs in ipairs(cases) do
      local before = up:stats().accepts
      local p = proxy({ allow = { "pinned.example.com" }, resolve = { ["pinned.example.com"] = addrs } })
      local status, data = connect_status(p, "pinned.example.com:" .. port)
      local ev = p:events()
      p:close()
      assert.are.equal(403, status, table.concat(addrs, ",") .. ": " .. data)
      assert.are.equal(1, #ev)
      assert.are.equal("deny", ev[1].type)
      assert.matches("resolves to a %a[%a-]* address", ev[1].reason)
      W.settle(0.05)
      assert.are.equal(before, up:stats().accepts, "dialed for " .. table.concat(addrs, ","))
    end
  end)

  it("names the address class in the reason", function()
    local expect = { ["169.254.169.254"] = "link%-local", ["10.0.0.1"] = "private", ["127.0.0.1"] = "loopback" }
    for addr, class in pairs(expect) do
      local p = proxy({ allow = { "pinned.example.com" }, resolve = { ["pinned.example.com"] = { addr } } })
      connect_status(p, "pinned.example.com:443")
      local ev = p:events()
      p:close()
      assert.matches(class, ev[1].reason)
      assert.matches(addr:gsub("%.", "%%."), ev[1].reason)
    end
  end)

  -- The class comes from the same table that refuses the address: an IPv4
  -- address carried in IPv6 (mapped, NAT64, 6to4, compatible) is named by
  -- the IPv4 address it carries, not called "reserved".
  it("names the class of an IPv4 address carried in IPv6 by that IPv4 address, named or literal", function()
    local expect = {
      ["::ffff:10.0.0.1"] = "private",
      ["64:ff9b::7f00:1"] = "loopback",
      ["::ffff:169.254.169.254"] = "link-local",
      ["2002:a00:1::1"] = "private",
      ["::1"] = "loopback",
      ["::"] = "unspecified",
      ["fe80::1"] = "link-local",
      ["fd00::1"] = "private",
      ["ff02::1"] = "multicast",
      ["192.0.2.1"] = "documentation",
      ["224.0.0.1"] = "multicast",
      ["0.0.0.1"] = "unspecified",
    }
    for addr, class in pairs(expect) do
      -- learn mode lets the literal past the allowlist to the address rule
      local p = proxy({ allow = { "pinned.example.com" }, report = true,
        resolve = { ["pinned.example.com"] = { addr } } })
      connect_status(p, "pinned.example.com:443")
      local host = addr:find(":", 1, true) and "[" .. addr .. "]" or addr
      connect_status(p, host .. ":443")
      local ev = p:events()
      p:close()
      assert.are.equal(2, #ev, addr)
      assert.are.same({ "deny", "private_address" }, { ev[1].type, ev[1].code }, addr)
      assert.are.equal("pinned.example.com resolves to a " .. class .. " address (" .. addr
        .. "), which the allowlist does not admit", ev[1].reason)
      assert.are.same({ "deny", "private_address" }, { ev[2].type, ev[2].code }, addr)
      assert.are.equal(addr .. " is a " .. class .. " address, which the allowlist does not admit", ev[2].reason)
      -- the address and its class in their own fields: no reader parses a reason
      assert.are.same({ addr, class, addr, class }, { ev[1].address, ev[1].address_class, ev[2].address,
        ev[2].address_class }, addr)
    end
  end)

  it("reaches a loopback upstream with allow_private", function()
    local p = proxy({ allow = { "pinned.example.com" }, allow_private = true,
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local c = W.tunnel(p:address(), "pinned.example.com:" .. up.raw_port, "PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    p:close()
  end)

  it("reaches it when an IP pattern admits that address and port, and only that port", function()
    local p = proxy({ allow = { "pinned.example.com", "127.0.0.1:" .. up.raw_port },
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local c = W.tunnel(p:address(), "pinned.example.com:" .. up.raw_port, "PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    assert.are.equal(403, (connect_status(p, "pinned.example.com:" .. up.http_port)))
    -- an IP literal host: the pattern admits it directly
    local d = W.tunnel(p:address(), "127.0.0.1:" .. up.raw_port, "PING\n")
    assert.is_true(d:wait_for("PONG"))
    d:close()
    p:close()
    -- a CIDR block does too
    local q = proxy({ allow = { "pinned.example.com", "127.0.0.0/8" },
      resolve = { ["pinned.example.com"] = { "127.0.0.1" } } })
    local e = W.tunnel(q:address(), "pinned.example.com:" .. up.raw_port, "PING\n")
    assert.is_true(e:wait_for("PONG"))
    e:close()
    q:close()
  end)

  it("dials IPv6: a bracketed literal and a name pinned to ::1", function()
    local ok, up6 = pcall(upstream.start, { host = "::1" })
    if not ok then
      io.stderr:write("SKIP IPv6 upstream: " .. tostring(up6) .. "\n")
      return
    end
    local p = proxy({ allow = { "[::1]:" .. up6.raw_port, "six.example.com" },
      resolve = { ["six.example.com"] = { "::1" } }, allow_private = true })
    local c = W.tunnel(p:address(), "[::1]:" .. up6.raw_port, "PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    local d = W.tunnel(p:address(), "six.example.com:" .. up6.raw_port, "PING\n")
    assert.is_true(d:wait_for("PONG"))
    d:close()
    local f = W.exchange(p:address(), "GET http://[::1]:" .. up6.http_port .. "/small HTTP/1.1\r\nHost: [::1]:"
      .. up6.http_port .. "\r\nConnection: close\r\n\r\n")
    assert.are.equal(403, f:status()) -- only the raw port is allowed for the literal
    p:close()
    up6:stop()
  end)

  it("refuses an IP literal that the allowlist names but the private rule does not admit", function()
    local p = proxy({ allow = { "*.example.com" } })
    local before = up:stats().accepts
    assert.are.equal(403, (connect_status(p, "127.0.0.1:" .. up.raw_port)))
    assert.are.equal(403, (connect_status(p, "[::1]:" .. up.raw_port)))
    W.settle(0.05)
    assert.are.equal(before, up:stats().accepts)
    p:close()
  end)

  it("answers 400 to numeric host forms that are not canonical IP literals, never resolving them", function()
    local p = proxy({ allow = { "127.0.0.1" }, allow_private = true })
    local before = up:stats().accepts
    for _, host in ipairs({ "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.0.0.01" }) do
      local status = connect_status(p, host .. ":" .. up.raw_port)
      assert.are.equal(400, status, host)
      local f = W.exchange(p:address(), "GET http://" .. host .. ":" .. up.http_port .. "/small HTTP/1.1\r\nHost: "
        .. host .. ":" .. up.http_port .. "\r\n\r\n")
      assert.are.equal(400, f:status(), host)
    end
    W.settle(0.05)
    assert.are.equal(before, up:stats().accepts)
    p:close()
  end)

  it("looks a name up with getaddrinfo and checks what it returns (localhost: /etc/hosts, no traffic)", function()
    local f = io.popen("getent ahostsv4 localhost 2>/dev/null")
    local hosts = f:read("a")
    f:close()
    if not hosts:match("^127%.") then
      io.stderr:write("SKIP getaddrinfo path: localhost does not resolve to loopback here\n")
      return
    end
    local p = proxy({ allow = { "localhost" } })
    local status, data = connect_status(p, "localhost:" .. up.raw_port)
    assert.are.equal(403, status)
    assert.matches("localhost resolves to a loopback address", data)
    p:close()
    local q = proxy({ allow = { "localhost" }, allow_private = true })
    local c = W.tunnel(q:address(), "localhost:" .. up.raw_port, "PING\n")
    assert.is_true(c:wait_for("PONG"))
    c:close()
    q:close()
    -- resolve wins over the system's answer
    local r = proxy({ allow = { "localhost" }, resolve = { localhost = { "10.0.0.1" } } })
    status, data = connect_status(r, "localhost:" .. up.raw_port)
    assert.are.equal(403, status)
    assert.matches("10%.0%.0%.1", data)
    r:close()
  end)

  it("refuses a CONNECT to the proxy's own listening address", function()
    local p = proxy({ allow = { "127.0.0.1", "self.example.com" }, allow_private = true,
      resolve = { ["self.example.com"] = { "127.0.0.1" } } })
    local status, data = connect_status(p, "127.0.0.1:" .. p:port())
    assert.are.equal(403, status)
    assert.matches("own", data)
    assert.are.equal(403, (connect_status(p, "self.example.com:" .. p:port())))
    -- other spellings that reach the same listener
    local q = proxy({ allow = { "alias.example.com" }, allow_private = true,
      resolve = { ["alias.example.com"] = { "0.0.0.0", "::ffff:127.0.0.1" } } })
    local st, body = connect_status(q, "alias.example.com:" .. q:port())
    assert.are.equal(403, st)
    assert.matches("own", body)
    assert.are.equal(0, q:stats().allowed)
    q:close()
    local f = W.exchange(p:address(), "GET http://127.0.0.1:" .. p:port() .. "/ HTTP/1.1\r\nHost: 127.0.0.1:"
      .. p:port() .. "\r\n\r\n")
    assert.are.equal(403, f:status())
    assert.are.equal(3, p:stats().connections)
    p:close()
  end)
end)
