/*
 * proxy.h - the egress proxy's internals, shared by its files:
 *   proxy_lua.c     the "isolation.proxy" userdata and its options
 *   proxy_loop.c    the module's private uv loops (a background thread, or
 *                   driven from luv's loop) and the commands they take
 *   proxy_listen.c  listening sockets (unix and loopback TCP)
 *   proxy_conn.c    one client connection: request heads, checks, dialing
 *   proxy_relay.c   moving bytes: tunnels, bodies, backpressure
 *   proxy_event.c   events, stats and the swappable allowlist
 *   proxy_audit.c   the audit log: JSON lines written by a thread of its own
 *
 * Threads: everything that touches uv handles runs on the loop's thread
 * (the background thread, or the Lua thread in luv mode). The Lua thread
 * touches a proxy only through its mutex (allowlist, events) and atomics
 * (stats), and through commands (open, close) it waits for.
 */
#ifndef ISOLATION_PROXY_H
#define ISOLATION_PROXY_H

#include <lua.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

#include "hostpat.h"
#include "httpparse.h"
#include "tlshello.h"

/* Documented defaults (notes/proxy.md says why). */
#define PROXY_DEFAULT_HEADER_MS 10000
#define PROXY_DEFAULT_CONNECT_MS 10000
#define PROXY_DEFAULT_DNS_MS 5000
#define PROXY_DEFAULT_IDLE_MS 300000
#define PROXY_DEFAULT_MAX_HEADER 32768
#define PROXY_DEFAULT_MAX_CONN 16384
#define PROXY_MAX_HEADER_LIMIT 65536
/* After an error reply: how long to drain the client before closing. */
#define PROXY_LINGER_MS 2000
/* Addresses kept from one lookup; the rest are ignored (and unchecked). */
#define PROXY_MAX_ADDRS 16
/* Events kept for :events() before new ones are counted as dropped. */
#define PROXY_MAX_EVENTS 4096
/* One read's buffer; a write waits in it, and its side stops reading. */
#define RELAY_BUF_SIZE 65536
/* Free read buffers a loop keeps for reuse. */
#define RELAY_POOL_MAX 32
/* A tunnel side whose read has filled a whole RELAY_BUF_SIZE buffer reads
 * into larger ones from then on: a sixteenth of the system calls and
 * wakeups per byte (one bulk tunnel measured 15-40 % faster with 256 KiB,
 * and 15-20 % faster again with 1 MiB); still at most one per direction,
 * none while idle, and short exchanges keep the small ones. */
#define RELAY_BIG_SIZE 1048576
#define RELAY_BIG_POOL_MAX 4
/* Bytes a proxy's connections may hold in request heads beyond the first
 * PROXY_HEAD_FIRST bytes each (the first read's buffer): a head that would
 * grow past it is answered 503 too_many (README, threat model). */
#define PROXY_HEAD_FIRST 4096
#define PROXY_HEAD_BUDGET (4u << 20)
/* Descriptors the process keeps out of every proxy's reach (for a new
 * session's socket, the orchestrator's own files): at least this many, or
 * an eighth of RLIMIT_NOFILE. */
#define PROXY_FD_RESERVE_MIN 64
/* A loop whose connections fell to a quarter of a peak of at least this
 * many gives the freed memory back (malloc_trim, its buffer pools). */
#define PROXY_TRIM_PEAK 128
/* Tunnel bytes, and reads, one proxy may take in one turn of the loop
 * (one pass) while it shares its loop with another proxy: past either,
 * its connections' reads wait (parked) for a later turn, and the other
 * proxies' connections are served in between. */
#define PROXY_TURN_BYTES (256u << 10) /* four RELAY_BUF_SIZE reads */
#define PROXY_TURN_READS 64
/* Parked connections the loop resumes per pass, oldest first. */
#define PROXY_RESUME_PER_TURN 64
/* Loop threads thread-mode proxies are spread over (proxy_loop.c): at most
 * this many, and no more than the CPUs (but at least 2). */
#define PROXY_LOOP_THREADS 4

struct proxy;
struct proxy_loop;
struct conn;

enum proxy_mode { PROXY_THREAD = 0, PROXY_LUV };

/* A compiled allowlist shared by the requests that started under it. */
struct proxy_allow {
    hostpat_list *list;
    atomic_int refs;
};

struct proxy_resolve {
    char name[HOST_NAME_CAP];
    size_t naddr;
    struct host_addr *addrs;
};

