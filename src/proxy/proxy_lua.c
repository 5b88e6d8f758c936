/*
 * proxy_lua.c - isolation.proxy(opts) and the "isolation.proxy" userdata.
 *
 * The userdata holds only a pointer to the C proxy: the proxy's memory
 * belongs to the loop until libuv has run every close callback, so the
 * userdata may be collected first. close() (also __gc and __close) is
 * idempotent; any other method on a closed proxy raises.
 */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allow/hostpat_lua.h"
#include "isolation.h"
#include "msg.h"
#include "proxy/proxy.h"
#include "strarg.h"

#define PROXY_MT "isolation.proxy"

typedef struct {
    struct proxy *p;
} proxy_ud;

static const char *const known_opts[] = {"allow",
                                         "unix",
                                         "listen",
                                         "loop",
                                         "on_event",
                                         "allow_private",
                                         "resolve",
                                         "sni",
                                         "header_timeout",
                                         "connect_timeout",
                                         "dns_timeout",
                                         "idle_timeout",
                                         "max_header_bytes",
                                         "max_connections",
                                         "report",
                                         "audit_log",
                                         "session",
                                         "accept_listeners",
                                         "token",
                                         "routes",
                                         "upstream_ca_file",
                                         "upstream_proxy",
                                         "route_port",
                                         NULL};

static proxy_ud *check_ud(lua_State *L)
{
    return luaL_checkudata(L, 1, PROXY_MT);
}

static struct proxy *check_open(lua_State *L)
{
    proxy_ud *u = check_ud(L);
    if (!u->p)
        luaL_error(L, "attempt to use a closed isolation.proxy");
    return u->p;
}

/*
 * Pushes "isolation: <what> (got <value>)", the value at idx shown by the
 * shared helper (a string quoted and escaped, a number or boolean with its
 * value, anything else by its type). Returns -1 for the callers' returns.
 */
static int push_bad(lua_State *L, int idx, const char *what)
{
    msg_pushf_got(L, idx, "isolation: %s", what);
    return -1;
}

