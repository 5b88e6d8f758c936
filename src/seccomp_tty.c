/*
 * seccomp_tty.c - isolation.tty_seccomp_filter(): a classic-BPF seccomp
 * program, for bwrap's --seccomp FD, that refuses the two ioctls by which a
 * sandboxed process could type into the terminal it shares with the user:
 * TIOCSTI (push a byte into the terminal's input queue; the user's shell
 * reads it after the sandbox ends: bwrap's CVE-2017-5226) and TIOCLINUX
 * (on a virtual console, among other things, paste the selection). bwrap
 * runs without --new-session so that an interactive agent keeps its
 * terminal; this filter is what closes that door instead, as flatpak does.
 *
 * Every other syscall, and every other ioctl, is allowed: this is not a
 * general sandboxing policy, only that one hole.
 *
 * The program is the raw array of struct sock_filter that bwrap reads from
 * the descriptor until EOF and installs with PR_SET_SECCOMP, in this
 * machine's byte order (the kernel reads it as such).
 */
#include "isolation.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

/*
 * The ABIs whose ioctl is checked, by the family of the build. The family,
 * not the build's own ABI: a 32-bit Lua on a 64-bit kernel (i386 userland
 * on an x86_64 kernel, armhf on arm64) starts sandboxes in which a 64-bit
 * program runs, so every ABI such a kernel accepts is listed, with its own
 * syscall number written out (not __NR_ioctl, which is the build's).
 *
 * x86: x86_64 (ioctl 16), x32 (ioctl 514 with __X32_SYSCALL_BIT; x32 calls
 * report AUDIT_ARCH_X86_64 too) and i386 (ioctl 54, int 0x80 or a 32-bit
 * program). For AUDIT_ARCH_X86_64 the x32 bit is masked off before the
 * comparison and both 16 and 514 refused: older kernels dispatched x32
 * calls and 64-bit calls from one table (16 | x32 bit reached ioctl, and so
 * did 514 without the bit), newer ones return ENOSYS for the mixed forms,
 * which a refusal does not change.
 *
 * arm: aarch64 (ioctl 29) and 32-bit ARM (ioctl 54; AUDIT_ARCH_ARMEB is
 * what a big-endian 32-bit kernel reports).
 *
 * Any other architecture is a build error, not a filter for its native ABI
 * alone: ppc64 also runs 32-bit PowerPC, s390x 31-bit s390, mips64 three
 * ABIs, riscv64 optionally rv32. A filter missing one of them would leave
 * the hole open while looking closed, and would make the "unknown arch:
 * allow" rule below wrong. To port: list every ABI that architecture's
 * kernel can run, with its ioctl number, and run spec/seccomp_spec.lua there.
 */
#define X32_SYSCALL_BIT 0x40000000u

struct abi {
    uint32_t arch;
    uint32_t nr_mask; /* applied to the syscall number before comparing */
    uint32_t nrs[2];  /* ioctl's number(s) in that ABI */
    unsigned nnrs;
};

#if defined(__x86_64__) || defined(__i386__)
static const struct abi abis[] = {
    {AUDIT_ARCH_X86_64, ~X32_SYSCALL_BIT, {16, 514}, 2},
    {AUDIT_ARCH_I386, 0xffffffffu, {54, 0}, 1},
};
#elif defined(__aarch64__) || defined(__arm__)
static const struct abi abis[] = {
    {AUDIT_ARCH_AARCH64, 0xffffffffu, {29, 0}, 1},
    {AUDIT_ARCH_ARM, 0xffffffffu, {54, 0}, 1},
    {AUDIT_ARCH_ARMEB, 0xffffffffu, {54, 0}, 1},
};
#else
#error                                                                         \
    "seccomp_tty.c: no ABI list for this architecture (see the comment above)"
#endif

#define NABIS (sizeof abis / sizeof abis[0])

/*
 * x86 and arm, in every ABI above, use the asm-generic numbers: the filter
 * compares these, whatever the build's <sys/ioctl.h> says, and the build's
 * own must agree.
 */
