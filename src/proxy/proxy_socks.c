/*
 * proxy_socks.c - SOCKS5 (RFC 1928) on the proxy's listeners.
 *
 * A connection whose first byte is 0x05 speaks SOCKS5: the greeting, then
 * one CONNECT request, by name (socks5h) or address. The request becomes
 * the same decision as an HTTP CONNECT (conn_handle_request: allowlist,
 * private-address rule, resolve, dial, events with method "SOCKS5",
 * stats, timeouts, limits); only the replies differ. BIND and UDP
 * ASSOCIATE get "command not supported". A malformed greeting closes the
 * connection without a reply (a SOCKS client has nothing to read in an
 * HTTP error, and a reply to a non-SOCKS peer would be noise); a
 * malformed request gets the general failure reply, an unknown address
 * type "address type not supported" (0x08).
 */
#include <string.h>

#include "proxy/proxy_conn.h"
#include "wire/httpparse.h"
#include "wire/socks5.h"

static void socks_consume(struct conn *c, size_t n)
{
    memmove(c->head, c->head + n, c->head_len - n);
    c->head_len -= (uint32_t)n;
}

static int socks_send(struct conn *c, const uint8_t *p, size_t n)
{
    return relay_send_copy(c, DIR_DOWN, (const char *)p, n);
}

static void socks_bad(struct conn *c, const char *reason)
{
    c->head_len = 0;
    conn_reply_refusal(c, 400, "deny", "bad_request", reason);
}

static bool socks_greeting(struct conn *c)
{
    struct socks5_greeting g;
    int r = socks5_parse_greeting((const uint8_t *)c->head, c->head_len, &g);
    if (r == 0) {
        conn_update_reads(c);
        return false;
    }
    if (r < 0) {
        socks_bad(c, "malformed SOCKS5 greeting");
        return false;
    }
    socks_consume(c, (size_t)r);
    bool need_token = c->px->opts.token_len > 0;
    bool ok = need_token ? g.userpass : g.no_auth;
    uint8_t reply[2] = {5, !ok          ? 0xff
                           : need_token ? SOCKS5_METHOD_USERPASS
                                        : SOCKS5_METHOD_NONE};
    if (socks_send(c, reply, sizeof reply) < 0) {
        conn_close(c);
        return false;
    }
    if (!ok && need_token) {
        c->head_len = 0;
        conn_reply_refusal(c, 407, "deny", "auth_required",
                           "this proxy needs its token (SOCKS5 "
                           "username/password, user isolation)");
        return false;
    }
    if (!ok) {
        socks_bad(c, "no acceptable SOCKS5 authentication method");
        return false;
    }
    c->socks = need_token ? SOCKS_AUTH : SOCKS_REQUEST;
    return true;
}

/* RFC 1929: the token as the password of user "isolation". */
static bool socks_auth(struct conn *c)
{
    struct socks5_auth a;
    int r = socks5_parse_auth((const uint8_t *)c->head, c->head_len, &a);
    if (r == 0) {
        conn_update_reads(c);
        return false;
    }
    if (r < 0) {
        socks_bad(c, "malformed SOCKS5 username/password message");
        return false;
    }
    bool ok = proxy_token_socks_ok(&c->px->opts, a.user, a.user_len, a.pass,
                                   a.pass_len);
    socks_consume(c, (size_t)r);
    uint8_t reply[2] = {1, ok ? 0 : 1};
    if (socks_send(c, reply, sizeof reply) < 0) {
        conn_close(c);
        return false;
    }
    if (!ok) {
        c->head_len = 0;
        conn_reply_refusal(c, 407, "deny", "auth_required",
                           "wrong SOCKS5 username or password");
        return false;
    }
    c->socks = SOCKS_REQUEST;
    return true;
}

/*
 * A request the parser refused: its reply is sent here, with the code the
 * error calls for (an unknown ATYP is "address type not supported", which
 * tells a client to try another form), and the refusal sends no second.
 */
static void socks_malformed(struct conn *c, int err)
{
    uint8_t reply[10] = {5, socks5_reply_for(err), 0, 1};
    if (socks_send(c, reply, sizeof reply) < 0) {
        conn_close(c);
        return;
    }
    c->socks = SOCKS_ANSWERED;
    socks_bad(c, err == SOCKS5_E_NAME   ? "bad SOCKS5 host name"
                 : err == SOCKS5_E_ATYP ? "unsupported SOCKS5 address type"
                                        : "malformed SOCKS5 request");
}

static void socks_request(struct conn *c)
{
    struct socks5_request q;
    int r = socks5_parse_request((const uint8_t *)c->head, c->head_len, &q);
    if (r == 0) {
        conn_update_reads(c);
        return;
    }
    if (r < 0) {
        socks_malformed(c, r);
        return;
    }
    c->socks = SOCKS_ASKED;
    memcpy(c->host, q.host, sizeof c->host);
    c->port = q.port;
    if (q.cmd != SOCKS5_CMD_CONNECT) {
        c->head_len = 0;
        conn_reply_refusal(c, 501, "deny", "not_implemented",
                           "only the SOCKS5 CONNECT command is supported");
        return;
    }
    if (q.port == 0) {
        socks_bad(c, "SOCKS5 request for port 0");
        return;
    }
    struct http_request req;
    memset(&req, 0, sizeof req);
    req.method.p = "SOCKS5";
    req.method.n = 6;
    req.host_kind = q.kind;
    memcpy(req.host, q.host, sizeof req.host);
    req.addr = q.addr;
    req.port = q.port;
    req.is_connect = true;
    conn_handle_request(c, &req, (size_t)r);
}

void proxy_socks_head(struct conn *c)
{
    if (!c->socks) {
        c->socks = SOCKS_GREETING;
        c->is_connect = true;
        memcpy(c->method, "SOCKS5", 7);
    }
    if (c->socks == SOCKS_GREETING && !socks_greeting(c))
        return;
    if (c->socks == SOCKS_AUTH && !socks_auth(c))
        return;
    if (c->socks == SOCKS_REQUEST)
        socks_request(c);
}

static uint8_t reply_code(const struct conn *c, const char *code)
{
    if (!strcmp(code, "not_allowed") || !strcmp(code, "private_address") ||
        !strcmp(code, "own_address") || !strcmp(code, "auth_required") ||
        !strcmp(code, "sni_mismatch"))
        return SOCKS5_REP_NOT_ALLOWED;
    if (!strcmp(code, "dns_failed"))
        return SOCKS5_REP_HOST_UNREACHABLE;
    if (!strcmp(code, "connect_failed")) {
        if (c->last_err == UV_ECONNREFUSED)
            return SOCKS5_REP_REFUSED;
        if (c->last_err == UV_ENETUNREACH)
            return SOCKS5_REP_NET_UNREACHABLE;
        return SOCKS5_REP_HOST_UNREACHABLE;
    }
    if (!strcmp(code, "connect_timeout") || !strcmp(code, "dns_timeout"))
        return SOCKS5_REP_TTL;
    if (!strcmp(code, "not_implemented"))
        return SOCKS5_REP_COMMAND;
    return SOCKS5_REP_GENERAL;
}

void proxy_socks_refuse(struct conn *c, const char *code)
{
    uint8_t reply[10] = {5, reply_code(c, code), 0, 1};
    if (socks_send(c, reply, sizeof reply) < 0)
        conn_close(c);
}

int proxy_socks_ok(struct conn *c)
{
    /* The bound address is not the client's business: zeros. */
    static const uint8_t reply[10] = {5, SOCKS5_REP_OK, 0, 1};
    return socks_send(c, reply, sizeof reply);
}
