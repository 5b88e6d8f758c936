/*
 * launch_script.c - the bash -c script a network-deny bwrap sandbox runs
 * before the command: start the bridge from two private loopback ports
 * (proxy_port for HTTP, socks_port for SOCKS5: the proxy tells them apart
 * by the first byte, so both lead to the same socket) to the bound proxy
 * socket, wait until both listen, point the proxy variables at them
 * (ALL_PROXY at the SOCKS5 one), and exec the command. The command is the
 * script's $1 (and the built-in bridge's path its $2): positional parameters
 * are never parsed as shell text, so no quoting of user data happens here at
 * all.
 *
 * NODE_USE_ENV_PROXY=1: Node's built-in fetch (undici) ignores the proxy
 * variables unless it is set (Node 24 and later honour it; older ones
 * ignore it, and fetch there fails closed: no route but the proxy).
 *
 * bridge "pass" starts nothing that stays between the client and the
 * proxy: its starter (isolation-bridge --pass, bridge/pass.c) hands the
 * listener to the proxy, waits for the proxy's ok and execs the command
 * itself (its failure prints a line and exits 126, as the others do).
 *
 * socat's argument order matters: the forking listener must come first, or
 * socat dials the socket once and every later client shares (and breaks on)
 * that one connection.
 */
#include "isolation.h"
#include "launch/launch.h"

#include <lauxlib.h>
#include <stdio.h>

/* Bounded wait for the listeners: 1000 x 10 ms plus process start costs. */
#define BRIDGE_WAIT_TRIES 1000

/* One socat relay from a loopback port to the proxy socket, in the
 * background; its pid in the shell variable `var`. */
static void add_socat(luaL_Buffer *b, lua_State *L, int port, const char *var)
{
    lua_pushfstring(L,
                    "socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork "
                    "UNIX-CONNECT:" ISOLATION_SANDBOX_PROXY_SOCKET
                    " </dev/null & %s=$!; ",
                    port, var);
    luaL_addvalue(b);
}

/* Both socat relays, then a bounded wait until both listen (their lines
 * in the sandbox's own /proc/net/tcp, state 0A) or either has died. */
static void add_socat_bridge(luaL_Buffer *b, lua_State *L,
                             const struct launch_spec *s)
{
    char http_entry[48], socks_entry[48];
    snprintf(http_entry, sizeof http_entry, ": 0100007F:%04X 00000000:0000 0A ",
             (unsigned)s->proxy_port);
    snprintf(socks_entry, sizeof socks_entry,
             ": 0100007F:%04X 00000000:0000 0A ", (unsigned)s->socks_port);
    add_socat(b, L, s->proxy_port, "bridge");
    add_socat(b, L, s->socks_port, "socks");
    lua_pushfstring(
        L,
        "tries=0; until grep -q '%s' /proc/net/tcp 2>/dev/null && "
        "grep -q '%s' /proc/net/tcp 2>/dev/null; do "
        "if [ \"$tries\" -ge %d ] || ! kill -0 \"$bridge\" 2>/dev/null || "
        "! kill -0 \"$socks\" 2>/dev/null; "
        "then echo \"isolation: the network bridge (socat) is not "
        "listening on 127.0.0.1:%d and 127.0.0.1:%d; is socat installed?\" "
        ">&2; exit 126; fi; tries=$((tries + 1)); sleep 0.01; done; ",
        http_entry, socks_entry, BRIDGE_WAIT_TRIES, s->proxy_port,
        s->socks_port);
    luaL_addvalue(b);
}

/* The proxy variables: HTTP(S) to the HTTP port, ALL_PROXY to SOCKS5. */
static void add_exports(luaL_Buffer *b, lua_State *L,
                        const struct launch_spec *s)
{
    char proxy[64], socks[64];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", s->proxy_port);
    snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%d", s->socks_port);
    lua_pushfstring(L,
                    "export HTTP_PROXY=%s HTTPS_PROXY=%s http_proxy=%s "
                    "https_proxy=%s ALL_PROXY=%s all_proxy=%s NO_PROXY= "
                    "no_proxy= NODE_USE_ENV_PROXY=1; ",
                    proxy, proxy, proxy, proxy, socks, socks);
    luaL_addvalue(b);
}

void launch_push_deny_script(lua_State *L, const struct launch_spec *s)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (s->bridge == BRIDGE_PASS) {
        add_exports(&b, L, s);
        lua_pushfstring(
            L,
            "exec \"$2\" --pass %d,%d " ISOLATION_SANDBOX_PROXY_SOCKET
            " bash -c -- \"$1\"",
            s->proxy_port, s->socks_port);
        luaL_addvalue(&b);
        luaL_pushresult(&b);
        return;
    }
    if (s->bridge == BRIDGE_BUILTIN) {
        /* It listens, forks, and its parent exits 0 once the child listens. */
        lua_pushfstring(L,
                        "\"$2\" %d,%d " ISOLATION_SANDBOX_PROXY_SOCKET
                        " </dev/null || { echo \"isolation: the built-in "
                        "bridge did not start on 127.0.0.1:%d and "
                        "127.0.0.1:%d\" >&2; exit 126; }; ",
                        s->proxy_port, s->socks_port, s->proxy_port,
                        s->socks_port);
        luaL_addvalue(&b);
    } else {
        add_socat_bridge(&b, L, s);
    }
    add_exports(&b, L, s);
    luaL_addstring(&b, "exec bash -c -- \"$1\"");
    luaL_pushresult(&b);
}
