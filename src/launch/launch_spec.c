/*
 * launch_spec.c - reads a launch spec table into a struct launch_spec and
 * refuses anything a builder could turn into a leak: a relative path, a path
 * with . or .. components (/tmp/. is /tmp), a bind of a directory that holds
 * other users' files or sockets, a NUL byte, an unknown key (a misspelt
 * ro_binds would silently drop a read-only mount).
 */
#include "isolation.h"
#include "launch/config.h"
#include "launch/launch.h"
#include "strarg.h"

#include <stdio.h>
#include <string.h>

static const char *const spec_keys[] = {
    "config",     "agent",        "workdir", "command",    "proxy_socket",
    "proxy_port", "socks_port",   "binds",   "ro_binds",   "ca_cert",
    "bridge",     "bridge_path",  "tty",     "seccomp_fd", "seccomp_file",
    "protect",    "agent_config", "limits",  "limits_via", "reap",
    "mask_files", "mask_dirs",    "tools",   NULL};

/*
 * Host paths that are never bound, as a workdir or a bind: the root, the
 * system directories the sandbox already gets read-only (a read-write bind
 * would let it change the host's), directories full of other programs'
 * sockets (/run, /var/run, /tmp, /var/tmp), the parents of home directories,
 * and the whole of $HOME.
 */
static const char *const forbidden_paths[] = {
    "/",        "/bin",     "/boot",    "/dev",    "/etc",  "/home",
    "/lib",     "/lib32",   "/lib64",   "/libx32", "/proc", "/root",
    "/run",     "/sbin",    "/sys",     "/tmp",    "/usr",  "/var",
    "/var/run", "/var/tmp", "/var/lib", "$HOME",   NULL};

/* Trees whose every path is a view of the host's kernel or devices. */
static const char *const forbidden_trees[] = {"/proc/", "/sys/", "/dev/", NULL};

/*
 * Where a read-write bind (the workdir, binds) is refused as well: inside
 * the host's system trees (as root, a writable /etc/cron.d or /usr/bin is
 * code execution on the host; /run and /var/spool hold other programs'
 * sockets and queues), and at the roots of trees that hold other
 * programs' or users' data. Every top-level /lib* directory (/lib, /lib64,
 * /lib32, /libx32, /libexec, ...) counts as system. The path was checked
 * for //, . and .. already, so comparing its text is comparing the path.
 */
static const char *const rw_forbidden_trees[] = {
    "/usr/",  "/etc/", "/bin/", "/sbin/",    "/boot/",      "/dev/",
    "/proc/", "/sys/", "/run/", "/var/run/", "/var/spool/", NULL};
static const char *const rw_forbidden_paths[] = {"/opt", "/srv", "/var/spool",
                                                 NULL};

/* Pushes spec[key] (raw) and returns its absolute stack index. */
static int get_field(lua_State *L, int idx, const char *key)
{
    lua_pushstring(L, key);
    lua_rawget(L, idx);
    return lua_gettop(L);
}

/* A string without NUL bytes; empty allowed only when allow_empty. */
static int check_string(lua_State *L, int v, const char *field,
                        bool allow_empty, const char **out)
{
    size_t len;
    if (lua_type(L, v) != LUA_TSTRING)
        return msg_fail_got(L, v, field, "must be a string");
    const char *s = strarg_get(L, v, field, &len);
    if (!s)
        return 0;
    if (!allow_empty && len == 0)
        return msg_fail_got(L, v, field, "must not be empty");
    *out = s;
    return 1;
}

