-- isolation.preflight() and `isolate doctor`: real probes on this machine
-- agree with real launches, and machines that cannot run a sandbox (an
-- Ubuntu whose AppArmor restricts user namespaces, a kernel without them, a
-- missing or setuid bwrap, no socat) are presented through injected
-- settings and programs, never by changing this machine.
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")

local function run(argv, opts)
  local status, out, err = cli.spawn(argv, opts).wait(90)
  return { status = status, out = out, err = err }
end

local function by_name(checks)
  local t = {}
  for _, c in ipairs(checks) do t[c.name] = c end
  return t
end

-- A /proc/sys tree of the given settings ("kernel/x" = "1").
local function fake_proc_sys(dir, settings)
  for name, value in pairs(settings) do
    local parent = dir .. "/" .. name:match("^(.*)/")
    assert(helpers.run("mkdir -p " .. helpers.shquote(parent)) == 0)
    helpers.write(dir .. "/" .. name, value .. "\n")
  end
  return dir
end

-- A bwrap that answers --version, and fails as a restricted kernel makes
-- bwrap fail whenever it is asked for a namespace it cannot make; anything
-- else goes to the real bwrap.
local REAL_BWRAP = select(2, helpers.run("command -v bwrap")):gsub("%s+$", "")

local function fake_bwrap(path, message, refuse)
  helpers.write(path, "#!/bin/sh\n"
    .. "case \" $* \" in *' --version '*) echo 'bubblewrap 0.9.0'; exit 0 ;; esac\n"
    .. "case \" $* \" in " .. refuse .. ") echo " .. helpers.shquote(message) .. " >&2; exit 1 ;; esac\n"
    .. "exec " .. REAL_BWRAP .. " \"$@\"\n")
  assert(helpers.run("chmod 755 " .. helpers.shquote(path)) == 0)
  return path
end

local UBUNTU_2404 = {
  ["kernel/apparmor_restrict_unprivileged_userns"] = "1",
  ["kernel/unprivileged_userns_clone"] = "1",
  ["user/max_user_namespaces"] = "63431",
  ["dev/tty/legacy_tiocsti"] = "0",
}

