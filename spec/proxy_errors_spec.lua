-- Denials the agent can read: every reply the proxy makes itself carries
-- X-Isolation-Error with the code its event has, and a short text/plain
-- body naming the reason, the code, the host and port, and for
-- not_allowed / private_address the isolate option that would admit it.
-- Nothing the client sent reaches the reply's head, and the body has its
-- bytes escaped: a forged host or header with CR LF cannot split the
-- response. SOCKS5 refusals keep the reply code that says why.
local uv = require("luv")
local isolation = require("isolation")
local upstream = require("support.upstream")
local W = require("support.proxy")
local helpers = require("helpers")

-- The head's header lines as an array of {name, value}, the body, and the
-- number of status lines in the whole reply.
local function parse(data)
  local head, body = data:match("^(.-)\r\n\r\n(.*)$")
  assert(head, "no complete head in: " .. data:sub(1, 200))
  local headers = {}
  for line in (head .. "\r\n"):gmatch("(.-)\r\n") do
    local name, value = line:match("^([^:]+): (.*)$")
    if name then headers[#headers + 1] = { name:lower(), value } end
  end
  local _, statuses = data:gsub("HTTP/1%.1 %d%d%d", "")
  return headers, body, statuses
end

local function header(headers, name)
  local found
  for _, h in ipairs(headers) do
    if h[1] == name then
      assert.is_nil(found, "two " .. name .. " headers")
      found = h[2]
    end
  end
  return found
end

-- Checks one error reply: status, X-Isolation-Error = code (and the event's
-- code), exact Content-Length, text/plain, the body's lines.
local function check(data, status, code, host, events)
  assert.are.equal(status, tonumber(data:match("^HTTP/1%.1 (%d%d%d)")), data:sub(1, 300))
  local headers, body, statuses = parse(data)
  assert.are.equal(1, statuses, "one response: " .. data)
  assert.are.equal(code, header(headers, "x-isolation-error"))
  assert.are.equal("text/plain; charset=utf-8", header(headers, "content-type"))
  assert.are.equal(#body, tonumber(header(headers, "content-length")))
  assert.is_nil(body:find("\r", 1, true), "a CR in the body")
  assert.matches("^isolation proxy: [^\n]+\ncode: " .. code .. "\n", body)
  if host == "" then
    assert.truthy(body:find("\nhost: ", 1, true), body) -- some host; which one is the case's
  elseif host then
    assert.truthy(body:find("\nhost: " .. host .. "\n", 1, true), body)
  else
    assert.is_nil(body:find("\nhost: ", 1, true), body)
  end
  if events then
    local last = events[#events]
    assert.is_truthy(last, "no event")
    assert.are.equal(code, last.code)
    assert.are.equal(status, last.status)
  end
  return body, headers
end

describe("isolation.proxy error replies", function()
  local up, p, events

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  local function proxy(opts)
    opts = opts or {}
    opts.listen = "127.0.0.1:0"
    opts.loop = uv
    opts.allow = opts.allow or { "up.example.com", "127.0.0.1" }
    opts.resolve = opts.resolve or { ["up.example.com"] = { "127.0.0.1" }, ["inside.example.net"] = { "10.9.8.7" } }
    events = {}
    opts.on_event = function(e) events[#events + 1] = e end
    p = assert(isolation.proxy(opts))
    return p
  end

  after_each(function()
    if p then p:close() end
    p = nil
    W.settle(0.05)
  end)

  local function ask(raw, timeout)
    local c = W.exchange(p:address(), raw, timeout or 5)
    W.settle(0.05)
    return c.data
  end

  it("403 not_allowed names the host and port and the --allow-host that admits it", function()
    proxy()
    local body = check(ask("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"), 403,
      "not_allowed", "example.com:443", events)
    assert.truthy(body:find("\nto allow it: isolate --allow-host example.com:443\n", 1, true), body)
    -- a forward request, and an IPv6 literal (bracketed in the option)
    body = check(ask("GET http://example.net:8080/x HTTP/1.1\r\nHost: example.net:8080\r\n\r\n"), 403,
      "not_allowed", "example.net:8080", events)
    assert.truthy(body:find("isolate --allow-host example.net:8080\n", 1, true), body)
    body = check(ask("CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"), 403,
      "not_allowed", "[2001:db8::1]:443", events)
    assert.truthy(body:find("isolate --allow-host [2001:db8::1]:443\n", 1, true), body)
    assert.truthy(body:find("^isolation proxy: host %[2001:db8::1%]:443 is not in the allowlist\n"), body)
    assert.are.equal("host [2001:db8::1]:443 is not in the allowlist", events[#events].reason)
  end)

  it("403 private_address names the address and both options that admit it", function()
    proxy({ allow = { "up.example.com", "inside.example.net" } })
    local body = check(ask("CONNECT inside.example.net:443 HTTP/1.1\r\nHost: inside.example.net:443\r\n\r\n"),
      403, "private_address", "inside.example.net:443", events)
    assert.truthy(body:find("10.9.8.7", 1, true), body)
    assert.truthy(body:find("\nto allow it: isolate --allow-private (every private address), or "
      .. "--allow-host 10.9.8.7:443 (this address)\n", 1, true), body)
  end)

  it("400 bad_request, 414 and 431 too_large, 501 and 505", function()
    proxy({ max_header_bytes = 4096 })
    check(ask("GET /origin-form HTTP/1.1\r\nHost: up.example.com\r\n\r\n"), 400, "bad_request", nil, events)
    check(ask("GET http://up.example.com:" .. up.http_port .. "/ HTTP/1.1\r\nHost: up.example.com:"
      .. up.http_port .. "\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"), 400, "bad_request", nil, events)
    check(ask("GET http://up.example.com/" .. string.rep("a", 5000) .. " HTTP/1.1\r\n\r\n"), 414, "too_large", nil,
      events)
    check(ask("GET http://up.example.com/ HTTP/1.1\r\nHost: up.example.com\r\n"
      .. string.rep("X-Pad: 0123456789abcdef\r\n", 300) .. "\r\n"), 431, "too_large", nil, events)
    local data = ask("GET http://up.example.com/ HTTP/2.0\r\nHost: up.example.com\r\n\r\n")
    local status = tonumber(data:match("^HTTP/1%.1 (%d%d%d)"))
    check(data, status, status == 505 and "bad_version" or "bad_request", nil, events)
  end)

  it("407 auth_required keeps Proxy-Authenticate and adds the code", function()
    proxy({ token = "s3cret-token-0123456789" })
    local _, headers = check(ask("CONNECT up.example.com:443 HTTP/1.1\r\nHost: up.example.com:443\r\n\r\n"), 407,
      "auth_required", "up.example.com:443", events)
    assert.are.equal('Basic realm="isolation"', header(headers, "proxy-authenticate"))
  end)

  it("408 header_timeout names no host, not even the last request's on a kept connection", function()
    proxy({ header_timeout = 0.5 })
    local c = W.connect(p:address())
    c:send("GET http://up.example.com:" .. up.http_port .. "/hello HTTP/1.1\r\nHost: up.example.com:"
      .. up.http_port .. "\r\n\r\n")
    assert.is_true(c:wait(function(cc) return cc.data:find("\r\n\r\n", 1, true) ~= nil end, 5))
    W.settle(0.3)
    c.data = ""
    c:send("GET http://up.example.com:" .. up.http_port .. "/x HTTP/1.1\r\n")
    assert.is_true(c:wait_eof(5))
    c:close()
    check(c.data:match("HTTP/1%.1 408.*$") or c.data, 408, "header_timeout", nil, events)
  end)

  it("502 connect_failed and dns_failed name the host", function()
    proxy()
    local port = W.closed_port()
    check(ask("CONNECT 127.0.0.1:" .. port .. " HTTP/1.1\r\nHost: 127.0.0.1:" .. port .. "\r\n\r\n"), 502,
      "connect_failed", "127.0.0.1:" .. port, events)
    p:close()
    proxy({ allow = { "*.invalid" }, dns_timeout = 3 })
    local data = ask("CONNECT nowhere.invalid:443 HTTP/1.1\r\nHost: nowhere.invalid:443\r\n\r\n", 10)
    local status = tonumber(data:match("^HTTP/1%.1 (%d%d%d)"))
    -- a resolver that does not answer in time gives dns_timeout instead
    check(data, status, status == 502 and "dns_failed" or "dns_timeout", "nowhere.invalid:443", events)
  end)

  it("503 too_many over max_connections", function()
    proxy({ max_connections = 1 })
    local a = W.connect(p:address())
    a:send("CONNECT up.example.com:" .. up.raw_port .. " HTTP/1.1\r\n")
    W.settle(0.1)
    check(ask("CONNECT up.example.com:443 HTTP/1.1\r\nHost: up.example.com\r\n\r\n"), 503, "too_many", nil, events)
    a:close()
  end)

  it("504 connect_timeout names the host", function()
    -- a child's listener that never accepts, its backlog filled
    local port, release = W.stalled_port()
    proxy({ connect_timeout = 1 })
    local data = ask("CONNECT 127.0.0.1:" .. port .. " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 10)
    release()
    check(data, 504, "connect_timeout", "127.0.0.1:" .. port, events)
  end)

  it("a forged host or header with CR LF never splits the reply or reaches its head", function()
    proxy()
    local forged = {
      "CONNECT evil.example.com\r\nX-Evil: 1:443 HTTP/1.1\r\n\r\n",
      "CONNECT evil.example.com:443\r\nX-Evil: 1 HTTP/1.1\r\n\r\n",
      "GET http://evil.example.com\r\nX-Evil: 1/ HTTP/1.1\r\n\r\n",
      "GET http://evil.example.com/ HTTP/1.1\r\nHost: evil.example.com\rX-Evil: 1\r\n\r\n",
      "GET http://evil.example.com/ HTTP/1.1\r\nHost: evil.example.com\nX-Evil: 1\r\n\r\n",
      "GET http://evil.example.com/ HTTP/1.1\r\nHost: evil.example.com\0X-Evil: 1\r\n\r\n",
      "CONNECT evil%0d%0aX-Evil:1.example.com:443 HTTP/1.1\r\n\r\n",
      "GET http://evil.example.com/\r\n\r\nHTTP/1.1 200 OK\r\nX-Evil: 1\r\n\r\n HTTP/1.1\r\n\r\n",
    }
    for i, raw in ipairs(forged) do
      local data = ask(raw)
      local status = tonumber(data:match("^HTTP/1%.1 (%d%d%d)"))
      assert.is_truthy(status == 400 or status == 403, "case " .. i .. ": " .. data)
      check(data, status, status == 400 and "bad_request" or "not_allowed", status == 403 and "" or nil)
      local heads = parse(data)
      for _, h in ipairs(heads) do
        assert.is_truthy(h[1] == "x-isolation-error" or h[1] == "content-type" or h[1] == "content-length"
          or h[1] == "connection", "case " .. i .. ": header " .. h[1])
      end
      -- no line of the reply starts with the forged header
      assert.is_nil(("\n" .. data):lower():find("\nx%-evil"), "case " .. i .. ": " .. data)
    end
  end)
end)

describe("isolation.proxy SOCKS5 reply codes", function()
  local up

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  local socks5 = require("support.socks5")
  local be16, by_name = socks5.be16, socks5.by_name

  -- The SOCKS reply code for one request (nil: closed without a reply).
  local function rep(p, req, timeout)
    local c = W.connect(p:address())
    c:send("\5\1\0")
    c:wait(function(cc) return #cc.data >= 2 or cc.eof end, 3)
    c:send(req)
    c:wait(function(cc) return #cc.data >= 12 or cc.eof end, timeout or 5)
    local code = #c.data >= 12 and c.data:byte(4) or nil
    c:close()
    return code
  end

  local function socks_proxy(opts)
    opts.listen = "127.0.0.1:0"
    opts.loop = uv
    local evs = {}
    opts.on_event = function(e) evs[#evs + 1] = e end
    local px = assert(isolation.proxy(opts))
    -- events() in luv mode: what on_event was given
    return setmetatable({ events = function()
      local t = evs
      evs = {}
      return t
    end }, { __index = function(_, k) return function(_, ...) return px[k](px, ...) end end })
  end

  it("0x02 for not_allowed and private_address, 0x05 for a refused port, 0x07 for BIND", function()
    local p = socks_proxy({ allow = { "inside.example.net", "127.0.0.1" },
      resolve = { ["inside.example.net"] = { "10.9.8.7" } } })
    assert.are.equal(2, rep(p, by_name("example.com", 443)))
    assert.are.equal(2, rep(p, by_name("inside.example.net", 443)))
    local ev = p:events()
    assert.are.equal("not_allowed", ev[1].code)
    assert.are.equal("private_address", ev[2].code)
    assert.are.equal(5, rep(p, "\5\1\0\1\127\0\0\1" .. be16(W.closed_port())))
    assert.are.equal(7, rep(p, "\5\2\0\1\127\0\0\1" .. be16(up.raw_port)))
    p:close()
  end)

  it("0x04 host unreachable when the name does not resolve (0x06 if the resolver times out)", function()
    local p = socks_proxy({ allow = { "*.invalid" }, dns_timeout = 3 })
    local code = rep(p, by_name("nowhere.invalid", 443), 10)
    local ev = p:events()
    local want = ev[#ev] and ev[#ev].code == "dns_timeout" and 6 or 4
    assert.are.equal(want, code)
    p:close()
  end)

  it("0x06 TTL expired when the dial times out", function()
    local port, release = W.stalled_port()
    local p = socks_proxy({ allow = { "127.0.0.1" }, allow_private = true, connect_timeout = 1 })
    local code = rep(p, "\5\1\0\1\127\0\0\1" .. be16(port), 10)
    release()
    assert.are.equal(6, code)
    local ev = p:events()
    assert.are.equal("connect_timeout", ev[#ev].code)
    p:close()
  end)

  it("0x03 network unreachable in a network namespace with no route (real bwrap)", function()
    if not helpers.bwrap_works() then
      pending("bwrap cannot create namespaces here")
      return
    end
    -- The proxy runs inside a fresh network namespace where only loopback
    -- exists: a dial to 192.0.2.1 (TEST-NET-1) fails with ENETUNREACH at
    -- once, and no packet leaves this machine.
    local script = [[
      local uv = require("luv"); local isolation = require("isolation")
      local p = assert(isolation.proxy({ allow = { "192.0.2.1" }, allow_private = true,
        listen = "127.0.0.1:0", loop = uv }))
      local c = uv.new_tcp(); local got = ""
      c:connect("127.0.0.1", p:port(), function(err)
        assert(not err, err)
        c:read_start(function(_, chunk)
          if chunk then got = got .. chunk end
          if not chunk or #got >= 12 then c:read_stop(); c:close(); p:close() end
        end)
        c:write("\5\1\0\5\1\0\1\192\0\2\1\1\187")
      end)
      local t = uv.new_timer(); t:start(5000, 0, function() os.exit(3) end); t:unref()
      uv.run()
      io.write(#got >= 12 and got:byte(4) or -1, "\n")]]
    local cwd = assert(uv.cwd())
    local cmd = "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-net --chdir " .. helpers.shquote(cwd)
      .. " -- " .. helpers.NO_SANITIZER .. "LUA_CPATH=" .. helpers.shquote(cwd .. "/build/?.so;;")
      .. " lua5.4 -e " .. helpers.shquote(script)
    local code, out, err = helpers.run(cmd)
    assert.are.equal(0, code, err)
    assert.are.equal("3", out:match("%-?%d+"), err)
  end)
end)
