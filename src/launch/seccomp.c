/*
 * seccomp.c - the classic-BPF seccomp programs handed to bwrap's --seccomp
 * FD, compiled from tables of (system call, argument test, errno).
 *
 * isolation.tty_seccomp_filter(): refuses the two ioctls by which a
 * sandboxed process could type into the terminal it shares with the user:
 * TIOCSTI (push a byte into the terminal's input queue; the user's shell
 * reads it after the sandbox ends: bwrap's CVE-2017-5226) and TIOCLINUX
 * (on a virtual console, among other things, paste the selection). bwrap
 * runs without --new-session so that an interactive agent keeps its
 * terminal; this filter is what closes that door instead, as flatpak does.
 *
 * isolation.sandbox_seccomp_filter(): the same two ioctls, and the calls a
 * coding agent does not need that reach the host's kernel state or widen
 * its attack surface (the table `sandbox_rules` below says why each; see
 * docs/reference/launch-spec.md). Every other system call is allowed: git,
 * compilers, package managers, language runtimes and test suites run unchanged.
 *
 * A program is the raw array of struct sock_filter that bwrap reads from
 * the descriptor until EOF and installs with PR_SET_SECCOMP, in this
 * machine's byte order (the kernel reads it as such).
 */
#include "isolation.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

/*
 * The ABIs checked, by the family of the build. The family, not the
 * build's own ABI: a 32-bit Lua on a 64-bit kernel (i386 userland on an
 * x86_64 kernel, armhf on arm64) starts sandboxes in which a 64-bit program
 * runs, and a 64-bit program can make 32-bit calls (int 0x80 on x86_64), so
 * every ABI such a kernel accepts is listed, each with its own system call
 * numbers written out in the table below (not the build's __NR_ values).
 *
 * x86: x86_64, x32 (numbers with __X32_SYSCALL_BIT; x32 calls report
 * AUDIT_ARCH_X86_64 too) and i386 (int 0x80 or a 32-bit program). For
 * AUDIT_ARCH_X86_64 the x32 bit is masked off before the comparison, and
 * both the 64-bit and the x32 number of a call are refused where they
 * differ (ioctl: 16 and 514): older kernels dispatched x32 calls and 64-bit
 * calls from one table (16 | x32 bit reached ioctl, and so did 514 without
 * the bit), newer ones return ENOSYS for the mixed forms, which a refusal
 * does not change.
 *
 * arm: aarch64 and 32-bit ARM EABI (AUDIT_ARCH_ARMEB is what a big-endian
 * 32-bit kernel reports). The old ARM ABI (OABI, with socketcall) is not
 * listed: a kernel with OABI_COMPAT has no seccomp filters at all.
 *
 * Any other architecture is a build error, not a filter for its native ABI
 * alone: ppc64 also runs 32-bit PowerPC, s390x 31-bit s390, mips64 three
 * ABIs, riscv64 optionally rv32. A filter missing one of them would leave
 * the holes open while looking closed, and would make the "unknown arch:
 * allow" rule below wrong. To port: add a column to the table for every
 * ABI that architecture's kernel can run, and run spec/seccomp_spec.lua
 * and spec/sandbox_seccomp_spec.lua there.
 */
#define X32_SYSCALL_BIT 0x40000000u

/* Columns of the system call table. */
enum abi_col { COL_X86_64, COL_X32, COL_I386, COL_AARCH64, COL_ARM, NCOLS };

struct abi {
    uint32_t arch;
    uint32_t nr_mask; /* applied to the syscall number before comparing */
    int cols[2];      /* the table columns this ABI's numbers are in; -1 */
};

#if defined(__x86_64__) || defined(__i386__)
static const struct abi abis[] = {
    {AUDIT_ARCH_X86_64, ~X32_SYSCALL_BIT, {COL_X86_64, COL_X32}},
    {AUDIT_ARCH_I386, 0xffffffffu, {COL_I386, -1}},
};
#elif defined(__aarch64__) || defined(__arm__)
static const struct abi abis[] = {
    {AUDIT_ARCH_AARCH64, 0xffffffffu, {COL_AARCH64, -1}},
    {AUDIT_ARCH_ARM, 0xffffffffu, {COL_ARM, -1}},
    {AUDIT_ARCH_ARMEB, 0xffffffffu, {COL_ARM, -1}},
};
#else
#error "seccomp.c: no ABI list for this architecture (see the comment above)"
#endif

