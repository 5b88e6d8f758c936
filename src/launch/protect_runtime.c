/*
 * protect_runtime.c - the run-time half of protected paths, for isolate and
 * the session manager (which may look; the builders may not):
 *
 *   isolation.PROTECTED, isolation.AGENT_PROTECTED, isolation.AGENT_WRITABLE,
 *   isolation.AGENT_CONFIG: the lists.
 *   isolation.protect_git(workdir) -> extra paths relative to the workdir:
 *     the real hooks and config of a .git file (worktree, submodule) and of
 *     the submodules under .git/modules, when they are inside the workdir,
 *     and what redirects the linked worktrees' git (.git/worktrees/N).
 *   isolation.protect_watch(spec [, home]) -> watch: the state, before the
 *     launch, of each protected path and each directory above it.
 *   isolation.protect_check(watch, stamp) -> moved, failed: after the
 *     session, each one that was created or replaced (a path that did not
 *     exist cannot be bound read-only without creating it on the host) is
 *     renamed aside to <path>.isolation-quarantine-<stamp>, never removed.
 *
 * Paths are walked one component at a time without following symlinks,
 * from the workdir or $HOME: a symlink the sandbox made must not lead the
 * check to rename something outside.
 */
#include "isolation.h"
#include "launch/launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GIT_MODULES_DEPTH 6

/* "missing", "dir", "file", "symlink:<target>", "other" or "unreachable". */
static void push_state(lua_State *L, const char *base, const char *rel)
{
    int fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        lua_pushliteral(L, "unreachable");
        return;
    }
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", rel);
    char *name = buf;
    for (char *slash; (slash = strchr(name, '/')); name = slash + 1) {
        *slash = '\0';
        int next =
            openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        close(fd);
        if (next < 0) {
            if (err == ENOENT)
                lua_pushliteral(L, "missing");
            else
                lua_pushliteral(L, "unreachable"); /* a symlink, a file */
            return;
        }
        fd = next;
    }
    struct stat st;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        lua_pushstring(L, errno == ENOENT ? "missing" : "unreachable");
    } else if (S_ISDIR(st.st_mode)) {
        lua_pushliteral(L, "dir");
    } else if (S_ISREG(st.st_mode)) {
        lua_pushliteral(L, "file");
    } else if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(fd, name, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = '\0';
        lua_pushfstring(L, "symlink:%s", target);
    } else {
        lua_pushliteral(L, "other");
    }
    close(fd);
}

/* Appends {base, rel, path, state} for rel and each directory above it. */
static void watch_path(lua_State *L, int watch, const char *base,
                       const char *rel)
{
    char buf[PATH_MAX];
    size_t len = strlen(rel);
    if (len >= sizeof buf)
        return;
    luaL_checkstack(L, 12, "protect_watch");
    for (size_t i = 0; i <= len; i++) {
        if (rel[i] != '/' && rel[i] != '\0')
            continue;
        memcpy(buf, rel, i);
        buf[i] = '\0';
        lua_pushfstring(L, "%s/%s", base, buf);
        const char *path = lua_tostring(L, -1);
        bool seen = false;
        lua_Integer n = (lua_Integer)lua_rawlen(L, watch);
        for (lua_Integer k = 1; k <= n && !seen; k++) {
            lua_rawgeti(L, watch, k);
            lua_getfield(L, -1, "path");
            seen = strcmp(lua_tostring(L, -1), path) == 0;
            lua_pop(L, 2);
        }
        if (seen) {
            if (i == len) { /* a parent of one path, the leaf of another */
                for (lua_Integer k = 1; k <= n; k++) {
                    lua_rawgeti(L, watch, k);
                    lua_getfield(L, -1, "path");
                    if (strcmp(lua_tostring(L, -1), path) == 0) {
                        lua_pushboolean(L, 1);
                        lua_setfield(L, -3, "leaf");
                    }
                    lua_pop(L, 2);
                }
            }
            lua_pop(L, 1);
            continue;
        }
        lua_createtable(L, 0, 5);
        lua_insert(L, -2);
        lua_setfield(L, -2, "path");
        lua_pushstring(L, base);
        lua_setfield(L, -2, "base");
        lua_pushstring(L, buf);
        lua_setfield(L, -2, "rel");
        push_state(L, base, buf);
        lua_setfield(L, -2, "state");
        lua_pushboolean(L, i == len);
        lua_setfield(L, -2, "leaf");
        lua_rawseti(L, watch, n + 1);
    }
}

