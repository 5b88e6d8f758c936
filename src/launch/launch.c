/*
 * launch.c - isolation.bwrap_argv, docker_argv, argv, wrap and dry_run. All
 * pure: each reads only its spec (and isolation.BRIDGE, a constant of the
 * build), returns new values and changes nothing. Each closure holds the
 * module table as its upvalue.
 */
#include "launch/launch.h"
#include "isolation.h"

typedef void (*builder)(lua_State *L, const struct launch_spec *s);

static int fail(lua_State *L)
{
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

/*
 * bwrap_argv and docker_argv build their own tier whatever the config's
 * mode; the config still gives the network and the image.
 */
static int build(lua_State *L, builder push, int forced)
{
    struct launch_spec s;
    if (!launch_spec_read(L, 1, lua_upvalueindex(1), forced, &s))
        return fail(L);
    push(L, &s);
    launch_argv_publish(L, -1);
    return 1;
}

static int l_bwrap_argv(lua_State *L)
{
    return build(L, launch_push_bwrap, MODE_BWRAP);
}

static int l_docker_argv(lua_State *L)
{
    return build(L, launch_push_docker, MODE_DOCKER);
}

static int l_argv(lua_State *L)
{
    return build(L, launch_push_for_mode, -1);
}

static int l_wrap(lua_State *L)
{
    struct launch_spec s;
    if (!launch_spec_read(L, 1, lua_upvalueindex(1), -1, &s))
        return fail(L);
    launch_push_for_mode(L, &s);
    launch_push_wrapped(L, -1, &s);
    return 1;
}

static int l_dry_run(lua_State *L)
{
    struct launch_spec s;
    if (!launch_spec_read(L, 1, lua_upvalueindex(1), -1, &s))
        return fail(L);
    launch_push_dry_run(L, &s);
    return 1;
}

static const luaL_Reg launch_functions[] = {{"bwrap_argv", l_bwrap_argv},
                                            {"docker_argv", l_docker_argv},
                                            {"argv", l_argv},
                                            {"wrap", l_wrap},
                                            {"dry_run", l_dry_run},
                                            {"gpu_devices", launch_gpu_devices},
                                            {NULL, NULL}};

void isolation_launch_open(lua_State *L)
{
    lua_pushvalue(L, -1);
    luaL_setfuncs(L, launch_functions, 1);
    launch_env_open(L);
}
