/*
 * proxy_relay.c - moving bytes between a client and its upstream; it
 * decides nothing (proxy_decide.c did, before the first byte).
 *
 * A read lands in a buffer taken from the loop's pool when the read
 * happens (proxy_buf.c: an idle tunnel holds no buffer). The buffer is written
 * straight to the other side, first with uv_try_write; whatever the socket does
 * not take at once is queued from the same buffer, and the side it came from
 * stops reading until the write completes: one buffer per direction at
 * most, whatever the peers do. A side that ends is shut down on the other
 * side (half-close); the connection closes when both directions are done.
 *
 * Forward requests frame bodies (Content-Length, chunked) in both
 * directions so that the client connection and the upstream connection can
 * carry the next request.
 */
#include <string.h>

#include "proxy/proxy_conn.h"

static void relay_shutdown(struct conn *c, int d);

/* Both sources have ended and every byte is written: each socket has been
 * read to its end, so close() sends the same FIN a shutdown would (no
 * reset), without the two shutdown calls and their callbacks. */
static bool tunnel_done(struct conn *c)
{
    if (!c->dir[DIR_UP].eof || !c->dir[DIR_DOWN].eof ||
        c->dir[DIR_UP].pending || c->dir[DIR_DOWN].pending)
        return false;
    conn_close(c);
    return true;
}

static void on_written(uv_write_t *req, int status)
{
    struct relay_buf *rb = (struct relay_buf *)req;
    struct conn *c = rb->c;
    int d = rb->dir;
    relay_buf_put(c->px->loop, rb);
    if (c->closing)
        return;
    c->dir[d].pending--;
    if (status < 0) {
        /* A reused route upstream gone while the request went out. */
        if (d == DIR_UP && c->fwd.replay && route_retry(c))
            return;
        conn_close(c);
        return;
    }
    if (c->dir[d].pending == 0 && c->dir[d].eof && c->state == CONN_TUNNEL) {
        if (tunnel_done(c))
            return;
        relay_shutdown(c, d);
    }
    conn_update_reads(c);
}

int relay_send(struct conn *c, int d, struct relay_buf *rb, size_t off,
               size_t len)
{
    if (d == DIR_UP && c->up.tls && len > 0)
        return proxy_tls_send(c, rb, off, len); /* a route's upstream */
    c->req_bytes[d] += len;
    return relay_send_raw(c, d, rb, off, len);
}

int relay_send_raw(struct conn *c, int d, struct relay_buf *rb, size_t off,
                   size_t len)
{
    struct proxy_loop *loop = c->px->loop;
    if (len == 0) {
        relay_buf_put(loop, rb);
        return 0;
    }
    uv_stream_t *dst = d == DIR_UP ? (uv_stream_t *)&c->up.tcp : &c->client.s;
    if (c->dir[d].pending == 0) {
        uv_buf_t b = uv_buf_init(rb->data + off, (unsigned)len);
        int n = uv_try_write(dst, &b, 1);
        if (n >= 0 && (size_t)n == len) {
            relay_buf_put(loop, rb);
            return 0;
        }
        if (n < 0 && n != UV_EAGAIN) {
            relay_buf_put(loop, rb);
            return n;
        }
        if (n > 0) {
            off += (size_t)n;
            len -= (size_t)n;
        }
    }
    rb->c = c;
    rb->dir = (uint8_t)d;
    uv_buf_t b = uv_buf_init(rb->data + off, (unsigned)len);
    int r = uv_write(&rb->req, dst, &b, 1, on_written);
    if (r < 0) {
        relay_buf_put(loop, rb);
        return r;
    }
    c->dir[d].pending++;
    conn_update_reads(c); /* the source waits for this write */
    return 0;
}

int relay_send_copy(struct conn *c, int d, const char *p, size_t len)
{
    struct relay_buf *rb = len <= RELAY_BUF_SIZE ? relay_buf_get(c->px->loop)
                                                 : relay_buf_sized(len);
    if (!rb)
        return UV_ENOMEM;
    memcpy(rb->data, p, len);
    return relay_send(c, d, rb, 0, len);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    if (c->closing)
        return;
    int d = req == &c->shut_req[DIR_UP] ? DIR_UP : DIR_DOWN;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->dir[d].shut = true;
    if (c->dir[DIR_UP].shut && c->dir[DIR_DOWN].shut)
        conn_close(c);
}

