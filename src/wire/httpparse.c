/*
 * httpparse.c - the strict request-head parser. It decides what the proxy
 * checks against the allowlist and what it sends upstream, so every
 * ambiguity (two hosts, two lengths, a line end one hop reads differently
 * from the next) is a refusal rather than a guess.
 *
 * Refusals are reported in the order their bytes arrive: a prefix of a
 * head is either incomplete (0) or refused with the status the whole head
 * would get. The proxy may call again with more bytes at any time.
 */
#include <stdint.h>
#include <string.h>

#include "wire/httpparse.h"
#include "wire/httpparse_lex.h"

#define REFUSE(status, reason)                                                 \
    do {                                                                       \
        if (why)                                                               \
            *why = (reason);                                                   \
        return -(status);                                                      \
    } while (0)

/* More Connection headers than this is refused rather than tracked. */
#define MAX_CONNECTION_HEADERS 8

struct authority {
    enum host_kind kind;
    int port; /* 0 when none was given */
};

/*
 * host[:port] as in a CONNECT target, an absolute URI or a Host header.
 * Refuses userinfo, '\' and '%' (an escape or a zone id lets two readers
 * see two hosts), an unbracketed IPv6, and a port that is not 1..65535 in
 * plain decimal. The normalized host goes to out.
 */
static bool parse_authority(const char *p, size_t n, char *out,
                            struct host_addr *addr, struct authority *a,
                            const char **why)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '@') {
            *why = "userinfo in the authority";
            return false;
        }
        if (p[i] == '\\') {
            *why = "backslash in the authority";
            return false;
        }
        if (p[i] == '%') {
            *why = "percent sign in the authority";
            return false;
        }
    }
    size_t host_n, colon = n;
    bool bracketed = n > 0 && p[0] == '[';
    if (bracketed) {
        const char *close = memchr(p, ']', n);
        if (!close) {
            *why = "unterminated IPv6 literal";
            return false;
        }
        host_n = (size_t)(close - p) + 1;
        if (host_n < n && p[host_n] != ':') {
            *why = "junk after an IPv6 literal";
            return false;
        }
        colon = host_n;
    } else {
        const char *c = memchr(p, ':', n);
        if (c) {
            colon = (size_t)(c - p);
            if (memchr(c + 1, ':', n - colon - 1)) {
                *why = "IPv6 literal without brackets";
                return false;
            }
        }
        host_n = colon;
    }
    if (host_n == 0) {
        *why = "empty host";
        return false;
    }
    a->port = 0;
    if (colon < n) {
        const char *d = p + colon + 1;
        size_t dn = n - colon - 1;
        if (dn == 0 || dn > 5 || d[0] == '0') {
            *why = "bad port";
            return false;
        }
        long v = 0;
        for (size_t i = 0; i < dn; i++) {
            if (d[i] < '0' || d[i] > '9') {
                *why = "bad port";
                return false;
            }
            v = v * 10 + (d[i] - '0');
        }
        if (v > 65535) {
            *why = "bad port";
            return false;
        }
        a->port = (int)v;
    }
    a->kind = host_parse(p, host_n, out, HOST_NAME_CAP, addr);
    if (a->kind == HOST_INVALID || (bracketed != (a->kind == HOST_IPV6))) {
        *why = "invalid host (numeric hosts must be canonical IP literals)";
        return false;
    }
    return true;
}

