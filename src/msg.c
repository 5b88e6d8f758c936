/*
 * msg.c - how a rejected value appears in an error message.
 * Messages end up in logs and terminals: a value is quoted, control bytes are
 * escaped (a config must not be able to paint the user's terminal), and long
 * text is cut so one message stays one line.
 */
#include "msg.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define QUOTED_CAP 96

void msg_push_quoted(lua_State *L, const char *s, size_t len)
{
    msg_push_quoted_cap(L, s, len, QUOTED_CAP);
}

void msg_push_quoted_cap(lua_State *L, const char *s, size_t len, size_t cap)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '"');
    size_t shown = len > cap ? cap : len;
    for (size_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"':
            luaL_addstring(&b, "\\\"");
            break;
        case '\\':
            luaL_addstring(&b, "\\\\");
            break;
        case '\n':
            luaL_addstring(&b, "\\n");
            break;
        case '\t':
            luaL_addstring(&b, "\\t");
            break;
        default:
            if (c < 0x20 || c == 0x7f) {
                snprintf(esc, sizeof esc, "\\x%02x", c);
                luaL_addstring(&b, esc);
            } else {
                luaL_addchar(&b, (char)c);
            }
        }
    }
    luaL_addchar(&b, '"');
    if (shown < len)
        luaL_addstring(&b, "...");
    luaL_pushresult(&b);
}

void msg_push_got(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        msg_push_quoted(L, s, len);
        break;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            lua_pushfstring(L, "number %I", (LUAI_UACINT)lua_tointeger(L, idx));
        else
            lua_pushfstring(L, "number %f",
                            (LUAI_UACNUMBER)lua_tonumber(L, idx));
        break;
    case LUA_TBOOLEAN:
        lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TNIL:
    case LUA_TNONE:
        lua_pushliteral(L, "nil");
        break;
    default:
        lua_pushstring(L, luaL_typename(L, idx));
    }
}

void msg_push_display(lua_State *L, const char *s)
{
    size_t len = strlen(s);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == '"' || c == '\\') {
            msg_push_quoted_cap(L, s, len, len);
            return;
        }
    }
    lua_pushlstring(L, s, len);
}

const char *msg_pushf_got(lua_State *L, int idx, const char *fmt, ...)
{
    idx = lua_absindex(L, idx);
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    msg_push_got(L, idx);
    lua_pushfstring(L, "%s (got %s)", lua_tostring(L, -2), lua_tostring(L, -1));
    lua_replace(L, -3);
    lua_pop(L, 1);
    return lua_tostring(L, -1);
}

int msg_fail_got(lua_State *L, int idx, const char *field, const char *what)
{
    msg_pushf_got(L, idx, "isolation: %s %s", field, what);
    return 0;
}

/* JSON null as lua-cjson decodes it: a NULL light userdata. */
static bool is_json_null(lua_State *L, int idx)
{
    return lua_type(L, idx) == LUA_TLIGHTUSERDATA &&
           lua_touserdata(L, idx) == NULL;
}

bool msg_is_absent(lua_State *L, int idx)
{
    return lua_isnoneornil(L, idx) || is_json_null(L, idx);
}