/* Reads opts[name] as seconds into *ms; 0 ok, -1 error (message pushed). */
static int opt_seconds(lua_State *L, const char *name, double max, uint64_t *ms)
{
    lua_getfield(L, 1, name);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    int isnum = 0;
    double v = lua_tonumberx(L, -1, &isnum);
    if (!isnum || lua_type(L, -1) != LUA_TNUMBER || !(v > 0) || v > max ||
        isnan(v)) {
        lua_pushfstring(L,
                        "%s must be a number of seconds above 0 and at most "
                        "%d",
                        name, (int)max);
        return push_bad(L, -2, lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    uint64_t t = (uint64_t)(v * 1000.0 + 0.5);
    *ms = t ? t : 1;
    return 0;
}

static int opt_integer(lua_State *L, const char *name, lua_Integer min,
                       lua_Integer max, lua_Integer *out)
{
    lua_getfield(L, 1, name);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (lua_type(L, -1) != LUA_TNUMBER || !isint || v < min || v > max) {
        lua_pushfstring(L, "%s must be an integer from %I to %I", name, min,
                        max);
        return push_bad(L, -2, lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    *out = v;
    return 0;
}

static int opt_bool(lua_State *L, const char *name, bool *out)
{
    lua_getfield(L, 1, name);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_isboolean(L, -1)) {
        lua_pushfstring(L, "%s must be a boolean", name);
        return push_bad(L, -2, lua_tostring(L, -1));
    }
    *out = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return 0;
}

/* resolve = {name = {"addr", ...}}: names and addresses both strict. */
static int opt_resolve(lua_State *L, struct proxy_opts *o)
{
    lua_getfield(L, 1, "resolve");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, -1))
        return push_bad(L, -1,
                        "resolve must be a table of name -> {address, ...}");
    int t = lua_gettop(L);
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, t)) {
        n++;
        lua_pop(L, 1);
    }
    o->resolve = calloc(n ? n : 1, sizeof *o->resolve);
    if (!o->resolve) {
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return -1;
    }
    lua_pushnil(L);
    while (lua_next(L, t)) {
        struct proxy_resolve *r = &o->resolve[o->nresolve];
        size_t klen = 0;
        const char *k = NULL;
        if (lua_type(L, -2) == LUA_TSTRING &&
            !(k = strarg_get(L, -2, "resolve key", &klen)))
            return -1;
        if (!k ||
            host_parse(k, klen, r->name, sizeof r->name, NULL) != HOST_NAME)
            return push_bad(L, -2, "resolve keys must be host names");
        size_t na = lua_istable(L, -1) ? lua_rawlen(L, -1) : 0;
        if (na == 0 || na > PROXY_MAX_ADDRS) {
            /* k is a valid host name: nothing in it needs escaping. */
            if (!lua_istable(L, -1)) {
                lua_pushfstring(L,
                                "resolve[\"%s\"] must be an array of 1 to "
                                "%d IP addresses",
                                k, PROXY_MAX_ADDRS);
                return push_bad(L, -2, lua_tostring(L, -1));
            }
            if (na == 0)
                lua_pushliteral(L, "an empty table");
            else
                lua_pushfstring(L, "an array of %I", (lua_Integer)na);
            lua_pushfstring(L,
                            "isolation: resolve[\"%s\"] must be an array of "
                            "1 to %d IP addresses (got %s)",
                            k, PROXY_MAX_ADDRS, lua_tostring(L, -1));
            return -1;
        }
        r->addrs = calloc(na, sizeof *r->addrs);
        if (!r->addrs) {
            lua_pushliteral(L, "isolation: proxy: out of memory");
            return -1;
        }
        o->nresolve++;
        for (size_t i = 1; i <= na; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i);
            size_t alen = 0;
            const char *a = NULL;
            char name[HOST_NAME_CAP + 32];
            snprintf(name, sizeof name, "resolve[\"%s\"][%zu]", k, i);
            if (lua_type(L, -1) == LUA_TSTRING &&
                !(a = strarg_get(L, -1, name, &alen)))
                return -1;
            char canon[HOST_NAME_CAP];
            enum host_kind kind =
                a ? host_parse(a, alen, canon, sizeof canon, &r->addrs[i - 1])
                  : HOST_INVALID;
            if (kind != HOST_IPV4 && kind != HOST_IPV6) {
                lua_pushfstring(L, "resolve[\"%s\"] must hold IP addresses", k);
                return push_bad(L, -2, lua_tostring(L, -1));
            }
            lua_pop(L, 1);
        }
        r->naddr = na;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

static void free_opts(struct proxy_opts *o)
{
    for (size_t i = 0; i < o->nresolve; i++)
        free(o->resolve[i].addrs);
    free(o->resolve);
    o->resolve = NULL;
    o->nresolve = 0;
    proxy_routes_free(o);
    proxy_parent_free(&o->parent);
}