#define REQ_TIOCSTI 0x5412u
#define REQ_TIOCLINUX 0x541Cu
_Static_assert(TIOCSTI == REQ_TIOCSTI, "TIOCSTI is not 0x5412 here");
_Static_assert(TIOCLINUX == REQ_TIOCLINUX, "TIOCLINUX is not 0x541C here");

/*
 * The request is args[1], a 64-bit slot in struct seccomp_data, but the
 * kernel's ioctl takes it as unsigned int: 0x100005412 IS TIOCSTI. Only the
 * low 32 bits are compared (flatpak's CVE-2019-10063 compared all 64, and
 * a request with a high bit set went through). Where they sit in the slot
 * depends on the byte order, which is the kernel's as well as the build's.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ARG1_LOW (offsetof(struct seccomp_data, args[1]) + 4)
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ARG1_LOW (offsetof(struct seccomp_data, args[1]))
#else
#error "seccomp_tty.c: unknown byte order"
#endif

/* Largest program: the arch load, each ABI's block, the tail. */
#define MAX_INSNS (1 + NABIS * 6 + 1 + 5)

struct prog {
    struct sock_filter insn[MAX_INSNS];
    unsigned n;
};

static void emit(struct prog *p, uint16_t code, uint32_t k, unsigned jt,
                 unsigned jf)
{
    /* conditional jumps are 8-bit, forward: this program is far shorter */
    p->insn[p->n++] = (struct sock_filter){code, (uint8_t)jt, (uint8_t)jf, k};
}

/* Instructions of one ABI's block after its arch comparison. */
static unsigned block_len(const struct abi *a)
{
    return 1 + (a->nr_mask != 0xffffffffu) + a->nnrs + 1;
}

static void build(struct prog *p)
{
    p->n = 0;
    /* where the request check starts, known before anything is emitted */
    unsigned check = 1 + 1;
    for (unsigned i = 0; i < NABIS; i++)
        check += 1 + block_len(&abis[i]);

    emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0,
         0);
    for (unsigned i = 0; i < NABIS; i++) {
        const struct abi *a = &abis[i];
        /* not this ABI: skip its block, to the next comparison */
        emit(p, BPF_JMP | BPF_JEQ | BPF_K, a->arch, 0, block_len(a));
        emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0,
             0);
        if (a->nr_mask != 0xffffffffu)
            emit(p, BPF_ALU | BPF_AND | BPF_K, a->nr_mask, 0, 0);
        for (unsigned j = 0; j < a->nnrs; j++)
            emit(p, BPF_JMP | BPF_JEQ | BPF_K, a->nrs[j], check - (p->n + 1),
                 0);
        emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
    }
    /*
     * An ABI this program does not know: allowed. The list above holds every
     * ABI the kernel of this family can run, so a program of any other ABI
     * cannot be executed on this machine and no such syscall ever arrives;
     * refusing them would only break the day a kernel adds one. (Killing
     * them would be the choice for a general policy; this one closes one
     * ioctl and must not break anything else.)
     */
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);

    /* check: ioctl; refuse the two requests with EPERM, before any driver */
    emit(p, BPF_LD | BPF_W | BPF_ABS, ARG1_LOW, 0, 0);
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, REQ_TIOCSTI, 2, 0);
    emit(p, BPF_JMP | BPF_JEQ | BPF_K, REQ_TIOCLINUX, 1, 0);
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA), 0,
         0);
}

/* isolation.tty_seccomp_filter() -> the program's bytes. Pure. */
static int l_tty_seccomp_filter(lua_State *L)
{
    struct prog p;
    build(&p);
    lua_pushlstring(L, (const char *)p.insn, p.n * sizeof p.insn[0]);
    return 1;
}

void isolation_seccomp_open(lua_State *L)
{
    lua_pushcfunction(L, l_tty_seccomp_filter);
    lua_setfield(L, -2, "tty_seccomp_filter");
}