/* Splits "http://authority/path" (scheme case-insensitive). */
static int parse_forward_target(const char *t, size_t n,
                                struct http_request *req, bool origin_ok,
                                const char **why)
{
    if (n > 0 && t[0] == '/' && origin_ok) {
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)t[i];
            if (c <= 0x20 || c >= 0x7f)
                REFUSE(400, "invalid character in the request target");
            if (c == '#')
                REFUSE(400, "fragment in the request target");
        }
        req->origin_form = true;
        req->host[0] = '\0';
        req->host_kind = HOST_INVALID;
        req->port = 0;
        req->path.p = t;
        req->path.n = n;
        return 0;
    }
    if (n > 0 && t[0] == '/')
        REFUSE(400, "origin-form request to a proxy");
    if (http_iprefix(t, n, "https://"))
        REFUSE(400, "https:// in absolute form: use CONNECT");
    if (!http_iprefix(t, n, "http://"))
        REFUSE(400, "request target is not an http:// URI");
    t += 7, n -= 7;
    size_t a = 0;
    while (a < n && t[a] != '/' && t[a] != '?' && t[a] != '#')
        a++;
    struct authority au;
    const char *reason = NULL;
    if (!parse_authority(t, a, req->host, &req->addr, &au, &reason))
        REFUSE(400, reason);
    req->host_kind = au.kind;
    req->port = au.port ? au.port : 80;
    if (a == n) {
        req->path.p = "/";
        req->path.n = 1;
        return 0;
    }
    if (t[a] != '/')
        REFUSE(400, "URI without a path before its query or fragment");
    for (size_t i = a; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f)
            REFUSE(400, "invalid character in the request target");
        if (c == '#')
            REFUSE(400, "fragment in the request target");
    }
    req->path.p = t + a;
    req->path.n = n - a;
    return 0;
}

static int parse_request_line(const char *line, size_t n,
                              struct http_request *req, bool origin_ok,
                              const char **why)
{
    const char *sp1 = memchr(line, ' ', n);
    if (!sp1 || sp1 == line)
        REFUSE(400, "malformed request line");
    size_t mlen = (size_t)(sp1 - line);
    for (size_t i = 0; i < mlen; i++) {
        if (!http_is_tchar((unsigned char)line[i]))
            REFUSE(400, "invalid character in the method");
    }
    const char *t = sp1 + 1;
    const char *end = line + n;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t)
        REFUSE(400, "malformed request line");
    int minor = http_lex_version(sp2 + 1, (size_t)(end - sp2 - 1));
    if (minor == -505)
        REFUSE(505, "HTTP version not supported");
    if (minor < 0)
        REFUSE(400, "malformed HTTP version");
    req->method.p = line;
    req->method.n = mlen;
    req->version_minor = minor;
    req->is_connect = mlen == 7 && memcmp(line, "CONNECT", 7) == 0;
    size_t tn = (size_t)(sp2 - t);
    if (!req->is_connect)
        return parse_forward_target(t, tn, req, origin_ok, why);

    /* CONNECT: authority-form, host:port, nothing else. */
    if (memchr(t, '/', tn) || memchr(t, '?', tn) || memchr(t, '#', tn))
        REFUSE(400, "CONNECT target must be host:port, not a URI");
    for (size_t i = 0; i < tn; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f)
            REFUSE(400, "invalid character in the request target");
    }
    struct authority au;
    const char *reason = NULL;
    if (!parse_authority(t, tn, req->host, &req->addr, &au, &reason))
        REFUSE(400, reason);
    if (au.port == 0)
        REFUSE(400, "CONNECT target without a port");
    req->host_kind = au.kind;
    req->port = au.port;
    req->path.p = "";
    req->path.n = 0;
    return 0;
}

/* Headers the proxy consumes or that only concern this hop. */
static bool is_hop_by_hop(const char *name, size_t n)
{
    static const char *const hop[] = {
        "host",    "connection",        "keep-alive", "te",
        "trailer", "transfer-encoding", "upgrade",    "content-length",
        "proxy-", /* every Proxy-* header, Proxy-Connection included */
    };
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++) {
        if (i == sizeof hop / sizeof hop[0] - 1 ? http_iprefix(name, n, hop[i])
                                                : http_ieq(name, n, hop[i]))
            return true;
    }
    return false;
}

static bool named_by_connection(const struct http_span *conn, size_t nconn,
                                const char *name, size_t n)
{
    for (size_t c = 0; c < nconn; c++) {
        struct http_list_iter it = {conn[c].p, conn[c].n, 0};
        const char *tok;
        size_t tn;
        while (http_list_next(&it, &tok, &tn) > 0) {
            size_t k = 0;
            while (k < n && k < tn && http_lower(tok[k]) == http_lower(name[k]))
                k++;
            if (k == n && k == tn)
                return true;
        }
    }
    return false;
}