/* Why the path is refused, or NULL. */
static const char *path_problem(const char *p, bool home_ok, bool docker)
{
    const char *rest = p;
    if (home_ok && strncmp(p, "$HOME", 5) == 0 && (p[5] == '/' || !p[5])) {
        rest = p + 5;
    } else if (p[0] != '/') {
        return home_ok ? "must be an absolute path or start with $HOME/"
                       : "must be an absolute path";
    }
    size_t n = strlen(rest);
    size_t end = n > 0 && rest[n - 1] == '/' ? n - 1 : n;
    for (size_t i = 0; i < end;) {
        /* rest[i] is '/': look at the component after it */
        size_t j = i + 1;
        while (j < end && rest[j] != '/')
            j++;
        size_t clen = j - i - 1;
        if (clen == 0)
            return "must not contain an empty component (//)";
        if ((clen == 1 && rest[i + 1] == '.') ||
            (clen == 2 && rest[i + 1] == '.' && rest[i + 2] == '.'))
            return "must not contain . or .. components";
        i = j;
    }
    size_t plen = strlen(p);
    size_t cmp_len = plen > 1 && p[plen - 1] == '/' ? plen - 1 : plen;
    for (const char *const *f = forbidden_paths; *f; f++)
        if (strlen(*f) == cmp_len && strncmp(p, *f, cmp_len) == 0)
            return "must not be /, a system directory, /run, /var/run, "
                   "/tmp, /var/tmp, /home, /root or $HOME itself: the "
                   "sandbox would see or change what every other program "
                   "keeps there";
    for (const char *const *t = forbidden_trees; *t; t++)
        if (strncmp(p, *t, strlen(*t)) == 0)
            return "must not be under /proc, /sys or /dev: those are views "
                   "of the host's kernel and devices";
    if (docker && strchr(p, ':'))
        return "must not contain ':' in mode docker (docker -v splits on it)";
    return NULL;
}

static int check_path(lua_State *L, int v, const char *field, bool home_ok,
                      bool docker, const char **out)
{
    if (!check_string(L, v, field, false, out))
        return 0;
    const char *why = path_problem(*out, home_ok, docker);
    if (why)
        return msg_fail_got(L, v, field, why);
    return 1;
}

/* Why a read-write bind of the (otherwise valid) path p is refused, or NULL. */
static const char *rw_path_problem(const char *p)
{
    if (p[0] != '/')
        return NULL; /* $HOME/...: inside the home, never a system tree */
    size_t len = strlen(p);
    if (len > 1 && p[len - 1] == '/')
        len--;
    bool refused = strncmp(p, "/lib", 4) == 0;
    for (const char *const *t = rw_forbidden_trees; *t && !refused; t++)
        refused = strncmp(p, *t, strlen(*t)) == 0;
    for (const char *const *f = rw_forbidden_paths; *f && !refused; f++)
        refused = strlen(*f) == len && strncmp(p, *f, len) == 0;
    if (!refused)
        return NULL;
    return "must not be read-write inside /usr, /etc, /bin, /sbin, /lib*, "
           "/boot, /dev, /proc, /sys, /run, /var/run or /var/spool, nor at "
           "/, /var, /var/lib, /opt, /srv or /home themselves: the sandbox "
           "could change the host's system (as root, /etc/cron.d is code "
           "execution); accepted: a directory elsewhere, such as under "
           "$HOME, /tmp, /srv/NAME or /var/lib/NAME/workspace";
}

/* check_path, then the read-write rules (the workdir, binds). */
static int check_rw_path(lua_State *L, int v, const char *field, bool home_ok,
                         bool docker, const char **out)
{
    if (!check_path(L, v, field, home_ok, docker, out))
        return 0;
    const char *why = rw_path_problem(*out);
    if (why)
        return msg_fail_got(L, v, field, why);
    return 1;
}

int launch_array_count(lua_State *L, int v, const char *field,
                       const char *not_array, lua_Integer max,
                       lua_Integer *count)
{
    *count = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
        lua_pop(L, 1);
        ++*count;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
            return msg_fail_got(L, -1, field, not_array);
    }
    if (*count > max) {
        lua_pushfstring(L, "isolation: %s has %I entries (at most %I)", field,
                        (LUAI_UACINT)*count, (LUAI_UACINT)max);
        return 0;
    }
    return 1;
}

static int check_bind_list(lua_State *L, int v, const char *field, bool docker,
                           bool rw, const char **out, size_t *n)
{
    *n = 0;
    if (msg_is_absent(L, v))
        return 1;
    if (lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, field, "must be an array of paths");
    lua_Integer count;
    if (!launch_array_count(L, v, field,
                            "must be an array of paths, not a map; it has "
                            "the key",
                            LAUNCH_MAX_BINDS, &count))
        return 0;
    /* each element and its name stay on the stack while the spec is used */
    luaL_checkstack(L, 2 * (int)count + 8, "too many binds");
    for (lua_Integer i = 1; i <= count; i++) {
        lua_pushfstring(L, "%s[%I]", field, (LUAI_UACINT)i);
        const char *name = lua_tostring(L, -1);
        int e = lua_gettop(L) + 1;
        if (lua_rawgeti(L, v, i) == LUA_TNIL) {
            lua_pushfstring(L,
                            "isolation: %s must be an array of paths without "
                            "holes (got nothing at %s)",
                            field, name);
            return 0;
        }
        if (!(rw ? check_rw_path : check_path)(L, e, name, true, docker,
                                               &out[i - 1]))
            return 0;
        /* the element stays on the stack: out[] points into it */
    }
    *n = (size_t)count;
    return 1;
}

