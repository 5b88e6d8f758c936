-- Listeners handed to the proxy over its unix socket (bridge "pass",
-- src/proxy/proxy_pass.c), attacked as a sandboxed process would: everything
-- but a listening TCP socket on a loopback address is refused whole, its
-- descriptors closed, an error event given, and the proxy's own
-- descriptors are back to their count afterwards. The sender is
-- spec/support/handover.py (python3's socket.send_fds), run as a child
-- process with luv so that the luv-mode proxy keeps running meanwhile.
local uv = require("luv")
local isolation = require("isolation")
local helpers = require("helpers")
local W = require("support.proxy")

local HANDOVER = "spec/support/handover.py"

-- Runs handover.py SOCKET KIND; returns its output lines. With `hold`, the
-- control connection stays open until release() is called, and seen(s)
-- tells whether s was printed meanwhile.
local function handover(sock, kind, hold)
  local out, done = {}, false
  local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
  local handle = uv.spawn("python3", {
    args = { HANDOVER, sock, kind, hold and "hold" or nil },
    stdio = { stdin, stdout, 2 },
  }, function() done = true end)
  assert(handle, "python3 did not start")
  local text = ""
  stdout:read_start(function(_, data) if data then text = text .. data end end)
  local function lines()
    for l in text:gmatch("[^\n]+") do
      if l == "end" then break end
      out[#out + 1] = l
    end
    return out
  end
  if hold then
    assert(W.run_until(function() return text:find("\nend\n") ~= nil end, 15), "no reply")
    local function seen(s)
      return W.run_until(function() return text:find(s, 1, true) ~= nil end, 5)
    end
    return lines(), function()
      stdin:close()
      W.run_until(function() return done end, 15)
      stdout:close()
      handle:close()
      W.settle(0.05)
    end, seen
  end
  stdin:close()
  assert(W.run_until(function() return done end, 15), "handover.py did not end")
  W.run_until(function() return false end, 0.02)
  stdout:close()
  handle:close()
  W.settle(0.05)
  return lines()
end

-- Whether this kernel lets a unix socket refuse descriptors from its
-- peers (SO_PASSRIGHTS, Linux 6.16).
local refusable
local function rights_refusable()
  if refusable == nil then
    refusable = os.execute("python3 -c 'import socket; socket.socket(socket.AF_UNIX)"
      .. ".setsockopt(socket.SOL_SOCKET, 83, 0)' 2>/dev/null") == true
  end
  return refusable
end

local function fds_back(want)
  local n
  for _ = 1, 100 do
    n = helpers.fd_count()
    if n == want then return true end
    W.settle(0.02)
  end
  return false, "the proxy process holds " .. n .. " descriptors, had " .. want
end

for _, mode in ipairs({ "thread", "luv" }) do
  describe("proxy accept_listeners (" .. mode .. " mode)", function()
    local dir, sock, p, events

    local function open(n)
      sock = dir .. "/p.sock"
      events = {}
      local err
      p, err = isolation.proxy({
        unix = sock, allow = { "example.com" }, accept_listeners = n,
        loop = mode == "luv" and uv or nil,
        on_event = mode == "luv" and function(e) events[#events + 1] = e end or nil,
      })
      assert.is_truthy(p, err)
    end

    local function all_events()
      if mode == "thread" then
        for _, e in ipairs(p:events()) do events[#events + 1] = e end
      end
      return events
    end

    lazy_setup(function()
      -- luv's first child process with pipes leaves a descriptor of its
      -- own (SIGCHLD handling): made here, before any count
      local done = false
      local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
      local h = uv.spawn("true", { stdio = { stdin, stdout, 2 } }, function() done = true end)
      stdout:read_start(function() end)
      stdin:close()
      W.run_until(function() return done end, 5)
      stdout:close()
      h:close()
      W.settle(0.05)
    end)
    before_each(function() dir = helpers.tmpdir() end)
    after_each(function()
      if p then p:close() end
      p = nil
      W.settle(0.02)
      helpers.rmtree(dir)
    end)

    it("takes a loopback listener and answers requests made on it, with the usual checks", function()
      open(2)
      local base = helpers.fd_count()
      for _, kind in ipairs({ "listener", "listener6" }) do
        local out = handover(sock, kind)
        assert.are.equal("ok", out[1], table.concat(out, "\n"))
        assert.are.equal("via-listener:HTTP/1.1 403 Forbidden", out[2])
      end
      assert(fds_back(base))
      local denied = 0
      for _, e in ipairs(all_events()) do
        if e.code == "not_allowed" then denied = denied + 1 end
      end
      assert.are.equal(2, denied)
      assert.are.equal(0, p:stats().errors)
    end)

    local refused = {
      { "connected", "a connected TCP socket", "is not listening" },
      { "file", "a file", "is not a socket" },
      { "pipe", "a pipe", "is not a socket" },
      { "udp", "a UDP socket", "is not a stream socket" },
      { "any_address", "a listener on 0.0.0.0", "is not bound to a loopback address" },
      { "unix_listener", "a unix listener", "is not a TCP socket" },
      { "three", "three listeners at once", "more descriptors than a handover may carry" },
      { "flood", "200 listeners in one message (truncated control data)", "more descriptors than" },
      { "none", "the handover message without a descriptor", "carried no descriptor" },
      { "eventfd", "an eventfd", "is not a socket" },
      { "memfd", "a memfd", "is not a socket" },
      { "pidfd", "a pidfd of the sender", "is not a socket" },
      { "epoll", "an epoll descriptor", "is not a socket" },
      { "bad_magic", "a listener with another first message", "not a listener handover" },
    }
    for _, case in ipairs(refused) do
      local kind, what, why = case[1], case[2], case[3]
      it("refuses " .. what .. ", closes what came and gives an error event", function()
        open(4)
        local base = helpers.fd_count()
        local out = handover(sock, kind)
        assert.matches("^no ", out[1])
        assert.is_truthy(out[1]:find(why, 1, true), out[1])
        if kind == "file" then assert.are.equal("file:secret", out[2]) end
        if kind == "connected" then assert.are.equal("peer-got:<nothing>", out[2]) end
        assert(fds_back(base))
        local ev = all_events()
        assert.are.equal(1, #ev)
        assert.are.equal("error", ev[1].type)
        assert.are.equal("bad_handover", ev[1].code)
        assert.are.equal(1, p:stats().errors)
        assert.are.equal(0, p:stats().active)
      end)
    end

    it("holds at most accept_listeners listeners while it has room for more", function()
      open(2)
      local base = helpers.fd_count()
      local out, release = handover(sock, "listener", true)
      assert.are.equal("ok", out[1])
      local second = handover(sock, "three")
      assert.matches("^no more descriptors than a handover may carry", second[1])
      release()
      assert(fds_back(base))
    end)

    -- The attack: the agent kills the sandbox's keeper (its control
    -- connection ends, the slots free up) and hands over listeners of its
    -- own, which it kept a copy of (made blocking, accept() would stop
    -- the loop), or any descriptor whose last close waits.
    it("is sealed once it holds accept_listeners: no handover is taken again, not even after they end", function()
      if not rights_refusable() then return pending("no SO_PASSRIGHTS in this kernel (before 6.16)") end
      open(1)
      local base = helpers.fd_count()
      local out, release = handover(sock, "listener", true)
      assert.are.equal("ok", out[1])
      assert.are.same({ "send-refused:EPERM" }, handover(sock, "listener"))
      release()
      assert(fds_back(base))
      -- slots free again, still sealed: the kernel refuses the send, and a
      -- handover without a descriptor is read as a (bad) HTTP request
      assert.are.same({ "send-refused:EPERM" }, handover(sock, "listener"))
      assert.are.same({ "send-refused:EPERM" }, handover(sock, "connected"))
      assert.matches("^HTTP/1.1 400", handover(sock, "none")[1])
      -- and it still serves plain requests
      assert.are.same({ "send-refused:EPERM" }, handover(sock, "http_with_fd"))
      local c = W.exchange("unix:" .. sock, "GET http://blocked.example.net/ HTTP/1.1\r\n"
        .. "Host: blocked.example.net\r\n\r\n")
      assert.are.equal(403, c:status())
      assert(fds_back(base))
    end)

    it("cannot be stopped by a lingering TCP socket sent with a request (the kernel refuses the send)", function()
      if not rights_refusable() then return pending("no SO_PASSRIGHTS in this kernel (before 6.16)") end
      for _, n in ipairs({ 0, 1 }) do
        open(n)
        local release
        if n == 1 then -- sealed by a sandbox's handover first
          local out
          out, release = handover(sock, "listener", true)
          assert.are.equal("ok", out[1])
        end
        local t0 = uv.hrtime()
        local out = handover(sock, "lingering")
        local took = (uv.hrtime() - t0) / 1e9
        assert.are.same({ "send-refused:EPERM" }, out)
        assert.is_true(took < 5, ("the proxy's answer took %.1f s"):format(took))
        if release then release() end
        p:close()
        p = nil
        W.settle(0.02)
      end
    end)

    -- options the sandbox may set on a listener (they are its own to set):
    -- the listener is taken, SO_LINGER (which its clients would inherit,
    -- and the loop's close of one would wait for) is cleared, and the
    -- proxy's other clients are not touched
    for _, case in ipairs({
      { "odd_listener", "on 127.0.0.2 with a SO_REUSEPORT twin the sender keeps, TCP_DEFER_ACCEPT, TCP_FASTOPEN, "
        .. "SO_RCVLOWAT, 1-byte buffers and SO_LINGER" },
      { "dual_stack", "on ::1 with IPV6_V6ONLY off" },
    }) do
      it("takes a listener " .. case[2] .. ", and serves its other clients as before", function()
        open(2)
        local base = helpers.fd_count()
        local out = handover(sock, case[1])
        assert.are.equal("ok", out[1], table.concat(out, "\n"))
        assert.are.equal("other:HTTP/1.1 403 Forbidden", out[2])
        if case[1] == "odd_listener" then assert.matches("^linger:0,", out[3]) end
        assert(fds_back(base))
        assert.are.equal(0, p:stats().errors)
      end)
    end

    it("takes no listener from a connection that made a request first", function()
      open(2)
      local base = helpers.fd_count()
      local out = handover(sock, "after_http")
      assert.are.equal("HTTP/1.1 403 Forbidden", out[1], table.concat(out, "\n"))
      assert.are_not.equal("ok", out[2])
      assert.are.equal(0, p:stats().errors)
      assert(fds_back(base))
    end)

    it("closes a control connection that speaks SOCKS5 after its handover, and its listener with it", function()
      open(2)
      local base = helpers.fd_count()
      local out = handover(sock, "socks_after")
      assert.are.equal("ok", out[1], table.concat(out, "\n"))
      assert.is_truthy(out[2] == "ctl:<eof>" or out[2] == "ctl:<ConnectionResetError>", out[2])
      assert.is_truthy(out[3] == "served-after:no" or out[3] == "served-after:refused", out[3])
      assert(fds_back(base))
    end)

    it("drops a descriptor sent with an HTTP request: the request is only a request", function()
      open(2)
      local base = helpers.fd_count()
      local out = handover(sock, "http_with_fd")
      assert.are.equal("HTTP/1.1 403 Forbidden", out[1])
      assert(fds_back(base))
      assert.are.equal(0, p:stats().errors)
    end)

    it("takes no listener unless its owner asked (accept_listeners 0, the default)", function()
      open(nil)
      local base = helpers.fd_count()
      local out = handover(sock, "listener")
      if rights_refusable() then
        -- no peer can send its socket a descriptor at all
        assert.are.same({ "send-refused:EPERM" }, out)
        assert.are.same({ "send-refused:EPERM" }, handover(sock, "http_with_fd"))
      else
        assert.matches("^HTTP/1.1 400", out[1])
      end
      assert(fds_back(base))
    end)

    it("closes the listeners it holds, and their control connection, when the proxy closes", function()
      local base = helpers.fd_count()
      open(2)
      local out, release, seen = handover(sock, "listener", true)
      assert.are.equal("ok", out[1])
      p:close()
      p = nil
      assert.is_true(seen("ctl-closed"), "the control connection stayed open")
      release()
      assert(fds_back(base))
    end)

    it("refuses accept_listeners outside 0..64, naming the option", function()
      local q, err = isolation.proxy({ unix = dir .. "/q.sock", allow = {}, accept_listeners = 65 })
      assert.is_nil(q)
      assert.matches("accept_listeners must be an integer from 0 to 64", err)
      q, err = isolation.proxy({ unix = dir .. "/q.sock", allow = {}, accept_listeners = "2" })
      assert.is_nil(q)
      assert.matches("accept_listeners", err)
    end)
  end)
end

describe("isolation-bridge --pass (the starter, on the host)", function()
  local dir, p

  before_each(function() dir = helpers.tmpdir() end)
  after_each(function()
    if p then p:close() end
    p = nil
    helpers.rmtree(dir)
  end)

  local function starter(port, command)
    return helpers.run(helpers.shquote(isolation.BRIDGE) .. " --pass " .. port .. " "
      .. helpers.shquote(dir .. "/p.sock") .. " " .. command)
  end

  it("execs the command once the proxy took the listener, which then answers on the port", function()
    p = assert(isolation.proxy({ unix = dir .. "/p.sock", allow = { "example.com" }, accept_listeners = 1 }))
    local port = require("support.bridge").free_port()
    local code, out, err = starter(port, "curl -s -o /dev/null -w '%{http_code}' -x http://127.0.0.1:" .. port
      .. " http://blocked.example.net/")
    assert.are.equal(0, code, err)
    assert.are.equal("403", out)
  end)

  it("exits 126 with the reason, running nothing, when the proxy takes no listeners", function()
    p = assert(isolation.proxy({ unix = dir .. "/p.sock", allow = {} }))
    local code, out, err = starter(require("support.bridge").free_port(), "echo ran")
    assert.are.equal(126, code)
    assert.are.equal("", out)
    assert.matches("accept_listeners is 0", err, 1, true)
  end)

  -- The keeper ends its sandbox when the proxy closes (kill(-1) in the
  -- sandbox's PID namespace: deny_spec, containers_spec); anywhere else
  -- kill(-1) would reach every process of the user, so it only exits.
  -- Each case runs the starter where a wrong guard would do harm, and
  -- watches a process of the same user that must live on.
  local function keepers(port)
    return require("support.cli").pgrep("--pass\0" .. port .. "\0")
  end

  it("outside a sandbox, orphaned (its parent PID 1 of the host's PID namespace), the keeper only exits when the"
    .. " proxy closes: a process of the same user lives on", function()
    local _, ino = helpers.run("stat -L -c %i /proc/self/ns/pid")
    if ino ~= "4026531836\n" then
      pending("not in the host's PID namespace (inode " .. ino:gsub("%s", "") .. "): no orphan's parent is its PID 1")
      return
    end
    local _, uid = helpers.run("id -u")
    if uid ~= "0\n" then pending("needs root, to run the case as nobody") return end
    p = assert(isolation.proxy({ unix = dir .. "/p.sock", allow = { "example.com" }, accept_listeners = 1 }))
    assert(os.execute("chmod 0711 " .. helpers.shquote(dir) .. " && chown 65534 " .. helpers.shquote(dir .. "/p.sock")))
    local port = require("support.bridge").free_port()
    -- the starter waits until its parent (a subshell that has exited) is
    -- PID 1, then execs the bridge: its keeper's guard sees getppid() 1
    local starter_line = "i=0; while [ $i -lt 1000 ]; do read -r _ _ _ pp _ </proc/$$/stat; [ \"$pp\" = 1 ] && break; "
      .. "sleep 0.01; i=$((i+1)); done; "
      .. "exec " .. helpers.shquote(isolation.BRIDGE) .. " --pass " .. port .. " "
      .. helpers.shquote(dir .. "/p.sock") .. " true"
    local code, out = helpers.run("setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "
      .. helpers.shquote("sleep 60 </dev/null >/dev/null 2>&1 & echo canary=$!; (sh -c "
        .. helpers.shquote(starter_line) .. " </dev/null >/dev/null 2>&1 &)"))
    assert.are.equal(0, code)
    local canary = assert(out:match("canary=(%d+)"))
    finally(function() helpers.run("kill " .. canary .. " 2>/dev/null") end)
    -- the starter matches too until it has forked the keeper and exited:
    -- wait for one process, the keeper, orphaned (its parent PID 1)
    local ppid
    assert.is_true(helpers.wait_for(function()
      local k = keepers(port)
      if #k ~= 1 then return false end
      ppid = select(2, helpers.run("cut -d' ' -f4 /proc/" .. k[1] .. "/stat 2>/dev/null"))
      return ppid == "1\n"
    end, 10), "no keeper orphaned to PID 1 (parent " .. tostring(ppid) .. ")")
    p:close()
    assert.is_true(helpers.wait_for(function() return #keepers(port) == 0 end, 10), "the keeper outlived its proxy")
    -- alive, not a zombie that PID 1 has yet to reap
    local _, state = helpers.run("cut -d' ' -f3 /proc/" .. canary .. "/stat")
    assert.matches("^[RSD]\n$", state, nil, "the keeper killed a process of its user: " .. state)
  end)

  it("in a PID namespace of its own with a parent other than its PID 1, the keeper only exits when the proxy"
    .. " closes: a process of that namespace lives on", function()
    p = assert(isolation.proxy({ unix = dir .. "/p.sock", allow = { "example.com" }, accept_listeners = 1 }))
    local port = require("support.bridge").free_port()
    local sh = helpers.shquote
    -- `; true`: the subshell stays the starter's parent (no exec of its last command)
    local script = "sleep 30 & c=$!; (" .. sh(isolation.BRIDGE) .. " --pass " .. port .. " " .. sh(dir .. "/p.sock")
      .. " true; true); echo handed >" .. sh(dir .. "/handed") .. "; i=0; while [ ! -e " .. sh(dir .. "/closed")
      .. " ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; "
      .. "while ps -o stat= -C isolation-bridg | grep -q '^[^Z]' && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; "
      .. "case $(cut -d' ' -f3 /proc/$c/stat) in [RSD]) echo alive;; esac; kill $c"
    helpers.run("unshare --pid --fork --mount-proc sh -c " .. sh(script) .. " >" .. sh(dir .. "/out") .. " 2>&1 &")
    assert.is_true(helpers.wait_for(function() return helpers.read(dir .. "/handed") ~= nil end, 10), "no handover")
    assert.are.equal(1, #keepers(port))
    p:close()
    helpers.write(dir .. "/closed", "")
    assert.is_true(helpers.wait_for(function() return (helpers.read(dir .. "/out") or "") ~= "" end, 10),
      "the case hung")
    assert.are.equal("alive\n", helpers.read(dir .. "/out"))
  end)

  it("exits 126 naming the socket when no proxy listens there", function()
    local code, out, err = starter(require("support.bridge").free_port(), "echo ran")
    assert.are.equal(126, code)
    assert.are.equal("", out)
    assert.matches(dir .. "/p.sock", err, 1, true)
  end)
end)
