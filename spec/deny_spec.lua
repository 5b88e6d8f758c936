-- Network deny, end to end: real nested bwrap sandboxes built by
-- isolation.wrap, the real proxy (thread mode) on a unix socket, and each
-- bridge (socat, the default, the built-in isolation-bridge, and pass: the
-- sandbox's listener handed to the proxy, which takes listeners here; the
-- other bridges' clients then pass its first-byte probe). Every
-- property is checked by trying to break it from inside the sandbox.
local isolation = require("isolation")
local helpers = require("helpers")
local B = require("support.bridge")
local upstream = require("support.upstream")

local shq = helpers.shquote

-- Runs `script` (bash) in a sandbox; returns exit code, stdout, stderr.
-- An override `false` removes that key of the base spec.
local function launch(spec_base, script, overrides)
  local spec = {}
  for k, v in pairs(spec_base) do spec[k] = v end
  for k, v in pairs(overrides or {}) do spec[k] = v or nil end
  spec.command = script
  local line = assert(isolation.wrap(spec))
  return helpers.run("timeout -k 5 90 sh -c " .. shq(line))
end

-- Lines "key=value" of a sandbox's output, as a table.
local kv = require("support.tables").kv

-- Processes on the host whose command line mentions `needle` (read here,
-- so that no helper process with the needle in its own arguments counts).
local function processes_with(needle)
  local _, names = helpers.run("ls /proc")
  local pids = {}
  for pid in names:gmatch("%d+") do
    local f = io.open("/proc/" .. pid .. "/cmdline", "rb")
    local cmdline = f and f:read("a") or ""
    if f then f:close() end
    if cmdline:find(needle, 1, true) then pids[#pids + 1] = pid end
  end
  return pids
end

-- A background process on the host (socat listeners); returns its pid.
local function spawn(cmdline)
  local code, out = helpers.run(cmdline .. " >/dev/null 2>&1 & echo $!")
  assert(code == 0)
  return tonumber(out:match("%d+"))
end

local CURL = "curl -s -o /dev/null --max-time 15 "
-- The bridge's port inside the sandbox's own netns: any port works; one of
-- this run's own tells its bridge processes apart from other sandboxes'.
local PORT_BASE = 20000 + math.tointeger(require("luv").os_getpid()) % 20000

for index, bridge in ipairs({ "socat", "builtin", "pass" }) do
  describe("network deny with the " .. bridge .. " bridge", function()
    local skip = helpers.skip_without_bwrap()
    local dir, up, hook, proxy, base, rundir, sock

    lazy_setup(function()
      if skip then return end
      dir = helpers.tmpdir()
      rundir = dir .. "/run-isolation"
      sock = rundir .. "/proxy.sock"
      assert(os.execute("mkdir -m 0700 " .. shq(rundir) .. " " .. shq(dir .. "/work")))
      up = upstream.start()
      hook = upstream.start()
      local allow = assert(isolation.default_allow_hosts("custom", "http://127.0.0.1:" .. hook.http_port .. "/hook"))
      allow[#allow + 1] = "127.0.0.1:" .. up.http_port
      proxy = assert(isolation.proxy({ unix = sock, allow = allow, accept_listeners = 8 }))
      base = {
        config = { mode = "bwrap", network = "deny" },
        agent = "custom",
        workdir = dir .. "/work",
        proxy_socket = sock,
        proxy_port = PORT_BASE + index,
        bridge = bridge,
      }
      if bridge ~= "socat" then
        assert.is_string(isolation.BRIDGE, "isolation.BRIDGE is not set")
      end
    end)

    lazy_teardown(function()
      if skip then return end
      if proxy then proxy:close() end
      if up then up:stop() end
      if hook then hook:stop() end
      helpers.rmtree(dir)
    end)

    it("blocks a direct connection to a host listener but relays allowlisted requests", function()
      if skip then return end
      -- the listener is real: the host reaches it directly
      local code, out = helpers.run(CURL .. "-w '%{http_code}' --noproxy '*' http://127.0.0.1:"
        .. up.http_port .. "/small")
      assert.are.equal(0, code)
      assert.are.equal("200", out)
      local accepts = up:stats().http_accepts
      local P = up.http_port
      local script = table.concat({
        CURL .. "--noproxy '*' http://127.0.0.1:" .. P .. "/small; echo direct=$?",
        "(exec 3<>/dev/tcp/127.0.0.1/" .. P .. ") 2>/dev/null; echo devtcp=$?",
        CURL .. "-w 'forward=%{http_code}\\n' http://127.0.0.1:" .. P .. "/small",
        CURL .. "-w 'tunnel=%{http_code}\\n' --proxytunnel http://127.0.0.1:" .. P .. "/small",
        CURL .. "-w 'name=%{http_code}\\n' http://blocked.example.net/",
        CURL .. "-w 'name_tunnel=%{http_connect}\\n' https://blocked.example.net/",
        CURL .. "-w 'other_ip=%{http_code}\\n' http://127.0.0.2:" .. P .. "/small",
        "echo \"env=$HTTP_PROXY|$HTTPS_PROXY|$http_proxy|$https_proxy|${NO_PROXY-unset}\"",
        "echo \"node_env_proxy=${NODE_USE_ENV_PROXY-unset}\"",
      }, "\n")
      local out2, err2
      code, out2, err2 = launch(base, script)
      assert.are.equal(0, code, err2)
      local r = kv(out2)
      assert.are_not.equal("0", r.direct, out2)
      assert.are_not.equal("0", r.devtcp, out2)
      assert.are.equal("200", r.forward, out2)
      assert.are.equal("200", r.tunnel, out2)
      assert.are.equal("403", r.name, out2)
      assert.are.equal("403", r.name_tunnel, out2)
      assert.are.equal("403", r.other_ip, out2)
      local p = "http://127.0.0.1:" .. base.proxy_port
      assert.are.equal(table.concat({ p, p, p, p, "" }, "|"), r.env)
      assert.are.equal("1", r.node_env_proxy, out2)
      -- exactly the two proxied connections reached the upstream
      assert.is_true(up:wait(function(s) return s.http_accepts >= accepts + 2 end, 5))
      assert.are.equal(accepts + 2, up:stats().http_accepts)
    end)

    it("has no other way out: UDP and IPv6 loopback listeners on the host get nothing", function()
      if skip then return end
      local got = dir .. "/udp-" .. bridge
      local udp_port, tcp6_port = B.free_port(), B.free_port()
      local udp = spawn("socat -u UDP-RECV:" .. udp_port .. ",bind=127.0.0.1 OPEN:" .. shq(got) .. ",creat,append")
      local tcp6 = spawn("socat TCP6-LISTEN:" .. tcp6_port .. ",bind=[::1],reuseaddr,fork SYSTEM:'echo tcp6-reached'")
      local ok, why = pcall(function()
        -- both listeners are real: the host reaches them
        local reached = false
        for _ = 1, 100 do
          if helpers.run("socat -u TCP6:[::1]:" .. tcp6_port .. " - | grep -q reached") == 0 then
            reached = true
            break
          end
          helpers.run("sleep 0.05")
        end
        assert.is_true(reached, "no IPv6 loopback listener on the host")
        helpers.run("echo from-host | socat -u - UDP:127.0.0.1:" .. udp_port)
        for _ = 1, 100 do
          if (helpers.read(got) or "") ~= "" then break end
          helpers.run("sleep 0.05")
        end
        assert.are.equal("from-host\n", helpers.read(got))
        local script = "echo from-sandbox > /dev/udp/127.0.0.1/" .. udp_port .. "; echo udp=$?\n"
          .. "socat -u TCP6:[::1]:" .. tcp6_port .. " - 2>/dev/null; echo tcp6=$?\n"
          .. CURL .. "--noproxy '*' -g 'http://[::1]:" .. tcp6_port .. "/'; echo curl6=$?"
        local code, out, err = launch(base, script)
        assert.are.equal(0, code, err)
        assert.is_nil(out:find("reached"), out)
        assert.are_not.equal("0", kv(out).tcp6, out)
        assert.are_not.equal("0", kv(out).curl6, out)
        helpers.run("sleep 0.3")
        assert.are.equal("from-host\n", helpers.read(got)) -- the sandbox's datagram never arrived
      end)
      helpers.run("kill " .. udp .. " " .. tcp6)
      assert(ok, why)
    end)

    it("reaches the controller's hook on the host's loopback through the proxy", function()
      if skip then return end
      local before = hook:stats().requests
      local code, out, err = launch(base, CURL .. "-w '%{http_code}' http://127.0.0.1:" .. hook.http_port .. "/hook")
      assert.are.equal(0, code, err)
      assert.are.equal("404", out) -- the hook server's own answer, not the proxy's 403
      assert.is_true(hook:wait(function(s) return s.requests == before + 1 end, 5))
    end)

    it("lets the command's very first action use the proxy, launch after launch", function()
      if skip then return end
      for i = 1, 8 do
        local code, out, err = launch(base, CURL .. "-w '%{http_code}' http://127.0.0.1:" .. up.http_port .. "/small")
        assert.are.equal(0, code, "launch " .. i .. ": " .. err)
        assert.are.equal("200", out, "launch " .. i)
      end
    end)

    it("relays several connections in a row and at once", function()
      if skip then return end
      local url = "http://127.0.0.1:" .. up.http_port .. "/small"
      local script = "for i in 1 2 3 4 5; do " .. CURL .. "-w '%{http_code} ' " .. url .. "; done; echo\n"
        .. "for i in $(seq 8); do " .. CURL .. "-w '%{http_code}\\n' " .. url .. " >/tmp/conn.$i & done; wait\n"
        .. "cat /tmp/conn.*"
      local code, out, err = launch(base, script)
      assert.are.equal(0, code, err)
      assert.are.equal("200 200 200 200 200 \n" .. string.rep("200\n", 8), out)
    end)

    it("keeps the host's abstract unix sockets out of reach (they belong to the netns)", function()
      if skip then return end
      local name = "isolation-spec-" .. require("luv").os_getpid() .. "-" .. bridge
      local pid = spawn("socat ABSTRACT-LISTEN:" .. name .. ",fork SYSTEM:'echo abstract-reached'")
      local script = "socat -u ABSTRACT-CONNECT:" .. name .. " - 2>/dev/null; echo rc=$?"
      local ok, why = pcall(function()
        for _ = 1, 100 do -- the listener is up once the host reaches it
          if helpers.run("socat -u ABSTRACT-CONNECT:" .. name .. " - | grep -q reached") == 0 then break end
          helpers.run("sleep 0.05")
        end
        local code, out, err = launch(base, script)
        assert.are.equal(0, code, err)
        assert.is_nil(out:find("abstract-reached"), out)
        assert.are_not.equal("0", kv(out).rc)
        -- under network allow the sandbox shares the host's netns: reachable
        code, out, err = launch(base, script, { config = { mode = "bwrap", network = "allow" }, proxy_socket = false })
        assert.are.equal(0, code, err)
        assert.matches("abstract%-reached", out)
      end)
      helpers.run("kill " .. pid)
      assert(ok, why)
    end)

    it("keeps a container engine's socket out of reach in both modes", function()
      if skip then return end
      local engine_dir = dir .. "/fake-run"
      assert(os.execute("mkdir -p " .. shq(engine_dir)))
      local engine = engine_dir .. "/docker.sock"
      local pid = spawn("socat UNIX-LISTEN:" .. shq(engine) .. ",fork SYSTEM:'echo engine-reached'")
      local script = "socat -u UNIX-CONNECT:" .. shq(engine) .. " - 2>/dev/null; echo rc=$?\n"
        .. "test -e " .. shq(engine_dir) .. " && echo dir=visible || echo dir=hidden"
      local ok, why = pcall(function()
        for _ = 1, 100 do
          if helpers.run("socat -u UNIX-CONNECT:" .. shq(engine) .. " - | grep -q reached") == 0 then break end
          helpers.run("sleep 0.05")
        end
        for _, network in ipairs({ "deny", "allow" }) do
          local code, out, err = launch(base, script, {
            config = { mode = "bwrap", network = network },
            proxy_socket = network == "deny" and sock,
          })
          assert.are.equal(0, code, err)
          assert.is_nil(out:find("engine-reached"), network .. ": " .. out)
          assert.are_not.equal("0", kv(out).rc, network)
          assert.are.equal("hidden", kv(out).dir, network)
        end
      end)
      helpers.run("kill " .. pid)
      assert(ok, why)
    end)

    it("shows the proxy's socket only at SANDBOX_PROXY_SOCKET, and not its host directory", function()
      if skip then return end
      local script = "test -S " .. isolation.SANDBOX_PROXY_SOCKET .. " && echo fixed=yes\n"
        .. "test -e " .. shq(sock) .. " && echo hostsock=visible || echo hostsock=hidden\n"
        .. "test -e " .. shq(rundir) .. " && echo hostdir=visible || echo hostdir=hidden\n"
        -- a socket bound over a file keeps the file's type in readdir: find's
        -- -type s misses it, so every empty file is stat()ed as well (-size)
        .. "printf sockets=; find / \\( -path /proc -o -path /sys \\) -prune -o \\( -type s -o -size 0 \\) -print"
        .. " 2>/dev/null | while read -r f; do [ -S \"$f\" ] && printf '%s ' \"$f\"; done; echo"
      local code, out, err = launch(base, script)
      assert.are.equal(0, code, err)
      local r = kv(out)
      assert.are.equal("yes", r.fixed, out)
      assert.are.equal("hidden", r.hostsock, out)
      assert.are.equal("hidden", r.hostdir, out)
      assert.are.equal(isolation.SANDBOX_PROXY_SOCKET .. " ", r.sockets, out)
    end)

    if bridge == "pass" then
      it("refuses what a sandboxed process hands the proxy itself, and keeps the route", function()
        if skip then return end
        -- the sender in the workdir: /usr's python3 runs it inside
        local sender = dir .. "/work/handover.py"
        helpers.write(sender, helpers.read("spec/support/handover.py"))
        local errors = proxy:stats().errors
        local lines = {}
        for _, kind in ipairs({ "connected", "file", "pipe", "udp", "any_address", "unix_listener", "three",
          "flood", "none", "bad_magic" }) do
          lines[#lines + 1] = "printf '" .. kind .. "='; python3 " .. shq(sender) .. " "
            .. isolation.SANDBOX_PROXY_SOCKET .. " " .. kind .. " | head -1"
        end
        lines[#lines + 1] = CURL .. "-w 'after=%{http_code}\\n' http://127.0.0.1:" .. up.http_port .. "/small"
        local code, out, err = launch(base, table.concat(lines, "\n"))
        os.remove(sender)
        assert.are.equal(0, code, err)
        local r = kv(out)
        for _, kind in ipairs({ "connected", "file", "pipe", "udp", "any_address", "unix_listener", "three",
          "flood", "none", "bad_magic" }) do
          assert.matches("^no ", r[kind] or "", nil, kind .. ": " .. out)
        end
        assert.are.equal("200", r.after, out)
        assert.are.equal(errors + 10, proxy:stats().errors)
      end)

      it("keeps the route of a command that outlives the starter's 10 s wait for the proxy's ok", function()
        if skip then return end
        local code, out, err = launch(base, "sleep 11; "
          .. CURL .. "-w 'late=%{http_code}\\n' http://127.0.0.1:" .. up.http_port .. "/small")
        assert.are.equal(0, code, err)
        assert.are.equal("200", kv(out).late, out)
      end)

      it("ends the sandbox when its proxy closes: the keeper kills every process of it, one that left the"
        .. " command's session too", function()
        if skip then return end
        local own = rundir .. "/own.sock"
        local p = assert(isolation.proxy({ unix = own, allow = { "127.0.0.1:" .. up.http_port },
          accept_listeners = 2 }))
        local spec = {}
        for k, v in pairs(base) do spec[k] = v end
        spec.proxy_socket = own
        -- a process in a session of its own, and the command, each for 60 s
        spec.command = "setsid sleep 61 & echo up > .isolation-spec-started; exec sleep 60"
        local rc = dir .. "/ends.rc"
        os.remove(rc)
        finally(function()
          p:close()
          -- what a failure left running: the line's processes name the socket
          for _, pid in ipairs(processes_with(own)) do helpers.run("kill -9 " .. pid .. " 2>/dev/null") end
          os.remove(dir .. "/work/.isolation-spec-started")
        end)
        os.remove(dir .. "/work/.isolation-spec-started")
        helpers.run("(timeout -k 5 90 sh -c " .. shq(assert(isolation.wrap(spec))) .. " >/dev/null 2>&1; echo $? > "
          .. shq(rc) .. ") >/dev/null 2>&1 &")
        -- a file's content once it holds a whole line, or nil after `seconds`
        local function line_in(path, seconds)
          local text
          helpers.wait_for(function()
            text = helpers.read(path)
            return text ~= nil and text:find("\n") ~= nil
          end, seconds)
          return text and text:find("\n") and text or nil
        end
        assert.is_string(line_in(dir .. "/work/.isolation-spec-started", 30), "the command never started")
        local sleepers = processes_with("sleep\0" .. "61")
        assert.are.equal(1, #sleepers, "the detached process is not running")
        p:close()
        local status = line_in(rc, 20)
        assert.is_string(status, "the sandbox ran on 20 s after its proxy closed")
        assert.are.equal("137", status:match("%d+"), "not ended by SIGKILL")
        assert.are.same({}, processes_with("sleep\0" .. "61"))
      end)

      it("starts the command with no child of its own: the keeper is PID 1's (bwrap's init), one process", function()
        if skip then return end
        -- read with builtins only (a cat would be a child itself); the
        -- command's bash is exec'd by the starter, so it is the keeper's
        -- sibling, and no shell of a launch script stands between
        local code, out, err = launch(base, "read -r kids < /proc/$$/task/$$/children; echo \"kids=$kids\"\n"
          .. "for s in /proc/[0-9]*/stat; do read -r st < \"$s\"; case $st in *'(isolation-bridg)'*)"
          .. " set -- ${st##*) }; echo \"keeper_ppid=$2\";; esac; done\n"
          .. "read -r st < /proc/$$/stat; set -- ${st##*) }; echo \"command_ppid=$2\"")
        assert.are.equal(0, code, err)
        local r = kv(out)
        assert.are.equal("", r.kids, out)
        assert.are.equal("1", r.keeper_ppid, out)
        assert.are.equal("1", r.command_ppid, out)
        local keepers = select(2, out:gsub("keeper_ppid=", ""))
        assert.are.equal(1, keepers, out)
        -- the route works from this command
        code, out, err = launch(base, CURL .. "-w 'via=%{http_code}\\n' http://127.0.0.1:" .. up.http_port .. "/small")
        assert.are.equal(0, code, err)
        assert.are.equal("200", kv(out).via, out)
      end)
    end

    it("leaves nothing of the bridge on the host once the sandbox has ended", function()
      if skip then return end
      -- this run's bridge process, by its argv (NUL-separated: not the
      -- script text in bwrap's and bash's own command lines)
      local needle = bridge == "socat" and ("socat\0TCP-LISTEN:" .. base.proxy_port .. ",")
        or ("\0" .. base.proxy_port .. ",1080\0" .. isolation.SANDBOX_PROXY_SOCKET)
      local spec = {}
      for k, v in pairs(base) do spec[k] = v end
      spec.command = CURL .. "http://127.0.0.1:" .. up.http_port .. "/small; sleep 1"
      local line = assert(isolation.wrap(spec))
      helpers.run("timeout -k 5 60 sh -c " .. shq(line) .. " >/dev/null 2>&1 &")
      local function wait_for(want_running)
        for _ = 1, 200 do
          if (#processes_with(needle) > 0) == want_running then return true end
          helpers.run("sleep 0.05")
        end
        return false
      end
      assert.is_true(wait_for(true), "the sandbox's bridge was never seen running")
      assert.is_true(wait_for(false), "the bridge outlived its sandbox")
      local idle = false
      for _ = 1, 100 do
        if proxy:stats().active == 0 then idle = true break end
        helpers.run("sleep 0.05")
      end
      assert.is_true(idle, "the proxy still holds connections from an ended sandbox")
    end)
  end)
end
