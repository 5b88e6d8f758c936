-- The parent proxy (upstream_proxy = "http://HOST:PORT", isolate
-- --upstream-proxy): every admitted connection is dialled through the
-- parent with CONNECT, after the proxy's own checks.
--
-- The parent is tinyproxy from Debian, started here on loopback with a
-- config of its own (its port, Listen 127.0.0.1, ConnectPort for the
-- test's ports only, a filter file that admits only localhost, its own log,
-- no daemon): its log shows what reached it. Without tinyproxy (or when it
-- cannot start) those cases are pending with the reason. A few cases need
-- a parent that misbehaves on purpose (its 200 and the server's first
-- bytes in one write, a reply head without end): a small loopback server
-- in this file plays it.
--
-- Before: `proxy option upstream_proxy is unknown`, and `isolate
-- --upstream-proxy` an unknown option: behind a proxy-only egress nothing
-- worked.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local wire = require("support.parsers")
local cli = require("support.cli")
local start_tinyproxy = require("support.tinyproxy").start

local free_port = require("support.tinyproxy").free_port

-- A loopback server that writes `banner` to each client on accept and
-- records what each sends.
local function banner_server(banner)
  local s = { data = "", conns = 0, handles = {} }
  local srv = uv.new_tcp()
  assert(srv:bind("127.0.0.1", 0))
  assert(srv:listen(16, function()
    local c = uv.new_tcp()
    srv:accept(c)
    s.conns = s.conns + 1
    s.handles[#s.handles + 1] = c
    if banner then c:write(banner) end
    c:read_start(function(err, d)
      if err or not d then
        if not c:is_closing() then c:close() end
        return
      end
      s.data = s.data .. d
    end)
  end))
  s.port = srv:getsockname().port
  function s.close()
    for _, h in ipairs(s.handles) do if not h:is_closing() then h:close() end end
    if not srv:is_closing() then srv:close() end
  end
  return s
end

-- A parent that plays a part: reads a request head, records it, and calls
-- answer(client, head).
local function fake_parent(answer)
  local f = { heads = {}, handles = {} }
  local srv = uv.new_tcp()
  assert(srv:bind("127.0.0.1", 0))
  assert(srv:listen(16, function()
    local c = uv.new_tcp()
    srv:accept(c)
    f.handles[#f.handles + 1] = c
    local buf, answered = "", false
    c:read_start(function(err, d)
      if err or not d then
        if not c:is_closing() then c:close() end
        return
      end
      buf = buf .. d
      if not answered and buf:find("\r\n\r\n", 1, true) then
        answered = true
        f.heads[#f.heads + 1] = buf:sub(1, buf:find("\r\n\r\n", 1, true) + 3)
        answer(c, buf)
      end
    end)
  end))
  f.port = srv:getsockname().port
  f.url = "http://127.0.0.1:" .. f.port
  function f.close()
    for _, h in ipairs(f.handles) do if not h:is_closing() then h:close() end end
    if not srv:is_closing() then srv:close() end
  end
  return f
end

local function connect_head(target)
  return "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n"
end

describe("proxy upstream_proxy", function()
  local proxy, events, dir

  local function open(opts)
    events = {}
    opts.listen = opts.listen or "127.0.0.1:0"
    opts.loop = uv
    opts.on_event = function(e) events[#events + 1] = e end
    local err
    proxy, err = isolation.proxy(opts)
    assert.is_truthy(proxy, err)
    return proxy:port()
  end

  local function event(code)
    for _, e in ipairs(events) do if e.code == code then return e end end
  end

  before_each(function() dir = helpers.tmpdir() end)
  after_each(function()
    if proxy then proxy:close() end
    proxy = nil
    wire.settle(0.05)
    helpers.rmtree(dir)
  end)

  describe("option", function()
    it("takes http://[USER:PASSWORD@]HOST:PORT (a name, IPv4, [IPv6]; a trailing /)", function()
      for _, url in ipairs({ "http://127.0.0.1:3128", "http://proxy.example.com:8080/", "http://[::1]:3128",
        "HTTP://Proxy.Example.COM:1", "http://user:secret@proxy.example.com:3128", "http://user@[::1]:1",
        "http://us%40er:p%3Ass:w@127.0.0.1:1" }) do
        local p, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", upstream_proxy = url })
        assert.is_truthy(p, url .. ": " .. tostring(err))
        p:close()
      end
    end)

    it("refuses anything else with nil and a message naming the field, the value and what is accepted", function()
      local bad = {
        { "https://proxy.example.com:3128", "the scheme is not http://" },
        { "socks5://127.0.0.1:1080", "the scheme is not http://" },
        { "proxy.example.com:3128", "the scheme is not http://" },
        { "http://proxy.example.com", "the port is missing" },
        { "http://proxy.example.com:", "the port is not 1 to 65535" },
        { "http://proxy.example.com:0", "the port is not 1 to 65535" },
        { "http://proxy.example.com:65536", "the port is not 1 to 65535" },
        { "http://proxy.example.com:03128", "without leading zeros" },
        { "http://proxy.example.com:3128/path", "a path, query or fragment follows the port" },
        { "http://proxy.example.com:3128?x", "a path, query or fragment follows the port" },
        { "http://::1:3128", "an IPv6 address must be in brackets" },
        { "http://[proxy.example.com]:3128", "not a host name or IP address" },
        { "http://bad_host!:3128", "not a host name or IP address" },
        { "http://127.1:3128", "not a host name or IP address" },
        { 3128, "not a string" },
      }
      for _, case in ipairs(bad) do
        local p, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", upstream_proxy = case[1] })
        assert.is_nil(p, tostring(case[1]))
        assert.truthy(err:find("^isolation: upstream_proxy must be \"http://HOST:PORT\" or "
          .. "\"http://USER:PASSWORD@HOST:PORT\" %(HOST a name"), err)
        assert.truthy(err:find(case[2], 1, true), err)
        if type(case[1]) == "string" then
          assert.truthy(err:find("(got \"" .. case[1] .. "\")", 1, true), err)
        end
      end
      local p, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0",
        upstream_proxy = "http://a.example.com:1\0" })
      assert.is_nil(p)
      assert.truthy(err:find("upstream_proxy", 1, true), err)
    end)

    it("refuses bad credentials without ever showing them", function()
      for _, case in ipairs({
        { "http://user:se%0Acret@proxy.example.com:3128", "without control bytes" },
        { "http://user:se%zzcret@proxy.example.com:3128", "percent-encoded" },
        { "http://:secret@proxy.example.com:3128", "a user (no colon)" },
        { "http://us%3Aer:secret@proxy.example.com:3128", "a user (no colon)" },
        { "http://user:" .. string.rep("s", 2000) .. "@proxy.example.com:3128", "at most 1024 bytes" },
        { "http://user:secret@proxy.example.com", "the port is missing" },
        { "https://user:secret@proxy.example.com:3128", "the scheme is not http://" },
      }) do
        local p, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", upstream_proxy = case[1] })
        assert.is_nil(p, case[1])
        assert.truthy(err:find(case[2], 1, true), err)
        assert.truthy(err:find("(got a URL with user:password@, not shown)", 1, true), err)
        assert.is_nil(err:find("secret", 1, true), err)
        assert.is_nil(err:find("sss", 1, true))
      end
    end)
  end)

  it("isolate --dry-run names the parent", function()
    assert(uv.fs_mkdir(dir .. "/w", tonumber("700", 8)))
    local status, out, err = cli.isolate({ "--dry-run", "--workdir", dir .. "/w", "--upstream-proxy",
      "http://proxy.example.net:3128", "--", "true" }, { env = { "TMPDIR=" .. dir } })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("\nproxy parent (every admitted connection goes through it with CONNECT; it resolves "
      .. "the names): http://proxy.example.net:3128\n", 1, true), out)
    -- credentials are not shown
    status, out, err = cli.isolate({ "--dry-run", "--workdir", dir .. "/w", "--upstream-proxy",
      "http://user:sekrit@proxy.example.net:3128", "--", "true" }, { env = { "TMPDIR=" .. dir } })
    assert.are.equal(0, status, err)
    assert.truthy(out:find("): http://(credentials not shown)@proxy.example.net:3128\n", 1, true), out)
    assert.is_nil((out .. err):find("sekrit", 1, true))
  end)

  describe("through tinyproxy", function()
    local tp, why, server

    before_each(function()
      server = banner_server("BANNER\r\n")
      tp, why = start_tinyproxy(dir, { server.port }, { "^localhost$" })
    end)
    after_each(function()
      if tp then tp.stop() end
      server.close()
    end)

    it("a CONNECT tunnel: the parent's log shows it, bytes go both ways, the event says via", function()
      if not tp then return pending(why) end
      local port = open({ allow = { "localhost" }, upstream_proxy = tp.url })
      local res = wire.exchange(port, connect_head("localhost:" .. server.port), {
        after_head = function(r, send) if r.data:match("^HTTP/1%.1 200") then send({ "ping" }) end end,
        until_fn = function(r) return r.data:find("BANNER\r\n", 1, true) and server.data == "ping" end,
      })
      assert.are.equal("HTTP/1.1 200 Connection established\r\n\r\nBANNER\r\n", res.data)
      assert.are.equal("ping", server.data)
      assert.truthy(tp.text():find("CONNECT localhost:" .. server.port .. " HTTP/1.1", 1, true), tp.text())
      wire.run_until(function() return event("allowed") end, 5)
      local e = assert(event("allowed"))
      assert.are.equal("127.0.0.1:" .. tp.port, e.via)
      assert.are.equal("localhost", e.host)
      assert.truthy(e.reason:find("through the parent proxy 127.0.0.1:" .. tp.port, 1, true), e.reason)
    end)

    it("relays 4 MB each way through the parent exactly: the server speaks first, no byte lost or doubled", function()
      if not tp then return pending(why) end
      local pattern = require("support.proxy").pattern
      local down, up = pattern(7, 4 * 1024 * 1024), pattern(11, 4 * 1024 * 1024)
      local bulk = banner_server(down)
      tp.stop()
      tp, why = start_tinyproxy(dir, { bulk.port }, { "^localhost$" })
      assert(tp, why)
      local port = open({ allow = { "localhost" }, upstream_proxy = tp.url, sni = "off" })
      local ok = "HTTP/1.1 200 Connection established\r\n\r\n"
      local res = wire.exchange(port, connect_head("localhost:" .. bulk.port), {
        after_head = function(r, send) if r.data:sub(1, #ok) == ok then send({ up }) end end,
        until_fn = function(r) return #r.data >= #ok + #down and #bulk.data >= #up end,
        timeout = 30,
      })
      bulk.close()
      assert.are.equal(#ok + #down, #res.data)
      assert.is_true(res.data == ok .. down, "the server's bytes, exactly")
      assert.are.equal(#up, #bulk.data)
      assert.is_true(bulk.data == up, "the client's bytes, exactly")
    end)

    it("a plain-HTTP request goes as a CONNECT to the parent, then origin-form to the server", function()
      if not tp then return pending(why) end
      local cap = wire.capture({ http = true })
      tp.stop()
      tp, why = start_tinyproxy(dir, { cap.port }, { "^localhost$" })
      assert(tp, why)
      local port = open({ allow = { "localhost" }, upstream_proxy = tp.url })
      local url = "http://localhost:" .. cap.port .. "/a/b?c"
      local res = wire.exchange(port, "GET " .. url .. " HTTP/1.1\r\nHost: localhost:" .. cap.port .. "\r\n\r\n",
        { until_fn = function(r) return r.data:find("\r\n\r\nok", 1, true) end })
      cap.close()
      assert.are.equal("200", res.status, res.data)
      assert.truthy(cap.data:find("^GET /a/b%?c HTTP/1%.1\r\n"), cap.data)
      assert.truthy(tp.text():find("CONNECT localhost:" .. cap.port .. " HTTP/1.1", 1, true), tp.text())
      wire.run_until(function() return event("allowed") end, 5)
      assert.are.equal("127.0.0.1:" .. tp.port, assert(event("allowed")).via)
    end)

    it("a SOCKS5 CONNECT goes through the parent too", function()
      if not tp then return pending(why) end
      local port = open({ allow = { "localhost" }, upstream_proxy = tp.url })
      local name = "localhost"
      local req = "\5\1\0" .. "\5\1\0\3" .. string.char(#name) .. name
        .. string.char(server.port >> 8, server.port & 0xff)
      local res = wire.exchange(port, req, {
        until_fn = function(r) return r.data:find("BANNER\r\n", 1, true) end,
      })
      assert.are.equal("\5\0", res.data:sub(1, 2))
      assert.are.equal("\5\0", res.data:sub(3, 4), "the request's reply: succeeded")
      assert.truthy(res.data:find("BANNER\r\n", 1, true), res.data)
      assert.truthy(tp.text():find("CONNECT localhost:" .. server.port .. " HTTP/1.1", 1, true), tp.text())
    end)

    it("a host the allowlist refuses never reaches the parent", function()
      if not tp then return pending(why) end
      local port = open({ allow = { "localhost" }, upstream_proxy = tp.url })
      local before = tp.text()
      local res = wire.exchange(port, connect_head("other.example.com:443"))
      assert.are.equal("403", res.status)
      assert.truthy(res.data:find("X-Isolation-Error: not_allowed\r\n", 1, true), res.data)
      res = wire.exchange(port, "GET http://other.example.com/ HTTP/1.1\r\nHost: other.example.com\r\n\r\n")
      assert.are.equal("403", res.status)
      wire.settle(0.3)
      assert.are.equal(before, tp.text())
      assert.is_nil(event("not_allowed").via)
    end)

    it("learn mode admits an unlisted name but not a private IP address: that never reaches the parent", function()
      if not tp then return pending(why) end
      local port = open({ allow = {}, report = true, upstream_proxy = tp.url })
      local before = tp.text()
      local res = wire.exchange(port, connect_head("10.1.2.3:443"))
      assert.are.equal("403", res.status)
      assert.truthy(res.data:find("X-Isolation-Error: private_address\r\n", 1, true), res.data)
      wire.settle(0.3)
      assert.are.equal(before, tp.text())
    end)

    it("SNI is still checked: a ClientHello naming another host closes the tunnel; the parent saw only the CONNECT",
      function()
        if not tp then return pending(why) end
        local cap = wire.capture()
        tp.stop()
        tp, why = start_tinyproxy(dir, { cap.port }, { "^localhost$" })
        assert(tp, why)
        local port = open({ allow = { "localhost" }, upstream_proxy = tp.url })
        local hello = wire.client_hello({ sni = "other.example.net" })
        local res = wire.exchange(port, connect_head("localhost:" .. cap.port), {
          after_head = function(r, send) if r.data:match("^HTTP/1%.1 200") then send({ hello }) end end,
        })
        wire.settle(0.3)
        assert.are.equal("200", res.status)
        assert.is_true(res.eof, "the tunnel was closed")
        assert.truthy(tp.text():find("CONNECT localhost:" .. cap.port .. " HTTP/1.1", 1, true), tp.text())
        assert.are.equal(1, cap.conns, "the parent connected")
        assert.are.equal("", cap.data, "not one byte after the CONNECT")
        assert.are.equal("127.0.0.1:" .. tp.port, assert(event("sni_mismatch")).via)
        -- and the matching name goes through, whole
        local good = wire.client_hello({ sni = "localhost" })
        wire.exchange(port, connect_head("localhost:" .. cap.port), {
          after_head = function(r, send) if r.data:match("^HTTP/1%.1 200") then send({ good }) end end,
          until_fn = function() return #cap.data >= #good end,
        })
        cap.close()
        assert.are.equal(good, cap.data)
      end)

    it("a parent that refuses (its filter) gives 502 upstream_proxy_failed naming its status", function()
      if not tp then return pending(why) end
      local port = open({ allow = { "localhost", "filtered.example.com" }, upstream_proxy = tp.url })
      local res = wire.exchange(port, connect_head("filtered.example.com:" .. server.port))
      assert.are.equal("502", res.status, res.data)
      assert.truthy(res.data:find("X-Isolation-Error: upstream_proxy_failed\r\n", 1, true), res.data)
      assert.truthy(res.data:find("code: upstream_proxy_failed\n", 1, true), res.data)
      assert.truthy(res.data:find("the parent proxy 127.0.0.1:" .. tp.port .. " answered 403 to CONNECT "
        .. "filtered.example.com:" .. server.port, 1, true), res.data)
      assert.truthy(tp.text():find("CONNECT filtered.example.com:" .. server.port, 1, true), tp.text())
      local e = assert(event("upstream_proxy_failed"))
      assert.are.equal("error", e.type)
      assert.are.equal(502, e.status)
    end)

    it("asks for credentials (tinyproxy BasicAuth): 502 without or with wrong ones, through with the right ones",
      function()
        if not tp then return pending(why) end
        tp.stop()
        tp, why = start_tinyproxy(dir, { server.port }, { "^localhost$" }, { "BasicAuth tuser tpass" })
        assert(tp, why)
        local function try(url)
          local port = open({ allow = { "localhost" }, upstream_proxy = url })
          local res = wire.exchange(port, connect_head("localhost:" .. server.port), {
            until_fn = function(r) return r.data:find("BANNER\r\n", 1, true) end, timeout = 5,
          })
          proxy:close()
          proxy = nil
          return res
        end
        local host = "127.0.0.1:" .. tp.port
        for _, url in ipairs({ "http://" .. host, "http://tuser:wrong@" .. host }) do
          local res = try(url)
          assert.are.equal("502", res.status, res.data)
          assert.truthy(res.data:find("the parent proxy " .. host .. " answered 40[17] to CONNECT"), res.data)
          assert.is_nil(res.data:find("wrong", 1, true))
        end
        local res = try("http://tuser:tpass@" .. host)
        assert.are.equal("HTTP/1.1 200 Connection established\r\n\r\nBANNER\r\n", res.data)
        for _, e in ipairs(events) do assert.is_nil(e.reason:find("tpass", 1, true)) end
      end)

    it("isolate --upstream-proxy: curl in a real bwrap sandbox reaches the server through the parent", function()
      if not tp then return pending(why) end
      if not helpers.bwrap_works() then return pending(select(2, helpers.bwrap_works())) end
      local up = cli.upstream()
      tp.stop()
      tp, why = start_tinyproxy(dir, { up.port }, { "^localhost$" })
      assert(tp, why)
      local home = helpers.tmpdir()
      local url = "http://localhost:" .. up.port .. "/through"
      local status, out, err = cli.isolate({ "--workdir", dir, "--no-default-hosts", "--allow-host", "localhost",
        "--upstream-proxy", tp.url, "--", "curl", "-s", "--max-time", "20", "-o", "/dev/null",
        "-w", "%{http_code}\n", url }, { env = { "HOME=" .. home, "TMPDIR=" .. dir } })
      local requests = up.requests()
      up.stop()
      helpers.rmtree(home)
      assert.are.equal(0, status, err)
      assert.are.equal("200\n", out, err)
      assert.are.equal(1, #requests, table.concat(requests, "\n"))
      assert.truthy(tp.text():find("CONNECT localhost:" .. up.port .. " HTTP/1.1", 1, true), tp.text())

      -- a bad URL is a usage error naming the option
      local _
      status, _, err = cli.isolate({ "--workdir", dir, "--upstream-proxy", "http://proxy.example.com", "--", "true" })
      assert.are.equal(2, status)
      assert.truthy(err:find("^isolate: %-%-upstream%-proxy must be \"http://HOST:PORT\""), err)
      assert.truthy(err:find("the port is missing (got \"http://proxy.example.com\")", 1, true), err)
      -- and one that has no effect is refused
      status, _, err = cli.isolate({ "--network", "allow", "--upstream-proxy", tp.url, "--", "true" })
      assert.are.equal(2, status)
      assert.truthy(err:find("--upstream-proxy has no effect here", 1, true), err)
    end)
  end)

  describe("a parent that", function()
    local fake

    after_each(function()
      if fake then fake.close() end
      fake = nil
    end)

    it("is down gives 502 upstream_proxy_failed, the body naming it", function()
      local down = free_port()
      local port = open({ allow = { "up.example.com" }, upstream_proxy = "http://127.0.0.1:" .. down })
      for _, head in ipairs({ connect_head("up.example.com:443"),
        "GET http://up.example.com/ HTTP/1.1\r\nHost: up.example.com\r\n\r\n" }) do
        local res = wire.exchange(port, head)
        assert.are.equal("502", res.status, res.data)
        assert.truthy(res.data:find("X-Isolation-Error: upstream_proxy_failed\r\n", 1, true), res.data)
        assert.truthy(res.data:find("isolation proxy: cannot connect to the parent proxy 127.0.0.1:" .. down
          .. ": connection refused\ncode: upstream_proxy_failed\n", 1, true), res.data)
      end
      assert.are.equal("127.0.0.1:" .. down, assert(event("upstream_proxy_failed")).via)
    end)

    it("sends the server's first bytes in the same write as its 200: each byte is relayed once", function()
      fake = fake_parent(function(c) c:write("HTTP/1.1 200 Connection established\r\nX-A: b\r\n\r\nSSH-2.0-x\r\n") end)
      local port = open({ allow = { "up.example.com" }, upstream_proxy = fake.url })
      local res = wire.exchange(port, connect_head("up.example.com:22"), {
        until_fn = function(r) return r.data:find("SSH-2.0-x\r\n", 1, true) end, timeout = 5,
      })
      assert.are.equal("HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0-x\r\n", res.data)
      assert.are.equal("CONNECT up.example.com:22 HTTP/1.1\r\nHost: up.example.com:22\r\n\r\n", fake.heads[1])
    end)

    it("sends a reply head without end gives 502 once the head passes 8 KiB", function()
      fake = fake_parent(function(c)
        c:write("HTTP/1.1 200 OK\r\n")
        for _ = 1, 200 do c:write("X-Pad: " .. string.rep("a", 60) .. "\r\n") end
      end)
      local port = open({ allow = { "up.example.com" }, upstream_proxy = fake.url })
      local res = wire.exchange(port, connect_head("up.example.com:443"), { timeout = 5 })
      assert.are.equal("502", res.status, res.data)
      assert.truthy(res.data:find("X-Isolation-Error: upstream_proxy_failed\r\n", 1, true), res.data)
      assert.truthy(res.data:find("response head too large", 1, true), res.data)
    end)

    it("answers 407, or garbage, or closes without answering, gives 502; its text is not echoed", function()
      local answers = {
        { "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n", "answered 407" },
        { "SSH-2.0-not-http\r\n\r\n", "malformed status line" },
        { false, "closed the connection without answering" },
      }
      for _, a in ipairs(answers) do
        fake = fake_parent(function(c)
          if a[1] then c:write(a[1]) end
          c:shutdown()
        end)
        local port = open({ allow = { "up.example.com" }, upstream_proxy = fake.url })
        local res = wire.exchange(port, connect_head("up.example.com:443"), { timeout = 5 })
        assert.are.equal("502", res.status, res.data)
        assert.truthy(res.data:find("X-Isolation-Error: upstream_proxy_failed\r\n", 1, true), res.data)
        assert.truthy(res.data:find(a[2], 1, true), res.data)
        assert.is_nil(res.data:find("Proxy-Authenticate", 1, true))
        proxy:close()
        fake.close()
      end
      proxy, fake = nil, nil
    end)

    it("does not answer within connect_timeout gives 504 upstream_proxy_failed", function()
      fake = fake_parent(function() end)
      local port = open({ allow = { "up.example.com" }, upstream_proxy = fake.url, connect_timeout = 0.5 })
      local res = wire.exchange(port, connect_head("up.example.com:443"), { timeout = 5 })
      assert.are.equal("504", res.status, res.data)
      assert.truthy(res.data:find("X-Isolation-Error: upstream_proxy_failed\r\n", 1, true), res.data)
      assert.truthy(res.data:find("the parent proxy did not answer the CONNECT within connect_timeout", 1, true),
        res.data)
      assert.are.equal(1, #fake.heads, "it got the CONNECT")
    end)

    it("is this proxy's own listener is refused (no loop through itself)", function()
      local self_port = free_port()
      local port = open({ allow = { "up.example.com" }, listen = "127.0.0.1:" .. self_port,
        upstream_proxy = "http://127.0.0.1:" .. self_port })
      local res = wire.exchange(port, connect_head("up.example.com:443"), { timeout = 5 })
      assert.are.equal("502", res.status, res.data)
      assert.truthy(res.data:find("this proxy's own listening address", 1, true), res.data)
      assert.are.equal(1, #events)
    end)

    it("is what a session manager's proxies dial (manager option upstream_proxy)", function()
      local session = require("isolation.session")
      -- the sanitizer build has no bridge program beside it: the normal build's
      local BRIDGE = isolation.BRIDGE or cli.ROOT .. "/build/isolation-bridge"
      fake = fake_parent(function(c) c:write("HTTP/1.1 200 OK\r\n\r\nhello") end)
      assert(uv.fs_mkdir(dir .. "/work", tonumber("700", 8)))
      local mgr = assert(session.manager({ runtime_dir = dir .. "/run", launcher = function() return {} end,
        upstream_proxy = fake.url }))
      local s = assert(mgr:launch({ id = "s1", workdir = dir .. "/work", command = "true",
        bridge = "builtin", bridge_path = BRIDGE,
        default_hosts = false, isolation = { mode = "bwrap", network = "deny", allow_hosts = { "up.example.com" } } }))
      local reply = cli.unix_request(s.proxy_socket, connect_head("up.example.com:443"), 5)
      local refused = cli.unix_request(s.proxy_socket, connect_head("other.example.com:443"), 5)
      mgr:close()
      assert.are.equal("HTTP/1.1 200 Connection established\r\n\r\nhello", reply)
      assert.truthy(refused:find("^HTTP/1%.1 403"), refused)
      assert.are.same({ "CONNECT up.example.com:443 HTTP/1.1\r\nHost: up.example.com:443\r\n\r\n" }, fake.heads)
      -- a bad value: the launch says which field
      mgr = assert(session.manager({ runtime_dir = dir .. "/run2", launcher = function() return {} end,
        upstream_proxy = "http://proxy.example.com" }))
      local ok, err = mgr:launch({ id = "s2", workdir = dir .. "/work", command = "true",
        bridge = "builtin", bridge_path = BRIDGE,
        isolation = { mode = "bwrap", network = "deny", allow_hosts = { "up.example.com" } } })
      mgr:close()
      assert.is_nil(ok)
      assert.truthy(tostring(err):find("upstream_proxy must be", 1, true), err)
    end)

    it("gets the URL's user:password@ as Proxy-Authorization: Basic (percent-decoded), named nowhere else",
      function()
        fake = fake_parent(function(c) c:write("HTTP/1.1 200 OK\r\n\r\n") end)
        local log = dir .. "/audit.jsonl"
        local port = open({ allow = { "up.example.com" }, audit_log = log,
          upstream_proxy = "http://us%40er:p%3Ass:w@127.0.0.1:" .. fake.port })
        local res = wire.exchange(port, connect_head("up.example.com:443"), {
          until_fn = function(r) return r.data:find("\r\n\r\n", 1, true) end, timeout = 5,
        })
        assert.are.equal("200", res.status)
        proxy:close()
        proxy = nil
        assert.are.equal("CONNECT up.example.com:443 HTTP/1.1\r\nHost: up.example.com:443\r\n"
          .. "Proxy-Authorization: Basic dXNAZXI6cDpzczp3\r\n\r\n", fake.heads[1])
        local text = helpers.read(log)
        assert.truthy(text:find('"via":"127.0.0.1:' .. fake.port .. '"', 1, true), text)
        for _, e in ipairs(events) do assert.are.equal("127.0.0.1:" .. fake.port, e.via) end
        for _, secret in ipairs({ "p%3Ass", "p:ss", "dXNAZXI6cDpzczp3", "us%40er" }) do
          assert.is_nil(text:find(secret, 1, true), secret)
          assert.is_nil(res.data:find(secret, 1, true), secret)
        end
      end)

    it("is named in the audit log's lines (via)", function()
      fake = fake_parent(function(c) c:write("HTTP/1.1 200 OK\r\n\r\n") end)
      local log = dir .. "/audit.jsonl"
      local port = open({ allow = { "up.example.com" }, upstream_proxy = fake.url, audit_log = log, session = "s1" })
      wire.exchange(port, connect_head("up.example.com:443"), {
        until_fn = function(r) return r.status or r.data:find("\r\n\r\n", 1, true) end, timeout = 5,
      })
      proxy:close()
      proxy = nil
      local lines = helpers.read_json_lines(log)
      assert.are.equal(1, #lines)
      assert.are.equal("allowed", lines[1].code)
      assert.are.equal("127.0.0.1:" .. fake.port, lines[1].via)
    end)
  end)
end)
