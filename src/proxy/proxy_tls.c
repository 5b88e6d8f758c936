/*
 * proxy_tls.c - TLS to a route's upstream, driven on the proxy's loop: the
 * upstream socket stays a libuv stream, and OpenSSL only ever sees two
 * memory BIOs (ciphertext read from the socket goes into one; what it
 * writes into the other is sent with the relay's own writes, with their
 * backpressure). Nothing here blocks, and there is no thread per
 * connection.
 *
 * The upstream is verified (chain against upstream_ca_file or the
 * system's store, and the route's host name or IP literal) before the
 * request, and with it the secret, is written.
 *
 * Each route keeps the last TLS session its upstream gave (a TLS 1.3
 * ticket arrives after the handshake, so the new-session callback takes
 * it whenever it comes) and offers it on its next new connection: an
 * abbreviated handshake, no certificate chain to send and verify. The
 * session is the route's alone (one upstream host:port, one proxy's CA
 * setting): a session made with host A is never offered to host B. A
 * resumed session keeps the peer that was verified when it was made, for
 * this very name; an upstream that declines it gets the full handshake,
 * verified as always.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_conn.h"

struct proxy_tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* the network side: read into rbio, write out of wbio */
    bool handshaking;
};

bool proxy_tls_handshaking(const struct proxy_tls *t)
{
    return t && t->handshaking;
}

bool proxy_tls_idle(const struct proxy_tls *t)
{
    return t && !t->handshaking && BIO_ctrl_pending(t->rbio) == 0 &&
           BIO_ctrl_pending(t->wbio) == 0 && SSL_pending(t->ssl) == 0;
}

void proxy_tls_free(struct proxy_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* frees both BIOs */
    free(t);
}

/*
 * SSL_get_error reads the thread's error queue, so it must be empty before
 * each SSL call. ERR_clear_error walks all of the queue's slots whether or
 * not any holds an error (about 800 instructions with OpenSSL 3, three
 * times a kept request); peeking first costs a fraction of that, and the
 * queue is almost always empty here (every failure path clears it).
 */
static void err_reset(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* Sends what OpenSSL wrote into wbio to the upstream socket. */
static int flush(struct conn *c)
{
    struct proxy_tls *t = c->up.tls;
    while (BIO_ctrl_pending(t->wbio) > 0) {
        struct relay_buf *rb = relay_buf_get(c->px->loop);
        if (!rb)
            return UV_ENOMEM;
        int n = BIO_read(t->wbio, rb->data, (int)rb->cap);
        if (n <= 0) {
            relay_buf_put(c->px->loop, rb);
            break;
        }
        int r = relay_send_raw(c, DIR_UP, rb, 0, (size_t)n);
        if (r < 0)
            return r;
    }
    return 0;
}

static void tls_fail(struct conn *c, const char *what)
{
    char reason[300], e[160] = "";
    struct proxy_tls *t = c->up.tls;
    long v = t ? SSL_get_verify_result(t->ssl) : X509_V_OK;
    unsigned long err = ERR_get_error();
    if (v != X509_V_OK)
        snprintf(e, sizeof e, "certificate not trusted: %s",
                 X509_verify_cert_error_string(v));
    else if (err)
        ERR_error_string_n(err, e, sizeof e);
    ERR_clear_error();
    snprintf(reason, sizeof reason, "TLS with %s:%d %s%s%s", c->host, c->port,
             what, e[0] ? ": " : "", e);
    conn_fail(c, 502, "error", "upstream_tls", reason);
}

/* A new session of a verified connection: the route's next connection
 * offers it (the slot is the SSL's app data, set by offer_session). The
 * slot keeps a copy: SSL_free marks the SSL's own session not resumable
 * when the connection ended without a close_notify (an upstream closing
 * after its response, a kept one dropped), and a ticket's session is the
 * SSL's own. Returns 0: sess stays OpenSSL's. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    SSL_SESSION **slot = SSL_get_app_data(ssl);
    if (!slot || SSL_get_verify_result(ssl) != X509_V_OK ||
        !SSL_SESSION_is_resumable(sess))
        return 0;
    SSL_SESSION *copy = SSL_SESSION_dup(sess);
    if (copy) {
        SSL_SESSION_free(*slot);
        *slot = copy;
    }
    return 0;
}

void proxy_tls_ctx_sessions(SSL_CTX *ctx)
{
    /* The client side, no internal store: sessions are kept per route in
     * opts.tls_sessions, never looked up by anything else. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
                                            SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
}

/* Offers the route's last session (if any) on the SSL about to connect,
 * and makes the route's slot the place its new sessions go. */
static void offer_session(struct conn *c, SSL *ssl)
{
    const struct proxy_opts *o = &c->px->opts;
    const struct proxy_route *rt = c->up.route;
    if (!rt || !o->tls_sessions)
        return;
    SSL_SESSION **slot = &o->tls_sessions[rt - o->routes];
    SSL_set_app_data(ssl, slot);
    if (*slot)
        SSL_set_session(ssl, *slot); /* a new reference of its own */
}

static void handshake(struct conn *c)
{
    struct proxy_tls *t = c->up.tls;
    err_reset();
    int r = SSL_do_handshake(t->ssl);
    if (flush(c) < 0) {
        conn_fail(c, 502, "error", "upstream_failed",
                  "cannot write to the upstream");
        return;
    }
    if (r == 1) {
        t->handshaking = false;
        conn_route_ready(c);
        return;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return;
    tls_fail(c, "failed");
}

int proxy_tls_start(struct conn *c)
{
    SSL_CTX *ctx = c->px->opts.tls_ctx;
    struct proxy_tls *t = calloc(1, sizeof *t);
    if (!t || !ctx || !(t->ssl = SSL_new(ctx))) {
        free(t);
        conn_fail(c, 502, "error", "internal_error", "cannot start TLS");
        return -1;
    }
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        conn_fail(c, 502, "error", "internal_error", "cannot start TLS");
        return -1;
    }
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    t->handshaking = true;
    c->up.tls = t;
    bool ip = c->kind == HOST_IPV4 || c->kind == HOST_IPV6;
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), c->host)
                : SSL_set1_host(t->ssl, c->host) &&
                      SSL_set_tlsext_host_name(t->ssl, c->host);
    if (ok != 1) {
        tls_fail(c, "cannot be set up for this host");
        return -1;
    }
    offer_session(c, t->ssl);
    handshake(c);
    if (c->closing)
        return -1;
    conn_update_reads(c); /* the upstream's answer to the hello */
    return 0;
}

