/*
 * proxy.h - the egress proxy, its loop, its events and its tunables, shared
 * by its files (one connection, struct conn, is in proxy_conn.h: only the
 * files that handle a connection's bytes see it):
 *   proxy_lua.c     the "isolation.proxy" userdata and its options
 *   proxy_loop.c    the module's private uv loops (a background thread, or
 *                   driven from luv's loop) and the commands they take
 *   proxy_listen.c  listening sockets (unix and loopback TCP), accepting
 *   proxy_conn.c    one client connection's life: reads, timer, close
 *   proxy_request.c a request's head parsed and decided, then dialled
 *   proxy_dial.c    resolving, checking every address, dialing, a parent
 *   proxy_tunnel.c  a tunnel established, a forward request sent
 *   proxy_reply.c   a request's event, the proxy's error replies
 *   proxy_decide.c  every allow/deny decision about a request
 *   proxy_relay.c   moving bytes: tunnels, bodies, backpressure
 *   proxy_parent.c  the parent proxy (upstream_proxy): its URL, the
 *                   CONNECT sent to it, its reply
 *   proxy_route.c   credential routes: options, the request to the upstream
 *   proxy_route_idle.c a route's clean upstream kept for its next client
 *   proxy_tls.c     TLS to a route's upstream over memory BIOs
 *   proxy_dns.c     each proxy's own resolver threads
 *   proxy_hosts.c   /etc/hosts answered on the loop thread
 *   proxy_buf.c     the relay's read buffers and the loop's pools of them
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

#include "allow/hostpat.h"

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
/* Threads that look names up for one proxy (proxy_dns.c): started as
 * lookups need them, ended after PROXY_DNS_IDLE_MS without one. Its other
 * lookups wait in its queue, their dns_timeout running from the request
 * (names in /etc/hosts and IP literals never wait: proxy_hosts.c). */
#define PROXY_DNS_THREADS 4
#define PROXY_DNS_IDLE_MS 10000

struct proxy;
struct proxy_loop;
struct conn;      /* proxy_conn.h */
struct relay_buf; /* proxy_conn.h */
struct proxy_dns; /* proxy_dns.c */

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

/* A credential route (proxy_route.c): requests for /<name>/... go to the
 * upstream over TLS with the secret in a header. hdr holds the whole header
 * line with the secret ("Name: value\r\n"); it is wiped before it is
 * freed, and nothing else holds the secret. */
#define ROUTE_NAME_CAP 64
struct proxy_route {
    char name[ROUTE_NAME_CAP];
    size_t name_len;
    char host[HOST_NAME_CAP]; /* the upstream's host, normalized */
    enum host_kind kind;
    struct host_addr addr; /* for an IP literal */
    int port;
    /* "Host: HOST[:PORT]\r\n" as its requests carry it, made once */
    char host_line[HOST_NAME_CAP + 24];
    size_t host_line_len;
    char *base; /* the upstream URL's path, without a trailing '/' */
    size_t base_len;
    char drop[ROUTE_NAME_CAP]; /* a header the client may not send */
    size_t drop_len;
    char *hdr;
    size_t hdr_len;
};

struct ssl_ctx_st; /* OpenSSL's SSL_CTX, made only when there are routes */

/* A parent proxy (upstream_proxy = "http://HOST:PORT"): every admitted
 * connection is a CONNECT tunnel through it. host is normalized (an IPv6
 * literal without brackets); text is "HOST:PORT" as events name it (the
 * `via` field; never the credentials). auth: the URL's user:password@ as
 * a whole "Proxy-Authorization: Basic ...\r\n" line, or NULL; nothing
 * else holds it, and proxy_parent_free wipes it. */
struct proxy_parent {
    bool set;
    char host[HOST_NAME_CAP];
    enum host_kind kind;
    struct host_addr addr; /* for an IP literal */
    int port;
    char text[HOST_NAME_CAP + 16];
    char *auth;
    size_t auth_len;
};
/* Most bytes of a parent's reply head to CONNECT (its status line and
 * headers); a longer one fails the request (upstream_proxy_failed). */
#define PROXY_PARENT_HEAD_MAX 8192

struct proxy_opts {
    uint64_t header_ms, connect_ms, dns_ms, idle_ms;
    size_t max_header_bytes;
    unsigned max_connections;
    bool allow_private;
    bool sni_match;
    bool report; /* learn mode: admit what the allowlist does not */
    /* Listeners a unix socket client may hand over (proxy_pass.c): at
     * most this many held at once; 0: none taken. Once this many are
     * held the proxy is sealed: it takes no more, even after they end. */
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
    struct proxy_route *routes;
    size_t nroutes;
    /* route_port: the port the sandbox reaches the proxy at (the launch
     * spec's proxy_port). An absolute-form request is for a route only
     * when it names the proxy itself: 127.0.0.1, localhost or [::1] at
     * this port or at the proxy's own TCP port; any other host is a
     * forward request to that host, checked like every other. */
    int route_port;
    struct ssl_ctx_st *tls_ctx;
    /* The last TLS session of each route's upstream (routes[i]'s is
     * tls_sessions[i]), offered when it dials again (proxy_tls.c); loop
     * side only, freed with the routes. */
    struct ssl_session_st **tls_sessions;
    struct proxy_parent parent;
};

