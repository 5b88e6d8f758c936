/*
 * proxy_request.c - a request's way from its head: parsed (HTTP, or handed
 * to proxy_socks.c), decided (proxy_decide.c), then a route's or the
 * allowlist's, prepared for forwarding, and given to proxy_dial.c; and
 * after a forward response, the next request or the end.
 *
 * The order of the checks is the security property: the allowlist is
 * consulted before any lookup, every address a name resolves to is checked
 * before any dial, and the dial uses those very addresses (no second
 * lookup). With a parent proxy (opts.parent) the allowlist comes first
 * just the same; then the dial is to the parent, whose answer to our
 * CONNECT opens the way, and the target's name is not looked up here (the
 * parent resolves it; an IP literal still meets the address rule).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proxy/proxy_conn.h"
#include "proxy/proxy_decide.h"

static void handle_request(struct conn *c, const struct http_request *req,
                           size_t head_len);
static bool forward_prepared(struct conn *c, const struct http_request *req,
                             size_t head_len);
static void route_request(struct conn *c, const struct http_request *req,
                          size_t head_len, const char *bad_path);

/* The code of a refusal by the request parser, by its status. */
static const char *parse_code(int status)
{
    switch (status) {
    case 414:
    case 431:
        return "too_large";
    case 501:
        return "not_implemented";
    case 505:
        return "bad_version";
    default:
        return "bad_request";
    }
}

void conn_parse_head(struct conn *c)
{
    /* SOCKS5 begins with its version byte, which no HTTP method does. */
    if (c->socks || (c->req_start == 0 && c->head_len > 0 &&
                     (unsigned char)c->head[0] == 5)) {
        proxy_socks_head(c);
        return;
    }
    struct http_request req;
    const char *why = NULL;
    size_t max = c->px->opts.max_header_bytes;
    int r =
        c->px->opts.nroutes
            ? http_parse_request_origin(c->head, c->head_len, max, &req, &why)
            : http_parse_request(c->head, c->head_len, max, &req, &why);
    if (r == 0) {
        if (c->head_len > max)
            conn_reply(c, 431, "deny", "too_large", "request head too large");
        else
            conn_update_reads(c);
        return;
    }
    if (r < 0) {
        c->method[0] = c->host[0] = '\0';
        c->port = 0;
        c->head_len = 0;
        conn_reply(c, -r, "deny", parse_code(-r),
                   why ? why : "malformed request");
        return;
    }
    const struct proxy_opts *o = &c->px->opts;
    if (o->token_len &&
        (req.proxy_auths != 1 ||
         !proxy_token_http_ok(o, req.proxy_auth.p, req.proxy_auth.n))) {
        size_t ml = req.method.n < sizeof c->method ? req.method.n
                                                    : sizeof c->method - 1;
        memcpy(c->method, req.method.p, ml);
        c->method[ml] = '\0';
        memcpy(c->host, req.host, sizeof c->host);
        c->port = req.port;
        c->head_len = 0;
        conn_reply(c, 407, "deny", "auth_required",
                   "this proxy needs its token (Proxy-Authorization: Basic, "
                   "user isolation)");
        return;
    }
    handle_request(c, &req, (size_t)r);
}