static int l_protect_watch(lua_State *L)
{
    struct launch_spec s;
    const char *home = luaL_optstring(L, 2, NULL);
    if (!launch_spec_read(L, 1, lua_upvalueindex(1), -1, &s)) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    lua_newtable(L);
    int watch = lua_gettop(L);
    if (s.mode == MODE_NONE)
        return 1;
    for (size_t i = 0; i < s.nprotect; i++)
        watch_path(L, watch, s.workdir, s.protect[i]);
    if (home && home[0] == '/' && !s.agent_config_ro)
        for (const char *const *a = launch_agent_protected(s.agent); *a; a++)
            watch_path(L, watch, home, *a + strlen("$HOME/"));
    return 1;
}

/* Renames base/rel aside without replacing anything; pushes the new path. */
static bool move_aside(lua_State *L, const char *base, const char *rel,
                       const char *stamp)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    const char *name = slash ? slash + 1 : dir;
    int fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (slash) {
        *slash = '\0';
        /* the state check walked these without symlinks; walk them again */
        for (char *c = dir, *e; fd >= 0 && c; c = e) {
            e = strchr(c, '/');
            if (e)
                *e++ = '\0';
            int next =
                openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            close(fd);
            fd = next;
        }
    }
    if (fd < 0) {
        lua_pushstring(L, strerror(errno));
        return false;
    }
    for (int k = 0; k < 100; k++) {
        if (k == 0)
            lua_pushfstring(L, "%s.isolation-quarantine-%s", name, stamp);
        else
            lua_pushfstring(L, "%s.isolation-quarantine-%s-%d", name, stamp, k);
        const char *aside = lua_tostring(L, -1);
        int rc = renameat2(fd, name, fd, aside, RENAME_NOREPLACE);
        lua_pop(L, 1); /* still referenced below only through the format */
        if (rc == 0) {
            close(fd);
            if (k == 0)
                lua_pushfstring(L, "%s.isolation-quarantine-%s", rel, stamp);
            else
                lua_pushfstring(L, "%s.isolation-quarantine-%s-%d", rel, stamp,
                                k);
            lua_pushfstring(L, "%s/%s", base, lua_tostring(L, -1));
            lua_remove(L, -2);
            return true;
        }
        if (errno != EEXIST)
            break;
    }
    lua_pushstring(L, strerror(errno));
    close(fd);
    return false;
}

static int l_protect_check(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *stamp = luaL_checkstring(L, 2);
    if (strchr(stamp, '/') || strlen(stamp) > 64)
        return luaL_argerror(L, 2, "a short name without '/'");
    lua_newtable(L); /* 3: moved */
    lua_newtable(L); /* 4: failed */
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        int e = lua_gettop(L);
        lua_getfield(L, e, "base");
        lua_getfield(L, e, "rel");
        lua_getfield(L, e, "state");
        const char *base = lua_tostring(L, e + 1);
        const char *rel = lua_tostring(L, e + 2);
        const char *was = lua_tostring(L, e + 3);
        if (!base || !rel || !was)
            return luaL_argerror(L, 1, "not a watch from protect_watch");
        push_state(L, base, rel);
        const char *now = lua_tostring(L, -1);
        lua_getfield(L, e, "leaf");
        bool leaf = lua_toboolean(L, -1);
        lua_pop(L, 1);
        /*
         * A new plain directory above a protected path runs nothing by
         * itself (the agent's .claude/ memory lives there): only what it
         * leads to is checked. A new symlink there is moved aside.
         */
        bool harmless_parent = !leaf && strcmp(now, "dir") == 0;
        if (strcmp(now, was) == 0 || strcmp(now, "missing") == 0 ||
            strcmp(now, "unreachable") == 0 || harmless_parent) {
            lua_settop(L, 4);
            continue;
        }
        lua_createtable(L, 0, 4);
        lua_getfield(L, e, "path");
        lua_setfield(L, -2, "path");
        lua_pushvalue(L, e + 3);
        lua_setfield(L, -2, "was");
        lua_pushvalue(L, -2);
        lua_setfield(L, -2, "now");
        bool ok = move_aside(L, base, rel, stamp);
        lua_setfield(L, -2, ok ? "moved_to" : "error");
        lua_rawseti(L, ok ? 3 : 4, (lua_Integer)lua_rawlen(L, ok ? 3 : 4) + 1);
        lua_settop(L, 4);
    }
    return 2;
}

/*
 * A regular file opened for reading, or NULL. A sandbox may have left a
 * FIFO where git keeps a file (a docker session, whose missing protected
 * paths nothing checks): an open that waits for a writer would hang the
 * next launch.
 */
