/*
 * launch_env.c - the sandbox's environment. It starts clean: a base of
 * harmless names (the locale, the terminal, the user, PATH), the agent's
 * own credential and configuration variables, the caller's env_pass, each
 * taken from the shell that runs the line only when set there, plus HOME
 * and env_set. Everything else the launching environment holds (cloud
 * keys, tokens, SSH_AUTH_SOCK) stays outside. env_inherit = true is the
 * explicit opt-out.
 *
 * Why `env -i` in front of bwrap rather than bwrap's own --clearenv: with
 * --unshare-pid, bwrap's process inside the sandbox (its pid 1) is a fork
 * of bwrap and keeps the environment bwrap was started with, and
 * /proc/1/environ shows it to the sandboxed command (measured with bwrap
 * 0.8.0: a canary set before `bwrap --clearenv` is readable there, and
 * without Yama's ptrace restriction so is pid 1's memory). So bwrap must
 * start with nothing but the kept names: argv() and wrap() run it as
 * `env -i NAME=value... bwrap ...`, and a local line behind the reaper as
 * `isolation-bridge --reap GRACE --env -- -i NAME=value... bwrap ...` (the
 * reaper sets the environment in its child itself: one exec fewer). A
 * passed value is never written into bwrap's arguments (every user on the
 * host can read a command line, for the whole session); it is in env's
 * (the reaper's) for the instant before the exec of bwrap.
 *
 * Which names are kept is decided by the line at run time: the element
 * ${NAME+"NAME=$NAME"} is one word when NAME is set (empty included) and
 * none when it is unset, in any POSIX shell and whatever IFS holds; the
 * builders stay pure. docker needs no token: `-e NAME` passes NAME only
 * when it is set in docker's environment.
 */
#include "launch/launch.h"

#include <lauxlib.h>
#include <string.h>

/* LC_* spelled out: neither bwrap nor docker nor a shell word can glob. */
static const char *const base_env[] = {
    "PATH",         "LANG",           "LC_ALL",
    "LC_CTYPE",     "LC_NUMERIC",     "LC_TIME",
    "LC_COLLATE",   "LC_MONETARY",    "LC_MESSAGES",
    "LC_PAPER",     "LC_NAME",        "LC_ADDRESS",
    "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
    "TERM",         "COLORTERM",      "TZ",
    "USER",         "LOGNAME",        NULL};

/*
 * From each agent's documentation: its API keys and tokens, its endpoint
 * and provider switches, its model and timeout settings. Not general cloud
 * credentials (AWS_*, GOOGLE_APPLICATION_CREDENTIALS): those reach far more
 * than the agent's API; pass them with env_pass when wanted.
 */
static const char *const claude_env[] = {"ANTHROPIC_API_KEY",
                                         "ANTHROPIC_AUTH_TOKEN",
                                         "ANTHROPIC_BASE_URL",
                                         "ANTHROPIC_CUSTOM_HEADERS",
                                         "ANTHROPIC_MODEL",
                                         "ANTHROPIC_SMALL_FAST_MODEL",
                                         "ANTHROPIC_DEFAULT_OPUS_MODEL",
                                         "ANTHROPIC_DEFAULT_SONNET_MODEL",
                                         "ANTHROPIC_DEFAULT_HAIKU_MODEL",
                                         "ANTHROPIC_VERTEX_PROJECT_ID",
                                         "CLAUDE_CODE_USE_BEDROCK",
                                         "CLAUDE_CODE_USE_VERTEX",
                                         "CLAUDE_CODE_OAUTH_TOKEN",
                                         "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
                                         "CLAUDE_CODE_DISABLE_NONESSENTIAL_"
                                         "TRAFFIC",
                                         "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
                                         "CLAUDE_CODE_SKIP_VERTEX_AUTH",
                                         "CLOUD_ML_REGION",
                                         "DISABLE_AUTOUPDATER",
                                         "DISABLE_TELEMETRY",
                                         "DISABLE_ERROR_REPORTING",
                                         "API_TIMEOUT_MS",
                                         "MAX_THINKING_TOKENS",
                                         "BASH_DEFAULT_TIMEOUT_MS",
                                         "BASH_MAX_TIMEOUT_MS",
                                         "MCP_TIMEOUT",
                                         NULL};