describe("isolation.preflight", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  it("returns every check the contract lists, each with a name, a verdict and a detail", function()
    local checks = isolation.preflight{ engines = false }
    local names = {}
    for _, c in ipairs(checks) do
      assert.is_string(c.name)
      assert.is_boolean(c.ok)
      assert.is_string(c.detail)
      if c.ok then assert.is_nil(c.fix) else assert.is_string(c.fix) end
      names[#names + 1] = c.name
    end
    assert.same({ "bwrap", "bwrap setuid", "user namespaces", "network namespace", "seccomp",
      "bridge (built-in)", "bridge (socat)", "deny launch", "bridge (pass)",
      "proxy refuses descriptors", "tty injection",
      "limits: systemd", "limits: cgroup", "limits: rlimit" }, names)
    local all = by_name(isolation.preflight())
    assert.is_table(all.docker)
    assert.is_table(all.podman)
  end)

  it("agrees with real launches on this machine: the deny launch, user and network namespaces", function()
    local c = by_name(isolation.preflight{ engines = false })
    local code = run({ cli.LUA, cli.ISOLATE, "--", "true" }, { cwd = dir }).status
    assert.equal(code == 0, c["deny launch"].ok)
    local userns = helpers.run("bwrap --ro-bind / / --dev /dev --proc /proc --unshare-user --unshare-pid true")
    assert.equal(userns == 0, c["user namespaces"].ok)
    local netns = helpers.run("bwrap --ro-bind / / --dev /dev --proc /proc --unshare-net --unshare-pid true")
    assert.equal(netns == 0, c["network namespace"].ok)
    local legacy = helpers.read("/proc/sys/dev/tty/legacy_tiocsti")
    if legacy then assert.equal(legacy:match("%d") == "0", c["tty injection"].ok) end
  end)

  it("names AppArmor and gives the profile to load on an Ubuntu that restricts user namespaces", function()
    local proc = fake_proc_sys(dir .. "/proc-sys", UBUNTU_2404)
    local bwrap = fake_bwrap(dir .. "/bwrap", "bwrap: setting up uid map: Permission denied",
      "*' --unshare-user '*|*' --unshare-net '*")
    local c = by_name(isolation.preflight{ proc_sys = proc, bwrap = bwrap, uid = 1000, engines = false })
    assert.is_true(c.bwrap.ok)
    assert.matches("0%.9%.0", c.bwrap.detail)
    assert.is_false(c["user namespaces"].ok)
    assert.matches("AppArmor restricts unprivileged user namespaces", c["user namespaces"].detail, 1, true)
    assert.matches("apparmor_parser -r /etc/apparmor.d/bwrap", c["user namespaces"].fix, 1, true)
    assert.matches("profile bwrap " .. bwrap .. " flags=(unconfined)", c["user namespaces"].fix, 1, true)
    assert.matches("userns,", c["user namespaces"].fix, 1, true)
    assert.is_false(c["network namespace"].ok)
    assert.equal("the fix for user namespaces above", c["network namespace"].fix)
    assert.is_false(c["deny launch"].ok)
    assert.is_true(c["tty injection"].ok)
  end)

  it("names user.max_user_namespaces on a kernel that allows no user namespaces", function()
    local proc = fake_proc_sys(dir .. "/proc-sys", { ["user/max_user_namespaces"] = "0" })
    local bwrap = fake_bwrap(dir .. "/bwrap", "bwrap: No permissions to creating new namespace, likely because "
      .. "the kernel does not allow non-privileged user namespaces.", "*' --unshare-user '*|*' --unshare-net '*")
    local c = by_name(isolation.preflight{ proc_sys = proc, bwrap = bwrap, uid = 1000, engines = false })
    assert.is_false(c["user namespaces"].ok)
    assert.matches("user.max_user_namespaces = 0", c["user namespaces"].detail, 1, true)
    assert.matches("sysctl -w user.max_user_namespaces=", c["user namespaces"].fix, 1, true)
  end)

  it("names kernel.unprivileged_userns_clone for an ordinary user on a Debian that turned it off", function()
    local proc = fake_proc_sys(dir .. "/proc-sys", { ["kernel/unprivileged_userns_clone"] = "0",
      ["user/max_user_namespaces"] = "100" })
    local bwrap = fake_bwrap(dir .. "/bwrap", "bwrap: No permissions to creating new namespace",
      "*' --unshare-user '*|*' --unshare-net '*")
    local c = by_name(isolation.preflight{ proc_sys = proc, bwrap = bwrap, uid = 1000, engines = false })
    assert.matches("sysctl -w kernel.unprivileged_userns_clone=1", c["user namespaces"].fix, 1, true)
  end)

  it("says how to install bwrap when there is none, and does not try a launch", function()
    local c = by_name(isolation.preflight{ bwrap = dir .. "/no-such-bwrap", engines = false })
    assert.is_false(c.bwrap.ok)
    assert.equal("apt-get install bubblewrap", c.bwrap.fix)
    assert.is_false(c["deny launch"].ok)
    assert.matches("not tried", c["deny launch"].detail, 1, true)
  end)

  it("flags a setuid bwrap where user namespaces work without it", function()
    local bwrap = fake_bwrap(dir .. "/bwrap", "unused", "*' --never '*")
    assert(helpers.run("chmod 4755 " .. helpers.shquote(bwrap)) == 0)
    local c = by_name(isolation.preflight{ bwrap = bwrap, engines = false })
    assert.is_false(c["bwrap setuid"].ok)
    assert.equal("chmod u-s " .. bwrap
      .. " (unprivileged user namespaces work here; the setuid bit only adds attack surface)", c["bwrap setuid"].fix)
    assert.is_true(c["deny launch"].ok)
  end)

  it("says how to get socat when it is missing, and still launches with the built-in bridge", function()
    local c = by_name(isolation.preflight{ socat = "no-such-socat", engines = false })
    assert.is_false(c["bridge (socat)"].ok)
    assert.matches("apt-get install socat", c["bridge (socat)"].fix, 1, true)
    assert.equal(isolation.BRIDGE ~= nil, c["deny launch"].ok)
  end)

  it("bridge (pass): a real handover to a real proxy, agreeing with a real isolate launch through pass", function()
    if helpers.skip_without_bwrap() or not isolation.BRIDGE then return end
    local c = by_name(isolation.preflight{ engines = false })
    local code = run({ cli.LUA, cli.ISOLATE, "--bridge", "pass", "--", "true" }, { cwd = dir }).status
    assert.equal(code == 0, c["bridge (pass)"].ok, c["bridge (pass)"].detail)
    assert.is_true(c["bridge (pass)"].ok, c["bridge (pass)"].detail)
    assert.matches("handed its listener to the proxy", c["bridge (pass)"].detail, 1, true)
    assert.is_nil(c["bridge (pass)"].fix)
  end)

  it("bridge (pass) fails with the starter's reason and a fix when the proxy takes no listeners", function()
    if helpers.skip_without_bwrap() or not isolation.BRIDGE then return end
    -- a real proxy that refuses the handover (accept_listeners = 0): the
    -- starter ends the sandbox with 126 before the probe runs
    local c = by_name(isolation.preflight{ engines = false, pass_listeners = 0 })
    local pass = c["bridge (pass)"]
    assert.is_false(pass.ok)
    assert.matches("exit 126", pass.detail, 1, true)
    assert.matches("takes no descriptors", pass.detail, 1, true)
    assert.matches("accept_listeners >= 2", pass.fix, 1, true)
    assert.matches("isolate --bridge builtin", pass.fix, 1, true)
    -- the relay's own launch is not affected
    assert.is_true(c["deny launch"].ok)
  end)

  it("proxy refuses descriptors: tried by sending one to a real proxy, and agrees with the kernel", function()
    local c = by_name(isolation.preflight{ engines = false })["proxy refuses descriptors"]
    local kernel_has = os.execute("python3 -c 'import socket; socket.socket(socket.AF_UNIX)"
      .. ".setsockopt(socket.SOL_SOCKET, 83, 0)' 2>/dev/null") == true
    assert.are.equal(kernel_has, c.ok, c.detail)
    if c.ok then
      assert.matches("SO_PASSRIGHTS", c.detail, 1, true)
    else
      assert.matches("6.16", c.fix, 1, true)
    end
  end)

  it("bridge (pass) names a rebuild when the bridge program predates --pass", function()
    if helpers.skip_without_bwrap() then return end
    -- a stand-in for an older isolation-bridge: its usage line, no --pass
    local old = dir .. "/isolation-bridge"
    helpers.write(old, "#!/bin/sh\necho 'usage: isolation-bridge PORT SOCKET' >&2\nexit 2\n")
    assert(helpers.run("chmod 755 " .. helpers.shquote(old)) == 0)
    local c = by_name(isolation.preflight{ engines = false, bridge = old })
    assert.is_true(c["bridge (built-in)"].ok)
    assert.is_false(c["bridge (pass)"].ok)
    assert.matches("exit 2", c["bridge (pass)"].detail, 1, true)
    assert.matches("make build/isolation-bridge", c["bridge (pass)"].fix, 1, true)
  end)

  it("bridge (pass) is not tried without a network namespace, nor without the bridge program", function()
    local bwrap = fake_bwrap(dir .. "/bwrap", "bwrap: setting up uid map: Permission denied", "*' --unshare-net '*")
    local c = by_name(isolation.preflight{ bwrap = bwrap, engines = false })
    assert.is_false(c["bridge (pass)"].ok)
    assert.matches("not tried: no network namespace", c["bridge (pass)"].detail, 1, true)
    assert.equal("fix the checks above first", c["bridge (pass)"].fix)
    c = by_name(isolation.preflight{ bridge = dir .. "/no-such-bridge", engines = false })
    assert.is_false(c["bridge (pass)"].ok)
    assert.matches("not tried: the built-in bridge does not run", c["bridge (pass)"].detail, 1, true)
  end)

  it("reads dev.tty.legacy_tiocsti from the given settings", function()
    local on = by_name(isolation.preflight{ proc_sys = fake_proc_sys(dir .. "/a", { ["dev/tty/legacy_tiocsti"] = "1" }),
      engines = false })
    assert.is_false(on["tty injection"].ok)
    assert.matches("sysctl -w dev.tty.legacy_tiocsti=0", on["tty injection"].fix, 1, true)
    local none = by_name(isolation.preflight{ proc_sys = fake_proc_sys(dir .. "/b", {}), engines = false })
    assert.is_false(none["tty injection"].ok)
    assert.matches("before 6.2", none["tty injection"].detail, 1, true)
  end)

  it("raises for an unknown option or a wrong type, naming it", function()
    assert.has_error(function() isolation.preflight{ procsys = "/x" } end,
      "bad argument #1 to 'preflight' (unknown option procsys)")
    assert.has_error(function() isolation.preflight{ timeout = "5" } end,
      "bad argument #1 to 'preflight' (timeout: number expected, got string)")
    assert.has_error(function() isolation.preflight{ pass_listeners = "1" } end,
      "bad argument #1 to 'preflight' (pass_listeners: number expected, got string)")
  end)

  it("leaves no temporary directory behind", function()
    local before = select(2, helpers.run("ls -d /tmp/isolation-preflight.* 2>/dev/null | wc -l"))
    isolation.preflight{ engines = false }
    local after = select(2, helpers.run("ls -d /tmp/isolation-preflight.* 2>/dev/null | wc -l"))
    assert.equal(before, after)
  end)
end)

describe("isolate doctor", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  it("prints the table and exits 0 where a deny launch works, with no HOME in the environment", function()
    if helpers.skip_without_bwrap() then return end
    local r = run({ "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", cli.LUA, cli.ISOLATE, "doctor" })
    assert.equal(0, r.status, r.out .. r.err)
    assert.matches("\nok    deny launch ", "\n" .. r.out, 1, true)
    -- warnings (optional, or handled by the defaults) may follow; no FAIL
    assert.matches("isolate doctor: a bwrap sandbox with the network denied works here", r.out, 1, true)
    assert.not_matches("\nFAIL ", "\n" .. r.out, 1, true)
  end)

  it("exits 1 and prints the AppArmor fix for a simulated restricted Ubuntu", function()
    local proc = fake_proc_sys(dir .. "/proc-sys", UBUNTU_2404)
    local bwrap = fake_bwrap(dir .. "/bwrap", "bwrap: setting up uid map: Permission denied",
      "*' --unshare-user '*|*' --unshare-net '*")
    local r = run({ cli.LUA, cli.ISOLATE, "doctor", "--proc-sys", proc, "--bwrap", bwrap })
    assert.equal(1, r.status, r.out .. r.err)
    assert.matches("FAIL  network namespace", r.out, 1, true)
    assert.matches("fix: write /etc/apparmor.d/bwrap with the profile below", r.out, 1, true)
    assert.matches("does NOT work here", r.out, 1, true)
  end)

  it("isolate explains a bwrap that cannot start, with the matching check's verdict and fix", function()
    assert(helpers.run("mkdir " .. helpers.shquote(dir .. "/bin")) == 0)
    fake_bwrap(dir .. "/bin/bwrap", "bwrap: setting up uid map: Permission denied",
      "*' --unshare-user '*|*' --unshare-net '*")
    local r = run({ "env", "PATH=" .. dir .. "/bin:/usr/sbin:/usr/bin:/sbin:/bin", cli.LUA, cli.ISOLATE, "--",
      "touch", dir .. "/ran" }, { cwd = dir })
    assert.equal(1, r.status, r.out .. r.err)
    assert.is_nil(helpers.read(dir .. "/ran"))
    assert.matches("isolate: bwrap cannot start a sandbox here (network namespace): ", r.err, 1, true)
    assert.matches("\nisolate: fix: ", r.err, 1, true)
  end)

  it("isolate adds nothing when the sandboxed command itself exits 1", function()
    if helpers.skip_without_bwrap() then return end
    local r = run({ cli.LUA, cli.ISOLATE, "--", "false" }, { cwd = dir })
    assert.equal(1, r.status)
    assert.not_matches("cannot start a sandbox", r.err, 1, true)
  end)

  it("refuses an unknown argument as a usage error", function()
    local r = run({ cli.LUA, cli.ISOLATE, "doctor", "--frobnicate" })
    assert.equal(2, r.status)
    assert.matches("doctor: unexpected argument --frobnicate", r.err, 1, true)
  end)
end)
