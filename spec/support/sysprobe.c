/*
 * sysprobe - makes system calls by name and prints what the kernel (or a
 * seccomp filter) answered, one line each: "NAME ok" or "NAME errno=N".
 * Compiled by spec/sandbox_seccomp_spec.lua at test time with this
 * machine's <sys/syscall.h>, so its numbers are the C library's, not the
 * filter's table. The arguments are chosen so that, where the call is
 * reachable, it fails harmlessly with an error of its own (a bad
 * descriptor, a missing path, a NULL pointer) or does something that ends
 * with the probe: a refusal by the filter (EPERM, ENOSYS for clone3) is
 * then told from the kernel's answer.
 *
 * Names ending in "-x32" make the call with the x32 bit set (x86_64 only).
 * Names ending in "32" make the i386 call with int 0x80 from this 64-bit
 * program (x86_64 only): the same kernel entry as a 32-bit program's, with
 * AUDIT_ARCH_I386, which a filter for x86_64 alone would let through.
 * Not every x86_64 machine offers that entry (on some the instruction
 * itself faults, outside any sandbox): "getpid32" asks, and a probe whose
 * child dies of a signal prints "NAME signal=N" instead of an answer.
 *
 * Each call is made in a child of its own.
 *
 * "seccomp-run FILE PROG ARGS..." installs the program in FILE as a
 * seccomp filter (no_new_privs, as bwrap does) and execs PROG: the filter
 * on a process that holds every capability (root, no namespace), where
 * the calls the sandbox's missing capabilities already refuse get through
 * to the kernel without it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#define NS_FLAG_USER 0x10000000L  /* CLONE_NEWUSER */
#define NS_FLAG_FILES 0x00000400L /* CLONE_FILES: not a namespace */
#define PROBE_MISSING "/nonexistent-isolation-probe"

static long r(long v)
{
    return v < 0 ? -errno : v;
}

