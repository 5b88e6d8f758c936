/*
 * proxy_route_idle.c - a credential route's upstream connections kept idle
 * across client connections: a response that left the route's TLS
 * connection clean parks it (up to PROXY_ROUTE_IDLE_MAX a proxy, for
 * PROXY_ROUTE_IDLE_MS at most), and the route's next request takes it
 * instead of dialling and handshaking again. Only the same route's.
 *
 * A kept connection may be closed by the upstream at any moment, also
 * just as a request goes out on it (the peek before reuse cannot see a
 * close that is still on its way). Such a request is sent once more on a
 * fresh connection (route_retry) when that is safe: the upstream closed
 * or reset the connection before any byte of the response, the method is
 * idempotent (GET, HEAD, OPTIONS, PUT, DELETE), and the whole request,
 * body included, went out in the first write, so the proxy holds all of
 * it. Never on a fresh connection, never after a response byte, never a
 * POST or PATCH (the upstream may have acted on it), never a body still
 * being streamed from the client.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/proxy_conn.h"

/* Nothing waits on the socket: no byte, no end. An upstream that closed an
 * idle connection, or sent anything while it was idle (an alert), is not
 * reused. */
static bool sock_quiet(int fd)
{
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static void idle_remove(struct proxy *p, unsigned i, bool close_it)
{
    if (close_it) {
        close(p->idle[i].fd);
        proxy_tls_free(p->idle[i].tls);
    }
    p->fds--;
    atomic_fetch_sub_explicit(&proxy_fds_used, 1, memory_order_relaxed);
    p->idle[i] = p->idle[--p->nidle];
}

void proxy_route_idle_drain(struct proxy *p)
{
    while (p->nidle)
        idle_remove(p, p->nidle - 1, true);
}

static uint64_t idle_ms(const struct proxy *p)
{
    return p->opts.idle_ms < PROXY_ROUTE_IDLE_MS ? p->opts.idle_ms
                                                 : PROXY_ROUTE_IDLE_MS;
}

/* Keeps c's route upstream for the next client connection of its route
 * when a response left it clean (complete, nothing buffered, nothing
 * pending on the socket). The handle is then closed as usual; a duplicate
 * of its descriptor keeps the connection, and its TLS state moves here. */
void route_idle_put(struct conn *c)
{
    struct proxy *p = c->px;
    struct conn_up *u = &c->up;
    uv_os_fd_t fd;
    if (p->closing || !u->inited || u->closing || !u->connected ||
        !u->reusable || !u->tls || !u->route || c->dir[DIR_UP].pending ||
        c->dir[DIR_DOWN].eof || u->tcp.write_queue_size ||
        !proxy_tls_idle(u->tls) || uv_fileno((uv_handle_t *)&u->tcp, &fd) ||
        !sock_quiet(fd))
        return;
    uint64_t now = uv_now(conn_loop(c));
    for (unsigned i = p->nidle; i-- > 0;)
        if (now - p->idle[i].since >= idle_ms(p))
            idle_remove(p, i, true);
    if (p->nidle == PROXY_ROUTE_IDLE_MAX) {
        unsigned oldest = 0;
        for (unsigned i = 1; i < p->nidle; i++)
            if (p->idle[i].since < p->idle[oldest].since)
                oldest = i;
        idle_remove(p, oldest, true);
    }
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (d < 0)
        return;
    p->idle[p->nidle++] = (struct route_idle){d, u->tls, u->route, now};
    p->fds++;
    atomic_fetch_add_explicit(&proxy_fds_used, 1, memory_order_relaxed);
    u->tls = NULL; /* the close callback frees nothing of it */
    u->route = NULL;
    u->reusable = false;
}

/* Gives c (no upstream handle) an idle upstream of rt: true, connected
 * and verified, ready for forward_send; false when there is none. */
bool route_idle_take(struct conn *c, const struct proxy_route *rt)
{
    struct proxy *p = c->px;
    if (c->up.inited)
        return false;
    uint64_t now = uv_now(conn_loop(c));
    for (unsigned i = p->nidle; i-- > 0;) {
        if (p->idle[i].route != rt)
            continue;
        if (now - p->idle[i].since >= idle_ms(p) ||
            !sock_quiet(p->idle[i].fd)) {
            idle_remove(p, i, true);
            continue;
        }
        struct route_idle e = p->idle[i];
        idle_remove(p, i, false);
        if (uv_tcp_init(conn_loop(c), &c->up.tcp) != 0) {
            close(e.fd);
            proxy_tls_free(e.tls);
            return false;
        }
        fd_take(c, &c->fd_up);
        c->nopen++;
        c->up.inited = true;
        c->up.tcp.data = c;
        if (uv_tcp_open(&c->up.tcp, e.fd) != 0) {
            close(e.fd);
            proxy_tls_free(e.tls);
            conn_close_up(c);
            return false;
        }
        c->up.connected = true;
        c->up.reused = true;
        c->up.tls = e.tls;
        c->up.route = rt;
        memcpy(c->up.host, rt->host, sizeof c->up.host);
        c->up.port = rt->port;
        return true;
    }
    return false;
}

/* May c's request be sent again, should its reused upstream close before
 * answering? See the top of this file. */
static bool route_replayable(const struct conn *c)
{
    static const char *const idempotent[] = {"GET", "HEAD", "OPTIONS", "PUT",
                                             "DELETE"};
    if (!c->route || !c->up.tls || !c->up.reused || !c->fwd.req_done)
        return false;
    for (size_t i = 0; i < sizeof idempotent / sizeof *idempotent; i++)
        if (strcmp(c->method, idempotent[i]) == 0)
            return true;
    return false;
}

int route_send_request(struct conn *c, struct relay_buf *out)
{
    if (!route_replayable(c))
        return relay_send(c, DIR_UP, out, 0, out->len);
    /* SSL_write has copied the bytes into its record: out is not written
     * from, only kept (instead of a copy: nothing more per request). */
    route_replay_drop(c);
    c->fwd.replay = out;
    return proxy_tls_send_keep(c, out);
}

void route_replay_drop(struct conn *c)
{
    struct relay_buf *rb = c->fwd.replay;
    if (!rb)
        return;
    c->fwd.replay = NULL;
    OPENSSL_cleanse(rb->data, rb->len); /* the route's secret */
    relay_buf_put(c->px->loop, rb);
}

void route_out_drop(struct conn *c)
{
    struct relay_buf *rb = c->fwd.out;
    if (!rb)
        return;
    c->fwd.out = NULL;
    OPENSSL_cleanse(rb->data, rb->len); /* rare: never the per-request path */
    relay_buf_put(c->px->loop, rb);
}

bool route_retry(struct conn *c)
{
    struct relay_buf *rb = c->fwd.replay;
    /* A write still queued on the old socket would be cancelled by its
     * close and end the client connection: only a request wholly handed
     * to the kernel is sent again (a request's head always is). */
    if (!rb || c->closing || c->state != CONN_FORWARD || c->fwd.res_head_done ||
        c->fwd.res || c->dir[DIR_UP].pending)
        return false;
    c->fwd.replay = NULL;
    route_out_drop(c);
    c->fwd.out = rb; /* forward_send sends it once the new one is verified */
    c->req_bytes[DIR_UP] = 0;
    conn_close_up(c);
    /* The upstream is dialled afresh (dial_next waits for the old socket's
     * close): the new connection is not reused, so it is never retried. */
    c->state = CONN_RESOLVE;
    dial_upstream(c, c->route->kind, &c->route->addr);
    return true;
}
