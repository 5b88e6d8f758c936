/*
 * target.c - validate_for_target(config, target): which isolation a launch
 * target can honestly provide.
 *
 * Three rules, checked in this order, each refusing with its reason and
 * what would work instead:
 *   1. a sandbox target's cloned container already is the isolation;
 *   2. network deny needs a local target (the proxy's unix socket exists
 *      only on this machine), or an ssh tunnel target ({kind = "ssh",
 *      tunnel = true, ...}) whose connection forwards that socket;
 *   3. bwrap cannot count on creating namespaces inside a pct container.
 */
#include "isolation.h"
#include "launch/config.h"
#include "launch/launch.h"
#include "msg.h"
#include "strarg.h"

#include <stdbool.h>
#include <string.h>

static const char *const kinds[] = {"local", "ssh", "pct", "sandbox", NULL};

/* The target's kind, or NULL with an error message pushed. */
static const char *target_kind(lua_State *L, int idx)
{
    int type = lua_type(L, idx);
    if (type != LUA_TSTRING && type != LUA_TTABLE) {
        msg_pushf_got(L, idx,
                      "isolation: target must be \"local\", \"ssh\", \"pct\", "
                      "\"sandbox\" or a table with kind");
        return NULL;
    }
    const char *field = type == LUA_TTABLE ? "target.kind" : "target";
    if (type == LUA_TTABLE)
        lua_getfield(L, idx, "kind");
    else
        lua_pushvalue(L, idx);
    /* The string stays alive in the target (or its table) once popped. */
    size_t len = 0;
    const char *kind = NULL;
    if (lua_type(L, -1) == LUA_TSTRING &&
        !(kind = strarg_get(L, -1, field, &len)))
        return NULL;
    for (const char *const *k = kinds; kind && *k; k++) {
        if (strarg_is(kind, len, *k)) {
            lua_pop(L, 1);
            return *k;
        }
    }
    msg_pushf_got(L, -1,
                  "isolation: %s must be \"local\", \"ssh\", \"pct\" or "
                  "\"sandbox\"",
                  field);
    return NULL;
}

static const char *field_string(lua_State *L, int idx, const char *field)
{
    lua_getfield(L, idx, field);
    const char *s = lua_tostring(L, -1);
    lua_pop(L, 1); /* kept alive by the normalized config */
    return s ? s : "";
}

static int refuse(lua_State *L)
{
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
}

static int l_validate_for_target(lua_State *L)
{
    const char *kind = target_kind(L, 2);
    if (!kind)
        return refuse(L);
    if (!config_normalize(L, 1))
        return refuse(L);
    int cfg = lua_gettop(L);
    const char *mode = field_string(L, cfg, "mode");
    bool deny = strcmp(field_string(L, cfg, "network"), "deny") == 0;
    bool local = strcmp(kind, "local") == 0;
    bool tunnel = false;
    if (strcmp(kind, "ssh") == 0 && lua_istable(L, 2)) {
        lua_getfield(L, 2, "tunnel");
        tunnel = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (tunnel && !launch_ssh_check_target(L, 2))
            return refuse(L);
    }

    if (mode[0] == '\0' || local) {
        lua_pushboolean(L, 1);
        return 1;
    }
    if (strcmp(kind, "sandbox") == 0) {
        lua_pushfstring(L,
                        "isolation: mode \"%s\" is refused on a sandbox "
                        "target: the sandbox target's cloned container "
                        "already is the isolation; use mode \"\" on target "
                        "\"sandbox\", or a local target for mode \"%s\"",
                        mode, mode);
        return refuse(L);
    }
    bool bwrap = strcmp(mode, "bwrap") == 0;
    bool pct = strcmp(kind, "pct") == 0;
    if (deny && !tunnel) {
        lua_pushfstring(
            L,
            "isolation: network \"deny\" needs a local target: the proxy's "
            "socket exists only on this machine (target \"%s\", mode \"%s\"); "
            "%s",
            kind, mode,
            bwrap && pct ? "use a local target, or mode \"docker\" or \"\" "
                           "with network \"allow\" on target \"pct\""
                         : "use network \"allow\" or a local target, or an "
                           "ssh target with tunnel = true");
        return refuse(L);
    }
    if (bwrap && pct) {
        lua_pushliteral(L,
                        "isolation: mode \"bwrap\" is refused on a pct "
                        "target: bwrap cannot count on creating namespaces "
                        "inside a pct container (target \"pct\"); use mode "
                        "\"docker\" or \"\" on target \"pct\", or a local or "
                        "ssh target for bwrap");
        return refuse(L);
    }
    lua_pushboolean(L, 1);
    return 1;
}

void isolation_target_open(lua_State *L)
{
    lua_pushcfunction(L, l_validate_for_target);
    lua_setfield(L, -2, "validate_for_target");
}
