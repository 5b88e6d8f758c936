/*
 * proxy_conn.c - one client connection's life: its handles and buffers,
 * its reads (which side reads, parked and resumed turns), its timer, and
 * its close. Accepting it is the listener's (proxy_listen.c); what a
 * request does once its head is read is, in order: proxy_request.c (the
 * head parsed and decided), proxy_dial.c (resolved, every address checked,
 * dialled, or through a parent proxy), proxy_tunnel.c (the tunnel or the
 * forward request begins), proxy_relay.c (the bytes), and proxy_reply.c
 * (its event, or the proxy's error reply).
 */
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_conn.h"

/* After a flood the heap keeps its pages (glibc gives back only the top):
 * once the loop's connections fall to a quarter of a large peak, the free
 * pages and the buffer pools go back to the system. Rare, and off the
 * per-byte path. */
static void loop_conn_freed(struct proxy_loop *loop)
{
    loop->live--;
    if (loop->peak < PROXY_TRIM_PEAK || loop->live > loop->peak / 4)
        return;
    relay_pool_free(loop);
    malloc_trim(0);
    loop->peak = loop->live;
}

static void conn_free_if_done(struct conn *c)
{
    if (c->nopen > 0)
        return;
    struct proxy *p = c->px;
    struct proxy_loop *loop = p->loop;
    free(c);
    loop_conn_freed(loop);
    p->handles--;
    proxy_maybe_release(p);
}

/* Descriptors in the process-wide pool (see proxy_fds_setup). */
void fd_take(struct conn *c, bool *held)
{
    *held = true;
    c->px->fds++;
    atomic_fetch_add_explicit(&proxy_fds_used, 1, memory_order_relaxed);
}

static void fd_give(struct conn *c, bool *held)
{
    if (!*held)
        return;
    *held = false;
    c->px->fds--;
    atomic_fetch_sub_explicit(&proxy_fds_used, 1, memory_order_relaxed);
}

/* Head bytes charged to the proxy's PROXY_HEAD_BUDGET. */
static size_t head_charge(size_t cap)
{
    return cap > PROXY_HEAD_FIRST ? cap - PROXY_HEAD_FIRST : 0;
}

/* May c's head buffer grow to cap within the proxy's budget? */
static bool head_grow_ok(struct conn *c, size_t cap)
{
    return c->px->head_bytes - head_charge(c->head_cap) + head_charge(cap) <=
           PROXY_HEAD_BUDGET;
}

static void head_resized(struct conn *c, size_t cap)
{
    c->px->head_bytes += head_charge(cap) - head_charge(c->head_cap);
    c->head_cap = (uint32_t)cap;
}

void conn_head_free(struct conn *c)
{
    c->px->head_bytes -= head_charge(c->head_cap);
    free(c->head);
    c->head = NULL;
    c->head_len = c->head_cap = 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    c->nopen--;
    conn_free_if_done(c);
}

static void on_up_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    c->nopen--;
    proxy_tls_free(c->up.tls);
    c->up.tls = NULL;
    c->up.route = NULL;
    c->up.inited = c->up.closing = c->up.connected = c->up.reused = false;
    c->reading[SIDE_UP] = false;
    if (c->closing) {
        conn_free_if_done(c);
        return;
    }
    if (c->up.redial) {
        c->up.redial = false;
        dial_next(c);
    }
}

void conn_close_up(struct conn *c)
{
    if (!c->up.inited || c->up.closing)
        return;
    c->up.closing = true;
    c->up.connected = false;
    c->up.reusable = false;
    c->reading[SIDE_UP] = false;
    c->parent_wait = false;
    if (c->preply) {
        relay_buf_put(c->px->loop, c->preply);
        c->preply = NULL;
    }
    fd_give(c, &c->fd_up);
    uv_close((uv_handle_t *)&c->up.tcp, on_up_closed);
}