static void handle_request(struct conn *c, const struct http_request *req,
                           size_t head_len)
{
    struct proxy *p = c->px;
    size_t ml =
        req->method.n < sizeof c->method ? req->method.n : sizeof c->method - 1;
    memcpy(c->method, req->method.p, ml);
    c->method[ml] = '\0';
    memcpy(c->host, req->host, sizeof c->host);
    c->port = req->port;
    c->kind = (uint8_t)req->host_kind;
    c->is_connect = req->is_connect;
    c->keep_alive = req->keep_alive && !req->is_connect;
    c->fwd.head_req = strcmp(c->method, "HEAD") == 0;
    c->fwd.close_after = false;
    c->ev_pending = true;
    c->admitted = 0;
    c->reported = false;
    c->via_parent = false;
    c->req_start = uv_hrtime();
    c->req_bytes[DIR_UP] = c->req_bytes[DIR_DOWN] = 0;
    /* CONNECT keeps reading (into the head buffer, bounded) while it is
     * checked, resolved and dialed: stopping and restarting costs system
     * calls on every tunnel. A forward request stops: what follows is body,
     * which is framed only once the upstream is there. */
    c->state = CONN_RESOLVE;

    proxy_allow_put(c->allow);
    c->allow = proxy_allow_get(p);
    const char *bad_path = NULL;
    c->route = route_match(p, req, &bad_path);
    c->routed = c->route || req->origin_form;
    if (c->routed) {
        route_request(c, req, head_len, bad_path);
        return;
    }
    struct verdict v;
    if (!decide_host(p, c->allow->list, req->host_kind, req->host, &req->addr,
                     req->port, &c->reported, &v)) {
        c->head_len = 0; /* pipelined bytes after a refusal go nowhere */
        conn_reply(c, v.status, "deny", v.code, v.reason);
        return;
    }
    /* Through a parent the target's name is never resolved here (the
     * parent resolves it); an IP address is known without a lookup, and
     * still meets the address rule. */
    if (p->opts.parent.set &&
        (req->host_kind == HOST_IPV4 || req->host_kind == HOST_IPV6)) {
        if (!addr_admitted(c, &req->addr))
            return;
    }

    if (c->is_connect) {
        size_t extra = c->head_len - head_len;
        memmove(c->head, c->head + head_len, extra);
        c->head_len = (uint32_t)extra;
        if (c->up.inited)
            conn_close_up(c);
    } else {
        if (!forward_prepared(c, req, head_len))
            return;
        /* The kept upstream reaches this host:port at a checked address:
         * reuse it if that address still passes under today's allowlist. */
        if (c->up.connected && !c->up.closing && c->up.reusable && !c->up.tls &&
            c->up.port == c->port && strcmp(c->up.host, c->host) == 0) {
            c->naddr = 1;
            c->addr_i = 0;
            c->addrs[0] = c->up.addr;
            /* Through a parent, the kept tunnel reaches host:port (whose
             * address rule ran above); up.addr is the parent's. */
            c->via_parent = p->opts.parent.set;
            if (!c->via_parent && !addr_admitted(c, &c->up.addr))
                return;
            forward_send(c);
            return;
        }
        conn_close_up(c);
    }

    dial_upstream(c, req->host_kind, &req->addr);
}

/* Builds the origin-form head plus the body bytes that came with it: 0, -1
 * out of memory, -2 a malformed chunked body. */
static int forward_build(struct conn *c, const struct http_request *req,
                         size_t head_len)
{
    struct proxy_loop *loop = c->px->loop;
    struct relay_buf *out = relay_buf_get(loop);
    if (!out)
        return -1;
    size_t n = c->route
                   ? route_write_head(c->route, req, out->data, out->cap)
                   : http_write_upstream_head(req, true, out->data, out->cap);
    size_t extra = c->head_len - head_len;
    if (n + extra > out->cap) {
        relay_buf_put(loop, out);
        out = relay_buf_sized(n + extra);
        if (!out)
            return -1;
        n = c->route ? route_write_head(c->route, req, out->data, out->cap)
                     : http_write_upstream_head(req, true, out->data, out->cap);
    }
    c->fwd.req_body = (uint8_t)req->body;
    c->fwd.req_left = req->content_length;
    http_chunked_init(&c->fwd.req_chunk);
    c->fwd.req_done = req->body == BODY_NONE;
    const char *rest = c->head + head_len;
    size_t nb = 0;
    if (!c->fwd.req_done && extra > 0) {
        if (req->body == BODY_LENGTH) {
            nb = extra < c->fwd.req_left ? extra : (size_t)c->fwd.req_left;
            c->fwd.req_left -= nb;
            c->fwd.req_done = c->fwd.req_left == 0;
        } else {
            bool done = false;
            ssize_t r =
                http_chunked_feed(&c->fwd.req_chunk, rest, extra, &done);
            if (r < 0) {
                relay_buf_put(loop, out);
                return -2;
            }
            nb = (size_t)r;
            c->fwd.req_done = done;
        }
    } else if (!c->fwd.req_done && req->body == BODY_LENGTH &&
               c->fwd.req_left == 0) {
        c->fwd.req_done = true;
    }
    memcpy(out->data + n, rest, nb);
    out->len = (uint32_t)(n + nb);
    /* Anything after the body is the next request: keep it. */
    memmove(c->head, rest + nb, extra - nb);
    c->head_len = (uint32_t)(extra - nb);
    route_out_drop(c);
    c->fwd.out = out;
    return 0;
}