static const char *const codex_env[] = {"OPENAI_API_KEY", "OPENAI_BASE_URL",
                                        NULL};
static const char *const gemini_env[] = {"GEMINI_API_KEY",
                                         "GOOGLE_API_KEY",
                                         "GOOGLE_CLOUD_PROJECT",
                                         "GOOGLE_CLOUD_LOCATION",
                                         "GOOGLE_GENAI_USE_VERTEXAI",
                                         "GEMINI_MODEL",
                                         NULL};

/* What the sandbox sets itself under network deny: never the caller's. */
static const char *const proxy_env[] = {
    "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",         "https_proxy",
    "NO_PROXY",   "no_proxy",    "NODE_USE_ENV_PROXY", NULL};

static const struct {
    const char *agent;
    const char *const *names;
} agent_env[] = {
    {"claude", claude_env}, {"codex", codex_env}, {"gemini", gemini_env}};

static const char *const *agent_names(const char *agent)
{
    static const char *const none[] = {NULL};
    for (size_t i = 0; agent && i < sizeof agent_env / sizeof *agent_env; i++)
        if (strcmp(agent, agent_env[i].agent) == 0)
            return agent_env[i].names;
    return none;
}

static bool in_list(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(name, *list) == 0)
            return true;
    return false;
}

static bool in_array(const char *name, const char *const *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, a[i]) == 0)
            return true;
    return false;
}

