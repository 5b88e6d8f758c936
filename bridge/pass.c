/*
 * isolation-bridge --pass PORT[,PORT] SOCKET COMMAND [ARG...]
 *
 * The starter of bridge "pass": it makes the TCP listener on
 * 127.0.0.1:PORT (in the sandbox's network namespace: the socket stays
 * there whoever holds it; with two ports, two listeners in one handover:
 * the HTTP proxy port and the SOCKS5 port), sends it to the proxy over the
 * unix socket
 * SOCKET as SCM_RIGHTS with the handover message (src/proxy/proxy_pass.c),
 * waits for the proxy's "ok", then execs COMMAND. Clients connect to the
 * sandbox's loopback and the proxy accepts them itself: no process relays
 * a byte. Readiness needs no polling: the socket listens before the
 * handover, and the kernel queues a client until the proxy accepts it.
 *
 * The connection that carried the handover is the listener's lifetime:
 * the proxy closes the listener when it ends. A small keeper process
 * holds it (its own session, stdio on /dev/null, no other descriptor);
 * it ends with the sandbox's PID namespace; when the proxy closes, it ends
 * the sandbox (end_sandbox).
 * The keeper is a child of PID 1 (bwrap's init, which reaps it): made so
 * directly when that is the parent, else a grandchild reparented at once.
 * Either way COMMAND does not find an unknown child of its own.
 *
 * Descriptors other than the ones made here are left as they are for
 * COMMAND; everything made here is close-on-exec.
 */
#include "listen.h"

#include "pass.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* The same bytes as PASS_MAGIC in src/proxy/proxy.h. */
static const char MAGIC[] = "\0isolation-pass 1\n";
#define ACK_WAIT_S 10

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "isolation-bridge --pass: %s: %s\n", what, detail);
    return 126;
}

