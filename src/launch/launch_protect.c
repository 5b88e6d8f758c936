/*
 * launch_protect.c - protected paths: what in the workdir and in the agent's
 * own config a host program runs later (git hooks and config, editor tasks,
 * agent settings and commands). Each one that exists at launch is bound
 * read-only over itself inside the read-write bind that holds it
 * (--ro-bind-try: the line, not the builder, sees what exists).
 *
 * A read-only mount alone is not enough: its parent directory can still be
 * renamed with the mount inside it (tried on Linux 6.x: `mv .git .git2`
 * succeeds while .git/hooks is a mount point), and a new .git made in its
 * place. So every directory between the workdir and a protected path is
 * bound read-write over itself too: a mount point cannot be renamed or
 * removed (EBUSY), and a hard link out of a mount gives EXDEV.
 */
#include "launch/launch.h"

#include <lauxlib.h>
#include <string.h>

const char *const launch_protected_default[] = {
    ".git/hooks",
    ".git/config",
    ".git/info",
    ".git/commondir", /* redirects .git/config and hooks */
    ".gitmodules",
    ".vscode",
    ".idea",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude/commands",
    ".claude/agents",
    ".claude/hooks", /* the scripts project hooks run */
    ".claude/skills",
    ".mcp.json",
    ".codex",
    ".gemini",
    ".cursor",       /* .cursor/mcp.json starts servers */
    ".devcontainer", /* initializeCommand runs on the host */
    ".pre-commit-config.yaml",
    ".husky",
    "lefthook.yml",
    ".lefthook.yml", /* what the installed git hook runs */
    NULL};

/* Why a protect entry is refused, or NULL. */
static const char *relative_problem(const char *p, size_t len, bool docker)
{
    if (len == 0)
        return "must not be empty";
    if (memchr(p, '\0', len))
        return "must not contain NUL bytes";
    if (p[0] == '/')
        return "must be a path relative to the workdir (no leading /)";
    size_t end = p[len - 1] == '/' ? len - 1 : len;
    for (size_t i = 0; i < end;) {
        size_t j = i;
        while (j < end && p[j] != '/')
            j++;
        size_t clen = j - i;
        if (clen == 0)
            return "must not contain an empty component (//)";
        if ((clen == 1 && p[i] == '.') ||
            (clen == 2 && p[i] == '.' && p[i + 1] == '.'))
            return "must not contain . or .. components";
        i = j + 1;
    }
    if (docker && memchr(p, ':', len))
        return "must not contain ':' in mode docker (docker -v splits on it)";
    return NULL;
}

static bool listed(const char *const *list, size_t n, const char *p)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], p) == 0)
            return true;
    return false;
}

/* Pushes workdir/rel (rel of rlen bytes, workdir without a trailing /). */
static const char *push_joined(lua_State *L, const char *workdir,
                               const char *rel, size_t rlen)
{
    size_t wlen = strlen(workdir);
    if (wlen > 1 && workdir[wlen - 1] == '/')
        wlen--;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, workdir, wlen);
    luaL_addchar(&b, '/');
    luaL_addlstring(&b, rel, rlen);
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

/* Adds one entry at stack index e; every pushed string stays on the stack. */
static int add_entry(lua_State *L, int e, const char *field,
                     struct launch_spec *s)
{
    if (lua_type(L, e) != LUA_TSTRING)
        return msg_fail_got(L, e, field, "must be a string");
    size_t len;
    const char *p = lua_tolstring(L, e, &len);
    const char *why = relative_problem(p, len, s->mode == MODE_DOCKER);
    if (why)
        return msg_fail_got(L, e, field, why);
    if (p[len - 1] == '/') {
        lua_pushlstring(L, p, --len);
        p = lua_tostring(L, -1);
    }
    if (listed(s->protect, s->nprotect, p))
        return 1;
    if (s->nprotect == LAUNCH_MAX_PROTECT) {
        lua_pushfstring(L, "isolation: protect has more than %d paths",
                        LAUNCH_MAX_PROTECT);
        return 0;
    }
    s->protect[s->nprotect] = p;
    s->protect_path[s->nprotect] = push_joined(L, s->workdir, p, len);
    s->nprotect++;
    return 1;
}

/* Each directory above a protected path, once, unless itself protected. */
static int add_pins(lua_State *L, struct launch_spec *s)
{
    for (size_t i = 0; i < s->nprotect; i++) {
        const char *p = s->protect[i];
        for (const char *slash = strchr(p, '/'); slash;
             slash = strchr(slash + 1, '/')) {
            const char *pin =
                push_joined(L, s->workdir, p, (size_t)(slash - p));
            if (listed(s->pins, s->npins, pin) ||
                listed(s->protect_path, s->nprotect, pin)) {
                lua_pop(L, 1);
                continue;
            }
            if (s->npins == LAUNCH_MAX_PINS) {
                lua_pushfstring(L,
                                "isolation: protect paths have more than %d "
                                "parent directories",
                                LAUNCH_MAX_PINS);
                return 0;
            }
            s->pins[s->npins++] = pin;
        }
    }
    return 1;
}