/* [A-Za-z_][A-Za-z0-9_]*: what a shell can name, and nothing it parses. */
static bool valid_name(const char *s, size_t len)
{
    if (len == 0 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/*
 * A name the caller may pass or set: valid, not HOME (the sandbox's own,
 * the $HOME token), not a proxy variable under deny. `field` names it.
 */
static int check_name(lua_State *L, int v, const char *field,
                      const struct launch_spec *s, const char **out)
{
    size_t len;
    if (lua_type(L, v) != LUA_TSTRING)
        return msg_fail_got(L, v, field, "must be a variable name (a string)");
    const char *name = lua_tolstring(L, v, &len);
    if (!valid_name(name, len))
        return msg_fail_got(L, v, field,
                            "must be a variable name: a letter or _, then "
                            "letters, digits or _ ([A-Za-z_][A-Za-z0-9_]*)");
    if (strcmp(name, "HOME") == 0)
        return msg_fail_got(L, v, field,
                            "must not be HOME: the sandbox's HOME is its own "
                            "empty home, the $HOME token");
    if (s->deny && s->mode != MODE_NONE && in_list(name, proxy_env))
        return msg_fail_got(L, v, field,
                            "must not be a proxy variable under network deny: "
                            "the sandbox sets HTTP_PROXY, HTTPS_PROXY, "
                            "http_proxy, https_proxy, NO_PROXY, no_proxy and "
                            "NODE_USE_ENV_PROXY itself");
    *out = name;
    return 1;
}

/* Entries of the table at v, refusing keys other than 1..n for an array. */
static int count_array(lua_State *L, int v, const char *field,
                       lua_Integer *count)
{
    *count = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
        lua_pop(L, 1);
        (*count)++;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
            return msg_fail_got(L, -1, field,
                                "must be an array of variable names, not a "
                                "map; it has the key");
    }
    return 1;
}

static int read_env_pass(lua_State *L, int idx, struct launch_spec *s)
{
    lua_getfield(L, idx, "env_pass");
    int v = lua_gettop(L);
    if (msg_is_absent(L, v))
        return 1;
    if (lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, "env_pass",
                            "must be an array of variable names");
    lua_Integer count;
    if (!count_array(L, v, "env_pass", &count))
        return 0;
    if (count > LAUNCH_MAX_ENV) {
        lua_pushfstring(L, "isolation: env_pass has %I names (at most %d)",
                        (LUAI_UACINT)count, LAUNCH_MAX_ENV);
        return 0;
    }
    luaL_checkstack(L, 2 * (int)count + 8, "env_pass");
    for (lua_Integer i = 1; i <= count; i++) {
        lua_pushfstring(L, "env_pass[%I]", (LUAI_UACINT)i);
        const char *field = lua_tostring(L, -1);
        int e = lua_gettop(L) + 1;
        if (lua_rawgeti(L, v, i) == LUA_TNIL) {
            lua_pushfstring(L,
                            "isolation: env_pass must be an array without "
                            "holes (got nothing at %s)",
                            field);
            return 0;
        }
        const char *name;
        if (!check_name(L, e, field, s, &name))
            return 0;
        if (in_array(name, s->env_pass, s->nenv_pass))
            return msg_fail_got(L, e, field, "repeats a name given before");
        s->env_pass[s->nenv_pass++] = name;
    }
    return 1;
}

/* Sorted by name: the same spec gives the same line everywhere. */
static void env_set_put(struct launch_spec *s, const char *name,
                        const char *value, bool route)
{
    size_t at = s->nenv_set;
    while (at > 0 && strcmp(s->env_set_name[at - 1], name) > 0) {
        s->env_set_name[at] = s->env_set_name[at - 1];
        s->env_set_value[at] = s->env_set_value[at - 1];
        s->env_set_route[at] = s->env_set_route[at - 1];
        at--;
    }
    s->env_set_name[at] = name;
    s->env_set_value[at] = value;
    s->env_set_route[at] = route;
    s->nenv_set++;
}

static int read_env_set(lua_State *L, int idx, struct launch_spec *s)
{
    lua_getfield(L, idx, "env_set");
    int v = lua_gettop(L);
    if (msg_is_absent(L, v))
        return 1;
    if (lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, "env_set",
                            "must be a table of variable name -> value");
    lua_pushnil(L);
    while (lua_next(L, v)) {
        /* key at -2 and value at -1 stay on the stack: s points into them */
        luaL_checkstack(L, 8, "env_set");
        int key = lua_gettop(L) - 1, val = lua_gettop(L);
        if (s->nenv_set >= LAUNCH_MAX_ENV) {
            lua_pushfstring(L, "isolation: env_set has more than %d names",
                            LAUNCH_MAX_ENV);
            return 0;
        }
        if (lua_type(L, key) != LUA_TSTRING)
            return msg_fail_got(L, key, "env_set",
                                "must be a table of variable name -> value, "
                                "not an array; it has the key");
        const char *name;
        lua_pushfstring(L, "env_set key");
        if (!check_name(L, key, lua_tostring(L, -1), s, &name))
            return 0;
        lua_pop(L, 1);
        lua_pushfstring(L, "env_set.%s", name);
        const char *field = lua_tostring(L, -1);
        size_t len;
        if (lua_type(L, val) != LUA_TSTRING)
            return msg_fail_got(L, val, field, "must be a string");
        const char *value = lua_tolstring(L, val, &len);
        if (memchr(value, '\0', len))
            return msg_fail_got(L, val, field, "must not contain NUL bytes");
        if (in_array(name, s->env_pass, s->nenv_pass)) {
            lua_pushfstring(L,
                            "isolation: %s is also in env_pass: a name is "
                            "either passed through or set (got \"%s\")",
                            field, name);
            return 0;
        }
        lua_pop(L, 1);
        env_set_put(s, name, value, false);
        lua_pushvalue(L, key); /* the next key; key and value stay below */
    }
    return 1;
}

/* Pushes ISOLATION_ROUTE_<NAME>: upper case, dashes as underscores. */
static const char *push_route_var(lua_State *L, const char *name)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "ISOLATION_ROUTE_");
    for (const char *c = name; *c; c++)
        luaL_addchar(&b, *c == '-'                  ? '_'
                         : (*c >= 'a' && *c <= 'z') ? (char)(*c - 'a' + 'A')
                                                    : *c);
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