struct proxy_opts {
    uint64_t header_ms, connect_ms, dns_ms, idle_ms;
    size_t max_header_bytes;
    unsigned max_connections;
    bool allow_private;
    bool sni_match;
    bool report; /* learn mode: admit what the allowlist does not */
    /* Listeners a unix socket client may hand over (proxy_pass.c): at
     * most this many held at once; 0: none taken. */
    unsigned accept_listeners;
    /* token: every request must carry it (proxy_auth.c); token_len 0:
     * none asked. token_basic is base64("isolation:" token), what HTTP
     * Basic sends. */
    uint8_t token[255];
    size_t token_len;
    char token_basic[360];
    size_t token_basic_len;
    struct proxy_resolve *resolve;
    size_t nresolve;
};

struct proxy_event {
    struct proxy_event *next;
    char type[8];
    const char *code; /* a string literal: the machine reason */
    char method[16];
    char host[HOST_NAME_CAP];
    int port;
    int status;
    uint64_t bytes_up, bytes_down;
    uint64_t duration_us;
    char reason[200];
};

struct proxy_audit;

struct proxy_stats {
    atomic_ullong connections, active, allowed, denied, errors, bytes_up,
        bytes_down, events_dropped;
};

enum proxy_cmd { PROXY_CMD_NONE = 0, PROXY_CMD_OPEN, PROXY_CMD_CLOSE };

struct proxy {
    atomic_int refs; /* the Lua side's and the loop side's */
    struct proxy_loop *loop;
    struct proxy_opts opts;

    /* Listening socket, made on the Lua thread, handed to the loop. */
    int listen_fd;
    bool is_unix;
    bool nodelay_inherited; /* accepted TCP sockets get TCP_NODELAY */
    char address[160];
    char unix_path[108];
    dev_t unix_dev;
    ino_t unix_ino;
    int port;
    struct sockaddr_storage self; /* TCP: the listening address */

    /* Loop side. */
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t stream;
        uv_handle_t handle;
    } listener;
    bool listener_open;
    bool closing;
    unsigned handles; /* the listener and every connection not yet freed */
    struct conn *conns;
    unsigned nclients;   /* connections that count against max_connections */
    unsigned fds;        /* descriptors its connections hold (clients, ups) */
    size_t head_bytes;   /* head buffer bytes past each PROXY_HEAD_FIRST */
    bool accept_failing; /* an accept failed; reported until one works */
    bool counted_open;   /* counted among the process's open proxies */
    uint64_t turn;       /* the loop turn turn_bytes counts */
    uint64_t turn_bytes; /* tunnel bytes read in that turn */
    unsigned turn_reads; /* reads of its connections in that turn */
    unsigned npass;      /* listeners handed over and held (proxy_pass.c) */

    /* Commands from the Lua thread (thread mode waits under loop->mu). */
    enum proxy_cmd cmd;
    bool cmd_done;
    int cmd_status;
    struct proxy *cmd_next;

    /* Shared with the Lua thread, under mu. */
    uv_mutex_t mu;
    struct proxy_allow *allow;
    struct proxy_event *ev_head, *ev_tail;
    size_t ev_count;
    struct proxy_stats stats;

    /* The audit log (NULL without one); lines are made on the loop's
     * thread and written by the log's own. */
    struct proxy_audit *audit;

    /* luv mode: registry ref of on_event (LUA_NOREF when none). */
    int on_event_ref;
    struct proxy *luv_next;
};

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

struct proxy_loop {
    uv_loop_t uv;
    enum proxy_mode mode;
    unsigned nproxies;
    unsigned
        serving; /* proxies started and not closed (the loop's own count) */
    struct relay_buf *pool;
    unsigned npool;
    struct relay_buf *bigpool; /* RELAY_BIG_SIZE buffers */
    unsigned nbig;
    unsigned live, peak;    /* connections not yet freed; their recent peak */
    uv_prepare_t turn_prep; /* counts the loop's passes */
    uint64_t turn;
    /* Connections parked over their proxy's turn budget, oldest first;
     * the idle handle runs while there are any (resuming them, and keeping
     * the poll from waiting while they wait). */
    struct conn *park_head, *park_tail;
    uv_idle_t park_idle;

    /* Thread mode. */
    unsigned slot; /* in the pool of loop threads */
    bool stopping;
    uv_thread_t thread;
    uv_async_t async;
    uv_mutex_t mu;
    uv_cond_t cond;
    struct proxy *cmds;

    /* luv mode. */
    lua_State *L;
    int luv_ref, poll_ref, timer_ref, drive_ref;
    bool in_drive, polling, lua_dead;
    struct proxy *luv_proxies;
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

struct conn {
    struct proxy *px;
    struct conn *prev, *next;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_stream_t s;
        uv_handle_t h;
    } client;
    uv_tcp_t up;
    uv_timer_t timer;
    uv_connect_t connect_req;
    uv_shutdown_t shut_req[2]; /* by destination side */
    uv_getaddrinfo_t *gai;
    struct proxy_allow *allow;

