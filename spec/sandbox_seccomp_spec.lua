-- isolation.sandbox_seccomp_filter(): its decisions for every ABI of this
-- machine's family through a BPF interpreter, with the system call numbers
-- read from this machine's kernel headers (a second source beside the
-- filter's own table), then the real kernel: a probe program compiled here
-- makes each refused call on the host with every capability (root) under
-- the filter and without it, and inside real bwrap sandboxes (isolate, a
-- wrap() line with the filter file; root and nobody) beside the TTY filter
-- as control; and the workloads an agent runs still work inside (git,
-- python3, node, npm, make, cc, ip, curl through the proxy, a spec file of
-- this project).
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")
local bpf = require("support.bpf")
local tty = require("support.tty")

local q = helpers.shquote
local AUDIT, X32 = bpf.AUDIT, bpf.X32
local ALLOW = bpf.RET_ALLOW
local EPERM, ENOSYS = 1, 38
local RET_EPERM, RET_ENOSYS = bpf.ret_errno(EPERM), bpf.ret_errno(ENOSYS)

local TIOCSTI, TIOCLINUX, TIOCGWINSZ = 0x5412, 0x541C, 0x5413
local CLONE_NEW = { NS = 0x20000, CGROUP = 0x02000000, UTS = 0x04000000, IPC = 0x08000000,
  USER = 0x10000000, PID = 0x20000000, NET = 0x40000000 }
local CLONE_NEWTIME, CLONE_FILES, SIGCHLD = 0x80, 0x400, 17
local PTHREAD_FLAGS = 0x3d0f00 -- glibc's pthread_create: VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|...TID
local AF = { UNIX = 1, INET = 2, INET6 = 10, NETLINK = 16, PACKET = 17, VSOCK = 40 }
local NETLINK_ROUTE, NETLINK_AUDIT = 0, 9
local HIGH = 1 << 32 -- a bit the kernel drops: these arguments are int

-- The refused calls, as the contract names them (and the new mount API with
-- mount); the action when refused unconditionally.
local ALWAYS = {
  "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf",
  "perf_event_open", "userfaultfd", "kexec_load", "kexec_file_load", "init_module", "finit_module",
  "delete_module", "mount", "umount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
  "fsmount", "fspick", "mount_setattr", "_sysctl", "setns",
}
-- Calls every workload makes: allowed whatever their arguments.
local COMMON = { "read", "write", "openat", "close", "execve", "mmap", "futex", "getpid", "wait4", "pipe2",
  "connect", "sendto", "recvfrom", "epoll_wait", "exit_group", "rt_sigaction", "prctl", "seccomp" }

-- Kernel header of each ABI on this machine, and how a number is written there.
local HEADERS = {
  x86_64 = { "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h" },
  x32 = { "/usr/include/x86_64-linux-gnu/asm/unistd_x32.h", "/usr/include/asm/unistd_x32.h" },
  i386 = { "/usr/include/x86_64-linux-gnu/asm/unistd_32.h", "/usr/include/i386-linux-gnu/asm/unistd_32.h",
    "/usr/include/asm/unistd_32.h" },
  aarch64 = { "/usr/include/asm-generic/unistd.h" },
  arm = { "/usr/include/arm-linux-gnueabihf/asm/unistd-eabi.h", "/usr/include/arm-linux-gnueabi/asm/unistd-eabi.h",
    "/usr/include/asm/unistd-eabi.h" },
}

-- name -> number, from the first header of the ABI that exists; nil, why.
local function syscall_numbers(abi)
  for _, path in ipairs(HEADERS[abi]) do
    local text = helpers.read(path)
    if text then
      local nrs = {}
      for name, rest in text:gmatch("#define __NR_([%w_]+)%s+([^\n]+)") do
        local n = tonumber(rest:match("^(%d+)%s*$") or rest:match("%+%s*(%d+)%)"))
        if n then nrs[name] = n end
      end
      return nrs
    end
  end
  return nil, "no kernel header for " .. abi .. " here (" .. table.concat(HEADERS[abi], ", ") .. ")"
end

