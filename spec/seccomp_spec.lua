-- isolation.tty_seccomp_filter(): the program's shape, its decisions for
-- every ABI it knows (run through a small classic-BPF interpreter on
-- synthetic seccomp_data, so that the ABIs this machine cannot run are
-- checked too), and the real thing: TIOCSTI and TIOCLINUX under a real
-- terminal (script(1)), outside any sandbox and inside bwrap with the filter.
local helpers = require("helpers")
local cli = require("support.cli")
local tty = require("support.tty")
local isolation = require("isolation")
local bpf = require("support.bpf")

local AUDIT = {
  X86_64 = 0xC000003E, I386 = 0x40000003, AARCH64 = 0xC00000B7, ARM = 0x40000028, ARMEB = 0x00000028,
}
local X32 = 0x40000000
local RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050000 | 1 -- SECCOMP_RET_ERRNO | EPERM

local TIOCSTI, TIOCLINUX, TIOCGWINSZ = 0x5412, 0x541C, 0x5413

local machine = tty.machine

-- The family whose ABIs the filter of this build must know.
local function family()
  local m = machine()
  if m == "x86_64" or m:match("^i%d86$") then return "x86" end
  if m == "aarch64" or m:match("^arm") then return "arm" end
  return m
end

-- struct seccomp_data in this machine's byte order: nr, arch, ip, args[6].
local function seccomp_data(arch, nr, arg1)
  return string.pack("=i4I4I8I8I8I8I8I8I8", nr, arch, 0, 0, arg1 or 0, 0, 0, 0, 0)
end

-- Runs a classic-BPF program (support/bpf.lua) on `data`; returns the RET value.
local run_bpf = bpf.run

