/*
 * proxy_route.c - credential routes: the `routes` and `upstream_ca_file`
 * options, which request is a route's, and the head sent to its upstream.
 *
 * A route keeps a secret on the host: the sandbox talks plain HTTP to the
 * proxy (GET /<name>/...), the proxy talks TLS to the upstream and sets the
 * route's header to the secret. What could go wrong, and what stops it:
 * the secret leaking into a message (no message ever prints a value), the
 * client choosing the credential (every Authorization, Proxy-Authorization,
 * x-api-key and the route's own header it sends is dropped), a path that
 * climbs out of the upstream's base path (dot segments, raw or escaped,
 * are refused), and the secret outliving the proxy (wiped before freed).
 */
#include <lauxlib.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"
#include "proxy/proxy_conn.h"
#include "strarg.h"
#include "wire/httpparse_lex.h"

#define MAX_ROUTES 64
#define MAX_SECRET 4096

static int bad(lua_State *L, const char *fmt, size_t i, const char *what)
{
    lua_pushfstring(L, fmt, (int)i, what);
    return -1;
}

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= ROUTE_NAME_CAP)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return true;
}

static bool token_ok(const char *s, size_t n)
{
    if (n == 0 || n >= ROUTE_NAME_CAP)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!http_is_tchar((unsigned char)s[i]))
            return false;
    return true;
}

/* "https://host[:port][/path]"; 0 or -1 (the reason in *why). */
static int parse_upstream(struct proxy_route *rt, const char *u, size_t n,
                          const char **why)
{
    if (n < 8 || strncmp(u, "https://", 8) != 0) {
        *why = "must start with https://";
        return -1;
    }
    u += 8, n -= 8;
    size_t a = 0;
    while (a < n && u[a] != '/') {
        if (u[a] == '?' || u[a] == '#' || u[a] == '@' || u[a] == '%' ||
            u[a] == '\\') {
            *why = "must be https://HOST[:PORT][/PATH] without userinfo, "
                   "query or fragment";
            return -1;
        }
        a++;
    }
    size_t hn = a;
    rt->port = 443;
    const char *colon = NULL;
    if (a > 0 && u[0] == '[') {
        const char *close = memchr(u, ']', a);
        if (!close) {
            *why = "has an unterminated IPv6 literal";
            return -1;
        }
        hn = (size_t)(close - u) + 1;
        if (hn < a && u[hn] == ':')
            colon = u + hn;
        else if (hn < a) {
            *why = "has junk after its IPv6 literal";
            return -1;
        }
    } else {
        colon = memchr(u, ':', a);
        if (colon)
            hn = (size_t)(colon - u);
    }
    if (colon) {
        const char *d = colon + 1;
        size_t dn = (size_t)(u + a - d);
        long v = 0;
        bool ok = dn >= 1 && dn <= 5 && d[0] != '0';
        for (size_t i = 0; ok && i < dn; i++) {
            ok = d[i] >= '0' && d[i] <= '9';
            v = v * 10 + (d[i] - '0');
        }
        if (!ok || v > 65535) {
            *why = "has a bad port";
            return -1;
        }
        rt->port = (int)v;
    }
    rt->kind = host_parse(u, hn, rt->host, sizeof rt->host, &rt->addr);
    if (rt->kind == HOST_INVALID) {
        *why = "has an invalid host";
        return -1;
    }
    /* Every request of the route sends this line: formatted here, once,
     * not on each request. */
    bool v6 = rt->kind == HOST_IPV6;
    char num[16] = "";
    if (rt->port != 443)
        snprintf(num, sizeof num, ":%d", rt->port);
    int hl = snprintf(rt->host_line, sizeof rt->host_line, "Host: %s%s%s%s\r\n",
                      v6 ? "[" : "", rt->host, v6 ? "]" : "", num);
    if (hl < 0 || (size_t)hl >= sizeof rt->host_line) {
        *why = "has an invalid host";
        return -1;
    }
    rt->host_line_len = (size_t)hl;
    const char *path = u + a;
    size_t pn = n - a;
    for (size_t i = 0; i < pn; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#') {
            *why = "has a path with a query, fragment or invalid character";
            return -1;
        }
    }
    while (pn > 0 && path[pn - 1] == '/')
        pn--;
    rt->base = malloc(pn + 1);
    if (!rt->base) {
        *why = "cannot be stored (out of memory)";
        return -1;
    }
    memcpy(rt->base, path, pn);
    rt->base[pn] = '\0';
    rt->base_len = pn;
    return 0;
}

