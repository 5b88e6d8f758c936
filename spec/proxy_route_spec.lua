-- Credential routes through a real proxy (thread mode) to a real HTTPS
-- upstream on loopback (spec/support/tls_upstream.py) with a CA made here
-- by openssl: the upstream sees the route's secret in the route's header
-- and never the client's own credentials; the client never sees the
-- secret; a wrong CA, a wrong name, a hanging upstream and an unknown
-- route each get a clear refusal; server-sent events are streamed.
local isolation = require("isolation")
local helpers = require("helpers")
local json = require("isolation.json")

local SECRET = "sk-route-secret-0123456789abcdef"
local SPEC_DIR = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"

local function have(cmd)
  return helpers.run("command -v " .. cmd) == 0
end

describe("proxy routes", function()
  local dir, upstream_pid, up_port, proxy

  -- A CA, and a leaf it signs for the names/addresses in san.
  local function make_ca(name)
    local code, _, err = helpers.run(("cd %s && openssl req -x509 -newkey rsa:2048 -nodes -days 2 "
      .. "-subj /CN=%s -keyout %s.key -out %s.pem"):format(helpers.shquote(dir), name, name, name))
    assert.are.equal(0, code, err)
  end
  local function make_leaf(ca, name, san)
    local cmd = ("cd %s && openssl req -newkey rsa:2048 -nodes -subj /CN=%s -keyout %s.key -out %s.csr"
      .. " && printf 'subjectAltName=%s\\n' > %s.ext"
      .. " && openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2"
      .. " -extfile %s.ext -out %s.pem"):format(helpers.shquote(dir), name, name, name, san, name,
      name, ca, ca, name, name)
    local code, _, err = helpers.run(cmd)
    assert.are.equal(0, code, err)
  end

  local function start_upstream(leaf, port)
    os.remove(dir .. "/port")
    os.remove(dir .. "/requests.jsonl")
    local code, out = helpers.run(("python3 %s %s %s %s %s >/dev/null 2>%s/up.err & echo $!"):format(
      helpers.shquote(SPEC_DIR .. "support/tls_upstream.py"), helpers.shquote(dir .. "/" .. leaf .. ".pem"),
      helpers.shquote(dir .. "/" .. leaf .. ".key"), helpers.shquote(dir), port or "", helpers.shquote(dir)))
    assert.are.equal(0, code)
    upstream_pid = tonumber(out:match("%d+"))
    assert.is_true(helpers.wait_for(function() return helpers.exists(dir .. "/port") end, 10),
      "the upstream started")
    up_port = tonumber(helpers.read(dir .. "/port"))
  end

  local function stop_upstream()
    if upstream_pid then helpers.run("kill " .. upstream_pid) end
    upstream_pid = nil
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

  local function requests()
    local list = {}
    for line in io.lines(dir .. "/requests.jsonl") do list[#list + 1] = json.decode(line) end
    return list
  end

  local function header(req, name)
    local found = {}
    for _, h in ipairs(req.headers) do
      if h[1]:lower() == name:lower() then found[#found + 1] = h[2] end
    end
    return found
  end

  local function curl(args)
    return helpers.run("curl -sS --max-time 20 -D - " .. args)
  end

  setup(function()
    if not have("openssl") or not have("python3") or not have("curl") then
      pending("openssl, python3 and curl are needed for the route specs")
      return
    end
    dir = helpers.tmpdir()
    make_ca("ca")
    make_ca("otherca")
    make_leaf("ca", "good", "DNS:up.example.com,IP:127.0.0.1")
    make_leaf("ca", "wrongname", "DNS:other.example.net")
    make_leaf("otherca", "othersigned", "DNS:up.example.com,IP:127.0.0.1")
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
      assert.are.equal("route test: upstream answered 200", e.reason)
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

  it("asks a proxy with a token for it on a route request too (407), and serves it with the token", function()
    if not dir then return end
    start_upstream("good")
    local token = "route-proxy-token-42"
    local port = open({ token = token })
    local url = ("http://127.0.0.1:%d/test/json"):format(port)
    -- origin form and absolute form without the token: 407, nothing upstream
    local code, out = curl(url)
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 407"), out)
    assert.is_truthy(out:find("Proxy-Authenticate:", 1, true), out)
    code, out = curl(("-x http://127.0.0.1:%d %s"):format(port, url))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 407"), out)
    -- a wrong token: 407 as well
    code, out = curl(("-x http://127.0.0.1:%d -U isolation:wrong %s"):format(port, url))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 407"), out)
    assert.is_false(helpers.exists(dir .. "/requests.jsonl"), "nothing reached the upstream without the token")
    -- with it, in either form: served, and the token goes no further than the proxy
    local _, basic = helpers.run("printf %s " .. helpers.shquote("isolation:" .. token) .. " | base64 -w0")
    code, out = curl(("-H 'Proxy-Authorization: Basic %s' %s"):format(basic, url))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    code, out = curl(("-x http://127.0.0.1:%d -U isolation:%s %s"):format(port, token, url))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    local reqs = requests()
    assert.are.equal(2, #reqs)
    for _, r in ipairs(reqs) do
      assert.are.same({ "Bearer " .. SECRET }, header(r, "authorization"))
      assert.are.same({}, header(r, "proxy-authorization"))
      for _, h in ipairs(r.headers) do assert.is_nil(h[2]:find(basic, 1, true)) end
    end
    local codes = {}
    for _, e in ipairs(proxy:events()) do codes[#codes + 1] = e.code end
    assert.are.same({ "auth_required", "auth_required", "auth_required", "route", "route" }, codes)
  end)

  it("sends an absolute-form request for another loopback service there, never on the route", function()
    if not dir then return end
    start_upstream("good")
    -- a plain HTTP service on the host's loopback that the allowlist admits
    -- (a hook, say); it records every request it gets
    helpers.write(dir .. "/plain.py", [[
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[1] + "/plain.jsonl", "a") as f:
            f.write(json.dumps({"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}) + "\n")
        body = b"plain service"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + "/plain.port", "w").write(str(s.server_address[1]))
s.serve_forever()
]])
    os.remove(dir .. "/plain.port")
    local _, pidout = helpers.run(("python3 %s %s >/dev/null 2>&1 & echo $!"):format(
      helpers.shquote(dir .. "/plain.py"), helpers.shquote(dir)))
    local plain_pid = tonumber(pidout:match("%d+"))
    finally(function() helpers.run("kill " .. plain_pid) end)
    assert.is_true(helpers.wait_for(function() return helpers.exists(dir .. "/plain.port") end, 10))
    local other = tonumber(helpers.read(dir .. "/plain.port"))
    -- route_port: where the sandbox reaches the proxy (not the port it listens on here)
    local port = open({ allow = { "127.0.0.1:" .. other }, route_port = 4000 })
    local code, out, err = curl(("-x http://127.0.0.1:%d http://127.0.0.1:%d/test/v1/json"):format(port, other))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:match("^HTTP/1%.%d 200"), out)
    assert.is_truthy(out:find("plain service", 1, true), out)
    local plain = {}
    for line in io.lines(dir .. "/plain.jsonl") do plain[#plain + 1] = json.decode(line) end
    assert.are.equal(1, #plain)
    assert.are.equal("/test/v1/json", plain[1].path)
    for _, h in ipairs(plain[1].headers) do
      assert.is_nil(h[2]:find(SECRET, 1, true), "the other service got the route's secret in " .. h[1])
    end
    assert.are.same({}, header(plain[1], "authorization"))
    assert.is_false(helpers.exists(dir .. "/requests.jsonl"), "the route's upstream got a request meant elsewhere")
    -- another loopback address at the route's port is not the proxy either:
    -- a forward request, refused here (not on the allowlist)
    code, out = curl(("-x http://127.0.0.1:%d http://127.0.0.2:4000/test/json"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 403"), out)
    assert.is_false(helpers.exists(dir .. "/requests.jsonl"))
    -- the proxy's own address, as the sandbox names it, is the route's
    for _, host in ipairs({ "127.0.0.1:4000", "localhost:4000", "[::1]:4000", "127.0.0.1:" .. port }) do
      code, out = curl(("-x http://127.0.0.1:%d http://%s/test/json"):format(port, host))
      assert.are.equal(0, code)
      assert.is_truthy(out:match("^HTTP/1%.1 200"), host .. ": " .. out)
    end
    local reqs = requests()
    assert.are.equal(4, #reqs)
    assert.are.same({ "Bearer " .. SECRET }, header(reqs[1], "authorization"))
    -- route_port is checked like every option
    local p, e = isolation.proxy({ allow = {}, listen = "127.0.0.1:0", route_port = 0 })
    assert.is_nil(p)
    assert.matches("route_port must be an integer from 1 to 65535", e)
  end)

  it("keeps a clean upstream for the route's next client connection: one TLS connection for many", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    for _ = 1, 4 do
      local code, out = curl(("http://127.0.0.1:%d/test/json"):format(port))
      assert.are.equal(0, code)
      assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    end
    local reqs = requests()
    assert.are.equal(4, #reqs)
    for i = 2, 4 do
      assert.are.equal(reqs[1].peer, reqs[i].peer, "request " .. i .. " came on another upstream connection")
      assert.are.same({ "Bearer " .. SECRET }, header(reqs[i], "authorization"))
    end
    assert.are.equal(4, proxy:stats().connections, "four client connections")
    -- an upstream that closes its idle connection is dialed afresh, and
    -- one that answers with Connection: close is not kept
    local same_port = up_port
    stop_upstream()
    start_upstream("good", same_port)
    local code, out = curl(("http://127.0.0.1:%d/test/json"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    code, out = curl(("-H 'Connection: close' http://127.0.0.1:%d/test/close"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    code, out = curl(("http://127.0.0.1:%d/test/json"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
    reqs = requests()
    assert.are.equal(3, #reqs)
    assert.are_not.equal(reqs[2].peer, reqs[3].peer, "the upstream that closed was reused")
  end)

  -- The upstream closes a kept connection as the proxy sends the next
  -- request on it (/drop2: the first request on a connection is answered,
  -- any later one is closed unanswered).
  it("sends a request once more on a fresh connection when the upstream closes a reused one unanswered", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    for _, q in ipairs({ "", "?rst=1" }) do
      os.remove(dir .. "/requests.jsonl")
      local url = ("http://127.0.0.1:%d/test/drop2%s"):format(port, q)
      -- GET, then a PUT whose body came with its head (held whole): both
      -- idempotent, both answered on one client connection
      local code, out, err = curl(("%s --next -sS -D - -X PUT --data-binary put-body %s"):format(url, url))
      assert.are.equal(0, code, err)
      local n = 0
      for _ in out:gmatch("HTTP/1%.1 200") do n = n + 1 end
      assert.are.equal(2, n, out)
      assert.is_nil(out:find("X-Isolation-Error", 1, true), out)
      local reqs = requests()
      -- the PUT reached the upstream twice: on the kept connection (closed
      -- unanswered), then on a fresh one, the same bytes, secret included
      assert.are.equal(3, #reqs, q)
      assert.are.same({ "GET", "PUT", "PUT" }, { reqs[1].method, reqs[2].method, reqs[3].method })
      assert.are.equal(reqs[1].peer, reqs[2].peer, "the PUT went out on the kept connection first")
      assert.is_true(reqs[2].dropped)
      assert.are_not.equal(reqs[2].peer, reqs[3].peer, "the retry went out on a fresh connection")
      assert.is_false(reqs[3].dropped)
      assert.are.equal("put-body", reqs[3].body)
      assert.are.same({ "Bearer " .. SECRET }, header(reqs[3], "authorization"))
      proxy:close()
      proxy = nil
      port = open()
    end
    -- two GETs on one client connection: the second is retried
    os.remove(dir .. "/requests.jsonl")
    local url = ("http://127.0.0.1:%d/test/drop2"):format(port)
    local code, out, err = curl(url .. " " .. url)
    assert.are.equal(0, code, err)
    local n = 0
    for _ in out:gmatch("HTTP/1%.1 200") do n = n + 1 end
    assert.are.equal(2, n, out)
    local reqs = requests()
    assert.are.equal(3, #reqs)
    assert.are.equal(reqs[1].peer, reqs[2].peer)
    assert.are_not.equal(reqs[2].peer, reqs[3].peer)
    assert.are.equal(1, proxy:stats().connections, "one client connection for both requests")
    local evs = {}
    helpers.wait_for(function()
      for _, e in ipairs(proxy:events()) do evs[#evs + 1] = e end
      return #evs >= 2
    end, 5)
    assert.are.same({ 200, 200 }, { evs[1].status, evs[2].status })
  end)

  it("never sends again a POST, a streamed body, or a request on a fresh connection", function()
    if not dir then return end
    start_upstream("good")
    local port = open()
    -- a POST whose body came whole: the upstream may have acted on it
    local url = ("http://127.0.0.1:%d/test/drop2"):format(port)
    local code, out, err = curl(("%s --next -sS -D - --data-binary post-body %s"):format(url, url))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:find("HTTP/1%.1 502"), out)
    assert.is_truthy(out:find("X-Isolation-Error: upstream_failed", 1, true), out)
    local reqs = requests()
    assert.are.same({ "GET", "POST" }, { reqs[1].method, reqs[2].method })
    assert.are.equal(2, #reqs, "the POST was not sent again")
    -- a PUT whose body is still coming from the client when the upstream
    -- closes (the head went out alone): not held whole, not sent again
    os.remove(dir .. "/requests.jsonl")
    helpers.write(dir .. "/stream.py", ([[
import socket
s = socket.create_connection(("127.0.0.1", %d), timeout=20)
s.sendall(b"GET /test/drop2 HTTP/1.1\r\nHost: x\r\n\r\n")
got = b""
while b'"ok": true' not in got:
    got += s.recv(65536)
s.sendall(b"PUT /test/drop2 HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n")
rest = b""
while b"\r\n\r\n" not in rest:
    b = s.recv(65536)
    if not b:
        break
    rest += b
print(rest.decode("latin-1"))
]]):format(port))
    code, out, err = helpers.run("python3 " .. helpers.shquote(dir .. "/stream.py"))
    assert.are.equal(0, code, err)
    assert.is_truthy(out:match("^HTTP/1%.1 502"), out)
    assert.is_truthy(out:find("X-Isolation-Error: upstream_failed", 1, true), out)
    reqs = requests()
    assert.are.equal(2, #reqs, "the streamed PUT was not sent again")
    assert.is_true(reqs[2].dropped)
    -- a fresh connection the upstream closes unanswered: 502, once
    os.remove(dir .. "/requests.jsonl")
    code, out = curl(("http://127.0.0.1:%d/test/drop1"):format(port))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 502"), out)
    assert.is_truthy(out:find("X-Isolation-Error: upstream_failed", 1, true), out)
    assert.are.equal(1, #requests(), "a fresh connection's failure is not retried")
  end)

  -- /close answers with Connection: close: every request of a route needs
  -- a new upstream TLS connection.
  it("resumes the route's TLS session on its next upstream connection, never another route's", function()
    if not dir then return end
    start_upstream("good")
    local port2 = tonumber(helpers.read(dir .. "/port2"))
    local function get(route, n)
      os.remove(dir .. "/requests.jsonl")
      for _ = 1, n do
        local code, out = curl(("http://127.0.0.1:%d/%s/close"):format(proxy:port(), route))
        assert.are.equal(0, code)
        assert.is_truthy(out:match("^HTTP/1%.1 200"), out)
      end
      local reqs, resumed, peers = requests(), {}, {}
      for i, r in ipairs(reqs) do
        resumed[i] = r.resumed
        peers[r.peer] = true
        assert.are.same({ "Bearer " .. SECRET }, header(r, "authorization"))
      end
      local np = 0
      for _ in pairs(peers) do np = np + 1 end
      assert.are.equal(n, np, route .. ": a new upstream connection for each request")
      return resumed, reqs
    end
    -- the same upstream server (one TLS context, one ticket key) under
    -- another host name, and at another port: a session offered there
    -- would be resumed, so none is
    open({ routes = {
      { name = "test", upstream = "https://up.example.com:" .. up_port, value = SECRET },
      { name = "byip", upstream = "https://127.0.0.1:" .. up_port, value = SECRET },
      { name = "port2", upstream = "https://up.example.com:" .. port2, value = SECRET },
    } })
    assert.are.same({ false, true, true }, (get("test", 3)))
    assert.are.same({ false, true }, (get("byip", 2)))
    local resumed, reqs = get("port2", 2)
    assert.are.same({ false, true }, resumed)
    assert.are.equal(port2, reqs[1].server_port)
    -- each route still has its own
    assert.are.same({ true }, (get("test", 1)))
    assert.are.same({ true }, (get("byip", 1)))
    -- a proxy's sessions end with it: a new one starts with a full handshake
    proxy:close()
    open()
    assert.are.same({ false, true }, (get("test", 2)))
    -- a session does not let another upstream in at the same address: one
    -- with another CA's certificate declines it and fails verification
    local same_port = up_port
    stop_upstream()
    start_upstream("othersigned", same_port)
    local code, out = curl(("http://127.0.0.1:%d/test/close"):format(proxy:port()))
    assert.are.equal(0, code)
    assert.is_truthy(out:match("^HTTP/1%.1 502"), out)
    assert.is_truthy(out:find("X-Isolation-Error: upstream_tls", 1, true), out)
    assert.is_false(helpers.exists(dir .. "/requests.jsonl"), "no request was sent to it")
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