/* forward_build, or its refusal said to the client (forward and route
 * requests alike): false when refused. */
static bool forward_prepared(struct conn *c, const struct http_request *req,
                             size_t head_len)
{
    int r = forward_build(c, req, head_len);
    if (r == 0)
        return true;
    c->head_len = 0;
    conn_reply(c, r == -2 ? 400 : 502, r == -2 ? "deny" : "error",
               r == -2 ? "bad_request" : "internal_error",
               r == -2 ? "malformed chunked body" : "out of memory");
    return false;
}

/* A request for a route (or an origin-form request, which only a route
 * may take): no allowlist; the route's upstream over TLS. */
static void route_request(struct conn *c, const struct http_request *req,
                          size_t head_len, const char *bad_path)
{
    const struct proxy_route *rt = c->route;
    if (!rt) {
        c->head_len = 0;
        c->port = 0;
        size_t pn = req->path.n < 64 ? req->path.n : 64;
        snprintf(c->host, sizeof c->host, "%.*s", (int)pn, req->path.p);
        conn_reply(c, 400, "deny", "unknown_route",
                   "no route has the first segment of this path as its "
                   "name (an origin-form request is for a route)");
        return;
    }
    memcpy(c->host, rt->host, sizeof c->host);
    c->port = rt->port;
    c->kind = (uint8_t)rt->kind;
    if (bad_path) {
        c->head_len = 0;
        conn_reply(c, 400, "deny", "bad_request", bad_path);
        return;
    }
    if (!forward_prepared(c, req, head_len))
        return;
    if (c->up.connected && !c->up.closing && c->up.reusable && c->up.tls &&
        c->up.route == rt) {
        c->up.reused = true;
        forward_send(c);
        return;
    }
    route_idle_put(c); /* another route's, kept for its next client */
    conn_close_up(c);
    if (route_idle_take(c, rt)) {
        forward_send(c);
        return;
    }
    dial_upstream(c, rt->kind, &rt->addr);
}

void conn_handle_request(struct conn *c, const struct http_request *req,
                         size_t head_len)
{
    handle_request(c, req, head_len);
}

/* After a forward response: the next request, or the end. */
void conn_forward_done(struct conn *c)
{
    if (c->closing)
        return;
    if (c->ev_pending && c->admitted)
        conn_event_admitted(c);
    route_replay_drop(c);
    c->route = NULL;
    c->routed = false;
    c->via_parent = false;
    if (!c->up.reusable || c->dir[DIR_DOWN].eof)
        conn_close_up(c);
    proxy_allow_put(c->allow);
    c->allow = NULL;
    if (!c->keep_alive || c->fwd.close_after || c->carry_lost) {
        route_idle_put(c);
        conn_end_client(c);
        return;
    }
    c->state = CONN_HEAD;
    /* The next request is not this one's host: a 408 or 431 for its head
     * must not name the host the last one asked for. */
    c->method[0] = c->host[0] = '\0';
    c->port = 0;
    memset(c->dir, 0, sizeof c->dir);
    if (c->head_len > 0) {
        conn_arm(c, c->px->opts.header_ms);
        conn_parse_head(c);
        return;
    }
    /* Idle between requests: hold no head buffer. */
    conn_head_free(c);
    c->kept = true;
    conn_arm(c, c->px->opts.idle_ms);
    conn_update_reads(c);
}