static size_t base64(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    return o;
}

/* The header line from the header spec and the secret (both checked). */
static int make_header(struct proxy_route *rt, const char *h, size_t hn,
                       const char *v, size_t vn)
{
    size_t cap = 64 + hn + 2 * vn + 2 * ROUTE_NAME_CAP;
    char *line = malloc(cap);
    if (!line)
        return -1;
    size_t o = 0;
    if (hn == 6 && strncmp(h, "bearer", 6) == 0) {
        o = (size_t)snprintf(line, cap, "Authorization: Bearer ");
        memcpy(line + o, v, vn);
        o += vn;
    } else if (hn > 6 && strncmp(h, "basic:", 6) == 0) {
        size_t un = hn - 6;
        unsigned char *pair = malloc(un + 1 + vn);
        if (!pair) {
            free(line);
            return -1;
        }
        memcpy(pair, h + 6, un);
        pair[un] = ':';
        memcpy(pair + un + 1, v, vn);
        o = (size_t)snprintf(line, cap, "Authorization: Basic ");
        o += base64(pair, un + 1 + vn, line + o);
        OPENSSL_cleanse(pair, un + 1 + vn);
        free(pair);
    } else {
        memcpy(line, h, hn);
        o = hn;
        memcpy(line + o, ": ", 2);
        o += 2;
        memcpy(line + o, v, vn);
        o += vn;
        memcpy(rt->drop, h, hn);
        rt->drop_len = hn;
    }
    memcpy(line + o, "\r\n", 2);
    o += 2;
    rt->hdr = line;
    rt->hdr_len = o;
    return 0;
}

/* routes[i] at the top of the stack; 0 or -1 with a message pushed. */
static int parse_route(lua_State *L, size_t i, struct proxy_route *rt)
{
    if (!lua_istable(L, -1))
        return bad(L,
                   "isolation: routes[%d] must be a table {name, upstream, "
                   "header, value}%s",
                   i, "");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        const char *k =
            lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (!k || (strcmp(k, "name") && strcmp(k, "upstream") &&
                   strcmp(k, "header") && strcmp(k, "value"))) {
            lua_pushfstring(L,
                            "isolation: routes[%d] has an unknown key %s "
                            "(accepted: name, upstream, header, value)",
                            (int)i, luaL_tolstring(L, -1, NULL));
            return -1;
        }
    }
    size_t n;
    lua_getfield(L, -1, "name");
    const char *s =
        lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    if (!s || !name_ok(s, n)) {
        msg_pushf_got(L, -1,
                      "isolation: routes[%d].name must be 1 to 63 of "
                      "[a-z0-9-]",
                      (int)i);
        return -1;
    }
    memcpy(rt->name, s, n);
    rt->name[n] = '\0';
    rt->name_len = n;
    lua_pop(L, 1);

    lua_getfield(L, -1, "upstream");
    s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    const char *why = "must be a string";
    if (!s || strlen(s) != n || parse_upstream(rt, s, n, &why) != 0) {
        char what[160];
        snprintf(what, sizeof what,
                 "isolation: routes[%d].upstream %s (accepted: "
                 "https://HOST[:PORT][/PATH])",
                 (int)i, why);
        msg_pushf_got(L, -1, "%s", what);
        return -1;
    }
    lua_pop(L, 1);

    lua_getfield(L, -1, "header");
    size_t hn = 6;
    const char *h = "bearer";
    if (!lua_isnil(L, -1)) {
        h = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &hn) : NULL;
        bool ok = h != NULL;
        if (ok && hn > 6 && strncmp(h, "basic:", 6) == 0) {
            for (size_t k = 6; ok && k < hn; k++)
                ok = h[k] > 0x20 && h[k] < 0x7f && h[k] != ':';
            ok = ok && hn < ROUTE_NAME_CAP;
        } else if (ok) {
            ok = token_ok(h, hn);
        }
        if (!ok) {
            msg_pushf_got(L, -1,
                          "isolation: routes[%d].header must be \"bearer\", "
                          "\"basic:USER\" or a header name",
                          (int)i);
            return -1;
        }
    }
    lua_getfield(L, -2, "value");
    const char *v =
        lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    bool ok = v && n >= 1 && n <= MAX_SECRET;
    for (size_t k = 0; ok && k < n; k++)
        ok = (unsigned char)v[k] >= 0x20 && (unsigned char)v[k] < 0x7f;
    if (!ok) {
        /* A secret: the message names the rule, never the value. */
        lua_pushfstring(L,
                        "isolation: routes[%d].value must be a string of 1 "
                        "to %d printable ASCII bytes (the value is not "
                        "shown: it is a secret)",
                        (int)i, MAX_SECRET);
        return -1;
    }
    if (make_header(rt, h, hn, v, n) != 0) {
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return -1;
    }
    lua_pop(L, 2);
    return 0;
}

