/*
 * launch_dryrun.c - what a launch would do, for a person to read before
 * trusting it: every mount, the namespaces, the network route, the
 * environment, the command. Paths with spaces or control bytes are shown
 * quoted and escaped so that a crafted path cannot forge a line.
 */
#include "isolation.h"
#include "launch/launch.h"

#include <lauxlib.h>
#include <string.h>

/* Appends the value on top of the stack (the one allowed extra element). */
#define ADD_TOP(b) luaL_addvalue(b)

static void add_display(luaL_Buffer *b, lua_State *L, const char *s)
{
    msg_push_display(L, s);
    ADD_TOP(b);
}

/* Padded to one width, so that the host paths line up. */
static const char *kind_name(enum mount_kind kind)
{
    switch (kind) {
    case MOUNT_RO:
    case MOUNT_RO_TRY:
        return "read-only  ";
    case MOUNT_RW:
    case MOUNT_RW_TRY:
        return "read-write ";
    case MOUNT_DEV:
        return "dev        ";
    case MOUNT_PROC:
        return "proc       ";
    default:
        return "tmpfs      ";
    }
}

static void add_command(luaL_Buffer *b, lua_State *L, const char *command)
{
    luaL_addstring(b, "command: bash -c ");
    add_display(b, L, command);
    luaL_addchar(b, '\n');
}

static void add_ca_env(luaL_Buffer *b, lua_State *L, const char *ca)
{
    for (const char *const *e = launch_ca_env; *e; e++) {
        luaL_addstring(b, "  ");
        luaL_addstring(b, *e);
        luaL_addchar(b, '=');
        add_display(b, L, ca);
        luaL_addchar(b, '\n');
    }
}

static void dry_run_bwrap(luaL_Buffer *b, lua_State *L,
                          const struct launch_spec *s)
{
    struct mount mounts[LAUNCH_MAX_MOUNTS];
    size_t n = launch_bwrap_mounts(s, mounts);
    luaL_addstring(b, "mounts, in the order bwrap applies them "
                      "(host path -> sandbox path):\n");
    for (size_t i = 0; i < n; i++) {
        const struct mount *m = &mounts[i];
        luaL_addstring(b, "  ");
        luaL_addstring(b, kind_name(m->kind));
        if (m->kind == MOUNT_DEV || m->kind == MOUNT_PROC ||
            m->kind == MOUNT_TMPFS) {
            luaL_addstring(b, "(new) -> ");
            add_display(b, L, m->path);
        } else {
            add_display(b, L, m->path);
            luaL_addstring(b, " -> ");
            add_display(b, L, m->sandbox_path ? m->sandbox_path : m->path);
        }
        luaL_addstring(b, "  (");
        luaL_addstring(b, m->why);
        luaL_addstring(b, ")\n");
    }
    luaL_addstring(b, "  nothing else: not /, /run, /var/run, the host's "
                      "/tmp, nor the rest of $HOME\n");
    launch_gpu_describe(b, s);
    luaL_addstring(b, "start directory: ");
    add_display(b, L, s->workdir);
    luaL_addchar(b, '\n');
    launch_protect_describe(b, L, s);
    luaL_addstring(b, s->deny || s->none
                          ? "namespaces: new mount, pid, ipc, uts, net"
                          : "namespaces: new mount, pid, ipc, uts; "
                            "the host's network");
    luaL_addstring(b, ", user (the caller's uid maps to itself; none can "
                      "be made inside: --disable-userns); dies with its "
                      "parent\n");
    luaL_addstring(b, "privileges: no capabilities (--cap-drop ALL; the "
                      "bounding set is empty too, in the user namespace), no "
                      "new privileges\n");
    if (s->seccomp_file) {
        luaL_addstring(b, "seccomp: the program in ");
        add_display(b, L, s->seccomp_file);
        lua_pushfstring(L,
                        ", opened on descriptor %d by the wrap() line "
                        "(--seccomp %d; bwrap reads and closes it; a caller "
                        "running argv() opens it there itself), applied to "
                        "every process in the sandbox\n",
                        s->seccomp_fd, s->seccomp_fd);
        ADD_TOP(b);
    } else if (s->seccomp_fd >= 0) {
        lua_pushfstring(L,
                        "seccomp: a program read from descriptor %d "
                        "(--seccomp %d; bwrap closes it), applied to every "
                        "process in the sandbox\n",
                        s->seccomp_fd, s->seccomp_fd);
        ADD_TOP(b);
    } else {
        luaL_addstring(b, "seccomp: none: a process in the sandbox can type "
                          "into the terminal (TIOCSTI) where the kernel "
                          "allows it; see seccomp_fd and "
                          "seccomp_file\n");
    }
    if (s->deny) {
        lua_pushfstring(L,
                        "network: deny: only 127.0.0.1:%d (HTTP) and "
                        "127.0.0.1:%d (SOCKS5) -> %s -> "
                        "" ISOLATION_SANDBOX_PROXY_SOCKET " -> host ",
                        s->proxy_port, s->socks_port,
                        s->bridge == BRIDGE_BUILTIN ? "built-in bridge"
                        : s->bridge == BRIDGE_PASS
                            ? "pass (the listener handed to the proxy)"
                            : "socat");
        ADD_TOP(b);
        add_display(b, L, s->proxy_socket);
        luaL_addstring(b, " (the allowlist proxy); no other route\n");
    } else if (s->none) {
        luaL_addstring(b, "network: none: an empty network namespace "
                          "(--unshare-net), no proxy socket, no bridge: no "
                          "route at all\n");
    } else {
        luaL_addstring(b, "network: allow: the host's network, unchanged "
                          "(same reach as an unisolated launch)\n");
    }
    launch_env_describe(b, s);
    if (!s->deny && !s->ca_cert)
        return;
    luaL_addstring(b, "  set by the sandbox:\n");
    if (s->deny) {
        lua_pushfstring(L,
                        "  HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy="
                        "http://127.0.0.1:%d\n  ALL_PROXY, all_proxy="
                        "socks5h://127.0.0.1:%d (non-HTTP TCP)\n"
                        "  NO_PROXY, no_proxy= (empty)\n"
                        "  NODE_USE_ENV_PROXY=1 (Node's fetch uses the proxy "
                        "only with it)\n",
                        s->proxy_port, s->socks_port);
        ADD_TOP(b);
    }
    if (s->ca_cert)
        add_ca_env(b, L, s->ca_cert);
}