/* Everything but the listener and the loop; -1 with a message pushed. */
static int parse_opts(lua_State *L, struct proxy_opts *o, hostpat_list **allow)
{
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t len;
            const char *k = strarg_get(L, -1, "proxy option", &len);
            if (!k)
                return -1;
            for (int i = 0; known_opts[i]; i++)
                known = known || strarg_is(k, len, known_opts[i]);
        }
        if (!known) {
            lua_pushfstring(
                L,
                "isolation: proxy option %s is unknown (accepted: "
                "allow, unix, listen, loop, on_event, "
                "allow_private, resolve, sni, header_timeout, "
                "connect_timeout, dns_timeout, idle_timeout, "
                "max_header_bytes, max_connections, report, "
                "audit_log, session, accept_listeners, token, "
                "routes, upstream_ca_file, upstream_proxy, route_port)",
                luaL_tolstring(L, -1, NULL));
            return -1;
        }
    }
    o->header_ms = PROXY_DEFAULT_HEADER_MS;
    o->connect_ms = PROXY_DEFAULT_CONNECT_MS;
    o->dns_ms = PROXY_DEFAULT_DNS_MS;
    o->idle_ms = PROXY_DEFAULT_IDLE_MS;
    o->sni_match = true;
    lua_Integer mh = PROXY_DEFAULT_MAX_HEADER, mc = PROXY_DEFAULT_MAX_CONN,
                al = 0, rp = 3128;
    if (opt_seconds(L, "header_timeout", 30, &o->header_ms) ||
        opt_seconds(L, "connect_timeout", 300, &o->connect_ms) ||
        opt_seconds(L, "dns_timeout", 300, &o->dns_ms) ||
        opt_seconds(L, "idle_timeout", 86400, &o->idle_ms) ||
        opt_integer(L, "max_header_bytes", 1024, PROXY_MAX_HEADER_LIMIT, &mh) ||
        opt_integer(L, "max_connections", 1, 1000000, &mc) ||
        opt_integer(L, "accept_listeners", 0, 64, &al) ||
        opt_integer(L, "route_port", 1, 65535, &rp) ||
        opt_bool(L, "allow_private", &o->allow_private) ||
        opt_bool(L, "report", &o->report))
        return -1;
    o->max_header_bytes = (size_t)mh;
    o->max_connections = (unsigned)mc;
    o->accept_listeners = (unsigned)al;
    o->route_port = (int)rp;

    lua_getfield(L, 1, "token");
    if (!lua_isnil(L, -1)) {
        size_t len = 0;
        const char *s =
            lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        bool ok = s && len >= 1 && len <= sizeof o->token;
        for (size_t i = 0; ok && i < len; i++)
            ok = s[i] > 0x20 && s[i] < 0x7f;
        /* The value is a secret: the message names the rule, not it. */
        if (!ok) {
            lua_pushstring(L, "isolation: proxy option token must be a "
                              "string of 1 to 255 printable ASCII bytes "
                              "without spaces");
            return -1;
        }
        proxy_token_set(o, s, len);
    }
    lua_pop(L, 1);

    lua_getfield(L, 1, "sni");
    if (!lua_isnil(L, -1)) {
        size_t len = 0;
        const char *s = NULL;
        if (lua_type(L, -1) == LUA_TSTRING &&
            !(s = strarg_get(L, -1, "sni", &len)))
            return -1;
        if (!s || (!strarg_is(s, len, "match") && !strarg_is(s, len, "off")))
            return push_bad(L, -1, "sni must be \"match\" or \"off\"");
        o->sni_match = strarg_is(s, len, "match");
    }
    lua_pop(L, 1);

    lua_getfield(L, 1, "upstream_proxy");
    if (!lua_isnil(L, -1)) {
        size_t len = 0;
        const char *s = NULL;
        if (lua_type(L, -1) == LUA_TSTRING &&
            !(s = strarg_get(L, -1, "upstream_proxy", &len)))
            return -1;
        char why[256];
        if (!s)
            snprintf(why, sizeof why, "not a string");
        if (!s || proxy_parent_parse(s, len, &o->parent, why, sizeof why)) {
            lua_pushfstring(L,
                            "upstream_proxy must be \"http://HOST:PORT\" "
                            "or \"http://USER:PASSWORD@HOST:PORT\" (HOST a "
                            "name, an IPv4 address or an IPv6 address in "
                            "brackets; PORT 1 to 65535; no path): %s",
                            why);
            /* A value with credentials is not shown. */
            if (s && memchr(s, '@', len)) {
                lua_pushfstring(L,
                                "isolation: %s (got a URL with "
                                "user:password@, not shown)",
                                lua_tostring(L, -1));
                return -1;
            }
            return push_bad(L, -2, lua_tostring(L, -1));
        }
    }
    lua_pop(L, 1);

    if (opt_resolve(L, o))
        return -1;
    if (proxy_routes_parse(L, o))
        return -1;

    lua_getfield(L, 1, "allow");
    if (!lua_istable(L, -1))
        return push_bad(L, -1, "allow must be an array of host patterns");
    char err[512];
    *allow = hostpat_from_lua(L, lua_gettop(L), "allow", err, sizeof err);
    if (!*allow) {
        lua_pushfstring(L, "isolation: %s", err);
        return -1;
    }
    lua_pop(L, 1);
    return 0;
}

