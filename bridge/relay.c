/*
 * relay.c - one epoll loop that relays TCP clients to a unix socket.
 *
 * Each accepted client gets its own new connection to the unix socket (the
 * seed's socat bug was one shared upstream for every client). Bytes move
 * both ways through one shared read buffer: a read is written straight on;
 * only what the destination does not take is kept, and while a direction
 * holds kept bytes its source is not read (backpressure: a slow reader
 * stalls its writer in the kernel, the bridge never buffers without bound).
 * An end of stream on one side becomes shutdown(SHUT_WR) on the other once
 * its kept bytes are out (half-close); the pair is closed when both
 * directions have ended, or at once on an error or a reset.
 *
 * Sockets are edge-triggered, registered once: an endpoint remembers that
 * it is readable or writable until a call returns EAGAIN.
 *
 * Up to RELAY_MAX_LISTENERS listening sockets (the HTTP proxy port and the
 * SOCKS5 port) feed the same loop: every client of any of them gets its own
 * connection to the same unix socket (the proxy tells the protocols apart
 * by their first byte).
 */
#include "relay.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* One read moves at most this much; kept bytes never exceed it. */
#define RELAY_CHUNK (256 * 1024)
/* Upstream backlog full (EAGAIN): retry this often, for this long. */
#define RETRY_MS 5
#define RETRY_LIMIT_MS 10000
/* Out of fds: stop accepting for this long. */
#define ACCEPT_PAUSE_MS 100
#define MAX_EVENTS 256

enum side { CLIENT = 0, UPSTREAM = 1 };

struct pair;

struct endpoint {
    struct pair *pair;
    enum side side;
    int fd;
    bool readable;
    bool writable;
};

/* Bytes travelling from endpoint `from` to the other one. */
struct direction {
    char *kept; /* what the destination has not taken yet */
    size_t kept_len;
    size_t kept_off;
    bool eof;  /* the source has ended */
    bool done; /* eof seen and shutdown(SHUT_WR) sent to the destination */
    bool bulk; /* a read filled the whole buffer */
    /*
     * The destination is gone (the proxy answered, e.g. 403, and closed
     * without reading the whole request): what the source still sends is
     * read and dropped, so that its answer, relayed the other way, is not
     * lost to a reset when the bridge closes a socket with unread bytes.
     */
    bool discard;
};

struct pair {
    struct endpoint end[2];
    struct direction dir[2]; /* dir[s]: from end[s] to end[!s] */
    bool dead;
    long long retry_deadline; /* waiting for the upstream's backlog */
    struct pair *next_waiting;
    struct pair *next_dead;
};

static struct {
    int epfd;
    int listen_fd[RELAY_MAX_LISTENERS]; /* their epoll data: &listen_fd[i] */
    int nlisten;
    struct sockaddr_un upstream;
    socklen_t upstream_len;
    long long accept_paused_until;
    struct pair *waiting; /* clients whose upstream connect got EAGAIN */
    struct pair *dead;    /* freed after the current batch of events */
    char buf[RELAY_CHUNK];
} R;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pair_kill(struct pair *p)
{
    if (p->dead)
        return;
    p->dead = true;
    for (int s = 0; s < 2; s++) {
        if (p->end[s].fd >= 0)
            close(p->end[s].fd); /* also leaves the epoll set */
        p->end[s].fd = -1;
        free(p->dir[s].kept);
        p->dir[s].kept = NULL;
    }
    p->next_dead = R.dead;
    R.dead = p;
}

static void bury_dead(void)
{
    while (R.dead) {
        struct pair *p = R.dead;
        R.dead = p->next_dead;
        free(p);
    }
}

static int watch(struct endpoint *e)
{
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
        .data.ptr = e,
    };
    return epoll_ctl(R.epfd, EPOLL_CTL_ADD, e->fd, &ev);
}

static void drop_kept(struct direction *d)
{
    free(d->kept);
    d->kept = NULL;
    d->kept_len = d->kept_off = 0;
}

/*
 * A send to `to` failed with errno. Writing to the upstream that went away
 * turns the direction to discarding; anything else ends the pair (false).
 */
