/*
 * strarg.c - strings taken from Lua with their length (see strarg.h).
 */
#include "strarg.h"
#include "msg.h"

#include <string.h>

const char *strarg_get(lua_State *L, int idx, const char *field, size_t *len)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TSTRING) {
        /* the callers check the type first; this only keeps a slip safe */
        msg_pushf_got(L, idx, "isolation: %s must be a string", field);
        return NULL;
    }
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    const char *nul = memchr(s, '\0', n);
    if (nul) {
        msg_pushf_got(L, idx,
                      "isolation: %s must not contain a NUL byte, found at "
                      "byte %I",
                      field, (LUAI_UACINT)(nul - s + 1));
        return NULL;
    }
    if (len)
        *len = n;
    return s;
}

bool strarg_is(const char *s, size_t len, const char *word)
{
    return len == strlen(word) && memcmp(s, word, len) == 0;
}
