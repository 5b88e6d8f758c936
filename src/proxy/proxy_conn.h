/*
 * proxy_conn.h - one client connection (struct conn), its buffers, and what
 * the files that handle its bytes share: proxy_conn.c (its life: reads,
 * timer, close), a request's way in proxy_request.c (head, decision),
 * proxy_dial.c (resolve, check, dial, parent), proxy_tunnel.c (tunnel or
 * forward begins) and proxy_reply.c (events, error replies),
 * proxy_relay.c (moving bytes) and proxy_buf.c (its buffers),
 * proxy_socks.c and proxy_pass.c (other first bytes), proxy_event.c
 * (an event names its connection's request), and proxy_loop.c (the loop's
 * queue of parked connections, resumed oldest first).
 */
#ifndef ISOLATION_PROXY_CONN_H
#define ISOLATION_PROXY_CONN_H

#include "proxy/proxy.h"
#include "wire/httpparse.h"

/* A read buffer; the write request that sends it lives in front of it. */
struct relay_buf {
    uv_write_t req;
    struct conn *c;
    struct relay_buf *next_free;
    uint32_t cap;
    uint32_t len; /* bytes held (SNI and response-head accumulation) */
    uint8_t dir;  /* while written: DIR_UP or DIR_DOWN */
    char data[];
};

enum conn_state {
    CONN_HEAD,    /* reading a request head (or idle between requests) */
    CONN_RESOLVE, /* waiting for the name's addresses */
    CONN_DIAL,    /* connecting upstream */
    CONN_TUNNEL,  /* CONNECT established */
    CONN_FORWARD, /* a forward request and its response in flight */
    CONN_LINGER,  /* an error reply sent; draining the client, then close */
    CONN_CLOSED
};

enum { DIR_UP = 0, DIR_DOWN = 1 }; /* client->upstream, upstream->client */
enum { SIDE_CLIENT = 0, SIDE_UP = 1 };

struct conn_dir {
    uint32_t pending; /* writes queued to the destination */
    bool eof;         /* the source has ended */
    bool shut;        /* the destination's shutdown has completed */
};

/* The upstream connection, and what it reaches. */
struct conn_up {
    uv_tcp_t tcp;
    uv_connect_t connect;
    bool inited, connected, closing;
    bool reusable; /* a forward response left it fit for the next request */
    bool redial;   /* dial the next address once this socket has closed */
    /* A route's kept connection that already carried a response: the
     * upstream may close it just as a request goes out (route_retry). */
    bool reused;
    /* What it reaches (forward keep-alive): host:port at a checked address. */
    char host[HOST_NAME_CAP];
    int port;
    struct host_addr addr;
    /* A route's upstream: its TLS session (proxy_tls.c), and the route it
     * was made for (reused only for the same route). */
    struct proxy_tls *tls;
    const struct proxy_route *route;
};

/* A forward request and its response, framed in both directions. */
struct conn_fwd {
    bool req_done, res_done, res_head_done;
    bool head_req;    /* HEAD: its response has no body */
    bool close_after; /* end the client connection after this response */
    uint8_t req_body, res_body; /* BODY_* */
    int res_status;
    uint64_t req_left, res_left;
    struct http_chunked req_chunk, res_chunk;
    struct relay_buf *res; /* the response head so far */
    struct relay_buf *out; /* the upstream head, until dialed */
    /* A route's request as sent on a reused upstream, held (secret and all)
     * until the first response byte, to be sent once more on a fresh
     * connection should that upstream close first (route_retry). */
    struct relay_buf *replay;
};