static bool send_failed(struct direction *d, const struct endpoint *to)
{
    if (to->side == UPSTREAM && (errno == EPIPE || errno == ECONNRESET)) {
        drop_kept(d);
        d->discard = true;
        return true;
    }
    return false;
}

/* Sends what `d` keeps to `to`. Returns false when the pair must die. */
static bool flush_kept(struct direction *d, struct endpoint *to)
{
    while (d->kept_len > d->kept_off && to->writable) {
        ssize_t n = send(to->fd, d->kept + d->kept_off,
                         d->kept_len - d->kept_off, MSG_NOSIGNAL);
        if (n > 0) {
            d->kept_off += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            to->writable = false;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            return send_failed(d, to);
        }
    }
    if (d->kept_len == d->kept_off && d->kept)
        drop_kept(d);
    return true;
}

/* Keeps what the destination did not take. False: out of memory. */
static bool keep(struct direction *d, const char *buf, size_t len)
{
    d->kept = malloc(len);
    if (d->kept == NULL)
        return false;
    memcpy(d->kept, buf, len);
    d->kept_len = len;
    d->kept_off = 0;
    return true;
}

/*
 * The client sends in bulk: the unix socket to the proxy gets a send
 * buffer that holds a few whole reads. With the default (wmem_default,
 * 208 KiB) each 256 KiB read took two writes and a wakeup of both sides
 * in between. Bounded all the same; TCP tunes its own.
 */
static void went_bulk(struct direction *d, const struct endpoint *to)
{
    d->bulk = true;
    int size = 2 * RELAY_CHUNK; /* Linux doubles it */
    if (to->side == UPSTREAM)
        setsockopt(to->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

/* Moves bytes from `from` to `to`. Returns false when the pair must die. */
static bool pump(struct direction *d, struct endpoint *from,
                 struct endpoint *to)
{
    if (!flush_kept(d, to))
        return false;
    while (!d->kept && !d->eof && from->readable) {
        ssize_t n = recv(from->fd, R.buf, sizeof R.buf, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                from->readable = false;
                break;
            }
            if (errno == EINTR)
                continue;
            /*
             * A unix socket whose peer closed with our bytes unread reports
             * ECONNRESET once its queued bytes are read: for the proxy's
             * side that is its end of stream, after its last answer.
             */
            if (from->side == UPSTREAM && errno == ECONNRESET) {
                d->eof = true;
                break;
            }
            return false; /* a client's reset: end both sides now */
        }
        if (n == 0) {
            d->eof = true;
            break;
        }
        if ((size_t)n == sizeof R.buf && !d->bulk)
            went_bulk(d, to);
        size_t sent = 0;
        while (!d->discard && to->writable && sent < (size_t)n) {
            ssize_t w =
                send(to->fd, R.buf + sent, (size_t)n - sent, MSG_NOSIGNAL);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                to->writable = false;
            else if (!(w < 0 && errno == EINTR) && !send_failed(d, to))
                return false;
        }
        if (!d->discard && sent < (size_t)n &&
            !keep(d, R.buf + sent, (size_t)n - sent))
            return false;
    }
    if (d->eof && !d->kept && !d->done) {
        if (!d->discard && shutdown(to->fd, SHUT_WR) < 0 && errno != ENOTCONN)
            return false;
        d->done = true;
    }
    return true;
}

static void pair_service(struct pair *p)
{
    for (int s = 0; s < 2 && !p->dead; s++) {
        if (!pump(&p->dir[s], &p->end[s], &p->end[!s]))
            pair_kill(p);
    }
    if (!p->dead && p->dir[CLIENT].done && p->dir[UPSTREAM].done)
        pair_kill(p);
}

/*
 * Dials the unix socket for p. Returns 1 when connected (or dead: the
 * client was closed), 0 when the upstream's backlog is full (try again).
 */
static int pair_dial(struct pair *p)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pair_kill(p);
        return 1;
    }
    if (connect(fd, (struct sockaddr *)&R.upstream, R.upstream_len) < 0 &&
        errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        if (err == EAGAIN || err == EINTR)
            return 0;
        pair_kill(p); /* no proxy there: the client sees its end */
        return 1;
    }
    p->end[UPSTREAM].fd = fd;
    if (watch(&p->end[CLIENT]) < 0 || watch(&p->end[UPSTREAM]) < 0)
        pair_kill(p);
    return 1;
}

