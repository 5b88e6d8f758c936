/*
 * proxy_route_idle.c - a credential route's upstream connections kept idle
 * across client connections: a response that left the route's TLS
 * connection clean parks it (up to PROXY_ROUTE_IDLE_MAX a proxy, for
 * PROXY_ROUTE_IDLE_MS at most), and the route's next request takes it
 * instead of dialling and handshaking again. Only the same route's.
 */
#include <errno.h>
#include <fcntl.h>
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
        c->up.tls = e.tls;
        c->up.route = rt;
        memcpy(c->up.host, rt->host, sizeof c->up.host);
        c->up.port = rt->port;
        return true;
    }
    return false;
}