static int connect_proxy(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static int send_listeners(int sock, const int *listeners, int n)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * BRIDGE_MAX_PORTS)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)MAGIC, .iov_len = sizeof MAGIC - 1};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(h), listeners, sizeof(int) * n);
    ssize_t r;
    do {
        r = sendmsg(sock, &m, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    return r == (ssize_t)(sizeof MAGIC - 1) ? 0 : -1;
}

/* The proxy's reply line, up to its newline (or cap-1 bytes). */
static ssize_t read_reply(int sock, char *out, size_t cap)
{
    struct timeval tv = {.tv_sec = ACK_WAIT_S};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(sock, out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (memchr(out, '\n', n))
            break;
    }
    out[n] = '\0';
    return (ssize_t)n;
}

/* The initial PID namespace's inode: a constant of the kernel
 * (PROC_PID_INIT_INO, include/linux/proc_ns.h, since 3.8). */
#define HOST_PID_NS_INO 0xEFFFFFFCu

/* The proxy closed the handover: the session that owned the sandbox has
 * ended (its proxy is torn down on every path that ends one), and nothing
 * of the sandbox should run on after it: a container whose engine client
 * was killed, or a podman that took SIGTERM while starting and let its
 * container run. SIGKILL to every process of the PID namespace but its
 * init (the kernel spares it), which then ends with its child. Only where
 * kill(-1) stays inside the sandbox: the starter ran as a child of PID 1
 * and that namespace is not the host's (there kill(-1) would reach every
 * process of the user). */
static void end_sandbox(int in_sandbox)
{
    struct stat st;
    if (in_sandbox && stat("/proc/self/ns/pid", &st) == 0 &&
        st.st_ino != HOST_PID_NS_INO)
        kill(-1, SIGKILL);
    _exit(0);
}

/* The keeper: holds sock until the proxy closes it or the sandbox ends. */
static void keep(int sock, int in_sandbox)
{
    setsid();
    if (chdir("/") < 0)
        _exit(1);
    int null = open("/dev/null", O_RDWR);
    for (int i = 0; i < 3 && null >= 0; i++)
        dup2(null, i);
    if (sock != 3 && dup2(sock, 3) < 0)
        _exit(1);
    /* Nothing of COMMAND's stays open here (a pipe end would never see
     * its EOF). */
    if (close_range(4, ~0U, 0) != 0)
        for (int fd = 4; fd < 1024; fd++)
            close(fd);
    /* No timeout now: the ack's wait (SO_RCVTIMEO) would end the keeper,
     * and with it the sandbox's route, ACK_WAIT_S after the start. */
    struct timeval none = {0};
    setsockopt(3, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    char b[64];
    for (;;) {
        ssize_t r = read(3, b, sizeof b);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
            end_sandbox(in_sandbox);
    }
}

/* Under bwrap (and any init that reaps) the parent is PID 1 of the
 * namespace: one clone with CLONE_PARENT makes the keeper its child at
 * once, with no middle process to wait for (that wait cost 0.5 to 4 ms of
 * a launch on a loaded machine: two more scheduling hand-offs). Elsewhere
 * (a parent that would not reap it, or the bridge itself PID 1, where the
 * kernel refuses CLONE_PARENT) the double fork. */
static int start_keeper(int sock)
{
    int in_sandbox = getppid() == 1;
    if (in_sandbox) {
        long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0L, 0L, 0L, 0L);
        if (pid == 0)
            keep(sock, in_sandbox);
        if (pid > 0)
            return 0;
    }
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (fork() == 0)
            keep(sock, in_sandbox);
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

int pass_main(int argc, char **argv)
{
    if (argc < 4) {
        fputs("usage: isolation-bridge --pass PORT SOCKET COMMAND [ARG...]\n",
              stderr);
        return 2;
    }
    int ports[BRIDGE_MAX_PORTS];
    int nports = bridge_parse_ports(argv[1], ports);
    size_t len = strlen(argv[2]);
    if (nports < 0 || len == 0 ||
        len >= sizeof((struct sockaddr_un *)0)->sun_path) {
        fputs("isolation-bridge --pass: PORT must be 1 to 65535 (or two "
              "different ones joined by a comma) and SOCKET a path of 1 to "
              "107 bytes\n",
              stderr);
        return 2;
    }
    int lfds[BRIDGE_MAX_PORTS], failed = 0;
    if (bridge_listen_all(ports, nports, 0, lfds, &failed) < 0) {
        char where[32];
        snprintf(where, sizeof where, "127.0.0.1:%d", failed);
        return fail(where, strerror(errno));
    }
    int sock = connect_proxy(argv[2]);
    if (sock < 0)
        return fail(argv[2], strerror(errno));
    if (send_listeners(sock, lfds, nports) < 0)
        return errno == EPERM
                   ? fail("the proxy did not take the listener",
                          "its socket takes no descriptors (accept_listeners "
                          "is 0, or it has taken all it may)")
                   : fail("handover", strerror(errno));
    /* the proxy's now: COMMAND must not accept on them */
    for (int i = 0; i < nports; i++)
        close(lfds[i]);
    char reply[160];
    read_reply(sock, reply, sizeof reply);
    if (strcmp(reply, "ok\n") != 0) {
        char *nl = strchr(reply, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(reply, "no ", 3) == 0)
            return fail("the proxy refused the listener", reply + 3);
        /* An HTTP answer: it read the handover as a request (it takes no
         * listeners), or it is full (503). */
        if (strncmp(reply, "HTTP/1.1 503", 12) == 0)
            return fail("the proxy did not take the listener",
                        "it has max_connections clients already");
        return fail("the proxy did not take the listener",
                    reply[0] ? "it does not accept listeners "
                               "(accept_listeners is 0)"
                             : "no reply");
    }
    signal(SIGPIPE, SIG_DFL);
    if (start_keeper(sock) < 0)
        return fail("fork", strerror(errno));
    close(sock);
    execvp(argv[3], argv + 3);
    return fail(argv[3], strerror(errno));
}
