/*
 * selftest.c - proof that a sanitizer build really checks: the sanitizer
 * spec calls _asan_probe(9) in a child process and expects AddressSanitizer
 * to report the overflow. Only sanitizer builds export it.
 */
#include "isolation.h"

#ifdef ISOLATION_SANITIZER_PROBE
#include <stdlib.h>
#include <string.h>

static int selftest_overflow(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    volatile size_t size = 8; /* hidden from UBSan's object-size check */
    volatile char *p = malloc(size);
    if (p == NULL)
        return luaL_error(L, "out of memory");
    for (lua_Integer i = 0; i < n; i++)
        p[i] = (char)i; /* n > 8 overflows on purpose */
    free((void *)p);
    lua_pushinteger(L, n);
    return 1;
}
#endif

void isolation_selftest_open(lua_State *L)
{
#ifdef ISOLATION_SANITIZER_PROBE
    lua_pushcfunction(L, selftest_overflow);
    lua_setfield(L, -2, "_asan_probe");
#else
    (void)L;
#endif
}
