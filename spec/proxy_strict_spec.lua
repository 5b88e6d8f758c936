-- Strict parsing through the real proxy: every refusal the wire rules
-- promise, over a real socket, with a counting upstream that a lenient
-- proxy would have reached. Each refusal must answer with the right status
-- line AND leave the upstream without a connection or a byte.
local uv = require("luv")
local isolation = require("isolation")
local wire = require("support.parsers")

describe("proxy strict parsing (wire)", function()
  local cap, proxy, events, port

  before_each(function()
    cap = wire.capture({ http = true })
    events = {}
    local err
    proxy, err = isolation.proxy({
      allow = { "up.example.com", "127.0.0.1" },
      listen = "127.0.0.1:0",
      loop = uv,
      on_event = function(e) events[#events + 1] = e end,
      resolve = { ["up.example.com"] = { "127.0.0.1" } },
      max_header_bytes = 16384,
    })
    assert.is_truthy(proxy, err)
    port = proxy:port()
  end)

  after_each(function()
    if proxy then proxy:close() end
    cap.close()
    wire.settle(0.05)
  end)

  -- Sends raw bytes; expects the status and that nothing reached upstream.
  local function refused(raw, status)
    local res = wire.exchange(port, raw, { timeout = 10 })
    wire.settle(0.1)
    assert.are.equal(status, res.status, "response to " .. raw:sub(1, 80) .. ": " .. res.data:sub(1, 80))
    assert.are.equal(0, cap.conns, "upstream connected for " .. raw:sub(1, 80))
    assert.are.equal("", cap.data)
    return res
  end

  local function up(path) return "http://up.example.com:" .. cap.port .. (path or "/") end
  local function host() return "Host: up.example.com:" .. cap.port .. "\r\n" end

  it("relays a well-formed forward request (the control for every refusal)", function()
    local res = wire.exchange(port, "GET " .. up("/ok") .. " HTTP/1.1\r\n" .. host()
      .. "Connection: close\r\n\r\n")
    assert.are.equal("200", res.status)
    assert.are.equal(1, cap.conns)
    assert.truthy(cap.data:find("^GET /ok HTTP/1%.1\r\n"))
  end)

  it("refuses request targets and authorities it cannot read unambiguously", function()
    local cases = {
      "GET /ok HTTP/1.1\r\n" .. host() .. "\r\n",                        -- origin-form
      "GET https://up.example.com:" .. cap.port .. "/ HTTP/1.1\r\n" .. host() .. "\r\n",
      "GET http://user@up.example.com:" .. cap.port .. "/ HTTP/1.1\r\n" .. host() .. "\r\n",
      "GET http://up.example.com\\@127.0.0.1:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "GET http://up%2eexample.com:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "GET http://up.example.com:0/ HTTP/1.1\r\nHost: up.example.com:0\r\n\r\n",
      "GET http://up.example.com:65536/ HTTP/1.1\r\n\r\n",
      "GET http://up.example.com:abc/ HTTP/1.1\r\n\r\n",
      "GET http://up.example.com:/ HTTP/1.1\r\n\r\n",
      "GET http://127.1:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "GET http://2130706433:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "GET http://0x7f000001:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "GET http://0177.0.0.1:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "CONNECT up.example.com HTTP/1.1\r\nHost: up.example.com\r\n\r\n",
      "CONNECT http://up.example.com:" .. cap.port .. "/ HTTP/1.1\r\n\r\n",
      "CONNECT up.example.com:" .. cap.port .. "/x HTTP/1.1\r\n\r\n",
    }
    for _, raw in ipairs(cases) do refused(raw, "400") end
  end)

  it("refuses a missing, doubled or contradicting Host", function()
    refused("GET " .. up() .. " HTTP/1.1\r\n\r\n", "400")
    refused("GET " .. up() .. " HTTP/1.1\r\n" .. host() .. host() .. "\r\n", "400")
    refused("GET " .. up() .. " HTTP/1.1\r\nHost: 127.0.0.1:" .. cap.port .. "\r\n\r\n", "400")
    refused("GET " .. up() .. " HTTP/1.1\r\nHost: up.example.com:1\r\n\r\n", "400")
    refused("CONNECT up.example.com:" .. cap.port .. " HTTP/1.1\r\nHost: other.example.net:"
      .. cap.port .. "\r\n\r\n", "400")
  end)

  it("never lets the upstream see the name a contradicting Host header gives", function()
    refused("GET " .. up() .. " HTTP/1.1\r\nHost: other.example.net\r\n\r\n", "400")
    assert.is_nil(cap.data:find("other.example.net", 1, true))
    -- and a valid request on a new connection carries the URI's host only
    wire.exchange(port, "GET " .. up() .. " HTTP/1.1\r\n" .. host() .. "Connection: close\r\n\r\n")
    assert.truthy(cap.data:find("\r\nHost: up.example.com:" .. cap.port .. "\r\n", 1, true))
    assert.is_nil(cap.data:find("other.example.net", 1, true))
  end)

  it("refuses ambiguous body framing", function()
    local pre = "POST " .. up() .. " HTTP/1.1\r\n" .. host()
    refused(pre .. "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", "400")
    refused(pre .. "Transfer-Encoding: gzip, chunked\r\n\r\n", "400")
    refused(pre .. "Transfer-Encoding: identity\r\n\r\n", "400")
    refused(pre .. "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "400")
    refused(pre .. "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "400")
    refused(pre .. "Content-Length: 3, 3\r\n\r\nabc", "400")
    refused(pre .. "Content-Length: abc\r\n\r\n", "400")
    refused(pre .. "Content-Length: -1\r\n\r\n", "400")
  end)

  it("refuses a Transfer-Encoding other than exactly chunked, and relays exactly chunked", function()
    local pre = "POST " .. up() .. " HTTP/1.1\r\n" .. host()
    local body = "\r\n5\r\nhello\r\n0\r\n\r\n"
    for _, te in ipairs({ " Chunked", " CHUNKED", " chunked ", "\tchunked", "  chunked", " chunked;q=1",
      " chunked, chunked", " x-chunked" }) do
      refused(pre .. "Transfer-Encoding:" .. te .. "\r\n" .. body, "400")
    end
    local res = wire.exchange(port, pre .. "Connection: close\r\nTransfer-Encoding: chunked\r\n" .. body)
    assert.are.equal("200", res.status)
    assert.are.equal(1, cap.conns)
  end)

  it("refuses NUL, bare CR, bare LF, whitespace before a colon, folding, bad tokens", function()
    local pre = "GET " .. up() .. " HTTP/1.1\r\n" .. host()
    refused(pre .. "X-A: a\0b\r\n\r\n", "400")
    refused(pre .. "X-A: a\rb\r\n\r\n", "400")
    refused(pre .. "X-A: a\nX-B: b\r\n\r\n", "400")
    refused("GET " .. up() .. " HTTP/1.1\n" .. host() .. "\r\n", "400")
    refused(pre .. "X-A : a\r\n\r\n", "400")
    refused(pre .. "X-A: a\r\n folded\r\n\r\n", "400")
    refused(pre .. "X(A): a\r\n\r\n", "400")
    refused("G@T " .. up() .. " HTTP/1.1\r\n" .. host() .. "\r\n", "400")
  end)

  it("answers 414 for an oversized request line and 431 for an oversized head", function()
    refused("GET " .. up("/" .. string.rep("a", 9000)) .. " HTTP/1.1\r\n" .. host() .. "\r\n", "414")
    refused("GET " .. up() .. " HTTP/1.1\r\n" .. host() .. "X-Pad: " .. string.rep("b", 20000)
      .. "\r\n\r\n", "431")
  end)

  it("answers 414, not 431, for a request line longer than max_header_bytes", function()
    -- a request line that cannot fit in the head limit is an oversized
    -- request line, whichever of the two limits it passes first
    proxy:close()
    proxy = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0", loop = uv,
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, max_header_bytes = 4096 }))
    port = proxy:port()
    local line = "GET " .. up("/" .. string.rep("a", 5000)) .. " HTTP/1.1\r\n"
    refused(line .. host() .. "\r\n", "414")
    refused("CONNECT " .. string.rep("a", 5000) .. ".example.com:443 HTTP/1.1\r\n\r\n", "414")
    -- a short line with a head over the limit stays 431
    refused("GET " .. up() .. " HTTP/1.1\r\n" .. host() .. "X-Pad: " .. string.rep("b", 5000)
      .. "\r\n\r\n", "431")
  end)

  it("refuses a CONNECT with a body, and versions other than HTTP/1.0 and 1.1", function()
    refused("CONNECT up.example.com:" .. cap.port .. " HTTP/1.1\r\n" .. host()
      .. "Content-Length: 5\r\n\r\nhello", "400")
    refused("GET " .. up() .. " HTTP/2.0\r\n" .. host() .. "\r\n", "505")
  end)

  it("refuses protocol upgrades with 501", function()
    refused("GET " .. up() .. " HTTP/1.1\r\n" .. host()
      .. "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "501")
  end)

  it("denies a CONNECT and sends the bytes pipelined behind it nowhere", function()
    local res = refused("CONNECT denied.example.net:" .. cap.port .. " HTTP/1.1\r\nHost: denied.example.net:"
      .. cap.port .. "\r\n\r\nGET " .. up("/smuggled") .. " HTTP/1.1\r\n" .. host() .. "\r\n", "403")
    assert.is_true(res.eof, "the proxy closes the connection after the refusal")
    -- exactly one response: the pipelined request was not answered
    local _, count = res.data:gsub("HTTP/1%.1 %d%d%d", "")
    assert.are.equal(1, count)
    assert.is_nil(cap.data:find("smuggled", 1, true))
  end)

  it("sends upstream no hop-by-hop header, no Proxy-* header, nothing Connection names", function()
    local res = wire.exchange(port, "GET " .. up("/h") .. " HTTP/1.1\r\n" .. host()
      .. "Proxy-Authorization: Basic c2VjcmV0OnNlY3JldA==\r\n"
      .. "Proxy-Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\n"
      .. "Connection: close, X-Hop-Secret\r\nX-Hop-Secret: s3cr3t\r\n"
      .. "X-Kept: yes\r\n\r\n")
    assert.are.equal("200", res.status)
    local head = cap.data
    assert.truthy(head:find("\r\nX-Kept: yes\r\n", 1, true))
    for _, gone in ipairs({ "proxy-", "keep-alive: timeout", "te:", "x-hop-secret", "s3cr3t",
      "c2VjcmV0" }) do
      assert.is_nil(head:lower():find(gone:lower(), 1, true), gone .. " reached the upstream")
    end
  end)

  it("checks a request pipelined behind a chunked body as a request of its own", function()
    local smuggled = "GET http://denied.example.net:" .. cap.port .. "/s HTTP/1.1\r\n"
      .. "Host: denied.example.net:" .. cap.port .. "\r\n\r\n"
    local res = wire.exchange(port, "POST " .. up("/post") .. " HTTP/1.1\r\n" .. host()
      .. "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" .. smuggled,
      { until_fn = function(r) return r.data:find("HTTP/1%.1 403") ~= nil end })
    assert.are.equal("200", res.status)
    assert.truthy(res.data:find("HTTP/1%.1 403"), "the pipelined request was refused")
    assert.is_nil(cap.data:find("denied.example.net", 1, true))
    local _, heads = cap.data:gsub("HTTP/1%.1\r\n", "")
    assert.are.equal(1, heads)
  end)

  it("records each refusal as an event", function()
    refused("GET /ok HTTP/1.1\r\n" .. host() .. "\r\n", "400")
    wire.settle(0.05)
    local seen = false
    for _, e in ipairs(events) do
      if e.status == 400 then seen = true end
    end
    assert.is_true(seen)
  end)
end)
