/*
 * proxy_pass.c - listeners handed over the proxy's unix socket.
 *
 * A socket belongs to the network namespace it was made in, whoever holds
 * it later. A sandbox with no network but its loopback makes a TCP
 * listener there and sends it here (SCM_RIGHTS): the proxy then accepts
 * the sandbox's connections itself, with no bridge process and no second
 * hop (bridge "pass", bridge/isolation-bridge.c --pass).
 *
 * The handover is a unix socket connection whose first message is
 * PASS_MAGIC (its first byte is NUL, which no HTTP request starts with)
 * with the listeners as ancillary data. Only a proxy whose owner asked
 * (accept_listeners = n) looks for it, and holds at most n listeners at
 * once. Every received descriptor must be a listening TCP socket bound to
 * a loopback address; any other handover (a connected socket, a file, a
 * pipe, a UDP socket, a listener on another address, too many
 * descriptors, truncated control data, a wrong message) is refused whole:
 * every descriptor that arrived is closed, the reply says why, and an
 * error event is given. Nothing else is done with a descriptor: it is
 * never read, written or connected.
 *
 * Descriptors are the one thing a peer can make the proxy's thread wait
 * on: the kernel closes what a reader does not take (and what is queued on
 * a connection the proxy closes) in the reader's thread, and the last
 * close of a TCP socket with SO_LINGER and unsent bytes waits for its
 * peer, up to for ever; a blocking listener a sender kept a copy of makes
 * accept() wait. So no peer may send descriptors at all (SO_PASSRIGHTS
 * off: the sender's sendmsg fails with EPERM) except while a proxy that
 * asked for listeners has free slots. Once it holds accept_listeners of
 * them it is sealed: descriptors are refused on its socket and on every
 * connection it has, and no handover is taken again, even after the
 * listeners end. A sandbox's starter fills the slots before any of the
 * sandbox's own code runs (isolate, the session manager: 2 of 2), so
 * nothing the agent runs can ever hand the proxy a descriptor. Kernels
 * before 6.16 have no SO_PASSRIGHTS: there the proxy cannot refuse them
 * (README, Not promised).
 *
 * The connection that brought the listeners stays open as their control
 * connection (the starter leaves a process holding it): when it ends
 * (the sandbox is gone: its PID namespace took that process) its
 * listeners are closed, so a finished sandbox's namespace is not kept
 * alive by the proxy. A handed-over listener's connections are ordinary
 * TCP clients (proxy_accept): the same checks, limits, stats and events.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/proxy_conn.h"

/* Linux 6.16's value for x86 and arm (asm-generic); headers older than the
 * kernel may not have it. Elsewhere the value differs: not guessed. */
#if !defined(SO_PASSRIGHTS) && (defined(__x86_64__) || defined(__i386__) ||    \
                                defined(__aarch64__) || defined(__arm__))
#define SO_PASSRIGHTS 83
#endif

int proxy_pass_rights(int fd, bool on)
{
#ifdef SO_PASSRIGHTS
    int v = on;
    return setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &v, sizeof v);
#else
    (void)fd;
    (void)on;
    errno = ENOPROTOOPT;
    return -1;
#endif
}

/* All slots held: no descriptor reaches this proxy again (see the top). */
static void seal(struct proxy *p)
{
    p->pass_sealed = true;
    uv_os_fd_t fd;
    if (p->listener_open && uv_fileno(&p->listener.handle, &fd) == 0)
        proxy_pass_rights(fd, false);
    for (struct conn *c = p->conns; c; c = c->next)
        if (uv_fileno(&c->client.h, &fd) == 0)
            proxy_pass_rights(fd, false);
}

/* Room for a few more descriptors than may be kept, so that a handover
 * with too many is seen as such (the kernel closes what does not fit, and
 * says so with MSG_CTRUNC). */
#define PASS_CMSG_FDS 8
#define PASS_BACKLOG 4096

struct pass_listener {
    uv_tcp_t tcp;
    struct proxy *px;
    struct pass_listener *next;
};

bool proxy_pass_alloc(struct conn *c, uv_buf_t *buf)
{
    if (c->pass == PASS_PROBE && c->state != CONN_HEAD) {
        c->pass = 0; /* an error reply was sent: an ordinary client now */
        return false;
    }
    /* No buffer: libuv then reports UV_ENOBUFS once the socket is
     * readable, without reading, and proxy_pass_read looks itself. */
    *buf = uv_buf_init(NULL, 0);
    return true;
}

static void on_pass_connection(uv_stream_t *server, int status)
{
    struct pass_listener *l = server->data;
    struct proxy *p = l->px;
    if (status < 0 || p->closing)
        return;
    /* Linux copies TCP_NODELAY from the listener (set at the handover). */
    proxy_accept(p, server, false, true);
}

static void on_pass_listener_closed(uv_handle_t *h)
{
    struct pass_listener *l = h->data;
    struct proxy *p = l->px;
    free(l);
    p->handles--;
    if (p->closing && p->handles == 0)
        proxy_unref(p); /* the loop's reference */
}

void proxy_pass_conn_closed(struct conn *c)
{
    struct pass_listener *l = c->listeners;
    c->listeners = NULL;
    while (l) {
        struct pass_listener *next = l->next;
        c->px->npass--;
        uv_close((uv_handle_t *)&l->tcp, on_pass_listener_closed);
        l = next;
    }
}