/* audit_log = path, session = id: the log, opened before the listener so
 * that a bad path leaves nothing behind. 0, or -1 with a message in err. */
static int open_audit(lua_State *L, struct proxy *p, char *err, size_t errcap)
{
    int top = lua_gettop(L);
    lua_getfield(L, 1, "audit_log");
    lua_getfield(L, 1, "session");
    const char *path = NULL, *session = NULL;
    size_t slen = 0;
    const char *bad = NULL;
    int bad_idx = 0;
    if (!lua_isnil(L, top + 1) &&
        (lua_type(L, top + 1) != LUA_TSTRING ||
         !(path = strarg_get(L, top + 1, "audit_log", NULL)) || !path[0])) {
        bad = "audit_log must be a file path";
        bad_idx = top + 1;
    } else if (!lua_isnil(L, top + 2) &&
               (lua_type(L, top + 2) != LUA_TSTRING ||
                !(session = strarg_get(L, top + 2, "session", &slen)))) {
        bad = "session must be a string (the id the audit log names)";
        bad_idx = top + 2;
    }
    if (bad) {
        /* strarg_get pushed its own message for a NUL byte: use it. */
        if (lua_gettop(L) > top + 2) {
            snprintf(err, errcap, "%s", lua_tostring(L, -1));
        } else {
            snprintf(err, errcap, "%s",
                     msg_pushf_got(L, bad_idx, "isolation: %s", bad));
        }
        lua_settop(L, top);
        return -1;
    }
    if (path) {
        p->audit = proxy_audit_open(path, session, slen, err, errcap);
        if (!p->audit) {
            lua_settop(L, top);
            return -1;
        }
    }
    lua_settop(L, top);
    return 0;
}

