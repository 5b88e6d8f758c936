/*
 * launch_script.c - the bash -c script a network-deny bwrap sandbox runs
 * before the command: start the bridge from a private loopback port to the
 * bound proxy socket, wait until it listens, point the proxy variables at
 * it, and exec the command. The command is the script's $1 (and the built-in
 * bridge's path its $2): positional parameters are never parsed as shell
 * text, so no quoting of user data happens here at all.
 *
 * NODE_USE_ENV_PROXY=1: Node's built-in fetch (undici) ignores the proxy
 * variables unless it is set (Node 24 and later honour it; older ones
 * ignore it, and fetch there fails closed: no route but the proxy).
 *
 * bridge "pass" starts nothing that stays between the client and the
 * proxy: its starter (isolation-bridge --pass, bridge/pass.c) hands the
 * listener to the proxy, waits for the proxy's ok and execs the command
 * itself (its failure prints a line and exits 126, as the others do).
 * Under bwrap it needs no script at all (launch_add_pass_command): bwrap
 * sets the proxy variables and execs the starter, which execs the
 * command's bash: one shell start less per launch (about 1.3 ms of a
 * 9 ms deny launch on the bench machine, bench/results/pass-2026-12-01.md).
 *
 * socat's argument order matters: the forking listener must come first, or
 * socat dials the socket once and every later client shares (and breaks on)
 * that one connection.
 */
#include "isolation.h"
#include "launch.h"

#include <lauxlib.h>
#include <stdio.h>

/* Bounded wait for the listener: 1000 x 10 ms plus process start costs. */
#define BRIDGE_WAIT_TRIES 1000

/* The proxy variables of a deny sandbox, every one pointing at the
 * sandbox's own loopback port; NULL: that port's URL. */
static const struct {
    const char *name, *value;
} proxy_vars[] = {{"HTTP_PROXY", NULL},       {"HTTPS_PROXY", NULL},
                  {"http_proxy", NULL},       {"https_proxy", NULL},
                  {"NO_PROXY", ""},           {"no_proxy", ""},
                  {"NODE_USE_ENV_PROXY", "1"}};

void launch_add_pass_command(struct argv_buf *b, const struct launch_spec *s)
{
    char proxy[64], port[16];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", s->proxy_port);
    snprintf(port, sizeof port, "%d", s->proxy_port);
    for (size_t i = 0; i < sizeof proxy_vars / sizeof *proxy_vars; i++) {
        argv_add(b, "--setenv");
        argv_add(b, proxy_vars[i].name);
        argv_add(b, proxy_vars[i].value ? proxy_vars[i].value : proxy);
    }
    argv_add(b, "--");
    /* The starter execs the rest: the command stays one argument, never
     * parsed as shell text on the way. */
    argv_add(b, s->bridge_path);
    argv_add(b, "--pass");
    argv_add(b, port);
    argv_add(b, ISOLATION_SANDBOX_PROXY_SOCKET);
    argv_add(b, "bash");
    argv_add(b, "-c");
    argv_add(b, "--");
    argv_add(b, s->command);
}

void launch_push_deny_script(lua_State *L, const struct launch_spec *s)
{
    char tcp_entry[48], port_fail[192], proxy[64];
    snprintf(tcp_entry, sizeof tcp_entry, ": 0100007F:%04X 00000000:0000 0A ",
             (unsigned)s->proxy_port);
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", s->proxy_port);

    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (s->bridge == BRIDGE_PASS) {
        lua_pushfstring(L,
                        "export HTTP_PROXY=%s HTTPS_PROXY=%s http_proxy=%s "
                        "https_proxy=%s NO_PROXY= no_proxy= "
                        "NODE_USE_ENV_PROXY=1; exec \"$2\" --pass %d "
                        "" ISOLATION_SANDBOX_PROXY_SOCKET " bash -c -- \"$1\"",
                        proxy, proxy, proxy, proxy, s->proxy_port);
        luaL_addvalue(&b);
        luaL_pushresult(&b);
        return;
    }
    if (s->bridge == BRIDGE_BUILTIN) {
        /* It listens, forks, and its parent exits 0 once the child listens. */
        snprintf(port_fail, sizeof port_fail,
                 "\"$2\" %d " ISOLATION_SANDBOX_PROXY_SOCKET
                 " </dev/null || { echo \"isolation: the built-in bridge did "
                 "not start on 127.0.0.1:%d\" >&2; exit 126; }; ",
                 s->proxy_port, s->proxy_port);
        luaL_addstring(&b, port_fail);
    } else {
        lua_pushfstring(
            L,
            "socat TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork "
            "UNIX-CONNECT:" ISOLATION_SANDBOX_PROXY_SOCKET
            " </dev/null & bridge=$!; tries=0; "
            "until grep -q '%s' /proc/net/tcp 2>/dev/null; do "
            "if [ \"$tries\" -ge %d ] || ! kill -0 \"$bridge\" 2>/dev/null; "
            "then echo \"isolation: the network bridge (socat) is not "
            "listening on 127.0.0.1:%d; is socat installed?\" >&2; "
            "exit 126; fi; tries=$((tries + 1)); sleep 0.01; done; ",
            s->proxy_port, tcp_entry, BRIDGE_WAIT_TRIES, s->proxy_port);
        luaL_addvalue(&b);
    }
    lua_pushfstring(L,
                    "export HTTP_PROXY=%s HTTPS_PROXY=%s http_proxy=%s "
                    "https_proxy=%s NO_PROXY= no_proxy= "
                    "NODE_USE_ENV_PROXY=1; exec bash -c -- \"$1\"",
                    proxy, proxy, proxy, proxy);
    luaL_addvalue(&b);
    luaL_pushresult(&b);
}
