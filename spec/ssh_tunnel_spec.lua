-- Network deny on an ssh target, through a real sshd: a private server on a
-- loopback port (its own host key, an authorized key made for the test, no
-- password, no PAM), the session manager launching bwrap deny sessions on
-- {kind = "ssh", tunnel = true, ...}. The remote socket_dir is not the
-- local runtime_dir, so the only way the remote sandbox reaches the proxy
-- is the reverse forward of the ssh connection.
local uv = require("luv")
local cjson = require("cjson")
local helpers = require("helpers")
local upstream = require("support.upstream")
local sshd = require("support.sshd")
local isolation = require("isolation")
local session = require("isolation.session")

local q = helpers.shquote
local SSHD = "/usr/sbin/sshd"

local exists = helpers.exists

local wait_for = helpers.wait_for

local function pid_alive(pid)
  return helpers.run("kill -0 " .. pid) == 0
end

describe("network deny on an ssh tunnel target (a real sshd)", function()
  local skip = helpers.skip_without_bwrap() or not exists(SSHD) or uv.getuid() ~= 0
  local T, port, up, mgr, target, pids, server

  before_each(function()
    if skip then return end
    T = helpers.tmpdir()
    -- the private sshd: its keys in T, the client key T/key
    server = sshd.start(T, { "AllowStreamLocalForwarding yes" })
    port = server.port
    up = upstream.start()
    pids = {}
    target = { kind = "ssh", tunnel = true, host = "root@127.0.0.1", port = port,
      socket_dir = T .. "/remote/sockets",
      ssh_options = { "-F", "/dev/null", "-i", T .. "/key", "-o", "UserKnownHostsFile=" .. T .. "/known_hosts",
        "-o", "StrictHostKeyChecking=accept-new", "-o", "BatchMode=yes", "-q" } }
    mgr = assert(session.manager({
      runtime_dir = T .. "/run", audit_log = T .. "/audit.log",
      launcher = function(cmdline, s)
        local code, out = helpers.run("exec " .. "sh -c " .. q(cmdline) .. " >" .. q(T .. "/" .. s.id .. ".out")
          .. " 2>&1 </dev/null & echo $!")
        assert(code == 0)
        local pid = tonumber(out:match("%d+"))
        pids[#pids + 1] = pid
        return { pid = pid }
      end,
      alive = function(h) return pid_alive(h.pid) end,
      stop = function(h) helpers.run("kill " .. h.pid) end,
    }))
  end)

  after_each(function()
    if skip then return end
    -- each step whatever the one before did: no sshd, no process, no
    -- directory left behind by a failed test
    pcall(mgr.close, mgr)
    for _, pid in ipairs(pids) do helpers.run("kill -9 " .. pid .. " 2>/dev/null") end
    pcall(up.stop, up)
    if server then server:stop() end
    helpers.rmtree(T)
  end)

  local function pend()
    pending("needs root, bwrap and " .. SSHD .. " (openssh-server)")
  end

  local CURL = "curl -s -o /dev/null --max-time 10 -w '%{http_code}' "

  local function launch(id, command)
    local work = T .. "/work-" .. id
    assert(uv.fs_mkdir(work, 448))
    local s, err = mgr:launch({ id = id, workdir = work, command = command, target = target,
      isolation = { mode = "bwrap", network = "deny", allow_hosts = { "127.0.0.1:" .. up.http_port } } })
    assert(s, err)
    return s, work
  end

  local function ended(s)
    return wait_for(function()
      mgr:poll()
      return s.state == "ended"
    end, 30)
  end

  it("an allowed request works through the tunnel, a denied one gets 403, a direct connection fails, "
    .. "and the remote socket is gone after the end", function()
    if skip then return pend() end
    local url = "http://127.0.0.1:" .. up.http_port .. "/small"
    local s, work = launch("one", CURL .. q(url) .. " >allowed; " .. CURL .. "http://denied.example.com/ >denied; "
      .. CURL .. "--noproxy '*' " .. q(url) .. " >direct; "
      .. CURL .. "--socks5-hostname 127.0.0.1:1080 " .. q(url) .. " >socks; "
      .. "ls -A /run/isolation >seen 2>&1; ls " .. q(T .. "/remote/sockets") .. " >/dev/null 2>&1; echo $? >dir_rc")
    assert.is_truthy(s.remote_socket:find(T .. "/remote/sockets/one.", 1, true), s.remote_socket)
    assert.are_not.equal(mgr.runtime_dir, T .. "/remote/sockets")
    assert.is_true(ended(s), helpers.read(T .. "/one.out"))
    assert.are.equal("200", helpers.read(work .. "/allowed"), helpers.read(T .. "/one.out"))
    assert.are.equal("403", helpers.read(work .. "/denied"))
    assert.are.equal("000", helpers.read(work .. "/direct"))
    -- the remote bridge's SOCKS5 port goes through the same forward
    assert.are.equal("200", helpers.read(work .. "/socks"))
    assert.are.equal(2, up:stats().requests)
    -- inside: only its own forwarded socket, at the fixed path; socket_dir
    -- (other sessions' sockets) is not in the sandbox
    assert.are.equal("proxy.sock\n", helpers.read(work .. "/seen"))
    assert.are_not.equal("0\n", helpers.read(work .. "/dir_rc"))
    -- the socket_dir: the remote user's, 0700; the socket removed on exit
    assert.are.equal(448, math.tointeger(uv.fs_lstat(T .. "/remote/sockets").mode) & 4095)
    assert.is_true(wait_for(function() return not exists(s.remote_socket) end, 5), s.remote_socket)
    assert.is_false(exists(s.proxy_socket or (T .. "/run/one.sock")))
    -- the same proxy events, from the session's own proxy
    local kinds = {}
    for l in io.lines(T .. "/audit.log") do
      local e = cjson.decode(l)
      kinds[#kinds + 1] = e.session .. " " .. e.type .. " " .. e.method
    end
    table.sort(kinds)
    assert.are.same({ "one allow GET", "one allow SOCKS5", "one deny GET" }, kinds)
  end)

  it("two sessions at once get two sockets, each its own proxy", function()
    if skip then return pend() end
    local url = "http://127.0.0.1:" .. up.http_port .. "/small"
    local cmd = "while [ ! -e go ]; do sleep 0.1; done; " .. CURL .. q(url) .. " >allowed"
    local a, wa = launch("a", cmd)
    local b, wb = launch("b", cmd)
    assert.are_not.equal(a.remote_socket, b.remote_socket)
    assert.is_true(wait_for(function() return exists(a.remote_socket) and exists(b.remote_socket) end, 20),
      helpers.read(T .. "/a.out") .. helpers.read(T .. "/b.out"))
    assert.are.equal("socket", uv.fs_lstat(a.remote_socket).type)
    helpers.write(wa .. "/go", "")
    helpers.write(wb .. "/go", "")
    assert.is_true(ended(a))
    assert.is_true(ended(b))
    assert.are.equal("200", helpers.read(wa .. "/allowed"))
    assert.are.equal("200", helpers.read(wb .. "/allowed"))
    assert.is_true(wait_for(function() return not exists(a.remote_socket) and not exists(b.remote_socket) end, 5))
  end)

  it("a socket_dir that is a symlink on the remote side (to a directory someone else chose) is refused before "
    .. "the forward: nothing runs, no socket is made there", function()
    if skip then return pend() end
    assert(uv.fs_mkdir(T .. "/remote", 448))
    assert(uv.fs_mkdir(T .. "/elsewhere", 493))
    assert(uv.fs_chmod(T .. "/elsewhere", 493))
    assert(uv.fs_symlink(T .. "/elsewhere", T .. "/remote/sockets"))
    local s, work = launch("link", "echo ran >ran")
    assert.is_true(ended(s))
    assert.is_false(exists(work .. "/ran"))
    assert.are.same({}, require("support.glue").sockets(T .. "/elsewhere"))
    assert.are.equal(493, math.tointeger(uv.fs_lstat(T .. "/elsewhere").mode) & 4095) -- not chmod-ed through the link
  end)

  it("a killed ssh connection ends the session: the manager tears down, the remote side ends and its "
    .. "socket is gone", function()
    if skip then return pend() end
    local marker = "isolation-ssh-spec-" .. math.tointeger(uv.os_getpid())
    local s = launch("killed", "exec -a " .. marker .. " sleep 600")
    -- the sandbox's command (its argv[0] is the marker), and the remote shell
    -- (pgrep's own sh -c names the marker too, but neither at the start)
    local sandbox = "pgrep -f " .. q("^" .. marker .. " 600")
    local remote_shell = "pgrep -f " .. q("^bash -c trap .*" .. marker)
    assert.is_true(wait_for(function() return helpers.run(sandbox) == 0 end, 20), helpers.read(T .. "/killed.out"))
    assert.is_true(exists(s.remote_socket))
    assert.are.equal(0, helpers.run(remote_shell))
    helpers.run("kill -9 " .. s.handle.pid)
    assert.is_true(ended(s))
    assert.are.equal("exited", s.end_reason)
    assert.is_nil(s.proxy)
    assert.is_true(wait_for(function() return not exists(s.remote_socket) end, 10), s.remote_socket)
    assert.is_true(wait_for(function() return helpers.run(sandbox) ~= 0 end, 10), "the remote sandbox still runs")
    assert.is_true(wait_for(function() return helpers.run(remote_shell) ~= 0 end, 10), "the remote shell still runs")
  end)
end)

describe("isolation.ssh_argv", function()
  local spec = { config = { mode = "bwrap", network = "deny" }, workdir = "/srv/w", command = "make",
    proxy_socket = "/run/user/0/iso/s1.sock" }
  local target = { kind = "ssh", tunnel = true, host = "dev@build.example.com", port = 2222,
    socket_dir = "/home/dev/.isolation", ssh_options = { "-i", "/k", "-oBatchMode=yes" } }

  it("builds one ssh with the reverse forward, the options, the host after -- and the wrapped line", function()
    local argv, info = assert(isolation.ssh_argv(spec, target))
    assert.are.same({ "ssh", "-o", "StreamLocalBindUnlink=yes", "-o", "ExitOnForwardFailure=yes", "-p", "2222",
      "-i", "/k", "-oBatchMode=yes", "-R", "/home/dev/.isolation/s1.sock:/run/user/0/iso/s1.sock", "-tt", "--",
      "dev@build.example.com" }, { table.unpack(argv, 1, #argv - 1) })
    local remote = argv[#argv]
    local line = assert(isolation.wrap({ config = spec.config, workdir = "/srv/w", command = "make",
      proxy_socket = "/home/dev/.isolation/s1.sock", reap = false }))
    -- no reaper on the remote line: the reaper is a program of this host
    local tail = "(\n" .. line .. "\n) <&0 &\nwait $!\n"
    assert.are.equal(tail, remote:sub(-#tail))
    -- the traps first: the forwarded socket exists before the command starts
    assert.are.equal("trap 'rm -f -- /home/dev/.isolation/s1.sock' EXIT\n", remote:sub(1, 50))
    assert.is_truthy(remote:find("\ntrap 'kill -HUP $! 2>/dev/null; exit 129' HUP\n", 1, true), remote)
    assert.are.equal("/home/dev/.isolation/s1.sock", info.socket)
    assert.are.same({ "ssh", "-p", "2222", "-i", "/k", "-oBatchMode=yes", "-T", "--", "dev@build.example.com",
      "umask 077 && mkdir -p -- '/home/dev/.isolation' && test ! -h '/home/dev/.isolation' && "
      .. "test -O '/home/dev/.isolation' && chmod 0700 '/home/dev/.isolation'" }, info.prepare)
  end)

  local function with(field, value)
    local t = {}
    for k, v in pairs(target) do t[k] = v end
    t[field] = value
    return t
  end

  local bad = {
    { "host", "-oProxyCommand=touch /tmp/x", "target.host must be a non-empty ssh destination" },
    { "host", "a b", "target.host must be a non-empty ssh destination" },
    { "host", "h\0x", "target.host must not contain a NUL byte" },
    { "host", nil, "target.host must be a string" },
    { "port", 0, "target.port must be an integer from 1 to 65535" },
    { "port", 65536, "target.port must be an integer from 1 to 65535" },
    { "port", 22.5, "target.port must be an integer from 1 to 65535" },
    { "socket_dir", "relative", "target.socket_dir must be an absolute path" },
    { "socket_dir", "/", "target.socket_dir must be an absolute path" },
    { "socket_dir", "/a/../b", "target.socket_dir must be an absolute path" },
    { "socket_dir", "/a'$(id)'", "target.socket_dir must be an absolute path" },
    { "socket_dir", "/a\0b", "target.socket_dir must not contain a NUL byte" },
    { "socket_dir", "/" .. string.rep("d", 100), "too long for a unix socket" },
    { "ssh_options", { "evil.example.com" }, "target.ssh_options[1] must be an ssh option" },
    { "ssh_options", { "-R", "/x:/y" }, "target.ssh_options[1] must be an ssh option" },
    { "ssh_options", { "-p2" }, "target.ssh_options[1] must be an ssh option" },
    { "ssh_options", { "--" }, "target.ssh_options[1] must be an ssh option" },
    { "ssh_options", { "-i" }, "ends with an option that needs a value" },
    { "ssh_options", { "-o", "A=b\nc" }, "target.ssh_options[2] must not contain control bytes" },
    { "ssh_options", { "-o\0x" }, "target.ssh_options[1] must not contain a NUL byte" },
    { "ssh_options", "-q", "target.ssh_options must be an array of strings" },
    { "socket_name", "../x", "target.socket_name must be a file name" },
    { "tunnel", false, "target.tunnel must be true" },
    { "kind", "local", "target.kind must be \"ssh\"" },
  }
  for _, case in ipairs(bad) do
    it("refuses " .. case[1] .. " = " .. tostring(case[2]):gsub("%z", "\\0"):gsub("\n", "\\n"), function()
      local argv, err = isolation.ssh_argv(spec, with(case[1], case[2]))
      assert.is_nil(argv)
      assert.is_truthy(err:find(case[3], 1, true), err)
    end)
  end

  it("refuses a spec without a local proxy socket or with one ssh's -R cannot carry", function()
    local s = { config = spec.config, workdir = "/srv/w", command = "make" }
    local argv, err = isolation.ssh_argv(s, target)
    assert.is_nil(argv)
    assert.is_truthy(err:find("proxy_socket must be the local proxy socket's path", 1, true), err)
    s.proxy_socket = "/run/a:b.sock"
    argv, err = isolation.ssh_argv(s, target)
    assert.is_nil(argv)
    assert.is_truthy(err:find("without ':'", 1, true), err)
  end)

  it("passes wrap()'s refusal through", function()
    local argv, err = isolation.ssh_argv({ config = spec.config, workdir = "/srv/w", proxy_socket = "/r/s.sock" },
      target)
    assert.is_nil(argv)
    assert.is_truthy(err:find("command", 1, true), err)
  end)
end)

describe("validate_for_target with an ssh tunnel target", function()
  local t = { kind = "ssh", tunnel = true, host = "dev@build.example.com", socket_dir = "/home/dev/.isolation" }
  it("accepts bwrap deny with tunnel = true and still refuses it on a plain ssh target", function()
    assert.is_true(isolation.validate_for_target({ mode = "bwrap", network = "deny" }, t))
    assert.is_true(isolation.validate_for_target({ mode = "bwrap", network = "allow" }, t))
    local ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" }, { kind = "ssh" })
    assert.is_nil(ok)
    assert.is_truthy(err:find("ssh target with tunnel = true", 1, true), err)
    ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" }, "ssh")
    assert.is_nil(ok)
    assert.is_truthy(err:find("needs a local target", 1, true), err)
  end)
  it("checks the tunnel target's fields", function()
    local ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" },
      { kind = "ssh", tunnel = true, socket_dir = "/d" })
    assert.is_nil(ok)
    assert.is_truthy(err:find("target.host must be a string", 1, true), err)
    ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" },
      { kind = "ssh", tunnel = true, host = "h" })
    assert.is_nil(ok)
    assert.is_truthy(err:find("target.socket_dir must be a string", 1, true), err)
    ok, err = isolation.validate_for_target({ mode = "bwrap", network = "deny" },
      { kind = "ssh", tunnel = "yes", host = "h", socket_dir = "/d" })
    assert.is_nil(ok)
    assert.is_truthy(err:find("target.tunnel must be true", 1, true), err)
  end)
end)