void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    struct proxy *p = c->px;
    /* A client that ends between requests leaves its route upstream
     * clean: kept for the route's next client connection. */
    if (c->state == CONN_HEAD)
        route_idle_put(c);
    if (c->ev_pending && c->admitted)
        conn_event_admitted(c);
    else if (c->ev_pending)
        conn_event(c, "error", "client_closed", 499,
                   "the connection ended before the request was answered");
    c->closing = true;
    c->state = CONN_CLOSED;
    proxy_loop_unpark(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        p->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->counted)
        p->nclients--;
    if (c->listeners)
        proxy_pass_conn_closed(c);
    atomic_fetch_sub_explicit(&p->stats.active, 1, memory_order_relaxed);
    fd_give(c, &c->fd_client);
    uv_close(&c->client.h, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    if (c->up.inited && !c->up.closing) {
        c->up.closing = true;
        uv_close((uv_handle_t *)&c->up.tcp, on_up_closed);
    }
    fd_give(c, &c->fd_up);
    proxy_dns_cancel(c);
    conn_head_free(c);
    struct proxy_loop *loop = p->loop;
    if (c->sni)
        relay_buf_put(loop, c->sni);
    if (c->fwd.res)
        relay_buf_put(loop, c->fwd.res);
    route_out_drop(c);
    if (c->preply)
        relay_buf_put(loop, c->preply);
    route_replay_drop(c);
    c->sni = c->fwd.res = c->preply = NULL;
    c->parent_wait = false;
    proxy_allow_put(c->allow);
    c->allow = NULL;
}

static void on_timer(uv_timer_t *t);

void conn_arm(struct conn *c, uint64_t ms)
{
    c->deadline = uv_now(conn_loop(c)) + ms;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- reading ---- */

static void on_client_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);
static void on_up_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void set_reading(struct conn *c, int side, bool want)
{
    if (c->parked[side]) {
        if (want)
            return; /* its proxy's budget is spent: the loop resumes it */
        c->parked[side] = false;
    }
    if (c->reading[side] == want)
        return;
    uv_stream_t *s =
        side == SIDE_CLIENT ? &c->client.s : (uv_stream_t *)&c->up.tcp;
    if (want) {
        int r = side == SIDE_CLIENT
                    ? uv_read_start(s, on_client_alloc, on_client_read)
                    : uv_read_start(s, on_up_alloc, on_up_read);
        if (r == 0)
            c->reading[side] = true;
    } else {
        uv_read_stop(s);
        c->reading[side] = false;
    }
}

/* Which sides read is a function of the state: one place decides. */
void conn_update_reads(struct conn *c)
{
    if (c->closing)
        return;
    bool client = false, up = false;
    switch (c->state) {
    case CONN_HEAD:
        client = true;
        up = true; /* a kept upstream: notice when it goes away */
        break;
    case CONN_TUNNEL:
        client = !c->dir[DIR_UP].eof && c->dir[DIR_UP].pending == 0;
        up = !c->dir[DIR_DOWN].eof && c->dir[DIR_DOWN].pending == 0;
        break;
    case CONN_FORWARD:
        /* The body while it is due; afterwards, pipelined bytes while they
         * fit (and the client's leaving). */
        client =
            c->fwd.req_done
                ? !c->carry_lost && c->head_len <= c->px->opts.max_header_bytes
                : !c->dir[DIR_UP].eof && c->dir[DIR_UP].pending == 0;
        up = !c->dir[DIR_DOWN].eof && c->dir[DIR_DOWN].pending == 0;
        break;
    case CONN_RESOLVE:
    case CONN_DIAL:
        client = c->is_connect && !c->dir[DIR_UP].eof &&
                 c->head_len <= c->px->opts.max_header_bytes;
        /* a route's handshake, or the parent's answer to our CONNECT */
        up = proxy_tls_handshaking(c->up.tls) || c->parent_wait;
        break;
    case CONN_LINGER:
        client = true;
        break;
    default:
        break;
    }
    set_reading(c, SIDE_CLIENT, client);
    if (c->up.inited && c->up.connected && !c->up.closing)
        set_reading(c, SIDE_UP, up);
}

/*
 * Has c's proxy read its PROXY_TURN_BYTES, or made its PROXY_TURN_READS
 * reads, in this turn? Then c's read waits: an empty buffer makes libuv
 * give UV_ENOBUFS, and the read callback parks that side (conn_park). A
 * flood on one proxy then costs the others one turn's bytes and reads,
 * not one read of every ready socket.
 */