static int check_keys(lua_State *L, int idx)
{
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t len;
            const char *key = strarg_get(L, -1, "launch spec key", &len);
            if (!key)
                return 0;
            for (const char *const *k = spec_keys; *k && !known; k++)
                known = strarg_is(key, len, *k);
            if (!known)
                known = launch_env_is_key(key);
            if (!known)
                known = strarg_is(key, len, "gpu"); /* launch_gpu.c */
        }
        if (!known) {
            msg_push_got(L, -1);
            lua_pushfstring(L,
                            "isolation: launch spec key %s is unknown "
                            "(accepted: config, agent, workdir, command, "
                            "proxy_socket, proxy_port, socks_port, binds, "
                            "ro_binds, "
                            "ca_cert, bridge, bridge_path, tty, "
                            "seccomp_fd, seccomp_file, env_pass, env_set, "
                            "env_inherit, protect, agent_config, limits, "
                            "limits_via, reap, gpu, mask_files, mask_dirs, "
                            "tools, routes)",
                            lua_tostring(L, -1));
            return 0;
        }
    }
    return 1;
}

static int read_config(lua_State *L, int idx, int forced, struct launch_spec *s)
{
    int v = get_field(L, idx, "config");
    if (!msg_is_absent(L, v) && lua_type(L, v) != LUA_TTABLE)
        return msg_fail_got(L, v, "config", "must be a table");
    if (!config_normalize(L, v))
        return 0;
    int cfg = lua_gettop(L);
    lua_getfield(L, cfg, "mode");
    const char *mode = lua_tostring(L, -1);
    s->podman = strcmp(mode, "podman") == 0;
    s->mode = strcmp(mode, "bwrap") == 0                 ? MODE_BWRAP
              : strcmp(mode, "docker") == 0 || s->podman ? MODE_DOCKER
                                                         : MODE_NONE;
    if (forced >= 0) {
        s->mode = (enum launch_mode)forced;
        s->podman = false; /* docker_argv is docker's */
    }
    lua_getfield(L, cfg, "network");
    s->deny = strcmp(lua_tostring(L, -1), "deny") == 0;
    s->none = strcmp(lua_tostring(L, -1), "none") == 0;
    /* docker_argv with a config of another mode: its image, checked above */
    s->docker_image = "debian:bookworm-slim";
    if (lua_getfield(L, cfg, "docker_image") == LUA_TSTRING)
        s->docker_image = lua_tostring(L, -1);
    else if (lua_type(L, v) == LUA_TTABLE &&
             lua_getfield(L, v, "docker_image") == LUA_TSTRING &&
             lua_rawlen(L, -1) > 0)
        s->docker_image = lua_tostring(L, -1);
    return 1;
}

static int read_port(lua_State *L, int idx, const char *field, int dflt,
                     int *out)
{
    int v = get_field(L, idx, field);
    *out = dflt;
    if (msg_is_absent(L, v))
        return 1;
    int ok = 0;
    lua_Integer port = 0;
    if (lua_type(L, v) == LUA_TNUMBER)
        port = lua_tointegerx(L, v, &ok);
    /* the sandbox has no capability: it cannot listen below 1024 */
    if (!ok || port < 1024 || port > 65535)
        return msg_fail_got(L, v, field, "must be an integer 1024..65535");
    *out = (int)port;
    return 1;
}