#define NABIS (sizeof abis / sizeof abis[0])

/*
 * System call numbers: x86_64, x32 (without the x32 bit), i386, aarch64
 * (the asm-generic table), 32-bit ARM EABI; NONE where that ABI has no such
 * call. From the kernel's syscall tables (arch/x86/entry/syscalls/,
 * include/uapi/asm-generic/unistd.h, arch/arm/tools/syscall.tbl); the spec
 * checks the x86 and asm-generic columns against this machine's headers.
 * Since Linux 5.1 new calls have one number on every architecture (the 4xx).
 */
#define NONE (-1)

struct syscall {
    const char *name;
    int nr[NCOLS];
};

#define SYSCALL(name, x86_64, x32, i386, aarch64, arm)                         \
    static const struct syscall sys_##name = {                                 \
        #name, {x86_64, x32, i386, aarch64, arm}}

SYSCALL(ioctl, 16, 514, 54, 29, 54);
SYSCALL(keyctl, 250, 250, 288, 219, 311);
SYSCALL(add_key, 248, 248, 286, 217, 309);
SYSCALL(request_key, 249, 249, 287, 218, 310);
SYSCALL(io_uring_setup, 425, 425, 425, 425, 425);
SYSCALL(io_uring_enter, 426, 426, 426, 426, 426);
SYSCALL(io_uring_register, 427, 427, 427, 427, 427);
SYSCALL(bpf, 321, 321, 357, 280, 386);
SYSCALL(perf_event_open, 298, 298, 336, 241, 364);
SYSCALL(userfaultfd, 323, 323, 374, 282, 388);
SYSCALL(kexec_load, 246, 528, 283, 104, 347);
SYSCALL(kexec_file_load, 320, 320, NONE, 294, 401);
SYSCALL(init_module, 175, 175, 128, 105, 128);
SYSCALL(finit_module, 313, 313, 350, 273, 379);
SYSCALL(delete_module, 176, 176, 129, 106, 129);
SYSCALL(mount, 165, 165, 21, 40, 21);
SYSCALL(umount, NONE, NONE, 22, NONE, NONE); /* i386's oldumount */
SYSCALL(umount2, 166, 166, 52, 39, 52);
SYSCALL(pivot_root, 155, 155, 217, 41, 218);
SYSCALL(open_tree, 428, 428, 428, 428, 428);
SYSCALL(move_mount, 429, 429, 429, 429, 429);
SYSCALL(fsopen, 430, 430, 430, 430, 430);
SYSCALL(fsconfig, 431, 431, 431, 431, 431);
SYSCALL(fsmount, 432, 432, 432, 432, 432);
SYSCALL(fspick, 433, 433, 433, 433, 433);
SYSCALL(mount_setattr, 442, 442, 442, 442, 442);
SYSCALL(_sysctl, 156, NONE, 149, NONE, 149);
SYSCALL(setns, 308, 308, 346, 268, 375);
SYSCALL(unshare, 272, 272, 310, 97, 337);
SYSCALL(clone, 56, 56, 120, 220, 120);
SYSCALL(clone3, 435, 435, 435, 435, 435);
SYSCALL(socket, 41, 41, 359, 198, 281);
SYSCALL(socketcall, NONE, NONE, 102, NONE, NONE); /* i386 (ARM EABI: none) */
SYSCALL(chmod, 90, 90, 15, NONE, 15);
SYSCALL(fchmod, 91, 91, 94, 52, 94);
SYSCALL(fchmodat, 268, 268, 306, 53, 333);
SYSCALL(fchmodat2, 452, 452, 452, 452, 452);
SYSCALL(open, 2, 2, 5, NONE, 5);
SYSCALL(openat, 257, 257, 295, 56, 322);
SYSCALL(openat2, 437, 437, 437, 437, 437);
SYSCALL(creat, 85, 85, 8, NONE, 8);
SYSCALL(mknod, 133, 133, 14, NONE, 14);
SYSCALL(mknodat, 259, 259, 297, 33, 324);
SYSCALL(mkdir, 83, 83, 39, NONE, 39);
SYSCALL(mkdirat, 258, 258, 296, 34, 323);

