-- Non-HTTP TCP under network deny: the bridge's SOCKS5 port (socks_port,
-- default 1080, ALL_PROXY=socks5h://127.0.0.1:1080), with real clients in
-- real bwrap sandboxes, through each bridge (socat, builtin, pass), to the
-- real proxy on a unix socket: curl --socks5-hostname and curl through
-- ALL_PROXY alone, git ls-remote and ssh to a private sshd on the host's
-- loopback with ProxyCommand nc -X 5 (the README's recipe), and the
-- attacks from a shell inside: a denied host:port, another port of an
-- allowed host, a name that resolves to the host's loopback, BIND and UDP
-- ASSOCIATE, the sshd when it is not allowlisted, a direct dial.
local isolation = require("isolation")
local helpers = require("helpers")
local upstream = require("support.upstream")
local sshd = require("support.sshd")

local shq = helpers.shquote
local CURL = "curl -s -o /dev/null --max-time 15 "
local PORT_BASE = 26000 + math.tointeger(require("luv").os_getpid()) % 20000

local kv = require("support.tables").kv

local socks5 = require("support.socks5")
local be16 = socks5.be16

-- Bytes as a printf format of octal escapes (bash's printf builtin).
local function octal(bytes)
  return (bytes:gsub(".", function(c) return ("\\%03o"):format(c:byte()) end))
end

-- A shell line that speaks SOCKS5 by hand to 127.0.0.1:1080 and prints
-- `name=<method reply hex>/<request reply hex>`: what a raw client sees.
local function raw_socks(name, request)
  return "{ exec 3<>/dev/tcp/127.0.0.1/1080 && printf '\\005\\001\\000' >&3 && m=$(head -c 2 <&3 | od -An -tx1 "
    .. "| tr -d ' \\n') && printf '" .. octal(request) .. "' >&3 && r=$(head -c 10 <&3 | od -An -tx1 | tr -d ' \\n');"
    .. " echo " .. name .. "=$m/$r; exec 3<&-; } 2>/dev/null || echo " .. name .. "=failed"
end

local by_name = socks5.by_name

-- Every event the thread-mode proxy has given, after a short settle.
local function drain(proxy, into)
  into = into or {}
  for _ = 1, 20 do
    local got = proxy:events()
    for _, e in ipairs(got) do into[#into + 1] = e end
    if #got == 0 and #into > 0 then break end
    helpers.run("sleep 0.05")
  end
  return into
end

local function find_event(events, pred)
  for _, e in ipairs(events) do
    if pred(e) then return e end
  end
  return nil
end

describe("SOCKS5 under network deny (real clients, real sandboxes)", function()
  local skip = helpers.skip_without_bwrap()
  local no_sshd = sshd.unavailable()
  local dir, up, ssh, repo_head

  lazy_setup(function()
    if skip then return end
    dir = helpers.tmpdir()
    up = upstream.start()
    if not no_sshd then
      assert(os.execute("mkdir " .. shq(dir .. "/sshd")))
      ssh = sshd.start(dir .. "/sshd")
      -- a repository on the host, served by the sshd (git-upload-pack)
      local code, out, err = helpers.run("git init -q " .. shq(dir .. "/src") .. " && git -C " .. shq(dir .. "/src")
        .. " -c user.email=spec@example.com -c user.name=spec commit -q --allow-empty -m one && git clone -q --bare "
        .. shq(dir .. "/src") .. " " .. shq(dir .. "/repo.git") .. " && git -C " .. shq(dir .. "/repo.git")
        .. " rev-parse HEAD")
      assert(code == 0, err)
      repo_head = out:match("%x+")
    end
  end)

  lazy_teardown(function()
    if skip then return end
    if ssh then ssh:stop() end
    if up then up:stop() end
    helpers.rmtree(dir)
  end)

  for index, bridge in ipairs({ "socat", "builtin", "pass" }) do
    describe("with the " .. bridge .. " bridge", function()
      local proxy, base, work, sock

      -- A proxy on its own socket with `allow`; the spec that launches
      -- through it (socks_port left at its default, 1080).
      local function start_proxy(name, allow, extra)
        local rundir = dir .. "/run-" .. bridge .. "-" .. name
        assert(os.execute("mkdir -m 0700 " .. shq(rundir)))
        local opts = { unix = rundir .. "/proxy.sock", allow = allow, accept_listeners = 8 }
        for k, v in pairs(extra or {}) do opts[k] = v end
        return assert(isolation.proxy(opts)), rundir .. "/proxy.sock"
      end

      local function launch(script, proxy_socket)
        local spec = {}
        for k, v in pairs(base) do spec[k] = v end
        spec.command = script
        spec.proxy_socket = proxy_socket or base.proxy_socket
        local line = assert(isolation.wrap(spec))
        return helpers.run("timeout -k 5 90 sh -c " .. shq(line))
      end

      lazy_setup(function()
        if skip then return end
        work = dir .. "/work-" .. bridge
        assert(os.execute("mkdir " .. shq(work)))
        -- inner.example.com:<raw port> is allowlisted but resolves to the
        -- host's loopback, where no IP pattern admits that port: the
        -- private-address rule must still refuse it
        local allow = { "127.0.0.1:" .. up.http_port, "inner.example.com:" .. up.raw_port }
        if ssh then allow[#allow + 1] = "127.0.0.1:" .. ssh.port end
        proxy, sock = start_proxy("main", allow, { resolve = { ["inner.example.com"] = { "127.0.0.1" } } })
        base = {
          config = { mode = "bwrap", network = "deny" },
          workdir = work,
          proxy_socket = sock,
          proxy_port = PORT_BASE + index,
          bridge = bridge,
        }
      end)

      lazy_teardown(function()
        if proxy then proxy:close() end
      end)

      it("curl --socks5-hostname and curl through ALL_PROXY alone reach an allowlisted upstream", function()
        if skip then return end
        local url = "http://127.0.0.1:" .. up.http_port .. "/small"
        local before = up:stats().http_accepts
        drain(proxy)
        local code, out, err = launch(table.concat({
          "echo \"all=$ALL_PROXY|$all_proxy\"",
          CURL .. "-w 'socks=%{http_code}\\n' --socks5-hostname 127.0.0.1:1080 " .. shq(url),
          -- no HTTP proxy variable left: curl takes ALL_PROXY (socks5h)
          "env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy " .. CURL
            .. "-w 'all_proxy=%{http_code}\\n' " .. shq(url),
        }, "\n"))
        assert.are.equal(0, code, err)
        local r = kv(out)
        assert.are.equal("socks5h://127.0.0.1:1080|socks5h://127.0.0.1:1080", r.all, out)
        assert.are.equal("200", r.socks, out)
        assert.are.equal("200", r.all_proxy, out)
        assert.is_true(up:wait(function(s) return s.http_accepts >= before + 2 end, 5))
        -- both went through SOCKS5, not the HTTP port
        local ev = drain(proxy)
        local n = 0
        for _, e in ipairs(ev) do
          if e.method == "SOCKS5" and e.code == "allowed" and e.port == up.http_port then n = n + 1 end
        end
        assert.is_true(n >= 2, "SOCKS5 allowed events: " .. n)
      end)

      it("refuses from inside: a denied host:port, another port of an allowed host, a name resolving to the "
        .. "host's loopback, BIND, UDP ASSOCIATE, IPv6 loopback, localhost; and no direct dial", function()
        if skip then return end
        drain(proxy)
        local raw_before = up:stats().raw_accepts
        local sshp = ssh and ssh.port or up.raw_port
        local code, out, err = launch(table.concat({
          CURL .. "--socks5-hostname 127.0.0.1:1080 http://denied.example.com:8080/; echo curl_denied=$?",
          raw_socks("denied", by_name("denied.example.com", 8080)),
          raw_socks("other_port", "\5\1\0\1\127\0\0\1" .. be16(up.raw_port)),
          raw_socks("inner", by_name("inner.example.com", up.raw_port)),
          raw_socks("bind", "\5\2\0\1\127\0\0\1" .. be16(up.http_port)),
          raw_socks("udp", "\5\3\0\1\0\0\0\0\0\0"),
          raw_socks("ipv6", "\5\1\0\4" .. string.rep("\0", 15) .. "\1" .. be16(sshp)),
          raw_socks("localhost", by_name("localhost", sshp)),
          raw_socks("metadata", "\5\1\0\1\169\254\169\254\0\80"),
          "(exec 3<>/dev/tcp/127.0.0.1/" .. up.raw_port .. ") 2>/dev/null; echo direct=$?",
        }, "\n"))
        assert.are.equal(0, code, err)
        local r = kv(out)
        -- curl's own exit for a SOCKS refusal (CURLE_PROXY)
        assert.are.equal("97", r.curl_denied, out)
        -- greeting accepted (05 00), then reply 02 (not allowed by ruleset)
        -- or 07 (command not supported), bound address zeros, then closed
        for _, name in ipairs({ "denied", "other_port", "inner", "ipv6", "localhost", "metadata" }) do
          assert.are.equal("0500/05020001000000000000", r[name], name .. "\n" .. out)
        end
        assert.are.equal("0500/05070001000000000000", r.bind, out)
        assert.are.equal("0500/05070001000000000000", r.udp, out)
        assert.are_not.equal("0", r.direct, out)
        -- nothing reached the upstream's raw port
        assert.are.equal(raw_before, up:stats().raw_accepts)
        local ev = drain(proxy)
        local function refused(host, port, want)
          local e = find_event(ev, function(e)
            return e.method == "SOCKS5" and e.host == host and e.port == port and e.code == want
          end)
          assert.is_truthy(e, ("no %s event for %s:%d"):format(want, host, port))
          assert.are.equal("deny", e.type)
        end
        refused("denied.example.com", 8080, "not_allowed")
        refused("127.0.0.1", up.raw_port, "not_allowed")
        refused("inner.example.com", up.raw_port, "private_address")
        refused("::1", sshp, "not_allowed")
        refused("localhost", sshp, "not_allowed")
        refused("169.254.169.254", 80, "not_allowed")
        local ni = 0
        for _, e in ipairs(ev) do
          if e.method == "SOCKS5" and e.code == "not_implemented" then ni = ni + 1 end
        end
        assert.are.equal(2, ni, "BIND and UDP ASSOCIATE events")
      end)

      local function ssh_config(port)
        -- the README's recipe, with this test's key and known_hosts
        helpers.write(work .. "/ssh_config", table.concat({
          "Host gitbox",
          "  HostName 127.0.0.1",
          "  Port " .. port,
          "  User root",
          "  IdentityFile " .. work .. "/key",
          "  UserKnownHostsFile " .. work .. "/known_hosts",
          "  StrictHostKeyChecking accept-new",
          "  BatchMode yes",
          "  ConnectTimeout 15",
          "  ProxyCommand nc -X 5 -x 127.0.0.1:1080 %h %p",
          "",
        }, "\n"))
        assert(os.execute("cp -p " .. shq(ssh.key) .. " " .. shq(work .. "/key") .. " && chmod 0600 "
          .. shq(work .. "/key") .. " && rm -f " .. shq(work .. "/known_hosts")))
      end

      it("git ls-remote and ssh over ssh to the host's loopback sshd (allowlisted), ProxyCommand nc -X 5", function()
        if skip then return end
        if no_sshd then return pending(no_sshd) end
        ssh_config(ssh.port)
        drain(proxy)
        local code, out, err = launch(table.concat({
          "export GIT_SSH_COMMAND=" .. shq("ssh -F " .. work .. "/ssh_config"),
          "git ls-remote gitbox:" .. shq(dir .. "/repo.git") .. " HEAD >ls-remote.out; echo git=$?",
          "ssh -F " .. shq(work .. "/ssh_config") .. " gitbox 'echo remote=$((6 * 7)) $(hostname)'",
          "echo ssh=$?",
          -- the sshd without the proxy: no route
          "nc -z -w 3 127.0.0.1 " .. ssh.port .. "; echo direct=$?",
        }, "\n"))
        assert.are.equal(0, code, err)
        local r = kv(out)
        assert.are.equal("0", r.git, out .. err)
        assert.are.equal(repo_head .. "\tHEAD\n", helpers.read(work .. "/ls-remote.out"))
        assert.are.equal("0", r.ssh, out .. err)
        assert.matches("^42 ", r.remote)
        assert.are_not.equal("0", r.direct, out)
        local ev = drain(proxy)
        local n = 0
        for _, e in ipairs(ev) do
          if e.method == "SOCKS5" and e.code == "allowed" and e.port == ssh.port then n = n + 1 end
        end
        assert.are.equal(2, n, "one SOCKS5 tunnel each for git and ssh")
      end)

      it("cannot reach the host's loopback sshd through the SOCKS port when it is not allowlisted", function()
        if skip then return end
        if no_sshd then return pending(no_sshd) end
        ssh_config(ssh.port)
        -- an allowlisted name pinned to the host's loopback, at the sshd's
        -- port: the private-address rule, not the name, decides
        local other, other_sock = start_proxy("nosshd", { "127.0.0.1:" .. up.http_port,
          "inner.example.com:" .. ssh.port }, { resolve = { ["inner.example.com"] = { "127.0.0.1" } } })
        local log_before = #(helpers.read(ssh.log) or "")
        local ok, e = pcall(function()
          local code, out, err = launch(table.concat({
            "ssh -F " .. shq(work .. "/ssh_config") .. " gitbox 'echo reached'; echo ssh=$?",
            "export GIT_SSH_COMMAND=" .. shq("ssh -F " .. work .. "/ssh_config"),
            "git ls-remote gitbox:" .. shq(dir .. "/repo.git") .. " >/dev/null 2>&1; echo git=$?",
            raw_socks("raw", "\5\1\0\1\127\0\0\1" .. be16(ssh.port)),
            "ssh -F " .. shq(work .. "/ssh_config") .. " -o HostName=inner.example.com gitbox 'echo reached'; "
              .. "echo by_name=$?",
          }, "\n"), other_sock)
          assert.are.equal(0, code, err)
          local r = kv(out)
          assert.are_not.equal("0", r.ssh, out)
          assert.is_nil(out:find("reached", 1, true))
          assert.are_not.equal("0", r.git, out)
          assert.are.equal("0500/05020001000000000000", r.raw, out)
          local ev = drain(other)
          local refusal = find_event(ev, function(x)
            return x.method == "SOCKS5" and x.port == ssh.port and x.code == "not_allowed"
          end)
          assert.is_truthy(refusal, "no not_allowed event for the sshd port")
          assert.are_not.equal("0", r.by_name, out)
          assert.is_truthy(find_event(ev, function(x)
            return x.method == "SOCKS5" and x.host == "inner.example.com" and x.port == ssh.port
              and x.code == "private_address"
          end), "no private_address event for inner.example.com")
          -- the sshd saw no connection at all
          local log = (helpers.read(ssh.log) or ""):sub(log_before + 1)
          assert.is_nil(log:find("Connection from", 1, true), log)
        end)
        other:close()
        assert(ok, e)
      end)
    end)
  end
end)

-- docker deny: the same SOCKS5 port through the static built-in bridge in
-- a container with --network none (a private dockerd when none answers;
-- the image made from this machine's files, nothing pulled).
describe("SOCKS5 under docker network deny (a real container)", function()
  local containers = require("support.containers")
  -- The daemon starts in lazy_setup: only when a case of this block runs
  -- (a filtered run that skips them all starts none, and leaves none).
  local eng, why
  local no_sshd = sshd.unavailable()
  local dir, up, ssh, proxy, base

  local function launch(script)
    local spec = {}
    for k, v in pairs(base) do spec[k] = v end
    spec.command = script
    local line = assert(isolation.wrap(spec))
    return helpers.run("env " .. eng.env .. " HOME=" .. shq(dir .. "/home") .. " timeout -k 5 120 sh -c " .. shq(line))
  end

  lazy_setup(function()
    eng, why = containers.docker()
    if not eng then
      print("socks_deny_spec: skipping the docker SOCKS5 specs: " .. why)
      return
    end
    dir = helpers.tmpdir()
    assert(os.execute("mkdir -m 0700 " .. shq(dir .. "/run") .. " && mkdir -p " .. shq(dir .. "/home/work")
      .. " " .. shq(dir .. "/sshd")))
    -- ssh needs a passwd entry for its uid (root: docker --user 0:0 here),
    -- and /bin/sh for its ProxyCommand
    containers.image(eng, "isolation-spec-socks", { "bash", "curl", "head", "od", "tr", "env", "dash", "nc", "ssh" },
      { ["/etc/passwd"] = "root:x:0:0:root:/root:/bin/bash\n", ["/bin/sh"] = { link = "/usr/bin/dash" } })
    up = upstream.start()
    if not no_sshd then ssh = sshd.start(dir .. "/sshd") end
    local allow = { "127.0.0.1:" .. up.http_port }
    if ssh then allow[#allow + 1] = "127.0.0.1:" .. ssh.port end
    proxy = assert(isolation.proxy({ unix = dir .. "/run/proxy.sock", allow = allow }))
    local code, real = helpers.run("realpath build/isolation-bridge")
    assert(code == 0, "no build/isolation-bridge: run make")
    base = {
      config = { mode = "docker", network = "deny", docker_image = "isolation-spec-socks" },
      workdir = dir .. "/home/work", proxy_socket = dir .. "/run/proxy.sock",
      bridge_path = (real:gsub("%s+$", "")), tty = false, protect = {},
    }
  end)

  lazy_teardown(function()
    if not eng then return end
    if proxy then proxy:close() end
    if ssh then ssh:stop() end
    if up then up:stop() end
    if dir then helpers.rmtree(dir) end
    eng:stop()
  end)

  it("curl --socks5-hostname reaches the allowlisted upstream, a denied host gets 0x02 and an event, "
    .. "BIND gets 0x07, ssh runs a command on the host's sshd through nc -X 5", function()
    if not eng then return pending(why) end
    local work = base.workdir
    local lines = {
      "echo \"all=$ALL_PROXY\"",
      CURL .. "-w 'socks=%{http_code}\\n' --socks5-hostname 127.0.0.1:1080 http://127.0.0.1:" .. up.http_port
        .. "/small",
      "env -u HTTP_PROXY -u http_proxy " .. CURL .. "-w 'all_proxy=%{http_code}\\n' http://127.0.0.1:" .. up.http_port
        .. "/small",
      raw_socks("denied", by_name("denied.example.com", 8080)),
      raw_socks("bind", "\5\2\0\1\127\0\0\1" .. be16(up.http_port)),
      "(exec 3<>/dev/tcp/127.0.0.1/" .. up.http_port .. ") 2>/dev/null; echo direct=$?",
    }
    if ssh then
      helpers.write(work .. "/ssh_config", table.concat({
        "Host gitbox", "  HostName 127.0.0.1", "  Port " .. ssh.port, "  User root",
        "  IdentityFile " .. work .. "/key", "  UserKnownHostsFile " .. work .. "/known_hosts",
        "  StrictHostKeyChecking accept-new", "  BatchMode yes", "  ConnectTimeout 15",
        "  ProxyCommand nc -X 5 -x 127.0.0.1:1080 %h %p", "",
      }, "\n"))
      assert(os.execute("cp -p " .. shq(ssh.key) .. " " .. shq(work .. "/key")))
      lines[#lines + 1] = "ssh -F " .. shq(work .. "/ssh_config") .. " gitbox 'echo remote=$((6 * 7))'; echo ssh=$?"
    end
    local code, out, err = launch(table.concat(lines, "\n"))
    assert.are.equal(0, code, err)
    local r = kv(out)
    assert.are.equal("socks5h://127.0.0.1:1080", r.all, out)
    assert.are.equal("200", r.socks, out .. err)
    assert.are.equal("200", r.all_proxy, out .. err)
    assert.are.equal("0500/05020001000000000000", r.denied, out)
    assert.are.equal("0500/05070001000000000000", r.bind, out)
    assert.are_not.equal("0", r.direct, out)
    local ev = drain(proxy)
    assert.is_truthy(find_event(ev, function(e)
      return e.method == "SOCKS5" and e.host == "denied.example.com" and e.code == "not_allowed"
    end), "no not_allowed event")
    if ssh then
      assert.are.equal("0", r.ssh, out .. err)
      assert.are.equal("42", r.remote, out)
    else
      print("socks_deny_spec: docker ssh part skipped: " .. no_sshd)
    end
  end)
end)
