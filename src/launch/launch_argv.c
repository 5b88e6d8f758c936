/*
 * launch_argv.c - the internal argv the builders produce, the public form
 * bwrap_argv & co. return (markers replaced by their `$HOME` text), and the
 * plain mode-"" launch.
 */
#include "launch/launch.h"

#include <lauxlib.h>
#include <string.h>

void argv_start(struct argv_buf *b, lua_State *L)
{
    b->L = L;
    lua_newtable(L);
    b->t = lua_gettop(L);
    b->n = 0;
}

void argv_add(struct argv_buf *b, const char *s)
{
    lua_pushstring(b->L, s);
    lua_rawseti(b->L, b->t, ++b->n);
}

void argv_add_top(struct argv_buf *b)
{
    lua_rawseti(b->L, b->t, ++b->n);
}

void launch_push_path(lua_State *L, const char *path)
{
    if (strncmp(path, TOKEN_HOME_TEXT, 5) == 0 &&
        (path[5] == '/' || path[5] == '\0')) {
        luaL_Buffer buf;
        luaL_buffinit(L, &buf);
        luaL_addlstring(&buf, TOKEN_HOME, 2);
        luaL_addstring(&buf, path + 5);
        luaL_pushresult(&buf);
    } else {
        lua_pushstring(L, path);
    }
}

void argv_add_path(struct argv_buf *b, const char *path)
{
    launch_push_path(b->L, path);
    argv_add_top(b);
}

void launch_argv_publish(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    for (lua_Integer i = 1; i <= n; i++) {
        size_t len;
        lua_rawgeti(L, idx, i);
        const char *s = lua_tolstring(L, -1, &len);
        if (!memchr(s, '\0', len)) {
            lua_pop(L, 1);
            continue;
        }
        luaL_Buffer buf;
        luaL_buffinit(L, &buf);
        for (size_t k = 0; k < len; k++) {
            if (s[k] != '\0') {
                luaL_addchar(&buf, s[k]);
                continue;
            }
            k++;
            if (s[k] == TOKEN_ENV_PASS) { /* the rest is the name */
                const char *name = s + k + 1;
                lua_pushfstring(L, "${%s+%s=$%s}", name, name, name);
                luaL_addvalue(&buf);
                break;
            }
            luaL_addstring(&buf,
                           s[k] == 'H' ? TOKEN_HOME_TEXT : TOKEN_USER_TEXT);
        }
        luaL_pushresult(&buf);
        lua_rawseti(L, idx, i);
        lua_pop(L, 1);
    }
}

void launch_push_plain(lua_State *L, const struct launch_spec *s)
{
    struct argv_buf b;
    argv_start(&b, L);
    argv_add(&b, "bash");
    argv_add(&b, "-c");
    argv_add(&b, "--"); /* a command starting with - or + is no option */
    argv_add(&b, s->command);
}

void launch_push_for_mode(lua_State *L, const struct launch_spec *s)
{
    switch (s->mode) {
    case MODE_BWRAP:
        launch_push_bwrap_env(L, s);
        /* what enforces the limits runs in front of env -i and bwrap: a
           systemd user scope needs the launching environment to reach its
           manager, and bwrap (whose pid 1 inside keeps the environment it
           was started with) must start clean */
        launch_limits_prepend(L, -1, s);
        /* outermost: what the limits' shells leave, and the sandbox's
           init once bwrap's monitor is gone, come back to the reaper */
        if (s->reap_path)
            launch_reap_prepend(L, -1, s);
        break;
    case MODE_DOCKER:
        launch_push_docker(L, s);
        /* the container ends with the line: the reaper removes it through
           the engine (--container), whatever its processes did to its
           init, and enforces limits.time from the host (--time) */
        if (s->reap_path)
            launch_reap_prepend(L, -1, s);
        break;
    default:
        launch_push_plain(L, s);
    }
}

/* The reaper's words in front of the internal argv at argv_idx. */
void launch_reap_prepend(lua_State *L, int argv_idx,
                         const struct launch_spec *s)
{
    argv_idx = lua_absindex(L, argv_idx);
    bool docker = s->mode == MODE_DOCKER;
    bool timed = docker && s->limits.time;
    lua_Integer n = (lua_Integer)lua_rawlen(L, argv_idx);
    /* a line that starts with env(1) (env -i NAME=value... bwrap ...):
       the reaper sets the environment itself (--env), and the line saves
       env's exec, one of the few costs a launch has beyond bwrap's */
    lua_rawgeti(L, argv_idx, 1);
    const char *first = lua_tostring(L, -1);
    bool env = !docker && first && strcmp(first, "env") == 0;
    lua_pop(L, 1);
    if (env) {
        for (lua_Integer i = 1; i < n; i++) {
            lua_rawgeti(L, argv_idx, i + 1);
            lua_rawseti(L, argv_idx, i);
        }
        lua_pushnil(L);
        lua_rawseti(L, argv_idx, n--);
    }
    /* BRIDGE --reap GRACE [--time SECONDS] [--container | --env] -- */
    const lua_Integer np = 4 + (docker || env ? 1 : 0) + (timed ? 2 : 0);
    for (lua_Integer i = n; i >= 1; i--) {
        lua_rawgeti(L, argv_idx, i);
        lua_rawseti(L, argv_idx, i + np);
    }
    lua_Integer k = 1;
    launch_push_path(L, s->reap_path);
    lua_rawseti(L, argv_idx, k++);
    lua_pushliteral(L, "--reap");
    lua_rawseti(L, argv_idx, k++);
    lua_pushfstring(L, "%d", (int)LIMITS_TIME_GRACE);
    lua_rawseti(L, argv_idx, k++);
    if (timed) {
        lua_pushliteral(L, "--time");
        lua_rawseti(L, argv_idx, k++);
        lua_pushfstring(L, "%I", (LUAI_UACINT)s->limits.time);
        lua_rawseti(L, argv_idx, k++);
    }
    if (docker || env) {
        lua_pushstring(L, docker ? "--container" : "--env");
        lua_rawseti(L, argv_idx, k++);
    }
    lua_pushliteral(L, "--");
    lua_rawseti(L, argv_idx, k);
}