/*
 * routes: the launch side of credential routes (API, "Credentials that
 * stay outside"). The secret is the proxy's alone; a route here names the
 * variables that lead to it. Inside: ISOLATION_ROUTE_<NAME> and url_env
 * hold the route's base URL on the bridge, http://127.0.0.1:<proxy_port>/
 * <name>; each key_env holds the placeholder isolation-route-<name>, which
 * is not the secret and is worth nothing anywhere else; with git = true,
 * GIT_CONFIG_COUNT/KEY_n/VALUE_n send git's https://<upstream>/ through the
 * route (insteadOf). A key_env is set, so never passed through from the
 * launching environment (not even when AGENT_ENV lists it: each_kept skips
 * every name env_set holds), and env_pass may not name it.
 */
static bool route_name_ok(const char *n, size_t len)
{
    if (len < 1 || len > 63)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= '0' && n[i] <= '9') ||
              n[i] == '-'))
            return false;
    return true;
}

/* https://HOST[:PORT][/PATH]: printable, no space, userinfo, query or
 * fragment (the value goes into git's configuration and the dry run). */
static bool upstream_ok(const char *u, size_t len)
{
    if (len <= 8 || len > 2048 || strncmp(u, "https://", 8) != 0 || u[8] == '/')
        return false;
    for (size_t i = 8; i < len; i++)
        if ((unsigned char)u[i] <= 0x20 || (unsigned char)u[i] >= 0x7f ||
            u[i] == '@' || u[i] == '?' || u[i] == '#' || u[i] == '\\')
            return false;
    return true;
}

/* Adds a variable a route sets; refuses one set twice (by env_set or
 * another route) or passed through by env_pass. */
static int route_set(lua_State *L, struct launch_spec *s, const char *field,
                     const char *name, const char *value)
{
    if (in_array(name, s->env_pass, s->nenv_pass)) {
        lua_pushfstring(L,
                        "isolation: %s sets %s, which env_pass also names: "
                        "the launching environment's value (a secret, for a "
                        "key) would reach the sandbox",
                        field, name);
        return 0;
    }
    if (in_array(name, s->env_set_name, s->nenv_set)) {
        lua_pushfstring(L,
                        "isolation: %s sets %s, which env_set or another "
                        "route already sets",
                        field, name);
        return 0;
    }
    if (s->nenv_set >= LAUNCH_MAX_ENV) {
        lua_pushfstring(L,
                        "isolation: env_set and routes together set more "
                        "than %d names",
                        LAUNCH_MAX_ENV);
        return 0;
    }
    env_set_put(s, name, value, true);
    return 1;
}

static int read_route_name(lua_State *L, int e, const char *field,
                           const struct launch_spec *s, const char **out)
{
    lua_getfield(L, e, "name");
    size_t len = 0;
    const char *n =
        lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    lua_pushfstring(L, "%s.name", field);
    if (!n || !route_name_ok(n, len))
        return msg_fail_got(L, -2, lua_tostring(L, -1),
                            "must be 1 to 63 of a-z, 0-9 and - (the first "
                            "segment of the route's path)");
    lua_pop(L, 1);
    for (size_t i = 0; i < s->nroutes; i++)
        if (strcmp(s->routes[i].name, n) == 0)
            return msg_fail_got(L, -1, field,
                                "has the name of an earlier route");
    *out = n;
    return 1;
}

/* An optional variable name at key of the route at e. */
static int read_route_var(lua_State *L, int v, const char *field,
                          const struct launch_spec *s, const char **out)
{
    *out = NULL;
    if (msg_is_absent(L, v))
        return 1;
    return check_name(L, v, field, s, out);
}

