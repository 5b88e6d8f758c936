/*
 * launch.h - what config.c and the launch*.c files share: how a bad value is
 * shown in an error message, and the launch spec read into C.
 */
#ifndef ISOLATION_LAUNCH_H
#define ISOLATION_LAUNCH_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Pushes a short description of the value at idx for "(got ...)": a string
 * quoted with control bytes escaped and long text cut, a number or boolean
 * with its value, anything else by its type name.
 */
void launch_push_got(lua_State *L, int idx);

/* Pushes `s` (len bytes) quoted the same way. */
void launch_push_quoted(lua_State *L, const char *s, size_t len);

#endif
