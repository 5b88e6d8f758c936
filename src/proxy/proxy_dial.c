/*
 * proxy_dial.c - a decided request's name resolved (opts.resolve,
 * /etc/hosts, or the resolver threads of proxy_dns.c), every address
 * checked before any dial, and only those addresses dialled; or the same
 * through the parent proxy (opts.parent), whose answer to our CONNECT
 * opens the way. Once connected: proxy_tunnel.c, or a route's TLS
 * (proxy_tls.c).
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proxy/proxy_conn.h"
#include "proxy/proxy_decide.h"

static void on_connect(uv_connect_t *req, int status);
static void parent_send(struct conn *c);

/* The name the proxy looks up: the parent's, when there is one. */
static const char *dial_name(const struct conn *c)
{
    return c->via_parent ? c->px->opts.parent.host : c->host;
}

void resolve(struct conn *c)
{
    struct proxy *p = c->px;
    const char *name = dial_name(c);
    for (size_t i = 0; i < p->opts.nresolve; i++) {
        const struct proxy_resolve *r = &p->opts.resolve[i];
        if (strcmp(r->name, name) == 0) {
            c->naddr = (uint8_t)r->naddr;
            memcpy(c->addrs, r->addrs, r->naddr * sizeof *r->addrs);
            check_and_dial(c);
            return;
        }
    }
    /* /etc/hosts on this thread: it never waits for a lookup. */
    unsigned n = proxy_hosts_lookup(name, c->addrs, PROXY_MAX_ADDRS);
    if (n > 0) {
        c->naddr = (uint8_t)n;
        check_and_dial(c);
        return;
    }
    c->state = CONN_RESOLVE;
    int r = proxy_dns_start(c, name);
    if (r != 0) {
        char reason[HOST_NAME_CAP + 64];
        snprintf(reason, sizeof reason, "cannot resolve %s%s: %s",
                 c->via_parent ? "the parent proxy " : "", name,
                 uv_strerror(r));
        conn_reply(c, 502, "error",
                   c->via_parent ? "upstream_proxy_failed" : "dns_failed",
                   reason);
        return;
    }
    conn_update_reads(c);
    conn_arm(c, p->opts.dns_ms); /* from the request, queued or not */
}

void conn_resolved(struct conn *c, int status)
{
    if (c->closing || c->state != CONN_RESOLVE)
        return;
    if (status < 0 || c->naddr == 0) {
        char reason[HOST_NAME_CAP + 64];
        snprintf(reason, sizeof reason, "cannot resolve %s%s: %s",
                 c->via_parent ? "the parent proxy " : "", dial_name(c),
                 status < 0 ? uv_strerror(status) : "no address");
        conn_reply(c, 502, "error",
                   c->via_parent ? "upstream_proxy_failed" : "dns_failed",
                   reason);
        return;
    }
    check_and_dial(c);
}

void check_and_dial(struct conn *c)
{
    /* A route's upstream was chosen by the host, not the sandbox: no
     * allowlist or private-address check (API, credential routes). */
    for (unsigned i = 0; !c->route && !c->via_parent && i < c->naddr; i++)
        if (!addr_admitted(c, &c->addrs[i]))
            return;
    /* The parent's addresses are admitted by the option, whatever their
     * class; never our own listener. */
    for (unsigned i = 0; c->via_parent && i < c->naddr; i++) {
        struct verdict v;
        if (!decide_parent_addr(c->px, &c->addrs[i], &v)) {
            conn_reply(c, v.status, "error", v.code, v.reason);
            return;
        }
    }
    c->state = CONN_DIAL;
    c->addr_i = 0;
    c->last_err = 0;
    conn_update_reads(c);
    conn_arm(c, c->px->opts.connect_ms);
    dial_next(c);
}

/* Every address must pass; one that does not refuses the request. */
bool addr_admitted(struct conn *c, const struct host_addr *a)
{
    struct verdict v;
    if (decide_addr(c->px, c->allow->list, c->kind, c->host, c->port, a, &v))
        return true;
    memcpy(c->refused_addr, v.addr, sizeof c->refused_addr);
    c->refused_class = v.addr_class;
    char text[INET6_ADDRSTRLEN];
    proxy_addr_text(a, text, sizeof text);
    conn_reply_addr(c, v.status, "deny", v.code, v.reason, text);
    return false;
}

static socklen_t to_sockaddr(const struct host_addr *a, int port,
                             struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (a->family == 4) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        memcpy(&s4->sin_addr, a->bytes, 4);
        return sizeof *s4;
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    memcpy(&s6->sin6_addr, a->bytes, 16);
    return sizeof *s6;
}

