/*
 * launch_docker.c - the docker run command line. Docker itself orders bind
 * mounts parent-first, so the order here is only the one a reader expects.
 * Files the agent writes in the workdir must belong to the launching user,
 * not root: --user takes the fixed token $(id -u):$(id -g), which the
 * target's shell computes (wrap() leaves exactly that token expandable);
 * podman (rootless) maps the user's own ids with --userns=keep-id instead.
 *
 * Network deny runs bwrap's deny script in the container: --network none,
 * the proxy's socket and the built-in bridge (a static program: it needs
 * no loader or libc from the image) mounted at fixed paths, the bridge
 * started on the container's loopback before the command. Network none:
 * --network none and nothing mounted.
 */
#include "isolation.h"
#include "launch/launch.h"

#include <lauxlib.h>

/* Pushes "<path>:<path>[:ro]" with $HOME markers on both sides. */
static void push_volume(lua_State *L, const char *path, bool ro)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    launch_push_path(L, path);
    luaL_addvalue(&b);
    luaL_addchar(&b, ':');
    launch_push_path(L, path);
    luaL_addvalue(&b);
    if (ro)
        luaL_addstring(&b, ":ro");
    luaL_pushresult(&b);
}

static void push_docker_run(lua_State *L, const struct launch_spec *s)
{
    struct argv_buf b;
    argv_start(&b, L);
    argv_add(&b, s->podman ? "podman" : "docker");
    argv_add(&b, "run");
    argv_add(&b, "--rm");
    argv_add(&b, "-i");
    if (s->tty)
        argv_add(&b, "-t");
    /*
     * The command is not PID 1: the kernel drops a signal to PID 1 that it
     * has no handler for, so `docker run` would pass SIGTERM or SIGINT on to
     * a command that never sees it. The engine's init (docker-init / tini,
     * podman's catatonit) forwards signals and reaps orphans.
     */
    argv_add(&b, "--init");
    if (s->podman) {
        /* rootless: the user's own uid and gid inside, mapped to the user */
        argv_add(&b, "--userns=keep-id");
    } else {
        argv_add(&b, "--user");
        lua_pushlstring(L, TOKEN_USER, 2);
        argv_add_top(&b);
    }
    /* no capability, and no setuid program in the image regains one */
    argv_add(&b, "--cap-drop");
    argv_add(&b, "ALL");
    argv_add(&b, "--security-opt");
    argv_add(&b, "no-new-privileges");
    launch_gpu_docker(&b, s);
    /* deny and none: no interface but the container's own loopback */
    if (s->deny || s->none) {
        argv_add(&b, "--network");
        argv_add(&b, "none");
    }
    if (s->deny) {
        /* the only way out: the proxy's socket, through the bridge; read-only,
         * as under bwrap: connect() needs no write to the mount, and the
         * container's user may own the socket file (root, or the proxy's
         * user), so a writable bind would let it chmod the host's socket
         * open to every local user, or shut */
        argv_add(&b, "-v");
        lua_pushfstring(L, "%s:" ISOLATION_SANDBOX_PROXY_SOCKET ":ro",
                        s->proxy_socket);
        argv_add_top(&b);
        argv_add(&b, "-v");
        lua_pushfstring(L, "%s:" ISOLATION_CONTAINER_BRIDGE ":ro",
                        s->bridge_path);
        argv_add_top(&b);
    }
    argv_add(&b, "-v");
    push_volume(L, s->workdir, false);
    argv_add_top(&b);
    argv_add(&b, "-w");
    argv_add(&b, s->workdir);
    for (const char *const *a = launch_agent_paths(s->agent); *a; a++) {
        argv_add(&b, "-v");
        push_volume(L, *a, s->agent_config_ro);
        argv_add_top(&b);
    }
    argv_add(&b, "-e");
    lua_pushlstring(L, "HOME=" TOKEN_HOME, 7);
    argv_add_top(&b);
    launch_env_docker(&b, s);
    for (size_t i = 0; i < s->nbinds; i++) {
        argv_add(&b, "-v");
        push_volume(L, s->binds[i], false);
        argv_add_top(&b);
    }
    for (size_t i = 0; i < s->nro_binds; i++) {
        argv_add(&b, "-v");
        push_volume(L, s->ro_binds[i], true);
        argv_add_top(&b);
    }
    for (size_t i = 0; i < s->ntools; i++) {
        argv_add(&b, "-v");
        push_volume(L, s->tools[i], true);
        argv_add_top(&b);
    }
    if (s->ca_cert) {
        argv_add(&b, "-v");
        push_volume(L, s->ca_cert, true);
        argv_add_top(&b);
        for (const char *const *e = launch_ca_env; *e; e++) {
            argv_add(&b, "-e");
            lua_pushfstring(L, "%s=%s", *e, s->ca_cert);
            argv_add_top(&b);
        }
    }
    launch_docker_protect(&b, s);
    launch_limits_add_docker(&b, s);
    argv_add(&b, s->docker_image);
    launch_limits_add_docker_time(&b, s);
    argv_add(&b, "bash");
    argv_add(&b, "-c");
    argv_add(&b, "--"); /* a command starting with - or + is no option */
    if (!s->deny) {
        argv_add(&b, s->command);
        return;
    }
    /* bwrap's deny script; the command and the bridge are $1 and $2 */
    launch_push_deny_script(L, s);
    argv_add_top(&b);
    argv_add(&b, "bash");
    argv_add(&b, s->command);
    argv_add(&b, ISOLATION_CONTAINER_BRIDGE);
}

/* docker's (or podman's) own line; argv() and wrap() put the reaper in
   front of it (launch_push_for_mode) */
void launch_push_docker(lua_State *L, const struct launch_spec *s)
{
    push_docker_run(L, s);
}
