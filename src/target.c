/* target.c - placeholder until its issue lands. */
#include "isolation.h"

void isolation_target_open(lua_State *L)
{
    (void)L;
}