/* Idle route upstreams a proxy keeps at most, and for how long (ms; less
 * when idle_timeout is shorter). An upstream that closed one meanwhile is
 * seen before reuse (a peek finds its end) and dialed afresh. */
#define PROXY_ROUTE_IDLE_MAX 32
#define PROXY_ROUTE_IDLE_MS 60000
struct proxy_tls;

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
    /* A refusal for an address (private_address, own_address): the address
     * in its own field, and its class (private_address only; else NULL), so
     * that readers never parse them out of a reason, which carries client
     * text (a TLS server name). "" when the event has none. */
    char address[48];
    const char *address_class; /* a string literal, or NULL */
    /* The parent proxy the request was dialled through ("HOST:PORT"), or
     * "" when it went direct (or was refused before any dial). */
    char via[HOST_NAME_CAP + 16];
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
    /* Idle TLS connections to routes' upstreams, each kept for the next
     * client connection of its route (proxy_conn.c, route_idle_*): a client
     * that opens a connection per request pays no TLS handshake upstream.
     * Loop side only; closed when the proxy stops. */
    struct route_idle {
        int fd; /* a duplicate: the handle that had it is closed */
        struct proxy_tls *tls;
        const struct proxy_route *route;
        uint64_t since; /* uv_now when it went idle */
    } idle[PROXY_ROUTE_IDLE_MAX];
    unsigned nidle;
    unsigned nclients;   /* connections that count against max_connections */
    unsigned fds;        /* descriptors its connections hold (clients, ups) */
    size_t head_bytes;   /* head buffer bytes past each PROXY_HEAD_FIRST */
    bool accept_failing; /* an accept failed; reported until one works */
    bool counted_open;   /* counted among the process's open proxies */
    uint64_t turn;       /* the loop turn turn_bytes counts */
    uint64_t turn_bytes; /* tunnel bytes read in that turn */
    unsigned turn_reads; /* reads of its connections in that turn */
    unsigned npass;      /* listeners handed over and held (proxy_pass.c) */
    bool pass_sealed;    /* no more handovers, no descriptor accepted */

    /* Its resolver threads (proxy_dns.c), or NULL before its first lookup. */
    struct proxy_dns *dns;

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

/* proxy_listen.c, on the loop's thread: the listener's handle. */
int proxy_start(struct proxy *p);
void proxy_stop(struct proxy *p);
/* Closes the idle route upstreams (proxy_conn.c). */
void proxy_route_idle_drain(struct proxy *p);
/* A connection waiting on server: accepted, checked against
 * max_connections and the descriptor pool, and read. */
void proxy_accept(struct proxy *p, uv_stream_t *server, bool is_unix,
                  bool nodelay_inherited);
/* A closing proxy whose last handle is gone drops the loop's reference. */
void proxy_maybe_release(struct proxy *p);
/* Is this proxy one of several in the process? Then the descriptor pool's
 * sharing rules apply (a proxy alone keeps every descriptor it may). */
bool proxy_pool_shared(void);

/* proxy_conn.c: what the listener asks of a connection. */
/* A client accepted from server, counted, not yet read; NULL if none. */
struct conn *conn_accept(struct proxy *p, uv_stream_t *server, bool is_unix);
/* Admitted: starts reading its first request. */
void conn_start(struct conn *c, bool is_unix, bool nodelay_inherited);
/* Refused by admission: a 503 and closed at once. */
void conn_refuse(struct conn *c, const char *reason);
void conn_close(struct conn *c);

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
/* proxy_pass.c: whether peers of unix socket fd may send it descriptors
 * (SO_PASSRIGHTS, Linux 6.16); 0, or -1 with errno (ENOPROTOOPT: an older
 * kernel, where every peer may). */
int proxy_pass_rights(int fd, bool on);

/* proxy_event.c */
/* src as text that is safe for a terminal, a log line or a reply body:
 * every byte outside printable ASCII, and the backslash, as \xNN; cut at a
 * whole escape to fit cap (> 0) with its NUL. */
void proxy_text_escape(char *dst, size_t cap, const char *src);
/* The event of c's request (its method, host, port, bytes and duration);
 * c NULL: an event of the proxy itself (no request). */
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

/* proxy_route.c: the routes and upstream_ca_file options; 0, or -1 with
 * a message pushed (never the secret). routes_free wipes the secrets. */
int proxy_routes_parse(lua_State *L, struct proxy_opts *o);
void proxy_routes_free(struct proxy_opts *o);

/* proxy_lua.c: upstream_proxy's value, len bytes, into *out; 0, or -1
 * with the reason (what is accepted) in err. */
int proxy_parent_parse(const char *url, size_t len, struct proxy_parent *out,
                       char *err, size_t errcap);
/* Wipes and frees the parent's credentials. */
void proxy_parent_free(struct proxy_parent *pp);

/* proxy_dns.c: the proxy is closing (its connections closed): its resolver
 * threads end after the lookup each is in, and their answers are dropped. */
void proxy_dns_close(struct proxy *p);

/* proxy_hosts.c: the addresses /etc/hosts gives name (at most cap, in the
 * file's order), read on the caller's thread, when the system reads
 * /etc/hosts first (nsswitch.conf); 0 if it has none (then getaddrinfo). */
unsigned proxy_hosts_lookup(const char *name, struct host_addr *out,
                            unsigned cap);

/* proxy_buf.c: the loop's free read buffers go back to the system. */
void relay_pool_free(struct proxy_loop *loop);

#endif
