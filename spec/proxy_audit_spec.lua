-- The proxy's audit log (audit_log, session) and its events' code,
-- bytes_up, bytes_down and duration, through the real proxy: the log is read
-- back with lua-cjson, one line per request, each refusal class the proxy
-- has provoked by one request and named by its own code, the bytes those
-- that were admitted moved, and a file that is not ours refused before
-- anything listens.
local uv = require("luv")
local cjson = require("cjson")
local isolation = require("isolation")
local helpers = require("helpers")
local upstream = require("support.upstream")
local wire = require("support.parsers")
local W = require("support.proxy")

local RFC3339_UTC = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$"

-- A loopback TCP server on luv's loop: on_conn(client) for each connection.
local function server(on_conn)
  local s = uv.new_tcp()
  assert(s:bind("127.0.0.1", 0))
  assert(s:listen(16, function()
    local c = uv.new_tcp()
    s:accept(c)
    on_conn(c)
  end))
  return s, s:getsockname().port
end

-- Refusals of what the client asked for are denials; the rest are errors.
local DENY = { not_allowed = true, private_address = true, own_address = true, sni_mismatch = true,
  tls_malformed = true, tls_timeout = true, bad_request = true, too_large = true, not_implemented = true,
  bad_version = true }

local function connect_req(target)
  return "CONNECT " .. target .. " HTTP/1.1\r\nHost: " .. target .. "\r\n\r\n"
end

local read_log = helpers.read_json_lines

