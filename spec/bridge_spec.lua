-- The in-sandbox bridge alone, on the host: loopback TCP clients relayed to
-- a unix-socket upstream (a luv server in this process). The relay tests run
-- against both bridges: isolation-bridge, and socat with the seed's argument
-- order (listening address first; the reversed order shared one upstream
-- connection between all clients).
local uv = require("luv")
local helpers = require("helpers")
local B = require("support.bridge")

local MiB = 1024 * 1024

-- luv callbacks of this file run under pcall (see support.bridge)
lazy_setup(B.guard)
lazy_teardown(B.unguard)

local function new_dir()
  return helpers.tmpdir()
end

for _, bridge in ipairs(B.bridges) do
  describe("bridge " .. bridge.name, function()
    local dir, sock, port, pid, server, stats

    before_each(function()
      dir = new_dir()
      sock = dir .. "/up.sock"
      port = B.free_port()
    end)

    after_each(function()
      B.kill(pid)
      pid = nil
      if server and not server:is_closing() then server:close() end
      server = nil
      uv.run("nowait")
      helpers.rmtree(dir)
    end)

    local function start(handler)
      server, stats = B.unix_server(sock, handler or B.echo)
      pid = assert(bridge.start(port, sock))
    end

    local function echo_client(msg)
      return B.client(port, function(t)
        t:write(msg)
        t:shutdown()
      end)
    end

    it("relays several connections in a row, each to its own upstream connection", function()
      start()
      for i = 1, 6 do
        local msg = "request " .. i .. " " .. string.rep("z", i * 100)
        local c = echo_client(msg)
        assert.is_true(B.run_until(function() return c.eof end, 10), "connection " .. i .. " did not end")
        assert.is_nil(c.err)
        assert.are.equal(msg, c.data())
        c.close()
      end
      assert.are.equal(6, stats.count)
    end)

    it("relays " .. bridge.burst .. " connections at once, none mixed with another", function()
      start()
      local clients = {}
      for i = 1, bridge.burst do
        clients[i] = echo_client(string.format("client %02d ", i) .. string.rep(string.char(64 + i), 2000))
      end
      assert.is_true(B.run_until(function()
        for _, c in ipairs(clients) do if not c.eof then return false end end
        return true
      end, 20))
      for i, c in ipairs(clients) do
        assert.is_nil(c.err)
        assert.are.equal(string.format("client %02d ", i) .. string.rep(string.char(64 + i), 2000), c.data())
        c.close()
      end
      assert.are.equal(bridge.burst, stats.count)
    end)

    it("moves 1 MiB each way byte for byte", function()
      local up_payload, down_payload = B.bytes(MiB, 7), B.bytes(MiB, 11)
      local got_up, up_eof = {}, false
      start(function(c)
        c:write(down_payload)
        c:read_start(function(err, data)
          if err or not data then
            up_eof = true
            c:shutdown(function() c:close() end)
          else
            got_up[#got_up + 1] = data
          end
        end)
      end)
      local c = B.client(port, function(t)
        t:write(up_payload)
        t:shutdown()
      end)
      assert.is_true(B.run_until(function() return c.eof and up_eof end, 30))
      assert.is_nil(c.err)
      assert.is_true(table.concat(got_up) == up_payload, "upstream got other bytes than sent")
      assert.is_true(c.data() == down_payload, "client got other bytes than sent")
      c.close()
    end)

    it("holds a fast writer back while the upstream does not read, and loses nothing", function()
      local up_conn
      start(function(c) up_conn = c end) -- accepts, reads nothing yet
      local chunk = B.bytes(64 * 1024, 3)
      local accepted, stalled = 0, false
      local c = B.client(port, function(t)
        -- push with try_write until the kernel refuses for a while: 64 MiB at most
        local idle = uv.new_timer()
        local refused_since
        idle:start(1, 5, function()
          while accepted < 64 * MiB do
            local n = t:try_write(chunk)
            if not n or n == 0 then break end
            accepted = accepted + n
            refused_since = nil
            if n < #chunk then -- keep the stream exact: send the rest later
              chunk = chunk:sub(n + 1) .. chunk:sub(1, n)
              break
            end
          end
          refused_since = refused_since or uv.now()
          if uv.now() - refused_since > 500 or accepted >= 64 * MiB then
            idle:close()
            stalled = true
          end
        end)
      end)
      assert.is_true(B.run_until(function() return stalled end, 30))
      assert.is_true(accepted < 48 * MiB, "the bridge took " .. accepted .. " bytes the upstream never read")
      -- the upstream starts reading: every accepted byte arrives
      local got = 0
      up_conn:read_start(function(err, data)
        if not err and data then got = got + #data end
      end)
      assert.is_true(B.run_until(function() return got >= accepted end, 30))
      assert.are.equal(accepted, got)
      c.close()
    end)

    it("delivers an answer the upstream sent before closing on an unread request", function()
      if not bridge.answers_refusal then
        pending("socat ends both sides on its first write error and loses the answer now and then")
        return
      end
      -- the proxy refusing a request whose body it never reads: 403, close
      start(function(c)
        c:read_start(function()
          c:read_stop()
          c:write("HTTP/1.1 403 Forbidden\r\n\r\n", function() c:close() end)
        end)
      end)
      local c = B.client(port, function(t)
        t:write("POST http://blocked.example.net/ HTTP/1.1\r\n\r\n")
        t:write(B.bytes(4 * MiB, 5)) -- far more than the upstream reads
      end)
      B.run_until(function() return c.eof end, 15)
      assert.are.equal("HTTP/1.1 403 Forbidden\r\n\r\n", c.data())
      c.close()
    end)

    it("passes a client's half-close on and still relays the answer", function()
      local seen_before_eof
      start(function(c)
        local buf = {}
        c:read_start(function(err, data)
          if err or not data then
            seen_before_eof = table.concat(buf)
            -- only now, after the client's end of stream, answer
            c:write("answer after your EOF", function()
              c:shutdown(function() c:close() end)
            end)
          else
            buf[#buf + 1] = data
          end
        end)
      end)
      local c = echo_client("question")
      assert.is_true(B.run_until(function() return c.eof end, 10))
      assert.are.equal("question", seen_before_eof)
      assert.are.equal("answer after your EOF", c.data())
      c.close()
    end)

    it("passes the upstream's half-close on while the client keeps sending", function()
      local got, up_eof = {}, false
      start(function(c)
        c:write("banner", function() c:shutdown() end) -- upstream ends first
        c:read_start(function(err, data)
          if err or not data then
            up_eof = true
            c:close()
          else
            got[#got + 1] = data
          end
        end)
      end)
      local c
      c = B.client(port, function(t)
        local timer = uv.new_timer()
        timer:start(10, 10, function()
          if c.eof then -- the client saw the upstream's EOF: keep talking
            timer:close()
            t:write("still here", function() t:shutdown() end)
          end
        end)
      end)
      assert.is_true(B.run_until(function() return up_eof end, 10))
      assert.are.equal("banner", c.data())
      assert.are.equal("still here", table.concat(got))
      c.close()
    end)
  end)
end

describe("socat with the first seed's argument order (unix side first)", function()
  it("fails the in-a-row test: every client shares one upstream connection", function()
    local dir = helpers.tmpdir()
    local sock, port = dir .. "/up.sock", B.free_port()
    -- like the proxy ending a tunnel: answer what came, then close
    local server, stats = B.unix_server(sock, function(c)
      c:read_start(function(err, data)
        c:read_stop()
        if err or not data then c:close() return end
        c:write(data, function() c:shutdown(function() c:close() end) end)
      end)
    end)
    local pid = B.start_socat(port, sock, true)
    local ok = 0
    for i = 1, 3 do
      local msg = "request " .. i
      local c = B.client(port, function(t) t:write(msg); t:shutdown() end)
      B.run_until(function() return c.eof end, 5)
      if c.data() == msg then ok = ok + 1 end
      c.close()
    end
    B.kill(pid)
    server:close()
    uv.run("nowait")
    helpers.rmtree(dir)
    -- the proof that the relay tests above can catch the seed's bug: one
    -- upstream connection for all, and every client after the first fails
    assert.are.equal(1, stats.count)
    assert.are.equal(1, ok)
  end)
end)

describe("isolation.BRIDGE", function()
  -- Each case loads a copy of the (non-sanitizer) module from a directory
  -- of its own, in a child lua5.4.
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  local function bridge_seen_from(so_dir)
    local code, out, err = helpers.run("cd / && LUA_CPATH=" .. helpers.shquote(so_dir .. "/?.so")
      .. " lua5.4 -e 'print(require(\"isolation\").BRIDGE)'")
    assert.are.equal(0, code, err)
    return (out:gsub("\n$", ""))
  end

  it("is the isolation-bridge beside the loaded isolation.so, by its real path", function()
    assert(os.execute("cp build/isolation.so build/isolation-bridge " .. helpers.shquote(dir)))
    assert.are.equal(dir .. "/isolation-bridge", bridge_seen_from(dir))
    -- loaded through a symlinked directory: still the real path
    assert(os.execute("ln -s " .. helpers.shquote(dir) .. " " .. helpers.shquote(dir .. "/link")))
    assert.are.equal(dir .. "/isolation-bridge", bridge_seen_from(dir .. "/link"))
  end)

  it("is nil when no executable bridge is beside the module", function()
    assert(os.execute("cp build/isolation.so " .. helpers.shquote(dir)))
    assert.are.equal("nil", bridge_seen_from(dir))
    assert(os.execute("cp build/isolation-bridge " .. helpers.shquote(dir) .. " && chmod 0644 "
      .. helpers.shquote(dir .. "/isolation-bridge")))
    assert.are.equal("nil", bridge_seen_from(dir))
    assert(os.execute("rm " .. helpers.shquote(dir .. "/isolation-bridge") .. " && mkdir "
      .. helpers.shquote(dir .. "/isolation-bridge")))
    assert.are.equal("nil", bridge_seen_from(dir))
  end)

  it("is the build's bridge in this process", function()
    local isolation = require("isolation")
    local _, real = helpers.run("realpath " .. B.bin())
    assert.are.equal((real:gsub("\n$", "")), isolation.BRIDGE)
  end)
end)

describe("isolation-bridge", function()
  local bin = B.bin()
  local dir, sock, pids

  before_each(function()
    dir = helpers.tmpdir()
    sock = dir .. "/up.sock"
    pids = {}
  end)

  after_each(function()
    for _, p in ipairs(pids) do B.kill(p) end
    uv.run("nowait")
    helpers.rmtree(dir)
  end)

  local function start(port)
    local pid, code, err = B.start_builtin(port, sock)
    assert(pid, "bridge failed: " .. tostring(code) .. " " .. tostring(err))
    pids[#pids + 1] = pid
    return pid
  end

  it("is listening and relaying by the time its parent exits 0, every time", function()
    pids[#pids + 1] = B.start_echo_process(sock)
    for _ = 1, 15 do
      local port = B.free_port()
      -- the very next command connects and talks, with no wait in between
      local code, out, err = helpers.run(string.format(
        "%s %d %s && bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && printf ping >&3 && head -c 4 <&3'",
        bin, port, helpers.shquote(sock), port))
      local pid = B.listener_pid(port)
      if pid then pids[#pids + 1] = pid end
      assert.are.equal(0, code, err)
      assert.are.equal("ping", out)
    end
  end)

  it("leaves the caller's output pipes alone (a $(...) capture returns)", function()
    local port = B.free_port()
    local code, out = helpers.run(string.format("timeout 10 sh -c 'x=$(%s %d %s 2>&1); echo \"[$x]\"'",
      bin, port, helpers.shquote(sock)))
    local pid = B.listener_pid(port)
    if pid then pids[#pids + 1] = pid end
    assert.are.equal(0, code)
    assert.are.equal("[]\n", out)
    assert.is_truthy(pid)
  end)

  it("refuses bad arguments with exit 2 and one clear line", function()
    local cases = {
      { "", "usage: isolation%-bridge PORT SOCKET" },
      { "3128", "usage" },
      { "0 /x.sock", "PORT must be a number from 1 to 65535 %(got \"0\"%)" },
      { "65536 /x.sock", "PORT must be" },
      { "12ab /x.sock", "PORT must be" },
      { "-1 /x.sock", "PORT must be" },
      { "3128 ''", "SOCKET must be a path of 1 to 107 bytes" },
      { "3128 /" .. string.rep("s", 120), "SOCKET must be" },
      { "3128 /x.sock extra", "usage" },
      -- PORT,PORT: two different ports, nothing else
      { "3128,3128 /x.sock", "PORT must be a number from 1 to 65535 %(got \"3128,3128\"%)" },
      { "3128,1080,1081 /x.sock", "PORT must be" },
      { "3128, /x.sock", "PORT must be" },
      { ",1080 /x.sock", "PORT must be" },
      { "3128,0 /x.sock", "PORT must be" },
      { "'3128;1080' /x.sock", "PORT must be" },
      { "000003128,1080 /x.sock", "PORT must be" },
    }
    for _, case in ipairs(cases) do
      local code, out, err = helpers.run(bin .. " " .. case[1])
      assert.are.equal(2, code, case[1])
      assert.are.equal("", out)
      assert.matches(case[2], err)
    end
  end)

  it("fails with exit 1 and names the address when the port is in use", function()
    local holder = uv.new_tcp()
    assert(holder:bind("127.0.0.1", 0))
    assert(holder:listen(1, function() end))
    local port = holder:getsockname().port
    local code, out, err = helpers.run(bin .. " " .. port .. " " .. helpers.shquote(sock))
    holder:close()
    uv.run("nowait")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^isolation%-bridge: 127%.0%.0%.1:" .. port .. ": Address already in use\n$", err)
  end)

  it("PORT,PORT: listens on both by the time its parent exits 0, each client its own upstream", function()
    pids[#pids + 1] = B.start_echo_process(sock)
    local p1, p2 = B.free_port(), B.free_port()
    local code, out, err = helpers.run(string.format(
      "%s %d,%d %s && bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d 4<>/dev/tcp/127.0.0.1/%d && printf one >&3 && "
        .. "printf two >&4 && head -c 3 <&3 && head -c 3 <&4'",
      bin, p1, p2, helpers.shquote(sock), p1, p2))
    local pid = B.listener_pid(p1)
    if pid then pids[#pids + 1] = pid end
    assert.are.equal(0, code, err)
    assert.are.equal("onetwo", out)
    -- one process holds both listeners
    assert.are.equal(pid, B.listener_pid(p2))
  end)

  it("PORT,PORT with the second port in use: exit 1 naming it, the first one not left listening", function()
    local holder = uv.new_tcp()
    assert(holder:bind("127.0.0.1", 0))
    assert(holder:listen(1, function() end))
    local busy, free = holder:getsockname().port, B.free_port()
    local code, out, err = helpers.run(bin .. " " .. free .. "," .. busy .. " " .. helpers.shquote(sock))
    holder:close()
    uv.run("nowait")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.matches("^isolation%-bridge: 127%.0%.0%.1:" .. busy .. ": Address already in use\n$", err)
    assert.is_nil(B.listener_pid(free))
  end)

  it("closes a client whose upstream is missing and serves the next one once it is back", function()
    local port = B.free_port()
    start(port)
    local c = B.client(port, function(t) t:write("hello") end)
    assert.is_true(B.run_until(function() return c.eof end, 10))
    assert.are.equal("", c.data())
    c.close()
    local server = B.unix_server(sock, B.echo)
    local c2 = B.client(port, function(t) t:write("again"); t:shutdown() end)
    assert.is_true(B.run_until(function() return c2.eof end, 10))
    assert.are.equal("again", c2.data())
    c2.close()
    server:close()
  end)

  it("keeps no descriptor it inherited: stdio on /dev/null, a listener, its epoll", function()
    local held = assert(io.open(dir .. "/inherited", "w")) -- Lua's files are not close-on-exec
    local port = B.free_port()
    local pid = start(port)
    held:close()
    local _, out = helpers.run("ls -l /proc/" .. pid .. "/fd")
    local targets = {}
    for fd, target in out:gmatch(" (%d+) %-> ([^\n]+)") do targets[tonumber(fd)] = target end
    assert.are.equal("/dev/null", targets[0])
    assert.are.equal("/dev/null", targets[1])
    assert.are.equal("/dev/null", targets[2])
    local others = {}
    for fd, target in pairs(targets) do
      if fd > 2 then others[#others + 1] = target:gsub("%[%d+%]", "") end
    end
    table.sort(others)
    assert.are.same({ "anon_inode:[eventpoll]", "socket:" }, others)
  end)

  it("leaks no fd, in the bridge or here, over many connections", function()
    local port = B.free_port() -- also brings up luv's loop and its own fds
    local before_here = B.own_fd_count()
    local server = B.unix_server(sock, B.echo)
    local pid = start(port)
    local before_bridge = B.fd_count(pid)
    assert.is_true(B.alive(pid) and before_bridge >= 2, "no bridge process to count")
    local clients = {}
    for i = 1, 40 do
      clients[i] = B.client(port, function(t) t:write("x" .. i); t:shutdown() end)
    end
    -- and some that leave abruptly, without a shutdown
    for i = 41, 50 do
      clients[i] = B.client(port, function(t, rec) t:write("y"); rec.close() end)
    end
    B.run_until(function()
      for i = 1, 40 do if not clients[i].eof then return false end end
      return true
    end, 20)
    for _, c in ipairs(clients) do c.close() end
    uv.run("nowait")
    local after
    for _ = 1, 100 do
      after = B.fd_count(pid)
      if after == before_bridge then break end
      B.run_until(function() return false end, 0.05)
    end
    assert.are.equal(before_bridge, after)
    server:close()
    -- the upstream's connections close on the loop as their ends arrive
    local here
    B.run_until(function()
      here = B.own_fd_count()
      return here == before_here
    end, 5)
    assert.are.equal(before_here, here)
  end)

  it("dies with the PID namespace of the sandbox that started it", function()
    if helpers.skip_without_bwrap() then return end
    local server = B.unix_server(sock, B.echo)
    local port = B.free_port()
    -- The sandbox shares the host's network (no --unshare-net) so that this
    -- test can see the listener; it ends as soon as its command has used it.
    local code, out, err = helpers.run(string.format(
      "bwrap --dev-bind / / --unshare-pid --die-with-parent -- bash -c "
        .. "%s",
      helpers.shquote(string.format("%s %d %s && exec 3<>/dev/tcp/127.0.0.1/%d && echo listening",
        bin, port, helpers.shquote(sock), port))))
    assert.are.equal(0, code, err)
    assert.are.equal("listening\n", out)
    local gone = false
    for _ = 1, 100 do
      if not B.listener_pid(port) then gone = true break end
      helpers.run("sleep 0.05")
    end
    assert.is_true(gone, "the bridge outlived its sandbox")
    server:close()
  end)
end)