static FILE *open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        f = fdopen(fd, "r");
    if (!f)
        close(fd);
    return f;
}

/* Pushes the first line of base/rel after "gitdir: ", or returns false. */
static bool read_gitdir(lua_State *L, const char *path, const char *key)
{
    FILE *f = open_regular(path);
    if (!f)
        return false;
    char line[PATH_MAX];
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok)
        return false;
    line[strcspn(line, "\r\n")] = '\0';
    size_t klen = strlen(key);
    if (key[0] && strncmp(line, key, klen) != 0)
        return false;
    lua_pushstring(L, line + klen);
    return true;
}

/* rel of a gitdir (absolute or relative to dir) inside the workdir, or -. */
static bool push_inside(lua_State *L, const char *real_workdir, const char *dir,
                        const char *target)
{
    char joined[PATH_MAX], real[PATH_MAX];
    if (target[0] == '/')
        snprintf(joined, sizeof joined, "%s", target);
    else
        snprintf(joined, sizeof joined, "%s/%s", dir, target);
    if (!realpath(joined, real))
        return false;
    size_t wl = strlen(real_workdir);
    if (strncmp(real, real_workdir, wl) != 0 || real[wl] != '/')
        return false;
    lua_pushstring(L, real + wl + 1);
    return true;
}

static void add_git_dir(lua_State *L, int out, const char *rel)
{
    static const char *const parts[] = {"hooks", "config", "info", "commondir",
                                        NULL};
    for (const char *const *p = parts; *p; p++) {
        lua_pushfstring(L, "%s/%s", rel, *p);
        lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
    }
}

/* Each submodule gitdir under workdir/rel/modules, depth-limited. */
static void add_modules(lua_State *L, int out, const char *workdir,
                        const char *rel, int depth)
{
    if (depth > GIT_MODULES_DEPTH)
        return;
    luaL_checkstack(L, 8, "git modules");
    DIR *d = opendir(lua_pushfstring(L, "%s/%s/modules", workdir, rel));
    lua_pop(L, 1);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        const char *sub = lua_pushfstring(L, "%s/modules/%s", rel, de->d_name);
        const char *head = lua_pushfstring(L, "%s/%s/HEAD", workdir, sub);
        struct stat st;
        if (lstat(head, &st) == 0 && S_ISREG(st.st_mode))
            add_git_dir(L, out, sub);
        add_modules(L, out, workdir, sub, depth + 1);
        lua_pop(L, 2);
    }
    closedir(d);
}

/*
 * The git dirs of linked worktrees, .git/worktrees/N: git run in such a
 * worktree (often outside the workdir) reads N/commondir to find the config
 * and hooks it uses, and N/config.worktree when the config enables it.
 */
static void add_worktrees(lua_State *L, int out, const char *workdir)
{
    luaL_checkstack(L, 8, "git worktrees");
    DIR *d = opendir(lua_pushfstring(L, "%s/.git/worktrees", workdir));
    lua_pop(L, 1);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        lua_pushfstring(L, ".git/worktrees/%s/commondir", de->d_name);
        lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
        lua_pushfstring(L, ".git/worktrees/%s/config.worktree", de->d_name);
        lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
    }
    closedir(d);
}

/*
 * A relative path without . or .. components (not there yet: its creation
 * is what the end check must see), with one trailing slash dropped.
 */
static bool push_plain_relative(lua_State *L, const char *v)
{
    size_t n = strlen(v);
    if (n > 1 && v[n - 1] == '/')
        n--;
    if (v[0] == '/' || v[0] == '~' || n == 0)
        return false;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && v[j] != '/')
            j++;
        size_t c = j - i;
        if (c == 0 || (c == 1 && v[i] == '.') ||
            (c == 2 && v[i] == '.' && v[i + 1] == '.'))
            return false;
        i = j + 1;
    }
    lua_pushlstring(L, v, n);
    return true;
}

/* Lowercased, trimmed copy of [b, e) into out (size n). */
static void lower_trim(char *out, size_t n, const char *b, const char *e)
{
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    size_t k = 0;
    for (; b < e && k + 1 < n; b++)
        out[k++] = (char)(*b >= 'A' && *b <= 'Z' ? *b + 32 : *b);
    out[k] = '\0';
}

/*
 * core.hooksPath of the git config at path, when it names a directory
 * inside the workdir (git runs the hooks there: a .githooks or .husky in
 * the worktree, writable unless protected). Includes are not followed.
 */
