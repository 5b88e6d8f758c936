/*
 * proxy_parent.c - the parent proxy (upstream_proxy = "http://HOST:PORT"):
 * its URL, the CONNECT the proxy sends it, and the reading of its reply.
 * proxy_request.c and proxy_dial.c decide when (after the allowlist,
 * before any byte of the client's goes out) and what follows (the tunnel,
 * a forward request, a route's TLS).
 *
 * What could go wrong, and what stops it: a URL with a path that would be
 * silently dropped (refused: nothing is ignored); the parent's credentials
 * (user:password@, sent as HTTP Basic) in a message, an event or freed
 * memory (messages name the rule, events the parent's HOST:PORT; wiped
 * before freed); a reply
 * head without end that would grow without bound (PROXY_PARENT_HEAD_MAX);
 * a reply that is not HTTP, or not 2xx, taken for a tunnel (only a
 * well-formed 2xx opens one); the tunnel's first bytes, which may come in
 * the same read as the reply, lost or doubled (the caller relays exactly
 * what follows the head, once).
 */
#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_conn.h"

/* Longest user:password (decoded) a parent URL may carry. */
#define PARENT_CRED_MAX 1024

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)tolower((unsigned char)ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Percent-decodes n bytes of src onto dst at *o (dst holds
 * PARENT_CRED_MAX); 0, or -1 for a bad escape, a control byte (CR, LF and
 * NUL would end the header line) or too long. */
static int cred_decode(const char *src, size_t n, unsigned char *dst, size_t *o)
{
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)src[i];
        if (ch == '%') {
            int hi = i + 2 < n ? hexval(src[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(src[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            ch = hi * 16 + lo;
            i += 2;
        }
        if (ch < 0x20 || ch == 0x7f || *o >= PARENT_CRED_MAX)
            return -1;
        dst[(*o)++] = (unsigned char)ch;
    }
    return 0;
}

/* user[:password] (percent-encoded) as a Proxy-Authorization line for
 * HTTP Basic, in out->auth; 0, or -1 with err (never the credentials). */
static int parse_userinfo(const char *u, size_t n, struct proxy_parent *out,
                          char *err, size_t errcap)
{
    unsigned char pair[PARENT_CRED_MAX];
    size_t o = 0;
    const char *colon = memchr(u, ':', n);
    size_t un = colon ? (size_t)(colon - u) : n;
    int r = un == 0 ? -1 : cred_decode(u, un, pair, &o);
    if (r == 0 && memchr(pair, ':', o))
        r = -1; /* Basic cannot carry a colon in the user */
    if (r == 0 && o < PARENT_CRED_MAX)
        pair[o++] = ':';
    else
        r = -1;
    if (r == 0 && colon)
        r = cred_decode(colon + 1, n - un - 1, pair, &o);
    if (r != 0) {
        OPENSSL_cleanse(pair, sizeof pair);
        snprintf(err, errcap,
                 "user:password@ must be a user (no colon) and a password, "
                 "percent-encoded, without control bytes, at most %d bytes",
                 PARENT_CRED_MAX);
        return -1;
    }
    static const char pre[] = "Proxy-Authorization: Basic ";
    size_t cap = sizeof pre - 1 + 4 * ((o + 2) / 3) + 3;
    out->auth = malloc(cap);
    if (!out->auth) {
        OPENSSL_cleanse(pair, sizeof pair);
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    memcpy(out->auth, pre, sizeof pre - 1);
    size_t b = (size_t)EVP_EncodeBlock(
        (unsigned char *)out->auth + sizeof pre - 1, pair, (int)o);
    OPENSSL_cleanse(pair, sizeof pair);
    memcpy(out->auth + sizeof pre - 1 + b, "\r\n", 2);
    out->auth_len = sizeof pre - 1 + b + 2;
    return 0;
}

void proxy_parent_free(struct proxy_parent *pp)
{
    if (pp->auth) {
        OPENSSL_cleanse(pp->auth, pp->auth_len);
        free(pp->auth);
    }
    pp->auth = NULL;
    pp->auth_len = 0;
}

int proxy_parent_parse(const char *url, size_t len, struct proxy_parent *out,
                       char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    static const char scheme[] = "http://";
    size_t sl = sizeof scheme - 1;
    if (len < sl || strncasecmp(url, scheme, sl) != 0) {
        snprintf(err, errcap,
                 "the scheme is not http:// (https:// and "
                 "socks5:// parents are not supported)");
        return -1;
    }
    const char *a = url + sl, *end = url + len;
    const char *ae = a;
    while (ae < end && *ae != '/' && *ae != '?' && *ae != '#')
        ae++;
    if (ae < end && !(ae + 1 == end && *ae == '/')) {
        snprintf(err, errcap, "a path, query or fragment follows the port");
        return -1;
    }
    /* user:password@: HTTP Basic credentials for the parent. The host
     * starts after the first '@' (userinfo has none unencoded). */
    const char *at = memchr(a, '@', (size_t)(ae - a));
    const char *ui = a;
    size_t uin = 0;
    if (at) {
        uin = (size_t)(at - a);
        a = at + 1;
    }
    const char *colon = NULL, *hs = a, *he;
    if (a < ae && *a == '[') {
        const char *rb = memchr(a, ']', (size_t)(ae - a));
        if (!rb || rb + 1 >= ae || rb[1] != ':') {
            snprintf(err, errcap, "the port is missing");
            return -1;
        }
        hs = a + 1;
        he = rb;
        colon = rb + 1;
    } else {
        for (const char *q = a; q < ae; q++)
            if (*q == ':')
                colon = q;
        if (!colon) {
            snprintf(err, errcap, "the port is missing");
            return -1;
        }
        he = colon;
    }
    const char *ps = colon + 1;
    long port = 0;
    bool ok = ps < ae && ae - ps <= 5 && !(*ps == '0');
    for (const char *q = ps; ok && q < ae; q++) {
        ok = isdigit((unsigned char)*q);
        port = port * 10 + (*q - '0');
    }
    if (!ok || port < 1 || port > 65535) {
        snprintf(err, errcap,
                 "the port is not 1 to 65535 in decimal "
                 "without leading zeros");
        return -1;
    }
    if (a < ae && *a != '[' && memchr(hs, ':', (size_t)(he - hs))) {
        snprintf(err, errcap, "an IPv6 address must be in brackets");
        return -1;
    }
    out->kind = host_parse(hs, (size_t)(he - hs), out->host, sizeof out->host,
                           &out->addr);
    if (out->kind == HOST_INVALID || (*a == '[' && out->kind != HOST_IPV6)) {
        snprintf(err, errcap, "the host is not a host name or IP address");
        return -1;
    }
    if (at && parse_userinfo(ui, uin, out, err, errcap) != 0)
        return -1;
    out->port = (int)port;
    bool v6 = out->kind == HOST_IPV6;
    snprintf(out->text, sizeof out->text, "%s%s%s:%d", v6 ? "[" : "", out->host,
             v6 ? "]" : "", out->port);
    out->set = true;
    return 0;
}

size_t proxy_parent_request(const struct conn *c, char *out, size_t cap)
{
    const struct proxy_parent *pp = &c->px->opts.parent;
    bool v6 = c->kind == HOST_IPV6;
    char target[HOST_NAME_CAP + 16];
    snprintf(target, sizeof target, "%s%s%s:%d", v6 ? "[" : "", c->host,
             v6 ? "]" : "", c->port);
    int n = snprintf(out, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target,
                     target);
    if (n < 0 || (size_t)n + pp->auth_len + 2 >= cap)
        return 0;
    size_t o = (size_t)n;
    if (pp->auth) {
        memcpy(out + o, pp->auth, pp->auth_len);
        o += pp->auth_len;
    }
    memcpy(out + o, "\r\n", 2);
    return o + 2;
}

int proxy_parent_reply(const char *buf, size_t len, size_t *head_len, char *why,
                       size_t whycap)
{
    struct http_response res;
    const char *bad = NULL;
    /* As if to HEAD: a CONNECT's 2xx has no body, whatever it says. */
    int r =
        http_parse_response(buf, len, PROXY_PARENT_HEAD_MAX, true, &res, &bad);
    if (r == 0)
        return 0;
    if (r < 0) {
        snprintf(why, whycap, "%s", bad ? bad : "malformed response");
        return -1;
    }
    if (res.status < 200 || res.status > 299) {
        /* The status line's reason phrase is the parent's text: only the
         * number goes into messages. */
        snprintf(why, whycap, "answered %d", res.status);
        return -1;
    }
    *head_len = (size_t)r;
    return 1;
}