static bool turn_spent(struct conn *c, int side, uv_buf_t *buf)
{
    struct proxy *p = c->px;
    if (p->loop->serving < 2)
        return false; /* alone on its loop: nobody to make room for */
    uint64_t now = p->loop->turn;
    if (p->turn != now) {
        p->turn = now;
        p->turn_bytes = 0;
        p->turn_reads = 0;
    }
    if (p->turn_bytes < PROXY_TURN_BYTES && p->turn_reads < PROXY_TURN_READS) {
        p->turn_reads++;
        return false;
    }
    c->deferred[side] = true;
    *buf = uv_buf_init(NULL, 0);
    return true;
}

/* Tunnels and forward bodies: what the budget counts. */
static bool relaying(const struct conn *c)
{
    return c->state == CONN_TUNNEL || c->state == CONN_FORWARD;
}

static void turn_count(struct conn *c, ssize_t n)
{
    c->px->turn_bytes += (uint64_t)n;
}

/*
 * Parks a side whose read was put off: it stops reading (a socket left
 * readable would come back, to be put off again, in every pass: 49,152
 * callbacks a pass, 20 ms, measured with 2,048 pipelining clients) and
 * waits in the loop's queue, which resumes a few each pass, oldest first.
 */
static void conn_park(struct conn *c, int side)
{
    c->deferred[side] = false;
    set_reading(c, side, false);
    c->parked[side] = true;
    proxy_loop_park(c);
}

void conn_resume(struct conn *c)
{
    c->parked[SIDE_CLIENT] = c->parked[SIDE_UP] = false;
    if (!c->closing)
        conn_update_reads(c);
}

/* A bulk tunnel side reads RELAY_BIG_SIZE at a time, but only on a loop of
 * its proxy's own: one such read is four passes' PROXY_TURN_BYTES, and a
 * pass that long is what a proxy sharing the loop waits for (512 bulk
 * tunnels on A's loop: B's p50 5-9 ms, max 20-32 ms with big reads; 1-2
 * ms, 3-12 ms without). */
static bool big_reads(const struct conn *c, int side)
{
    return c->state == CONN_TUNNEL && c->bulk[side] && c->px->loop->serving < 2;
}

static void on_client_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    struct conn *c = h->data;
    if (c->pass && proxy_pass_alloc(c, buf))
        return;
    if (turn_spent(c, SIDE_CLIENT, buf))
        return;
    if (c->state == CONN_HEAD ||
        ((c->state == CONN_RESOLVE || c->state == CONN_DIAL) &&
         c->is_connect) ||
        (c->state == CONN_FORWARD && c->fwd.req_done)) {
        size_t limit = c->px->opts.max_header_bytes + 1;
        if (c->head_len == c->head_cap && c->head_cap < limit) {
            size_t cap = c->head_cap ? c->head_cap * 4 : 4096;
            if (cap > limit)
                cap = limit;
            if (!head_grow_ok(c, cap)) {
                c->head_over = true; /* the read gets UV_ENOBUFS */
                *buf = uv_buf_init(NULL, 0);
                return;
            }
            char *n = realloc(c->head, cap);
            if (n) {
                c->head = n;
                head_resized(c, cap);
            }
        }
        *buf = uv_buf_init(c->head + c->head_len, c->head_cap - c->head_len);
        return;
    }
    /* Tunnel bytes past the SNI check are only relayed: a big buffer once
     * this side has shown it sends in bulk. */
    struct relay_buf *rb = !c->sni_wait && big_reads(c, SIDE_CLIENT)
                               ? relay_buf_big(c->px->loop)
                               : relay_buf_get(c->px->loop);
    *buf = rb ? uv_buf_init(rb->data, rb->cap) : uv_buf_init(NULL, 0);
}

