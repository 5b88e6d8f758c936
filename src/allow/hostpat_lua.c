/*
 * hostpat_lua.c - the Lua face of host patterns: hostpat_from_lua,
 * host_allowed, and the internal _private_address that the specs use to pin
 * the address classes.
 */
#include "allow/hostpat_lua.h"
#include "allow/hostpat_internal.h"
#include "isolation.h"
#include "msg.h"
#include "strarg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hostpat_list *hostpat_from_lua(lua_State *L, int idx, const char *field,
                               char *err, size_t errcap)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errcap, "%s",
                 msg_pushf_got(L, idx,
                               "%s must be an array of host pattern strings",
                               field));
        lua_pop(L, 1);
        return NULL;
    }
    size_t n = lua_rawlen(L, idx);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        count++;
        lua_Integer k = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        if (k < 1 || (size_t)k > n) {
            lua_pop(L, 1);
            snprintf(err, errcap,
                     "%s must be an array of host pattern strings (got a "
                     "table with non-array keys)",
                     field);
            return NULL;
        }
    }
    if (count != n) {
        snprintf(err, errcap,
                 "%s must be an array of host pattern strings (got a table "
                 "with holes)",
                 field);
        return NULL;
    }
    const char **texts = n ? malloc(n * sizeof *texts) : NULL;
    size_t *lens = n ? malloc(n * sizeof *lens) : NULL;
    if (n && (!texts || !lens)) {
        free(texts);
        free(lens);
        snprintf(err, errcap, "out of memory compiling %s", field);
        return NULL;
    }
    /* The strings stay alive: they are referenced by the table at idx. */
    for (size_t i = 0; i < n; i++) {
        int t = lua_rawgeti(L, idx, (lua_Integer)i + 1);
        if (t != LUA_TSTRING) {
            snprintf(err, errcap, "%s",
                     msg_pushf_got(L, -1, "%s[%I] must be a string", field,
                                   (LUAI_UACINT)(i + 1)));
            lua_pop(L, 2);
            free(texts);
            free(lens);
            return NULL;
        }
        char name[128];
        snprintf(name, sizeof name, "%s[%zu]", field, i + 1);
        texts[i] = strarg_get(L, -1, name, &lens[i]);
        if (!texts[i]) {
            /* the callers add the prefix themselves */
            const char *msg = lua_tostring(L, -1);
            snprintf(err, errcap, "%s",
                     strncmp(msg, "isolation: ", 11) == 0 ? msg + 11 : msg);
            lua_pop(L, 2);
            free(texts);
            free(lens);
            return NULL;
        }
        lua_pop(L, 1);
    }
    char inner[1024];
    hostpat_list *list = hostpat_compile(texts, lens, n, inner, sizeof inner);
    if (!list) {
        /* Name the element that failed. */
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            if (!hostpat_valid(texts[i], lens[i], NULL, 0)) {
                bad = i + 1;
                break;
            }
        if (bad)
            snprintf(err, errcap, "%s[%zu]: %s", field, bad, inner);
        else
            snprintf(err, errcap, "%s: %s", field, inner);
    }
    free(texts);
    free(lens);
    return list;
}

/*
 * host_allowed(patterns, host [, port]) -> boolean, or nil, err when the
 * pattern list itself is invalid. A malformed host or an out-of-range port
 * is simply not allowed. Without a port only port-less patterns can match.
 */
static int l_host_allowed(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t host_len;
    const char *host = luaL_checklstring(L, 2, &host_len);
    /* a boolean API: a host cut short at a NUL is a malformed host */
    bool malformed = memchr(host, '\0', host_len) != NULL;
    lua_Integer port = luaL_opt(L, luaL_checkinteger, 3, 0);
    if (lua_isnoneornil(L, 3))
        port = 0;
    else if (port < 1 || port > 65535) {
        lua_pushboolean(L, 0);
        return 1;
    }
    char err[1200];
    hostpat_list *list = hostpat_from_lua(L, 1, "patterns", err, sizeof err);
    if (!list) {
        luaL_pushfail(L);
        lua_pushfstring(L, "isolation: %s", err);
        return 2;
    }
    char canon[HOST_NAME_CAP];
    struct host_addr addr;
    enum host_kind kind =
        host_parse(host, host_len, canon, sizeof canon, &addr);
    bool ok = !malformed && kind != HOST_INVALID &&
              hostpat_match_port_or_none(list, kind, canon, &addr, (int)port);
    hostpat_free(list);
    lua_pushboolean(L, ok);
    return 1;
}

/* _private_address(ip_text) -> boolean, or nil, err for a non-IP. */
static int l_private_address(lua_State *L)
{
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    struct host_addr addr;
    enum host_kind kind = host_parse(text, len, NULL, 0, &addr);
    if (kind != HOST_IPV4 && kind != HOST_IPV6) {
        luaL_pushfail(L);
        msg_push_quoted(L, text, len);
        lua_pushfstring(L,
                        "isolation: address must be a canonical IPv4 or an "
                        "IPv6 literal (got %s)",
                        lua_tostring(L, -1));
        lua_remove(L, -2);
        return 2;
    }
    lua_pushboolean(L, host_addr_is_private(&addr));
    return 1;
}

void isolation_hostpat_open(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        {"host_allowed", l_host_allowed},
        {"_private_address", l_private_address},
        {NULL, NULL},
    };
    luaL_setfuncs(L, funcs, 0);
    isolation_allowhosts_open(L);
}