static int make_ctx(lua_State *L, struct proxy_opts *o)
{
    lua_getfield(L, 1, "upstream_ca_file");
    const char *ca = NULL;
    size_t n = 0;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) == LUA_TSTRING &&
            !(ca = strarg_get(L, -1, "upstream_ca_file", &n)))
            return -1;
        if (!ca || n == 0) {
            msg_pushf_got(L, -1,
                          "isolation: upstream_ca_file must be the path of "
                          "a PEM file");
            return -1;
        }
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        lua_pushliteral(L, "isolation: proxy: cannot make a TLS context");
        return -1;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int r = ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL)
               : SSL_CTX_set_default_verify_paths(ctx);
    if (r != 1) {
        char e[200];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        ERR_clear_error();
        SSL_CTX_free(ctx);
        if (ca)
            msg_pushf_got(L, -1,
                          "isolation: upstream_ca_file cannot be loaded as "
                          "PEM certificates");
        else
            lua_pushfstring(L,
                            "isolation: the system's trust store cannot be "
                            "loaded (%s)",
                            e);
        return -1;
    }
    o->tls_sessions = calloc(o->nroutes, sizeof *o->tls_sessions);
    if (!o->tls_sessions) {
        SSL_CTX_free(ctx);
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return -1;
    }
    proxy_tls_ctx_sessions(ctx);
    o->tls_ctx = ctx;
    lua_pop(L, 1);
    return 0;
}

int proxy_routes_parse(lua_State *L, struct proxy_opts *o)
{
    lua_getfield(L, 1, "routes");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_getfield(L, 1, "upstream_ca_file");
        bool ca = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (ca) {
            lua_pushliteral(L, "isolation: upstream_ca_file needs routes");
            return -1;
        }
        return 0;
    }
    size_t n = lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
    if (!lua_istable(L, -1) || n > MAX_ROUTES) {
        msg_pushf_got(L, -1,
                      "isolation: routes must be an array of at most 64 "
                      "{name, upstream, header, value}");
        return -1;
    }
    o->routes = calloc(n ? n : 1, sizeof *o->routes);
    if (!o->routes) {
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return -1;
    }
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        o->nroutes = i;
        if (parse_route(L, i, &o->routes[i - 1]) != 0)
            return -1;
        for (size_t k = 0; k + 1 < i; k++)
            if (strcmp(o->routes[k].name, o->routes[i - 1].name) == 0) {
                lua_pushfstring(L,
                                "isolation: routes[%d].name \"%s\" is "
                                "already the name of routes[%d]",
                                (int)i, o->routes[i - 1].name, (int)k + 1);
                return -1;
            }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (n > 0 && make_ctx(L, o) != 0)
        return -1;
    return 0;
}

void proxy_routes_free(struct proxy_opts *o)
{
    for (size_t i = 0; i < o->nroutes; i++) {
        struct proxy_route *rt = &o->routes[i];
        if (rt->hdr) {
            OPENSSL_cleanse(rt->hdr, rt->hdr_len);
            free(rt->hdr);
        }
        free(rt->base);
    }
    for (size_t i = 0; o->tls_sessions && i < o->nroutes; i++)
        SSL_SESSION_free(o->tls_sessions[i]); /* NULL: nothing */
    free(o->tls_sessions);
    o->tls_sessions = NULL;
    if (o->routes)
        OPENSSL_cleanse(o->routes, o->nroutes * sizeof *o->routes);
    free(o->routes);
    o->routes = NULL;
    o->nroutes = 0;
    if (o->tls_ctx)
        SSL_CTX_free(o->tls_ctx);
    o->tls_ctx = NULL;
}

/* Dot segments ("." or "..", raw or percent-escaped) would let a path
 * climb out of the upstream's base path. */