static int read_route(lua_State *L, int e, const char *field,
                      struct launch_spec *s, struct launch_route *r)
{
    memset(r, 0, sizeof *r);
    if (lua_type(L, e) != LUA_TTABLE)
        return msg_fail_got(L, e, field,
                            "must be a table {name, url_env, key_env, "
                            "upstream, git}");
    lua_pushnil(L);
    while (lua_next(L, e)) {
        lua_pop(L, 1);
        static const char *const keys[] = {"name",     "url_env", "key_env",
                                           "upstream", "git",     NULL};
        if (lua_type(L, -1) != LUA_TSTRING ||
            !in_list(lua_tostring(L, -1), keys)) {
            lua_pushfstring(L, "%s has an unknown key", field);
            return msg_fail_got(L, -2, lua_tostring(L, -1),
                                "(accepted: name, url_env, key_env, "
                                "upstream, git; the secret is never in a "
                                "launch spec)");
        }
    }
    if (!read_route_name(L, e, field, s, &r->name))
        return 0;
    lua_getfield(L, e, "url_env");
    lua_pushfstring(L, "%s.url_env", field);
    if (!read_route_var(L, -2, lua_tostring(L, -1), s, &r->url_env))
        return 0;
    lua_pop(L, 1);
    lua_getfield(L, e, "key_env");
    int k = lua_gettop(L);
    if (lua_type(L, k) == LUA_TTABLE) {
        lua_Integer count;
        lua_pushfstring(L, "%s.key_env", field);
        if (!launch_array_count(L, k, lua_tostring(L, -1),
                                "must be an array of variable names, not a "
                                "map; it has the key",
                                LAUNCH_ROUTE_KEYS, &count))
            return 0;
        if (count < 1 || count > LAUNCH_ROUTE_KEYS)
            return msg_fail_got(L, k, lua_tostring(L, -1),
                                "must be a variable name or an array of 1 "
                                "to 8 of them");
        for (lua_Integer i = 1; i <= count; i++) {
            lua_pushfstring(L, "%s.key_env[%I]", field, (LUAI_UACINT)i);
            lua_rawgeti(L, k, i);
            if (!check_name(L, -1, lua_tostring(L, -2), s,
                            &r->key_env[r->nkey]))
                return 0;
            r->nkey++;
        }
    } else if (!msg_is_absent(L, k)) {
        lua_pushfstring(L, "%s.key_env", field);
        if (!check_name(L, k, lua_tostring(L, -1), s, &r->key_env[0]))
            return 0;
        r->nkey = 1;
    }
    lua_getfield(L, e, "upstream");
    if (!msg_is_absent(L, -1)) {
        size_t len = 0;
        const char *u =
            lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        lua_pushfstring(L, "%s.upstream", field);
        if (!u || !upstream_ok(u, len))
            return msg_fail_got(L, -2, lua_tostring(L, -1),
                                "must be https://HOST[:PORT][/PATH] without "
                                "spaces, userinfo, query or fragment");
        r->upstream = u;
    }
    lua_getfield(L, e, "git");
    if (!msg_is_absent(L, -1)) {
        lua_pushfstring(L, "%s.git", field);
        if (lua_type(L, -2) != LUA_TBOOLEAN)
            return msg_fail_got(L, -2, lua_tostring(L, -1),
                                "must be a boolean");
        r->git = lua_toboolean(L, -2);
        if (r->git && !r->upstream)
            return msg_fail_got(L, -2, lua_tostring(L, -1),
                                "needs the route's upstream (git's https:// "
                                "URLs of that upstream go through the route)");
    }
    return 1;
}

