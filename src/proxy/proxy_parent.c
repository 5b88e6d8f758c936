/*
 * proxy_parent.c - the parent proxy (upstream_proxy = "http://HOST:PORT"):
 * its URL, the CONNECT the proxy sends it, and the reading of its reply.
 * proxy_conn.c decides when (after the allowlist, before any byte of the
 * client's goes out) and what follows (the tunnel, a forward request, a
 * route's TLS).
 *
 * What could go wrong, and what stops it: a URL with a path or credentials
 * that would be silently dropped (refused: nothing is ignored); a reply
 * head without end that would grow without bound (PROXY_PARENT_HEAD_MAX);
 * a reply that is not HTTP, or not 2xx, taken for a tunnel (only a
 * well-formed 2xx opens one); the tunnel's first bytes, which may come in
 * the same read as the reply, lost or doubled (the caller relays exactly
 * what follows the head, once).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "proxy/proxy_conn.h"

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
    if (memchr(a, '@', (size_t)(ae - a))) {
        snprintf(err, errcap,
                 "user:password@ is not supported (a parent "
                 "that asks for credentials is not)");
        return -1;
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
    out->port = (int)port;
    bool v6 = out->kind == HOST_IPV6;
    snprintf(out->text, sizeof out->text, "%s%s%s:%d", v6 ? "[" : "", out->host,
             v6 ? "]" : "", out->port);
    out->set = true;
    return 0;
}

size_t proxy_parent_request(const struct conn *c, char *out, size_t cap)
{
    bool v6 = c->kind == HOST_IPV6;
    char target[HOST_NAME_CAP + 16];
    snprintf(target, sizeof target, "%s%s%s:%d", v6 ? "[" : "", c->host,
             v6 ? "]" : "", c->port);
    int n = snprintf(out, cap, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                     target, target);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
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
