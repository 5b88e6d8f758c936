/*
 * allowhosts.c - default_allow_hosts(agent, hook_url): the allowlist a
 * network-denied launch starts from.
 *
 * Everything here is a fixed list except the npm registry, which is read at
 * run time from npm's own configuration (see npmreg.c): the project names no
 * registry that a user might have replaced with a mirror.
 */
#include "allow/allowhosts.h"
#include "allow/hostpat.h"
#include "allow/hostpat_lua.h"
#include "isolation.h"
#include "strarg.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * The model API hosts each agent CLI needs to run and to refresh its login
 * token; telemetry and error-reporting hosts are left out on purpose.
 */
static const char *const claude_hosts[] = {
    "api.anthropic.com",     /* the Messages API, profile, feature flags */
    "platform.claude.com",   /* OAuth token exchange and refresh */
    "console.anthropic.com", /* the same, for older Claude Code releases */
    NULL,
};
static const char *const codex_hosts[] = {
    "api.openai.com",  /* the Responses API with an API key */
    "auth.openai.com", /* OAuth token refresh of a ChatGPT login */
    "chatgpt.com",     /* the Codex backend of a ChatGPT-plan login */
    NULL,
};
static const char *const gemini_hosts[] = {
    "generativelanguage.googleapis.com", /* the Gemini API with a key */
    "cloudcode-pa.googleapis.com",       /* Code Assist, Google login */
    "oauth2.googleapis.com",             /* OAuth token refresh */
    NULL,
};

/* Package registries other than npm's, whose host comes from npm. */
static const char *const pypi_hosts[] = {"pypi.org", "files.pythonhosted.org",
                                         NULL};
static const char *const other_registry_hosts[] = {
    "crates.io",          "static.crates.io",
    "index.crates.io",    "proxy.golang.org",
    "sum.golang.org",     "rubygems.org",
    "index.rubygems.org", "repo.maven.apache.org",
    "repo1.maven.org",    NULL,
};

static const char *const *agent_hosts(const char *agent)
{
    if (!agent)
        return NULL;
    if (strcmp(agent, "claude") == 0)
        return claude_hosts;
    if (strcmp(agent, "codex") == 0)
        return codex_hosts;
    if (strcmp(agent, "gemini") == 0)
        return gemini_hosts;
    return NULL;
}

/* Appends s to the array at the top of the stack unless it is there. */
static void add_unique(lua_State *L, const char *s)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        bool same = strcmp(lua_tostring(L, -1), s) == 0;
        lua_pop(L, 1);
        if (same)
            return;
    }
    lua_pushstring(L, s);
    lua_rawseti(L, -2, n + 1);
}

static void add_list(lua_State *L, const char *const *hosts)
{
    for (; hosts && *hosts; hosts++)
        add_unique(L, *hosts);
}

bool allowhosts_parse_url(const char *url, size_t len, bool allow_userinfo,
                          struct http_url *out, const char **why)
{
    static const struct {
        const char *prefix;
        int port;
    } schemes[] = {{"http://", 80}, {"https://", 443}};
    size_t i = 0;
    int default_port = 0;
    for (size_t s = 0; s < 2; s++) {
        size_t plen = strlen(schemes[s].prefix);
        if (len >= plen && strncasecmp(url, schemes[s].prefix, plen) == 0) {
            i = plen;
            default_port = schemes[s].port;
        }
    }
    if (!default_port) {
        *why = "the scheme must be http:// or https://";
        return false;
    }
    size_t end = i;
    while (end < len && url[end] != '/' && url[end] != '?' && url[end] != '#')
        end++;
    const char *auth = url + i;
    size_t auth_len = end - i;
    const char *at = NULL;
    for (size_t k = 0; k < auth_len; k++)
        if (auth[k] == '@')
            at = auth + k;
    if (at) {
        if (!allow_userinfo) {
            *why = "userinfo ('user@') is not allowed";
            return false;
        }
        auth_len -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    size_t host_len = auth_len;
    const char *port_text = NULL;
    if (auth_len > 0 && auth[0] == '[') {
        const char *close = memchr(auth, ']', auth_len);
        if (!close) {
            *why = "'[' without a closing ']'";
            return false;
        }
        host_len = (size_t)(close - auth) + 1;
        if (host_len < auth_len) {
            if (auth[host_len] != ':') {
                *why = "only :port may follow ']'";
                return false;
            }
            port_text = auth + host_len + 1;
        }
    } else {
        const char *colon = memchr(auth, ':', auth_len);
        if (colon) {
            host_len = (size_t)(colon - auth);
            port_text = colon + 1;
        }
    }
    if (host_len == 0) {
        *why = "the host is empty";
        return false;
    }
    out->port = default_port;
    out->default_port = true;
    if (port_text) {
        size_t plen = auth_len - (size_t)(port_text - auth);
        int port = 0;
        bool ok = plen > 0 && plen <= 5;
        for (size_t k = 0; ok && k < plen; k++) {
            if (port_text[k] < '0' || port_text[k] > '9')
                ok = false;
            else
                port = port * 10 + (port_text[k] - '0');
        }
        if (!ok || port < 1 || port > 65535) {
            *why = "the port must be a number from 1 to 65535";
            return false;
        }
        out->port = port;
        out->default_port = port == default_port;
    }
    char canon[HOST_NAME_CAP];
    out->kind = host_parse(auth, host_len, canon, sizeof canon, NULL);
    if (out->kind == HOST_INVALID) {
        *why = "the host is not a valid name, canonical IPv4 address or "
               "[IPv6] address";
        return false;
    }
    snprintf(out->host, sizeof out->host,
             out->kind == HOST_IPV6 ? "[%s]" : "%s", canon);
    return true;
}

static void add_host_port(lua_State *L, const char *host, int port)
{
    char entry[HOST_NAME_CAP + 16];
    snprintf(entry, sizeof entry, "%s:%d", host, port);
    add_unique(L, entry);
}

/* default_allow_hosts(agent, hook_url) -> array, or nil, err */
static int l_default_allow_hosts(lua_State *L)
{
    /* luaL_opt*string turn a number into a string in place */
    const char *agent = luaL_optstring(L, 1, NULL);
    size_t url_len = 0;
    const char *url = luaL_optlstring(L, 2, NULL, &url_len);
    if ((agent && !strarg_get(L, 1, "agent", NULL)) ||
        (url && !strarg_get(L, 2, "hook_url", NULL))) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    struct http_url hook;
    bool have_hook = url && url_len > 0;
    const char *why = NULL;
    if (have_hook && !allowhosts_parse_url(url, url_len, false, &hook, &why)) {
        luaL_pushfail(L);
        lua_pushfstring(L,
                        "isolation: hook_url must be an http:// or https:// "
                        "URL with a host and an optional port: %s (got \"%s\")",
                        why, url);
        return 2;
    }
    char npm[HOST_NAME_CAP + 16];
    bool have_npm = allowhosts_npm_registry(npm, sizeof npm);

    lua_newtable(L);
    add_list(L, agent_hosts(agent));
    add_list(L, pypi_hosts);
    if (have_npm)
        add_unique(L, npm);
    add_list(L, other_registry_hosts);
    if (have_hook) {
        add_host_port(L, hook.host, hook.port);
        if (strcmp(hook.host, "localhost") == 0) {
            add_host_port(L, "127.0.0.1", hook.port);
            add_host_port(L, "[::1]", hook.port);
        }
    }
    return 1;
}

void isolation_allowhosts_open(lua_State *L)
{
    lua_pushcfunction(L, l_default_allow_hosts);
    lua_setfield(L, -2, "default_allow_hosts");
}