void proxy_tls_up_read(struct conn *c, struct relay_buf *rb, ssize_t n)
{
    struct proxy_tls *t = c->up.tls;
    if (n < 0) {
        if (t->handshaking)
            tls_fail(c, n == UV_EOF ? "ended during the handshake"
                                    : "broke during the handshake");
        else
            conn_up_plain(c, NULL, n);
        return;
    }
    int w = BIO_write(t->rbio, rb->data, (int)n);
    relay_buf_put(c->px->loop, rb);
    if (w != (int)n) {
        conn_close(c);
        return;
    }
    if (t->handshaking) {
        handshake(c);
        if (c->closing || !c->up.tls || c->up.tls->handshaking)
            return;
        if (BIO_ctrl_pending(t->rbio) == 0 && !SSL_pending(t->ssl))
            return;
    }
    struct proxy_tls *mine = t;
    for (bool first = true;; first = false) {
        /* Once the ciphertext read is used up and no record is buffered,
         * another SSL_read could only say SSL_ERROR_WANT_READ: skip it
         * (a kept request's response is one record, and that last call,
         * with its buffer and error check, cost about 1,000 instructions
         * a request). */
        if (!first && BIO_ctrl_pending(t->rbio) == 0 &&
            !SSL_has_pending(t->ssl))
            break;
        struct relay_buf *p = relay_buf_get(c->px->loop);
        if (!p) {
            conn_close(c);
            return;
        }
        err_reset();
        int r = SSL_read(t->ssl, p->data, (int)p->cap);
        if (r > 0) {
            conn_up_plain(c, p, r);
            /* The relay may have ended the request, closed the upstream
             * or the connection: read no more into a closed state. */
            if (c->closing || c->up.tls != mine || c->up.closing)
                return;
            continue;
        }
        relay_buf_put(c->px->loop, p);
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_WANT_READ)
            break;
        if (e == SSL_ERROR_ZERO_RETURN) {
            conn_up_plain(c, NULL, UV_EOF); /* close_notify */
            return;
        }
        ERR_clear_error();
        conn_up_plain(c, NULL, UV_EPROTO);
        return;
    }
    if (flush(c) < 0)
        conn_close(c);
}

/* Encrypts len bytes (SSL_write copies them into its record) and sends
 * the record. */
static int tls_write(struct conn *c, const char *p, size_t len)
{
    struct proxy_tls *t = c->up.tls;
    c->req_bytes[DIR_UP] += len;
    err_reset();
    int r = SSL_write(t->ssl, p, (int)len);
    if (r != (int)len) {
        ERR_clear_error();
        return UV_EPROTO;
    }
    return flush(c);
}

int proxy_tls_send(struct conn *c, struct relay_buf *rb, size_t off, size_t len)
{
    int r = tls_write(c, rb->data + off, len);
    /* The request head holds the route's secret: no buffer that goes back
     * to the pool keeps it. */
    OPENSSL_cleanse(rb->data + off, len);
    relay_buf_put(c->px->loop, rb);
    return r;
}

int proxy_tls_send_keep(struct conn *c, const struct relay_buf *rb)
{
    return tls_write(c, rb->data, rb->len);
}
