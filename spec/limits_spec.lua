-- Resource limits: the spec keys `limits` and `limits_via`, what each
-- builder makes of them, the choice of a mechanism, and real sandboxes on
-- this machine that try to take it down (a bounded fork bomb, a memory hog,
-- a full /tmp, a descriptor leak, a command that never ends) and must be
-- stopped at the limit. Every cgroup a launch makes must be gone after it,
-- on every path.
local isolation = require("isolation")
local limits = require("isolation.limits")
local helpers = require("helpers")
local support = require("support.launch")

local q = helpers.shquote

local function spec_with(l, via, extra)
  local s = { config = { mode = "bwrap", network = "allow" }, workdir = "/srv/w", command = "true", limits = l,
    limits_via = via }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

local index_of = require("support.tables").index_of

describe("limits in the launch spec (pure)", function()
  it("bwrap_argv starts with bwrap and sizes both private tmpfs with --size before --tmpfs", function()
    local argv = assert(isolation.bwrap_argv(spec_with({ tmpfs = 1048576, memory = 67108864, pids = 32, time = 5 },
      "cgroup")))
    assert.are.equal("bwrap", argv[1])
    local t = assert(index_of(argv, "/tmp"))
    assert.are.same({ "--size", "1048576", "--tmpfs", "/tmp" }, { argv[t - 3], argv[t - 2], argv[t - 1], argv[t] })
    local h = assert(index_of(argv, "$HOME"))
    assert.are.same({ "--size", "1048576", "--tmpfs" }, { argv[h - 3], argv[h - 2], argv[h - 1] })
    local d = assert(index_of(argv, "--dev"))
    assert.are.same({ "--dev", "/dev", "--remount-ro", "/dev", "--size", "1048576", "--tmpfs", "/dev/shm" },
      { table.unpack(argv, d, d + 7) })
    -- nothing of the mechanisms is bwrap's: they go in front, in argv()
    assert.is_nil(index_of(argv, "timeout"))
    assert.is_nil(index_of(argv, "prlimit"))
  end)

  it("without tmpfs the tmpfs mounts have no size", function()
    local argv = assert(isolation.bwrap_argv(spec_with({ nofile = 64 })))
    assert.is_nil(index_of(argv, "--size"))
  end)

  it("argv(): the cgroup shell, then the time watchdog, then prlimit for nofile, then the bwrap argv", function()
    local s = spec_with({ memory = 67108864, pids = 32, cpu = 1.5, nofile = 64, time = 10 }, "cgroup")
    local argv = assert(isolation.argv(s))
    local bw = assert(isolation.bwrap_argv(s))
    -- outermost, the reaper: what the limits' shells leave comes back to it
    assert.are.same({ isolation.BRIDGE, "--reap", "5", "--" }, { table.unpack(argv, 1, 4) })
    argv = table.move(argv, 5, #argv, 1, {})
    assert.are.same({ "bash", "-c" }, { table.unpack(argv, 1, 2) })
    assert.truthy(argv[3]:find("cgroup.procs", 1, true))
    assert.are.same({ "isolation-cgroup", "67108864", "32", "150000", "--", "bash", "-c" },
      { table.unpack(argv, 4, 10) })
    assert.truthy(argv[11]:find("SIGTERM", 1, true))
    assert.are.same({ "isolation-time", "10", "5", "--", "prlimit", "--nofile=64:64", "--" },
      { table.unpack(argv, 12, 18) })
    -- then the clean environment's env -i, then bwrap
    assert.are.same({ "env", "-i" }, { table.unpack(argv, 19, 20) })
    local b = assert(index_of(argv, "bwrap", 19))
    assert.are.same(bw, { table.unpack(argv, b) })
  end)

  it("argv() with limits_via systemd: a user scope with MemoryMax, TasksMax, CPUQuota (asserted always)", function()
    local argv = assert(isolation.argv(spec_with({ memory = 536870912, pids = 100, cpu = 0.5 }, "systemd")))
    argv = table.move(argv, 5, #argv, 1, {}) -- behind the reaper
    assert.are.same({ "systemd-run", "--user", "--scope", "--quiet", "--collect", "-p", "MemoryMax=536870912",
      "-p", "MemorySwapMax=0", "-p", "TasksMax=100", "-p", "CPUQuota=50%", "--", "env", "-i" },
      { table.unpack(argv, 1, 16) })
  end)

  it("argv() with limits_via rlimit: prlimit --nproc and --as per process", function()
    local argv = assert(isolation.argv(spec_with({ memory = 1048576, pids = 50, nofile = 30 }, "rlimit")))
    argv = table.move(argv, 5, #argv, 1, {}) -- behind the reaper
    assert.are.same({ "prlimit", "--nofile=30:30", "--nproc=50:50", "--as=1048576:1048576", "--", "env", "-i" },
      { table.unpack(argv, 1, 7) })
  end)

  it("wrap() is the argv() line: the prologue is one quoted word, bash's own script", function()
    local s = spec_with({ pids = 8 }, "cgroup")
    local line = assert(isolation.wrap(s))
    local reaper = "^'[^']*/isolation%-bridge' '%-%-reap' '5' '%-%-' "
    assert.truthy(helpers.line_body(line):find(reaper .. "'bash' '%-c' 'set %-u\n"),
      line)
    assert.truthy(line:find("'isolation-cgroup' '-' '8' '-' '--' 'env' '-i'", 1, true))
  end)

  it("docker maps the limits to its flags, time to the reaper on the host (not a timeout the container can stop)",
    function()
    local s = spec_with({ memory = 67108864, pids = 32, cpu = 1.5, nofile = 64, tmpfs = 1048576, time = 7 })
    s.config = { mode = "docker" }
    local argv = assert(isolation.docker_argv(s))
    local function after(flag) return argv[assert(index_of(argv, flag), flag) + 1] end
    assert.are.equal("67108864", after("--memory"))
    assert.are.equal("67108864", after("--memory-swap"))
    assert.are.equal("32", after("--pids-limit"))
    assert.are.equal("1.5", after("--cpus"))
    assert.are.equal("nofile=64:64", after("--ulimit"))
    assert.are.equal("/tmp:rw,nosuid,nodev,size=1048576,mode=1777", after("--tmpfs"))
    local img = assert(index_of(argv, "debian:bookworm-slim"))
    assert.are.same({ "bash", "-c", "--", "true" }, { table.unpack(argv, img + 1) })
    assert.is_nil(index_of(argv, "timeout"))
    -- docker_argv is docker's own line; argv() puts the reaper in front
    assert.are.same({ "docker", "run" }, { argv[1], argv[2] })
    local line = assert(isolation.argv(s))
    assert.are.same({ "--reap", "5", "--time", "7", "--container", "--" }, { table.unpack(line, 2, 7) })
    assert.are.same(argv, { table.unpack(line, 8) })
    local text = assert(isolation.dry_run(s))
    assert.truthy(text:find("memory 67108864 bytes: docker --memory, --memory-swap (no swap)", 1, true), text)
    assert.truthy(text:find("pids 32: docker --pids-limit", 1, true), text)
    assert.truthy(text:find("time 7 seconds: the bridge's reaper on the host (--time)", 1, true), text)
    -- a line for another host (reap = false) keeps the timeout in the container
    s.reap = false
    argv = assert(isolation.docker_argv(s))
    img = assert(index_of(argv, "debian:bookworm-slim"))
    assert.are.same({ "timeout", "--foreground", "-k", "5", "7", "bash", "-c", "--", "true" },
      { table.unpack(argv, img + 1) })
    -- without the bridge program, a docker line (time or not) is refused
    s.reap = nil
    s.bridge_path = nil
    local saved = isolation.BRIDGE
    isolation.BRIDGE = nil
    local ok, err = isolation.docker_argv(s)
    isolation.BRIDGE = saved
    assert.is_nil(ok)
    assert.truthy(err:find("a docker or podman line ends its container with the bridge program (and enforces "
      .. "limits.time with it)", 1, true), err)
  end)

  it("dry_run says what enforces each limit, and that there are none without limits", function()
    local text = assert(isolation.dry_run(spec_with({ memory = 67108864, pids = 32, tmpfs = 4096, nofile = 64,
      time = 3 }, "rlimit")))
    assert.truthy(text:find("limits (limits_via rlimit):", 1, true))
    assert.truthy(text:find("memory 67108864 bytes: prlimit --as (RLIMIT_AS): address space per process", 1, true))
    assert.truthy(text:find("pids 32: prlimit --nproc (RLIMIT_NPROC): counts every process of the launching user",
      1, true))
    assert.truthy(text:find("no effect at all when root launches", 1, true))
    assert.truthy(text:find("tmpfs 4096 bytes: bwrap --size", 1, true))
    assert.truthy(text:find("nofile 64: prlimit --nofile", 1, true))
    assert.truthy(text:find("time 3 seconds: a watchdog in front of bwrap, SIGTERM to every process", 1, true))
    local none = assert(isolation.dry_run(spec_with(nil)))
    assert.truthy(none:find("limits: none", 1, true))
  end)

  it("is pure: the same spec twice gives the same line, and the spec is not changed", function()
    local l = { memory = 1048576, pids = 3 }
    local s = spec_with(l, "cgroup")
    assert.are.equal(isolation.wrap(s), isolation.wrap(s))
    assert.are.same({ memory = 1048576, pids = 3 }, l)
  end)

  it("accepts JSON's integral floats", function()
    assert.truthy(isolation.argv(spec_with({ memory = 1048576.0, pids = 3.0 }, "cgroup")))
  end)

  local bad = {
    { "a limit that is not an integer", { pids = 2.5 }, "cgroup", "limits.pids must be a positive integer" },
    { "zero", { memory = 0 }, "cgroup", "limits.memory must be a positive integer (bytes)" },
    { "a negative time", { time = -1 }, nil, "limits.time must be a positive integer (seconds)" },
    { "a size as a string", { tmpfs = "512M" }, nil, "limits.tmpfs must be a positive integer (bytes)" },
    { "cpu as a string", { cpu = "2" }, "cgroup", "limits.cpu must be a number of cores" },
    { "cpu zero", { cpu = 0 }, "cgroup", "limits.cpu must be a number of cores" },
    { "cpu NaN", { cpu = 0 / 0 }, "cgroup", "limits.cpu must be a number of cores" },
    { "an unknown key", { mem = 1 }, nil, "limits key is unknown (accepted: memory, pids, tmpfs, nofile, cpu, time)"
      .. " (got \"mem\")" },
    { "limits not a table", "64M", nil, "limits must be a table" },
    { "an unknown mechanism", { pids = 1 }, "cgroups", "limits_via must be \"systemd\", \"cgroup\" or \"rlimit\""
      .. " (got \"cgroups\")" },
    { "a NUL in limits_via", { pids = 1 }, "cgroup\0x", "limits_via must not contain a NUL byte" },
    { "memory with no mechanism named", { memory = 1048576 }, nil, "limits.memory needs limits_via" },
    { "cpu by rlimit", { cpu = 1 }, "rlimit", "limits.cpu cannot be enforced with limits_via \"rlimit\"" },
  }
  for _, c in ipairs(bad) do
    it("refuses " .. c[1] .. ", naming the field, the value and what is accepted", function()
      local argv, err = isolation.argv(spec_with(c[2], c[3]))
      assert.is_nil(argv)
      assert.truthy(err:find(c[4], 1, true), err)
    end)
  end

  it("refuses limits in mode \"\": nothing would hold them", function()
    local argv, err = isolation.argv({ command = "true", limits = { time = 3 } })
    assert.is_nil(argv)
    assert.truthy(err:find("limits need mode \"bwrap\" or \"docker\"", 1, true), err)
  end)

  it("refuses a NUL in a limits key", function()
    local _, err = isolation.argv(spec_with({ ["pids\0x"] = 1 }))
    assert.truthy(err:find("limits key must not contain a NUL byte", 1, true), err)
  end)
end)

describe("isolation.limits", function()
  it("parse_size: bytes, K, M, G, T (powers of 1024)", function()
    assert.are.equal(512 * 1024 * 1024, limits.parse_size("512M"))
    assert.are.equal(2 * 1024 ^ 3, limits.parse_size("2G"))
    assert.are.equal(1000, limits.parse_size("1000"))
    assert.are.equal(4096, limits.parse_size("4k"))
    assert.are.equal(5 * 1024 * 1024, limits.parse_size("5MiB"))
    for _, bad in ipairs({ "", "0", "-1", "1.5G", "12X", "M", "1 G", "99999999999999999999T" }) do
      local n, err = limits.parse_size(bad, "--memory")
      assert.is_nil(n, bad)
      assert.truthy(err:find("--memory must be a positive size", 1, true), err)
    end
  end)

  local none = { ok = false, detail = "no such thing here" }
  local yes = { ok = true, detail = "works" }

  it("choose: the strongest mechanism that works", function()
    assert.are.equal("systemd", (limits.choose({ memory = 1 }, { checks = { systemd = yes, cgroup = yes,
      rlimit = yes } })))
    assert.are.equal("cgroup", (limits.choose({ memory = 1 }, { checks = { systemd = none, cgroup = yes,
      rlimit = yes } })))
    assert.is_nil((limits.choose({ tmpfs = 1, nofile = 2, time = 3 }, { checks = {} })))
  end)

  it("choose: a limit no mechanism here can enforce is an error naming it and every mechanism tried", function()
    local via, err = limits.choose({ pids = 32 }, { checks = { systemd = none, cgroup = none, rlimit = yes },
      uid = 0 })
    assert.is_nil(via)
    assert.truthy(err:find("limits.pids cannot be enforced on this machine", 1, true), err)
    assert.truthy(err:find("systemd (not available: no such thing here)", 1, true), err)
    assert.truthy(err:find("cgroup (not available: no such thing here)", 1, true), err)
    assert.truthy(err:find("rlimit (cannot enforce pids: RLIMIT_NPROC does not apply to root", 1, true), err)
    -- for another user, rlimit is the last resort that does apply
    assert.are.equal("rlimit", (limits.choose({ pids = 32 }, { checks = { systemd = none, cgroup = none,
      rlimit = yes }, uid = 1000 })))
    local _, cerr = limits.choose({ cpu = 1 }, { checks = { systemd = none, cgroup = none, rlimit = yes } })
    assert.truthy(cerr:find("rlimit (cannot enforce cpu: RLIMIT_CPU counts CPU seconds", 1, true), cerr)
  end)

  it("choose: a cgroup without the cpu controller is not used for cpu", function()
    local via, err = limits.choose({ cpu = 1 }, { checks = { systemd = none,
      cgroup = { ok = true, detail = "v1", cpu = false }, rlimit = yes } })
    assert.is_nil(via)
    assert.truthy(err:find("cgroup (cannot enforce cpu: no cpu controller", 1, true), err)
    assert.are.equal("cgroup", (limits.choose({ memory = 1 }, { checks = { systemd = none,
      cgroup = { ok = true, detail = "v1", cpu = false }, rlimit = yes } })))
  end)

  it("probe: preflight's cgroup check looks where the line makes its cgroup: under this process's own", function()
    local p = limits.probe()
    if not p.cgroup.ok then pending(p.cgroup.detail) return end
    for line in io.lines("/proc/self/cgroup") do
      local rel = line:match("^%d+:memory:(.*)$")
      if rel then
        assert.truthy(p.cgroup.detail:find("/sys/fs/cgroup/memory" .. rel:gsub("/$", ""), 1, true), p.cgroup.detail)
      end
    end
  end)

  it("from_options (isolate's): sizes and counts, usage errors, and 125 when nothing here can enforce", function()
    local r = assert(limits.from_options({ memory = "64M", tmpfs_size = "1M", time = "3", nofile = nil }, "docker",
      "local"))
    assert.are.same({ memory = 67108864, tmpfs = 1048576, time = 3 }, r.limits)
    assert.is_nil(r.via)
    assert.are.same({}, assert(limits.from_options({}, "bwrap", "local")))
    local _, err, code = limits.from_options({ pids = "32" }, "bwrap", "local",
      { checks = { systemd = none, cgroup = none, rlimit = yes }, uid = 0 })
    assert.are.equal(125, code)
    assert.truthy(err:find("limits.pids cannot be enforced on this machine", 1, true), err)
    r = assert(limits.from_options({ pids = "32", cpus = "0.5" }, "bwrap", "local",
      { checks = { systemd = yes, cgroup = yes, rlimit = yes } }))
    assert.are.equal("systemd", r.via)
    assert.are.same({ pids = 32, cpu = 0.5 }, r.limits)
    assert.truthy(r.note:find("limits pids, cpu enforced by systemd", 1, true), r.note)
    _, err, code = limits.from_options({ pids = "32" }, "bwrap", "ssh")
    assert.are.equal(2, code)
    assert.truthy(err:find("cannot probe", 1, true), err)
  end)

  it("probe: preflight's own three limits checks", function()
    local p = limits.probe()
    for _, k in ipairs({ "systemd", "cgroup", "rlimit" }) do
      assert.are.equal("limits: " .. k, p[k].name)
    end
  end)
end)

------------------------------------------------------------------------------
-- Real sandboxes

-- This process's cgroup directory in each v1 hierarchy the prologue uses.
local function own_cgroup_dirs()
  local dirs = {}
  for line in io.lines("/proc/self/cgroup") do
    local ctls, rel = line:match("^%d+:([^:]*):(.*)$")
    for c in ctls:gmatch("[^,]+") do
      if c == "memory" or c == "pids" or c == "cpu" then
        dirs[#dirs + 1] = "/sys/fs/cgroup/" .. c .. rel:gsub("/$", "")
      end
    end
  end
  return dirs
end

-- The isolation.<pid> cgroups that exist now.
local function sandbox_cgroups()
  local out = {}
  for _, d in ipairs(own_cgroup_dirs()) do
    local _, list = helpers.run("ls -d " .. q(d) .. "/isolation.* 2>/dev/null")
    for p in list:gmatch("[^\n]+") do out[p] = true end
  end
  return out
end

-- Polls (bounded, 10 s) until pred() holds.
local function eventually(pred)
  for _ = 1, 200 do
    if pred() then return true end
    os.execute("sleep 0.05")
  end
  return pred()
end

local function procs_in(cgroup)
  local n = 0
  for _ in (helpers.read(cgroup .. "/cgroup.procs") or ""):gmatch("%d+") do n = n + 1 end
  return n
end

local function new_since(before)
  local out = {}
  for p in pairs(sandbox_cgroups()) do
    if not before[p] then out[#out + 1] = p end
  end
  table.sort(out)
  return out
end

local FORK_BOMB = [[python3 -c '
import os, time, errno
ok = failed = 0
for i in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        failed += 1
        continue
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    ok += 1
print("forked", ok, "refused", failed)
']]

describe("limits in real sandboxes", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local checks = limits.probe()
  local T, home, work

  setup(function()
    T = helpers.tmpdir()
    home, work = T .. "/home", T .. "/work"
    assert(os.execute("mkdir -p " .. q(home) .. " " .. q(work)))
  end)
  teardown(function() helpers.rmtree(T) end)

  local function run(l, via, command)
    local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
      command = command, limits = l, limits_via = via }))
    local t0 = os.time()
    local code, out, err = support.run_line(line, home)
    return code, out, err, os.time() - t0
  end

  describe("limits_via cgroup", function()
    if not checks.cgroup.ok then
      it("is skipped", function() pending("no writable cgroup here: " .. checks.cgroup.detail) end)
      io.stderr:write("SKIP (limits_via cgroup): " .. checks.cgroup.detail .. "\n")
      return
    end

    it("a fork bomb stops at pids, the machine stays responsive, and the cgroup is gone after", function()
      local before = sandbox_cgroups()
      local code, out, err, secs = run({ pids = 32 }, "cgroup", FORK_BOMB)
      assert.are.equal(0, code, err)
      local ok, refused = out:match("forked (%d+) refused (%d+)")
      assert.truthy(ok, out .. err)
      -- the shell in front, bwrap's two processes, bash and python count too
      assert.is_true(tonumber(ok) < 32, out)
      assert.is_true(tonumber(refused) >= 168, out)
      -- the sandbox ended with its command: the sleeping children with it
      assert.is_true(secs <= 2, "took " .. secs .. " s")
      local t0 = os.clock()
      assert.are.equal(0, (helpers.run("true")))
      assert.is_true(os.clock() - t0 < 1)
      assert.are.same({}, new_since(before))
    end)

    it("without pids the same bomb forks all 200 (the test can fail)", function()
      local code, out = run({ nofile = 1024 }, nil, FORK_BOMB)
      assert.are.equal(0, code)
      assert.truthy(out:find("forked 200 refused 0", 1, true), out)
    end)

    it("a memory hog is killed at memory: status 137 and a line that says why", function()
      local before = sandbox_cgroups()
      local code, _, err = run({ memory = 64 * 1024 * 1024 }, "cgroup",
        [[python3 -c 'x = b"x" * (200 * 1024 * 1024); print("allocated")']])
      assert.are.equal(137, code, err)
      assert.truthy(err:find("isolation: the kernel killed 1 process(es) of the sandbox at its memory limit "
        .. "(67108864 bytes)", 1, true), err)
      assert.are.same({}, new_since(before))
      -- and the same hog without the limit gets its memory
      local ok_code, out = run({ nofile = 1024 }, nil,
        [[python3 -c 'x = b"x" * (200 * 1024 * 1024); print("allocated")']])
      assert.are.equal(0, ok_code)
      assert.are.equal("allocated\n", out)
    end)

    it("cpu caps the sandbox's CPU time per wall second", function()
      -- 2 s of a busy loop under 0.2 cores: about 0.4 s of CPU
      local code, out, err = run({ cpu = 0.2 }, "cgroup",
        [[timeout 2 sh -c 'while :; do :; done'; t=$(cut -d' ' -f14-17 /proc/self/stat); ]]
        .. [[python3 -c 'import os; t = os.times(); print(t.children_user + t.children_system)']])
      assert.are.equal(0, code, err)
      local used = tonumber(out:match("[%d.]+"))
      assert.is_true(used ~= nil and used < 1.0, "CPU seconds used: " .. tostring(out))
    end)

    it("attack: leaving the cgroup from inside: no /sys to write cgroup.procs, and no mount of cgroupfs", function()
      local code, out = run({ pids = 32 }, "cgroup", "ls /sys/fs/cgroup 2>/dev/null || echo no-sys; "
        .. "mkdir -p /tmp/cg && { mount -t cgroup -o pids none /tmp/cg 2>/dev/null || echo no-mount; "
        .. "mount -t cgroup2 none /tmp/cg 2>/dev/null || echo no-mount2; }; "
        .. "unshare -C true 2>/dev/null || echo no-cgroupns")
      assert.are.equal(0, code)
      assert.are.equal("no-sys\nno-mount\nno-mount2\nno-cgroupns\n", out)
    end)

    it("the line refuses to start the sandbox (125) when the cgroup cannot be made, never runs it unlimited",
      function()
        -- a controller no hierarchy here offers: the cpu quota of a cgroup
        -- v1 cpu hierarchy is there, so fake its absence with a /proc/self
        -- it cannot see: run the line with /sys/fs/cgroup hidden
        local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
          command = "echo RAN", limits = { pids = 8 }, limits_via = "cgroup" }))
        local code, out, err = helpers.run("unshare -m sh -c " .. q("mount -t tmpfs none /sys/fs/cgroup && HOME="
          .. q(home) .. " exec /bin/sh -c " .. q(line)))
        assert.are.equal(125, code, err)
        assert.are.equal("", out)
        assert.truthy(err:find("isolation: limits_via cgroup: no cgroup hierarchy with the pids controller; "
          .. "the sandbox was not started", 1, true), err)
      end)

    it("a killed line leaves an empty cgroup (its sandbox dies with it); the next launch removes it", function()
      local before = sandbox_cgroups()
      local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
        command = "sleep 60", limits = { pids = 16 }, limits_via = "cgroup" }))
      local pid = support.start("HOME=" .. q(home) .. " exec /bin/sh -c " .. q(line))
      local made
      finally(function()
        support.stop(pid)
        if made and made[1] then helpers.run("kill -9 $(cat " .. q(made[1] .. "/cgroup.procs") .. ") 2>/dev/null") end
      end)
      assert.is_true(eventually(function() made = new_since(before); return #made == 1 end))
      local shell = made[1]:match("isolation%.(%d+)$")
      -- the shell, bwrap, bwrap's init, sleep
      assert.is_true(eventually(function() return procs_in(made[1]) >= 4 end))
      helpers.run("kill -9 " .. shell)
      -- bwrap dies with its parent, the kernel ends the pid namespace
      assert.is_true(eventually(function() return procs_in(made[1]) == 0 end))
      assert.truthy(helpers.read(made[1] .. "/pids.max"), "the cgroup is left behind, empty")
      support.stop(pid)
      local code = run({ pids = 16 }, "cgroup", "true")
      assert.are.equal(0, code)
      assert.are.same({}, new_since(before))
    end)

    it("limits.cleanup and session.recover remove a dead line's cgroup and never a live one", function()
      local before = sandbox_cgroups()
      local base = own_cgroup_dirs()[1]
      local dead = base .. "/isolation.999999999"
      assert(os.execute("mkdir " .. q(dead)))
      -- a live one: a process of ours in it
      local pid = support.start("sleep 30")
      local live = base .. "/isolation." .. pid
      assert(os.execute("mkdir " .. q(live) .. " && echo " .. pid .. " > " .. q(live .. "/cgroup.procs")))
      local n, removed = limits.cleanup()
      assert.is_true(n >= 1)
      assert.truthy(index_of(removed, dead), table.concat(removed, " "))
      assert.truthy(helpers.read(live .. "/cgroup.procs"), "a live sandbox's cgroup stays")
      -- recover does it too
      assert(os.execute("mkdir " .. q(dead)))
      local rt = T .. "/rt"
      assert(os.execute("mkdir -m 700 " .. q(rt)))
      require("isolation.session").recover(rt)
      assert.is_nil(helpers.read(dead .. "/cgroup.procs"))
      -- ours again: move it out, end it, and the cleanup takes its cgroup
      helpers.run("echo " .. pid .. " > " .. q(base .. "/cgroup.procs"))
      support.stop(pid)
      assert.truthy(support.wait_until("[ ! -d /proc/" .. pid .. " ]"))
      limits.cleanup()
      assert.are.same({}, new_since(before))
    end)

    it("isolate and its whole process group killed with SIGKILL: the next isolate run removes the cgroup",
      function()
        local before = sandbox_cgroups()
        local isolate = q(require("support.cli").ISOLATE)
        local pid = support.start("HOME=" .. q(home) .. " exec setsid " .. isolate
          .. " --network allow --pids 16 --workdir " .. q(work)
          .. " -- sleep 60")
        finally(function() helpers.run("kill -9 -" .. pid .. " 2>/dev/null") end)
        local made
        assert.is_true(eventually(function() made = new_since(before); return #made == 1 end))
        assert.is_true(eventually(function() return procs_in(made[1]) >= 4 end))
        helpers.run("kill -9 -" .. pid) -- the whole group: isolate, the line, the sandbox
        assert.is_true(eventually(function() return procs_in(made[1]) == 0 end))
        -- left behind, unless another isolate run on the machine (a
        -- concurrent spec run) has already removed it, as the next one must
        local left = helpers.read(made[1] .. "/pids.max") ~= nil
        if not left then print("\n  the killed run's cgroup was removed by another run before this one") end
        local code, _, err = helpers.run("HOME=" .. q(home) .. " " .. isolate .. " --network allow --pids 16"
          .. " --workdir " .. q(work) .. " -- true")
        assert.are.equal(0, code, err)
        assert.truthy(err:find("isolate: limits pids enforced by cgroup", 1, true), err)
        assert.are.same({}, new_since(before))
      end)
  end)

  describe("every mechanism", function()
    it("tmpfs: writing past it gives ENOSPC in /tmp and in $HOME", function()
      local code, out, err = run({ tmpfs = 1024 * 1024 }, nil,
        "head -c 2000000 /dev/zero > /tmp/x; echo tmp=$?; head -c 2000000 /dev/zero > $HOME/x; echo home=$?; "
          .. "rm /tmp/x; head -c 500000 /dev/zero > /tmp/y && echo small=ok")
      assert.are.equal(0, code, err)
      assert.are.equal(2, select(2, err:gsub("No space left on device", "")), err)
      assert.are.equal("tmp=1\nhome=1\nsmall=ok\n", out)
    end)

    it("attack: filling RAM through bwrap's own /dev tmpfs instead: /dev is read-only, /dev/shm sized", function()
      local code, out, err = run({ tmpfs = 1024 * 1024 }, nil,
        "head -c 2000000 /dev/zero > /dev/x; echo dev=$?; head -c 2000000 /dev/zero > /dev/shm/x; echo shm=$?; "
          .. "rm /dev/shm/x; echo ok > /dev/null && echo null=ok; "
          .. [[python3 -c 'import multiprocessing as m; m.Lock(); print("semaphore=ok")']])
      assert.are.equal(0, code, err)
      assert.truthy(err:find("Read-only file system", 1, true), err)
      assert.truthy(err:find("No space left on device", 1, true), err)
      assert.are.equal("dev=1\nshm=1\nnull=ok\nsemaphore=ok\n", out)
    end)

    it("without tmpfs, /dev takes 2 MB (the attack the test above stops works there)", function()
      local code, out = run({ nofile = 1024 }, nil, "head -c 2000000 /dev/zero > /dev/x && echo wrote")
      assert.are.equal(0, code)
      assert.are.equal("wrote\n", out)
    end)

    it("attack: raising the descriptor limit back from inside is refused", function()
      local code, out = run({ nofile = 20 }, nil, "ulimit -n 19 && echo lower=ok; ulimit -Hn 4096 || echo refused")
      assert.are.equal(0, code)
      assert.are.equal("lower=ok\nrefused\n", out)
    end)

    it("without tmpfs the same write fits (the test can fail)", function()
      local code, out = run({ nofile = 1024 }, nil, "head -c 2000000 /dev/zero > /tmp/x && echo fits")
      assert.are.equal(0, code)
      assert.are.equal("fits\n", out)
    end)

    it("nofile caps descriptors", function()
      local code, out, err = run({ nofile = 20 }, nil, [[python3 -c '
import os
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(max(fds) + 1, e.errno)
']])
      assert.are.equal(0, code, err)
      assert.are.equal("20 24\n", out) -- descriptors 0..19, then EMFILE
    end)

    it("time ends sleep 100 at the limit with 124", function()
      local code, _, err, secs = run({ time = 2 }, nil, "sleep 100")
      assert.are.equal(124, code, err)
      assert.is_true(secs >= 1 and secs <= 4, "took " .. secs .. " s")
    end)

    it("time with a cgroup: 124, and the cgroup shell still removes its cgroup", function()
      if not checks.cgroup.ok then pending(checks.cgroup.detail) return end
      local before = sandbox_cgroups()
      local code, _, err, secs = run({ time = 2, pids = 16 }, "cgroup", "sleep 100")
      assert.are.equal(124, code, err)
      assert.is_true(secs <= 4, "took " .. secs .. " s")
      -- the kernel frees a cgroup once its last process is reaped: on a
      -- loaded machine that may trail the status by a moment (bounded)
      helpers.wait_for(function() return #new_since(before) == 0 end, 5)
      assert.are.same({}, new_since(before))
    end)

    it("time: the command gets SIGTERM at the limit and may clean up; the status is still 124", function()
      local code, out, err, secs = run({ time = 1 }, nil, "trap 'echo cleaned > done.txt; exit 9' TERM; "
        .. "sleep 100 & wait")
      assert.are.equal(124, code, err)
      assert.are.equal("", out)
      assert.are.equal("cleaned\n", helpers.read(work .. "/done.txt"))
      assert.truthy(err:find("isolation: the time limit (1 s) is reached", 1, true), err)
      assert.is_true(secs <= 3, "took " .. secs .. " s")
    end)

    it("time: a command that ignores SIGTERM is killed after the 5 s grace period", function()
      local code, _, err, secs = run({ time = 1 }, nil, "trap '' TERM; sleep 100")
      assert.are.equal(124, code, err)
      assert.is_true(secs >= 5 and secs <= 8, "took " .. secs .. " s")
    end)

    it("time fails closed (125, nothing runs) where the watchdog could not find the sandbox", function()
      local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
        command = "echo RAN", limits = { time = 5 } }))
      -- a /proc without the children files: an empty tmpfs over it
      local code, out, err = helpers.run("unshare -m sh -c " .. q("mount -t tmpfs none /proc && HOME=" .. q(home)
        .. " exec /bin/sh -c " .. q(line)))
      assert.are.equal(125, code, err)
      assert.are.equal("", out)
      assert.truthy(err:find("isolation: limits.time needs /proc/PID/task/TID/children", 1, true), err)
    end)

    it("time: a command that ends first keeps its own status", function()
      local code = run({ time = 30 }, nil, "exit 7")
      assert.are.equal(7, code)
    end)
  end)

  describe("limits_via rlimit", function()
    it("memory as RLIMIT_AS: a process cannot map more than the limit (per process, not a total)", function()
      local code, out, err = run({ memory = 128 * 1024 * 1024 }, "rlimit",
        [[python3 -c 'x = b"x" * (200 * 1024 * 1024)'; echo big=$?; ]]
          .. [[python3 -c 'x = b"x" * (20 * 1024 * 1024); print("small=ok")']])
      assert.are.equal(0, code, err)
      assert.truthy(err:find("MemoryError", 1, true), err)
      assert.are.equal("big=1\nsmall=ok\n", out)
    end)

    it("RLIMIT_NPROC (measured): no effect at all when root launches", function()
      if helpers.run("[ $(id -u) = 0 ]") ~= 0 then pending("not root") return end
      local code, out = run({ pids = 10 }, "rlimit", FORK_BOMB)
      assert.are.equal(0, code)
      assert.truthy(out:find("forked 200 refused 0", 1, true), out)
    end)

    it("RLIMIT_NPROC (measured): for another user it counts that user's processes outside the sandbox too",
      function()
        if helpers.run("[ $(id -u) = 0 ] && command -v setpriv") ~= 0 then
          pending("needs root and setpriv") return
        end
        local B = "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --die-with-parent --cap-drop ALL -- "
        -- a uid of its own, so that no other program's processes count
        local as_user = "cd / && setpriv --reuid=61234 --regid=61234 --clear-groups -- sh -c "
        local function bomb(extra)
          local _, out = helpers.run(as_user .. q(extra .. "exec prlimit --nproc=30 " .. B .. FORK_BOMB))
          return tonumber(out:match("forked (%d+)")) or -1
        end
        local alone = bomb("")
        -- ten sleeping processes of the same user, outside any sandbox
        local crowded = bomb("for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; ")
        -- 30 less bwrap's two processes and python itself
        assert.are.equal(27, alone)
        -- each of the ten takes a process from the sandbox's budget
        assert.is_true(crowded <= alone - 10, "alone " .. alone .. ", crowded " .. crowded)
        io.stderr:write(string.format("\nmeasured: RLIMIT_NPROC=30 as uid 61234: %d forks alone, %d with 10 other "
          .. "processes of that uid outside the sandbox\n", alone, crowded))
      end)
  end)

  describe("limits_via systemd", function()
    if not checks.systemd.ok then
      io.stderr:write("SKIP (limits_via systemd, real): " .. checks.systemd.detail .. "\n")
      it("is skipped: no systemd user scope here", function() pending(checks.systemd.detail) end)
      return
    end
    it("a fork bomb stops at TasksMax", function()
      local code, out = run({ pids = 32 }, "systemd", FORK_BOMB)
      assert.are.equal(0, code)
      assert.is_true(tonumber(out:match("forked (%d+)")) < 32, out)
    end)
  end)
end)

describe("limits in the session manager", function()
  local session = require("isolation.session")
  local T, work, home

  setup(function()
    T = helpers.tmpdir()
    work, home = T .. "/work", T .. "/home"
    assert(os.execute("mkdir -p " .. q(work) .. " " .. q(home)))
  end)
  teardown(function() helpers.rmtree(T) end)

  -- A launcher that runs the line to its end and keeps what it said.
  local function manager(results)
    return assert(session.manager({
      runtime_dir = T .. "/rt",
      launcher = function(cmdline, s)
        local code, out, err = support.run_line(cmdline, home)
        results[s.id] = { code = code, out = out, err = err }
        return { done = true }
      end,
      alive = function() return false end,
    }))
  end

  it("picks the strongest mechanism here, says which, and the limit holds", function()
    if helpers.skip_without_bwrap() then pending("no bwrap") return end
    local probe = limits.probe()
    local want = limits.choose({ pids = 32 }, { checks = probe })
    if not want then pending("no mechanism for pids here") return end
    local results = {}
    local mgr = manager(results)
    local s = assert(mgr:launch({ id = "bomb", isolation = { mode = "bwrap", network = "allow" }, workdir = work,
      command = FORK_BOMB, limits = { pids = 32 } }))
    assert.are.equal(want, s.limits_via)
    assert.truthy(s.limits_how:find("limits pids enforced by " .. want, 1, true), s.limits_how)
    local r = results.bomb
    assert.are.equal(0, r.code, r.err)
    assert.is_true(tonumber(r.out:match("forked (%d+)")) < 32, r.out)
    mgr:close()
  end)

  it("a limit no mechanism here can enforce is an error at launch, and nothing is started", function()
    local results = {}
    local mgr = manager(results)
    local no = { ok = false, detail = "not here" }
    mgr._limits_checks = { systemd = no, cgroup = no, rlimit = no }
    local s, err = mgr:launch({ id = "x", isolation = { mode = "bwrap", network = "deny" }, workdir = work,
      command = "true", limits = { memory = 1048576 } })
    assert.is_nil(s)
    assert.truthy(err:find("limits.memory cannot be enforced on this machine; tried systemd (not available: not "
      .. "here); cgroup (not available: not here); rlimit (not available: not here)", 1, true), err)
    assert.is_nil(results.x)
    assert.is_nil(mgr:get("x"))
    -- no proxy socket was left
    local _, list = helpers.run("ls -A " .. q(T .. "/rt"))
    assert.is_nil(list:find("%.sock"))
    mgr:close()
  end)

  it("a launch without memory, pids or cpu probes nothing", function()
    local results = {}
    local mgr = manager(results)
    assert(mgr:launch({ id = "n", isolation = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "true", limits = { nofile = 64 } }))
    assert(mgr:launch({ id = "m", isolation = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "true" }))
    assert.is_nil(mgr._limits_checks)
    mgr:close()
  end)

  it("limits_via given by the caller is kept (an ssh target cannot be probed from here)", function()
    local results = {}
    local mgr = manager(results)
    local s = assert(mgr:launch({ id = "r", isolation = { mode = "bwrap", network = "allow" }, workdir = work,
      command = "true", limits = { pids = 64 }, limits_via = "rlimit", target = "ssh" }))
    assert.are.equal("rlimit", s.limits_via)
    assert.are.equal(1, helpers.line_body(s.cmdline):find("'prlimit' '--nproc=64:64' '--' 'env' '-i'", 1, true),
      s.cmdline)
    mgr:close()
  end)
end)

describe("isolate --memory --pids --tmpfs-size --cpus --time", function()
  local isolate = q(require("support.cli").ISOLATE)
  local T

  setup(function()
    T = helpers.tmpdir()
    assert(os.execute("mkdir -p " .. q(T .. "/home") .. " " .. q(T .. "/work")))
  end)
  teardown(function() helpers.rmtree(T) end)

  local function isolate_run(args)
    return helpers.run("cd " .. q(T .. "/work") .. " && HOME=" .. q(T .. "/home") .. " " .. isolate .. " " .. args)
  end

  it("--dry-run shows what enforces each limit, and the mechanism chosen", function()
    local code, out, err = isolate_run("--dry-run --network allow --memory 64M --tmpfs-size 1M --time 9 -- true")
    if limits.choose({ memory = 1 }) == nil then
      assert.are.equal(125, code)
      return
    end
    assert.are.equal(0, code, err)
    assert.truthy(out:find("memory 67108864 bytes: ", 1, true), out)
    assert.truthy(out:find("tmpfs 1048576 bytes: bwrap --size", 1, true), out)
    assert.truthy(out:find("time 9 seconds: a watchdog", 1, true), out)
    assert.truthy(err:find("isolate: limits memory enforced by ", 1, true), err)
  end)

  it("--time ends the command with 124; --tmpfs-size gives ENOSPC", function()
    if helpers.skip_without_bwrap() then pending("no bwrap") return end
    local code = isolate_run("--network allow --time 1 -- sleep 100")
    assert.are.equal(124, code)
    local c3, _, err3 = isolate_run("--network allow --tmpfs-size 64K -- sh -c 'head -c 100000 /dev/zero > /tmp/x'")
    assert.are.equal(1, c3)
    assert.truthy(err3:find("No space left on device", 1, true), err3)
  end)

  it("SIGTERM to isolate reaches the command below the cgroup shell and timeout; the cgroup goes", function()
    if helpers.skip_without_bwrap() or not limits.probe().cgroup.ok then pending("no bwrap or cgroup") return end
    local cli = require("support.cli")
    local before = sandbox_cgroups()
    local p = cli.spawn({ cli.ISOLATE, "--network", "allow", "--pids", "32", "--time", "30", "--", "bash", "-c",
      "trap 'echo got-term; exit 3' TERM; echo ready; sleep 100 & wait" },
      { env = { "HOME=" .. T .. "/home" }, cwd = T .. "/work" })
    assert.truthy(cli.wait_for(function() return p.out:find("ready") end, 20), p.err)
    p.kill("sigterm")
    p.wait(20)
    assert.are.equal(3, p.status, p.err)
    assert.truthy(p.out:find("got-term", 1, true), p.out)
    assert.are.same({}, new_since(before))
  end)

  it("Ctrl-C at a terminal, with --time and --pids: the command handles it once, bwrap survives", function()
    if helpers.skip_without_bwrap() or not limits.probe().cgroup.ok then pending("no bwrap or cgroup") return end
    if helpers.run("command -v script") ~= 0 then pending("script(1) is not installed") return end
    local cli = require("support.cli")
    local dir = T .. "/work"
    helpers.write(dir .. "/t.sh", "trap 'echo int >> ints' INT\necho ready > ready\n"
      .. "while [ ! -e done ]; do sleep 0.05 & wait $!; done\necho finished >> ints\nexit 0\n")
    -- as in isolate_spec: script(1) gives a terminal, ^C becomes SIGINT
    local line = "exec " .. isolate .. " --network allow --time 60 --pids 64 -- bash t.sh"
    local p = cli.spawn({ "script", "-qec", line, "/dev/null" },
      { env = { "HOME=" .. T .. "/home" }, stdin = true, cwd = dir })
    assert.truthy(cli.wait_for(function() return helpers.read(dir .. "/ready") end, 30), p.out .. p.err)
    p.stdin:write("\3")
    assert.truthy(cli.wait_for(function() return helpers.read(dir .. "/ints") end, 30), p.out .. p.err)
    cli.wait_for(function() return false end, 0.5)
    helpers.write(dir .. "/done", "")
    local status = p.wait(30)
    -- timeout(1) in front of bwrap failed this: it caught the ^C and bwrap
    -- died of it (status 130)
    assert.are.equal(0, status, p.out .. p.err)
    assert.are.equal("int\nfinished\n", helpers.read(dir .. "/ints"))
  end)

  local usage = {
    { "--memory 1x", "--memory must be a positive size" },
    { "--memory 0", "--memory must be a positive size" },
    { "--tmpfs-size -5M", "--tmpfs-size must be a positive size" },
    { "--pids 2.5", "--pids must be a positive integer (got \"2.5\")" },
    { "--pids 0", "--pids must be a positive integer" },
    { "--cpus nan", "--cpus must be a positive number" },
    { "--time inf", "--time must be a positive integer" },
    { "--mode none --time 3", "need --mode bwrap or docker" },
  }
  for _, c in ipairs(usage) do
    it("usage error: " .. c[1], function()
      local code, _, err = isolate_run(c[1] .. " --network allow -- true")
      if c[1]:find("mode none", 1, true) then
        code, _, err = isolate_run(c[1] .. " -- true")
      end
      assert.are.equal(2, code, err)
      assert.truthy(err:find(c[2], 1, true), err)
    end)
  end
end)
