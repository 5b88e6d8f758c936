/*
 * config.c - isolation.config: checks a config against
 * docs/reference/launch-spec.md's table and builds its normalized form, which
 * keeps only what applies (the image only for docker, the allowlist only for
 * network deny). Shared by the argv builders, so a launch can never run with a
 * config config() would refuse.
 */
#include "launch/config.h"
#include "allow/hostpat.h"
#include "isolation.h"
#include "msg.h"
#include "strarg.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_DOCKER_IMAGE "debian:bookworm-slim"
#define DOCKER_IMAGE_MAX 255

static const char *const config_keys[] = {"mode", "network", "docker_image",
                                          "allow_hosts", NULL};

/* Compared with the length: "bwrap\0x" is not "bwrap". */
static bool one_of(const char *s, size_t len, const char *const *set)
{
    for (; *set; set++)
        if (strarg_is(s, len, *set))
            return true;
    return false;
}

/* Moves the message on top into the error slot; returns 0. */
static int fail_top(lua_State *L, int base)
{
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
    return 0;
}

/* Leaves exactly one value above base: "isolation: <what> (got <value>)". */
static int fail_got(lua_State *L, int base, int validx, const char *what)
{
    msg_pushf_got(L, validx, "isolation: %s", what);
    return fail_top(L, base);
}

static int check_keys(lua_State *L, int base, int idx)
{
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        size_t len = 0;
        const char *k = NULL;
        if (lua_type(L, -1) == LUA_TSTRING &&
            !(k = strarg_get(L, -1, "config key", &len)))
            return fail_top(L, base);
        if (!k || !one_of(k, len, config_keys)) {
            msg_push_got(L, -1);
            lua_pushfstring(L,
                            "isolation: config key %s is unknown (accepted: "
                            "mode, network, docker_image, allow_hosts)",
                            lua_tostring(L, -1));
            lua_replace(L, base + 1);
            lua_settop(L, base + 1);
            return 0;
        }
    }
    return 1;
}

/*
 * Docker reads an argument that starts with "-" as an option, and the image
 * is one argv element, so the reference is held to the characters a
 * reference can contain: [registry[:port]/]name[:tag][@algo:hex].
 */
static bool docker_image_valid(const char *s, size_t len)
{
    static const char extra[] = "._-:/@";
    if (len == 0 || len > DOCKER_IMAGE_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                     (c >= '0' && c <= '9');
        if (i == 0 && !alnum)
            return false;
        if (!alnum && (c == 0 || !strchr(extra, c)))
            return false;
    }
    return true;
}

/* Checks allow_hosts at idx; pushes a new array copy on success. */
static int check_allow_hosts(lua_State *L, int base, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        return fail_got(L, base, idx,
                        "allow_hosts must be an array of host patterns");
    lua_Integer n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        n++;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
            return fail_got(L, base, -1,
                            "allow_hosts must be an array of host patterns, "
                            "not a map; it has the key");
    }
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        int t = lua_rawgeti(L, idx, i);
        if (t == LUA_TNIL) {
            lua_pushfstring(L,
                            "isolation: allow_hosts must be an array of host "
                            "patterns without holes (got nothing at [%I])",
                            (LUAI_UACINT)i);
            lua_replace(L, base + 1);
            lua_settop(L, base + 1);
            return 0;
        }
        if (t != LUA_TSTRING) {
            lua_pushfstring(L, "allow_hosts[%I] must be a host pattern string",
                            (LUAI_UACINT)i);
            return fail_got(L, base, -2, lua_tostring(L, -1));
        }
        char name[48];
        snprintf(name, sizeof name, "allow_hosts[%lld]", (long long)i);
        size_t len;
        const char *pat = strarg_get(L, -1, name, &len);
        if (!pat)
            return fail_top(L, base);
        char err[256] = "";
        if (!hostpat_valid(pat, len, err, sizeof err)) {
            /* hostpat's message quotes the pattern and says what is valid */
            if (err[0]) {
                lua_pushfstring(L, "isolation: allow_hosts[%I]: %s",
                                (LUAI_UACINT)i, err);
            } else {
                msg_push_quoted(L, pat, len);
                lua_pushfstring(L,
                                "isolation: allow_hosts[%I] is not a valid "
                                "host pattern (got %s)",
                                (LUAI_UACINT)i, lua_tostring(L, -1));
            }
            lua_replace(L, base + 1);
            lua_settop(L, base + 1);
            return 0;
        }
        lua_rawseti(L, -2, i);
    }
    return 1;
}