/* One refusal: when the call is `sys` and every test holds, `action`. */
enum test {
    ARG_EQ,     /* the argument's low 32 bits equal value */
    ARG_NE,     /* ... differ from value */
    ARG_ANY_BIT /* ... share a bit with value */
};

struct cond {
    unsigned arg; /* 0..5 */
    enum test test;
    uint32_t value;
};

#define MAX_CONDS 2

struct rule {
    const struct syscall *sys;
    uint32_t action;
    unsigned nconds;
    struct cond conds[MAX_CONDS];
};

#define ERRNO(e) (SECCOMP_RET_ERRNO | ((e)&SECCOMP_RET_DATA))

/*
 * x86 and arm, in every ABI above, use the asm-generic ioctl numbers: the
 * filter compares these, whatever the build's <sys/ioctl.h> says, and the
 * build's own must agree. The request is args[1], a 64-bit slot, but the
 * kernel's ioctl takes it as unsigned int: 0x100005412 IS TIOCSTI. Only
 * the low 32 bits are compared, for every test (flatpak's CVE-2019-10063
 * compared all 64, and a request with a high bit set went through).
 */
#define REQ_TIOCSTI 0x5412u
#define REQ_TIOCLINUX 0x541Cu
_Static_assert(TIOCSTI == REQ_TIOCSTI, "TIOCSTI is not 0x5412 here");
_Static_assert(TIOCLINUX == REQ_TIOCLINUX, "TIOCLINUX is not 0x541C here");

/*
 * The set-user-ID and set-group-ID bits of a mode (S_ISUID | S_ISGID), and
 * the open flags that create a file and so read the mode: O_CREAT and
 * __O_TMPFILE (O_TMPFILE without its O_DIRECTORY, which differs between
 * x86 and arm; O_CREAT is 0100 on both).
 */
#define MODE_SETID 06000u
#define OPEN_CREATES (0100u | 020000000u)
_Static_assert(S_ISUID == 04000 && S_ISGID == 02000, "set-id bits");
_Static_assert(O_CREAT == 0100 && (O_TMPFILE & 020000000) == 020000000,
               "open's create flags");

/* One rule a line, so that the tables read as tables. */
/* clang-format off */
#define REFUSE(sys, e) {&(sys), ERRNO(e), 0, {{0, ARG_EQ, 0}}}
#define REFUSE_IF(sys, e, arg, test, v) {&(sys), ERRNO(e), 1, {{arg, test, v}}}
#define REFUSE_IF2(sys, e, a1, t1, v1, a2, t2, v2) \
    {&(sys), ERRNO(e), 2, {{a1, t1, v1}, {a2, t2, v2}}}
/* clang-format on */

/*
 * The namespace flags of clone and unshare (linux/sched.h). CLONE_NEWTIME
 * (0x80) only for unshare: in clone's first argument that byte is the exit
 * signal, and clone cannot make a time namespace.
 */
#define NS_FLAGS 0x7E020000u /* NEWNS, NEWCGROUP, UTS, IPC, USER, PID, NET */
#define NS_FLAGS_UNSHARE (NS_FLAGS | 0x80u)
_Static_assert(NS_FLAGS ==
                   (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                    CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET),
               "namespace flags");

/* Socket families and protocols (linux/socket.h, linux/netlink.h). */
#define FAMILY_NETLINK 16u
#define FAMILY_PACKET 17u
#define FAMILY_VSOCK 40u
#define PROTO_NETLINK_ROUTE 0u
#define SOCKETCALL_SOCKET 1u /* SYS_SOCKET, linux/net.h */
_Static_assert(AF_NETLINK == FAMILY_NETLINK && AF_PACKET == FAMILY_PACKET &&
                   AF_VSOCK == FAMILY_VSOCK && NETLINK_ROUTE == 0,
               "socket families");