/* NULL when fd is a listening TCP socket on a loopback address. */
static const char *listener_problem(int fd)
{
    int v = 0;
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) != 0)
        return "is not a socket";
    if (v != SOCK_STREAM)
        return "is not a stream socket";
    len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len) != 0 ||
        v != IPPROTO_TCP)
        return "is not a TCP socket";
    len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v != 1)
        return "is not listening";
    struct sockaddr_storage ss;
    len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return "has no address";
    if (ss.ss_family == AF_INET) {
        uint32_t a = ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr);
        if ((a >> 24) == 127)
            return NULL;
    } else if (ss.ss_family == AF_INET6) {
        if (IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr))
            return NULL;
    }
    return "is not bound to a loopback address";
}

/* The descriptors of every SCM_RIGHTS message in m, at most cap. */
static size_t take_fds(struct msghdr *m, int *fds, size_t cap)
{
    size_t n = 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
            h->cmsg_len < CMSG_LEN(0))
            continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
            if (n < cap)
                fds[n++] = fd;
            else
                close(fd);
        }
    }
    return n;
}

static void reply(struct conn *c, const char *text)
{
    uv_buf_t b = uv_buf_init((char *)text, (unsigned)strlen(text));
    uv_try_write(&c->client.s, &b, 1);
}

static void refuse(struct conn *c, int *fds, size_t nfds, const char *why)
{
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    char text[200];
    snprintf(text, sizeof text, "listener handover refused: %s", why);
    proxy_event(c->px, c, "error", "bad_handover", 0, text);
    snprintf(text, sizeof text, "no %s\n", why);
    reply(c, text);
    conn_close(c);
}

/* Takes fds (all checked) as listeners of the control connection c. */
static int keep_listeners(struct conn *c, int *fds, size_t nfds)
{
    struct proxy *p = c->px;
    for (size_t i = 0; i < nfds; i++) {
        struct pass_listener *l = calloc(1, sizeof *l);
        if (!l || uv_tcp_init(&p->loop->uv, &l->tcp) != 0) {
            free(l);
            for (size_t j = i; j < nfds; j++)
                close(fds[j]);
            return -1;
        }
        l->px = p;
        l->tcp.data = l;
        l->next = c->listeners;
        c->listeners = l;
        p->handles++;
        p->npass++;
        int one = 1;
        setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* Accepted clients inherit SO_LINGER: with it, the loop's close
         * of a stalled client would wait for the linger time. */
        struct linger off = {0, 0};
        setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &off, sizeof off);
        if (uv_tcp_open(&l->tcp, fds[i]) != 0) {
            close(fds[i]);
            for (size_t j = i + 1; j < nfds; j++)
                close(fds[j]);
            return -1;
        }
        if (uv_listen((uv_stream_t *)&l->tcp, PASS_BACKLOG,
                      on_pass_connection) != 0) {
            for (size_t j = i + 1; j < nfds; j++)
                close(fds[j]);
            return -1;
        }
    }
    return 0;
}

static void handover(struct conn *c, int sock)
{
    struct proxy *p = c->px;
    char data[sizeof PASS_MAGIC + 16];
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int) * PASS_CMSG_FDS)];
    } ctl;
    struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof ctl.buf};
    ssize_t r;
    do {
        r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == EAGAIN)
        return;
    int fds[PASS_CMSG_FDS];
    size_t nfds = r < 0 ? 0 : take_fds(&m, fds, PASS_CMSG_FDS);
    char why[120];
    const char *problem = NULL;
    if (p->pass_sealed) {
        snprintf(why, sizeof why,
                 "the proxy took its accept_listeners (%u) already and takes "
                 "no more",
                 p->opts.accept_listeners);
        problem = why;
    } else if (r != (ssize_t)sizeof PASS_MAGIC - 1 ||
               memcmp(data, PASS_MAGIC, sizeof PASS_MAGIC - 1) != 0)
        problem = "the message is not a listener handover";
    else if (m.msg_flags & MSG_CTRUNC)
        problem = "more descriptors than a handover may carry (2)";
    else if (nfds == 0)
        problem = "it carried no descriptor";
    else if (nfds > PASS_MAX_FDS)
        problem = "more descriptors than a handover may carry (2)";
    else if (p->npass + nfds > p->opts.accept_listeners) {
        snprintf(why, sizeof why,
                 "the proxy holds %u of its accept_listeners (%u) already",
                 p->npass, p->opts.accept_listeners);
        problem = why;
    }
    for (size_t i = 0; !problem && i < nfds; i++) {
        const char *bad = listener_problem(fds[i]);
        if (bad) {
            snprintf(why, sizeof why, "descriptor %zu of %zu %s", i + 1, nfds,
                     bad);
            problem = why;
        }
    }
    if (problem) {
        refuse(c, fds, nfds, problem);
        return;
    }
    c->pass = PASS_CONTROL;
    uv_timer_stop(&c->timer); /* held for the sandbox's life */
    /* Its holder (the sandbox's keeper) sends nothing more. */
    proxy_pass_rights(sock, false);
    if (keep_listeners(c, fds, nfds) != 0) {
        reply(c, "no the proxy could not listen on it\n");
        conn_close(c);
        return;
    }
    if (p->npass >= p->opts.accept_listeners)
        seal(p); /* before the ok: the sandbox's own code runs after it */
    reply(c, "ok\n");
}

void proxy_pass_read(struct conn *c, ssize_t n)
{
    uv_os_fd_t fd;
    if (n != UV_ENOBUFS || uv_fileno(&c->client.h, &fd) != 0) {
        if (n < 0)
            conn_close(c);
        return;
    }
    char first;
    ssize_t r = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0 || c->pass == PASS_CONTROL) {
        /* The end, or bytes after a handover: nothing more is taken. */
        conn_close(c);
        return;
    }
    if (first != '\0') {
        c->pass = 0; /* an HTTP client: libuv reads it from the next wakeup */
        return;
    }
    handover(c, fd);
}