    /* The request head, and whatever the client sent right behind it. */
    char *head;
    uint32_t head_len, head_cap;
    struct relay_buf *sni; /* tunnel: first client bytes until decided */
    struct relay_buf *res; /* forward: the response head so far */
    struct relay_buf *out; /* forward: the upstream head, until dialed */

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
    bool up_inited, up_connected, up_closing;
    bool is_connect, keep_alive, sni_wait, gai_cancelled;
    bool req_done, res_done, res_head_done, head_req, close_after;
    bool up_reusable, redial, kept;
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
    uint8_t req_body, res_body;
    struct conn_dir dir[2];

    char method[16];
    char host[HOST_NAME_CAP];
    int port;
    uint8_t kind;
    int res_status;
    uint64_t req_left, res_left;
    struct http_chunked req_chunk, res_chunk;
    struct host_addr addrs[PROXY_MAX_ADDRS];

    /* What the open upstream connection reaches (forward keep-alive). */
    char up_host[HOST_NAME_CAP];
    int up_port;
    struct host_addr up_addr;
};

/* proxy_loop.c */
struct proxy_loop *proxy_loop_acquire(lua_State *L, enum proxy_mode mode,
                                      int luv_idx, char *err, size_t errcap);
/* Runs cmd for p on the loop's thread and waits for it; returns its status. */
int proxy_loop_submit(struct proxy *p, enum proxy_cmd cmd);
/* Drops the proxy's use of its loop (after a close); stops an idle loop. */
void proxy_loop_release(lua_State *L, struct proxy *p);
/* luv mode: run the private loop now (after a change made on the Lua side). */
void proxy_loop_kick(lua_State *L, struct proxy_loop *loop);

/* The process-wide descriptor pool every proxy's connections draw on:
 * RLIMIT_NOFILE's soft limit (raised to the hard one when a loop starts)
 * less the reserve. */
extern atomic_long proxy_fds_used;
extern atomic_long proxy_fds_usable;
/* Raises RLIMIT_NOFILE's soft limit to the hard one, sets the pool. */
void proxy_fds_setup(void);
/* The pass counter (PROXY_TURN_BYTES) and the parked connections' idle
 * handle; 0 or a libuv error. turns_close closes both. */
int proxy_turns_start(struct proxy_loop *loop);
void proxy_turns_close(struct proxy_loop *loop);
/* Queues c, parked over its proxy's turn budget, to be resumed (with
 * conn_resume) in a later pass; unpark takes it out (c is closing). */
void proxy_loop_park(struct conn *c);
void proxy_loop_unpark(struct conn *c);

/* proxy_listen.c */
int proxy_listen_unix(struct proxy *p, const char *path, char *err,
                      size_t errcap);
/* Message for a listen value proxy_listen_parse refuses ("(got ...)" is
 * added by the caller). */
#define PROXY_LISTEN_ACCEPTED                                                  \
    "isolation: listen must be \"127.0.0.1:PORT\" or \"[::1]:PORT\", PORT "    \
    "0 to 65535 in decimal without leading zeros (0: any free port)"
/* listen's value, len bytes: exactly "127.0.0.1:PORT" or "[::1]:PORT".
 * 0 with the address in *ss, -1 for anything else. */
int proxy_listen_parse(const char *spec, size_t len,
                       struct sockaddr_storage *ss, socklen_t *sslen);
/* A TCP listener on an address from proxy_listen_parse (spec: its text,
 * for messages). */
int proxy_listen_tcp(struct proxy *p, const struct sockaddr_storage *addr,
                     socklen_t addrlen, const char *spec, char *err,
                     size_t errcap);
/* Removes our socket file (only if it is still the one we made). */
void proxy_listen_unlink(struct proxy *p);

/* proxy_conn.c: on the loop's thread. */
int proxy_start(struct proxy *p);
void proxy_stop(struct proxy *p);
/* A connection waiting on server: accepted, checked against
 * max_connections, and read. */
void proxy_accept(struct proxy *p, uv_stream_t *server, bool is_unix,
                  bool nodelay_inherited);

/* proxy_pass.c: listeners handed over a unix socket (SCM_RIGHTS). */
enum { PASS_PROBE = 1, PASS_CONTROL = 2 };