static bool has_dot_segment(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '?') {
        if (p[i] != '/') {
            i++;
            continue;
        }
        size_t j = i + 1, dots = 0;
        while (j < n && p[j] != '/' && p[j] != '?') {
            if (p[j] == '.') {
                dots++;
                j++;
            } else if (p[j] == '%' && j + 2 < n && p[j + 1] == '2' &&
                       (p[j + 2] == 'e' || p[j + 2] == 'E')) {
                dots++;
                j += 3;
            } else {
                dots = 9;
                j++;
            }
        }
        if (dots == 1 || dots == 2)
            return true;
        i = j;
    }
    return false;
}

/* Whether an absolute-form request names the proxy itself: 127.0.0.1,
 * localhost or [::1] at route_port (where the sandbox reaches it) or at
 * its own TCP port. Any other authority, another loopback port included
 * (a service on the host's loopback that the allowlist admits), is a
 * forward request to that host: a route never takes it, so the request
 * reaches the host it names, and that host never sees the route's secret
 * nor the route's upstream a request meant for it. */
static bool own_authority(const struct proxy *p, const struct http_request *req)
{
    if (req->port != p->opts.route_port &&
        (p->is_unix || p->port <= 0 || req->port != p->port))
        return false;
    if (req->host_kind == HOST_IPV4) {
        static const uint8_t lo4[4] = {127, 0, 0, 1};
        return memcmp(req->addr.bytes, lo4, 4) == 0;
    }
    if (req->host_kind == HOST_IPV6) {
        static const uint8_t one[16] = {[15] = 1};
        return memcmp(req->addr.bytes, one, 16) == 0;
    }
    return strcmp(req->host, "localhost") == 0;
}

const struct proxy_route *route_match(const struct proxy *p,
                                      const struct http_request *req,
                                      const char **bad_path)
{
    *bad_path = NULL;
    if (p->opts.nroutes == 0 || req->is_connect)
        return NULL;
    if (!req->origin_form && !own_authority(p, req))
        return NULL;
    const char *s = req->path.p;
    size_t n = req->path.n;
    if (n < 2 || s[0] != '/')
        return NULL;
    size_t e = 1;
    while (e < n && s[e] != '/' && s[e] != '?')
        e++;
    for (size_t i = 0; i < p->opts.nroutes; i++) {
        const struct proxy_route *rt = &p->opts.routes[i];
        if (rt->name_len == e - 1 && memcmp(s + 1, rt->name, e - 1) == 0) {
            if (has_dot_segment(s + e, n - e))
                *bad_path = "a dot segment in a route's path";
            return rt;
        }
    }
    return NULL;
}

struct out {
    char *p;
    size_t cap, n;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->n < o->cap) {
        size_t room = o->cap - o->n;
        memcpy(o->p + o->n, s, n < room ? n : room);
    }
    o->n += n;
}

/* Headers the client may not send on a route: the credential is the
 * route's alone. */
static bool dropped(const struct proxy_route *rt, const struct http_span *nm)
{
    return http_ieq(nm->p, nm->n, "authorization") ||
           http_ieq(nm->p, nm->n, "x-api-key") ||
           (rt->drop_len && nm->n == rt->drop_len &&
            strncasecmp(nm->p, rt->drop, rt->drop_len) == 0);
}

size_t route_write_head(const struct proxy_route *rt,
                        const struct http_request *req, char *out, size_t cap)
{
    struct out o = {out, cap, 0};
    char num[48];
    put(&o, req->method.p, req->method.n);
    put(&o, " ", 1);
    const char *rest = req->path.p + 1 + rt->name_len;
    size_t rn = req->path.n - 1 - rt->name_len;
    put(&o, rt->base, rt->base_len);
    if (rn == 0 || rest[0] == '?')
        put(&o, "/", 1);
    put(&o, rest, rn);
    put(&o, " HTTP/1.1\r\n", 11);
    put(&o, rt->host_line, rt->host_line_len);
    for (size_t i = 0; i < req->nheaders; i++) {
        if (dropped(rt, &req->headers[i].name))
            continue;
        put(&o, req->headers[i].name.p, req->headers[i].name.n);
        put(&o, ": ", 2);
        put(&o, req->headers[i].value.p, req->headers[i].value.n);
        put(&o, "\r\n", 2);
    }
    put(&o, rt->hdr, rt->hdr_len);
    if (req->body == BODY_CHUNKED) {
        put(&o, "Transfer-Encoding: chunked\r\n", 28);
    } else if (req->body == BODY_LENGTH) {
        snprintf(num, sizeof num, "Content-Length: %llu\r\n",
                 (unsigned long long)req->content_length);
        put(&o, num, strlen(num));
    }
    put(&o, "Connection: keep-alive\r\n\r\n", 26);
    return o.n;
}
