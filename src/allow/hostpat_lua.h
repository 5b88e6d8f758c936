/*
 * hostpat_lua.h - host patterns read from Lua (hostpat_lua.c), for the
 * files that take an allowlist from a Lua table.
 */
#ifndef ISOLATION_HOSTPAT_LUA_H
#define ISOLATION_HOSTPAT_LUA_H

#include <lua.h>

#include "allow/hostpat.h"

/*
 * Compiles the Lua array at idx (a table of strings; a map, a hole or a
 * non-string element is an error naming `field`). NULL with err on failure;
 * never raises.
 */
hostpat_list *hostpat_from_lua(lua_State *L, int idx, const char *field,
                               char *err, size_t errcap);

/* Registers default_allow_hosts (allowhosts.c) in the table at the top of
 * the stack. */
void isolation_allowhosts_open(lua_State *L);

#endif