/* proxy_socks.c: SOCKS5 on the same listeners (a first byte 0x05). */
enum { SOCKS_GREETING = 1, SOCKS_REQUEST = 2, SOCKS_ASKED = 3, SOCKS_AUTH = 4 };
/* Parses what the head buffer holds at the connection's stage. */
void proxy_socks_head(struct conn *c);
/* The SOCKS reply for a refusal by its event code (SOCKS_ASKED only). */
void proxy_socks_refuse(struct conn *c, const char *code);
/* The success reply when the tunnel is up. */
int proxy_socks_ok(struct conn *c);
struct http_request;
/* proxy_conn.c: the CONNECT decision and dial, as for an HTTP request. */
void conn_handle_request(struct conn *c, const struct http_request *req,
                         size_t head_len);
void conn_reply_refusal(struct conn *c, int status, const char *type,
                        const char *code, const char *reason);
void conn_end_client_now(struct conn *c);

/* proxy_auth.c: the token (constant time in the token's length). */
void proxy_token_set(struct proxy_opts *o, const char *token, size_t len);
bool proxy_token_http_ok(const struct proxy_opts *o, const char *value,
                         size_t len);
bool proxy_token_socks_ok(const struct proxy_opts *o, const uint8_t *user,
                          size_t user_len, const uint8_t *pass,
                          size_t pass_len);
/* The first byte of a handover: no HTTP request starts with it. */
#define PASS_MAGIC "\0isolation-pass 1\n"
/* Most listeners one handover may carry (the HTTP port, a SOCKS port). */
#define PASS_MAX_FDS 2
/* c's reads while c->pass is set: its alloc and read callbacks (alloc
 * returns false, and clears c->pass, once c is an HTTP client). */
bool proxy_pass_alloc(struct conn *c, uv_buf_t *buf);
void proxy_pass_read(struct conn *c, ssize_t n);
/* c is closing: its listeners close with it. */
void proxy_pass_conn_closed(struct conn *c);

/* proxy_event.c */
/* The event of c's request (its method, host, port, bytes and duration). */
void proxy_event(struct proxy *p, const struct conn *c, const char *type,
                 const char *code, int status, const char *reason);
/* Moves the queued events to a new Lua array on the stack. */
void proxy_events_push(lua_State *L, struct proxy *p);
/* luv mode: calls on_event for each queued event; errors go to stderr. */
void proxy_events_dispatch(lua_State *L, struct proxy *p);
void proxy_events_free(struct proxy *p);
void proxy_stats_push(lua_State *L, struct proxy *p);
struct proxy_allow *proxy_allow_new(hostpat_list *list);
struct proxy_allow *proxy_allow_get(struct proxy *p);
void proxy_allow_put(struct proxy_allow *a);
void proxy_allow_set(struct proxy *p, struct proxy_allow *a);
void proxy_unref(struct proxy *p);

/* proxy_conn.c, used by the relay */
void conn_close(struct conn *c);
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

/* proxy_audit.c */
/* Opens path for appending (created 0600; never a link, another user's
 * file, or one others can read) and starts its writer; NULL with a
 * message in err. */
struct proxy_audit *proxy_audit_open(const char *path, const char *session,
                                     size_t session_len, char *err,
                                     size_t errcap);
/* Queues e's line; never waits for the disk. */
void proxy_audit_event(struct proxy_audit *a, const struct proxy_event *e);
/* Lines dropped (a failed write, or more queued than the log may hold). */
uint64_t proxy_audit_dropped(struct proxy_audit *a);
/* Writes what is queued (waiting a bounded time), then frees the log. */
void proxy_audit_close(struct proxy_audit *a);

/* proxy_relay.c */
void relay_client_data(struct conn *c, struct relay_buf *rb, size_t n);
void relay_up_data(struct conn *c, struct relay_buf *rb, size_t n);
void relay_eof(struct conn *c, int side);
/* Sends len bytes of rb (from off) towards d; takes rb. <0 on error. */
int relay_send(struct conn *c, int d, struct relay_buf *rb, size_t off,
               size_t len);
/* Copies bytes into a buffer of its own and sends it. */
int relay_send_copy(struct conn *c, int d, const char *p, size_t len);
void relay_tunnel_begin(struct conn *c);
struct relay_buf *relay_buf_get(struct proxy_loop *loop);
/* A RELAY_BIG_SIZE buffer, for reads in an established tunnel. */
struct relay_buf *relay_buf_big(struct proxy_loop *loop);
struct relay_buf *relay_buf_sized(size_t cap);
void relay_buf_put(struct proxy_loop *loop, struct relay_buf *b);
void relay_pool_free(struct proxy_loop *loop);

#endif
