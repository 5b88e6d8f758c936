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

/* The proxy variables of a deny sandbox, every one pointing at one of the
 * sandbox's own loopback ports: HTTP(S) at proxy_port, ALL_PROXY at the
 * SOCKS5 one (socks_port). One table for both ways of setting them: the
 * script's export and bwrap's --setenv (pass). */
enum proxy_var_value { VAR_HTTP_URL, VAR_SOCKS_URL, VAR_TEXT };
static const struct {
    const char *name;
    enum proxy_var_value value;
    const char *text;
} proxy_vars[] = {
    {"HTTP_PROXY", VAR_HTTP_URL, NULL},   {"HTTPS_PROXY", VAR_HTTP_URL, NULL},
    {"http_proxy", VAR_HTTP_URL, NULL},   {"https_proxy", VAR_HTTP_URL, NULL},
    {"ALL_PROXY", VAR_SOCKS_URL, NULL},   {"all_proxy", VAR_SOCKS_URL, NULL},
    {"NO_PROXY", VAR_TEXT, ""},           {"no_proxy", VAR_TEXT, ""},
    {"NODE_USE_ENV_PROXY", VAR_TEXT, "1"}};
#define N_PROXY_VARS (sizeof proxy_vars / sizeof *proxy_vars)

struct proxy_urls {
    char http[64], socks[64];
};

static void proxy_urls_of(const struct launch_spec *s, struct proxy_urls *u)
{
    snprintf(u->http, sizeof u->http, "http://127.0.0.1:%d", s->proxy_port);
    snprintf(u->socks, sizeof u->socks, "socks5h://127.0.0.1:%d",
             s->socks_port);
}

static const char *proxy_var_value_of(size_t i, const struct proxy_urls *u)
{
    switch (proxy_vars[i].value) {
    case VAR_HTTP_URL:
        return u->http;
    case VAR_SOCKS_URL:
        return u->socks;
    case VAR_TEXT:
        break;
    }
    return proxy_vars[i].text;
}

/* The values are URLs and fixed words: nothing to quote. */
static void add_exports(luaL_Buffer *b, lua_State *L,
                        const struct launch_spec *s)
{
    struct proxy_urls u;
    proxy_urls_of(s, &u);
    luaL_addstring(b, "export");
    for (size_t i = 0; i < N_PROXY_VARS; i++) {
        lua_pushfstring(L, " %s=%s", proxy_vars[i].name,
                        proxy_var_value_of(i, &u));
        luaL_addvalue(b);
    }
    luaL_addstring(b, "; ");
}

void launch_add_pass_command(struct argv_buf *b, const struct launch_spec *s)
{
    struct proxy_urls u;
    char ports[32];
    proxy_urls_of(s, &u);
    snprintf(ports, sizeof ports, "%d,%d", s->proxy_port, s->socks_port);
    for (size_t i = 0; i < N_PROXY_VARS; i++) {
        argv_add(b, "--setenv");
        argv_add(b, proxy_vars[i].name);
        argv_add(b, proxy_var_value_of(i, &u));
    }
    argv_add(b, "--");
    /* The starter execs the rest: the command stays one argument, never
     * parsed as shell text on the way. */
    argv_add(b, s->bridge_path);
    argv_add(b, "--pass");
    argv_add(b, ports);
    argv_add(b, ISOLATION_SANDBOX_PROXY_SOCKET);
    argv_add(b, "bash");
    argv_add(b, "-c");
    argv_add(b, "--");
    argv_add(b, s->command);
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