static void add_hooks_path(lua_State *L, int out, const char *real_workdir,
                           const char *config)
{
    FILE *f = open_regular(config);
    if (!f)
        return;
    char line[PATH_MAX], section[64] = "", key[64];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *b = line + strspn(line, " \t");
        if (*b == '[') {
            char *e = b + 1 + strcspn(b + 1, "] \t\"");
            lower_trim(section, sizeof section, b + 1, e);
            continue;
        }
        char *eq = strchr(b, '=');
        if (!eq || strcmp(section, "core") != 0)
            continue;
        lower_trim(key, sizeof key, b, eq);
        if (strcmp(key, "hookspath") != 0)
            continue;
        char *v = eq + 1 + strspn(eq + 1, " \t");
        size_t vl = strcspn(v, "#;\r");
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
            v++;
            vl -= 2;
        }
        v[vl] = '\0';
        if (v[0] && (push_inside(L, real_workdir, real_workdir, v) ||
                     push_plain_relative(L, v)))
            lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
    }
    fclose(f);
}

static int done(lua_State *L, int out)
{
    lua_settop(L, out);
    return 1;
}

static int l_protect_git(lua_State *L)
{
    const char *workdir = luaL_checkstring(L, 1);
    lua_newtable(L);
    int out = lua_gettop(L);
    char real_workdir[PATH_MAX];
    if (!realpath(workdir, real_workdir))
        return done(L, out);
    const char *dotgit = lua_pushfstring(L, "%s/.git", real_workdir);
    struct stat st;
    if (lstat(dotgit, &st) < 0)
        return done(L, out);
    if (S_ISDIR(st.st_mode)) {
        add_modules(L, out, real_workdir, ".git", 0);
        add_worktrees(L, out, real_workdir);
        add_hooks_path(L, out, real_workdir,
                       lua_pushfstring(L, "%s/config", dotgit));
        return done(L, out);
    }
    if (!S_ISREG(st.st_mode))
        return done(L, out);
    /* a worktree or a submodule: the pointer itself is protected */
    lua_pushliteral(L, ".git");
    lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
    if (!read_gitdir(L, dotgit, "gitdir: "))
        return done(L, out);
    if (!push_inside(L, real_workdir, real_workdir, lua_tostring(L, -1)))
        return done(L, out);
    const char *gitdir = lua_tostring(L, -1);
    add_git_dir(L, out, gitdir);
    add_modules(L, out, real_workdir, gitdir, 0);
    /* a linked worktree: hooks and config are in its common dir */
    const char *cpath =
        lua_pushfstring(L, "%s/%s/commondir", real_workdir, gitdir);
    const char *gdir = lua_pushfstring(L, "%s/%s", real_workdir, gitdir);
    add_hooks_path(L, out, real_workdir, lua_pushfstring(L, "%s/config", gdir));
    if (read_gitdir(L, cpath, "") &&
        push_inside(L, real_workdir, gdir, lua_tostring(L, -1)))
        add_git_dir(L, out, lua_tostring(L, -1));
    return done(L, out);
}

static void push_list(lua_State *L, const char *const *list, size_t skip)
{
    lua_newtable(L);
    for (lua_Integer i = 0; list[i]; i++) {
        lua_pushstring(L, list[i] + skip);
        lua_rawseti(L, -2, i + 1);
    }
}

void isolation_protect_open(lua_State *L)
{
    push_list(L, launch_protected_default, 0);
    lua_setfield(L, -2, "PROTECTED");
    lua_newtable(L);
    static const char *const agents[] = {"claude", "codex", "gemini", NULL};
    for (const char *const *a = agents; *a; a++) {
        push_list(L, launch_agent_protected(*a), 0);
        lua_setfield(L, -2, *a);
    }
    lua_setfield(L, -2, "AGENT_PROTECTED");
    lua_newtable(L);
    for (const char *const *a = agents; *a; a++) {
        push_list(L, launch_agent_writable(*a), 0);
        lua_setfield(L, -2, *a);
    }
    lua_setfield(L, -2, "AGENT_WRITABLE");
    lua_newtable(L);
    for (const char *const *a = agents; *a; a++) {
        push_list(L, launch_agent_paths(*a), 0);
        lua_setfield(L, -2, *a);
    }
    lua_setfield(L, -2, "AGENT_CONFIG");
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_protect_watch, 1);
    lua_setfield(L, -2, "protect_watch");
    lua_pushcfunction(L, l_protect_check);
    lua_setfield(L, -2, "protect_check");
    lua_pushcfunction(L, l_protect_git);
    lua_setfield(L, -2, "protect_git");
}