struct conn {
    struct proxy *px;
    struct conn *prev, *next;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t s;
        uv_handle_t h;
    } client;
    struct conn_up up;
    uv_timer_t timer;
    uv_shutdown_t shut_req[2]; /* by destination side */
    struct dns_job *dns_job;   /* its lookup (proxy_dns.c), or NULL */
    struct proxy_allow *allow;

    /* The request head, and whatever the client sent right behind it. */
    char *head;
    uint32_t head_len, head_cap;
    struct relay_buf *sni; /* tunnel: first client bytes until decided */

    uint64_t last_active;
    uint64_t deadline;
    uint64_t req_start; /* uv_hrtime() when the request's head was complete */
    uint64_t req_bytes[2]; /* by direction: relayed for this request */
    uint8_t state;
    uint8_t nopen; /* handles and lookups not yet finished */
    uint8_t naddr, addr_i;
    bool closing;
    bool counted; /* counts against max_connections */
    bool reading[2];
    bool bulk[2]; /* by side: a tunnel read filled a whole buffer */
    bool is_connect, keep_alive, sni_wait;
    bool kept;       /* idle between requests, its upstream kept */
    bool ev_pending; /* a request whose event is not given yet */
    /* Admitted (a tunnel established, a response head relayed): its one
     * event is given when it ends, with its bytes. */
    uint8_t admitted;
    bool reported;   /* admitted by learn mode, not by the allowlist */
    bool carry_lost; /* pipelined bytes did not fit: end after this one */
    bool head_over;  /* its head would pass the proxy's PROXY_HEAD_BUDGET */
    bool fd_client, fd_up; /* counted in the descriptor pool */
    bool deferred[2]; /* by side: a read put off to the proxy's next turn */
    bool parked[2];   /* by side: stopped until the loop resumes c */
    bool in_park;     /* in the loop's queue of parked connections */
    struct conn *park_prev, *park_next;
    int last_err;
    bool client_unix; /* the client came on a unix socket (else TCP) */
    uint8_t pass;     /* proxy_pass.c: PASS_PROBE, PASS_CONTROL or 0 */
    uint8_t socks;    /* proxy_socks.c: a SOCKS_* stage, or 0 (HTTP) */
    struct pass_listener *listeners; /* a control connection's */
    struct conn_dir dir[2];

    char method[16];
    char host[HOST_NAME_CAP];
    int port;
    uint8_t kind;
    /* The address the next event refuses (addr_admitted sets it, conn_event
     * clears it once given): the event's address fields. */
    char refused_addr[48];
    const char *refused_class;
    struct host_addr addrs[PROXY_MAX_ADDRS];

    struct conn_fwd fwd;
    const struct proxy_route *route; /* the request in flight is a route's */
    bool routed; /* ... or was meant for one: errors carry X-Isolation-Error */

    /* The parent proxy (opts.parent): the request is dialled through it
     * (its event says via); parent_wait while its reply to our CONNECT is
     * read into preply (at most PROXY_PARENT_HEAD_MAX bytes of head). */
    bool via_parent, parent_wait;
    struct relay_buf *preply;
};

static inline uv_loop_t *conn_loop(struct conn *c)
{
    return &c->px->loop->uv;
}

/* proxy_conn.c: a descriptor of the process-wide pool taken for c. */
void fd_take(struct conn *c, bool *held);
/* Closes c's upstream (its close callback redials when up.redial). */
void conn_close_up(struct conn *c);

/* proxy_request.c: parses what the head buffer holds (HTTP or SOCKS5). */
void conn_parse_head(struct conn *c);

/* proxy_dial.c: the way to the upstream, once the request is decided:
 * resolve c's name (or the parent's), check every address, dial. */
void resolve(struct conn *c);
/* Every address must pass; one that does not refuses the request. */
bool addr_admitted(struct conn *c, const struct host_addr *a);
void check_and_dial(struct conn *c);
void dial_next(struct conn *c);
/* Dials the request's upstream, kind/addr as its head named it: through
 * the parent proxy when there is one, else the literal or the name. */
void dial_upstream(struct conn *c, enum host_kind kind,
                   const struct host_addr *addr);
/* The parent's reply to our CONNECT (n bytes more in c->preply). */
void parent_read(struct conn *c, ssize_t n);

/* proxy_tunnel.c: the upstream is there: a tunnel, or a forward request. */
void tunnel_established(struct conn *c);
void forward_send(struct conn *c);
/* A tunnel's client bytes while the SNI decision waits for them. */
void sni_feed(struct conn *c, struct relay_buf *rb, size_t off, size_t n);
/* The client ended its side (a tunnel's hello may be cut). */
void client_ended(struct conn *c);

/* proxy_reply.c: the proxy's error reply (the request's event first), and
 * the graceful end of the client connection. */
/* An error reply's head and body together fit here (error path only). */
#define REPLY_CAP 2048
void conn_reply(struct conn *c, int status, const char *type, const char *code,
                const char *reason);