/* The variables of the routes read so far, into env_set. */
static int set_route_vars(lua_State *L, struct launch_spec *s)
{
    size_t ngit = 0;
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct launch_route *r = &s->routes[i];
        luaL_checkstack(L, 16, "routes");
        lua_pushfstring(L, "routes[%d]", (int)i + 1);
        const char *field = lua_tostring(L, -1);
        const char *base = lua_pushfstring(L, "http://127.0.0.1:%d/%s",
                                           s->proxy_port, r->name);
        if (!route_set(L, s, field, push_route_var(L, r->name), base))
            return 0;
        if (r->url_env && !route_set(L, s, field, r->url_env, base))
            return 0;
        const char *ph = lua_pushfstring(L, "isolation-route-%s", r->name);
        for (size_t k = 0; k < r->nkey; k++)
            if (!route_set(L, s, field, r->key_env[k], ph))
                return 0;
        if (!r->git)
            continue;
        lua_pushfstring(L, "GIT_CONFIG_KEY_%d", (int)ngit);
        const char *key = lua_tostring(L, -1);
        lua_pushfstring(L, "url.%s/.insteadOf", base);
        if (!route_set(L, s, field, key, lua_tostring(L, -1)))
            return 0;
        size_t ul = strlen(r->upstream);
        while (ul > 8 && r->upstream[ul - 1] == '/')
            ul--;
        lua_pushfstring(L, "GIT_CONFIG_VALUE_%d", (int)ngit);
        key = lua_tostring(L, -1);
        lua_pushlstring(L, r->upstream, ul);
        lua_pushliteral(L, "/");
        lua_concat(L, 2);
        if (!route_set(L, s, field, key, lua_tostring(L, -1)))
            return 0;
        ngit++;
    }
    if (ngit && !route_set(L, s, "routes", "GIT_CONFIG_COUNT",
                           lua_pushfstring(L, "%d", (int)ngit)))
        return 0;
    return 1;
}

static int read_routes(lua_State *L, int idx, struct launch_spec *s)
{
    lua_getfield(L, idx, "routes");
    int v = lua_gettop(L);
    if (msg_is_absent(L, v))
        return 1;
    lua_Integer count;
    if (lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, "routes",
                            "must be an array of {name, url_env, key_env, "
                            "upstream, git}");
    if (!launch_array_count(L, v, "routes",
                            "must be an array of {name, url_env, key_env, "
                            "upstream, git}, not a map; it has the key",
                            LAUNCH_MAX_ROUTES, &count))
        return 0;
    if (count > 0 && (!s->deny || s->mode == MODE_NONE))
        return msg_fail_got(L, v, "routes",
                            "needs network deny in a sandbox (bwrap, docker "
                            "or podman): a route is the proxy's");
    luaL_checkstack(L, 8 * (int)count + 8, "routes");
    for (lua_Integer i = 1; i <= count; i++) {
        lua_pushfstring(L, "routes[%I]", (LUAI_UACINT)i);
        const char *field = lua_tostring(L, -1);
        int e = lua_gettop(L) + 1;
        if (lua_rawgeti(L, v, i) == LUA_TNIL) {
            lua_pushfstring(L,
                            "isolation: routes must be an array without "
                            "holes (got nothing at %s)",
                            field);
            return 0;
        }
        if (!read_route(L, e, field, s, &s->routes[s->nroutes]))
            return 0;
        s->nroutes++;
    }
    return set_route_vars(L, s);
}

bool launch_env_is_key(const char *key)
{
    static const char *const keys[] = {"env_pass", "env_set", "env_inherit",
                                       "routes", NULL};
    return in_list(key, keys);
}

int launch_env_read(lua_State *L, int idx, struct launch_spec *s)
{
    idx = lua_absindex(L, idx);
    s->nenv_pass = s->nenv_set = s->nroutes = 0;
    s->env_inherit = false;
    lua_getfield(L, idx, "env_inherit");
    if (!msg_is_absent(L, -1)) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            return msg_fail_got(L, -1, "env_inherit", "must be a boolean");
        s->env_inherit = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return read_env_pass(L, idx, s) && read_env_set(L, idx, s) &&
           read_routes(L, idx, s);
}

/*
 * Calls add(name) once for each name kept from the launching shell: the
 * base (without PATH for docker: the image has its own), the agent's, then
 * env_pass; a name that env_set sets is left to env_set.
 */
typedef void (*name_fn)(struct argv_buf *b, const char *name);

