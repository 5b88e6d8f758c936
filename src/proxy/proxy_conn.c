/*
 * proxy_conn.c - one client connection, in the order a request runs: read
 * its head, decide (proxy_decide.c), resolve and decide on every address,
 * dial only a checked address, then hand the bytes to proxy_relay.c; and
 * answer errors. Accepting it is the listener's (proxy_listen.c).
 *
 * The order of the checks is the security property: the allowlist is
 * consulted before any lookup, every address a name resolves to is checked
 * before any dial, and the dial uses those very addresses (no second
 * lookup). With a parent proxy (opts.parent) the allowlist comes first
 * just the same; then the dial is to the parent, whose answer to our
 * CONNECT opens the way, and the target's name is not looked up here (the
 * parent resolves it; an IP literal still meets the address rule).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/proxy_conn.h"
#include "proxy/proxy_decide.h"
#include "wire/tlshello.h"

static void conn_parse_head(struct conn *c);
static void dial_next(struct conn *c);
static void sni_feed(struct conn *c, struct relay_buf *rb, size_t off,
                     size_t n);
static void client_ended(struct conn *c);
static void conn_reply(struct conn *c, int status, const char *type,
                       const char *code, const char *reason);
static void parent_read(struct conn *c, ssize_t n);

static inline uv_loop_t *conn_loop(struct conn *c)
{
    return &c->px->loop->uv;
}

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
static void fd_take(struct conn *c, bool *held)
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
    c->up.inited = c->up.closing = c->up.connected = false;
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

static void conn_close_up(struct conn *c)
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

void conn_event(struct conn *c, const char *type, const char *code, int status,
                const char *reason)
{
    c->ev_pending = false;
    proxy_event(c->px, c, type, code, status, reason);
    c->refused_addr[0] = '\0';
    c->refused_class = NULL;
    /* What follows (an error reply, the next request's head) is not this
     * request's. */
    c->req_bytes[DIR_UP] = c->req_bytes[DIR_DOWN] = 0;
    c->req_start = 0;
}

void conn_admit(struct conn *c, uint8_t kind)
{
    c->admitted = kind;
    atomic_fetch_add_explicit(&c->px->stats.allowed, 1, memory_order_relaxed);
}

/* One event per admitted request, when it ends: the decision with the
 * bytes it moved (see README, choices: a tunnel is logged once, whole). */
void conn_event_admitted(struct conn *c)
{
    char reason[HOST_NAME_CAP + 160], text[INET6_ADDRSTRLEN];
    const char *learn = c->reported ? "not in the allowlist, admitted by "
                                      "learn mode; "
                                    : "";
    if (c->admitted == 1 && c->via_parent) {
        snprintf(reason, sizeof reason, "%stunnel through the parent proxy %s",
                 learn, c->px->opts.parent.text);
    } else if (c->admitted == 1) {
        proxy_addr_text(&c->addrs[c->addr_i], text, sizeof text);
        snprintf(reason, sizeof reason, "%stunnel to %s", learn, text);
    } else {
        char via[ROUTE_NAME_CAP + 16] = "";
        if (c->route)
            snprintf(via, sizeof via, "route %s: ", c->route->name);
        snprintf(reason, sizeof reason, "%s%supstream answered %d%s", learn,
                 via, c->fwd.res_status,
                 c->fwd.res_done ? "" : " (the response was cut short)");
    }
    conn_event(c, c->reported ? "report" : "allow",
               c->route      ? "route"
               : c->reported ? "not_allowed"
                             : "allowed",
               c->admitted == 1 ? 200 : c->fwd.res_status, reason);
}

static void route_idle_put(struct conn *c);

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
    if (c->fwd.out)
        relay_buf_put(loop, c->fwd.out);
    if (c->preply)
        relay_buf_put(loop, c->preply);
    c->sni = c->fwd.res = c->fwd.out = c->preply = NULL;
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

/* ---- replies and events ---- */

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

static void on_client_shutdown(uv_shutdown_t *req, int status)
{
    struct conn *c = req->data;
    (void)status;
    if (!c->closing && status < 0)
        conn_close(c);
}

/* Ends the client connection gracefully: queued writes go out, then FIN,
 * then its remaining input is drained (closing with unread input would
 * reset the connection and could destroy the reply before it is read). */
static void conn_end_client(struct conn *c)
{
    conn_close_up(c);
    c->state = CONN_LINGER;
    conn_head_free(c);
    uv_os_fd_t fd;
    if (c->dir[DIR_DOWN].pending == 0 && c->client.s.write_queue_size == 0 &&
        uv_fileno(&c->client.h, &fd) == 0) {
        /* Nothing queued: the reply is already in the client's receive
         * queue (the listener is loopback or a unix socket). A refused
         * CONNECT whose client has sent nothing unread has nothing to
         * drain: close() sends a plain FIN, no reset, and skips the linger
         * (a shutdown, a loop pass, a read and a timer per refusal). A
         * late byte gets a reset, which on Linux leaves the queued reply
         * readable. A forward request keeps the linger: its body may
         * still be on the way, and a client whose body write fails may
         * never read the reply. */
        int unread = -1;
        if (c->is_connect && ioctl(fd, FIONREAD, &unread) == 0 && unread == 0) {
            conn_close(c);
            return;
        }
        /* FIN now, without another loop pass. */
        shutdown(fd, SHUT_WR);
    } else {
        c->shut_req[SIDE_CLIENT].data = c;
        if (uv_shutdown(&c->shut_req[SIDE_CLIENT], &c->client.s,
                        on_client_shutdown) != 0) {
            conn_close(c);
            return;
        }
    }
    conn_arm(c, PROXY_LINGER_MS);
    conn_update_reads(c);
}

