/*
 * preflight.c - isolation.preflight(opts): what this machine can do.
 *
 * The probes run programs, read kernel settings and start a real proxy and
 * sandbox, which is the Lua glue's trade (isolation.preflight); the C module
 * only gives the function its place in the `isolation` table, so that the
 * contract's `isolation.preflight()` works after `require("isolation")`.
 */
#include "isolation.h"

static int l_preflight(lua_State *L)
{
    lua_settop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "isolation.preflight");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "run");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

void isolation_preflight_open(lua_State *L)
{
    lua_pushcfunction(L, l_preflight);
    lua_setfield(L, -2, "preflight");
}
