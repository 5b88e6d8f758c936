/*
 * strarg.h - how every C entry point takes a string from Lua: with its
 * length, never as a C string. A Lua string may hold NUL bytes; strcmp,
 * strlen or a system call would read "\0bwrap" as "" and "bwrap\0x" as
 * "bwrap", so a value could pass a check as one thing and mean another
 * (a mode "" that turns the sandbox off). A NUL anywhere is refused with
 * one message, naming the field.
 */
#ifndef ISOLATION_STRARG_H
#define ISOLATION_STRARG_H

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * The string at idx (the caller checks that it is a string and says what
 * it expected; anything else is refused as "must be a string") and its
 * length in *len (may be NULL).
 * When it holds a NUL byte: NULL, with the message pushed:
 *   isolation: <field> must not contain a NUL byte, found at byte N
 *   (got "...")
 * On success nothing is pushed, and the result points into the Lua string,
 * which stays valid while the value at idx does.
 */
const char *strarg_get(lua_State *L, int idx, const char *field, size_t *len);

/* s[0..len) equals the C string word, byte for byte, length included. */
bool strarg_is(const char *s, size_t len, const char *word);

#endif
