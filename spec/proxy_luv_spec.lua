-- The egress proxy in luv mode: driven by luv's uv.run() on the Lua
-- thread, on_event called from luv's loop.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local upstream = require("support.upstream")
local W = require("support.proxy")

describe("isolation.proxy (luv mode)", function()
  local up, p, events

  setup(function() up = upstream.start() end)
  teardown(function() up:stop() end)

  before_each(function()
    events = {}
    local err
    p, err = isolation.proxy({
      allow = { "up.example.com" },
      listen = "127.0.0.1:0",
      loop = uv,
      on_event = function(e) events[#events + 1] = e end,
      resolve = { ["up.example.com"] = { "127.0.0.1" }, ["no.example.com"] = { "127.0.0.1" } },
      allow_private = true,
    })
    assert.is_truthy(p, err)
  end)

  after_each(function()
    if p then p:close() end
    W.settle(0.02)
  end)

  it("tunnels and forwards while luv's loop runs, calling on_event for each", function()
    local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "ECHO\n")
    assert.matches("^HTTP/1.1 200", c.head)
    local payload = W.pattern(3, 200000)
    c:send(payload)
    assert.is_true(c:wait(function(x) return #x.data >= #payload end, 10))
    assert.are.equal(payload, c.data)
    c:close()

    local f = W.connect(p:address())
    f:send("GET http://up.example.com:" .. up.http_port .. "/small HTTP/1.1\r\nHost: up.example.com:"
      .. up.http_port .. "\r\nConnection: close\r\n\r\n")
    assert.is_true(f:wait_eof())
    assert.are.equal(200, f:status())
    f:close()

    local d = W.exchange(p:address(), "CONNECT no.example.com:443 HTTP/1.1\r\nHost: no.example.com:443\r\n\r\n")
    assert.are.equal(403, d:status())
    assert.is_true(W.run_until(function() return #events >= 3 end, 2))
    assert.are.equal(3, #events)
    assert.are.same({ "allow", "CONNECT", "up.example.com", up.raw_port, 200 },
      { events[1].type, events[1].method, events[1].host, events[1].port, events[1].status })
    assert.are.same({ "allow", "GET", 200 }, { events[2].type, events[2].method, events[2].status })
    assert.are.same({ "deny", "CONNECT", "no.example.com", 443, 403 },
      { events[3].type, events[3].method, events[3].host, events[3].port, events[3].status })
    assert.is_string(events[3].reason)
    -- on_event took them: nothing is left queued
    assert.are.same({}, p:events())
  end)

  it("lets uv.run() return once the last proxy is closed", function()
    p:close()
    p = nil
    local t0 = uv.now()
    uv.run() -- would never return while the proxy's handles were active
    assert.is_true(uv.now() - t0 < 1000)
  end)

  it("lets on_event close its own proxy", function()
    local q
    q = assert(isolation.proxy({ allow = {}, listen = "127.0.0.1:0", loop = uv,
      on_event = function() q:close() end }))
    local c = W.exchange(q:address(), "CONNECT x.example.com:1 HTTP/1.1\r\nHost: x.example.com:1\r\n\r\n")
    assert.are.equal(403, c:status())
    assert.is_true(W.run_until(function() return tostring(q) == "isolation.proxy (closed)" end, 2))
  end)

  it("runs two luv-mode proxies and a thread-mode proxy side by side", function()
    local q = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0", loop = uv,
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, allow_private = true }))
    local t = assert(isolation.proxy({ allow = { "up.example.com" }, listen = "127.0.0.1:0",
      resolve = { ["up.example.com"] = { "127.0.0.1" } }, allow_private = true }))
    for _, px in ipairs({ p, q, t }) do
      local c = W.tunnel(px:address(), "up.example.com:" .. up.raw_port, "PING\n")
      assert.is_true(c:wait_for("PONG"))
      c:close()
    end
    -- without on_event, luv-mode events queue for :events()
    assert.are.equal(1, #q:events())
    q:close()
    t:close()
  end)

  it("survives writing to a client that went away, without ignoring SIGPIPE for the process", function()
    local function sigpipe_ignored()
      local f = assert(io.open("/proc/self/status"))
      local mask = f:read("a"):match("SigIgn:%s*(%x+)")
      f:close()
      return (tonumber(mask:sub(-4), 16) & 0x1000) ~= 0 -- bit 13 is SIGPIPE
    end
    for _ = 1, 5 do
      local c = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "SRC 50000000\n")
      c.keep = false
      assert.is_true(c:wait(function(x) return x.nread > 100000 end, 5))
      c.h:close_reset()
      uv.run("nowait")
    end
    W.settle(0.3)
    -- still serving
    local d = W.tunnel(p:address(), "up.example.com:" .. up.raw_port, "PING\n")
    assert.is_true(d:wait_for("PONG"))
    d:close()
    assert.is_false(sigpipe_ignored())
  end)

  it("reports an error raised by on_event on stderr and keeps serving", function()
    -- In a child process, so that its stderr can be read.
    local script = [[
      package.cpath = "]] .. package.cpath .. [["
      local uv = require("luv")
      local isolation = require("isolation")
      local n = 0
      local p = assert(isolation.proxy({ allow = {}, listen = "127.0.0.1:0", loop = uv,
        on_event = function(e) n = n + 1; error("boom from on_event " .. n) end }))
      local answers = 0
      local function ask()
        local c = uv.new_tcp()
        c:connect("127.0.0.1", p:port(), function()
          c:write("CONNECT x.example.com:1 HTTP/1.1\r\nHost: x.example.com:1\r\n\r\n")
          c:read_start(function(err, data)
            if data and data:find("403") then answers = answers + 1 end
            if not data or err then c:close() end
          end)
        end)
      end
      ask()
      local t = uv.new_timer()
      t:start(300, 0, function() ask() end)
      local stop = uv.new_timer()
      stop:start(1500, 0, function() p:close(); t:close(); stop:close() end)
      uv.run()
      print("answers=" .. answers .. " events=" .. n)
    ]]
    local path = os.tmpname()
    helpers.write(path, script)
    -- Not helpers.run: under spec-asan the child loads the sanitizer build
    -- too, so it keeps LD_PRELOAD.
    local out_path, err_path = os.tmpname(), os.tmpname()
    local ok, how, code = os.execute("lua5.4 " .. path .. " </dev/null >" .. out_path .. " 2>" .. err_path)
    local _ = ok
    if how == "signal" then code = 128 + code end
    local out, err = helpers.read(out_path), helpers.read(err_path)
    os.remove(path)
    os.remove(out_path)
    os.remove(err_path)
    assert.are.equal(0, code, err)
    assert.matches("answers=2 events=2", out)
    assert.matches("on_event raised an error: .*boom from on_event 1", err)
    assert.matches("boom from on_event 2", err)
  end)
end)