/* The bridge's two listeners: the HTTP proxy port and the SOCKS5 port. */
static int read_ports(lua_State *L, int idx, struct launch_spec *s)
{
    if (!read_port(L, idx, "proxy_port", DEFAULT_PROXY_PORT, &s->proxy_port) ||
        !read_port(L, idx, "socks_port", DEFAULT_SOCKS_PORT, &s->socks_port))
        return 0;
    if (s->socks_port != s->proxy_port)
        return 1;
    int v = get_field(L, idx, "socks_port");
    char what[160];
    snprintf(what, sizeof what,
             "must be an integer 1024..65535 other than proxy_port (%d): "
             "both bridge listeners are on 127.0.0.1%s",
             s->proxy_port,
             msg_is_absent(L, v) ? "; its default is 1080, give another" : "");
    return msg_fail_got(L, v, "socks_port", what);
}

/*
 * The descriptor bwrap reads a seccomp program from (--seccomp N), which
 * the caller opens in the process it starts the line in. Only an integer:
 * a descriptor comes from the process, not from JSON, and 3.0 is more
 * likely a computation gone wrong than a descriptor. Not 0, 1 or 2: bwrap
 * would read the terminal until EOF and close it. Accepted in every mode,
 * used by bwrap only.
 */
static int read_seccomp_fd(lua_State *L, int idx, struct launch_spec *s)
{
    int v = get_field(L, idx, "seccomp_fd");
    s->seccomp_fd = -1;
    if (msg_is_absent(L, v))
        return 1;
    lua_Integer fd = lua_isinteger(L, v) ? lua_tointeger(L, v) : -1;
    if (fd < SECCOMP_FD_MIN || fd > SECCOMP_FD_MAX)
        return msg_fail_got(
            L, v, "seccomp_fd",
            "must be an integer 3..1023: the descriptor bwrap "
            "reads the seccomp program from (0, 1 and 2 are the "
            "terminal)");
    s->seccomp_fd = (int)fd;
    return 1;
}

/*
 * A file holding the seccomp program, which the wrap() line opens on the
 * descriptor (seccomp_fd, else 3) with a redirection. The host's shell
 * reads it, so: an absolute path, never the $HOME token (the same rules as
 * ca_cert; under /dev or /proc it could be the terminal, which bwrap would
 * read until EOF). The descriptor must be one digit: a POSIX shell need
 * read no more there, and dash reads `15<f` as the word 15 and a
 * redirection of stdin. Accepted in every mode, used by bwrap only.
 */
static int read_seccomp_file(lua_State *L, int idx, struct launch_spec *s)
{
    int v = get_field(L, idx, "seccomp_file");
    if (msg_is_absent(L, v))
        return 1;
    if (!check_path(L, v, "seccomp_file", false, false, &s->seccomp_file))
        return 0;
    if (s->seccomp_fd < 0) {
        s->seccomp_fd = SECCOMP_FD_DEFAULT;
    } else if (s->seccomp_fd > SECCOMP_FD_REDIRECT_MAX) {
        return msg_fail_got(L, get_field(L, idx, "seccomp_fd"), "seccomp_fd",
                            "must be 3..9 with seccomp_file: the wrap() line "
                            "opens the file with a redirection N<, and a POSIX "
                            "shell need read only one digit there (dash "
                            "does)");
    }
    return 1;
}

/*
 * reap (default true): a local bwrap, docker or podman line runs behind the
 * bridge program's reaper (bridge/reap.c), which returns only once every
 * process of the sandbox is gone (a container: removed by its engine). The
 * program is bridge_path, else isolation.BRIDGE; a line without one is
 * refused rather than built without its end. false: a line for another
 * host (ssh_argv), where the program is not.
 */
static int read_reap(lua_State *L, int idx, int module_idx,
                     struct launch_spec *s)
{
    int v = get_field(L, idx, "reap");
    bool reap = true;
    if (!msg_is_absent(L, v)) {
        if (lua_type(L, v) != LUA_TBOOLEAN)
            return msg_fail_got(L, v, "reap", "must be a boolean");
        reap = lua_toboolean(L, v);
    }
    s->reap_path = NULL;
    if (!reap || s->mode == MODE_NONE)
        return 1;
    const char *path = s->bridge_path;
    if (!path) {
        v = get_field(L, module_idx, "BRIDGE");
        if (lua_type(L, v) == LUA_TSTRING &&
            !check_path(L, v, "isolation.BRIDGE", false, false, &path))
            return 0;
    }
    if (!path) {
        lua_pushstring(L, s->mode == MODE_DOCKER
                              ? "isolation: a docker or podman line ends its "
                                "container with the bridge program (and "
                                "enforces limits.time with it): "
                                "isolation.BRIDGE is not set (the bridge "
                                "program was not built); give bridge_path "
                                "(got nil)"
                              : "isolation: a bwrap line ends its sandbox's "
                                "processes with the bridge program: "
                                "isolation.BRIDGE is not set (the bridge "
                                "program was not built); give bridge_path "
                                "(got nil)");
        return 0;
    }
    /* the line's first word comes out of a command substitution, which
     * drops a trailing newline */
    size_t len = strlen(path);
    if (len > 0 && path[len - 1] == '\n') {
        lua_pushstring(L, path);
        return msg_fail_got(L, lua_gettop(L),
                            s->bridge_path ? "bridge_path" : "isolation.BRIDGE",
                            "must not end with a newline: a bwrap line runs "
                            "it as its first word");
    }
    s->reap_path = path;
    return 1;
}

