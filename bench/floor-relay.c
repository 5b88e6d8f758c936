/*
 * floor-relay.c - the cheapest CONNECT relay this machine can run, as a
 * reference row for `make bench`: what any proxy pays here for two TCP
 * connections and two more hops, before doing anything careful.
 *
 * One thread, epoll, blocking connect to an IPv4 literal, no DNS, no
 * address rules, no SNI check, no timeouts, no limits, no events; the
 * allowlist is an exact "host:port" match against $BENCH_ALLOW, made once
 * per connection (a forward request's connection is relayed blind after
 * its first head). It is a measuring stick, not a proxy: never point
 * anything real at it.
 *
 *   floor-relay 127.0.0.1:18142
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX 4096
#define RELAY_BUF (1 << 20)

struct conn {
    int fd;
    struct conn *peer; /* NULL while the head is read */
    bool eof;          /* this side sent its end */
    bool dead;         /* closed; freed after the current epoll batch */
    struct conn *next_dead;
    size_t head_len;
    char head[HEAD_MAX];
};

static int ep;
static struct conn *graveyard;
static char **allow;
static size_t nallow;
static char relay_buf[RELAY_BUF];

static void watch(struct conn *c)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static struct conn *conn_new(int fd)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    watch(c);
    return c;
}

/* Closed now, freed after the batch: a later event of the same batch may
 * still name it. */
static void conn_free(struct conn *c)
{
    close(c->fd); /* also leaves the epoll set */
    c->dead = true;
    c->next_dead = graveyard;
    graveyard = c;
}

static void pair_free(struct conn *c)
{
    if (c->peer)
        conn_free(c->peer);
    conn_free(c);
}

/* Writes all of it; waits for room if the socket is full (one tunnel at a
 * time then, which the single-tunnel throughput test does not mind). */
static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, -1);
        } else if (w < 0 && errno != EINTR) {
            return false;
        }
    }
    return true;
}

static bool allowed(const char *authority)
{
    for (size_t i = 0; i < nallow; i++)
        if (strcmp(allow[i], authority) == 0)
            return true;
    return false;
}

static void reply(struct conn *c, const char *status)
{
    char r[128];
    int n = snprintf(r, sizeof r,
                     "HTTP/1.1 %s\r\nContent-Length: 0\r\nConnection: "
                     "close\r\n\r\n",
                     status);
    write_all(c->fd, r, (size_t)n);
    conn_free(c);
}

/* Dials an IPv4 "a.b.c.d:port"; -1 when it cannot. */
static int dial(char *authority)
{
    char *colon = strrchr(authority, ':');
    unsigned port = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (!colon || sscanf(colon + 1, "%u", &port) != 1 || port == 0 ||
        port > 65535)
        return -1;
    *colon = '\0';
    sa.sin_port = htons((uint16_t)port);
    int ok = inet_pton(AF_INET, authority, &sa.sin_addr);
    *colon = ':';
    if (ok != 1)
        return -1;
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (up < 0)
        return -1;
    setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(up, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(up);
        return -1;
    }
    fcntl(up, F_SETFL, O_NONBLOCK);
    return up;
}

/*
 * A complete head. "CONNECT a.b.c.d:port HTTP/1.x": dial, 200, relay.
 * "GET http://a.b.c.d:port/... HTTP/1.x": dial, send the head as it came
 * (the upstream takes the absolute form) and relay blind from then on:
 * later requests on the connection are not looked at (a floor, not a
 * proxy).
 */
static void on_head(struct conn *c, size_t head_end)
{
    char method[16], target[256];
    if (sscanf(c->head, "%15s %255s HTTP/1.", method, target) != 2) {
        reply(c, "400 Bad Request");
        return;
    }
    bool tunnel = strcmp(method, "CONNECT") == 0;
    char authority[256];
    if (tunnel) {
        snprintf(authority, sizeof authority, "%s", target);
    } else if (sscanf(target, "http://%255[^/]", authority) != 1) {
        reply(c, "400 Bad Request");
        return;
    }
    if (!allowed(authority)) {
        reply(c, "403 Forbidden");
        return;
    }
    int up = dial(authority);
    if (up < 0) {
        reply(c, "502 Bad Gateway");
        return;
    }
    struct conn *u = conn_new(up);
    if (!u) {
        conn_free(c);
        return;
    }
    c->peer = u;
    u->peer = c;
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    bool sent =
        tunnel ? write_all(c->fd, ok, sizeof ok - 1) &&
                     write_all(up, c->head + head_end, c->head_len - head_end)
               : write_all(up, c->head, c->head_len);
    if (!sent)
        pair_free(c);
}

static void on_readable(struct conn *c)
{
    if (!c->peer) {
        ssize_t n =
            read(c->fd, c->head + c->head_len, HEAD_MAX - 1 - c->head_len);
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN)
                conn_free(c);
            return;
        }
        c->head_len += (size_t)n;
        c->head[c->head_len] = '\0';
        char *end = strstr(c->head, "\r\n\r\n");
        if (end)
            on_head(c, (size_t)(end + 4 - c->head));
        else if (c->head_len == HEAD_MAX - 1)
            reply(c, "431 Request Header Fields Too Large");
        return;
    }
    ssize_t n = read(c->fd, relay_buf, sizeof relay_buf);
    if (n > 0) {
        if (!write_all(c->peer->fd, relay_buf, (size_t)n))
            pair_free(c);
        return;
    }
    if (n < 0 && errno == EAGAIN)
        return;
    if (n < 0) {
        pair_free(c);
        return;
    }
    /* An end: pass it on; both ended, both go. */
    c->eof = true;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->peer->eof)
        pair_free(c);
    else
        shutdown(c->peer->fd, SHUT_WR);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: floor-relay 127.0.0.1:PORT\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char *list = strdup(getenv("BENCH_ALLOW") ? getenv("BENCH_ALLOW") : "");
    for (char *s = strtok(list, " "); s; s = strtok(NULL, " ")) {
        allow = realloc(allow, (nallow + 1) * sizeof *allow);
        allow[nallow++] = s;
    }
    char host[64];
    unsigned port;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (sscanf(argv[1], "%63[^:]:%u", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor-relay: bad address %s\n", argv[1]);
        return 2;
    }
    sa.sin_port = htons((uint16_t)port);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(l, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(l, 4096) != 0) {
        perror("floor-relay: listen");
        return 1;
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, l, &lev);
    printf("127.0.0.1:%u\n", port);
    fflush(stdout);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) {
                int fd;
                while ((fd = accept4(l, NULL, NULL,
                                     SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0)
                    conn_new(fd);
                continue;
            }
            struct conn *c = evs[i].data.ptr;
            if (!c->dead)
                on_readable(c);
        }
        while (graveyard) {
            struct conn *c = graveyard;
            graveyard = c->next_dead;
            free(c);
        }
    }
}
