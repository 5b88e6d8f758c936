/*
 * proxy_reply.c - how a request ends for its client: its one event
 * (proxy_event.c), or the proxy's own error reply (an HTTP status, or a
 * SOCKS reply) followed by a graceful end of the client connection.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "proxy/proxy_conn.h"
#include "proxy/proxy_decide.h"

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

/* Appends s to out (of cap bytes, NUL-terminated, cut as snprintf cuts):
 * a forward request's reason is made on every request, and two snprintf
 * calls were a tenth of a kept route request's instructions. */
static size_t put_str(char *out, size_t cap, size_t o, const char *s)
{
    size_t n = strlen(s);
    if (o + n >= cap)
        n = o < cap ? cap - 1 - o : 0;
    memcpy(out + o, s, n);
    out[o + n] = '\0';
    return o + n;
}

static size_t put_int(char *out, size_t cap, size_t o, int v)
{
    char num[16], *e = num + sizeof num, *d = e;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    *--d = '\0';
    do
        *--d = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--d = '-';
    return put_str(out, cap, o, d);
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
        /* "[learn][route NAME: ]upstream answered STATUS[ (cut short)]" */
        size_t o = put_str(reason, sizeof reason, 0, learn);
        if (c->route) {
            o = put_str(reason, sizeof reason, o, "route ");
            o = put_str(reason, sizeof reason, o, c->route->name);
            o = put_str(reason, sizeof reason, o, ": ");
        }
        o = put_str(reason, sizeof reason, o, "upstream answered ");
        o = put_int(reason, sizeof reason, o, c->fwd.res_status);
        put_str(reason, sizeof reason, o,
                c->fwd.res_done ? "" : " (the response was cut short)");
    }
    conn_event(c, c->reported ? "report" : "allow",
               c->route      ? "route"
               : c->reported ? "not_allowed"
                             : "allowed",
               c->admitted == 1 ? 200 : c->fwd.res_status, reason);
}

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
void conn_end_client(struct conn *c)
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
size_t reply_text(int status, const char *code, const char *host, int port,
                  const char *addr, const char *reason, char *msg, size_t cap)
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

void conn_reply_addr(struct conn *c, int status, const char *type,
                     const char *code, const char *reason, const char *addr)
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

void conn_reply(struct conn *c, int status, const char *type, const char *code,
                const char *reason)
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

void conn_reply_refusal(struct conn *c, int status, const char *type,
                        const char *code, const char *reason)
{
    conn_reply(c, status, type, code, reason);
}

void conn_end_client_now(struct conn *c)
{
    conn_end_client(c);
}