void conn_reply_addr(struct conn *c, int status, const char *type,
                     const char *code, const char *reason, const char *addr);
void conn_end_client(struct conn *c);
size_t reply_text(int status, const char *code, const char *host, int port,
                  const char *addr, const char *reason, char *msg, size_t cap);

/* proxy_dns.c: c's name (c->host) looked up on its proxy's resolver
 * threads; conn_resolved gets the answer on the loop's thread. 0, or a
 * libuv error (nothing started). */
int proxy_dns_start(struct conn *c, const char *name);
/* c no longer waits for its lookup (it timed out or is closing). */
void proxy_dns_cancel(struct conn *c);
/* proxy_dial.c: c's lookup ended with status (0 or a libuv error) and
 * c->addrs, c->naddr. */
void conn_resolved(struct conn *c, int status);

/* proxy_pass.c: listeners handed over a unix socket (SCM_RIGHTS). */
enum { PASS_PROBE = 1, PASS_CONTROL = 2 };

/* proxy_socks.c: SOCKS5 on the same listeners (a first byte 0x05). */
/* SOCKS_ANSWERED: a malformed request's reply is sent already. */
enum {
    SOCKS_GREETING = 1,
    SOCKS_REQUEST = 2,
    SOCKS_ASKED = 3,
    SOCKS_AUTH = 4,
    SOCKS_ANSWERED = 5
};
/* Parses what the head buffer holds at the connection's stage. */
void proxy_socks_head(struct conn *c);
/* The SOCKS reply for a refusal by its event code (SOCKS_ASKED only). */
void proxy_socks_refuse(struct conn *c, const char *code);
/* The success reply when the tunnel is up. */
int proxy_socks_ok(struct conn *c);
struct http_request;
/* proxy_request.c: the CONNECT decision and dial, as for an HTTP request. */
void conn_handle_request(struct conn *c, const struct http_request *req,
                         size_t head_len);
/* proxy_reply.c */
void conn_reply_refusal(struct conn *c, int status, const char *type,
                        const char *code, const char *reason);
void conn_end_client_now(struct conn *c);

/* c's reads while c->pass is set: its alloc and read callbacks (alloc
 * returns false, and clears c->pass, once c is an HTTP client). */
bool proxy_pass_alloc(struct conn *c, uv_buf_t *buf);
void proxy_pass_read(struct conn *c, ssize_t n);
/* c is closing: its listeners close with it. */
void proxy_pass_conn_closed(struct conn *c);

/* Used by the relay: proxy_conn.c (reads, timer, head buffer),
 * proxy_request.c (conn_forward_done), proxy_reply.c (conn_fail, events). */
void conn_update_reads(struct conn *c);
/* A parked connection's turn has come: its reads start again. */
void conn_resume(struct conn *c);
void conn_fail(struct conn *c, int status, const char *type, const char *code,
               const char *reason);
void conn_forward_done(struct conn *c);
/* The one event of the request in flight. */
void conn_event(struct conn *c, const char *type, const char *code, int status,
                const char *reason);
/* The request is admitted (kind 1: a tunnel opened, 2: a response head
 * relayed): counted now, its event given when it ends. */
void conn_admit(struct conn *c, uint8_t kind);
/* An admitted request has ended: its event, with its bytes. */
void conn_event_admitted(struct conn *c);
void conn_arm(struct conn *c, uint64_t ms);
/* Frees the head buffer (and its charge to the proxy's head budget). */
void conn_head_free(struct conn *c);
/* Appends bytes the client sent after a request to the head buffer. */
void conn_carry(struct conn *c, const char *p, size_t n);

/* proxy_relay.c */
void relay_client_data(struct conn *c, struct relay_buf *rb, size_t n);
void relay_up_data(struct conn *c, struct relay_buf *rb, size_t n);
void relay_eof(struct conn *c, int side);
/* Sends len bytes of rb (from off) towards d; takes rb. <0 on error. */
int relay_send(struct conn *c, int d, struct relay_buf *rb, size_t off,
               size_t len);
/* Copies bytes into a buffer of its own and sends it. */
int relay_send_copy(struct conn *c, int d, const char *p, size_t len);

/* proxy_relay.c: relay_send without the TLS layer (ciphertext). */
int relay_send_raw(struct conn *c, int d, struct relay_buf *rb, size_t off,
                   size_t len);

