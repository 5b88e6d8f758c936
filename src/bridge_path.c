/* bridge_path.c - placeholder until its issue lands. */
#include "isolation.h"

void isolation_bridge_open(lua_State *L)
{
    (void)L;
}
