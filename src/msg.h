/*
 * msg.h - how a rejected value appears in an error message (msg.c), for
 * every file that refuses a Lua value: the launch spec readers, config,
 * target, host patterns and the proxy's options.
 */
#ifndef ISOLATION_MSG_H
#define ISOLATION_MSG_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Pushes a short description of the value at idx for "(got ...)": a string
 * quoted with control bytes escaped and long text cut, a number or boolean
 * with its value, anything else by its type name.
 */
void msg_push_got(lua_State *L, int idx);

/*
 * The one "(got ...)" builder: pushes the text fmt makes (lua_pushfstring's
 * formats: %s %d %I %f %c %p %U) followed by " (got <the value at idx>)",
 * and returns it. Exactly one value is pushed.
 */
const char *msg_pushf_got(lua_State *L, int idx, const char *fmt, ...);

/*
 * The refusal of every launch spec reader: pushes "isolation: <field>
 * <what> (got <the value at idx>)" and returns 0.
 */
int msg_fail_got(lua_State *L, int idx, const char *field, const char *what);

/* nil, none, or JSON null (lua-cjson's null: a NULL light userdata). */
bool msg_is_absent(lua_State *L, int idx);

/* Pushes `s` (len bytes) quoted the same way. */
void msg_push_quoted(lua_State *L, const char *s, size_t len);
void msg_push_quoted_cap(lua_State *L, const char *s, size_t len, size_t cap);

/* Pushes `s` as is when it is plain, else quoted and escaped in full. */
void msg_push_display(lua_State *L, const char *s);

#endif