/* What the header lines have told so far. */
struct head_state {
    int hosts, lengths, encodings;
    bool conn_close, conn_keep_alive;
    struct http_span conn[MAX_CONNECTION_HEADERS];
    size_t nconn;
};

/*
 * Transfer-Encoding as the API has it: exactly "chunked", byte for byte.
 * `field` is everything between the colon and the line's CRLF, untrimmed:
 * the one space clients put after the colon is allowed, any other
 * whitespace, any case but lower, a list or a parameter is not. (The head
 * sent upstream has its own framing, never this header, so a looser rule
 * would not smuggle anything; it is refused because it is not what the
 * contract accepts, and a client that sends it is not one this proxy
 * needs to understand.)
 */
static bool exactly_chunked(const char *field, size_t n)
{
    if (n > 0 && field[0] == ' ') {
        field++;
        n--;
    }
    return n == 7 && memcmp(field, "chunked", 7) == 0;
}

static int header_semantics(const char *name, size_t nn, const char *value,
                            size_t vn, const char *line_end,
                            struct http_request *req, struct head_state *st,
                            const char **why)
{
    if (http_ieq(name, nn, "host")) {
        if (++st->hosts > 1)
            REFUSE(400, "two Host headers");
        char host[HOST_NAME_CAP];
        struct authority au;
        const char *reason = NULL;
        if (!parse_authority(value, vn, host, NULL, &au, &reason))
            REFUSE(400, "invalid Host header");
        if (req->origin_form)
            return 0; /* the proxy's own address, as the client knows it */
        /*
         * A Host without a port names the scheme's default: 80 for a
         * forward request; a CONNECT has no scheme, so only its host is
         * compared then.
         */
        int port = au.port ? au.port : (req->is_connect ? req->port : 80);
        if (strcmp(host, req->host) != 0 || port != req->port)
            REFUSE(400, "Host header names another host or port than the "
                        "request target");
        return 0;
    }
    if (http_ieq(name, nn, "content-length")) {
        if (++st->lengths > 1)
            REFUSE(400, "duplicate Content-Length");
        if (!http_lex_length(value, vn, &req->content_length))
            REFUSE(400, "Content-Length is not a number");
        if (st->encodings)
            REFUSE(400, "both Content-Length and Transfer-Encoding");
        return 0;
    }
    if (http_ieq(name, nn, "transfer-encoding")) {
        if (++st->encodings > 1)
            REFUSE(400, "duplicate Transfer-Encoding");
        if (!exactly_chunked(name + nn + 1,
                             (size_t)(line_end - (name + nn + 1))))
            REFUSE(400, "Transfer-Encoding other than exactly chunked");
        if (st->lengths)
            REFUSE(400, "both Content-Length and Transfer-Encoding");
        if (req->version_minor == 0)
            REFUSE(400, "Transfer-Encoding in an HTTP/1.0 request");
        return 0;
    }
    if (http_ieq(name, nn, "upgrade"))
        REFUSE(501, "protocol upgrades are not relayed");
    if (http_ieq(name, nn, "connection")) {
        if (st->nconn == MAX_CONNECTION_HEADERS)
            REFUSE(400, "too many Connection headers");
        st->conn[st->nconn].p = value;
        st->conn[st->nconn].n = vn;
        st->nconn++;
        struct http_list_iter it = {value, vn, 0};
        const char *tok;
        size_t tn;
        int r;
        while ((r = http_list_next(&it, &tok, &tn)) > 0) {
            if (http_ieq(tok, tn, "close"))
                st->conn_close = true;
            else if (http_ieq(tok, tn, "keep-alive"))
                st->conn_keep_alive = true;
        }
        if (r < 0)
            REFUSE(400, "invalid token in Connection");
    }
    return 0;
}

