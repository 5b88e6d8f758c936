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
 * `env -i NAME=value... bwrap ...`. A passed value is never written into
 * bwrap's arguments (every user on the host can read a command line, for
 * the whole session); it is in env's for the instant before env execs
 * bwrap.
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
        /* sorted by name: the same spec gives the same line everywhere */
        size_t at = s->nenv_set;
        while (at > 0 && strcmp(s->env_set_name[at - 1], name) > 0) {
            s->env_set_name[at] = s->env_set_name[at - 1];
            s->env_set_value[at] = s->env_set_value[at - 1];
            at--;
        }
        s->env_set_name[at] = name;
        s->env_set_value[at] = value;
        s->nenv_set++;
        lua_pushvalue(L, key); /* the next key; key and value stay below */
    }
    return 1;
}

bool launch_env_is_key(const char *key)
{
    static const char *const keys[] = {"env_pass", "env_set", "env_inherit",
                                       NULL};
    return in_list(key, keys);
}

int launch_env_read(lua_State *L, int idx, struct launch_spec *s)
{
    idx = lua_absindex(L, idx);
    s->nenv_pass = s->nenv_set = 0;
    s->env_inherit = false;
    lua_getfield(L, idx, "env_inherit");
    if (!msg_is_absent(L, -1)) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            return msg_fail_got(L, -1, "env_inherit", "must be a boolean");
        s->env_inherit = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return read_env_pass(L, idx, s) && read_env_set(L, idx, s);
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
                                 : "environment: cleared (bwrap starts under "
                                   "env -i, so not even bwrap's own process "
                                   "in the sandbox holds the launching "
                                   "environment); from the launching shell "
                                   "only these names, each only when set "
                                   "there (an unset one stays unset):\n");
        add_names_line(b,
                       docker ? "  base (not PATH: the image's): " : "  base: ",
                       base_env, count_names(base_env), docker ? "PATH" : NULL);
        const char *const *agent = agent_names(s->agent);
        if (*agent) {
            /* only the built-in agents have names: a plain word */
            luaL_addstring(b, "  agent ");
            luaL_addstring(b, s->agent);
            add_names_line(b, " (isolation.AGENT_ENV): ", agent,
                           count_names(agent), NULL);
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
    if (s->nenv_set) {
        luaL_addstring(b, "  env_set (literal values from the spec, not "
                          "shown): ");
        for (size_t i = 0; i < s->nenv_set; i++) {
            if (i)
                luaL_addstring(b, ", ");
            luaL_addstring(b, s->env_set_name[i]);
        }
        luaL_addchar(b, '\n');
    }
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