/* proxy_dial.c: the route's upstream is connected and verified: send. */
void conn_route_ready(struct conn *c);
/* proxy_conn.c: on_up_read's handling of bytes (n > 0, rb holding them) or
 * of an end or error (n < 0, rb NULL) once they are plaintext. */
void conn_up_plain(struct conn *c, struct relay_buf *rb, ssize_t n);

/* proxy_route.c: the route of a request, or NULL; *bad set (with a reason)
 * when the request names a route but its path leaves it. */
const struct proxy_route *route_match(const struct proxy *p,
                                      const struct http_request *req,
                                      const char **bad);
/* The head sent to the route's upstream (like http_write_upstream_head);
 * the length written or needed. */
size_t route_write_head(const struct proxy_route *rt,
                        const struct http_request *req, char *out, size_t cap);

/* proxy_parent.c: the CONNECT sent to the parent for c's host and port
 * (its length; 0 if cap is too small); and the parent's reply in buf: 1
 * with its head's length in *head_len for a well-formed 2xx, 0 while the
 * head is incomplete (and within PROXY_PARENT_HEAD_MAX), -1 with why
 * (never the parent's own text) for anything else. */
size_t proxy_parent_request(const struct conn *c, char *out, size_t cap);
int proxy_parent_reply(const char *buf, size_t len, size_t *head_len, char *why,
                       size_t whycap);

/* proxy_tls.c: TLS to a route's upstream over c->up.tcp, on memory BIOs. */
struct proxy_tls;
/* Starts the handshake (c->up connected); 0, or -1 after failing c. */
int proxy_tls_start(struct conn *c);
/* Ciphertext read from the upstream (n > 0), or its end or error (n < 0,
 * rb NULL). */
void proxy_tls_up_read(struct conn *c, struct relay_buf *rb, ssize_t n);
/* Plaintext towards the upstream; takes rb. <0 on error. */
int proxy_tls_send(struct conn *c, struct relay_buf *rb, size_t off,
                   size_t len);
/* The same, rb left to the caller (neither wiped nor freed). */
int proxy_tls_send_keep(struct conn *c, const struct relay_buf *rb);
/* Is the handshake still going on? */
bool proxy_tls_handshaking(const struct proxy_tls *t);
/* Makes ctx keep no session cache of its own, and hand each new session
 * to the slot of the route it was made for (session resumption). */
void proxy_tls_ctx_sessions(struct ssl_ctx_st *ctx);
void proxy_tls_free(struct proxy_tls *t);
/* Nothing buffered either way and no handshake in progress: fit to be
 * kept idle for another client connection. */
bool proxy_tls_idle(const struct proxy_tls *t);

/* proxy_buf.c */
struct relay_buf *relay_buf_get(struct proxy_loop *loop);
/* A RELAY_BIG_SIZE buffer, for reads in an established tunnel. */
struct relay_buf *relay_buf_big(struct proxy_loop *loop);
struct relay_buf *relay_buf_sized(size_t cap);
void relay_buf_put(struct proxy_loop *loop, struct relay_buf *b);

/* proxy_route_idle.c: keeps c's clean route upstream for the route's next
 * client connection; gives c (no upstream) an idle upstream of rt (true:
 * connected and verified, ready for forward_send). */
void route_idle_put(struct conn *c);
bool route_idle_take(struct conn *c, const struct proxy_route *rt);
/* forward_send's out: sent on a reused route upstream, it is kept as
 * c->fwd.replay when the request may be sent again (route_replayable);
 * otherwise sent as any request. <0 on error (out taken either way). */
int route_send_request(struct conn *c, struct relay_buf *out);
/* The first response byte has come (or the request is over): the copy
 * kept for a retry is wiped and freed. */
void route_replay_drop(struct conn *c);
/* The upstream head never sent (a failed dial, a client gone): wiped (a
 * route's holds the secret) and freed. */
void route_out_drop(struct conn *c);
/* The reused upstream of c's request closed or failed before any response
 * byte: true when the request is being sent again on a fresh connection
 * (then c's upstream is closing and the dial under way); false when it may
 * not be (the caller fails the request as before). */
bool route_retry(struct conn *c);

#endif
