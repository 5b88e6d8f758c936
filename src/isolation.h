/*
 * isolation.h - what the module's C files share: the entry point calls one
 * <area>_open(L) per concept, each adding its fields to the module table at
 * the top of the stack.
 */
#ifndef ISOLATION_H
#define ISOLATION_H

#include <lauxlib.h>
#include <lua.h>

#define ISOLATION_VERSION "0.1.0"

/* Where the proxy's unix socket appears inside a bwrap sandbox. */
#define ISOLATION_SANDBOX_PROXY_SOCKET "/run/isolation/proxy.sock"
/* Where docker and podman mount the built-in bridge (bwrap: its own path). */
#define ISOLATION_CONTAINER_BRIDGE "/run/isolation/bridge"

/*
 * Each adds its fields to the table at the top of the stack:
 * hostpat: host_allowed, default_allow_hosts; config: config;
 * launch: bwrap_argv, docker_argv, argv, wrap, dry_run;
 * target: validate_for_target; proxy: proxy; bridge: BRIDGE;
 * seccomp: tty_seccomp_filter;
 * selftest: the sanitizer probe, in sanitizer builds only.
 */
void isolation_hostpat_open(lua_State *L);
void isolation_config_open(lua_State *L);
void isolation_launch_open(lua_State *L);
void isolation_target_open(lua_State *L);
void isolation_proxy_open(lua_State *L);
void isolation_bridge_open(lua_State *L);
void isolation_seccomp_open(lua_State *L);
void isolation_selftest_open(lua_State *L);
void isolation_preflight_open(lua_State *L);
void isolation_protect_open(lua_State *L);
void isolation_ssh_open(lua_State *L);
void isolation_orphans_open(lua_State *L);

#endif