describe("proxy audit log", function()
  local up, tmp, log, p
  local servers = {}

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  before_each(function()
    tmp = helpers.tmpdir()
    log = tmp .. "/audit.log"
  end)

  after_each(function()
    if p then p:close() end
    p = nil
    for _, s in ipairs(servers) do if not s:is_closing() then s:close() end end
    servers = {}
    W.settle(0.05)
    helpers.rmtree(tmp)
  end)

  local function open(extra)
    local o = {
      allow = { "up.example.com", "private.example.com", "127.0.0.1", "*.invalid" },
      listen = "127.0.0.1:0",
      audit_log = log,
      session = "spec-session",
      resolve = { ["up.example.com"] = { "127.0.0.1" }, ["private.example.com"] = { "127.0.0.2" } },
      header_timeout = 0.5, idle_timeout = 1, connect_timeout = 0.5, dns_timeout = 3, max_header_bytes = 1024,
    }
    for k, v in pairs(extra or {}) do o[k] = v end
    if o.session == false then o.session = nil end
    local err
    p, err = isolation.proxy(o)
    assert.is_truthy(p, err)
    return p
  end

  -- The log's thread writes on its own time: poll the file (a 20 ms tick
  -- wakes luv's loop, which has nothing else to do with a thread-mode proxy).
  local function wait_lines(n)
    local tick = uv.new_timer()
    tick:start(20, 20, function() end)
    W.run_until(function() return #read_log(log) >= n end, 10)
    tick:close()
    uv.run("nowait")
    return read_log(log)
  end

  it("writes one line per request with the bytes it relayed, as its event has them", function()
    open()
    local payload = W.pattern(7, 300000)
    local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "ECHO\n")
    c:send(payload)
    assert.is_true(c:wait(function(x) return #x.data >= #payload end, 10))
    c:close()
    wait_lines(1)
    -- the upstream returns the head it got as the body: what went up, exactly
    local f = W.connect(p:address())
    f:send("GET http://up.example.com:" .. up.http_port .. "/headers HTTP/1.1\r\nHost: up.example.com:"
      .. up.http_port .. "\r\nConnection: close\r\nX-Padding: " .. ("p"):rep(100) .. "\r\n\r\n")
    assert.is_true(f:wait_eof())
    f:close()
    local lines = wait_lines(2)
    assert.are.equal(2, #lines)
    local t, g = lines[1], lines[2]
    assert.are.same({ "allow", "allowed", "CONNECT", "up.example.com", up.raw_port, 200, "spec-session" },
      { t.type, t.code, t.method, t.host, t.port, t.status, t.session })
    assert.are.equal(#"ECHO\n" + #payload, t.bytes_up)
    assert.are.equal(#payload, t.bytes_down)
    local body = f.data:match("\r\n\r\n(.*)$")
    assert.are.same({ "allow", "allowed", "GET", 200 }, { g.type, g.code, g.method, g.status })
    assert.are.equal(#body, g.bytes_up)
    assert.are.equal(#f.data, g.bytes_down)
    for _, l in ipairs(lines) do
      assert.matches(RFC3339_UTC, l.time)
      assert.is_true(l.duration >= 0 and l.duration < 10)
      assert.is_string(l.reason)
    end
    -- the events say the same
    local evs = p:events()
    assert.are.equal(2, #evs)
    for i, e in ipairs(evs) do
      for _, k in ipairs({ "type", "code", "method", "host", "port", "status", "bytes_up", "bytes_down", "reason" }) do
        assert.are.equal(lines[i][k], e[k], k)
      end
      assert.is_true(math.abs(lines[i].duration - e.duration) < 1e-5)
    end
    assert.are.equal(384, math.tointeger(uv.fs_stat(log).mode) & 511) -- 0600
  end)

  it("names every refusal class by its code, one request each, and moves no byte for them", function()
    open()
    local garbage, closer, silent
    servers[#servers + 1], garbage = server(function(c)
      c:read_start(function() end)
      c:write("THIS IS NOT HTTP\r\n\r\n")
    end)
    servers[#servers + 1], closer = server(function(c)
      c:read_start(function(_, d) if d then c:close() end end)
    end)
    servers[#servers + 1], silent = server(function(c) c:read_start(function() end) end)
    local closed = W.closed_port()
    local function forward(port, extra)
      return "GET http://127.0.0.1:" .. port .. "/ HTTP/1.1\r\nHost: 127.0.0.1:" .. port .. "\r\n" .. (extra or "")
        .. "\r\n"
    end
    local uphost = "up.example.com:" .. up.http_port
    local function tunnel_then(send_fn)
      local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port)
      send_fn(c)
      c:wait_eof(5)
      c:close()
    end
    local hello = wire.client_hello({ sni = "other.example.net" })
    local cases = {
      { "not_allowed", function() W.exchange(p:address(), connect_req("no.example.com:443")) end },
      { "private_address", function() W.exchange(p:address(), connect_req("private.example.com:443")) end },
      { "own_address", function() W.exchange(p:address(), connect_req("127.0.0.1:" .. p:port())) end },
      { "sni_mismatch", function() tunnel_then(function(c) c:send(hello) end) end },
      { "tls_malformed", function() tunnel_then(function(c) c:send(hello:sub(1, 20)); c:shutdown() end) end },
      { "tls_timeout", function() tunnel_then(function(c) c:send(hello:sub(1, 20)) end) end },
      { "bad_request", function()
        W.exchange(p:address(), "GET /origin-form HTTP/1.1\r\nHost: " .. uphost .. "\r\n\r\n")
      end },
      { "too_large", function()
        W.exchange(p:address(), "GET http://" .. uphost .. "/ HTTP/1.1\r\nHost: " .. uphost .. "\r\nX-Big: "
          .. ("b"):rep(2000) .. "\r\n\r\n")
      end },
      { "not_implemented", function()
        W.exchange(p:address(), "GET http://" .. uphost .. "/ HTTP/1.1\r\nHost: " .. uphost
          .. "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
      end },
      { "bad_version", function() W.exchange(p:address(), "GET http://" .. uphost .. "/ HTTP/2.0\r\n\r\n") end },
      { "header_timeout", function() W.exchange(p:address(), "GET http://" .. uphost .. "/ HTTP/1.1\r\n") end },
      { "dns_failed", function() W.exchange(p:address(), connect_req("nowhere.invalid:443"), 10) end },
      { "connect_failed", function() W.exchange(p:address(), connect_req("127.0.0.1:" .. closed)) end },
      { "upstream_failed", function() W.exchange(p:address(), forward(closer)) end },
      { "bad_response", function() W.exchange(p:address(), forward(garbage)) end },
      { "upstream_timeout", function() W.exchange(p:address(), forward(silent), 5) end },
      { "client_closed", function()
        local c = W.connect(p:address())
        c:send(forward(silent))
        W.settle(0.2)
        c:close()
      end },
    }
    for i, case in ipairs(cases) do
      local t0 = uv.hrtime()
      case[2]()
      if os.getenv("AUDIT_SPEC_TIMES") then print(case[1], (uv.hrtime() - t0) / 1e9) end
      local lines = wait_lines(i)
      assert.are.equal(i, #lines, case[1] .. " gave no line (or more than one)")
      local l = lines[i]
      local want = case[1]
      -- a resolver that does not answer at all times out instead
      if want == "dns_failed" and l.code == "dns_timeout" then want = "dns_timeout" end
      assert.are.equal(want, l.code, case[1] .. ": " .. tostring(l.reason))
      assert.are.equal(DENY[l.code] and "deny" or "error", l.type, case[1])
      assert.are.equal(0, l.bytes_down, case[1])
      if not (l.code == "upstream_failed" or l.code:find("_timeout$") or l.code == "bad_response"
          or l.code == "client_closed") then
        assert.are.equal(0, l.bytes_up, case[1]) -- nothing reached an upstream
      end
      assert.are.equal("spec-session", l.session)
      -- the refused address in its own field: only the refusals by address have one
      if l.code == "private_address" then
        assert.are.same({ "127.0.0.2", "loopback" }, { l.address, l.address_class }, tostring(l.reason))
      elseif l.code == "own_address" then
        assert.are.same({ "127.0.0.1" }, { l.address, l.address_class }, tostring(l.reason))
      else
        assert.are.same({}, { l.address, l.address_class }, case[1])
      end
    end
    -- the events carry the same codes and addresses
    local logged = {}
    for _, l in ipairs(read_log(log)) do logged[#logged + 1] = l.code .. " " .. tostring(l.address) .. " "
      .. tostring(l.address_class) end
    -- an event reaches the queue on the loop thread's next turn, the line
    -- may be written first: collect until as many as lines (bounded)
    local codes = {}
    helpers.wait_for(function()
      for _, e in ipairs(p:events()) do codes[#codes + 1] = e.code .. " " .. tostring(e.address) .. " "
        .. tostring(e.address_class) end
      return #codes >= #logged
    end, 5)
    assert.are.same(logged, codes)
  end)

  it("a client cannot forge or split a line: its quotes, backslashes and newlines stay in reason", function()
    open()
    local forged = 'x"}\n{"type":"allow","code":"allowed","host":"evil.example.net\\"\r\n'
    local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port)
    c:send(wire.client_hello({ sni = forged }))
    c:wait_eof(5)
    c:close()
    W.exchange(p:address(), "GET http://" .. forged .. "/ HTTP/1.1\r\n\r\n")
    local lines = wait_lines(2)
    local f = assert(io.open(log, "rb"))
    local text = f:read("a")
    f:close()
    assert.are.equal(2, select(2, text:gsub("\n", "")), text)
    assert.are.same({ "deny", "sni_mismatch", "up.example.com" }, { lines[1].type, lines[1].code, lines[1].host })
    assert.are.equal("deny", lines[2].type)
    assert.are.equal(2, #lines)
    -- the reason holds the server name, every byte outside printable ASCII and the backslash as \xNN
    assert.truthy(lines[1].reason:find('x"}\\x0a{"type":"allow"', 1, true), lines[1].reason)
    assert.truthy(lines[1].reason:find('evil.example.net\\x5c"\\x0d\\x0a', 1, true), lines[1].reason)
    for _, l in ipairs(lines) do
      for _, k in ipairs({ "reason", "host", "method" }) do assert.is_nil(l[k]:find("[%c\128-\255]"), k) end
    end
  end)

  it("too_many: the connection over max_connections", function()
    open({ max_connections = 1, header_timeout = 5 })
    local hold = W.connect(p:address())
    W.settle(0.1)
    local c = W.exchange(p:address(), connect_req("up.example.com:443"))
    assert.are.equal(503, c:status())
    hold:close()
    local lines = wait_lines(1)
    assert.are.same({ "error", "too_many", 503 }, { lines[1].type, lines[1].code, lines[1].status })
  end)

  it("learn mode (report): an unlisted host is admitted with type report and code not_allowed", function()
    open({ report = true, allow = { "127.0.0.1" },
      resolve = { ["unlisted.example.com"] = { "127.0.0.1" }, ["private.example.com"] = { "127.0.0.2" } } })
    local c = W.tunnel(p:address(), "unlisted.example.com:" .. up.raw_port, "ECHO\nhello")
    assert.is_true(c:wait(function(x) return #x.data >= 5 end))
    c:close()
    wait_lines(1)
    -- the address rule still applies
    W.exchange(p:address(), connect_req("private.example.com:443"))
    local lines = wait_lines(2)
    assert.are.same({ "report", "not_allowed", 200, 10, 5 },
      { lines[1].type, lines[1].code, lines[1].status, lines[1].bytes_up, lines[1].bytes_down })
    assert.are.same({ "deny", "private_address" }, { lines[2].type, lines[2].code })
    assert.are.equal(1, p:stats().allowed)
  end)

  it("names a refused IPv4-mapped or NAT64 address by the IPv4 address it carries", function()
    open({ resolve = { ["up.example.com"] = { "::ffff:10.0.0.1" }, ["private.example.com"] = { "64:ff9b::7f00:1" } } })
    W.exchange(p:address(), connect_req("up.example.com:443"))
    W.exchange(p:address(), connect_req("private.example.com:443"))
    local lines = wait_lines(2)
    assert.are.same({ "deny", "private_address", "up.example.com" }, { lines[1].type, lines[1].code, lines[1].host })
    assert.are.equal("up.example.com resolves to a private address (::ffff:10.0.0.1), which the allowlist "
      .. "does not admit", lines[1].reason)
    assert.are.same({ "deny", "private_address" }, { lines[2].type, lines[2].code })
    assert.are.equal("private.example.com resolves to a loopback address (64:ff9b::7f00:1), which the "
      .. "allowlist does not admit", lines[2].reason)
    -- the address and its class in their own fields
    assert.are.same({ "::ffff:10.0.0.1", "private", "64:ff9b::7f00:1", "loopback" },
      { lines[1].address, lines[1].address_class, lines[2].address, lines[2].address_class })
  end)

  it("a long session id with quotes and control bytes still gives whole JSON lines", function()
    local id = ('s"\\\n\1\255'):rep(1000)
    open({ session = id })
    W.exchange(p:address(), connect_req("no.example.com:443"))
    local lines = wait_lines(1)
    assert.are.equal(1, #lines)
    assert.are.equal(('s"\\x5c\\x0a\\x01\\xff'):rep(1000), lines[1].session)
    assert.are.equal("not_allowed", lines[1].code)
  end)

  it("appends to a log of ours; session is optional (null)", function()
    local f = assert(io.open(log, "w"))
    f:write('{"earlier":true}\n')
    f:close()
    uv.fs_chmod(log, 384)
    open({ session = false })
    W.exchange(p:address(), connect_req("no.example.com:443"))
    local lines = wait_lines(2)
    assert.are.equal(true, lines[1].earlier)
    assert.are.equal(cjson.null, lines[2].session)
  end)

  it("refuses a symlink, a FIFO, a hard link, another user's file and a log others can read", function()
    local target = tmp .. "/target"
    local f = assert(io.open(target, "w"))
    f:write("keep\n")
    f:close()
    uv.fs_chmod(target, 384)
    local cases = {
      { "link", function() assert(uv.fs_symlink(target, log)) end, "is a symbolic link, which is not followed" },
      -- opened without blocking: no reader, so the open itself fails
      { "fifo", function() assert(os.execute("mkfifo -m 600 " .. log)) end, "cannot open it" },
      { "hard link", function() assert(uv.fs_link(target, log)) end, "more than one name" },
      { "wide", function()
        local w = assert(io.open(log, "w"))
        w:close()
        uv.fs_chmod(log, 420)
      end, "group or others" },
      { "other user", function()
        local w = assert(io.open(log, "w"))
        w:close()
        uv.fs_chmod(log, 384)
        assert(uv.fs_chown(log, 65534, 65534))
      end, "another user" },
    }
    if uv.getuid() ~= 0 then table.remove(cases) end -- only root can give a file away
    for _, case in ipairs(cases) do
      os.remove(log)
      case[2]()
      local px, err = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", audit_log = log })
      assert.is_nil(px, case[1])
      assert.truthy(tostring(err):find("audit_log " .. log, 1, true), err)
      assert.truthy(tostring(err):find(case[3], 1, true), case[1] .. ": " .. tostring(err))
    end
    os.remove(log)
    local rf = assert(io.open(target, "rb"))
    assert.are.equal("keep\n", rf:read("a"))
    rf:close()
  end)

  it("refuses bad audit_log and session values, naming them", function()
    for _, case in ipairs({
      { { audit_log = 5 }, "audit_log must be a file path" },
      { { audit_log = "" }, "audit_log must be a file path" },
      { { audit_log = tmp .. "/a\0b" }, "audit_log must not contain a NUL byte" },
      { { audit_log = tmp .. "/a", session = {} }, "session must be a string" },
      { { audit_log = tmp .. "/no/such/dir/a" }, "cannot open it" },
      { { report = "yes" }, "report must be a boolean" },
    }) do
      local o = { allow = {}, listen = "127.0.0.1:0" }
      for k, v in pairs(case[1]) do o[k] = v end
      local px, err = isolation.proxy(o)
      assert.is_nil(px)
      assert.truthy(tostring(err):find(case[2], 1, true), err)
    end
  end)
end)