static void on_up_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    struct conn *c = h->data;
    if (turn_spent(c, SIDE_UP, buf))
        return;
    if (c->parent_wait) {
        /* The parent's reply lands behind what came of it so far; the
         * head bound is far below the buffer's size, so there is room. */
        struct relay_buf *b = c->preply;
        *buf = uv_buf_init(b->data + b->len, b->cap - b->len);
        return;
    }
    struct relay_buf *rb = big_reads(c, SIDE_UP) ? relay_buf_big(c->px->loop)
                                                 : relay_buf_get(c->px->loop);
    *buf = rb ? uv_buf_init(rb->data, rb->cap) : uv_buf_init(NULL, 0);
}

static struct relay_buf *buf_owner(const uv_buf_t *buf)
{
    if (!buf->base)
        return NULL;
    return (struct relay_buf *)(buf->base - offsetof(struct relay_buf, data));
}

static void on_client_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (c->pass) {
        proxy_pass_read(c, n);
        return;
    }
    if (n == UV_ENOBUFS && c->deferred[SIDE_CLIENT]) {
        conn_park(c, SIDE_CLIENT);
        return;
    }
    if (n == UV_ENOBUFS && c->head_over) {
        c->head_over = false;
        if (c->state == CONN_HEAD)
            conn_reply(c, 503, "error", "too_many",
                       "request heads in progress on this proxy are over its "
                       "memory budget");
        else
            conn_close(c);
        return;
    }
    if (c->state == CONN_HEAD) {
        if (n > 0) {
            if (c->head_len == 0 && c->kept) {
                /* The next request has begun: the whole head gets
                 * header_timeout from its first byte. */
                c->kept = false;
                conn_arm(c, c->px->opts.header_ms);
            }
            c->head_len += (uint32_t)n;
            conn_parse_head(c);
        } else if (n < 0) {
            conn_close(c);
        }
        return;
    }
    if (c->state == CONN_RESOLVE || c->state == CONN_DIAL) {
        /* A CONNECT being dialed: early tunnel bytes wait in the head
         * buffer; an end is passed on once the tunnel is up. */
        if (n > 0) {
            c->head_len += (uint32_t)n;
        } else if (n == UV_EOF) {
            c->dir[DIR_UP].eof = true;
            c->reading[SIDE_CLIENT] = false;
        } else if (n < 0) {
            conn_close(c);
            return;
        }
        conn_update_reads(c);
        return;
    }
    if (c->state == CONN_FORWARD && c->fwd.req_done) {
        /* The request is sent: what comes now is the next request, kept
         * in the head buffer, or the client leaving (an end here means it
         * gave up waiting: the request is over). */
        if (n > 0) {
            c->head_len += (uint32_t)n;
            conn_update_reads(c);
        } else if (n < 0) {
            conn_close(c);
        }
        return;
    }
    struct relay_buf *rb = buf_owner(buf);
    if (n <= 0) {
        if (rb)
            relay_buf_put(c->px->loop, rb);
        if (n == 0)
            return;
        c->reading[SIDE_CLIENT] = false;
        if (c->state == CONN_LINGER || n != UV_EOF)
            conn_close(c);
        else
            client_ended(c);
        return;
    }
    c->last_active = uv_now(conn_loop(c));
    if (c->state == CONN_LINGER) {
        relay_buf_put(c->px->loop, rb);
        return;
    }
    if ((size_t)n == rb->cap)
        c->bulk[SIDE_CLIENT] = true;
    if (relaying(c))
        turn_count(c, n);
    if (c->state == CONN_TUNNEL && c->sni_wait) {
        atomic_fetch_add_explicit(&c->px->stats.bytes_up, (uint64_t)n,
                                  memory_order_relaxed);
        sni_feed(c, rb, 0, (size_t)n);
        return;
    }
    relay_client_data(c, rb, (size_t)n);
}

/*
 * The upstream sends in bulk. A unix socket client (a sandbox's bridge)
 * then gets a send buffer as large as the relay's reads: the default
 * (wmem_default, 208 KiB) took a 1 MiB read in several writes and as many
 * wakeups of both sides, and one bulk tunnel measured 1.5-1.8 GB/s down
 * instead of 2.7-3.2. Still bounded per tunnel; TCP tunes its own.
 */