int config_normalize(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    int base = lua_gettop(L);
    bool empty = msg_is_absent(L, idx);
    if (!empty && !lua_istable(L, idx))
        return luaL_typeerror(L, idx, "table or nil");

    lua_settop(L, base + 1); /* the slot an error message ends up in */
    if (!empty && !check_keys(L, base, idx))
        return 0;

    static const char *const modes[] = {"", "bwrap", "docker", "podman", NULL};
    static const char *const networks[] = {"", "allow", "deny", "none", NULL};
    const char *mode = "", *network = "allow", *image = DEFAULT_DOCKER_IMAGE;
    int hosts = 0; /* stack index of the allow_hosts copy */

    if (!empty) {
        lua_pushliteral(L, "mode");
        int v = lua_absindex(L, -1);
        lua_rawget(L, idx);
        size_t len = 0;
        const char *s = NULL;
        if (!msg_is_absent(L, v)) {
            if (lua_type(L, v) == LUA_TSTRING &&
                !(s = strarg_get(L, v, "mode", &len)))
                return fail_top(L, base);
            if (!s || !one_of(s, len, modes))
                return fail_got(L, base, v,
                                "mode must be \"\", \"bwrap\", \"docker\" or "
                                "\"podman\"");
            mode = s;
        }
        lua_pushliteral(L, "network");
        v = lua_absindex(L, -1);
        lua_rawget(L, idx);
        if (!msg_is_absent(L, v)) {
            s = NULL;
            if (lua_type(L, v) == LUA_TSTRING &&
                !(s = strarg_get(L, v, "network", &len)))
                return fail_top(L, base);
            if (!s || !one_of(s, len, networks))
                return fail_got(L, base, v,
                                "network must be \"allow\", \"deny\" or "
                                "\"none\"");
            if (len > 0)
                network = s;
        }
        lua_pushliteral(L, "docker_image");
        v = lua_absindex(L, -1);
        lua_rawget(L, idx);
        if (!msg_is_absent(L, v)) {
            len = 0;
            s = NULL;
            if (lua_type(L, v) == LUA_TSTRING &&
                !(s = strarg_get(L, v, "docker_image", &len)))
                return fail_top(L, base);
            if (!s || (len > 0 && !docker_image_valid(s, len)))
                return fail_got(
                    L, base, v,
                    "docker_image must be an image reference such as "
                    "\"" DEFAULT_DOCKER_IMAGE "\" (letters, digits and "
                    "._-:/@, starting with a letter or digit)");
            if (len > 0)
                image = s;
        }
        lua_pushliteral(L, "allow_hosts");
        v = lua_absindex(L, -1);
        lua_rawget(L, idx);
        if (!msg_is_absent(L, v)) {
            if (!check_allow_hosts(L, base, v))
                return 0;
            hosts = lua_gettop(L);
        }
    }

    if (strcmp(network, "allow") != 0 && mode[0] == '\0') {
        lua_pushfstring(L,
                        "isolation: network \"%s\" needs mode \"bwrap\", "
                        "\"docker\" or \"podman\" (got mode \"\", which "
                        "cannot enforce it)",
                        network);
        lua_replace(L, base + 1);
        lua_settop(L, base + 1);
        return 0;
    }

    lua_createtable(L, 0, 4);
    lua_pushstring(L, mode);
    lua_setfield(L, -2, "mode");
    lua_pushstring(L, network);
    lua_setfield(L, -2, "network");
    if (strcmp(mode, "docker") == 0 || strcmp(mode, "podman") == 0) {
        lua_pushstring(L, image);
        lua_setfield(L, -2, "docker_image");
    }
    if (strcmp(network, "deny") == 0) {
        if (hosts)
            lua_pushvalue(L, hosts);
        else
            lua_newtable(L);
        lua_setfield(L, -2, "allow_hosts");
    }
    lua_replace(L, base + 1);
    lua_settop(L, base + 1);
    return 1;
}

static int l_config(lua_State *L)
{
    if (config_normalize(L, 1))
        return 1;
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

void isolation_config_open(lua_State *L)
{
    lua_pushcfunction(L, l_config);
    lua_setfield(L, -2, "config");
}