/* A clone: the child leaves at once; the parent reaps it. */
static long clone_with(unsigned long flags)
{
    long pid = syscall(__NR_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return -errno;
    waitpid((pid_t)pid, NULL, 0);
    return 0;
}

static long socket_of(int family, int type, int proto)
{
    int fd = socket(family, type, proto);
    if (fd < 0)
        return -errno;
    close(fd);
    return 0;
}

#if defined(__x86_64__)
/* The i386 entry from a 64-bit process; arguments truncated to 32 bits. */
static long int80(long nr, long a, long b, long c)
{
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

/* socketcall(SYS_SOCKET, args): args must sit below 4 GiB. */
static long socketcall_socket32(int family)
{
    uint32_t *args = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (args == MAP_FAILED)
        return -errno;
    args[0] = (uint32_t)family;
    args[1] = SOCK_STREAM;
    args[2] = 0;
    long fd = int80(102, 1, (long)(uintptr_t)args, 0);
    if (fd >= 0)
        close((int)fd);
    munmap(args, 4096);
    return fd < 0 ? fd : 0;
}
#endif

static long probe(const char *n)
{
    if (!strcmp(n, "keyctl"))
        return r(syscall(__NR_keyctl, 0 /* GET_KEYRING_ID */, -3 /* @s */, 0));
    if (!strcmp(n, "add_key"))
        return r(syscall(__NR_add_key, "user", "isolation-probe", "x", 1,
                         -2 /* @p */));
    if (!strcmp(n, "request_key"))
        return r(
            syscall(__NR_request_key, "user", "isolation-probe-none", NULL, 0));
    if (!strcmp(n, "io_uring_setup"))
        return r(syscall(__NR_io_uring_setup, 1, NULL));
    if (!strcmp(n, "io_uring_enter"))
        return r(syscall(__NR_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    if (!strcmp(n, "io_uring_register"))
        return r(syscall(__NR_io_uring_register, -1, 0, NULL, 0));
    if (!strcmp(n, "bpf"))
        return r(syscall(__NR_bpf, 0 /* MAP_CREATE */, NULL, 8));
    if (!strcmp(n, "perf_event_open"))
        return r(syscall(__NR_perf_event_open, NULL, 0, -1, -1, 0));
    if (!strcmp(n, "userfaultfd")) {
        long fd = r(syscall(__NR_userfaultfd, 1 /* USER_MODE_ONLY */));
        if (fd >= 0)
            close((int)fd);
        return fd < 0 ? fd : 0;
    }
    if (!strcmp(n, "kexec_load"))
        return r(syscall(__NR_kexec_load, 0, 0, NULL, 0xffff0000UL));
    if (!strcmp(n, "kexec_file_load"))
        return r(syscall(__NR_kexec_file_load, -1, -1, 0, NULL, 0x7fffffffUL));
    if (!strcmp(n, "init_module"))
        return r(syscall(__NR_init_module, NULL, 0, ""));
    if (!strcmp(n, "finit_module"))
        return r(syscall(__NR_finit_module, -1, "", 0));
    if (!strcmp(n, "delete_module"))
        return r(
            syscall(__NR_delete_module, "isolation_probe_none", O_NONBLOCK));
    if (!strcmp(n, "mount"))
        return r(syscall(__NR_mount, "none", PROBE_MISSING, "tmpfs", 0, NULL));
    if (!strcmp(n, "umount2"))
        return r(syscall(__NR_umount2, PROBE_MISSING, 0));
    if (!strcmp(n, "pivot_root"))
        return r(syscall(__NR_pivot_root, PROBE_MISSING, PROBE_MISSING));
    if (!strcmp(n, "open_tree"))
        return r(syscall(__NR_open_tree, -1, PROBE_MISSING, 0));
    if (!strcmp(n, "move_mount"))
        return r(
            syscall(__NR_move_mount, -1, PROBE_MISSING, -1, PROBE_MISSING, 0));
    if (!strcmp(n, "fsopen"))
        return r(syscall(__NR_fsopen, "isolation-probe-nofs", 0));
    if (!strcmp(n, "fsconfig"))
        return r(syscall(__NR_fsconfig, -1, 0, NULL, NULL, 0));
    if (!strcmp(n, "fsmount"))
        return r(syscall(__NR_fsmount, -1, 0, 0));
    if (!strcmp(n, "fspick"))
        return r(syscall(__NR_fspick, -1, PROBE_MISSING, 0));
    if (!strcmp(n, "mount_setattr"))
        return r(syscall(__NR_mount_setattr, -1, PROBE_MISSING, 0, NULL, 0));
    if (!strcmp(n, "setns"))
        return r(syscall(__NR_setns, -1, 0));
    if (!strcmp(n, "unshare-user"))
        return r(syscall(__NR_unshare, NS_FLAG_USER));
    if (!strcmp(n, "unshare-user-high"))
        return r(syscall(__NR_unshare, NS_FLAG_USER | (1L << 40)));
    if (!strcmp(n, "unshare-files"))
        return r(syscall(__NR_unshare, NS_FLAG_FILES));
    if (!strcmp(n, "clone-user"))
        return clone_with(NS_FLAG_USER);
    if (!strcmp(n, "clone-plain"))
        return clone_with(0);
    if (!strcmp(n, "clone3"))
        return r(syscall(__NR_clone3, NULL, 0));
    if (!strcmp(n, "socket-vsock"))
        return socket_of(40 /* AF_VSOCK */, SOCK_STREAM, 0);
    if (!strcmp(n, "socket-packet"))
        return socket_of(AF_PACKET, SOCK_RAW, 0);
    if (!strcmp(n, "socket-netlink-audit"))
        return socket_of(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */);
    if (!strcmp(n, "socket-netlink-uevent"))
        return socket_of(AF_NETLINK, SOCK_RAW, 15 /* KOBJECT_UEVENT */);
    if (!strcmp(n, "socket-netlink-route"))
        return socket_of(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
    if (!strcmp(n, "socket-inet"))
        return socket_of(AF_INET, SOCK_STREAM, 0);
    if (!strcmp(n, "socket-unix"))
        return socket_of(AF_UNIX, SOCK_STREAM, 0);
    if (!strcmp(n, "ioctl-tiocsti")) {
        char c = 'x';
        return r(ioctl(0, TIOCSTI, &c));
    }
#if defined(__x86_64__)
    /* x32: the 64-bit entry with the x32 bit, which a kernel without the
     * x32 ABI answers with ENOSYS; the filter must refuse it first */
    if (!strcmp(n, "keyctl-x32"))
        return r(syscall(0x40000000L | __NR_keyctl, 0, -3, 0));
    if (!strcmp(n, "ioctl-tiocsti-x32")) {
        char c = 'x';
        return r(syscall(0x40000000L | 514 /* x32 ioctl */, 0, TIOCSTI, &c));
    }
    if (!strcmp(n, "getpid32"))
        return int80(20, 0, 0, 0);
    if (!strcmp(n, "keyctl32"))
        return int80(288, 0, -3, 0);
    if (!strcmp(n, "ioctl-tiocsti32"))
        return int80(54, 0, TIOCSTI, 0);
    if (!strcmp(n, "socket-vsock32")) {
        long fd = int80(359, 40 /* AF_VSOCK */, SOCK_STREAM, 0);
        if (fd >= 0)
            close((int)fd);
        return fd < 0 ? fd : 0;
    }
    if (!strcmp(n, "socketcall-inet32"))
        return socketcall_socket32(AF_INET);
    if (!strcmp(n, "unshare-user32"))
        return int80(310, NS_FLAG_USER, 0, 0);
    if (!strcmp(n, "mount32")) /* a NULL target: EFAULT where reachable */
        return int80(21, 0, 0, 0);
#endif
    return -EINVAL - 100000; /* unknown name */
}

static int seccomp_run(int argc, char **argv)
{
    static struct sock_filter insns[BPF_MAXINSNS];
    if (argc < 4)
        return 2;
    FILE *f = fopen(argv[2], "rb");
    if (!f)
        return perror(argv[2]), 2;
    size_t n = fread(insns, sizeof insns[0], BPF_MAXINSNS, f);
    fclose(f);
    struct sock_fprog prog = {(unsigned short)n, insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        return perror("seccomp"), 2;
    execv(argv[3], argv + 3);
    perror(argv[3]);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "seccomp-run"))
        return seccomp_run(argc, argv);
    for (int i = 1; i < argc; i++) {
        /* each in a child of its own: an unshare that works changes the
         * caller, and the next probe must start from the same state */
        int fds[2];
        long v = -EINVAL - 100000;
        if (pipe(fds) != 0)
            return perror("pipe"), 2;
        pid_t pid = fork();
        if (pid == 0) {
            v = probe(argv[i]);
            (void)!write(fds[1], &v, sizeof v);
            _exit(0);
        }
        close(fds[1]);
        if (pid < 0)
            return perror("probe"), 2;
        ssize_t got = read(fds[0], &v, sizeof v);
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (got != (ssize_t)sizeof v) {
            if (!WIFSIGNALED(status))
                return perror("probe"), 2;
            printf("%s signal=%d\n", argv[i], WTERMSIG(status));
        } else if (v == -EINVAL - 100000)
            printf("%s unknown\n", argv[i]);
        else if (v < 0)
            printf("%s errno=%ld\n", argv[i], -v);
        else
            printf("%s ok\n", argv[i]);
        fflush(stdout);
    }
    return 0;
}