static int read_list(lua_State *L, int v, const char *field,
                     struct launch_spec *s)
{
    lua_Integer count;
    if (!launch_array_count(L, v, field,
                            "must be an array of paths relative to the "
                            "workdir, not a map; it has the key",
                            LAUNCH_MAX_PROTECT, &count))
        return 0;
    luaL_checkstack(L, 4 * (int)count + LAUNCH_MAX_PINS + 8, "protect");
    for (lua_Integer i = 1; i <= count; i++) {
        lua_pushfstring(L, "%s[%I]", field, (LUAI_UACINT)i);
        const char *name = lua_tostring(L, -1);
        int e = lua_gettop(L) + 1;
        if (lua_rawgeti(L, v, i) == LUA_TNIL) {
            lua_pushfstring(L,
                            "isolation: %s must be an array without holes "
                            "(got nothing at %s)",
                            field, name);
            return 0;
        }
        if (!add_entry(L, e, name, s))
            return 0;
    }
    return 1;
}

static int read_default(lua_State *L, struct launch_spec *s)
{
    luaL_checkstack(L, 2 * LAUNCH_MAX_PROTECT + LAUNCH_MAX_PINS + 8, "protect");
    for (const char *const *p = launch_protected_default; *p; p++) {
        lua_pushstring(L, *p);
        if (!add_entry(L, lua_gettop(L), "isolation.PROTECTED", s))
            return 0;
    }
    return 1;
}

static int read_agent_config(lua_State *L, int idx, struct launch_spec *s)
{
    lua_getfield(L, idx, "agent_config");
    int v = lua_gettop(L);
    s->agent_config_ro = false;
    if (msg_is_absent(L, v))
        return 1;
    const char *m = lua_type(L, v) == LUA_TSTRING ? lua_tostring(L, v) : "";
    if (strcmp(m, "read-only") && strcmp(m, "read-write"))
        return msg_fail_got(L, v, "agent_config",
                            "must be \"read-write\" (the default: credentials "
                            "and state writable, the parts that configure "
                            "commands read-only) or \"read-only\"");
    s->agent_config_ro = strcmp(m, "read-only") == 0;
    return 1;
}

int launch_protect_read(lua_State *L, int idx, int module_idx,
                        struct launch_spec *s)
{
    s->nprotect = s->npins = 0;
    if (!read_agent_config(L, idx, s))
        return 0;
    lua_pushliteral(L, "protect");
    lua_rawget(L, idx);
    int v = lua_gettop(L);
    bool absent = msg_is_absent(L, v);
    if (!absent && lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, "protect",
                            "must be an array of paths relative to the workdir "
                            "({} for none)");
    if (!s->workdir)
        return 1; /* mode none: nothing is isolated, nothing to protect */
    if (absent) {
        lua_getfield(L, module_idx, "PROTECTED");
        if (lua_type(L, -1) == LUA_TTABLE) {
            if (!read_list(L, lua_gettop(L), "isolation.PROTECTED", s))
                return 0;
        } else if (!read_default(L, s)) {
            return 0;
        }
    } else if (!read_list(L, v, "protect", s)) {
        return 0;
    }
    return add_pins(L, s);
}

static void add(struct mount *out, size_t *n, enum mount_kind kind,
                const char *path, const char *why)
{
    out[*n] = (struct mount){kind, path, NULL, why};
    (*n)++;
}

size_t launch_protect_pins(const struct launch_spec *s, struct mount *out)
{
    size_t n = 0;
    for (size_t i = 0; i < s->npins; i++)
        add(out, &n, MOUNT_RW_TRY, s->pins[i],
            "protect, a parent pinned over itself: cannot be renamed or "
            "replaced, when present");
    return n;
}

size_t launch_protect_leaves(const struct launch_spec *s, struct mount *out)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nprotect; i++)
        add(out, &n, MOUNT_RO_TRY, s->protect_path[i],
            "protect, when present at launch");
    return n;
}

size_t launch_agent_mounts(const struct launch_spec *s, struct mount *out)
{
    size_t n = 0;
    for (const char *const *a = launch_agent_paths(s->agent); *a; a++)
        add(out, &n, s->agent_config_ro ? MOUNT_RO_TRY : MOUNT_RW_TRY, *a,
            s->agent_config_ro
                ? "agent config, agent_config = \"read-only\", when present"
                : "agent config, when present");
    if (s->agent_config_ro)
        return n;
    for (const char *const *a = launch_agent_protected(s->agent); *a; a++)
        add(out, &n, MOUNT_RO_TRY, *a,
            "agent config that names commands, read-only, when present");
    return n;
}