static const struct rule tty_rules[] = {
    REFUSE_IF(sys_ioctl, EPERM, 1, ARG_EQ, REQ_TIOCSTI),
    REFUSE_IF(sys_ioctl, EPERM, 1, ARG_EQ, REQ_TIOCLINUX),
};

/*
 * The sandbox's filter: the TTY rules, then the calls below, each with
 * EPERM unless said (docs/reference/launch-spec.md has the table, with what
 * each is used for outside a sandbox). None is needed by git, a compiler, a
 * package manager, a language runtime or a test suite.
 */
static const struct rule sandbox_rules[] = {
    REFUSE_IF(sys_ioctl, EPERM, 1, ARG_EQ, REQ_TIOCSTI),
    REFUSE_IF(sys_ioctl, EPERM, 1, ARG_EQ, REQ_TIOCLINUX),
    /* the kernel's keyrings are not per sandbox: the launcher's session
     * keyring is inherited (and root's user keyring reachable by id):
     * Kerberos KEYRING: caches, ecryptfs and fscrypt keys, passphrases */
    REFUSE(sys_keyctl, EPERM),
    REFUSE(sys_add_key, EPERM),
    REFUSE(sys_request_key, EPERM),
    /* io_uring: a second system-call interface, whose operations this
     * filter never sees, and a steady source of kernel exploits */
    REFUSE(sys_io_uring_setup, EPERM),
    REFUSE(sys_io_uring_enter, EPERM),
    REFUSE(sys_io_uring_register, EPERM),
    /* programs run in the kernel; hardware counters and kernel
     * tracepoints (side channels); userfaultfd pauses the kernel at a
     * page fault of the caller's choosing, the usual race-widener */
    REFUSE(sys_bpf, EPERM),
    REFUSE(sys_perf_event_open, EPERM),
    REFUSE(sys_userfaultfd, EPERM),
    /* a new kernel, kernel modules */
    REFUSE(sys_kexec_load, EPERM),
    REFUSE(sys_kexec_file_load, EPERM),
    REFUSE(sys_init_module, EPERM),
    REFUSE(sys_finit_module, EPERM),
    REFUSE(sys_delete_module, EPERM),
    /* mounts, old and new API: the sandbox's file system is the one bwrap
     * built; a mount could cover or reveal what the mounts decide */
    REFUSE(sys_mount, EPERM),
    REFUSE(sys_umount, EPERM),
    REFUSE(sys_umount2, EPERM),
    REFUSE(sys_pivot_root, EPERM),
    REFUSE(sys_open_tree, EPERM),
    REFUSE(sys_move_mount, EPERM),
    REFUSE(sys_fsopen, EPERM),
    REFUSE(sys_fsconfig, EPERM),
    REFUSE(sys_fsmount, EPERM),
    REFUSE(sys_fspick, EPERM),
    REFUSE(sys_mount_setattr, EPERM),
    /* the binary sysctl interface (gone since Linux 5.5): on an older
     * kernel it writes the host's settings past a read-only /proc/sys */
    REFUSE(sys__sysctl, EPERM),
    /* namespaces: a user namespace inside would give the sandbox every
     * capability over new namespaces, the door to most namespace bugs;
     * setns could join one it holds a descriptor of */
    REFUSE(sys_setns, EPERM),
    REFUSE_IF(sys_unshare, EPERM, 0, ARG_ANY_BIT, NS_FLAGS_UNSHARE),
    REFUSE_IF(sys_clone, EPERM, 0, ARG_ANY_BIT, NS_FLAGS),
    /* clone3's flags are in a struct behind a pointer, which seccomp
     * cannot read: ENOSYS, a kernel older than 5.3's answer, makes the C
     * library fall back to clone, whose flags are checked above */
    REFUSE(sys_clone3, ENOSYS),
    /* sockets to the hypervisor (vsock), raw link-layer frames (packet),
     * and kernel subsystems (netlink: audit, uevents, netfilter, xfrm,
     * generic families...); NETLINK_ROUTE stays, for ip and getifaddrs() */
    REFUSE_IF(sys_socket, EPERM, 0, ARG_EQ, FAMILY_VSOCK),
    REFUSE_IF(sys_socket, EPERM, 0, ARG_EQ, FAMILY_PACKET),
    REFUSE_IF2(sys_socket, EPERM, 0, ARG_EQ, FAMILY_NETLINK, 2, ARG_NE,
               PROTO_NETLINK_ROUTE),
    /* i386's socketcall(SYS_SOCKET, args): the family is behind a
     * pointer, so every socket() through it is refused; 32-bit programs
     * whose C library uses socketcall cannot make sockets (on an x86_64
     * kernel any process can enter there with int 0x80) */
    REFUSE_IF(sys_socketcall, EPERM, 0, ARG_EQ, SOCKETCALL_SOCKET),
    /* set-user-ID and set-group-ID files: bwrap's nosuid holds on the
     * sandbox's mounts only, and the workdir is the host's: a root launch
     * could leave a setuid-root shell there for any local user, any launch
     * a program that runs as its user (issue 27.4). Refused wherever a mode
     * is given: chmod and its relatives, and file creation with the bits
     * (open and openat only when they create: O_CREAT or O_TMPFILE).
     * openat2's mode is in a struct behind a pointer: ENOSYS, and the C
     * library falls back to openat */
    REFUSE_IF(sys_chmod, EPERM, 1, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_fchmod, EPERM, 1, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_fchmodat, EPERM, 2, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_fchmodat2, EPERM, 2, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF2(sys_open, EPERM, 1, ARG_ANY_BIT, OPEN_CREATES, 2, ARG_ANY_BIT,
               MODE_SETID),
    REFUSE_IF2(sys_openat, EPERM, 2, ARG_ANY_BIT, OPEN_CREATES, 3, ARG_ANY_BIT,
               MODE_SETID),
    REFUSE(sys_openat2, ENOSYS),
    REFUSE_IF(sys_creat, EPERM, 1, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_mknod, EPERM, 1, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_mknodat, EPERM, 2, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_mkdir, EPERM, 1, ARG_ANY_BIT, MODE_SETID),
    REFUSE_IF(sys_mkdirat, EPERM, 2, ARG_ANY_BIT, MODE_SETID),
};

/* Where an argument's low 32 bits sit in its 64-bit slot: byte order. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define ARG_LOW(i) (offsetof(struct seccomp_data, args[0]) + 8 * (i) + 4)
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ARG_LOW(i) (offsetof(struct seccomp_data, args[0]) + 8 * (i))
#else
#error "seccomp.c: unknown byte order"
#endif

/*
 * Instructions per rule and ABI, at most: a reload of the number (and its
 * mask), one comparison per number, two per test, the return.
 */
#define RULE_MAX_INSNS (2 + 2 + 2 * MAX_CONDS + 1)
#define MAX_RULES (sizeof sandbox_rules / sizeof sandbox_rules[0])
#define MAX_INSNS (2 + 2 * NABIS + NABIS * (MAX_RULES * RULE_MAX_INSNS + 1))
_Static_assert(MAX_INSNS <= BPF_MAXINSNS, "the filter is too long for BPF");

struct prog {
    struct sock_filter insn[MAX_INSNS];
    unsigned n;
};

static void emit(struct prog *p, uint16_t code, uint32_t k, unsigned jt,
                 unsigned jf)
{
    /* conditional jumps are 8-bit, forward: no block here is that long */
    p->insn[p->n++] = (struct sock_filter){code, (uint8_t)jt, (uint8_t)jf, k};
}

/* The numbers of sys in ABI a, without repeats; returns how many. */
static unsigned abi_numbers(const struct abi *a, const struct syscall *sys,
                            uint32_t out[2])
{
    unsigned n = 0;
    for (unsigned c = 0; c < 2; c++) {
        if (a->cols[c] < 0 || sys->nr[a->cols[c]] == NONE)
            continue;
        uint32_t nr = (uint32_t)sys->nr[a->cols[c]];
        if (n == 0 || out[0] != nr)
            out[n++] = nr;
    }
    return n;
}

/*
 * One ABI's block: for each rule of a call this ABI has, compare the
 * number; on a match, test the arguments (a test that fails goes on to the
 * next rule) and return the action. A rule's tests overwrite the
 * accumulator, so the next rule loads the number again. Anything that
 * matches no rule is allowed.
 */
static void compile_abi(struct prog *p, const struct abi *a,
                        const struct rule *rules, size_t nrules)
{
    int have_nr = 0;
    for (size_t i = 0; i < nrules; i++) {
        const struct rule *r = &rules[i];
        uint32_t nrs[2];
        unsigned k = abi_numbers(a, r->sys, nrs);
        if (k == 0)
            continue;
        if (!have_nr) {
            emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr),
                 0, 0);
            if (a->nr_mask != 0xffffffffu)
                emit(p, BPF_ALU | BPF_AND | BPF_K, a->nr_mask, 0, 0);
        }
        unsigned body = 2 * r->nconds + 1;
        for (unsigned j = 0; j < k; j++) {
            /* all but the last jump to the body on a match */
            if (j + 1 < k)
                emit(p, BPF_JMP | BPF_JEQ | BPF_K, nrs[j], k - 1 - j, 0);
            else
                emit(p, BPF_JMP | BPF_JEQ | BPF_K, nrs[j], 0, body);
        }
        for (unsigned c = 0; c < r->nconds; c++) {
            const struct cond *t = &r->conds[c];
            unsigned fail = body - 2 * c - 2; /* past this rule's return */
            emit(p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LOW(t->arg), 0, 0);
            switch (t->test) {
            case ARG_EQ:
                emit(p, BPF_JMP | BPF_JEQ | BPF_K, t->value, 0, fail);
                break;
            case ARG_NE:
                emit(p, BPF_JMP | BPF_JEQ | BPF_K, t->value, fail, 0);
                break;
            case ARG_ANY_BIT:
                emit(p, BPF_JMP | BPF_JSET | BPF_K, t->value, 0, fail);
                break;
            }
        }
        emit(p, BPF_RET | BPF_K, r->action, 0, 0);
        have_nr = r->nconds == 0;
    }
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
}