/* d's source has ended and everything it sent is written: pass the end
 * on. shut_req is indexed by direction here (SIDE_CLIENT == DIR_UP is only
 * used for the client's own shutdown outside tunnels). */
static void relay_shutdown(struct conn *c, int d)
{
    uv_stream_t *dst = d == DIR_UP ? (uv_stream_t *)&c->up.tcp : &c->client.s;
    c->shut_req[d].data = c;
    if (uv_shutdown(&c->shut_req[d], dst, on_shutdown) != 0)
        conn_close(c);
}

/* ---- data ---- */

static void count(atomic_ullong *v, size_t n)
{
    atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

/* How many of n body bytes belong to the message; *done when it ends. */
static ssize_t frame(uint8_t body, uint64_t *left, struct http_chunked *ch,
                     const char *p, size_t n, bool *done)
{
    switch (body) {
    case BODY_LENGTH: {
        size_t take = n < *left ? n : (size_t)*left;
        *left -= take;
        *done = *left == 0;
        return (ssize_t)take;
    }
    case BODY_CHUNKED:
        return http_chunked_feed(ch, p, n, done);
    case BODY_UNTIL_CLOSE:
        *done = false;
        return (ssize_t)n;
    default:
        *done = true;
        return 0;
    }
}

void relay_client_data(struct conn *c, struct relay_buf *rb, size_t n)
{
    count(&c->px->stats.bytes_up, n);
    if (c->state == CONN_TUNNEL) {
        if (relay_send(c, DIR_UP, rb, 0, n) < 0)
            conn_close(c);
        return;
    }
    if (c->state != CONN_FORWARD) {
        relay_buf_put(c->px->loop, rb);
        return;
    }
    if (c->fwd.req_done) {
        conn_carry(c, rb->data, n);
        relay_buf_put(c->px->loop, rb);
        conn_update_reads(c);
        return;
    }
    bool done = false;
    ssize_t nb = frame(c->fwd.req_body, &c->fwd.req_left, &c->fwd.req_chunk,
                       rb->data, n, &done);
    if (nb < 0) {
        relay_buf_put(c->px->loop, rb);
        conn_fail(c, 400, "deny", "bad_request",
                  "malformed chunked request body");
        return;
    }
    if ((size_t)nb < n)
        conn_carry(c, rb->data + nb, n - (size_t)nb);
    c->fwd.req_done = done;
    if (relay_send(c, DIR_UP, rb, 0, (size_t)nb) < 0) {
        conn_close(c);
        return;
    }
    if (c->fwd.req_done && c->fwd.res_done)
        conn_forward_done(c);
    else
        conn_update_reads(c);
}

/* A response head has been parsed from c->fwd.res: pass it on with the body
 * bytes that followed it. */
static void response_head(struct conn *c, const struct http_response *res,
                          size_t head_len)
{
    struct relay_buf *b = c->fwd.res;
    c->fwd.res = NULL;
    c->fwd.res_head_done = true;
    c->fwd.res_status = res->status;
    c->fwd.res_body = (uint8_t)res->body;
    c->fwd.res_left = res->content_length;
    http_chunked_init(&c->fwd.res_chunk);
    c->up.reusable = res->keep_alive && res->body != BODY_UNTIL_CLOSE;
    if (res->body == BODY_UNTIL_CLOSE)
        c->fwd.close_after = true;
    conn_admit(c, 2); /* its event comes when the response is relayed */
    size_t rest = b->len - head_len;
    bool done = res->body == BODY_NONE ||
                (res->body == BODY_LENGTH && res->content_length == 0);
    ssize_t nb = 0;
    if (!done && rest > 0) {
        nb = frame(c->fwd.res_body, &c->fwd.res_left, &c->fwd.res_chunk,
                   b->data + head_len, rest, &done);
        if (nb < 0) {
            relay_buf_put(c->px->loop, b);
            conn_close(c);
            return;
        }
    }
    if ((size_t)nb < rest)
        c->up.reusable = false; /* bytes beyond the response */
    c->fwd.res_done = done;
    if (relay_send(c, DIR_DOWN, b, 0, head_len + (size_t)nb) < 0) {
        conn_close(c);
        return;
    }
    if (c->fwd.res_done && c->fwd.req_done)
        conn_forward_done(c);
}

static void response_data(struct conn *c, struct relay_buf *rb, size_t n)
{
    if (c->fwd.res_done) {
        c->up.reusable = false;
        relay_buf_put(c->px->loop, rb);
        return;
    }
    if (!c->fwd.res_head_done) {
        if (!c->fwd.res) {
            c->fwd.res = rb;
            rb->len = (uint32_t)n;
        } else {
            size_t room = c->fwd.res->cap - c->fwd.res->len;
            size_t take = n < room ? n : room;
            memcpy(c->fwd.res->data + c->fwd.res->len, rb->data, take);
            c->fwd.res->len += (uint32_t)take;
            relay_buf_put(c->px->loop, rb);
        }
        for (;;) {
            struct http_response res;
            const char *why = NULL;
            int r = http_parse_response(c->fwd.res->data, c->fwd.res->len,
                                        c->fwd.res->cap, c->fwd.head_req, &res,
                                        &why);
            if (r == 0) {
                if (c->fwd.res->len >= c->fwd.res->cap)
                    conn_fail(c, 502, "error", "bad_response",
                              "upstream response head too large");
                return;
            }
            if (r < 0) {
                conn_fail(c, 502, "error", "bad_response",
                          why ? why : "malformed upstream response");
                return;
            }
            if (res.status >= 100 && res.status < 200 && res.status != 101) {
                /* Interim response: pass it on, then parse the next. */
                if (relay_send_copy(c, DIR_DOWN, c->fwd.res->data, (size_t)r) <
                    0) {
                    conn_close(c);
                    return;
                }
                memmove(c->fwd.res->data, c->fwd.res->data + r,
                        c->fwd.res->len - r);
                c->fwd.res->len -= (uint32_t)r;
                if (c->fwd.res->len == 0) {
                    relay_buf_put(c->px->loop, c->fwd.res);
                    c->fwd.res = NULL;
                    return;
                }
                continue;
            }
            response_head(c, &res, (size_t)r);
            return;
        }
    }
    bool done = false;
    ssize_t nb = frame(c->fwd.res_body, &c->fwd.res_left, &c->fwd.res_chunk,
                       rb->data, n, &done);
    if (nb < 0) {
        relay_buf_put(c->px->loop, rb);
        conn_close(c);
        return;
    }
    if ((size_t)nb < n)
        c->up.reusable = false;
    c->fwd.res_done = done;
    if (relay_send(c, DIR_DOWN, rb, 0, (size_t)nb) < 0) {
        conn_close(c);
        return;
    }
    if (c->fwd.res_done && c->fwd.req_done)
        conn_forward_done(c);
}

void relay_up_data(struct conn *c, struct relay_buf *rb, size_t n)
{
    count(&c->px->stats.bytes_down, n);
    if (c->state == CONN_TUNNEL) {
        if (relay_send(c, DIR_DOWN, rb, 0, n) < 0)
            conn_close(c);
        return;
    }
    if (c->state != CONN_FORWARD) {
        relay_buf_put(c->px->loop, rb);
        return;
    }
    response_data(c, rb, n);
}

void relay_eof(struct conn *c, int side)
{
    int d = side == SIDE_CLIENT ? DIR_UP : DIR_DOWN;
    c->dir[d].eof = true;
    if (c->state == CONN_TUNNEL) {
        if (tunnel_done(c))
            return;
        if (c->dir[d].pending == 0)
            relay_shutdown(c, d);
        conn_update_reads(c);
        return;
    }
    if (c->state != CONN_FORWARD) {
        conn_close(c);
        return;
    }
    if (side == SIDE_CLIENT) {
        if (!c->fwd.req_done) {
            conn_close(c);
            return;
        }
        c->fwd.close_after = true; /* answer, then end */
        conn_update_reads(c);
        return;
    }
    c->up.reusable = false;
    if (!c->fwd.res_head_done) {
        conn_fail(c, 502, "error", "upstream_failed",
                  "upstream closed without a response");
        return;
    }
    if (c->fwd.res_body == BODY_UNTIL_CLOSE && !c->fwd.res_done) {
        c->fwd.res_done = true;
        c->fwd.close_after = true;
    }
    if (!c->fwd.res_done) {
        conn_close(c); /* truncated: the client must see it break */
        return;
    }
    if (c->fwd.req_done)
        conn_forward_done(c);
    else
        conn_update_reads(c);
}