static int read_bridge(lua_State *L, int idx, int module_idx,
                       struct launch_spec *s)
{
    static const char accepted[] = "must be \"socat\", \"builtin\" or \"pass\"";
    int v = get_field(L, idx, "bridge");
    const char *bridge = "socat";
    if (!msg_is_absent(L, v)) {
        if (lua_type(L, v) != LUA_TSTRING)
            return msg_fail_got(L, v, "bridge", accepted);
        size_t len;
        if (!(bridge = strarg_get(L, v, "bridge", &len)))
            return 0;
        if (!strarg_is(bridge, len, "socat") &&
            !strarg_is(bridge, len, "builtin") &&
            !strarg_is(bridge, len, "pass"))
            return msg_fail_got(L, v, "bridge", accepted);
    }
    s->bridge = strcmp(bridge, "builtin") == 0 ? BRIDGE_BUILTIN
                : strcmp(bridge, "pass") == 0  ? BRIDGE_PASS
                                               : BRIDGE_SOCAT;
    /* pass runs the same program (its --pass starter). */
    bool program = s->bridge != BRIDGE_SOCAT;

    const char *path = NULL;
    v = get_field(L, idx, "bridge_path");
    if (!msg_is_absent(L, v)) {
        if (!check_path(L, v, "bridge_path", false, false, &path))
            return 0;
    } else if (program) {
        v = get_field(L, module_idx, "BRIDGE");
        if (lua_type(L, v) == LUA_TSTRING &&
            !check_path(L, v, "isolation.BRIDGE", false, false, &path))
            return 0;
    }
    /* The image's socat cannot be relied on: docker deny needs the built-in
     * bridge program, mounted like under bwrap (static: any image runs it),
     * as the relay (builtin, the default) or the starter (pass). */
    if (s->mode == MODE_DOCKER && s->deny) {
        if (!msg_is_absent(L, get_field(L, idx, "bridge")) &&
            s->bridge == BRIDGE_SOCAT)
            return msg_fail_got(
                L, get_field(L, idx, "bridge"), "bridge",
                "must be \"builtin\" or \"pass\" (or not given) "
                "under mode docker or podman with network "
                "deny: the image may have no socat");
        if (s->bridge == BRIDGE_SOCAT)
            s->bridge = BRIDGE_BUILTIN;
        program = true;
        if (!path) {
            v = get_field(L, module_idx, "BRIDGE");
            if (lua_type(L, v) == LUA_TSTRING &&
                !check_path(L, v, "isolation.BRIDGE", false, true, &path))
                return 0;
        }
    }
    if (s->mode == MODE_DOCKER && s->deny && !path) {
        lua_pushliteral(L, "isolation: network \"deny\" under docker or podman "
                           "needs the built-in bridge: isolation.BRIDGE is "
                           "not set (the bridge program was not built); give "
                           "bridge_path (got nil)");
        return 0;
    }
    if (program && s->mode == MODE_BWRAP && s->deny && !path) {
        lua_pushfstring(L,
                        "isolation: bridge \"%s\" needs bridge_path: "
                        "isolation.BRIDGE is not set (the bridge program "
                        "was not built); use bridge \"socat\" or give "
                        "bridge_path (got nil)",
                        bridge);
        return 0;
    }
    s->bridge_path = program ? path : NULL;
    return 1;
}

