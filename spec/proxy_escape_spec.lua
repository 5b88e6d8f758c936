-- Client bytes in what the proxy tells its operator: a client controls the
-- TLS server name, the CONNECT authority, the forward request's target and
-- Host. None of its control bytes may reach an event field (events(),
-- on_event) or isolate proxy's log raw: a terminal would act on ESC and BEL
-- (titles, erased lines), and CR or LF would forge a log line. Every byte
-- that is not printable ASCII, and the backslash, arrives as \xNN.
local uv = require("luv")
local isolation = require("isolation")
local wire = require("support.parsers")
local cli = require("support.cli")

-- Every C0 byte, DEL, high bytes (a C1 CSI among them) and the backslash.
local BYTES = {}
for b = 0, 31 do BYTES[#BYTES + 1] = b end
for _, b in ipairs({ 0x7f, 0x80, 0x9b, 0xff, 0x5c }) do BYTES[#BYTES + 1] = b end

-- A title, an erased line, and a forged allow line on a line of its own.
local FORGERY = "\27]0;title\7\27[2K\rallow CONNECT api.example.com:443 200\n"

-- Sends a request head; returns once the answer's head is in (an error
-- reply to a forward request lingers, draining the client, before it ends).
local function ask(port, head)
  return wire.exchange(port, head, { until_fn = function(r) return r.data:find("\r\n\r\n", 1, true) end })
end

local function esc(b) return string.format("\\x%02x", b) end

-- Printable ASCII only, and each backslash starts a whole \xNN.
local function assert_clean(s, what)
  assert.is_string(s, what)
  for i = 1, #s do
    local b = s:byte(i)
    assert.is_true(b >= 0x20 and b < 0x7f, string.format("%s: byte 0x%02x at %d in %q", what, b, i, s))
  end
  local rest = s:gsub("\\x%x%x", "")
  assert.is_nil(rest:find("\\", 1, true), what .. ": a backslash that is not an escape in " .. s)
end

local function assert_clean_events(events, what)
  assert.is_true(#events > 0, what .. ": no event")
  for i, e in ipairs(events) do
    for _, field in ipairs({ "type", "method", "host", "reason" }) do
      assert_clean(e[field], string.format("%s: event %d %s", what, i, field))
    end
  end
end

local function find_reason(events, needle)
  for _, e in ipairs(events) do
    if e.reason:find(needle, 1, true) then return e end
  end
end

for _, mode in ipairs({ "thread", "luv" }) do
  describe("proxy event texts (" .. mode .. " mode)", function()
    local cap, proxy, port, queued

    before_each(function()
      cap = wire.capture({ http = true })
      queued = {}
      proxy = assert(isolation.proxy({
        allow = { "up.example.com", "127.0.0.1" },
        listen = "127.0.0.1:0",
        loop = mode == "luv" and uv or nil,
        on_event = mode == "luv" and function(e) queued[#queued + 1] = e end or nil,
        resolve = { ["up.example.com"] = { "127.0.0.1" } },
        allow_private = true,
      }))
      port = proxy:port()
    end)

    after_each(function()
      proxy:close()
      cap.close()
      wire.settle(0.05)
    end)

    -- The events given since the last call, in either mode.
    local function events()
      if mode == "luv" then
        wire.settle(0.05)
        local e = queued
        queued = {}
        return e
      end
      for _ = 1, 50 do
        local e = proxy:events()
        if #e > 0 then return e end
        wire.settle(0.02)
      end
      return {}
    end

    local function tls_tunnel(target, sni)
      return wire.exchange(port, "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n", {
        timeout = 10,
        after_head = function(res, send)
          if res.data:match("^HTTP/1%.1 200") then send({ wire.client_hello({ sni = sni }) }) end
        end,
      })
    end

    it("escapes each control byte of a TLS server name in the deny reason", function()
      for _, b in ipairs(BYTES) do
        local name = "a" .. string.char(b) .. "b.example.com"
        local res = tls_tunnel("up.example.com:" .. cap.port, name)
        assert.are.equal("200", res.status)
        local ev = events()
        local what = string.format("server name with byte 0x%02x", b)
        assert_clean_events(ev, what)
        if b ~= 0 then -- a name with a NUL is a malformed hello, named so
          assert.is_truthy(find_reason(ev, "a" .. esc(b) .. "b.example.com"), what .. ": not named escaped")
        end
      end
      assert.are.equal("", cap.data)
    end)

    it("keeps a forged log line and terminal sequences in a server name on one inert line", function()
      local res = tls_tunnel("127.0.0.1:" .. cap.port, FORGERY)
      assert.are.equal("200", res.status)
      local ev = events()
      assert_clean_events(ev, "forged server name")
      local e = find_reason(ev, "\\x1b]0;title\\x07\\x1b[2K\\x0dallow CONNECT api.example.com:443 200\\x0a")
      assert.is_truthy(e, "the forgery is not named escaped")
      assert.are.equal("deny", e.type)
    end)

    it("escapes an over-long server name of control bytes without cutting an escape in half", function()
      local bytes = {}
      for i = 1, 250 do bytes[i] = string.char(BYTES[(i % #BYTES) + 1] == 0 and 1 or BYTES[(i % #BYTES) + 1]) end
      local res = tls_tunnel("up.example.com:" .. cap.port, table.concat(bytes))
      assert.are.equal("200", res.status)
      local ev = events()
      assert_clean_events(ev, "over-long server name")
      local e = find_reason(ev, "TLS server name")
      assert.is_truthy(e, "no deny naming the server name")
      assert.is_true(#e.reason < 200, "reason of " .. #e.reason .. " bytes")
      assert.are.equal("", cap.data)
    end)

    it("gives clean events for each control byte in a CONNECT authority", function()
      for _, b in ipairs(BYTES) do
        local c = string.char(b)
        for _, authority in ipairs({ "a" .. c .. "b.example.com:443", "up.example.com:4" .. c .. "43",
          "up.example.com" .. c .. ":443" }) do
          local res = ask(port, "CONNECT " .. authority .. " HTTP/1.1\r\nHost: up.example.com\r\n\r\n")
          assert.is_truthy(res.status and res.status ~= "200", "answered " .. tostring(res.status))
          assert_clean_events(events(), string.format("CONNECT authority %q", authority))
        end
      end
      local long = string.rep("\27[2K", 80) .. ":443"
      assert.are.equal("414", ask(port, "CONNECT " .. string.rep("\27", 9000) .. ":443 HTTP/1.1\r\n\r\n")
        .status)
      assert_clean_events(events(), "CONNECT with an over-long authority of ESC")
      ask(port, "CONNECT " .. long .. " HTTP/1.1\r\nHost: x\r\n\r\n")
      assert_clean_events(events(), "CONNECT with a long authority of erase sequences")
      assert.are.equal(0, cap.conns)
    end)

    it("gives clean events for each control byte in a forward request's URI host, path and Host", function()
      for _, b in ipairs(BYTES) do
        local c = string.char(b)
        local good = "up.example.com:" .. cap.port
        for _, head in ipairs({
          "GET http://a" .. c .. "b.example.com/ HTTP/1.1\r\nHost: a" .. c .. "b.example.com\r\n\r\n",
          "GET http://" .. good .. "/a" .. c .. "b HTTP/1.1\r\nHost: " .. good .. "\r\n\r\n",
          "GET http://" .. good .. "/ HTTP/1.1\r\nHost: up" .. c .. ".example.com\r\n\r\n",
          "GET http://" .. good .. "/ HTTP/1.1\r\nHost: " .. good .. "\r\nX-A: " .. c .. "\r\n\r\n",
        }) do
          local res = ask(port, head)
          assert.is_truthy(res.status, "no answer to " .. head)
          assert_clean_events(events(), string.format("forward head %q", head))
        end
      end
    end)
  end)
end

describe("isolate proxy's log", function()
  local cap
  before_each(function() cap = wire.capture({ http = true }) end)
  after_each(function()
    cap.close()
    wire.settle(0.05)
  end)

  it("writes one inert line per event whatever a client puts in its server name or request", function()
    local p = cli.spawn({ cli.ISOLATE, "proxy", "--listen", "127.0.0.1:0", "--no-token", "--allow", "127.0.0.1" })
    assert.truthy(cli.wait_for(function() return p.out:find("\n", 1, true) end, 30), p.err)
    local port = tonumber(p.out:match("^127%.0%.0%.1:(%d+)\n$"))
    assert.truthy(port, p.out)
    local target = "127.0.0.1:" .. cap.port
    local names = { FORGERY }
    for _, b in ipairs(BYTES) do names[#names + 1] = "a" .. string.char(b) .. "b.example.com" end
    local expected = 0
    for _, name in ipairs(names) do
      local res = wire.exchange(port, "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n", {
        timeout = 10,
        after_head = function(r, send)
          if r.data:match("^HTTP/1%.1 200") then send({ wire.client_hello({ sni = name }) }) end
        end,
      })
      assert.are.equal("200", res.status)
      expected = expected + 1 -- the tunnel's one event: the SNI deny
    end
    for _, b in ipairs(BYTES) do
      local c = string.char(b)
      ask(port, "CONNECT a" .. c .. "b.example.com:443 HTTP/1.1\r\n\r\n")
      ask(port, "GET http://" .. target .. "/ HTTP/1.1\r\nHost: 127.0.0" .. c .. ".1\r\n\r\n")
      expected = expected + 2
    end
    assert.truthy(cli.wait_for(function() return select(2, p.err:gsub("\n", "")) >= expected end, 20), p.err)
    p.kill("sigterm")
    local status, out, err = p.wait(30)
    assert.are.equal(0, status, err)
    for what, text in pairs({ stdout = out, stderr = err }) do
      for i = 1, #text do
        local b = text:byte(i)
        assert.is_true(b == 10 or (b >= 0x20 and b < 0x7f), string.format("%s: byte 0x%02x at %d", what, b, i))
      end
    end
    assert.are.equal("127.0.0.1:" .. port .. "\n", out)
    local n = 0
    for line in err:gmatch("[^\n]*\n") do
      n = n + 1
      assert.truthy(line:match("^%a+ %S* %S+ %S+ %(.*%)\n$"), "not an event line: " .. line)
      assert.falsy(line:find("^allow CONNECT api%.example%.com"), "forged line: " .. line)
    end
    assert.are.equal(expected, n, err)
    assert.truthy(err:find("\\x1b]0;title\\x07\\x1b[2K\\x0dallow CONNECT api.example.com:443 200\\x0a", 1, true), err)
  end)
end)