/* An error reply's head and body together fit here (error path only). */
#define REPLY_CAP 2048

/*
 * The proxy's own error reply in msg (cap >= REPLY_CAP); returns its
 * length. The head names the refusal's code in X-Isolation-Error (a
 * string literal of this program, never client bytes), so that an agent
 * can tell what refused it and why. The body, for a person or an agent
 * that reads it, gives the reason, the code, the host and port when the
 * request named one, and for not_allowed and private_address the isolate
 * option that would admit it. Everything the client sent (the host, a
 * reason that quotes it) is escaped as events are (proxy_text_escape):
 * no CR, LF or NUL of the client's reaches the reply, so no header can be
 * forged and the response cannot be split. host may be NULL or empty,
 * port 0 (the request was not read that far); addr is the address a
 * private_address refusal is about, or NULL.
 */
static size_t reply_text(int status, const char *code, const char *host,
                         int port, const char *addr, const char *reason,
                         char *msg, size_t cap)
{
    char why[640], where[HOST_NAME_CAP * 4 + 16], hint[HOST_NAME_CAP * 4 + 160];
    char h[HOST_NAME_CAP * 4 + 1];
    proxy_text_escape(why, sizeof why, reason);
    where[0] = hint[0] = '\0';
    if (host && host[0]) {
        proxy_text_escape(h, sizeof h, host);
        bool v6 = strchr(h, ':') != NULL;
        if (port > 0)
            snprintf(where, sizeof where, "%s%s%s:%d", v6 ? "[" : "", h,
                     v6 ? "]" : "", port);
        else
            snprintf(where, sizeof where, "%s%s%s", v6 ? "[" : "", h,
                     v6 ? "]" : "");
    }
    if (!strcmp(code, "not_allowed") && where[0])
        snprintf(hint, sizeof hint, "to allow it: isolate --allow-host %s\n",
                 where);
    else if (!strcmp(code, "private_address") && addr && addr[0])
        snprintf(hint, sizeof hint,
                 "to allow it: isolate --allow-private (every private "
                 "address), or --allow-host %s%s%s:%d (this address)\n",
                 strchr(addr, ':') ? "[" : "", addr,
                 strchr(addr, ':') ? "]" : "", port);
    else if (!strcmp(code, "private_address"))
        snprintf(hint, sizeof hint,
                 "to allow it: isolate --allow-private (every private "
                 "address)\n");
    char body[sizeof why + sizeof where + sizeof hint + 64];
    int bl = snprintf(
        body, sizeof body, "isolation proxy: %s\ncode: %s\n%s%s%s%s", why, code,
        where[0] ? "host: " : "", where, where[0] ? "\n" : "", hint);
    if (bl < 0 || (size_t)bl >= sizeof body)
        bl = (int)sizeof body - 1;
    int ml = snprintf(msg, cap,
                      "HTTP/1.1 %d %s\r\nX-Isolation-Error: %s\r\n%s"
                      "Content-Type: text/plain; charset=utf-8\r\n"
                      "Content-Length: %d\r\nConnection: close\r\n\r\n%.*s",
                      status, status_text(status), code,
                      status == 407
                          ? "Proxy-Authenticate: Basic realm=\"isolation\"\r\n"
                          : "",
                      bl, bl, body);
    if (ml < 0 || (size_t)ml >= cap)
        ml = (int)cap - 1; /* the body is cut; never the head */
    return (size_t)ml;
}

static void conn_reply_addr(struct conn *c, int status, const char *type,
                            const char *code, const char *reason,
                            const char *addr)
{
    if (c->closing || c->state == CONN_LINGER)
        return;
    conn_event(c, type, code, status, reason);
    if (c->socks) {
        c->state = CONN_LINGER;
        if (c->socks == SOCKS_ASKED)
            proxy_socks_refuse(c, code);
        if (!c->closing)
            conn_end_client(c);
        return;
    }
    char msg[REPLY_CAP];
    size_t ml = reply_text(status, code, c->host, c->port, addr, reason, msg,
                           sizeof msg);
    c->state = CONN_LINGER;
    if (relay_send_copy(c, DIR_DOWN, msg, ml) < 0) {
        conn_close(c);
        return;
    }
    conn_end_client(c);
}

