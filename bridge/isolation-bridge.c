/*
 * isolation-bridge PORT[,PORT] SOCKET
 * isolation-bridge --pass PORT[,PORT] SOCKET COMMAND [ARG...] (bridge/pass.c)
 * isolation-bridge --reap GRACE -- COMMAND [ARG...] (bridge/reap.c: on the
 *   host, in front of a local launch line; it returns once every process
 *   of the sandbox is gone)
 *
 * Listens on 127.0.0.1:PORT (and on the second PORT: the launch script
 * gives the HTTP proxy port and the SOCKS5 port) and relays every TCP
 * client, both ways, to a new connection to the unix socket SOCKET. It is
 * the in-sandbox bridge from the sandbox's private loopback to the egress
 * proxy's socket.
 *
 * Contract with the launch script: the program binds and listens, then
 * forks; the parent exits 0 only once the child's loop is set up, so a
 * client started right after the parent exits is accepted (the kernel
 * queues it on the listening socket). Any failure before that (bad
 * arguments: 2; port in use, no memory: 1) prints one line on stderr and
 * exits non-zero, and nothing stays behind.
 *
 * The child calls setsid() so that signals for the terminal's foreground
 * job (Ctrl-C aimed at the agent) do not end the agent's only network
 * route, and points stdin, stdout and stderr at /dev/null so that nobody
 * reading the script's output waits for it. It has no exit of its own: it
 * ends with its PID namespace. Under bwrap --unshare-pid, when the sandbox's
 * main process exits the kernel kills every process left in the namespace,
 * the bridge included. Outside a PID namespace, whoever started it must
 * kill it.
 */
#include "listen.h"
#include "pass.h"
#include "reap.h"
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define USAGE                                                                  \
    "usage: isolation-bridge PORT SOCKET\n"                                    \
    "       isolation-bridge PORT,PORT SOCKET   (two different ports)\n"

static int fail(int code, const char *what, const char *detail)
{
    fprintf(stderr, "isolation-bridge: %s: %s\n", what, detail);
    return code;
}

static int bad_arg(const char *what, const char *got)
{
    fprintf(stderr, "isolation-bridge: %s (got \"%s\")\n%s", what, got, USAGE);
    return 2;
}

/* Each relayed client holds two fds: take the whole allowance. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void quiet_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return;
    for (int i = 0; i < 3; i++)
        dup2(fd, i);
    if (fd > 2)
        close(fd);
}

/*
 * The bridge lives as long as the sandbox: it must not keep alive a pipe or
 * file some caller let it inherit (Lua's io.open and io.popen descriptors
 * are not close-on-exec). It needs nothing but stdio at start.
 */
static void close_inherited(void)
{
    if (close_range(3, ~0U, 0) == 0)
        return;
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
}

static int child(const int *listen_fds, int n, const char *path, int ready_fd)
{
    setsid();
    if (chdir("/") < 0) /* hold no directory of the caller busy */
        return fail(1, "chdir /", strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    if (relay_init(listen_fds, n, path) < 0)
        return fail(1, "event loop", strerror(errno));
    quiet_stdio();
    char ok = 1;
    if (write(ready_fd, &ok, 1) != 1)
        return 1;
    close(ready_fd);
    relay_run();
    return 1;
}

/* Waits for the child's ready byte. Returns the parent's exit status. */
static int parent(pid_t pid, int ready_fd)
{
    char ok = 0;
    ssize_t n;
    do {
        n = read(ready_fd, &ok, 1);
    } while (n < 0 && errno == EINTR);
    if (n == 1 && ok == 1)
        return 0;
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        return fail(1, "bridge process", strsignal(WTERMSIG(status)));
    return fail(1, "bridge process", "exited before it was ready");
}

int main(int argc, char **argv)
{
    /* --pass execs the command: what it inherits is not ours to close. */
    if (argc >= 2 && strcmp(argv[1], "--pass") == 0)
        return pass_main(argc - 1, argv + 1);
    /* --reap runs the launch line: its descriptors (the seccomp filter's)
     * go on too. */
    if (argc >= 2 && strcmp(argv[1], "--reap") == 0)
        return reap_main(argc - 1, argv + 1);
    close_inherited();
    if (argc == 2 &&
        (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (argc != 3) {
        fputs(USAGE, stderr);
        return 2;
    }
    int ports[BRIDGE_MAX_PORTS];
    int nports = bridge_parse_ports(argv[1], ports);
    if (nports < 0)
        return bad_arg("PORT must be a number from 1 to 65535", argv[1]);
    size_t len = strlen(argv[2]);
    if (len == 0 || len >= sizeof((struct sockaddr_un *)0)->sun_path)
        return bad_arg("SOCKET must be a path of 1 to 107 bytes", argv[2]);

    int fds[BRIDGE_MAX_PORTS], failed = 0;
    if (bridge_listen_all(ports, nports, SOCK_NONBLOCK, fds, &failed) < 0) {
        char where[32];
        snprintf(where, sizeof where, "127.0.0.1:%d", failed);
        return fail(1, where, strerror(errno));
    }
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0)
        return fail(1, "pipe", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return fail(1, "fork", strerror(errno));
    if (pid == 0) {
        close(ready[0]);
        _exit(child(fds, nports, argv[2], ready[1]));
    }
    close(ready[1]);
    for (int i = 0; i < nports; i++)
        close(fds[i]);
    return parent(pid, ready[0]);
}
