/*
 * proxy_listen.c - the proxy's listener: its socket, made on the Lua thread
 * with plain system calls so that every failure is reported by proxy()
 * itself, and on the loop's thread its handle (start, stop) and the
 * admission of each client it accepts (max_connections and the process's
 * descriptor pool) before proxy_conn.c reads a byte.
 *
 * A unix socket is created 0600 (fchmod before bind: Linux takes the file's
 * mode from the socket's inode), under a temporary name in the same
 * directory, and renamed into place once it listens. A socket file that
 * nobody listens on is replaced; a live one, anything that is not a
 * socket, and a path too long for sun_path are errors, and nothing is
 * deleted then. TCP listens only on 127.0.0.1 or ::1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proxy/proxy.h"

#define BACKLOG 4096

/* Removes path only if it is still the socket file (dev, ino) we made. */
static void unlink_ours(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino &&
        st.st_dev == dev)
        unlink(path);
}

/*
 * A fresh name in path's directory that fits a sun_path as path does:
 * ".<random>" of up to TMP_BASE_MAX bytes, shorter when the directory
 * leaves less room (down to one byte, without the dot, for a path at the
 * limit with a one-byte name). bind() never replaces a file, so a name
 * that is taken only costs a retry.
 */
#define TMP_BASE_MAX 12
#define TMP_TRIES 64
static void tmp_name(const char *path, char *out)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    static atomic_uint counter;
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t room = sizeof(((struct sockaddr_un *)0)->sun_path) - 1 - dirlen;
    size_t n = room < TMP_BASE_MAX ? room : TMP_BASE_MAX;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)atomic_fetch_add(&counter, 1) << 40) ^
                 (uint64_t)ts.tv_sec;
    memcpy(out, path, dirlen);
    size_t o = dirlen;
    if (n > 1)
        out[o++] = '.';
    while (o < dirlen + n) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        out[o++] = chars[(x >> 33) % (sizeof chars - 1)];
    }
    out[o] = '\0';
}

/* The socket file is made under a temporary name and renamed into place
 * after listen(): a client that sees path can connect at once (between
 * bind and listen it would get ECONNREFUSED). Never over another file. */
static int publish(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* A file system without RENAME_NOREPLACE: link() does not replace
     * either, and a socket file's second name reaches the same socket. */
    if (link(tmp, path) != 0)
        return -1;
    unlink(tmp);
    return 0;
}