/*
 * docker orders bind mounts parent-first itself, and a pin matters there
 * too (the kernel is the same). docker creates a missing source as an empty
 * root-owned directory: isolate and the session manager give docker only
 * the protected paths that exist (docs/reference/launch-spec.md).
 */
void launch_docker_protect(struct argv_buf *b, const struct launch_spec *s)
{
    lua_State *L = b->L;
    for (size_t i = 0; i < s->npins + s->nprotect; i++) {
        bool ro = i >= s->npins;
        const char *p = ro ? s->protect_path[i - s->npins] : s->pins[i];
        argv_add(b, "-v");
        lua_pushfstring(L, "%s:%s%s", p, p, ro ? ":ro" : "");
        argv_add_top(b);
    }
}

static void add_shown(luaL_Buffer *b, lua_State *L, const char *s)
{
    msg_push_display(L, s);
    luaL_addvalue(b);
}

/* dry_run's section: each protected path and what enforces it. */
void launch_protect_describe(luaL_Buffer *b, lua_State *L,
                             const struct launch_spec *s)
{
    bool docker = s->mode == MODE_DOCKER;
    if (s->nprotect == 0) {
        luaL_addstring(b, "protected paths: none (protect = {}): the sandbox "
                          "can write .git/hooks, .git/config and every other "
                          "file in the workdir that a host program runs "
                          "later\n");
    } else {
        luaL_addstring(b, "protected paths (read-only inside; the host's "
                          "copy cannot be written, truncated, removed, "
                          "renamed, replaced, hard-linked out or chmod'ed):\n");
        for (size_t i = 0; i < s->nprotect; i++) {
            luaL_addstring(b, "  ");
            add_shown(b, L, s->protect_path[i]);
            luaL_addstring(b, docker ? "  (-v ...:ro)\n"
                                     : "  (--ro-bind-try: when present at "
                                       "launch)\n");
        }
        if (s->npins) {
            luaL_addstring(b, "  pinned parents (bound read-write over "
                              "themselves: a mount point cannot be renamed "
                              "or removed, so no new .git takes the old "
                              "one's place):\n");
            for (size_t i = 0; i < s->npins; i++) {
                luaL_addstring(b, "    ");
                add_shown(b, L, s->pins[i]);
                luaL_addchar(b, '\n');
            }
        }
        luaL_addstring(
            b, docker ? "  docker creates a missing source as an empty "
                        "root-owned directory: give docker only the "
                        "protected paths that exist (isolate and the session "
                        "manager do)\n"
                      : "  a path missing at launch is not bound (it cannot "
                        "be without creating it on the host): isolate and "
                        "the session manager check it when the session "
                        "ends and move what was created there aside "
                        "(<path>.isolation-quarantine-<time>)\n");
        luaL_addstring(b, "  git directories below the workdir (.git, bare "
                          "repositories, modules, worktrees): checked when "
                          "the session ends against what git writes (only "
                          "regular files and directories, valid HEAD and "
                          "refs, hooks only *.sample, config only the keys "
                          "git init and clone write); each failing entry "
                          "moved aside alone; a walk cut short fails the "
                          "run\n");
    }
    if (!launch_agent_paths(s->agent)[0])
        return;
    if (s->agent_config_ro) {
        luaL_addstring(b, "agent config: read-only as a whole (agent_config = "
                          "\"read-only\"): a token refresh does not persist\n");
    } else if (docker) {
        luaL_addstring(b, "agent config: read-write under docker, except "
                          "what isolate and the session manager bind "
                          "read-only at launch (ro_binds: every entry that is "
                          "not a place the agent writes, "
                          "isolation.AGENT_WRITABLE); agent_config = "
                          "\"read-only\" binds it read-only\n");
    } else {
        luaL_addstring(b, "agent config: read-write (credentials, state), "
                          "except the parts that name commands, read-only "
                          "when present:");
        for (const char *const *a = launch_agent_protected(s->agent); *a; a++) {
            luaL_addchar(b, ' ');
            luaL_addstring(b, *a);
        }
        luaL_addstring(b, "\n  isolate and the session manager also bind "
                          "read-only every other entry that is not a place "
                          "the agent writes (ro_binds; isolation."
                          "AGENT_WRITABLE), and at the end move aside what "
                          "was made elsewhere and undo ~/.claude.json's "
                          "command keys\n");
    }
}
