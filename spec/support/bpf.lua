-- A classic-BPF interpreter for seccomp programs (the instructions a
-- seccomp filter built by this module may use), and struct seccomp_data,
-- so that a filter's decisions can be checked for ABIs this machine
-- cannot run.
local M = {}

M.AUDIT = {
  X86_64 = 0xC000003E, I386 = 0x40000003, AARCH64 = 0xC00000B7, ARM = 0x40000028, ARMEB = 0x00000028,
}
M.X32 = 0x40000000
M.RET_ALLOW = 0x7FFF0000
--- SECCOMP_RET_ERRNO | errno
function M.ret_errno(e) return 0x00050000 | e end

--- struct seccomp_data in this machine's byte order: nr, arch, ip, args[6]
--- (each a 64-bit integer; missing ones are 0).
function M.seccomp_data(arch, nr, args)
  args = args or {}
  return string.pack("=i4I4I8I8I8I8I8I8I8", nr, arch, 0, args[1] or 0, args[2] or 0, args[3] or 0,
    args[4] or 0, args[5] or 0, args[6] or 0)
end

--- Runs the program `prog` (bytes) on `data`; returns the RET value.
--- Anything unexpected (an unknown instruction, a load outside the data,
--- running off the end, a backward jump) is an error.
function M.run(prog, data)
  local insns = {}
  for i = 1, #prog, 8 do
    local code, jt, jf, k = string.unpack("=I2I1I1I4", prog, i)
    insns[#insns + 1] = { code = code, jt = jt, jf = jf, k = k }
  end
  local a, pc, steps = 0, 1, 0
  while true do
    local ins = assert(insns[pc], "ran off the end of the program")
    steps = steps + 1
    assert(steps <= #insns, "a loop")
    local c, k = ins.code, ins.k
    if c == 0x20 then -- BPF_LD | BPF_W | BPF_ABS
      assert(k % 4 == 0 and k + 4 <= #data, "load outside seccomp_data: " .. k)
      a = string.unpack("=I4", data, k + 1)
      pc = pc + 1
    elseif c == 0x54 then -- BPF_ALU | BPF_AND | BPF_K
      a = a & k
      pc = pc + 1
    elseif c == 0x15 then -- BPF_JMP | BPF_JEQ | BPF_K
      pc = pc + 1 + (a == k and ins.jt or ins.jf)
    elseif c == 0x45 then -- BPF_JMP | BPF_JSET | BPF_K
      pc = pc + 1 + ((a & k) ~= 0 and ins.jt or ins.jf)
    elseif c == 0x05 then -- BPF_JMP | BPF_JA
      pc = pc + 1 + k
    elseif c == 0x06 then -- BPF_RET | BPF_K
      return k
    else
      error(("unexpected instruction code 0x%02x at %d"):format(c, pc - 1))
    end
  end
end

return M