/*
 * docker -v splits on ':': the proxy socket and the bridge program, mounted
 * only under deny, are held to the rule the other docker paths follow.
 */
static int check_docker_deny_paths(lua_State *L, const struct launch_spec *s)
{
    const char *field = strchr(s->proxy_socket, ':')  ? "proxy_socket"
                        : strchr(s->bridge_path, ':') ? "bridge_path"
                                                      : NULL;
    if (!field)
        return 1;
    const char *p = field[0] == 'p' ? s->proxy_socket : s->bridge_path;
    msg_push_quoted(L, p, strlen(p));
    lua_pushfstring(L,
                    "isolation: %s must not contain ':' in mode docker or "
                    "podman (docker -v splits on it) (got %s)",
                    field, lua_tostring(L, -1));
    return 0;
}

/* Same path, ignoring one trailing slash. */
static bool same_path(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 1 && a[la - 1] == '/')
        la--;
    if (lb > 1 && b[lb - 1] == '/')
        lb--;
    return la == lb && strncmp(a, b, la) == 0;
}

/*
 * docker refuses a mount point given twice, and unlike bwrap has no order
 * that would say which one wins: refuse it here, naming both.
 */
static int check_docker_duplicates(lua_State *L, const struct launch_spec *s)
{
    const char *paths[LAUNCH_MAX_MOUNTS];
    char names[LAUNCH_MAX_MOUNTS][40];
    size_t n = 0;
    snprintf(names[n], sizeof names[n], "workdir");
    paths[n++] = s->workdir;
    for (const char *const *a = launch_agent_paths(s->agent); *a; a++) {
        snprintf(names[n], sizeof names[n], "agent %s config", s->agent);
        paths[n++] = *a;
    }
    for (size_t i = 0; i < s->nbinds; i++) {
        snprintf(names[n], sizeof names[n], "binds[%zu]", i + 1);
        paths[n++] = s->binds[i];
    }
    for (size_t i = 0; i < s->nro_binds; i++) {
        snprintf(names[n], sizeof names[n], "ro_binds[%zu]", i + 1);
        paths[n++] = s->ro_binds[i];
    }
    for (size_t i = 0; i < s->ntools; i++) {
        snprintf(names[n], sizeof names[n], "tools[%zu]", i + 1);
        paths[n++] = s->tools[i];
    }
    if (s->ca_cert) {
        snprintf(names[n], sizeof names[n], "ca_cert");
        paths[n++] = s->ca_cert;
    }
    for (size_t i = 0; i < s->npins + s->nprotect; i++) {
        snprintf(names[n], sizeof names[n], "protect (%s)",
                 i < s->npins ? "a pinned parent" : "a protected path");
        paths[n++] = i < s->npins ? s->pins[i] : s->protect_path[i - s->npins];
    }
    for (size_t i = 1; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (same_path(paths[i], paths[j])) {
                msg_push_quoted(L, paths[i], strlen(paths[i]));
                lua_pushfstring(L,
                                "isolation: %s mounts the same path as %s "
                                "(got %s); docker refuses a mount point "
                                "given twice",
                                names[i], names[j], lua_tostring(L, -1));
                return 0;
            }
    return 1;
}

int launch_spec_read(lua_State *L, int idx, int module_idx, int forced,
                     struct launch_spec *s)
{
    idx = lua_absindex(L, idx);
    module_idx = lua_absindex(L, module_idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    luaL_checkstack(L, 48, "launch spec");
    memset(s, 0, sizeof *s);
    if (!check_keys(L, idx) || !read_config(L, idx, forced, s))
        return 0;
    bool docker = s->mode == MODE_DOCKER;

    int v = get_field(L, idx, "agent");
    if (!msg_is_absent(L, v) && !check_string(L, v, "agent", true, &s->agent))
        return 0;

    v = get_field(L, idx, "workdir");
    if (!msg_is_absent(L, v)) {
        if (!check_rw_path(L, v, "workdir", false, docker, &s->workdir))
            return 0;
    } else if (s->mode != MODE_NONE) {
        return msg_fail_got(L, v, "workdir",
                            "must be an absolute path (required for modes "
                            "bwrap and docker)");
    }

    v = get_field(L, idx, "command");
    if (msg_is_absent(L, v))
        return msg_fail_got(L, v, "command",
                            "is required (the agent's command "
                            "line, run as bash -c command)");
    if (!check_string(L, v, "command", false, &s->command))
        return 0;

    v = get_field(L, idx, "proxy_socket");
    if (!msg_is_absent(L, v) &&
        !check_path(L, v, "proxy_socket", false, false, &s->proxy_socket))
        return 0;
    if (!read_ports(L, idx, s))
        return 0;

    v = get_field(L, idx, "binds");
    if (!check_bind_list(L, v, "binds", docker, true, s->binds, &s->nbinds))
        return 0;
    v = get_field(L, idx, "ro_binds");
    if (!check_bind_list(L, v, "ro_binds", docker, false, s->ro_binds,
                         &s->nro_binds))
        return 0;

    v = get_field(L, idx, "tools");
    if (!check_bind_list(L, v, "tools", docker, false, s->tools, &s->ntools))
        return 0;

    v = get_field(L, idx, "mask_files");
    if (!check_bind_list(L, v, "mask_files", docker, false, s->mask_files,
                         &s->nmask_files))
        return 0;
    v = get_field(L, idx, "mask_dirs");
    if (!check_bind_list(L, v, "mask_dirs", docker, false, s->mask_dirs,
                         &s->nmask_dirs))
        return 0;

    v = get_field(L, idx, "ca_cert");
    if (!msg_is_absent(L, v) &&
        !check_path(L, v, "ca_cert", false, docker, &s->ca_cert))
        return 0;

    if (!read_bridge(L, idx, module_idx, s))
        return 0;

    if (!read_reap(L, idx, module_idx, s))
        return 0;

    v = get_field(L, idx, "tty");
    s->tty = true;
    if (!msg_is_absent(L, v)) {
        if (lua_type(L, v) != LUA_TBOOLEAN)
            return msg_fail_got(L, v, "tty", "must be a boolean");
        s->tty = lua_toboolean(L, v);
    }

    if (!read_seccomp_fd(L, idx, s) || !read_seccomp_file(L, idx, s))
        return 0;
    if (!launch_env_read(L, idx, s))
        return 0;
    if (!launch_protect_read(L, idx, module_idx, s))
        return 0;

    if (!launch_limits_read(L, idx, s))
        return 0;
    /* docker and podman: limits.time is the reaper's, on the host (read
       above, refused without it); a line for another host (reap = false)
       keeps a timeout in the container */
    if (!launch_gpu_read(L, idx, s))
        return 0;

    if (s->mode != MODE_NONE && s->deny && !s->proxy_socket)
        return msg_fail_got(L, get_field(L, idx, "proxy_socket"),
                            "proxy_socket",
                            "is required for modes \"bwrap\", \"docker\" and "
                            "\"podman\" with network \"deny\" (the host path "
                            "of the proxy's unix socket)");
    if (s->mode == MODE_DOCKER && s->deny && !check_docker_deny_paths(L, s))
        return 0;
    if (s->mode == MODE_DOCKER && !check_docker_duplicates(L, s))
        return 0;
    if (s->mode == MODE_BWRAP && !launch_bwrap_check_order(L, s))
        return 0;
    return 1;
}

const char *const launch_ca_env[] = {"SSL_CERT_FILE",
                                     "NODE_EXTRA_CA_CERTS",
                                     "REQUESTS_CA_BUNDLE",
                                     "GIT_SSL_CAINFO",
                                     "CARGO_HTTP_CAINFO",
                                     "CURL_CA_BUNDLE",
                                     NULL};

/*
 * The agents with files of their own under $HOME, in one table: their
 * config binds, within those the parts that name commands the agent runs
 * on the host later, in every project (read-only inside, whatever
 * isolation.agentcfg finds at launch), and the places the agent writes
 * (isolation.AGENT_WRITABLE: the only ones isolate and the session manager
 * leave writable; every other entry of the config directory is bound
 * read-only at launch, and one made inside is moved aside at the end).
 * Sources and versions: docs/reference/launch-spec.md, "The agent's own
 * config". Any other agent has none.
 */
static const char *const none[] = {NULL};
static const char *const claude_binds[] = {"$HOME/.claude",
                                           "$HOME/.claude.json", NULL};
static const char *const claude_commands[] = {
    "$HOME/.claude/settings.json",
    "$HOME/.claude/settings.local.json",
    "$HOME/.claude/commands",
    "$HOME/.claude/agents",
    "$HOME/.claude/hooks",
    "$HOME/.claude/plugins",
    "$HOME/.claude/skills",
    "$HOME/.claude/local", /* the program */
    NULL};
static const char *const claude_writable[] = {
    "$HOME/.claude.json", /* written; its command keys undone at the end */
    "$HOME/.claude/.credentials.json",
    "$HOME/.claude/history.jsonl",
    "$HOME/.claude/projects",
    "$HOME/.claude/todos",
    "$HOME/.claude/tasks",
    "$HOME/.claude/plans",
    "$HOME/.claude/file-history",
    "$HOME/.claude/session-env",
    "$HOME/.claude/shell-snapshots",
    "$HOME/.claude/statsig",
    "$HOME/.claude/telemetry",
    "$HOME/.claude/debug",
    "$HOME/.claude/paste-cache",
    "$HOME/.claude/cache",
    "$HOME/.claude/stats-cache.json",
    "$HOME/.claude/mcp-needs-auth-cache.json",
    NULL};
static const char *const codex_binds[] = {"$HOME/.codex", NULL};
static const char *const codex_commands[] = {
    "$HOME/.codex/config.toml",
    "$HOME/.codex/.env", /* its environment */
    "$HOME/.codex/prompts",
    "$HOME/.codex/rules",
    "$HOME/.codex/skills",
    "$HOME/.codex/AGENTS.md",
    NULL};
static const char *const codex_writable[] = {"$HOME/.codex/auth.json",
                                             "$HOME/.codex/history.jsonl",
                                             "$HOME/.codex/sessions",
                                             "$HOME/.codex/archived_sessions",
                                             "$HOME/.codex/log",
                                             "$HOME/.codex/version.json",
                                             "$HOME/.codex/models_cache.json",
                                             "$HOME/.codex/state_5.sqlite",
                                             "$HOME/.codex/logs_2.sqlite",
                                             "$HOME/.codex/shell_snapshots",
                                             "$HOME/.codex/generated_images",
                                             NULL};
static const char *const gemini_binds[] = {"$HOME/.gemini",
                                           "$HOME/.config/gemini", NULL};
static const char *const gemini_commands[] = {
    "$HOME/.gemini/settings.json",
    "$HOME/.gemini/commands",
    "$HOME/.gemini/extensions",
    "$HOME/.gemini/.env",
    "$HOME/.gemini/policies",
    "$HOME/.gemini/trustedFolders.json",
    "$HOME/.gemini/skills",
    "$HOME/.gemini/agents",
    "$HOME/.gemini/tmp/bin", /* tools it downloaded and runs */
    NULL};
static const char *const gemini_writable[] = {
    "$HOME/.gemini/oauth_creds.json",
    "$HOME/.gemini/google_accounts.json",
    "$HOME/.gemini/installation_id",
    "$HOME/.gemini/user_id",
    "$HOME/.gemini/projects.json",
    "$HOME/.gemini/state.json",
    "$HOME/.gemini/mcp-oauth-tokens.json",
    "$HOME/.gemini/a2a-oauth-tokens.json",
    "$HOME/.gemini/tmp",
    NULL};

static const struct agent_files {
    const char *name;
    const char *const *binds;
    const char *const *commands;
    const char *const *writable;
} agent_files[] = {
    {"claude", claude_binds, claude_commands, claude_writable},
    {"codex", codex_binds, codex_commands, codex_writable},
    {"gemini", gemini_binds, gemini_commands, gemini_writable},
};

static const struct agent_files *agent_files_of(const char *agent)
{
    for (size_t i = 0; agent && i < sizeof agent_files / sizeof *agent_files;
         i++)
        if (strcmp(agent, agent_files[i].name) == 0)
            return &agent_files[i];
    return NULL;
}

const char *const *launch_agent_paths(const char *agent)
{
    const struct agent_files *f = agent_files_of(agent);
    return f ? f->binds : none;
}

const char *const *launch_agent_protected(const char *agent)
{
    const struct agent_files *f = agent_files_of(agent);
    return f ? f->commands : none;
}

const char *const *launch_agent_writable(const char *agent)
{
    const struct agent_files *f = agent_files_of(agent);
    return f ? f->writable : none;
}
