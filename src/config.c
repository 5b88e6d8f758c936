/* config.c - placeholder until its issue lands. */
#include "isolation.h"

void isolation_config_open(lua_State *L)
{
    (void)L;
}

#include "config.h"

int config_normalize(lua_State *L, int idx)
{
    (void)idx;
    lua_pushliteral(L, "isolation: config is not implemented yet");
    return 0;
}
