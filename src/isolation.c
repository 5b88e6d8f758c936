/*
 * isolation.c - luaopen_isolation: a thin table of functions gathered from
 * one file per concept.
 */
#include "isolation.h"

/* The one symbol the module exports: everything else is built with
 * -fvisibility=hidden (Makefile), so that no internal function can collide
 * with another library's in the process or be called from outside. */
__attribute__((visibility("default"))) int luaopen_isolation(lua_State *L);

int luaopen_isolation(lua_State *L)
{
    lua_newtable(L);
    lua_pushliteral(L, ISOLATION_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushliteral(L, ISOLATION_SANDBOX_PROXY_SOCKET);
    lua_setfield(L, -2, "SANDBOX_PROXY_SOCKET");
    isolation_hostpat_open(L);
    isolation_config_open(L);
    isolation_launch_open(L);
    isolation_target_open(L);
    isolation_proxy_open(L);
    isolation_bridge_open(L);
    isolation_seccomp_open(L);
    isolation_selftest_open(L);
    isolation_preflight_open(L);
    isolation_protect_open(L);
    isolation_ssh_open(L);
    isolation_orphans_open(L);
    return 1;
}