-- The ABIs of the build's family: { name, arch, number transform }.
local function family_abis()
  local m = tty.machine()
  if m == "x86_64" or m:match("^i%d86$") then
    return {
      { "x86_64", AUDIT.X86_64, function(n) return n end },
      { "x32", AUDIT.X86_64, function(n) return X32 | n end },
      { "i386", AUDIT.I386, function(n) return n end },
    }, { "aarch64", AUDIT.AARCH64 }
  end
  return {
    { "aarch64", AUDIT.AARCH64, function(n) return n end },
    { "arm", AUDIT.ARM, function(n) return n end },
    { "arm", AUDIT.ARMEB, function(n) return n end },
  }, { "x86_64", AUDIT.X86_64 }
end

describe("sandbox_seccomp_filter", function()
  local prog = isolation.sandbox_seccomp_filter()

  it("is whole struct sock_filter records, the same bytes on every call, longer than the TTY filter", function()
    assert.are.equal("string", type(prog))
    assert.are.equal(0, #prog % 8)
    assert.is_true(#prog // 8 <= 4096)
    for _ = 1, 3 do assert.are.equal(prog, isolation.sandbox_seccomp_filter()) end
    assert.are.equal(prog, isolation.sandbox_seccomp_filter("ignored", {}))
    assert.is_true(#prog > #isolation.tty_seccomp_filter())
  end)

  local abis, foreign = family_abis()
  for _, abi in ipairs(abis) do
    local name, arch, nr_of = abi[1], abi[2], abi[3]
    it(("decides every refused call of %s (arch 0x%08x) with this machine's numbers"):format(name, arch), function()
      local nrs, why = syscall_numbers(name)
      if not nrs then
        io.stderr:write("SKIP (" .. name .. "): " .. why .. "\n")
        return
      end
      local function decide(call, args)
        assert(nrs[call], call .. " has no number in " .. name)
        return bpf.run(prog, bpf.seccomp_data(arch, nr_of(nrs[call]), args))
      end
      local checked = 0
      for _, call in ipairs(ALWAYS) do
        if nrs[call] then
          checked = checked + 1
          assert.are.equal(RET_EPERM, decide(call, {}), name .. " " .. call)
          assert.are.equal(RET_EPERM, decide(call, { 1, 2, 3, 4, 5, 6 }), name .. " " .. call .. " with arguments")
        end
      end
      assert.is_true(checked >= 20, name .. ": only " .. checked .. " of the refused calls have numbers")
      for _, call in ipairs(COMMON) do
        if nrs[call] then assert.are.equal(ALLOW, decide(call, { 1, 2, 3 }), name .. " " .. call) end
      end
      -- the TTY filter's ioctls, low 32 bits only
      local ioctl = function(req) return decide("ioctl", { 0, req }) end
      assert.are.equal(RET_EPERM, ioctl(TIOCSTI))
      assert.are.equal(RET_EPERM, ioctl(TIOCLINUX))
      assert.are.equal(RET_EPERM, ioctl(HIGH | TIOCSTI))
      assert.are.equal(ALLOW, ioctl(TIOCGWINSZ))
      -- clone3: ENOSYS, so that the C library falls back to clone
      assert.are.equal(RET_ENOSYS, decide("clone3", {}))
      -- clone and unshare with any namespace flag; without one, allowed
      for flag, bit in pairs(CLONE_NEW) do
        assert.are.equal(RET_EPERM, decide("clone", { bit | SIGCHLD }), "clone NEW" .. flag)
        assert.are.equal(RET_EPERM, decide("unshare", { bit }), "unshare NEW" .. flag)
        assert.are.equal(RET_EPERM, decide("unshare", { HIGH | bit }), "unshare NEW" .. flag .. ", high bits")
      end
      assert.are.equal(RET_EPERM, decide("unshare", { CLONE_NEWTIME }), "unshare NEWTIME")
      assert.are.equal(ALLOW, decide("clone", { SIGCHLD }), "fork")
      assert.are.equal(ALLOW, decide("clone", { PTHREAD_FLAGS }), "a thread")
      assert.are.equal(ALLOW, decide("clone", { CLONE_NEWTIME | SIGCHLD }), "clone's exit-signal byte is no flag")
      assert.are.equal(ALLOW, decide("unshare", { CLONE_FILES }), "unshare(CLONE_FILES)")
      assert.are.equal(ALLOW, decide("unshare", { HIGH }), "unshare of a bit the kernel refuses itself")
      -- socket: vsock, packet, netlink other than NETLINK_ROUTE
      local socket = function(family, proto) return decide("socket", { family, 1, proto or 0 }) end
      assert.are.equal(RET_EPERM, socket(AF.VSOCK))
      assert.are.equal(RET_EPERM, socket(AF.PACKET))
      assert.are.equal(RET_EPERM, socket(HIGH | AF.VSOCK), "family with high bits")
      assert.are.equal(RET_EPERM, socket(AF.NETLINK, NETLINK_AUDIT))
      assert.are.equal(RET_EPERM, socket(AF.NETLINK, 15))
      assert.are.equal(RET_EPERM, socket(AF.NETLINK, HIGH | NETLINK_AUDIT))
      assert.are.equal(ALLOW, socket(AF.NETLINK, NETLINK_ROUTE))
      assert.are.equal(ALLOW, socket(AF.NETLINK, HIGH | NETLINK_ROUTE), "the kernel reads protocol 0")
      for _, family in ipairs({ AF.UNIX, AF.INET, AF.INET6 }) do
        assert.are.equal(ALLOW, socket(family), "family " .. family)
      end
      if nrs.socketcall then
        assert.are.equal(RET_EPERM, decide("socketcall", { 1, 0x1000 }), "socketcall(SYS_SOCKET)")
        assert.are.equal(ALLOW, decide("socketcall", { 3, 0x1000 }), "socketcall(SYS_CONNECT)")
      end
      -- set-user-ID and set-group-ID files (issue 27.4): the mode wherever
      -- one is given; open and openat only when they create
      local MODE_AT = { chmod = 2, fchmod = 2, fchmodat = 3, fchmodat2 = 3, creat = 2, mknod = 2, mknodat = 3,
        mkdir = 2, mkdirat = 3 }
      local setid_checked = 0
      for call, at in pairs(MODE_AT) do
        if nrs[call] then
          setid_checked = setid_checked + 1
          local function with_mode(mode)
            local args = { 3, 0x1000, 0x1000, 0 }
            args[at] = mode
            return decide(call, args)
          end
          for _, mode in ipairs({ 4755, 2775, 6755, 4000, 2000 }) do
            local m = tonumber(tostring(mode), 8)
            assert.are.equal(RET_EPERM, with_mode(m), name .. " " .. call .. " " .. mode)
            assert.are.equal(RET_EPERM, with_mode(HIGH | m), name .. " " .. call .. " " .. mode .. ", high bits")
            assert.are.equal(RET_EPERM, with_mode(0x8000 | m), name .. " " .. call .. " S_IFREG|" .. mode)
          end
          for _, mode in ipairs({ 755, 644, 1777, 700, 0 }) do
            assert.are.equal(ALLOW, with_mode(tonumber(tostring(mode), 8)), name .. " " .. call .. " " .. mode)
          end
        end
      end
      assert.is_true(setid_checked >= 4, name .. ": " .. setid_checked .. " mode-setting calls checked")
      local O_WRONLY, O_CREAT, O_TMPFILE = 1, 64, tonumber("20200000", 8)
      for call, at in pairs({ open = 2, openat = 3 }) do
        if nrs[call] then
          local function open(flags, mode)
            local args = { 3, 0x1000, 0x1000, 0 }
            args[at], args[at + 1] = flags, mode
            return decide(call, args)
          end
          assert.are.equal(RET_EPERM, open(O_CREAT | O_WRONLY, tonumber("4755", 8)), name .. " " .. call)
          assert.are.equal(RET_EPERM, open(O_CREAT, tonumber("2755", 8)), name .. " " .. call .. " setgid")
          assert.are.equal(RET_EPERM, open(O_TMPFILE | O_WRONLY, tonumber("4700", 8)), name .. " tmpfile")
          assert.are.equal(ALLOW, open(O_CREAT | O_WRONLY, tonumber("644", 8)), name .. " " .. call .. " 0644")
          assert.are.equal(ALLOW, open(O_WRONLY, tonumber("4755", 8)), name .. " " .. call .. " no O_CREAT")
        end
      end
      if nrs.openat2 then assert.are.equal(RET_ENOSYS, decide("openat2", {}), name .. " openat2") end
      -- and the TTY filter is as it was: keyrings open there
      assert.are.equal(ALLOW, bpf.run(isolation.tty_seccomp_filter(),
        bpf.seccomp_data(arch, nr_of(nrs.keyctl), {})))
    end)
  end

  if abis[1][1] == "x86_64" then
    it("x86_64: the x32 bit does not hide a 64-bit number, nor the x32 numbers without it", function()
      local nrs = assert(syscall_numbers("x86_64"))
      local x32 = assert(syscall_numbers("x32"))
      for _, call in ipairs({ "keyctl", "bpf", "mount", "kexec_load" }) do
        assert.are.equal(RET_EPERM, bpf.run(prog, bpf.seccomp_data(AUDIT.X86_64, X32 | nrs[call], {})), call)
        assert.are.equal(RET_EPERM, bpf.run(prog, bpf.seccomp_data(AUDIT.X86_64, x32[call], {})), call)
      end
    end)
  end

  it("allows an ABI this kernel cannot run (" .. foreign[1] .. ")", function()
    assert.are.equal(ALLOW, bpf.run(prog, bpf.seccomp_data(foreign[2], 219, {})))
  end)
end)

-- The real kernel --------------------------------------------------------

-- probe name -> the filter's answer (errno) where it refuses.
local REFUSED = {
  keyctl = EPERM, add_key = EPERM, request_key = EPERM, io_uring_setup = EPERM, io_uring_enter = EPERM,
  io_uring_register = EPERM, bpf = EPERM, perf_event_open = EPERM, userfaultfd = EPERM, kexec_load = EPERM,
  kexec_file_load = EPERM, init_module = EPERM, finit_module = EPERM, delete_module = EPERM, mount = EPERM,
  umount2 = EPERM, pivot_root = EPERM, open_tree = EPERM, move_mount = EPERM, fsopen = EPERM, fsconfig = EPERM,
  fsmount = EPERM, fspick = EPERM, mount_setattr = EPERM, setns = EPERM, ["unshare-user"] = EPERM,
  ["unshare-user-high"] = EPERM, ["clone-user"] = EPERM, clone3 = ENOSYS, ["socket-vsock"] = EPERM,
  ["socket-packet"] = EPERM, ["socket-netlink-audit"] = EPERM, ["socket-netlink-uevent"] = EPERM,
  ["ioctl-tiocsti"] = EPERM,
}
local REFUSED_32 = { keyctl32 = EPERM, ["ioctl-tiocsti32"] = EPERM, ["socket-vsock32"] = EPERM,
  ["socketcall-inet32"] = EPERM, ["unshare-user32"] = EPERM, mount32 = EPERM }
-- The x32 entry (the x32 bit on a 64-bit call): refused on every x86_64
-- kernel, with or without the x32 ABI (without it the kernel says ENOSYS).
local REFUSED_X32 = { ["keyctl-x32"] = EPERM, ["ioctl-tiocsti-x32"] = EPERM }
-- Allowed: they work everywhere.
local ALLOWED = { "unshare-files", "clone-plain", "socket-netlink-route", "socket-inet", "socket-unix" }

describe("sandbox_seccomp_filter on the real kernel", function()
  local T, work, home, probe, filter, tty_filter
  local refused, names = {}, {}
  local have_cc = helpers.run("command -v cc") == 0
  local x86_64 = tty.machine() == "x86_64"
  -- why the i386 entry is not probed here, or nil where it is
  local no_i386 = not x86_64 and "not an x86_64 machine" or nil

  setup(function()
    T = helpers.tmpdir()
    assert(os.execute("chmod 755 " .. q(T)))
    work, home = T .. "/work", T .. "/home"
    assert(os.execute("mkdir -p " .. q(work) .. " " .. q(home) .. " && chown 65534:65534 " .. q(work) .. " "
      .. q(home)))
    probe, filter, tty_filter = work .. "/sysprobe", T .. "/sandbox.bpf", T .. "/tty.bpf"
    helpers.write(filter, isolation.sandbox_seccomp_filter())
    helpers.write(tty_filter, isolation.tty_seccomp_filter())
    if have_cc then
      local code, _, err = helpers.run("cc -std=c11 -D_GNU_SOURCE -O1 -o " .. q(probe) .. " "
        .. q(cli.ROOT .. "/spec/support/sysprobe.c"))
      assert.are.equal(0, code, err)
      -- The i386 entry (int $0x80) from a 64-bit program: some x86_64
      -- machines do not offer it (the instruction faults even outside any
      -- sandbox), so ask before counting on it.
      if x86_64 then
        local c, out = helpers.run(q(probe) .. " getpid32")
        if c ~= 0 or out ~= "getpid32 ok\n" then
          no_i386 = "this CPU does not offer the i386 entry (int $0x80) to a 64-bit program: "
            .. (c == 0 and out:gsub("\n$", "") or "probe exit " .. tostring(c))
        end
      end
    end
    for k, v in pairs(REFUSED) do refused[k] = v end
    if x86_64 then for k, v in pairs(REFUSED_X32) do refused[k] = v end end
    if not no_i386 then for k, v in pairs(REFUSED_32) do refused[k] = v end end
    for k in pairs(refused) do names[#names + 1] = k end
    table.sort(names)
    for _, n in ipairs(ALLOWED) do names[#names + 1] = n end
  end)
  teardown(function() helpers.rmtree(T) end)

  -- The filter's i386 rules are proved on every machine by the BPF
  -- interpreter cases above; here only where the kernel entry exists.
  it("probes the i386 entry (int $0x80) where this machine offers it", function()
    if not have_cc then return pending("no C compiler (cc) for the probe") end
    if no_i386 then return pending(no_i386 .. "; the 64-bit and x32 calls are still probed") end
    for name in pairs(REFUSED_32) do assert.is_not_nil(refused[name], name) end
  end)

  -- "name result" lines -> { name = "ok" | errno number }
  local function results(out)
    local t = {}
    for name, res in out:gmatch("([%w_-]+) ([^\n]+)") do
      t[name] = res == "ok" and "ok" or tonumber(res:match("^errno=(%d+)$")) or res
    end
    return t
  end

  local function skip_reason()
    if not have_cc then return "no C compiler (cc) for the probe" end
    return nil
  end

  it("on the host with every capability: each refused call gets the kernel's own answer without the filter, "
    .. "EPERM (clone3: ENOSYS) with it", function()
    local why = skip_reason()
    if why then return pending(why) end
    if helpers.run("test \"$(id -u)\" = 0") ~= 0 then
      return pending("needs root: the control must hold capabilities")
    end
    local code, out, err = helpers.run(q(probe) .. " " .. table.concat(names, " "))
    assert.are.equal(0, code, err)
    local control = results(out)
    code, out, err = helpers.run(q(probe) .. " seccomp-run " .. q(filter) .. " " .. q(probe) .. " "
      .. table.concat(names, " "))
    assert.are.equal(0, code, err)
    local filtered = results(out)
    for name, want in pairs(refused) do
      assert.are.equal(want, filtered[name], name)
      assert.are_not.equal(want, control[name], name .. ": the kernel itself answers " .. tostring(control[name]))
    end
    for _, name in ipairs(ALLOWED) do
      assert.are.equal("ok", control[name], name)
      assert.are.equal("ok", filtered[name], name)
    end
  end)

  for _, who in ipairs({ "root", "an ordinary user" }) do
    local as_user = who ~= "root"
    local function sandboxed(cmdline)
      local prefix = as_user and "setpriv --reuid=65534 --regid=65534 --clear-groups " or ""
      return helpers.run("cd " .. q(work) .. " && " .. prefix .. "env HOME=" .. q(home) .. " " .. cmdline)
    end
    local function wrap_line(file, command)
      return assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = work,
        command = command, seccomp_file = file }))
    end

    it("in a real sandbox launched by " .. who .. " (isolate, a wrap() line): each refused call fails, "
      .. "with the TTY filter the distinguishable ones do not", function()
      local why = skip_reason() or (helpers.skip_without_bwrap() and "bwrap cannot run here")
      if why then return pending(why) end
      if as_user and helpers.run("command -v setpriv") ~= 0 then return pending("no setpriv") end
      local list = table.concat(names, " ")
      local code, out, err = sandboxed(q(cli.ISOLATE) .. " --network allow -- ./sysprobe " .. list)
      assert.are.equal(0, code, err)
      local via_isolate = results(out)
      code, out, err = sandboxed("sh -c " .. q(wrap_line(filter, "./sysprobe " .. list)))
      assert.are.equal(0, code, err)
      local via_line = results(out)
      code, out, err = sandboxed("sh -c " .. q(wrap_line(tty_filter, "./sysprobe " .. list)))
      assert.are.equal(0, code, err)
      local control = results(out)
      local told = 0
      for name, want in pairs(refused) do
        assert.are.equal(want, via_isolate[name], "isolate: " .. name)
        assert.are.equal(want, via_line[name], "wrap line: " .. name)
        if control[name] ~= want then told = told + 1 end
      end
      -- without capabilities the kernel itself says EPERM to a few
      -- (pivot_root, packet sockets, the new mount API): the host case
      -- above tells those apart
      assert.is_true(told >= 25, "only " .. told .. " told apart from the TTY filter")
      for _, name in ipairs(ALLOWED) do
        assert.are.equal("ok", via_isolate[name], name)
        assert.are.equal("ok", via_line[name], name)
      end
    end)
  end
end)

describe("what an agent runs still works under sandbox_seccomp_filter (isolate)", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local tmp, home
  -- HOME is a directory of its own, beside the workdir: a workdir at or
  -- above HOME is refused
  before_each(function() tmp, home = helpers.tmpdir(), helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp); helpers.rmtree(home) end)

  local function isolate(args, opts)
    return cli.isolate(args, opts or { env = { "TMPDIR=" .. tmp, "HOME=" .. home } })
  end

  it("git, python3 (threads, subprocess), make, cc, sh pipelines; ip addr (NETLINK_ROUTE); no nested namespace",
    function()
    local status, out, err = isolate({ "--network", "allow", "--workdir", tmp, "--", "bash", "-c", table.concat({
      "set -e",
      "git init -q repo && cd repo && echo x > f && git add f",
      "git -c user.email=a@example.com -c user.name=a commit -q -m first && git log --format=%s",
      "/usr/bin/python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=(\"thread\",)); "
        .. "t.start(); t.join(); print(subprocess.run([\"true\"]).returncode)'",
      "printf 'all:\\n\\t@echo made\\n' > Makefile && make -s",
      "echo 'int main(void){return 0;}' > a.c && cc a.c -o a && ./a && echo compiled",
      "ip -o addr show lo | grep -c ' lo '",
      "unshare -U true 2>/dev/null && echo NESTED-USERNS || echo no-nested-userns",
      "bwrap --ro-bind / / true 2>/dev/null && echo NESTED-BWRAP || echo no-nested-bwrap",
    }, "\n") }, { env = { "TMPDIR=" .. tmp, "HOME=" .. home }, timeout = 120 })
    assert.are.equal(0, status, err)
    assert.are.equal("first\nthread\n0\nmade\ncompiled\n2\nno-nested-userns\nno-nested-bwrap\n", out)
  end)

  it("node (a worker thread, a child process) and npm", function()
    if helpers.run("command -v node && command -v npm") ~= 0 then return pending("node or npm is not installed") end
    local status, out, err = isolate({ "--network", "allow", "--workdir", tmp, "--", "bash", "-c",
      "node -e 'const { Worker } = require(\"worker_threads\"); "
        .. "const w = new Worker(\"require(\\\"worker_threads\\\").parentPort.postMessage(7)\", { eval: true }); "
        .. "w.on(\"message\", (m) => { console.log(\"worker \" + m); "
        .. "console.log(require(\"child_process\").execSync(\"echo child\").toString().trim()); });' "
        .. "&& npm --version >/dev/null && echo npm" }, { env = { "TMPDIR=" .. tmp, "HOME=" .. home }, timeout = 120 })
    assert.are.equal(0, status, err)
    assert.are.equal("worker 7\nchild\nnpm\n", out)
  end)

  it("curl through the proxy under deny reaches an allowed upstream; others get 403", function()
    local up = cli.upstream()
    local status, out, err = isolate({ "--workdir", tmp, "--allow-host", "127.0.0.1:" .. up.port, "--", "sh", "-c",
      "curl -s --max-time 20 http://127.0.0.1:" .. up.port .. "/ok; "
        .. "curl -s --max-time 20 -o /dev/null -w '%{http_code}\\n' http://denied.example.com/" })
    up.stop()
    assert.are.equal(0, status, err)
    assert.are.equal("hello from upstream GET /ok HTTP/1.1\n403\n", out)
  end)

  it("a spec file of this project passes inside", function()
    -- the checkout read-only: a workdir holding the bridge program is refused (spec/hostpaths_spec.lua)
    local status, out, err = isolate({ "--network", "allow", "--workdir", tmp, "--ro-bind", cli.ROOT, "--", "sh",
      "-c", "cd " .. helpers.shquote(cli.ROOT) .. " && exec lua5.4 /usr/bin/busted -o TAP spec/hostpat_spec.lua" },
      { env = { "TMPDIR=" .. tmp, "HOME=" .. home,
      -- the plain build inside: a sanitizer run's runtime is not preloaded there
      "ISOLATION_CPATH=build/?.so", "ISOLATION_SANITIZER=" }, timeout = 120 })
    assert.are.equal(0, status, err .. out)
    assert.is_nil(out:find("not ok", 1, true), out)
    assert.matches("\n1%.%.%d+\n", out)
  end)
end)

-- Issue 27.4: a root launch planted a setuid-root shell in the workdir
-- (`cp /bin/bash helper && chmod 4755 helper`); bwrap's nosuid holds on the
-- sandbox's mounts only. The filter refuses every way to set the bits, as
-- root and as an ordinary user; the TTY filter is the control (the bits
-- are set inside, which the end check then clears: spec/setid_spec.lua).
describe("no set-user-ID or set-group-ID file from a real sandbox", function()
  if helpers.skip_without_bwrap() then
    it("is skipped: bwrap cannot run here", function() pending(select(2, helpers.bwrap_works())) end)
    return
  end
  local root_user = helpers.run("test \"$(id -u)\" = 0") == 0
  local ATTEMPTS = table.concat({
    "cp /bin/true helper",
    "chmod 4755 helper 2>/dev/null; echo chmod-4755 $? $(stat -c %a helper)",
    "chmod 755 helper; chmod g+s helper 2>/dev/null; echo chmod-g+s $? $(stat -c %a helper)",
    "install -m 4755 /bin/true installed 2>/dev/null; echo install $? $(stat -c %a installed 2>/dev/null)",
    "/usr/bin/python3 -c 'import os",
    "try:",
    "  os.close(os.open(\"opened\", os.O_CREAT | os.O_WRONLY, 0o4755))",
    "  print(\"os.open ok\", oct(os.stat(\"opened\").st_mode))",
    "except OSError as e: print(\"os.open\", e.errno)",
    "try:",
    "  os.mkdir(\"dir\", 0o2775); print(\"mkdir ok\", oct(os.stat(\"dir\").st_mode))",
    "except OSError as e: print(\"mkdir\", e.errno)'",
    "chmod 755 helper; echo chmod-755 $? $(stat -c %a helper)",
    "chmod 644 helper; echo chmod-644 $? $(stat -c %a helper)",
  }, "\n")

  local dir, home
  before_each(function()
    dir, home = helpers.tmpdir(), helpers.tmpdir()
    assert(os.execute("mkdir " .. q(dir .. "/work") .. " && chmod 755 " .. q(dir)))
  end)
  after_each(function() helpers.rmtree(dir); helpers.rmtree(home) end)

  local function run(as_user, seccomp)
    local prefix = ""
    if as_user then
      assert(os.execute("chown -R 65534:65534 " .. q(dir .. "/work") .. " " .. q(home)))
      prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups "
    end
    local code, out = helpers.run(prefix .. helpers.NO_SANITIZER .. "HOME=" .. q(home) .. " TMPDIR=/tmp "
      .. q(cli.ISOLATE) .. " --network none --seccomp " .. seccomp .. " --workdir " .. q(dir .. "/work")
      .. " -- bash -c " .. q(ATTEMPTS) .. " 2>&1")
    return code, out
  end

  for _, who in ipairs({ "root", "an ordinary user" }) do
    it("launched by " .. who .. ": chmod 4755, chmod g+s, install -m 4755, open and mkdir with the bits: EPERM;"
      .. " chmod 755 and 644 work", function()
      if not root_user then return pending("needs root (and setpriv for the ordinary user)") end
      local as_user = who ~= "root"
      if as_user and helpers.run("command -v setpriv") ~= 0 then return pending("setpriv(1) is not installed") end
      local code, out = run(as_user, "sandbox")
      assert.are.equal(0, code, out)
      assert.matches("chmod%-4755 1 755\n", out)
      assert.matches("chmod%-g%+s 1 755\n", out)
      assert.matches("install 1 ?%d*\n", out)
      assert.is_nil(out:find("install 0", 1, true), out)
      assert.matches("os.open 1\n", out)
      assert.matches("mkdir 1\n", out)
      assert.matches("chmod%-755 0 755\n", out)
      assert.matches("chmod%-644 0 644\n", out)
      local _, found = helpers.run("find " .. q(dir .. "/work") .. " -perm /6000")
      assert.are.equal("", found)
      -- control: the TTY filter lets the bits through (inside)
      code, out = run(as_user, "tty")
      assert.are.equal(0, code, out)
      assert.matches("chmod%-4755 0 4755\n", out)
      assert.matches("os.open ok 0o1047", out)
    end)
  end
end)