static void each_kept(const struct launch_spec *s, bool with_path,
                      struct argv_buf *b, name_fn add)
{
    const char *seen[3 * LAUNCH_MAX_ENV];
    size_t n = 0;
    const char *const *lists[] = {base_env, agent_names(s->agent)};
    for (size_t l = 0; l < 2; l++)
        for (const char *const *p = lists[l]; *p; p++) {
            if ((!with_path && strcmp(*p, "PATH") == 0) ||
                in_array(*p, seen, n) ||
                in_array(*p, s->env_set_name, s->nenv_set))
                continue;
            seen[n++] = *p;
            add(b, *p);
        }
    for (size_t i = 0; i < s->nenv_pass; i++)
        if (!in_array(s->env_pass[i], seen, n)) {
            seen[n++] = s->env_pass[i];
            add(b, s->env_pass[i]);
        }
}

static void add_pass_token(struct argv_buf *b, const char *name)
{
    luaL_Buffer buf;
    luaL_buffinit(b->L, &buf);
    luaL_addchar(&buf, '\0');
    luaL_addchar(&buf, TOKEN_ENV_PASS);
    luaL_addstring(&buf, name);
    luaL_pushresult(&buf);
    argv_add_top(b);
}

static void add_set(struct argv_buf *b, const struct launch_spec *s,
                    const char *prefix)
{
    for (size_t i = 0; i < s->nenv_set; i++) {
        if (prefix)
            argv_add(b, prefix);
        lua_pushfstring(b->L, "%s=%s", s->env_set_name[i], s->env_set_value[i]);
        argv_add_top(b);
    }
}

void launch_push_bwrap_env(lua_State *L, const struct launch_spec *s)
{
    launch_push_bwrap(L, s);
    if (s->env_inherit && s->nenv_set == 0)
        return;
    int inner = lua_gettop(L);
    struct argv_buf b;
    argv_start(&b, L);
    argv_add(&b, "env");
    if (!s->env_inherit) {
        argv_add(&b, "-i");
        lua_pushlstring(L, "HOME=" TOKEN_HOME, 7);
        argv_add_top(&b);
        each_kept(s, true, &b, add_pass_token);
    }
    add_set(&b, s, NULL);
    lua_Integer n = (lua_Integer)lua_rawlen(L, inner);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, inner, i);
        argv_add_top(&b);
    }
    lua_remove(L, inner);
}

static void add_docker_name(struct argv_buf *b, const char *name)
{
    argv_add(b, "-e");
    argv_add(b, name);
}

void launch_env_docker(struct argv_buf *b, const struct launch_spec *s)
{
    each_kept(s, false, b, add_docker_name);
    add_set(b, s, "-e");
}

/* A line "label: A, B, C" of n names (names are plain words). */
static void add_names_line(luaL_Buffer *b, const char *label,
                           const char *const *list, size_t n, const char *skip)
{
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (skip && strcmp(list[i], skip) == 0)
            continue;
        luaL_addstring(b, first ? label : ", ");
        luaL_addstring(b, list[i]);
        first = false;
    }
    if (!first)
        luaL_addchar(b, '\n');
}

static size_t count_names(const char *const *list)
{
    size_t n = 0;
    while (list[n])
        n++;
    return n;
}

/* One line a route: its name, upstream and the variables it sets (names,
 * the base URL and the placeholder, none of them a secret). */
static void describe_routes(luaL_Buffer *b, const struct launch_spec *s)
{
    lua_State *L = b->L;
    for (size_t i = 0; i < s->nroutes; i++) {
        const struct launch_route *r = &s->routes[i];
        luaL_addstring(b, "  route ");
        luaL_addstring(b, r->name); /* [a-z0-9-]: plain */
        luaL_addstring(b, ": ");
        if (r->upstream) {
            msg_push_display(L, r->upstream);
            luaL_addvalue(b);
        } else {
            luaL_addstring(b, "the proxy's upstream");
        }
        luaL_addstring(b, " (the secret stays in the proxy); ");
        push_route_var(L, r->name);
        luaL_addvalue(b);
        if (r->url_env) {
            luaL_addstring(b, ", ");
            luaL_addstring(b, r->url_env);
        }
        lua_pushfstring(L, " = http://127.0.0.1:%d/%s", s->proxy_port, r->name);
        luaL_addvalue(b);
        for (size_t k = 0; k < r->nkey; k++) {
            luaL_addstring(b, k ? ", " : "; ");
            luaL_addstring(b, r->key_env[k]);
        }
        if (r->nkey) {
            lua_pushfstring(L,
                            " = isolation-route-%s (a placeholder, not the "
                            "key)",
                            r->name);
            luaL_addvalue(b);
        }
        if (r->git)
            luaL_addstring(b, "; git's https URLs of the upstream go through "
                              "it (GIT_CONFIG_* insteadOf)");
        luaL_addchar(b, '\n');
    }
}

