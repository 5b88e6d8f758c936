/*
 * proxy_tunnel.c - the upstream is there: a CONNECT's tunnel is
 * established (its early bytes held for the SNI decision when sni_match
 * asks for one), or a forward request is sent; then proxy_relay.c moves
 * the bytes.
 */
#include <stddef.h>
#include <string.h>

#include "proxy/proxy_conn.h"
#include "proxy/proxy_decide.h"
#include "wire/tlshello.h"

static void tunnel_begin(struct conn *c);

void tunnel_established(struct conn *c)
{
    conn_admit(c, 1); /* its event comes when the tunnel ends */
    c->state = CONN_TUNNEL;
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (c->socks ? proxy_socks_ok(c) < 0
                 : relay_send_copy(c, DIR_DOWN, ok, sizeof ok - 1) < 0) {
        conn_close(c);
        return;
    }
    c->req_bytes[DIR_DOWN] = 0; /* the tunnel's bytes are the peers' */
    c->last_active = uv_now(conn_loop(c));
    conn_arm(c, c->px->opts.idle_ms);
    bool ended = c->dir[DIR_UP].eof;
    c->dir[DIR_UP].eof = false;
    tunnel_begin(c);
    if (ended && !c->closing)
        client_ended(c);
    conn_update_reads(c);
}

/* The tunnel is up: the bytes the client sent early go upstream, through
 * the SNI decision when sni_match asks for one (header_timeout for the
 * whole hello). */
static void tunnel_begin(struct conn *c)
{
    struct proxy_loop *loop = c->px->loop;
    const char *early = c->head;
    size_t n = c->head_len;
    if (c->px->opts.sni_match) {
        c->sni = relay_buf_get(loop);
        if (!c->sni) {
            conn_close(c);
            return;
        }
        c->sni_wait = true;
        conn_arm(c, c->px->opts.header_ms < c->px->opts.idle_ms
                        ? c->px->opts.header_ms
                        : c->px->opts.idle_ms);
        c->deadline = uv_now(&loop->uv) + c->px->opts.header_ms;
        if (n > 0) {
            struct relay_buf *rb = relay_buf_get(loop);
            if (!rb) {
                conn_close(c);
                return;
            }
            memcpy(rb->data, early, n);
            sni_feed(c, rb, 0, n);
        }
    } else if (n > 0) {
        if (relay_send_copy(c, DIR_UP, early, n) < 0) {
            conn_close(c);
            return;
        }
    }
    if (c->closing)
        return;
    conn_head_free(c);
}

/* ---- a tunnel's first client bytes: held until the SNI decision ---- */

/* Feeds client bytes to the SNI decision; forwards them once it passes. */
void sni_feed(struct conn *c, struct relay_buf *rb, size_t off, size_t n)
{
    struct proxy_loop *loop = c->px->loop;
    struct relay_buf *b = c->sni;
    size_t room = TLS_HELLO_MAX + 1 - b->len;
    size_t take = n < room ? n : room;
    memcpy(b->data + b->len, rb->data + off, take);
    b->len += (uint32_t)take;
    struct verdict v;
    enum sni_verdict r =
        decide_sni((const uint8_t *)b->data, b->len, c->kind, c->host, &v);
    if (r != SNI_PASS) {
        relay_buf_put(loop, rb);
        if (r == SNI_REFUSE) {
            conn_event(c, "deny", v.code, v.status, v.reason);
            conn_close(c);
        }
        return;
    }
    c->sni_wait = false;
    c->sni = NULL;
    if (relay_send(c, DIR_UP, b, 0, b->len) < 0) {
        relay_buf_put(loop, rb);
        conn_close(c);
        return;
    }
    if (n > take) {
        if (relay_send(c, DIR_UP, rb, off + take, n - take) < 0)
            conn_close(c);
        return;
    }
    relay_buf_put(loop, rb);
}

/* The client ended its side: inside a hello that is a refusal; before any
 * byte the tunnel simply has no hello to check. Then the relay passes the
 * end on. */
void client_ended(struct conn *c)
{
    if (c->state == CONN_TUNNEL && c->sni_wait) {
        if (c->sni->len > 0) {
            conn_event(c, "deny", "tls_malformed", 403,
                       "the client ended inside a TLS ClientHello");
            conn_close(c);
            return;
        }
        c->sni_wait = false;
        relay_buf_put(c->px->loop, c->sni);
        c->sni = NULL;
    }
    relay_eof(c, SIDE_CLIENT);
}

void forward_send(struct conn *c)
{
    c->state = CONN_FORWARD;
    /* A route's handshake may still have bytes queued upstream. */
    uint32_t queued = c->dir[DIR_UP].pending;
    memset(c->dir, 0, sizeof c->dir);
    c->dir[DIR_UP].pending = queued;
    c->fwd.res_head_done = c->fwd.res_done = false;
    c->last_active = uv_now(conn_loop(c));
    conn_arm(c, c->px->opts.idle_ms);
    struct relay_buf *out = c->fwd.out;
    c->fwd.out = NULL;
    if (route_send_request(c, out) < 0) {
        /* A reused route upstream that is already gone: once more. */
        if (route_retry(c))
            return;
        conn_fail(c, 502, "error", "upstream_failed",
                  "cannot send the request upstream");
        return;
    }
    conn_update_reads(c);
}