describe("tty_seccomp_filter", function()
  it("is whole struct sock_filter records, the same bytes on every call", function()
    local prog = isolation.tty_seccomp_filter()
    assert.are.equal("string", type(prog))
    assert.is_true(#prog > 0)
    assert.are.equal(0, #prog % 8)
    assert.is_true(#prog // 8 <= 4096) -- BPF_MAXINSNS
    for _ = 1, 3 do assert.are.equal(prog, isolation.tty_seccomp_filter()) end
    assert.are.equal(prog, isolation.tty_seccomp_filter("ignored", {}))
  end)

  describe("decisions, through a BPF interpreter", function()
    local prog = isolation.tty_seccomp_filter()
    local fam = family()
    -- { arch, nr, request, expected, why }
    local cases = {}
    if fam == "x86" then
      cases = {
        { AUDIT.X86_64, 16, TIOCSTI, RET_EPERM, "x86_64 ioctl TIOCSTI" },
        { AUDIT.X86_64, 16, TIOCLINUX, RET_EPERM, "x86_64 ioctl TIOCLINUX" },
        { AUDIT.X86_64, 16, 0x100005412, RET_EPERM, "high bits set: still TIOCSTI for the kernel" },
        { AUDIT.X86_64, 16, 0xFFFFFFFF0000541C, RET_EPERM, "high bits set: still TIOCLINUX" },
        { AUDIT.X86_64, 16, TIOCGWINSZ, RET_ALLOW, "another ioctl" },
        { AUDIT.X86_64, 16, 0x15412, RET_ALLOW, "a request that only ends like TIOCSTI" },
        { AUDIT.X86_64, 0, TIOCSTI, RET_ALLOW, "read(), whatever its arguments" },
        { AUDIT.X86_64, 54, TIOCSTI, RET_ALLOW, "setsockopt (54 is ioctl only for i386)" },
        { AUDIT.X86_64, X32 | 514, TIOCSTI, RET_EPERM, "x32 ioctl" },
        { AUDIT.X86_64, X32 | 514, 0x100005412, RET_EPERM, "x32 ioctl, high bits" },
        { AUDIT.X86_64, X32 | 16, TIOCSTI, RET_EPERM, "x32 bit on the 64-bit number (old kernels ran it)" },
        { AUDIT.X86_64, 514, TIOCLINUX, RET_EPERM, "514 without the x32 bit (old kernels ran it)" },
        { AUDIT.X86_64, X32 | 514, TIOCGWINSZ, RET_ALLOW, "x32, another ioctl" },
        { AUDIT.I386, 54, TIOCSTI, RET_EPERM, "i386 ioctl TIOCSTI" },
        { AUDIT.I386, 54, TIOCLINUX, RET_EPERM, "i386 ioctl TIOCLINUX" },
        { AUDIT.I386, 54, TIOCGWINSZ, RET_ALLOW, "i386, another ioctl" },
        { AUDIT.I386, 16, TIOCSTI, RET_ALLOW, "i386 lchown (16 is ioctl only for x86_64)" },
        { AUDIT.AARCH64, 29, TIOCSTI, RET_ALLOW, "an ABI this kernel cannot run" },
      }
    elseif fam == "arm" then
      cases = {
        { AUDIT.AARCH64, 29, TIOCSTI, RET_EPERM, "aarch64 ioctl TIOCSTI" },
        { AUDIT.AARCH64, 29, TIOCLINUX, RET_EPERM, "aarch64 ioctl TIOCLINUX" },
        { AUDIT.AARCH64, 29, 0x100005412, RET_EPERM, "high bits set: still TIOCSTI for the kernel" },
        { AUDIT.AARCH64, 29, TIOCGWINSZ, RET_ALLOW, "another ioctl" },
        { AUDIT.AARCH64, 54, TIOCSTI, RET_ALLOW, "54 is ioctl only for 32-bit ARM" },
        { AUDIT.ARM, 54, TIOCSTI, RET_EPERM, "32-bit ARM ioctl TIOCSTI" },
        { AUDIT.ARM, 54, TIOCLINUX, RET_EPERM, "32-bit ARM ioctl TIOCLINUX" },
        { AUDIT.ARM, 29, TIOCSTI, RET_ALLOW, "32-bit ARM, another syscall" },
        { AUDIT.ARMEB, 54, TIOCSTI, RET_EPERM, "big-endian 32-bit ARM ioctl" },
        { AUDIT.X86_64, 16, TIOCSTI, RET_ALLOW, "an ABI this kernel cannot run" },
      }
    end

    it("covers every ABI of this machine's family (" .. fam .. ")", function()
      if #cases == 0 then
        -- the C file refuses to build for other families, so this is not reached
        error("no cases for the family " .. fam)
      end
      for _, c in ipairs(cases) do
        local got = run_bpf(prog, seccomp_data(c[1], c[2], c[3]))
        assert.are.equal(c[4], got, ("%s: 0x%08x nr %d request 0x%x"):format(c[5], c[1], c[2], c[3]))
      end
    end)
  end)
end)

local have_script, at_terminal, write_probe, probe_args = tty.have_script, tty.at_terminal, tty.write_probe,
  tty.probe_args
local assert_refused, EPERM = tty.assert_refused, tty.EPERM

describe("TIOCSTI and TIOCLINUX at a real terminal", function()
  local tmp
  before_each(function() tmp = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(tmp) end)

  it("control: outside any sandbox, this kernel's answer", function()
    if not have_script() then return end
    write_probe(tmp)
    local a, all = at_terminal("exec bash probe.sh " .. probe_args(), tmp)
    assert.are.equal("ok", a.DONE, all)
    if a.STI ~= "INJECTED" then
      io.stderr:write("SKIP (control): this kernel already refuses TIOCSTI outside a sandbox (" .. tostring(a.STI)
        .. "); the sandboxed specs still require the refusal\n")
      return
    end
    if a.HIGH ~= "skipped" then assert.are.equal("INJECTED", a.HIGH, all) end
    -- a pty is no virtual console: the driver's own answer, not EPERM
    assert.are_not.equal(EPERM, a.LINUX, all)
    assert.truthy((a.WINSZ or ""):match("^ok %d+ %d+$"), all)
  end)

  it("through wrap() with seccomp_fd = 3 (an orchestrator's launch): refused with EPERM", function()
    if helpers.skip_without_bwrap() or not have_script() then return end
    write_probe(tmp)
    helpers.write(tmp .. "/filter.bpf", isolation.tty_seccomp_filter())
    local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = tmp,
      command = "bash probe.sh " .. probe_args(), seccomp_fd = 3 }))
    local a, all = at_terminal("exec bash -c " .. helpers.shquote(line) .. " 3<filter.bpf", tmp)
    assert_refused(a, all)
  end)

  it("through wrap() with seccomp_file (the line opens it itself): refused with EPERM; without: injected", function()
    if helpers.skip_without_bwrap() or not have_script() then return end
    write_probe(tmp)
    -- a name the line must quote; the line is exec'd as it is by script's sh
    local file = tmp .. "/tty seccomp 'filter'.bpf"
    helpers.write(file, isolation.tty_seccomp_filter())
    local spec = { config = { mode = "bwrap", network = "allow" }, workdir = tmp,
      command = "bash probe.sh " .. probe_args() }
    -- control: the same line without the file
    local a, all = at_terminal("exec " .. assert(isolation.wrap(spec)), tmp)
    assert.are.equal("ok", a.DONE, all)
    if a.STI == "INJECTED" then
      assert.are_not.equal(EPERM, a.LINUX, all)
    else
      io.stderr:write("SKIP (control): this kernel refuses TIOCSTI by itself (" .. tostring(a.STI) .. ")\n")
    end
    for _, fd in ipairs({ false, 9 }) do
      spec.seccomp_file, spec.seccomp_fd = file, fd or nil
      a, all = at_terminal("exec " .. assert(isolation.wrap(spec)), tmp)
      -- FD3 closed: bwrap read the file to EOF and closed the descriptor
      assert_refused(a, all)
      -- the same for 9 (other descriptors the spec runner leaks are the launcher's to close)
      for n in (a.LEAK or ""):gmatch("%d+") do assert.are_not.equal("9", n, all) end
    end
  end)

  for _, net in ipairs({ "allow", "deny" }) do
    it("through isolate --network " .. net .. ": refused with EPERM; only 0, 1 and 2 inside", function()
      if helpers.skip_without_bwrap() or not have_script() then return end
      write_probe(tmp)
      -- isolate from script's shell, as the Ctrl-C spec does (CI has no SHELL),
      -- with descriptors 3 and 4 of its own that it must not pass on
      local line = "exec 3<probe.pl 4<probe.sh; exec " .. helpers.shquote(cli.ISOLATE) .. " --network " .. net
        .. " --workdir " .. helpers.shquote(tmp) .. " -- bash probe.sh " .. probe_args()
      local a, all = at_terminal(line, tmp)
      assert_refused(a, all)
      -- bwrap read the pipe and closed it; isolate's prologue closed the rest
      assert.is_nil(a.LEAK, all)
    end)
  end

  it("through wrap() without seccomp_fd: the hole the filter closes is there", function()
    if helpers.skip_without_bwrap() or not have_script() then return end
    write_probe(tmp)
    local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "allow" }, workdir = tmp,
      command = "bash probe.sh " .. probe_args() }))
    local a, all = at_terminal("exec bash -c " .. helpers.shquote(line), tmp)
    assert.are.equal("ok", a.DONE, all)
    if a.STI ~= "INJECTED" then
      io.stderr:write("SKIP (no filter): this kernel refuses TIOCSTI by itself (" .. tostring(a.STI) .. ")\n")
      return
    end
    assert.are_not.equal(EPERM, a.LINUX, all)
  end)
end)