void launch_env_describe(luaL_Buffer *b, const struct launch_spec *s)
{
    bool docker = s->mode == MODE_DOCKER;
    if (s->env_inherit && !docker) {
        luaL_addstring(b, "environment: WARNING: INHERITED IN FULL "
                          "(env_inherit = true): every variable of the "
                          "launching shell, secrets included (cloud keys, "
                          "tokens, SSH_AUTH_SOCK), is visible to the "
                          "sandboxed command\n");
    } else {
        luaL_addstring(b, docker ? "environment: the image's own; from the "
                                   "launching shell only these names, each "
                                   "only when set there (docker -e NAME; an "
                                   "unset one stays unset):\n"
                                 : "environment: cleared (bwrap starts from "
                                   "an empty environment, env -i or the "
                                   "reaper's --env -i, so not even bwrap's "
                                   "own process in the sandbox holds the "
                                   "launching environment); from the "
                                   "launching shell "
                                   "only these names, each only when set "
                                   "there (an unset one stays unset):\n");
        add_names_line(b,
                       docker ? "  base (not PATH: the image's): " : "  base: ",
                       base_env, count_names(base_env), docker ? "PATH" : NULL);
        const char *const *agent = agent_names(s->agent);
        if (*agent) {
            /* what env_set or a route sets is not taken from the shell
             * (each_kept): a route's key_env is the placeholder */
            const char *kept[LAUNCH_MAX_ENV];
            size_t nkept = 0;
            for (const char *const *p = agent; *p && nkept < LAUNCH_MAX_ENV;
                 p++)
                if (!in_array(*p, s->env_set_name, s->nenv_set))
                    kept[nkept++] = *p;
            /* only the built-in agents have names: a plain word */
            if (nkept) {
                luaL_addstring(b, "  agent ");
                luaL_addstring(b, s->agent);
                add_names_line(b, " (isolation.AGENT_ENV): ", kept, nkept,
                               NULL);
            }
        }
        add_names_line(b, "  env_pass: ", s->env_pass, s->nenv_pass, NULL);
        luaL_addstring(b, "  dropped: every other variable of the launching "
                          "environment\n");
        if (docker && s->env_inherit)
            luaL_addstring(b, "  env_inherit: no effect under docker, which "
                              "never inherits the launching environment\n");
        if (!docker)
            luaL_addstring(b, "  HOME=$HOME (the sandbox's own empty home)\n");
    }
    bool first = true;
    for (size_t i = 0; i < s->nenv_set; i++) {
        if (s->env_set_route[i])
            continue;
        luaL_addstring(b, first ? "  env_set (literal values from the spec, "
                                  "not shown): "
                                : ", ");
        luaL_addstring(b, s->env_set_name[i]);
        first = false;
    }
    if (!first)
        luaL_addchar(b, '\n');
    describe_routes(b, s);
}

static void push_names(lua_State *L, const char *const *list)
{
    lua_newtable(L);
    for (lua_Integer i = 0; list[i]; i++) {
        lua_pushstring(L, list[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

void launch_env_open(lua_State *L)
{
    lua_newtable(L);
    for (size_t i = 0; i < sizeof agent_env / sizeof *agent_env; i++) {
        push_names(L, agent_env[i].names);
        lua_setfield(L, -2, agent_env[i].agent);
    }
    lua_setfield(L, -2, "AGENT_ENV");
    push_names(L, base_env);
    lua_setfield(L, -2, "SANDBOX_ENV");
}