static void add_volume(luaL_Buffer *b, lua_State *L, const char *kind,
                       const char *path, const char *why)
{
    luaL_addstring(b, "  ");
    luaL_addstring(b, kind);
    add_display(b, L, path);
    luaL_addstring(b, " -> ");
    add_display(b, L, path);
    luaL_addstring(b, "  (");
    luaL_addstring(b, why);
    luaL_addstring(b, ")\n");
}

static void dry_run_docker(luaL_Buffer *b, lua_State *L,
                           const struct launch_spec *s)
{
    luaL_addstring(b, "image: ");
    add_display(b, L, s->docker_image);
    luaL_addstring(b, "\nmounts (host path -> container path):\n");
    add_volume(b, L, "read-write ", s->workdir, "workdir, start directory");
    for (const char *const *a = launch_agent_paths(s->agent); *a; a++)
        add_volume(b, L, s->agent_config_ro ? "read-only  " : "read-write ", *a,
                   "agent config; docker creates a missing one as a "
                   "directory");
    for (size_t i = 0; i < s->nbinds; i++)
        add_volume(b, L, "read-write ", s->binds[i], "binds");
    for (size_t i = 0; i < s->nro_binds; i++)
        add_volume(b, L, "read-only  ", s->ro_binds[i], "ro_binds");
    for (size_t i = 0; i < s->ntools; i++)
        add_volume(b, L, "read-only  ", s->tools[i], "tools");
    if (s->ca_cert)
        add_volume(b, L, "read-only  ", s->ca_cert, "ca_cert, single file");
    for (size_t i = 0; i < s->nprotect; i++)
        add_volume(b, L, "read-only  ", s->protect_path[i], "protect");
    luaL_addstring(b, "  the rest is the image's own filesystem\n");
    launch_gpu_describe(b, s);
    launch_protect_describe(b, L, s);
    if (s->deny) {
        luaL_addstring(b, "  read-only  ");
        add_display(b, L, s->proxy_socket);
        luaL_addstring(b, " -> " ISOLATION_SANDBOX_PROXY_SOCKET
                          "  (proxy socket, single file: the only way out)\n"
                          "  read-only  ");
        add_display(b, L, s->bridge_path);
        luaL_addstring(b, " -> " ISOLATION_CONTAINER_BRIDGE
                          "  (built-in bridge program, static)\n");
    }
    luaL_addstring(b, s->podman
                          ? "user: the launching user's uid and gid "
                            "(--userns=keep-id, rootless podman)\n"
                          : "user: $(id -u):$(id -g) (the launching user, as "
                            "computed by the target's shell)\n");
    luaL_addstring(b, s->podman ? "namespaces: podman's own container "
                                  "(user, mount, pid, ipc, uts, net)\n"
                                : "namespaces: docker's own container (mount, "
                                  "pid, ipc, uts, net)\n");
    luaL_addstring(b, s->reap_path
                          ? "end: the bridge's reaper on the host (--reap "
                            "--container): when the line ends, or 5 s after "
                            "a SIGTERM, SIGINT, SIGHUP or SIGQUIT it passes "
                            "on to the client, the engine kills and removes "
                            "the container (kill --signal=KILL, rm -f), "
                            "whatever its processes did to its init; its "
                            "watchdog (isolation-watch, a session of its "
                            "own) does the same when the reaper is "
                            "SIGKILLed\n"
                          : "end: no reaper (reap = false): the container "
                            "ends with its init (--rm); killing the client "
                            "alone leaves it running\n");
    luaL_addstring(b, "privileges: no capabilities (--cap-drop ALL), no new "
                      "privileges\n");
    if (s->deny) {
        lua_pushfstring(L,
                        "network: deny: --network none (the container's "
                        "loopback only); only 127.0.0.1:%d (HTTP) and "
                        "127.0.0.1:%d (SOCKS5) -> %s -> "
                        "" ISOLATION_SANDBOX_PROXY_SOCKET " -> host ",
                        s->proxy_port, s->socks_port,
                        s->bridge == BRIDGE_PASS
                            ? "pass (the listener handed to the proxy)"
                            : "built-in bridge");
        ADD_TOP(b);
        add_display(b, L, s->proxy_socket);
        luaL_addstring(b, " (the allowlist proxy); no other route\n");
    } else {
        luaL_addstring(b, s->none ? "network: none (--network none): the "
                                    "container's loopback only, no proxy: no "
                                    "route at all, not even the model API\n"
                                  : "network: allow: the engine's default "
                                    "network (same reach as an unisolated "
                                    "launch)\n");
    }
    luaL_addstring(b, s->tty ? "terminal: yes (-t)\n" : "terminal: no\n");
    launch_env_describe(b, s);
    luaL_addstring(b, "  HOME=$HOME\n");
    if (s->deny) {
        lua_pushfstring(L,
                        "  HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy="
                        "http://127.0.0.1:%d (set in the sandbox before the "
                        "command)\n  ALL_PROXY, all_proxy=socks5h://"
                        "127.0.0.1:%d (non-HTTP TCP)\n"
                        "  NO_PROXY, no_proxy= (empty)\n"
                        "  NODE_USE_ENV_PROXY=1\n",
                        s->proxy_port, s->socks_port);
        ADD_TOP(b);
    }
    if (s->ca_cert)
        add_ca_env(b, L, s->ca_cert);
}

void launch_push_dry_run(lua_State *L, const struct launch_spec *s)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    switch (s->mode) {
    case MODE_BWRAP:
        luaL_addstring(&b, s->deny   ? "mode: bwrap, network deny\n"
                           : s->none ? "mode: bwrap, network none\n"
                                     : "mode: bwrap, network allow\n");
        dry_run_bwrap(&b, L, s);
        break;
    case MODE_DOCKER:
        luaL_addstring(&b, s->podman ? "mode: podman" : "mode: docker");
        luaL_addstring(&b, s->deny   ? ", network deny\n"
                           : s->none ? ", network none\n"
                                     : ", network allow\n");
        dry_run_docker(&b, L, s);
        break;
    default:
        luaL_addstring(&b, "mode: none: the command runs directly on the "
                           "target, without isolation\nnetwork: the host's, "
                           "unchanged\n");
        luaL_addstring(&b, "environment: the launching shell's, unchanged "
                           "(env_pass, env_set and env_inherit apply to bwrap "
                           "and docker only)\n");
    }
    if (s->mode != MODE_NONE)
        launch_limits_add_dry_run(&b, L, s);
    add_command(&b, L, s->command);
    luaL_pushresult(&b);
}