/*
 * The program: the arch dispatch (a long jump to each ABI's block), the
 * rule for an unknown ABI, then the blocks.
 */
static void compile(struct prog *p, const struct rule *rules, size_t nrules)
{
    unsigned ja[NABIS];
    p->n = 0;
    emit(p, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0,
         0);
    for (unsigned i = 0; i < NABIS; i++) {
        emit(p, BPF_JMP | BPF_JEQ | BPF_K, abis[i].arch, 0, 1);
        ja[i] = p->n;
        emit(p, BPF_JMP | BPF_JA, 0, 0, 0); /* k set below */
    }
    /*
     * An ABI this program does not know: allowed. The list above holds
     * every ABI the kernel of this family can run, so a program of any
     * other ABI cannot be executed on this machine and no such syscall ever
     * arrives; refusing them would only break the day a kernel adds one.
     */
    emit(p, BPF_RET | BPF_K, SECCOMP_RET_ALLOW, 0, 0);
    for (unsigned i = 0; i < NABIS; i++) {
        p->insn[ja[i]].k = p->n - (ja[i] + 1);
        compile_abi(p, &abis[i], rules, nrules);
    }
}

static int push_program(lua_State *L, const struct rule *rules, size_t n)
{
    struct prog *p = lua_newuserdatauv(L, sizeof *p, 0);
    compile(p, rules, n);
    lua_pushlstring(L, (const char *)p->insn, p->n * sizeof p->insn[0]);
    return 1;
}

/* isolation.tty_seccomp_filter() -> the program's bytes. Pure. */
static int l_tty_seccomp_filter(lua_State *L)
{
    return push_program(L, tty_rules, sizeof tty_rules / sizeof tty_rules[0]);
}

/* isolation.sandbox_seccomp_filter() -> the program's bytes. Pure. */
static int l_sandbox_seccomp_filter(lua_State *L)
{
    return push_program(L, sandbox_rules, MAX_RULES);
}

void isolation_seccomp_open(lua_State *L)
{
    lua_pushcfunction(L, l_tty_seccomp_filter);
    lua_setfield(L, -2, "tty_seccomp_filter");
    lua_pushcfunction(L, l_sandbox_seccomp_filter);
    lua_setfield(L, -2, "sandbox_seccomp_filter");
}