static int proxy_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    struct proxy_opts o;
    memset(&o, 0, sizeof o);
    hostpat_list *allow = NULL;
    if (parse_opts(L, &o, &allow)) {
        free_opts(&o);
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    int fail_top = lua_gettop(L);

    /* The loop: the luv module table, or nil for the background thread. */
    enum proxy_mode mode = PROXY_THREAD;
    lua_getfield(L, 1, "loop"); /* fail_top + 1 */
    int luv_idx = lua_gettop(L);
    lua_getfield(L, 1, "on_event"); /* fail_top + 2 */
    const char *bad = NULL;
    int bad_got = 0; /* the index of the value `bad` is about, if any */
    if (!lua_isnil(L, luv_idx)) {
        mode = PROXY_LUV;
        if (!lua_istable(L, luv_idx)) {
            bad = "isolation: loop must be the luv module table";
            bad_got = luv_idx;
        } else {
            lua_getfield(L, luv_idx, "new_poll");
            lua_getfield(L, luv_idx, "new_timer");
            if (!lua_isfunction(L, -1) || !lua_isfunction(L, -2)) {
                bad = "isolation: loop must be the luv module table (this "
                      "one has no new_poll or new_timer)";
                bad_got = luv_idx;
            }
            lua_pop(L, 2);
        }
    }
    if (!bad && !lua_isnil(L, luv_idx + 1)) {
        if (!lua_isfunction(L, luv_idx + 1)) {
            bad = "isolation: on_event must be a function";
            bad_got = luv_idx + 1;
        } else if (mode != PROXY_LUV)
            bad = "isolation: on_event needs loop (the luv module); "
                  "without it use :events()";
    }

    bool has_unix = false, has_listen = false;
    lua_getfield(L, 1, "unix");
    has_unix = !lua_isnil(L, -1);
    lua_getfield(L, 1, "listen");
    has_listen = !lua_isnil(L, -1);
    int listen_idx = lua_gettop(L);
    struct sockaddr_storage listen_addr;
    socklen_t listen_len = 0;
    if (!bad && has_unix == has_listen)
        bad = "isolation: proxy needs exactly one of unix (a socket path) "
              "or listen (\"127.0.0.1:PORT\" or \"[::1]:PORT\")";
    if (!bad && has_unix && lua_type(L, -2) != LUA_TSTRING) {
        bad = "isolation: unix must be a path string";
        bad_got = listen_idx - 1;
    }
    /* Before anything is created: "/d/p.sock\0x" must not bind /d/p.sock. */
    if (!bad && ((has_unix && !strarg_get(L, listen_idx - 1, "unix", NULL)) ||
                 (has_listen && lua_type(L, listen_idx) == LUA_TSTRING &&
                  !strarg_get(L, listen_idx, "listen", NULL)))) {
        hostpat_free(allow);
        free_opts(&o);
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    if (!bad && has_listen) {
        size_t len = 0;
        const char *s = lua_type(L, listen_idx) == LUA_TSTRING
                            ? lua_tolstring(L, listen_idx, &len)
                            : NULL;
        if (!s || proxy_listen_parse(s, len, &listen_addr, &listen_len)) {
            bad = PROXY_LISTEN_ACCEPTED;
            bad_got = listen_idx;
        }
    }
    if (bad) {
        hostpat_free(allow);
        free_opts(&o);
        lua_pushnil(L);
        if (bad_got) {
            msg_pushf_got(L, bad_got, "%s", bad);
        } else {
            lua_pushstring(L, bad);
        }
        return 2;
    }

    /* The userdata first, closed, so that any failure below is safe. */
    proxy_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->p = NULL;
    luaL_setmetatable(L, PROXY_MT);
    int ud_idx = lua_gettop(L);

    struct proxy *p = calloc(1, sizeof *p);
    struct proxy_allow *a = p ? proxy_allow_new(allow) : NULL;
    if (!a) {
        free(p);
        hostpat_free(allow);
        free_opts(&o);
        lua_pushnil(L);
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return 2;
    }
    atomic_init(&p->refs, 1);
    uv_mutex_init(&p->mu);
    p->allow = a;
    p->opts = o;
    p->listen_fd = -1;
    p->on_event_ref = LUA_NOREF;

    char err[512];
    if (open_audit(L, p, err, sizeof err) != 0) {
        proxy_unref(p);
        lua_settop(L, fail_top);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    int r =
        has_unix
            ? proxy_listen_unix(p, lua_tostring(L, ud_idx - 2), err, sizeof err)
            : proxy_listen_tcp(p, &listen_addr, listen_len,
                               lua_tostring(L, ud_idx - 1), err, sizeof err);
    if (r == 0) {
        p->loop = proxy_loop_acquire(L, mode, luv_idx, err, sizeof err);
        if (!p->loop) {
            proxy_listen_unlink(p);
            close(p->listen_fd);
            r = -1;
        }
    }
    if (r != 0) {
        proxy_unref(p);
        lua_settop(L, fail_top);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    if (mode == PROXY_LUV) {
        if (!lua_isnil(L, luv_idx + 1)) {
            lua_pushvalue(L, luv_idx + 1);
            p->on_event_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        }
        p->luv_next = p->loop->luv_proxies;
        p->loop->luv_proxies = p;
    }
    atomic_fetch_add(&p->refs, 1); /* the loop's */
    r = proxy_loop_submit(p, PROXY_CMD_OPEN);
    if (r != 0) {
        /* proxy_start failed: it released the loop's reference. */
        snprintf(err, sizeof err, "isolation: proxy: cannot listen: %s",
                 uv_strerror(r));
        proxy_listen_unlink(p);
        if (p->on_event_ref != LUA_NOREF)
            luaL_unref(L, LUA_REGISTRYINDEX, p->on_event_ref);
        p->on_event_ref = LUA_NOREF;
        proxy_loop_release(L, p);
        proxy_unref(p);
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    u->p = p;
    if (mode == PROXY_LUV)
        proxy_loop_kick(L, p->loop);
    lua_pushvalue(L, ud_idx);
    return 1;
}

static int proxy_close(lua_State *L)
{
    proxy_ud *u = check_ud(L);
    struct proxy *p = u->p;
    if (!p)
        return 0;
    u->p = NULL;
    /* No more on_event calls, even for events already queued. */
    if (p->on_event_ref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, p->on_event_ref);
        p->on_event_ref = LUA_NOREF;
    }
    /* The name goes first: a client that finds the file finds it
     * listening (after the close it would get ECONNREFUSED). */
    proxy_listen_unlink(p);
    proxy_loop_submit(p, PROXY_CMD_CLOSE);
    proxy_loop_release(L, p);
    proxy_unref(p);
    return 0;
}

static int proxy_address(lua_State *L)
{
    lua_pushstring(L, check_open(L)->address);
    return 1;
}

static int proxy_port(lua_State *L)
{
    struct proxy *p = check_open(L);
    if (p->is_unix)
        lua_pushnil(L);
    else
        lua_pushinteger(L, p->port);
    return 1;
}

static int proxy_stats(lua_State *L)
{
    proxy_stats_push(L, check_open(L));
    return 1;
}

static int proxy_events(lua_State *L)
{
    proxy_events_push(L, check_open(L));
    return 1;
}

static int proxy_set_allow(lua_State *L)
{
    struct proxy *p = check_open(L);
    if (!lua_istable(L, 2)) {
        /* A wrong type raises (as the API allows), but named: called as
         * p.set_allow(p, x), luaL_checktype would say "to '?'". */
        return luaL_error(L, "%s",
                          msg_pushf_got(L, 2,
                                        "isolation: proxy:set_allow: patterns "
                                        "must be an array of host patterns"));
    }
    char err[512];
    hostpat_list *list = hostpat_from_lua(L, 2, "allow", err, sizeof err);
    if (!list) {
        lua_pushnil(L);
        lua_pushfstring(L, "isolation: %s", err);
        return 2;
    }
    struct proxy_allow *a = proxy_allow_new(list);
    if (!a) {
        hostpat_free(list);
        lua_pushnil(L);
        lua_pushliteral(L, "isolation: proxy: out of memory");
        return 2;
    }
    proxy_allow_set(p, a);
    lua_pushboolean(L, 1);
    return 1;
}

static int proxy_tostring(lua_State *L)
{
    proxy_ud *u = check_ud(L);
    if (u->p)
        lua_pushfstring(L, "isolation.proxy (%s)", u->p->address);
    else
        lua_pushliteral(L, "isolation.proxy (closed)");
    return 1;
}

static const luaL_Reg methods[] = {{"address", proxy_address},
                                   {"port", proxy_port},
                                   {"stats", proxy_stats},
                                   {"events", proxy_events},
                                   {"set_allow", proxy_set_allow},
                                   {"close", proxy_close},
                                   {NULL, NULL}};

static const luaL_Reg metamethods[] = {{"__index", NULL},
                                       {"__gc", proxy_close},
                                       {"__close", proxy_close},
                                       {"__tostring", proxy_tostring},
                                       {NULL, NULL}};

void isolation_proxy_open(lua_State *L)
{
    luaL_newmetatable(L, PROXY_MT);
    luaL_setfuncs(L, metamethods, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, proxy_new);
    lua_setfield(L, -2, "proxy");
}