static void went_bulk_down(struct conn *c)
{
    c->bulk[SIDE_UP] = true;
    uv_os_fd_t fd;
    int size = RELAY_BIG_SIZE / 2; /* Linux doubles it */
    if (c->client_unix && uv_fileno(&c->client.h, &fd) == 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

static void on_up_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = s->data;
    if (n == UV_ENOBUFS && c->deferred[SIDE_UP]) {
        conn_park(c, SIDE_UP);
        return;
    }
    if (c->parent_wait) {
        parent_read(c, n);
        return;
    }
    struct relay_buf *rb = buf_owner(buf);
    if (c->up.tls) {
        /* A route's upstream: ciphertext, made plaintext by proxy_tls.c,
         * which hands it to conn_up_plain. */
        if (n <= 0 && rb)
            relay_buf_put(c->px->loop, rb);
        if (n == 0)
            return;
        if (n < 0)
            c->reading[SIDE_UP] = false;
        else
            c->last_active = uv_now(conn_loop(c));
        if (n > 0 && relaying(c))
            turn_count(c, n);
        proxy_tls_up_read(c, n > 0 ? rb : NULL, n);
        return;
    }
    conn_up_plain(c, rb, n);
}

void conn_up_plain(struct conn *c, struct relay_buf *rb, ssize_t n)
{
    if (n <= 0) {
        if (rb)
            relay_buf_put(c->px->loop, rb);
        if (n == 0)
            return;
        c->reading[SIDE_UP] = false;
        /* A reused route upstream that closed before answering: the
         * request goes out once more on a fresh connection, if it may. */
        if (c->fwd.replay && route_retry(c))
            return;
        if (c->state == CONN_HEAD) {
            conn_close_up(c); /* a kept upstream went away */
        } else if (n != UV_EOF) {
            if (c->state == CONN_FORWARD && !c->fwd.res_head_done)
                conn_fail(c, 502, "error", "upstream_failed",
                          "upstream connection failed");
            else
                conn_close(c);
        } else {
            relay_eof(c, SIDE_UP);
        }
        return;
    }
    c->last_active = uv_now(conn_loop(c));
    if (c->fwd.replay)
        route_replay_drop(c); /* a response byte: never sent again */
    if (c->state == CONN_HEAD) {
        /* Bytes from a kept upstream between requests: not reusable. */
        relay_buf_put(c->px->loop, rb);
        conn_close_up(c);
        return;
    }
    if (!c->up.tls) {
        if ((size_t)n == rb->cap && !c->bulk[SIDE_UP])
            went_bulk_down(c);
        if (relaying(c))
            turn_count(c, n);
    }
    relay_up_data(c, rb, (size_t)n);
}

void conn_carry(struct conn *c, const char *p, size_t n)
{
    size_t limit = c->px->opts.max_header_bytes + 1;
    if (n == 0)
        return;
    char *b = c->head_len + n <= c->head_cap ? c->head : NULL;
    if (!b && c->head_len + n <= limit && head_grow_ok(c, limit)) {
        b = realloc(c->head, limit);
        if (b) {
            c->head = b;
            head_resized(c, limit);
        }
    }
    if (!b) {
        /* More pipelined bytes than a head may hold: never parse a
         * stream with a hole in it; answer this request, then end. */
        c->carry_lost = true;
        c->fwd.close_after = true;
        return;
    }
    memcpy(c->head + c->head_len, p, n);
    c->head_len += (uint32_t)n;
}

static void on_timer(uv_timer_t *t)
{
    struct conn *c = t->data;
    struct proxy *p = c->px;
    uint64_t now = uv_now(conn_loop(c));
    switch (c->state) {
    case CONN_HEAD:
        if (c->kept && c->head_len == 0)
            conn_close(c); /* idle between requests */
        else
            conn_reply(c, 408, "error", "header_timeout",
                       "request head not complete within header_timeout");
        break;
    case CONN_RESOLVE:
        proxy_dns_cancel(c);
        conn_reply(c, 504, "error", "dns_timeout", "name resolution timed out");
        break;
    case CONN_DIAL:
        /* Through a parent: its dial or its answer (a route's handshake
         * after the answer is the upstream's, as without one). */
        if (c->via_parent && !c->up.tls)
            conn_reply(c, 504, "error", "upstream_proxy_failed",
                       c->parent_wait
                           ? "the parent proxy did not answer the CONNECT "
                             "within connect_timeout"
                           : "connecting to the parent proxy timed out");
        else
            conn_reply(c, 504, "error", "connect_timeout",
                       "connecting upstream timed out");
        break;
    case CONN_TUNNEL:
    case CONN_FORWARD: {
        if (c->sni_wait && now >= c->deadline) {
            conn_event(c, "deny", "tls_timeout", 403,
                       "no complete TLS ClientHello within header_timeout");
            conn_close(c);
            break;
        }
        uint64_t idle = now - c->last_active;
        if (idle >= p->opts.idle_ms) {
            if (c->state == CONN_FORWARD && !c->fwd.res_head_done)
                conn_fail(c, 504, "error", "upstream_timeout",
                          "upstream did not answer within "
                          "idle_timeout");
            else
                conn_close(c);
            break;
        }
        uint64_t next = p->opts.idle_ms - idle;
        if (c->sni_wait && c->deadline - now < next)
            next = c->deadline - now;
        uv_timer_start(&c->timer, on_timer, next, 0);
        break;
    }
    default:
        conn_close(c);
        break;
    }
}

/* ---- a new client, for the listener (proxy_listen.c) ---- */

/*
 * A refused client gets its 503 and is closed at once: a refusal that
 * lingered would hold a descriptor per refused connection for
 * PROXY_LINGER_MS, and a flood of them would use up what the quota
 * protects. What it sent is read away first, so the close is a FIN (a
 * reset still leaves the queued reply readable on Linux).
 */
void conn_refuse(struct conn *c, const char *reason)
{
    conn_event(c, "error", "too_many", 503, reason);
    char msg[REPLY_CAP];
    uv_buf_t b =
        uv_buf_init(msg, (unsigned)reply_text(503, "too_many", NULL, 0, NULL,
                                              reason, msg, sizeof msg));
    uv_try_write(&c->client.s, &b, 1);
    uv_os_fd_t fd;
    if (uv_fileno(&c->client.h, &fd) == 0) {
        char sink[4096];
        for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0;
             i++)
            ;
    }
    conn_close(c);
}

