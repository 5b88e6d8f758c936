-- Credential routes through a real proxy (thread mode) to a real HTTPS
-- upstream on loopback (spec/support/tls_upstream.py) with a CA made here
-- by openssl: the upstream sees the route's secret in the route's header
-- and never the client's own credentials; the client never sees the
-- secret; a wrong CA, a wrong name, a hanging upstream and an unknown
-- route each get a clear refusal; server-sent events are streamed.
local isolation = require("isolation")
local helpers = require("helpers")
local tls = require("support.tls_upstream")

local SECRET = "sk-route-secret-0123456789abcdef"

describe("proxy routes", function()
  local dir, up, up_port, proxy

  local function start_upstream(leaf)
    up = tls.start(dir, leaf)
    up_port = up.port
  end

  local function stop_upstream()
    if up then up.stop() end
    up = nil
  end

  local function open(opts)
    local o = {
      allow = {},
      listen = "127.0.0.1:0",
      resolve = { ["up.example.com"] = { "127.0.0.1" } },
      upstream_ca_file = dir .. "/ca.pem",
      routes = { { name = "test", upstream = "https://up.example.com:" .. up_port .. "/base",
                   header = "bearer", value = SECRET } },
    }
    for k, v in pairs(opts or {}) do o[k] = v end
    local err
    proxy, err = isolation.proxy(o)
    assert.is_truthy(proxy, err)
    return proxy:port()
  end

  local function requests() return up.requests() end
  local header = tls.header

  local function curl(args)
    return helpers.run("curl -sS --max-time 20 -D - " .. args)
  end

  setup(function()
    if not tls.available() then
      pending("openssl, python3 and curl are needed for the route specs")
      return
    end
    dir = helpers.tmpdir()
    tls.make_ca(dir, "ca")
    tls.make_ca(dir, "otherca")
    tls.make_leaf(dir, "ca", "good", "DNS:up.example.com,IP:127.0.0.1")
    tls.make_leaf(dir, "ca", "wrongname", "DNS:other.example.net")
    tls.make_leaf(dir, "otherca", "othersigned", "DNS:up.example.com,IP:127.0.0.1")
  end)

  teardown(function()
    stop_upstream()
    if dir then helpers.rmtree(dir) end
  end)

  after_each(function()
    if proxy then proxy:close() end
    proxy = nil
    stop_upstream()
  end)

  it("sends the secret in the route's header, drops the client's, and keeps it from the client", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    local code, out, err = curl(("-H 'Authorization: Bearer client-own' -H 'x-api-key: client-key' "
      .. "-H 'Proxy-Authorization: Basic eDp5' http://127.0.0.1:%d/test/v1/json?q=1"):format(port))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    assert.is_truthy(out:find('"ok": true', 1, true), out)
    assert.is_nil(out:find(SECRET, 1, true))
    local reqs = requests()
    assert.are.equal(1, #reqs)
    assert.are.equal("/base/v1/json?q=1", reqs[1].path)
    assert.are.same({ "Bearer " .. SECRET }, header(reqs[1], "authorization"))
    assert.are.same({}, header(reqs[1], "x-api-key"))
    assert.are.same({}, header(reqs[1], "proxy-authorization"))
    assert.are.same({ "up.example.com:" .. up_port }, header(reqs[1], "host"))
    -- The event names the upstream host and the route, never the secret.
    assert.is_true(helpers.wait_for(function() return #proxy:events() > 0 or false end, 5) or true)
  end)

  it("gives one event per route request with code route, and the secret in none", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    for _ = 1, 2 do
      local code = curl(("http://127.0.0.1:%d/test/json"):format(port))
      assert.are.equal(0, code)
    end
    local evs = {}
    helpers.wait_for(function()
      for _, e in ipairs(proxy:events()) do evs[#evs + 1] = e end
      return #evs >= 2
    end, 5)
    assert.are.equal(2, #evs)
    for _, e in ipairs(evs) do
      assert.are.equal("route", e.code)
      assert.are.equal("allow", e.type)
      assert.are.equal("up.example.com", e.host)
      assert.are.equal(200, e.status)
      for _, v in pairs(e) do assert.is_nil(tostring(v):find(SECRET, 1, true)) end
    end
  end)

  it("takes the absolute form for the proxy's loopback address, and basic:USER and custom headers", function()
    if not dir then return end
    start_upstream("good")
    local port = open({ routes = {
      { name = "git", upstream = "https://127.0.0.1:" .. up_port, header = "basic:x-access-token", value = SECRET },
      { name = "goog", upstream = "https://up.example.com:" .. up_port, header = "x-goog-api-key", value = SECRET },
    } })
    local code, out, err = curl(("-x http://127.0.0.1:%d http://127.0.0.1:%d/git/info/refs"):format(port, port))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    code = curl(("-H 'x-goog-api-key: mine' http://127.0.0.1:%d/goog/v1/models"):format(port))
    assert.are.equal(0, code)
    local reqs = requests()
    assert.are.equal(2, #reqs)
    local b64 = helpers.run("printf %s " .. helpers.shquote("x-access-token:" .. SECRET) .. " | base64 -w0")
    local _, enc = helpers.run("printf %s " .. helpers.shquote("x-access-token:" .. SECRET) .. " | base64 -w0")
    assert.are.equal(0, b64)
    assert.are.same({ "Basic " .. enc }, header(reqs[1], "authorization"))
    assert.are.equal("/info/refs", reqs[1].path)
    assert.are.same({ SECRET }, header(reqs[2], "x-goog-api-key"))
  end)

  it("relays a request body (chunked and with a length) and keeps the connection alive", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    local body = string.rep("abcdefghij", 20000)
    helpers.write(dir .. "/body", body)
    local url = ("http://127.0.0.1:%d/test/echo"):format(port)
    local code, out, err = helpers.run(("curl -sS --max-time 20 --data-binary @%s %s --next "
      .. "-H 'Transfer-Encoding: chunked' --data-binary @%s %s"):format(
      helpers.shquote(dir .. "/body"), url, helpers.shquote(dir .. "/body"), url))
    assert.are.equal(0, code, err)
    assert.are.equal(body .. body, out)
    local reqs = requests()
    assert.are.equal(2, #reqs)
    assert.are.equal(body, reqs[2].body)
    assert.are.equal(1, proxy:stats().connections, "one client connection for both requests")
  end)

  it("streams server-sent events: the first arrives before the upstream sends the last", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    local client = ([[
import socket, sys
s = socket.create_connection(("127.0.0.1", %d), timeout=20)
s.sendall(b"GET /test/sse HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
got = b""
while b"data: first" not in got:
    b = s.recv(65536)
    if not b:
        break
    got += b
open(sys.argv[1], "w").close()
while not got.endswith(b"0\r\n\r\n"):
    b = s.recv(65536)
    if not b:
        break
    got += b
print(got.decode().replace("\r\n", " "))
]]):format(port)
    helpers.write(dir .. "/sse.py", client)
    local code, out, err = helpers.run("python3 " .. helpers.shquote(dir .. "/sse.py") .. " "
      .. helpers.shquote(dir .. "/go"))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("data: first", 1, true), out)
    assert.is_truthy(out:find("after-go", 1, true), out)
  end)

  it("answers 400 unknown_route for an origin-form request naming no route", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    local code, out = curl(("http://127.0.0.1:%d/nosuch/x"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 400"), out)
    assert.is_truthy(out:find("X-Isolation-Error: unknown_route", 1, true), out)
    code, out = curl(("http://127.0.0.1:%d/test/a/../../admin"):format(port) .. " --path-as-is")
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 400"), out)
    assert.is_false(helpers.exists(dir .. "/requests.jsonl"), "nothing reached the upstream")
  end)

  it("answers 502 upstream_tls for a certificate from another CA or for another name", function()
    if not dir then return end
    for _, leaf in ipairs({ "othersigned", "wrongname" }) do
      start_upstream(leaf)
      local port = open()
      local code, out = curl(("http://127.0.0.1:%d/test/json"):format(port))
      assert.are.equal(0, code)
      assert.is_truthy(out:match("^HTTP/1%.1 502"), out)
      assert.is_truthy(out:find("X-Isolation-Error: upstream_tls", 1, true), out)
      assert.is_nil(out:find(SECRET, 1, true))
      assert.is_false(helpers.exists(dir .. "/requests.jsonl"), "no request was sent to " .. leaf)
      proxy:close()
      proxy = nil
      stop_upstream()
    end
  end)

  it("answers 504 when the upstream does not answer within idle_timeout", function()
    if not dir then return end
    start_upstream("good")
    local port = open({ idle_timeout = 1 })
    local code, out = curl(("http://127.0.0.1:%d/test/hang"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 504"), out)
    assert.is_truthy(out:find("X-Isolation-Error: upstream_timeout", 1, true), out)
  end)

  it("streams 100 MB each way without the proxy's memory growing past its buffers", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    local function rss_kb()
      local f = assert(io.open("/proc/self/status"))
      local kb = tonumber(f:read("a"):match("VmRSS:%s*(%d+)"))
      f:close()
      return kb
    end
    -- a first request: the TLS context, buffers and pools exist before the measure
    assert.are.equal(0, (curl(("http://127.0.0.1:%d/test/json"):format(port))))
    local before = rss_kb()
    -- under valgrind (make memcheck, some 20 times slower) 4 MB, and no RSS measure
    local memcheck = os.getenv("ISOLATION_MEMCHECK") == "1"
    local n = (memcheck and 4 or 100) * 1024 * 1024
    local code, out, err = helpers.run(("head -c %d /dev/zero | curl -sS --max-time 120 -H "
      .. "'Transfer-Encoding: chunked' --data-binary @- http://127.0.0.1:%d/test/sink"):format(n, port))
    assert.are.equal(0, code, err)
    assert.are.equal(tostring(n), out)
    code, out, err = helpers.run(("curl -sS --max-time 120 http://127.0.0.1:%d/test/source?n=%d | wc -c")
      :format(port, n))
    assert.are.equal(0, code, err)
    assert.are.equal(n, tonumber(out))
    local grown = rss_kb() - before
    if not memcheck then assert.is_true(grown < 16 * 1024, "the proxy's process grew by " .. grown .. " KiB") end
  end)

  it("goes through a parent proxy (upstream_proxy): CONNECT to the route's upstream, then TLS verified end to end",
    function()
      if not dir then return end
      start_upstream("good")
      local tp, why = require("support.tinyproxy").start(dir, { up_port })
      if not tp then return pending(why) end
      -- the parent resolves names: an IP upstream keeps this off DNS
      local port = open({ upstream_proxy = tp.url, routes = { { name = "test",
        upstream = "https://127.0.0.1:" .. up_port .. "/base", header = "bearer", value = SECRET } } })
      local code, out, err = curl(("http://127.0.0.1:%d/test/v1/json"):format(port))
      local log = tp.text()
      tp.stop()
      assert.are.equal(0, code, err)
      assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
      local reqs = requests()
      assert.are.equal(1, #reqs)
      assert.are.same({ "Bearer " .. SECRET }, header(reqs[1], "authorization"))
      assert.truthy(log:find("CONNECT 127.0.0.1:" .. up_port .. " HTTP/1.1", 1, true), log)
      assert.is_nil(log:find(SECRET, 1, true), "the parent sees only ciphertext")
    end)

  it("refuses bad route options naming the field, never showing a secret", function()
    local function err_of(routes, extra)
      local o = { allow = {}, listen = "127.0.0.1:0", routes = routes }
      for k, v in pairs(extra or {}) do o[k] = v end
      local p, e = isolation.proxy(o)
      assert.is_nil(p)
      return e
    end
    local ok = { name = "a", upstream = "https://example.com", value = SECRET }
    local function with(k, v)
      local r = {}
      for kk, vv in pairs(ok) do r[kk] = vv end
      r[k] = v
      return { r }
    end
    assert.matches("routes%[1%]%.name", err_of(with("name", "Bad_Name")))
    assert.matches("routes%[1%]%.upstream", err_of(with("upstream", "http://example.com")))
    assert.matches("routes%[1%]%.upstream", err_of(with("upstream", "https://u@example.com")))
    assert.matches("routes%[1%]%.header", err_of(with("header", "bad header")))
    local e = err_of(with("value", SECRET .. "\r\nX: y"))
    assert.matches("routes%[1%]%.value", e)
    assert.is_nil(e:find(SECRET, 1, true))
    assert.matches("unknown key", err_of(with("extra", 1)))
    assert.matches("already the name", err_of({ ok, ok }))
    assert.matches("upstream_ca_file", err_of({ ok }, { upstream_ca_file = "/nonexistent.pem" }))
    assert.matches("needs routes", err_of(nil, { upstream_ca_file = "/etc/hosts" }))
  end)
end)
