-- Real bwrap sandboxes built from wrap() lines, run under a temporary HOME.
-- Each property a user relies on is proved by trying to break it.
local isolation = require("isolation")
local helpers = require("helpers")
local support = require("support.launch")

local q = helpers.shquote

local AGENT_FILES = {
  claude = { "$HOME/.claude/note", "$HOME/.claude.json" },
  codex = { "$HOME/.codex/note" },
  gemini = { "$HOME/.gemini/note", "$HOME/.config/gemini/note" },
}

describe("real bwrap sandbox", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end

  local T, home, work, outside, vartmp
  local pids = {}

  local function sandbox(spec)
    spec.config = spec.config or { mode = "bwrap" }
    spec.workdir = spec.workdir or work
    local line = assert(isolation.wrap(spec))
    return support.run_line(line, home)
  end

  setup(function()
    T = helpers.tmpdir()
    home, work, outside = T .. "/home", T .. "/work", T .. "/outside"
    vartmp = helpers.tmpdir("/var/tmp")
    assert(os.execute("mkdir -p " .. q(home .. "/.ssh") .. " " .. q(home .. "/.claude") .. " "
      .. q(home .. "/.codex") .. " " .. q(home .. "/.gemini") .. " " .. q(home .. "/.config/gemini") .. " "
      .. q(work) .. " " .. q(outside) .. " " .. q(home .. "/proj") .. " " .. q(T .. "/extra")))
    helpers.write(home .. "/.ssh/id_ed25519", "PRIVATE KEY\n")
    helpers.write(home .. "/.claude.json", "{}\n")
    helpers.write(home .. "/.gitconfig", "[user]\n")
    helpers.write(outside .. "/secret.txt", "host secret\n")
    helpers.write(T .. "/extra/ro.txt", "read only\n")
  end)

  teardown(function()
    for _, pid in ipairs(pids) do support.stop(pid) end
    helpers.rmtree(T)
    helpers.rmtree(vartmp)
  end)

  for _, agent in ipairs({ "claude", "codex", "gemini" }) do
    describe(agent .. ", network allow", function()
      it("writes in the workdir persist on the host", function()
        local code, _, err = sandbox({ agent = agent, command = "echo hello > out-" .. agent .. ".txt" })
        assert.are.equal(0, code, err)
        assert.are.equal("hello\n", helpers.read(work .. "/out-" .. agent .. ".txt"))
      end)

      it("cannot read outside the workdir: host /tmp files, ~/.ssh", function()
        -- the same reads succeed on the host, so the test can fail
        assert.are.equal(0, (helpers.run("cat " .. q(outside .. "/secret.txt"))))
        local code, out = sandbox({ agent = agent, command = "cat " .. q(outside .. "/secret.txt") })
        assert.are_not.equal(0, code)
        assert.is_nil(out:find("host secret", 1, true))
        code, out = sandbox({ agent = agent, command = "cat \"$HOME/.ssh/id_ed25519\"" })
        assert.are_not.equal(0, code)
        assert.is_nil(out:find("PRIVATE KEY", 1, true))
        code, out = sandbox({ agent = agent, command = "ls -A \"$HOME\"" })
        assert.are.equal(0, code)
        assert.is_nil(out:find(".ssh", 1, true))
        assert.is_nil(out:find(".gitconfig", 1, true))
      end)

      it("sees nothing of the host /tmp but the path to its workdir", function()
        local code, out, err = sandbox({ agent = agent, command = "ls -A /tmp; ls -A " .. q(T) })
        assert.are.equal(0, code, err)
        local tname = T:match("[^/]+$")
        local want = tname .. "\n" .. "home\nwork\n"
        assert.are.equal(want, out)
      end)

      it("the agent's config is read-write and persists", function()
        local cmds = {}
        for _, f in ipairs(AGENT_FILES[agent]) do
          cmds[#cmds + 1] = "echo " .. agent .. " >> \"$HOME" .. f:sub(6) .. "\""
        end
        local code, _, err = sandbox({ agent = agent, command = table.concat(cmds, " && ") })
        assert.are.equal(0, code, err)
        for _, f in ipairs(AGENT_FILES[agent]) do
          assert.truthy(helpers.read(home .. f:sub(6)):find(agent .. "\n", 1, true), f)
        end
      end)
    end)
  end

  it("another agent's config is not there", function()
    local code, out = sandbox({ agent = "codex", command = "ls -A \"$HOME\"" })
    assert.are.equal(0, code)
    assert.are.equal(".codex\n", out)
  end)

  it("a unix socket listening outside the workdir is unreachable", function()
    local paths = { outside .. "/agent.sock", vartmp .. "/svc.sock" }
    for _, path in ipairs(paths) do
      pids[#pids + 1] = support.start("socat UNIX-LISTEN:" .. q(path) .. ",fork EXEC:'echo pong'")
      assert.is_true(support.wait_until("[ -S " .. q(path) .. " ]"))
      -- reachable from the host
      local code, out = helpers.run("socat -T 5 - UNIX-CONNECT:" .. q(path) .. " </dev/null")
      assert.are.equal(0, code)
      assert.are.equal("pong\n", out)
      code, out = sandbox({ command = "socat -T 5 - UNIX-CONNECT:" .. q(path) .. " </dev/null" })
      assert.are_not.equal(0, code)
      assert.is_nil(out:find("pong", 1, true))
    end
  end)

  it("sees only its own processes and cannot signal a host process", function()
    local pid = support.start("sleep 120")
    pids[#pids + 1] = pid
    assert.are.equal(0, (helpers.run("kill -0 " .. pid)))
    local code, out, err = sandbox({ command = "kill -0 " .. pid .. " && echo alive; "
      .. "ls /proc | grep -c '^[0-9][0-9]*$'" })
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("alive", 1, true))
    assert.is_true(tonumber(out:match("%d+")) <= 5, out)
    assert.are.equal(0, (helpers.run("kill -0 " .. pid)))
  end)

  it("has no capability: cannot make a device node or mount, even when launched by root", function()
    local code, out, err = sandbox({ command = "grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status; "
      .. "mknod disk b 7 0 2>/dev/null && echo mknod-worked; mkdir -p m; "
      .. "mount -t tmpfs none m 2>/dev/null && echo mount-worked; true" })
    assert.are.equal(0, code, err)
    assert.matches("CapEff:%s+0000000000000000\n", out)
    assert.matches("NoNewPrivs:%s+1\n", out)
    assert.is_nil(out:find("worked", 1, true))
    assert.is_nil(helpers.read(work .. "/disk"))
  end)

  it("works with a workdir under $HOME, an extra bind under /tmp, and ro_binds stay read-only", function()
    local code, _, err = sandbox({ workdir = home .. "/proj", binds = { T .. "/extra" },
      ro_binds = { "$HOME/.gitconfig", T .. "/extra/ro.txt" },
      command = "echo p > p.txt && echo e > " .. q(T .. "/extra/e.txt") .. " && cat \"$HOME/.gitconfig\" >/dev/null"
        .. " && ! echo x 2>/dev/null >> \"$HOME/.gitconfig\" && ! echo x 2>/dev/null >> " .. q(T .. "/extra/ro.txt") })
    assert.are.equal(0, code, err)
    assert.are.equal("p\n", helpers.read(home .. "/proj/p.txt"))
    assert.are.equal("e\n", helpers.read(T .. "/extra/e.txt"))
    assert.are.equal("[user]\n", helpers.read(home .. "/.gitconfig"))
    assert.are.equal("read only\n", helpers.read(T .. "/extra/ro.txt"))
  end)

  it("a read-only $HOME/ bind inside an absolute workdir stays read-only with a deep $HOME", function()
    -- $HOME six levels down: a builder that counted $HOME as /home/<user>
    -- put .git before the workdir, whose read-write bind then covered it
    local deep = T .. "/deep/a/b/u"
    assert(os.execute("mkdir -p " .. q(deep .. "/ws/.git")))
    helpers.write(deep .. "/ws/.git/config", "[core]\n")
    local line = assert(isolation.wrap({ config = { mode = "bwrap" }, workdir = deep .. "/ws",
      ro_binds = { "$HOME/ws/.git" },
      command = "echo w > w.txt && cat .git/config >/dev/null && ! echo x 2>/dev/null >> .git/config"
        .. " && ! echo x 2>/dev/null > .git/hook" }))
    local code, _, err = support.run_line(line, deep)
    assert.are.equal(0, code, err)
    assert.are.equal("w\n", helpers.read(deep .. "/ws/w.txt"))
    assert.are.equal("[core]\n", helpers.read(deep .. "/ws/.git/config"))
    assert.is_nil(helpers.read(deep .. "/ws/.git/hook"))
  end)

  it("a path full of shell syntax is bound and used as it is", function()
    local odd = T .. "/it's a $(dir) `x` \"q\" *"
    assert(os.execute("mkdir -p " .. q(odd)))
    local code, _, err = sandbox({ workdir = odd, command = "pwd > here.txt" })
    assert.are.equal(0, code, err)
    assert.are.equal(odd .. "\n", helpers.read(odd .. "/here.txt"))
  end)

  it("ca_cert is one read-only file: the key beside it stays out, the variables name it", function()
    local pki = T .. "/pki"
    assert(os.execute("mkdir -p " .. q(pki)))
    helpers.write(pki .. "/ca.pem", "CERT\n")
    helpers.write(pki .. "/ca.key", "KEY\n")
    local code, out, err = sandbox({ ca_cert = pki .. "/ca.pem", command = "cat \"$SSL_CERT_FILE\"; "
      .. "echo \"$NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $GIT_SSL_CAINFO $CARGO_HTTP_CAINFO $CURL_CA_BUNDLE\"; "
      .. "cat " .. q(pki .. "/ca.key") .. " 2>/dev/null || echo no-key; "
      .. "echo x 2>/dev/null >> \"$SSL_CERT_FILE\" || echo read-only" })
    assert.are.equal(0, code, err)
    local ca = pki .. "/ca.pem"
    assert.are.equal("CERT\n" .. table.concat({ ca, ca, ca, ca, ca }, " ") .. "\nno-key\nread-only\n", out)
    assert.are.equal("CERT\n", helpers.read(ca))
  end)

  describe("network deny", function()
    local proxy_sock, listener_port

    setup(function()
      proxy_sock = T .. "/proxy.sock"
      -- a plain echo service stands in for the proxy
      pids[#pids + 1] = support.start("socat UNIX-LISTEN:" .. q(proxy_sock) .. ",fork EXEC:cat")
      assert.is_true(support.wait_until("[ -S " .. q(proxy_sock) .. " ]"))
      -- a host loopback listener the sandbox must not reach directly
      -- a port free now (a fixed or pid-derived one may be taken on a busy machine)
      listener_port = require("support.proxy").closed_port()
      pids[#pids + 1] = support.start("socat TCP-LISTEN:" .. listener_port .. ",bind=127.0.0.1,reuseaddr,fork "
        .. "EXEC:'echo direct'")
      assert.is_true(support.wait_until("grep -q ':" .. ("%04X"):format(listener_port) .. " 00000000:0000 0A' "
        .. "/proc/net/tcp"))
    end)

    local function deny(spec)
      spec.config = { mode = "bwrap", network = "deny" }
      spec.proxy_socket = proxy_sock
      return sandbox(spec)
    end

    it("the command starts only once the bridge listens, and every connection goes through it", function()
      -- the first thing the command does is connect: no retry, no wait
      local code, out, err = deny({ command = "for i in 1 2 3; do echo ping$i | socat -T 5 - TCP:127.0.0.1:3128; done;"
        .. " echo \"$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy [$NO_PROXY$no_proxy]\"" })
      assert.are.equal(0, code, err)
      assert.are.equal("ping1\nping2\nping3\n"
        .. "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 []\n", out)
    end)

    it("runs a command full of quotes and $ exactly, as bash -c command", function()
      local cmd = [[printf '%s|' "it's" '$HOME' "a\"b" `echo tick` $((1+1)); echo]]
      local code, out, err = deny({ command = cmd })
      assert.are.equal(0, code, err)
      assert.are.equal([[it's|$HOME|a"b|tick|2|]] .. "\n", out)
    end)

    it("shows the proxy socket only as a single file at the fixed path", function()
      local code, out, err = deny({ command = "test -S " .. isolation.SANDBOX_PROXY_SOCKET .. " && echo socket; "
        .. "ls -A /run/isolation; test -e " .. q(T) .. "/proxy.sock || echo host-path-hidden" })
      assert.are.equal(0, code, err)
      assert.are.equal("socket\nproxy.sock\nhost-path-hidden\n", out)
    end)

    it("honours proxy_port", function()
      local code, out, err = deny({ proxy_port = 18123, command = "echo hi | socat -T 5 - TCP:127.0.0.1:18123" })
      assert.are.equal(0, code, err)
      assert.are.equal("hi\n", out)
    end)

    it("has no other route: the host's loopback listener is unreachable", function()
      local code, out = helpers.run("socat -T 5 - TCP:127.0.0.1:" .. listener_port .. " </dev/null")
      assert.are.equal(0, code)
      assert.are.equal("direct\n", out)
      code, out = deny({ command = "socat -T 5 - TCP:127.0.0.1:" .. listener_port .. " </dev/null" })
      assert.are_not.equal(0, code)
      assert.is_nil(out:find("direct", 1, true))
    end)

    it("bridge builtin: runs bridge_path with port and socket, and the command once it returns 0", function()
      -- a stand-in with the built-in bridge's contract: listen (on each of
      -- PORT,PORT: proxy_port and socks_port), fork, exit 0
      local stand_in = T .. "/stand-in-bridge"
      helpers.write(stand_in, "#!/bin/bash\n"
        .. "for port in ${1//,/ }; do\n"
        .. "socat TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:$2 </dev/null >/dev/null 2>&1 &\n"
        .. "hex=$(printf '%04X' \"$port\")\n"
        .. "for _ in $(seq 1000); do grep -q \": 0100007F:$hex 00000000:0000 0A\" /proc/net/tcp && continue 2; "
        .. "sleep 0.01; done; exit 1\ndone\n")
      assert(os.execute("chmod 755 " .. q(stand_in)))
      local code, out, err = deny({ bridge = "builtin", bridge_path = stand_in, reap = false, proxy_port = 4123,
        command = "echo via-builtin | socat -T 5 - TCP:127.0.0.1:4123; echo $HTTPS_PROXY" })
      assert.are.equal(0, code, err)
      assert.are.equal("via-builtin\nhttp://127.0.0.1:4123\n", out)

      local failing = T .. "/failing-bridge"
      helpers.write(failing, "#!/bin/sh\necho 'bridge: cannot listen' >&2\nexit 1\n")
      assert(os.execute("chmod 755 " .. q(failing)))
      code, out, err = deny({ bridge = "builtin", bridge_path = failing, reap = false, command = "echo started" })
      assert.are.equal(126, code)
      assert.are.equal("", out)
      assert.truthy(err:find("isolation: the built-in bridge did not start on 127.0.0.1:3128", 1, true), err)
    end)

    it("fails clearly, without running the command, when the bridge never listens", function()
      -- the real sandbox line with a bridge that exits at once instead of listening
      local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "deny" }, proxy_socket = proxy_sock,
        workdir = work, command = "echo started" }))
      -- both listeners (proxy_port, socks_port) broken, then only the SOCKS5 one
      local broken, n = line:gsub("socat TCP%-LISTEN", "false TCP-LISTEN")
      assert.are.equal(2, n)
      local code, out, err = support.run_line(broken, home)
      assert.are.equal(126, code)
      assert.are.equal("", out)
      assert.truthy(err:find("isolation: the network bridge (socat) is not listening on 127.0.0.1:3128", 1, true))
      broken, n = line:gsub("socat TCP%-LISTEN:1080,", "false TCP-LISTEN:1080,")
      assert.are.equal(1, n)
      code, out, err = support.run_line(broken, home)
      assert.are.equal(126, code)
      assert.are.equal("", out)
      assert.truthy(err:find("not listening on 127.0.0.1:3128 and 127.0.0.1:1080", 1, true), err)
    end)
  end)
end)
