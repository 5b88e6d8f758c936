/*
 * bridge_path.c - isolation.BRIDGE: where the built-in bridge program is.
 *
 * Looked up once, when the module loads: first `isolation-bridge` next to
 * isolation.so itself (the build tree: build/isolation.so and
 * build/isolation-bridge), then the path compiled in with
 * -DISOLATION_BRIDGE_PATH="..." (set by `make install`), each only when it
 * is an executable regular file. Otherwise BRIDGE is nil, and a launch
 * with bridge = "builtin" must name bridge_path itself.
 */
#include "isolation.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BRIDGE_NAME "isolation-bridge"

static int is_program(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* Writes <directory of isolation.so>/isolation-bridge into out. */
static int beside_module(char *out, size_t size)
{
    Dl_info info;
    if (dladdr((void *)isolation_bridge_open, &info) == 0 ||
        info.dli_fname == NULL)
        return 0;
    char real[PATH_MAX];
    if (realpath(info.dli_fname, real) == NULL)
        return 0;
    char *slash = strrchr(real, '/');
    if (slash == NULL)
        return 0;
    slash[1] = '\0';
    if (strlen(real) + sizeof BRIDGE_NAME > size)
        return 0;
    strcpy(out, real);
    strcat(out, BRIDGE_NAME);
    return 1;
}

void isolation_bridge_open(lua_State *L)
{
    char path[PATH_MAX];
    if (beside_module(path, sizeof path) && is_program(path)) {
        lua_pushstring(L, path);
        lua_setfield(L, -2, "BRIDGE");
        return;
    }
#ifdef ISOLATION_BRIDGE_PATH
    if (is_program(ISOLATION_BRIDGE_PATH)) {
        lua_pushliteral(L, ISOLATION_BRIDGE_PATH);
        lua_setfield(L, -2, "BRIDGE");
    }
#endif
}