static void conn_reply(struct conn *c, int status, const char *type,
                       const char *code, const char *reason)
{
    conn_reply_addr(c, status, type, code, reason, NULL);
}

void conn_fail(struct conn *c, int status, const char *type, const char *code,
               const char *reason)
{
    if (c->closing)
        return;
    if (c->state == CONN_TUNNEL ||
        (c->state == CONN_FORWARD && c->fwd.res_head_done)) {
        /* The client already has a status line: all we can do is stop. */
        conn_event(c, type, code, status, reason);
        conn_close(c);
        return;
    }
    conn_reply(c, status, type, code, reason);
}

/* ---- checking and dialing ---- */

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

/* Every address must pass; one that does not refuses the request. */
static bool addr_admitted(struct conn *c, const struct host_addr *a)
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

static void on_connect(uv_connect_t *req, int status);

static void dial_next(struct conn *c)
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

/* ---- a tunnel's first client bytes: held until the SNI decision ---- */

/* Feeds client bytes to the SNI decision; forwards them once it passes. */
static void sni_feed(struct conn *c, struct relay_buf *rb, size_t off, size_t n)
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
static void client_ended(struct conn *c)
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

static void tunnel_established(struct conn *c)
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

static void forward_send(struct conn *c)
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
    if (relay_send(c, DIR_UP, out, 0, out->len) < 0) {
        conn_fail(c, 502, "error", "upstream_failed",
                  "cannot send the request upstream");
        return;
    }
    conn_update_reads(c);
}

/* ---- through a parent proxy (proxy_parent.c) ---- */

/* The name the proxy looks up: the parent's, when there is one. */
static const char *dial_name(const struct conn *c)
{
    return c->via_parent ? c->px->opts.parent.host : c->host;
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
static void parent_read(struct conn *c, ssize_t n)
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

static void check_and_dial(struct conn *c)
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

static void resolve(struct conn *c)
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

/* Dials the parent proxy for c's request (its address, or its name's). */
static void parent_dial(struct conn *c)
{
    const struct proxy_parent *pp = &c->px->opts.parent;
    c->via_parent = true;
    if (pp->kind == HOST_IPV4 || pp->kind == HOST_IPV6) {
        c->naddr = 1;
        c->addrs[0] = pp->addr;
        check_and_dial(c);
        return;
    }
    resolve(c);
}

/* Builds the origin-form head plus the body bytes that came with it. */
static int forward_prepare(struct conn *c, const struct http_request *req,
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
    if (c->fwd.out)
        relay_buf_put(loop, c->fwd.out);
    c->fwd.out = out;
    return 0;
}

/* ---- idle route upstreams, kept across client connections ---- */

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
static void route_idle_put(struct conn *c)
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
static bool route_idle_take(struct conn *c, const struct proxy_route *rt)
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
    int r = forward_prepare(c, req, head_len);
    if (r != 0) {
        c->head_len = 0;
        conn_reply(c, r == -2 ? 400 : 502, r == -2 ? "deny" : "error",
                   r == -2 ? "bad_request" : "internal_error",
                   r == -2 ? "malformed chunked body" : "out of memory");
        return;
    }
    if (c->up.connected && !c->up.closing && c->up.reusable && c->up.tls &&
        c->up.route == rt) {
        forward_send(c);
        return;
    }
    route_idle_put(c); /* another route's, kept for its next client */
    conn_close_up(c);
    if (route_idle_take(c, rt)) {
        forward_send(c);
        return;
    }
    if (c->px->opts.parent.set) {
        parent_dial(c);
        return;
    }
    if (rt->kind == HOST_IPV4 || rt->kind == HOST_IPV6) {
        c->naddr = 1;
        c->addrs[0] = rt->addr;
        check_and_dial(c);
        return;
    }
    resolve(c);
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
        int r = forward_prepare(c, req, head_len);
        if (r != 0) {
            c->head_len = 0;
            conn_reply(c, r == -2 ? 400 : 502, r == -2 ? "deny" : "error",
                       r == -2 ? "bad_request" : "internal_error",
                       r == -2 ? "malformed chunked body" : "out of memory");
            return;
        }
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

    if (p->opts.parent.set) {
        parent_dial(c);
        return;
    }
    if (req->host_kind == HOST_IPV4 || req->host_kind == HOST_IPV6) {
        c->naddr = 1;
        c->addrs[0] = req->addr;
        check_and_dial(c);
        return;
    }
    resolve(c);
}

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

void conn_handle_request(struct conn *c, const struct http_request *req,
                         size_t head_len)
{
    handle_request(c, req, head_len);
}

void conn_reply_refusal(struct conn *c, int status, const char *type,
                        const char *code, const char *reason)
{
    conn_reply(c, status, type, code, reason);
}

void conn_end_client_now(struct conn *c)
{
    conn_end_client(c);
}

static void conn_parse_head(struct conn *c)
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

/* After a forward response: the next request, or the end. */
void conn_forward_done(struct conn *c)
{
    if (c->closing)
        return;
    if (c->ev_pending && c->admitted)
        conn_event_admitted(c);
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
