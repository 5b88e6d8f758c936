-- The SNI check through the real proxy: with sni = "match", a ClientHello in
-- a CONNECT tunnel that names another host closes the tunnel before a byte
-- reaches the upstream; the same name (any case, one trailing dot) is
-- relayed verbatim, whole or in pieces; no SNI and non-TLS bytes are
-- relayed; sni = "off" relays everything.
local uv = require("luv")
local isolation = require("isolation")
local wire = require("support.parsers")

describe("proxy SNI check (wire)", function()
  local cap, proxy, events, port

  local function open(sni)
    events = {}
    local err
    proxy, err = isolation.proxy({
      allow = { "up.example.com", "127.0.0.1" },
      listen = "127.0.0.1:0",
      loop = uv,
      sni = sni,
      on_event = function(e) events[#events + 1] = e end,
      resolve = { ["up.example.com"] = { "127.0.0.1" } },
    })
    assert.is_truthy(proxy, err)
    port = proxy:port()
  end

  before_each(function() cap = wire.capture() end)

  after_each(function()
    if proxy then proxy:close() end
    proxy = nil
    cap.close()
    wire.settle(0.05)
  end)

  -- CONNECT to target, then (after the 200) the tunnel bytes in pieces.
  local function tunnel(target, pieces, opts)
    opts = opts or {}
    if type(pieces) == "string" then pieces = { pieces } end
    local head = "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n"
    return wire.exchange(port, head, {
      gap = opts.gap,
      timeout = opts.timeout or 10,
      after_head = function(res, send)
        if res.data:match("^HTTP/1%.1 200") then send(pieces) end
      end,
      until_fn = opts.until_fn,
    })
  end

  local function upstream_gets(bytes)
    return function() return #cap.data >= #bytes end
  end

  -- The tunnel was closed and not one byte reached the upstream.
  local function assert_closed_unrelayed(res)
    wire.settle(0.1)
    assert.is_true(res.eof, "the tunnel was closed")
    assert.are.equal("", cap.data)
  end

  local function deny_event_about_sni()
    for _, e in ipairs(events) do
      if e.type == "deny" and type(e.reason) == "string"
        and (e.reason:lower():find("sni", 1, true) or e.reason:lower():find("server name", 1, true)) then
        return e
      end
    end
  end

  it("closes a tunnel whose ClientHello names another host, before any byte reaches upstream", function()
    open("match")
    local hello = wire.client_hello({ sni = "other.example.net" })
    local res = tunnel("up.example.com:" .. cap.port, hello)
    wire.settle(0.1)
    assert.are.equal("200", res.status, "no answer to the CONNECT: " .. res.data)
    assert.is_true(res.eof, "the tunnel was closed")
    assert.are.equal("", cap.data)
    local e = deny_event_about_sni()
    assert.is_truthy(e, "a deny event whose reason names the SNI")
    assert.truthy(e.reason:find("other.example.net", 1, true))
  end)

  it("relays a ClientHello naming the CONNECT host verbatim (case and trailing dot ignored)", function()
    open("match")
    for _, name in ipairs({ "up.example.com", "UP.Example.COM", "up.example.com." }) do
      cap.reset()
      local hello = wire.client_hello({ sni = name })
      tunnel("up.example.com:" .. cap.port, hello, { until_fn = upstream_gets(hello) })
      wire.run_until(upstream_gets(hello), 10)
      assert.are.equal(hello, cap.data, name)
    end
    assert.is_nil(deny_event_about_sni())
  end)

  it("reassembles a hello split over several writes and several records", function()
    open("match")
    local hello = wire.client_hello({ sni = "up.example.com", record_size = 40 })
    tunnel("up.example.com:" .. cap.port, wire.pieces(hello, 7),
      { gap = 0.01, until_fn = upstream_gets(hello) })
    wire.run_until(upstream_gets(hello), 10)
    assert.are.equal(hello, cap.data)

    cap.reset()
    local bad = wire.client_hello({ sni = "other.example.net", record_size = 40 })
    local res = tunnel("up.example.com:" .. cap.port, wire.pieces(bad, 7), { gap = 0.01 })
    assert_closed_unrelayed(res)
  end)

  it("relays a hello without SNI and bytes that are not TLS", function()
    open("match")
    local hello = wire.client_hello({})
    tunnel("up.example.com:" .. cap.port, hello, { until_fn = upstream_gets(hello) })
    wire.run_until(upstream_gets(hello), 10)
    assert.are.equal(hello, cap.data)

    cap.reset()
    local text = "SSH-2.0-OpenSSH_9.2\r\n"
    tunnel("up.example.com:" .. cap.port, text, { until_fn = upstream_gets(text) })
    wire.run_until(upstream_gets(text), 10)
    assert.are.equal(text, cap.data)
  end)

  it("refuses any SNI in a tunnel to an IP literal", function()
    open("match")
    local hello = wire.client_hello({ sni = "up.example.com" })
    local res = tunnel("127.0.0.1:" .. cap.port, hello)
    assert_closed_unrelayed(res)
    assert.is_truthy(deny_event_about_sni())
  end)

  it("checks a hello sent in the same write as the CONNECT head", function()
    open("match")
    local target = "up.example.com:" .. cap.port
    local head = "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n"
    local res = wire.exchange(port, head .. wire.client_hello({ sni = "other.example.net" }), { timeout = 10 })
    assert_closed_unrelayed(res)
    assert.is_truthy(deny_event_about_sni())

    cap.reset()
    local hello = wire.client_hello({ sni = "up.example.com" })
    wire.exchange(port, head .. hello, { timeout = 10, until_fn = upstream_gets(hello) })
    wire.run_until(upstream_gets(hello), 10)
    assert.are.equal(hello, cap.data)
  end)

  it("closes a tunnel on a malformed or oversized ClientHello", function()
    open("match")
    local hello = wire.client_hello({ sni = "up.example.com" })
    -- the server_name list length one byte short: the lengths disagree
    local at = hello:find("up.example.com", 1, true)
    local broken = hello:sub(1, at - 5) .. string.char(hello:byte(at - 4) - 1) .. hello:sub(at - 3)
    local res = tunnel("up.example.com:" .. cap.port, broken)
    assert_closed_unrelayed(res)

    -- a hello that claims 20000 bytes in records: more than the proxy reads
    local big = string.char(22, 3, 1, 0x40, 0x00, 1, 0, 0x4e, 0x20) .. string.rep("\0", 16380)
      .. string.char(22, 3, 1, 0x40, 0x00) .. string.rep("\0", 16384)
    res = tunnel("up.example.com:" .. cap.port, wire.pieces(big, 4096))
    assert_closed_unrelayed(res)
  end)

  it("relays every hello with sni = \"off\"", function()
    open("off")
    local hello = wire.client_hello({ sni = "other.example.net" })
    tunnel("up.example.com:" .. cap.port, hello, { until_fn = upstream_gets(hello) })
    wire.run_until(upstream_gets(hello), 10)
    assert.are.equal(hello, cap.data)
    assert.is_nil(deny_event_about_sni())
  end)
end)

-- The same check against a real TLS client: openssl s_client speaks CONNECT
-- to the proxy itself, then sends the ClientHello OpenSSL builds. The proxy
-- runs in thread mode here (s_client blocks this thread) and the upstream
-- is the counting child process of support.upstream.
describe("proxy SNI check with openssl s_client", function()
  local helpers = require("helpers")
  local upstream = require("support.upstream")
  local have_openssl = helpers.run("command -v openssl") == 0
  if not have_openssl then
    io.stderr:write("SKIP (openssl s_client): openssl is not installed\n")
    return
  end

  local up, proxy
  before_each(function()
    up = upstream.start()
    proxy = assert(isolation.proxy({
      allow = { "up.example.com", "127.0.0.1" },
      listen = "127.0.0.1:0",
      resolve = { ["up.example.com"] = { "127.0.0.1" } },
    }))
  end)
  after_each(function()
    proxy:close()
    up:stop()
  end)

  local function s_client(servername)
    return helpers.run(("timeout 15 openssl s_client -proxy 127.0.0.1:%d -connect up.example.com:%d "
      .. "-servername %s"):format(proxy:port(), up.raw_port, helpers.shquote(servername)))
  end

  it("closes the tunnel when the hello names another host; relays it when it names the CONNECT host", function()
    s_client("other.example.net")
    local denied
    for _, e in ipairs(proxy:events()) do
      if e.type == "deny" and e.reason:find("other.example.net", 1, true) then denied = e end
    end
    assert.is_truthy(denied, "a deny event naming the hello's server name")
    assert.is_false(up:wait(function(s) return s.bytes_in > 0 end, 1), "bytes reached the upstream")

    s_client("UP.Example.com.")
    assert.is_true(up:wait(function(s) return s.bytes_in > 0 end, 5),
      "the hello naming the CONNECT host reached the upstream")
    for _, e in ipairs(proxy:events()) do
      assert.are_not.equal("deny", e.type, e.reason)
    end
  end)
end)