/* Checks that need the whole head; drops the hop-by-hop headers. */
static int finish_request(struct http_request *req, struct head_state *st,
                          const char **why)
{
    if (req->version_minor == 1 && st->hosts == 0)
        REFUSE(400, "HTTP/1.1 request without Host");
    req->body = st->encodings ? BODY_CHUNKED
                : st->lengths ? BODY_LENGTH
                              : BODY_NONE;
    if (!st->lengths)
        req->content_length = 0;
    if (req->is_connect) {
        if (req->body == BODY_CHUNKED || req->content_length > 0)
            REFUSE(400, "CONNECT with a body");
        req->body = BODY_NONE;
    }
    req->keep_alive = req->version_minor == 1
                          ? !st->conn_close
                          : (st->conn_keep_alive && !st->conn_close);
    size_t kept = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        const struct http_span *nm = &req->headers[i].name;
        if (http_ieq(nm->p, nm->n, "proxy-authorization")) {
            req->proxy_auth = req->headers[i].value;
            req->proxy_auths++;
        }
        if (is_hop_by_hop(nm->p, nm->n) ||
            named_by_connection(st->conn, st->nconn, nm->p, nm->n))
            continue;
        req->headers[kept++] = req->headers[i];
    }
    req->nheaders = kept;
    return 0;
}

static int parse_request(const char *buf, size_t len, size_t max_head,
                         struct http_request *req, bool origin_ok,
                         const char **why)
{
    const char *reason = NULL;
    size_t eol = 0;
    req->head_len = 0;
    req->nheaders = 0;
    req->proxy_auth.p = NULL;
    req->proxy_auth.n = 0;
    req->proxy_auths = 0;
    req->content_length = 0;
    req->body = BODY_NONE;
    req->keep_alive = false;
    req->origin_form = false;

    /* The request line: 414 when it has not ended within
     * HTTP_MAX_REQUEST_LINE or within the head limit, whichever is less (a
     * line longer than the whole head may be is an oversized line). */
    size_t line_lim = HTTP_MAX_REQUEST_LINE + 2; /* the line and its CRLF */
    size_t lim = len;
    if (lim > max_head)
        lim = max_head;
    if (lim > line_lim)
        lim = line_lim;
    enum http_line_result r = http_lex_line(buf, lim, 0, &eol, &reason);
    if (r == LINE_BAD)
        REFUSE(400, reason);
    if (r == LINE_MORE) {
        if (len >= line_lim || len >= max_head)
            REFUSE(414, "request line too long");
        return 0;
    }
    if (eol == 0)
        REFUSE(400, "empty request line");
    int rc = parse_request_line(buf, eol, req, origin_ok, why);
    if (rc < 0)
        return rc;

    struct head_state st;
    memset(&st, 0, sizeof st);
    lim = len < max_head ? len : max_head;
    size_t pos = eol + 2;
    for (;;) {
        r = http_lex_line(buf, lim, pos, &eol, &reason);
        if (r == LINE_BAD)
            REFUSE(400, reason);
        if (r == LINE_MORE) {
            if (len >= max_head)
                REFUSE(431, "request head too large");
            return 0;
        }
        if (eol == pos)
            break; /* the blank line */
        const char *name, *value;
        size_t nn, vn;
        if (!http_lex_header(buf + pos, eol - pos, &name, &nn, &value, &vn,
                             &reason))
            REFUSE(400, reason);
        if (req->nheaders == HTTP_MAX_HEADERS)
            REFUSE(431, "too many header fields");
        rc = header_semantics(name, nn, value, vn, buf + eol, req, &st, why);
        if (rc < 0)
            return rc;
        req->headers[req->nheaders].name.p = name;
        req->headers[req->nheaders].name.n = nn;
        req->headers[req->nheaders].value.p = value;
        req->headers[req->nheaders].value.n = vn;
        req->nheaders++;
        pos = eol + 2;
    }
    req->head_len = eol + 2;
    rc = finish_request(req, &st, why);
    if (rc < 0)
        return rc;
    return (int)req->head_len;
}

int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req, const char **why)
{
    return parse_request(buf, len, max_head, req, false, why);
}

int http_parse_request_origin(const char *buf, size_t len, size_t max_head,
                              struct http_request *req, const char **why)
{
    return parse_request(buf, len, max_head, req, true, why);
}