int proxy_listen_unix(struct proxy *p, const char *path, char *err,
                      size_t errcap)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof sa.sun_path) {
        snprintf(err, errcap,
                 "isolation: unix must be a path of 1 to %zu bytes for a "
                 "unix socket (got %zu bytes)",
                 sizeof sa.sun_path - 1, len);
        return -1;
    }
    memcpy(sa.sun_path, path, len);

    struct stat st;
    bool stale = false;
    dev_t stale_dev = 0;
    ino_t stale_ino = 0;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errcap,
                     "isolation: unix path \"%s\" exists and is not a "
                     "socket (left as it is)",
                     path);
            return -1;
        }
        /* Is somebody listening? Only a refused connect means stale. */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0) {
            snprintf(err, errcap, "isolation: unix socket: %s",
                     strerror(errno));
            return -1;
        }
        int r = connect(probe, (struct sockaddr *)&sa, sizeof sa);
        int e = errno;
        close(probe);
        if (r == 0) {
            snprintf(err, errcap,
                     "isolation: unix socket \"%s\" is in use by a "
                     "listening process",
                     path);
            return -1;
        }
        if (e != ECONNREFUSED) {
            snprintf(err, errcap,
                     "isolation: unix socket \"%s\" cannot be probed: %s", path,
                     strerror(e));
            return -1;
        }
        stale = true;
        stale_dev = st.st_dev;
        stale_ino = st.st_ino;
    } else if (errno != ENOENT) {
        snprintf(err, errcap, "isolation: unix path \"%s\": %s", path,
                 strerror(errno));
        return -1;
    }

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        snprintf(err, errcap, "isolation: unix socket: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    struct sockaddr_un tsa;
    memset(&tsa, 0, sizeof tsa);
    tsa.sun_family = AF_UNIX;
    int r = -1;
    for (int i = 0; i < TMP_TRIES && r != 0; i++) {
        tmp_name(path, tsa.sun_path);
        if (strcmp(tsa.sun_path, path) == 0)
            continue; /* a one-byte name drew itself */
        r = bind(fd, (struct sockaddr *)&tsa, sizeof tsa);
        if (r != 0 && errno != EADDRINUSE)
            break;
    }
    if (r != 0) {
        snprintf(err, errcap, "isolation: unix socket \"%s\": %s", path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    const char *tmp = tsa.sun_path;
    if (lstat(tmp, &st) != 0) {
        snprintf(err, errcap, "isolation: unix socket \"%s\": %s", path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    /* Belt and braces against an odd umask: the file must end up 0600. */
    if (chmod(tmp, 0600) != 0 || listen(fd, BACKLOG) != 0) {
        snprintf(err, errcap, "isolation: unix socket \"%s\": %s", path,
                 strerror(errno));
        goto fail;
    }
    if (stale) {
        /* The same file we probed, still a socket: replace it. */
        struct stat again;
        if (lstat(path, &again) == 0 &&
            (again.st_ino != stale_ino || again.st_dev != stale_dev ||
             !S_ISSOCK(again.st_mode) || unlink(path) != 0)) {
            snprintf(err, errcap,
                     "isolation: stale unix socket \"%s\" cannot be "
                     "replaced",
                     path);
            goto fail;
        }
    }
    if (publish(tmp, path) != 0) {
        snprintf(err, errcap, "isolation: unix socket \"%s\": %s", path,
                 errno == EEXIST ? "a file appeared there meanwhile (left "
                                   "as it is)"
                                 : strerror(errno));
        goto fail;
    }
    /* No client may send this socket a descriptor, unless its owner wants
     * listeners handed over (sealed after those: proxy_pass.c). The kernel
     * closes what a reader does not take, in the reader's thread, and the
     * last close of a TCP socket with SO_LINGER and unsent bytes waits:
     * one sent with any request would stop the loop (every proxy on it). */
    if (p->opts.accept_listeners == 0)
        proxy_pass_rights(fd, false);
    p->listen_fd = fd;
    p->is_unix = true;
    memcpy(p->unix_path, path, len + 1);
    p->unix_dev = st.st_dev;
    p->unix_ino = st.st_ino;
    p->port = 0;
    snprintf(p->address, sizeof p->address, "unix:%s", path);
    return 0;

fail:
    close(fd);
    unlink_ours(tmp, st.st_dev, st.st_ino);
    return -1;
}

void proxy_listen_unlink(struct proxy *p)
{
    struct stat st;
    if (!p->is_unix || !p->unix_path[0])
        return;
    /* Only ours: somebody may have replaced the file since. */
    if (lstat(p->unix_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_ino == p->unix_ino && st.st_dev == p->unix_dev)
        unlink(p->unix_path);
    p->unix_path[0] = '\0';
}

/* PORT: "0", or 1 to 5 digits without a leading zero, at most 65535. */
static int parse_port(const char *s, size_t n, int *port)
{
    if (n == 0 || n > 5 || (s[0] == '0' && n > 1))
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

/* Exactly two spellings, compared byte for byte: no other 127.x address
 * (a listener there is reachable by other names than the one the caller
 * gave), no other spelling of ::1, no port with a leading zero (":0080"
 * would bind port 80). */
int proxy_listen_parse(const char *spec, size_t len,
                       struct sockaddr_storage *ss, socklen_t *sslen)
{
    static const char v4[] = "127.0.0.1:", v6[] = "[::1]:";
    const size_t n4 = sizeof v4 - 1, n6 = sizeof v6 - 1;
    int port = -1;
    memset(ss, 0, sizeof *ss);
    if (len > n4 && memcmp(spec, v4, n4) == 0 &&
        parse_port(spec + n4, len - n4, &port) == 0) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s4->sin_port = htons((uint16_t)port);
        *sslen = sizeof *s4;
        return 0;
    }
    if (len > n6 && memcmp(spec, v6, n6) == 0 &&
        parse_port(spec + n6, len - n6, &port) == 0) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        s6->sin6_port = htons((uint16_t)port);
        *sslen = sizeof *s6;
        return 0;
    }
    return -1;
}

int proxy_listen_tcp(struct proxy *p, const struct sockaddr_storage *addr,
                     socklen_t addrlen, const char *spec, char *err,
                     size_t errcap)
{
    struct sockaddr_storage ss = *addr;
    socklen_t sslen = addrlen;
    int fd =
        socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errcap, "isolation: listen \"%s\": %s", spec,
                 strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    /* Linux copies TCP_NODELAY from the listener to every accepted socket:
     * set once here, it saves a setsockopt per connection. */
    p->nodelay_inherited =
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
    /* No TCP_DEFER_ACCEPT: a connection the kernel holds until its first
     * bytes is one the proxy cannot see, so close() could not end it (a
     * silent client would hang until it spoke, then get a reset). */
    if (bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
        snprintf(err, errcap, "isolation: listen \"%s\": %s", spec,
                 strerror(errno));
        close(fd);
        return -1;
    }
    p->listen_fd = fd;
    p->is_unix = false;
    p->self = ss;
    char text[INET6_ADDRSTRLEN];
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof text);
        p->port = ntohs(s6->sin6_port);
        snprintf(p->address, sizeof p->address, "[%s]:%d", text, p->port);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &s4->sin_addr, text, sizeof text);
        p->port = ntohs(s4->sin_port);
        snprintf(p->address, sizeof p->address, "%s:%d", text, p->port);
    }
    return 0;
}

void proxy_maybe_release(struct proxy *p)
{
    if (p->closing && p->handles == 0)
        proxy_unref(p); /* the loop's reference */
}

/* Proxies open in the process: the pool's rules are for sharing, and a
 * proxy alone in its process keeps every descriptor its limit allows. */
static atomic_int proxies_open;

bool proxy_pool_shared(void)
{
    return atomic_load_explicit(&proxies_open, memory_order_relaxed) > 1;
}

/* ---- accepting (on the loop's thread) ---- */

/*
 * Why a new client of p must be refused (NULL: it is admitted). Each
 * client may take two descriptors (its own and the upstream's): p stays
 * within max_connections and, when it shares the process with other
 * proxies, they all stay within the process's pool and no one proxy takes
 * more than half of it, so a flooded session leaves the others room to
 * accept and dial.
 */
static const char *admission(struct proxy *p)
{
    long usable = atomic_load_explicit(&proxy_fds_usable, memory_order_relaxed);
    if (p->nclients >= p->opts.max_connections)
        return "too many connections (this proxy's max_connections)";
    if (!proxy_pool_shared())
        return NULL;
    if (atomic_load_explicit(&proxy_fds_used, memory_order_relaxed) + 2 >
        usable)
        return "the descriptors the process keeps for proxies are in use";
    if ((long)p->fds + 2 > usable / 2)
        return "this proxy holds half of the process's descriptors for proxies";
    return NULL;
}

/* accept() itself failed. libuv has then already used its reserve
 * descriptor (closed it, accepted and closed every waiting client, opened
 * it again), so the listener does not spin; the owner hears of it once
 * per run of failures. */
static void accept_failed(struct proxy *p, int status)
{
    if (p->accept_failing)
        return;
    p->accept_failing = true;
    char reason[160];
    snprintf(reason, sizeof reason,
             "accept failed (%s): clients are closed unanswered until "
             "descriptors are free",
             uv_strerror(status));
    proxy_event(p, NULL, "error", "too_many", 503, reason);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct proxy *p = server->data;
    if (p->closing)
        return;
    if (status < 0) {
        accept_failed(p, status);
        return;
    }
    proxy_accept(p, server, p->is_unix, p->nodelay_inherited);
}

void proxy_accept(struct proxy *p, uv_stream_t *server, bool is_unix,
                  bool nodelay_inherited)
{
    struct conn *c = conn_accept(p, server, is_unix);
    if (!c)
        return;
    p->accept_failing = false;
    const char *refused = admission(p);
    if (refused)
        conn_refuse(c, refused);
    else
        conn_start(c, is_unix, nodelay_inherited);
}

static void on_listener_closed(uv_handle_t *h)
{
    struct proxy *p = h->data;
    p->handles--;
    proxy_maybe_release(p);
}

int proxy_start(struct proxy *p)
{
    uv_loop_t *loop = &p->loop->uv;
    int r = p->is_unix ? uv_pipe_init(loop, &p->listener.pipe, 0)
                       : uv_tcp_init(loop, &p->listener.tcp);
    if (r != 0) {
        close(p->listen_fd);
        p->listen_fd = -1;
        p->closing = true;
        proxy_maybe_release(p);
        return r;
    }
    p->listener.handle.data = p;
    p->handles++;
    p->listener_open = true;
    r = p->is_unix ? uv_pipe_open(&p->listener.pipe, p->listen_fd)
                   : uv_tcp_open(&p->listener.tcp, p->listen_fd);
    if (r != 0)
        close(p->listen_fd);
    p->listen_fd = -1;
    if (r == 0)
        r = uv_listen(&p->listener.stream, BACKLOG, on_connection);
    atomic_fetch_add_explicit(&proxies_open, 1, memory_order_relaxed);
    p->counted_open = true;
    if (r != 0)
        proxy_stop(p);
    return r;
}

void proxy_stop(struct proxy *p)
{
    if (p->closing)
        return;
    p->closing = true;
    if (p->counted_open)
        atomic_fetch_sub_explicit(&proxies_open, 1, memory_order_relaxed);
    if (p->listener_open) {
        p->listener_open = false;
        uv_close(&p->listener.handle, on_listener_closed);
    }
    while (p->conns)
        conn_close(p->conns);
    proxy_dns_close(p);
    proxy_route_idle_drain(p);
    proxy_maybe_release(p);
}
