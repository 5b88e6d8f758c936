/* launch.c - placeholder until its issue lands. */
#include "isolation.h"

void isolation_launch_open(lua_State *L)
{
    (void)L;
}