struct conn *conn_accept(struct proxy *p, uv_stream_t *server, bool is_unix)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->px = p;
    c->client_unix = is_unix;
    uv_loop_t *loop = &p->loop->uv;
    int r = is_unix ? uv_pipe_init(loop, &c->client.pipe, 0)
                    : uv_tcp_init(loop, &c->client.tcp);
    if (r != 0) {
        free(c);
        return NULL;
    }
    c->client.h.data = c;
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    c->nopen = 2;
    p->handles++;
    struct proxy_loop *pl = p->loop;
    if (++pl->live > pl->peak)
        pl->peak = pl->live;
    c->next = p->conns;
    if (p->conns)
        p->conns->prev = c;
    p->conns = c;
    atomic_fetch_add_explicit(&p->stats.active, 1, memory_order_relaxed);
    if (uv_accept(server, &c->client.s) != 0) {
        conn_close(c);
        return NULL;
    }
    fd_take(c, &c->fd_client);
    atomic_fetch_add_explicit(&p->stats.connections, 1, memory_order_relaxed);
    c->state = CONN_HEAD;
    return c;
}

void conn_start(struct conn *c, bool is_unix, bool nodelay_inherited)
{
    struct proxy *p = c->px;
    if (!is_unix && !nodelay_inherited)
        uv_tcp_nodelay(&c->client.tcp, 1);
    c->counted = true;
    p->nclients++;
    /* A unix client may be a sandbox handing over its listener: its first
     * byte decides, before the HTTP parser sees any (proxy_pass.c). */
    if (is_unix && p->opts.accept_listeners && !p->pass_sealed)
        c->pass = PASS_PROBE;
    conn_arm(c, p->opts.header_ms);
    conn_update_reads(c);
}