void dial_next(struct conn *c)
{
    if (c->closing || c->state != CONN_DIAL)
        return;
    if (c->up.inited) {
        c->up.redial = true; /* after the old socket's close callback */
        if (!c->up.closing)
            conn_close_up(c);
        return;
    }
    if (c->addr_i >= c->naddr) {
        char reason[2 * HOST_NAME_CAP + 96];
        if (c->via_parent)
            snprintf(reason, sizeof reason,
                     "cannot connect to the parent proxy %s: %s",
                     c->px->opts.parent.text,
                     c->last_err ? uv_strerror(c->last_err) : "no address");
        else
            snprintf(reason, sizeof reason, "cannot connect to %s:%d: %s",
                     c->host, c->port,
                     c->last_err ? uv_strerror(c->last_err) : "no address");
        conn_reply(c, 502, "error",
                   c->via_parent ? "upstream_proxy_failed" : "connect_failed",
                   reason);
        return;
    }
    if (proxy_pool_shared() &&
        atomic_load_explicit(&proxy_fds_used, memory_order_relaxed) >=
            atomic_load_explicit(&proxy_fds_usable, memory_order_relaxed)) {
        conn_reply(c, 503, "error", "too_many",
                   "the descriptors the process keeps for proxies are in use");
        return;
    }
    int r = uv_tcp_init(conn_loop(c), &c->up.tcp);
    if (r != 0) {
        c->last_err = r;
        c->addr_i = c->naddr;
        dial_next(c);
        return;
    }
    fd_take(c, &c->fd_up);
    c->nopen++;
    c->up.inited = true;
    c->up.tcp.data = c;
    struct sockaddr_storage ss;
    to_sockaddr(&c->addrs[c->addr_i],
                c->via_parent ? c->px->opts.parent.port : c->port, &ss);
    c->up.connect.data = c;
    r = uv_tcp_connect(&c->up.connect, &c->up.tcp, (struct sockaddr *)&ss,
                       on_connect);
    if (r != 0) {
        c->last_err = r;
        c->addr_i++;
        c->up.redial = true;
        conn_close_up(c);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (status == UV_ECANCELED || c->closing || c->state != CONN_DIAL)
        return;
    if (status < 0) {
        c->last_err = status;
        c->addr_i++;
        c->up.redial = true;
        conn_close_up(c);
        return;
    }
    c->up.connected = true;
    uv_tcp_nodelay(&c->up.tcp, 1);
    memcpy(c->up.host, c->host, sizeof c->up.host);
    c->up.port = c->port;
    c->up.addr = c->addrs[c->addr_i];
    if (c->via_parent) {
        parent_send(c); /* parent_read goes on once it answers */
        return;
    }
    if (c->route) {
        c->up.route = c->route;
        proxy_tls_start(c); /* conn_route_ready once it is verified */
        return;
    }
    if (c->is_connect)
        tunnel_established(c);
    else
        forward_send(c);
}

void conn_route_ready(struct conn *c)
{
    if (c->closing || c->state != CONN_DIAL)
        return;
    forward_send(c);
}

/* ---- through a parent proxy (proxy_parent.c) ---- */

/* An address literal is checked and dialled as it is; a name (c's host,
 * or the parent's) is resolved first. */
static void dial_literal_or_name(struct conn *c, enum host_kind kind,
                                 const struct host_addr *addr)
{
    if (kind == HOST_IPV4 || kind == HOST_IPV6) {
        c->naddr = 1;
        c->addrs[0] = *addr;
        check_and_dial(c);
        return;
    }
    resolve(c);
}

void dial_upstream(struct conn *c, enum host_kind kind,
                   const struct host_addr *addr)
{
    const struct proxy_parent *pp = &c->px->opts.parent;
    if (pp->set) {
        /* the parent's address, or its name's; the target is its to find */
        c->via_parent = true;
        dial_literal_or_name(c, pp->kind, &pp->addr);
        return;
    }
    dial_literal_or_name(c, kind, addr);
}

static void parent_fail(struct conn *c, const char *what)
{
    char reason[2 * HOST_NAME_CAP + 160];
    bool v6 = c->kind == HOST_IPV6;
    snprintf(reason, sizeof reason,
             "the parent proxy %s %s to CONNECT %s%s%s:%d",
             c->px->opts.parent.text, what, v6 ? "[" : "", c->host,
             v6 ? "]" : "", c->port);
    conn_reply(c, 502, "error", "upstream_proxy_failed", reason);
}

/* Connected to the parent: ask it for a tunnel to the request's host and
 * port (by name: the parent resolves it), and read its answer. */
static void parent_send(struct conn *c)
{
    struct relay_buf *out = relay_buf_get(c->px->loop);
    c->preply = relay_buf_get(c->px->loop);
    size_t n = out ? proxy_parent_request(c, out->data, out->cap) : 0;
    if (!n || !c->preply) {
        if (out)
            relay_buf_put(c->px->loop, out);
        conn_reply(c, 502, "error", "internal_error", "out of memory");
        return;
    }
    c->parent_wait = true;
    /* Raw: the CONNECT is the proxy's, not the request's bytes. */
    if (relay_send_raw(c, DIR_UP, out, 0, n) < 0) {
        parent_fail(c, "could not be sent the CONNECT");
        return;
    }
    conn_arm(c, c->px->opts.connect_ms);
    conn_update_reads(c);
}

/* The parent's reply to our CONNECT (n bytes more in c->preply, or its
 * end). A 2xx opens the way: what the request does next (a tunnel, a
 * forward request, a route's TLS) starts, and the bytes that came behind
 * the reply head are passed on as if read after it, once. */
void parent_read(struct conn *c, ssize_t n)
{
    struct relay_buf *b = c->preply;
    if (n == 0)
        return;
    if (n < 0) {
        parent_fail(c, n == UV_EOF ? "closed the connection without answering"
                                   : "failed while answering");
        return;
    }
    b->len += (uint32_t)n;
    size_t head_len = 0;
    char why[128];
    int r = proxy_parent_reply(b->data, b->len, &head_len, why, sizeof why);
    if (r == 0)
        return;
    if (r < 0) {
        parent_fail(c, why);
        return;
    }
    c->parent_wait = false;
    c->preply = NULL;
    size_t rest = b->len - head_len;
    memmove(b->data, b->data + head_len, rest);
    b->len = 0;
    struct proxy_loop *loop = c->px->loop;
    if (c->route) {
        c->up.route = c->route;
        if (proxy_tls_start(c) != 0 || c->closing || rest == 0) {
            relay_buf_put(loop, b);
            return;
        }
        proxy_tls_up_read(c, b, (ssize_t)rest);
        return;
    }
    if (c->is_connect)
        tunnel_established(c);
    else
        forward_send(c);
    if (c->closing || rest == 0) {
        relay_buf_put(loop, b);
        return;
    }
    relay_up_data(c, b, rest);
}