static void retry_waiting(void)
{
    struct pair **link = &R.waiting;
    long long now = now_ms();
    while (*link) {
        struct pair *p = *link;
        bool dialed = pair_dial(p); /* connected, or killed */
        if (dialed || now >= p->retry_deadline) {
            *link = p->next_waiting;
            if (!dialed)
                pair_kill(p); /* the proxy stayed busy too long */
        } else {
            link = &p->next_waiting;
        }
    }
}

/* Out of descriptors: every listener pauses, or they spin. */
static void pause_accepting(void)
{
    for (int i = 0; i < R.nlisten; i++)
        epoll_ctl(R.epfd, EPOLL_CTL_DEL, R.listen_fd[i], NULL);
    R.accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
}

static void accept_clients(int listen_fd)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM)
                pause_accepting(); /* level-triggered listeners */
            return; /* EAGAIN, or a client that gave up already */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct pair *p = calloc(1, sizeof *p);
        if (p == NULL) {
            close(fd);
            continue;
        }
        for (int s = 0; s < 2; s++) {
            p->end[s] = (struct endpoint){.pair = p,
                                          .side = (enum side)s,
                                          .fd = -1,
                                          .readable = true,
                                          .writable = true};
        }
        p->end[CLIENT].fd = fd;
        if (!pair_dial(p)) {
            p->retry_deadline = now_ms() + RETRY_LIMIT_MS;
            p->next_waiting = R.waiting;
            R.waiting = p;
        }
    }
}

static int listen_watch(void)
{
    for (int i = 0; i < R.nlisten; i++) {
        struct epoll_event ev = {.events = EPOLLIN,
                                 .data.ptr = &R.listen_fd[i]};
        if (epoll_ctl(R.epfd, EPOLL_CTL_ADD, R.listen_fd[i], &ev) < 0)
            return -1;
    }
    return 0;
}

/* The listener whose epoll data is ptr, or -1 (ptr is an endpoint). */
static int listener_of(const void *ptr)
{
    for (int i = 0; i < R.nlisten; i++)
        if (ptr == &R.listen_fd[i])
            return R.listen_fd[i];
    return -1;
}

int relay_init(const int *listen_fds, int n, const char *unix_path)
{
    if (n < 1 || n > RELAY_MAX_LISTENERS) {
        errno = EINVAL;
        return -1;
    }
    size_t len = strlen(unix_path);
    if (len == 0 || len >= sizeof R.upstream.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(&R.upstream, 0, sizeof R.upstream);
    R.upstream.sun_family = AF_UNIX;
    memcpy(R.upstream.sun_path, unix_path, len);
    R.upstream_len =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    for (int i = 0; i < n; i++)
        R.listen_fd[i] = listen_fds[i];
    R.nlisten = n;
    R.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (R.epfd < 0)
        return -1;
    if (listen_watch() < 0) {
        int err = errno;
        close(R.epfd);
        errno = err;
        return -1;
    }
    return 0;
}

static int loop_timeout(void)
{
    long long wait = -1;
    if (R.waiting)
        wait = RETRY_MS;
    if (R.accept_paused_until) {
        long long left = R.accept_paused_until - now_ms();
        if (left < 0)
            left = 0;
        if (wait < 0 || left < wait)
            wait = left;
    }
    return (int)wait;
}

int relay_run(void)
{
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(R.epfd, events, MAX_EVENTS, loop_timeout());
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        for (int i = 0; i < n; i++) {
            int lfd = listener_of(events[i].data.ptr);
            if (lfd >= 0) {
                accept_clients(lfd);
                continue;
            }
            struct endpoint *e = events[i].data.ptr;
            if (e->pair->dead)
                continue;
            uint32_t ev = events[i].events;
            if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                e->readable = true;
            if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                e->writable = true;
            pair_service(e->pair);
        }
        if (R.waiting)
            retry_waiting();
        if (R.accept_paused_until && now_ms() >= R.accept_paused_until) {
            R.accept_paused_until = 0;
            listen_watch();
        }
        bury_dead();
    }
}
