/*
 * launch_ssh.c - isolation.ssh_argv(spec, target): network deny on an ssh
 * target. One ssh command runs the wrapped launch line on the target, with
 * a reverse forward of a remote unix socket (in target.socket_dir) to the
 * local proxy socket, so that the remote sandbox binds the forwarded
 * socket as its proxy socket. Pure: reads only its arguments.
 *
 * sshd binds the forwarded socket when the connection's global request
 * arrives, before the remote command runs, so the command cannot create
 * socket_dir itself: the second result's `prepare` is an ssh command that
 * makes it (0700, the remote user's, not a symlink) and must succeed first.
 * The remote command removes the socket when its shell exits (an EXIT
 * trap, run also on the hangup the pty gets when the connection dies,
 * which the trap passes on to the sandbox); StreamLocalBindUnlink only
 * unlinks a stale file before binding.
 *
 * The remote paths go through two shell levels (the remote user's shell,
 * then the trap's string), so socket_dir and socket_name are limited to a
 * charset that needs no quoting at all.
 */
#include "isolation.h"
#include "launch/launch.h"
#include "strarg.h"

#include <stdbool.h>
#include <string.h>

#define SSH_SUN_PATH_MAX 107 /* sun_path without its terminating NUL */

static int fail(lua_State *L)
{
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

static bool has_control(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return true;
    }
    return false;
}

/* Letters a remote path may use: nothing a shell would read specially. */
static bool plain_path(const char *s, size_t len, bool slash)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
                  c == '+' || c == '=' || (slash && c == '/');
        if (!ok)
            return false;
    }
    return true;
}

/*
 * Pushes the field key of the table at tidx and returns it when it is a
 * string without NUL; else NULL with only the message pushed.
 */
static const char *get_string(lua_State *L, int tidx, const char *key,
                              const char *field, size_t *len)
{
    lua_getfield(L, tidx, key);
    if (lua_type(L, -1) != LUA_TSTRING) {
        msg_fail_got(L, -1, field, "must be a string");
        lua_remove(L, -2);
        return NULL;
    }
    const char *s = strarg_get(L, -1, field, len);
    if (!s)
        lua_remove(L, -2);
    return s; /* the value stays on the stack */
}

struct ssh_target {
    const char *host;
    lua_Integer port;
    const char *dir;
    size_t dir_len;
    const char *name; /* NULL: the local socket's own name */
    size_t name_len;
    int options; /* stack index of the options table, or 0 */
};

static int read_host(lua_State *L, int t, struct ssh_target *st)
{
    size_t len;
    if (!(st->host = get_string(L, t, "host", "target.host", &len)))
        return 0;
    if (len == 0 || st->host[0] == '-' || has_control(st->host, len) ||
        strpbrk(st->host, " \t"))
        return msg_fail_got(
            L, -1, "target.host",
            "must be a non-empty ssh destination (user@host) that "
            "does not start with '-', without spaces or control "
            "bytes");
    return 1;
}

static int read_port(lua_State *L, int t, struct ssh_target *st)
{
    lua_getfield(L, t, "port");
    if (lua_isnil(L, -1)) {
        st->port = 22;
    } else {
        int isint = 0;
        st->port = lua_tointegerx(L, -1, &isint);
        if (lua_type(L, -1) != LUA_TNUMBER || !isint || st->port < 1 ||
            st->port > 65535)
            return msg_fail_got(L, -1, "target.port",
                                "must be an integer from 1 to 65535");
    }
    lua_pop(L, 1);
    return 1;
}

static bool ends_with_dots(const char *s, size_t len)
{
    return (len >= 2 && memcmp(s + len - 2, "/.", 2) == 0) ||
           (len >= 3 && memcmp(s + len - 3, "/..", 3) == 0);
}

static int read_socket_dir(lua_State *L, int t, struct ssh_target *st)
{
    size_t len;
    if (!(st->dir = get_string(L, t, "socket_dir", "target.socket_dir", &len)))
        return 0;
    while (len > 1 && st->dir[len - 1] == '/')
        len--;
    st->dir_len = len;
    if (st->dir[0] != '/' || len < 2 || !plain_path(st->dir, len, true) ||
        strstr(st->dir, "/./") || strstr(st->dir, "/../") ||
        strstr(st->dir, "//") || ends_with_dots(st->dir, len))
        return msg_fail_got(
            L, -1, "target.socket_dir",
            "must be an absolute path other than /, of letters, "
            "digits and . _ - + = / only, without . or .. or //");
    return 1;
}

static int read_socket_name(lua_State *L, int t, struct ssh_target *st)
{
    lua_getfield(L, t, "socket_name");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        st->name = NULL;
        return 1;
    }
    lua_pop(L, 1);
    if (!(st->name = get_string(L, t, "socket_name", "target.socket_name",
                                &st->name_len)))
        return 0;
    if (st->name_len == 0 || !plain_path(st->name, st->name_len, false) ||
        strarg_is(st->name, st->name_len, ".") ||
        strarg_is(st->name, st->name_len, ".."))
        return msg_fail_got(
            L, -1, "target.socket_name",
            "must be a file name of letters, digits and . _ - + = "
            "only, not . or ..");
    return 1;
}

/* Option letters that take a value, and flags that take none. */
static const char option_with_value[] = "oiFJlcm";
static const char option_flag[] = "46qvC";

static int read_options(lua_State *L, int t, struct ssh_target *st)
{
    lua_getfield(L, t, "ssh_options");
    st->options = 0;
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 1;
    }
    if (!lua_istable(L, -1))
        return msg_fail_got(L, -1, "target.ssh_options",
                            "must be an array of strings");
    st->options = lua_gettop(L);
    lua_Integer n = (lua_Integer)lua_rawlen(L, st->options);
    bool want_value = false;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, st->options, i);
        lua_pushfstring(L, "target.ssh_options[%d]", (int)i);
        const char *field = lua_tostring(L, -1);
        if (lua_type(L, -2) != LUA_TSTRING)
            return msg_fail_got(L, -2, field, "must be a string");
        size_t len;
        const char *o = strarg_get(L, -2, field, &len);
        if (!o)
            return 0;
        if (has_control(o, len))
            return msg_fail_got(L, -2, field, "must not contain control bytes");
        if (want_value) {
            want_value = false;
        } else if (len >= 2 && o[0] == '-' && o[1] != '\0' &&
                   strchr(option_with_value, o[1])) {
            want_value = len == 2;
        } else if (len != 2 || o[0] != '-' || o[1] == '\0' ||
                   !strchr(option_flag, o[1])) {
            return msg_fail_got(
                L, -2, field,
                "must be an ssh option -o, -i, -F, -J, -l, -c or -m "
                "(with its value, in the same or the next element) "
                "or one of the flags -4 -6 -q -v -C: the builder "
                "sets the port, the forward, the tty and the "
                "destination itself");
        }
        lua_pop(L, 2);
    }
    if (want_value) {
        lua_rawgeti(L, st->options, n);
        return msg_fail_got(L, -1, "target.ssh_options",
                            "ends with an option that needs a value");
    }
    return 1;
}

static int read_target(lua_State *L, int t, struct ssh_target *st)
{
    if (!lua_istable(L, t))
        return msg_fail_got(
            L, t, "target",
            "must be a table {kind = \"ssh\", tunnel = true, host, "
            "port, socket_dir, ssh_options}");
    size_t len;
    const char *kind = get_string(L, t, "kind", "target.kind", &len);
    if (!kind)
        return 0;
    if (!strarg_is(kind, len, "ssh"))
        return msg_fail_got(L, -1, "target.kind", "must be \"ssh\"");
    lua_pop(L, 1);
    lua_getfield(L, t, "tunnel");
    if (lua_type(L, -1) != LUA_TBOOLEAN || !lua_toboolean(L, -1))
        return msg_fail_got(
            L, -1, "target.tunnel",
            "must be true: ssh_argv builds the tunnelled launch");
    lua_pop(L, 1);
    return read_host(L, t, st) && read_port(L, t, st) &&
           read_socket_dir(L, t, st) && read_socket_name(L, t, st) &&
           read_options(L, t, st);
}

int launch_ssh_check_target(lua_State *L, int idx)
{
    int top = lua_gettop(L);
    struct ssh_target st;
    if (!read_target(L, lua_absindex(L, idx), &st)) {
        lua_copy(L, -1, top + 1);
        lua_settop(L, top + 1);
        return 0;
    }
    lua_settop(L, top);
    return 1;
}

/* The local proxy socket: given, absolute, no ':' (it ends -R's spec). */
static const char *read_local_socket(lua_State *L, int spec, size_t *len)
{
    lua_getfield(L, spec, "proxy_socket");
    if (lua_type(L, -1) != LUA_TSTRING) {
        msg_fail_got(
            L, -1, "proxy_socket",
            "must be the local proxy socket's path: the forward's local end");
        return NULL;
    }
    const char *s = strarg_get(L, -1, "proxy_socket", len);
    if (!s)
        return NULL;
    if (s[0] != '/' || strchr(s, ':') || has_control(s, *len)) {
        msg_fail_got(
            L, -1, "proxy_socket",
            "must be an absolute path without ':' or control bytes (ssh's "
            "-R remote:local)");
        return NULL;
    }
    return s;
}

static void add(lua_State *L, int argv, const char *s)
{
    lua_pushstring(L, s);
    lua_rawseti(L, argv, (lua_Integer)lua_rawlen(L, argv) + 1);
}

/* ssh, the port and the caller's options; ours first: -o's first wins. */
static void push_base(lua_State *L, const struct ssh_target *st, bool main)
{
    lua_newtable(L);
    int argv = lua_gettop(L);
    add(L, argv, "ssh");
    if (main) {
        add(L, argv, "-o");
        add(L, argv, "StreamLocalBindUnlink=yes");
        add(L, argv, "-o");
        add(L, argv, "ExitOnForwardFailure=yes");
    }
    lua_pushfstring(L, "%d", (int)st->port);
    add(L, argv, "-p");
    add(L, argv, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (st->options) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, st->options);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, st->options, i);
            lua_rawseti(L, argv, (lua_Integer)lua_rawlen(L, argv) + 1);
        }
    }
}

static int l_ssh_argv(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    struct ssh_target st;
    if (!read_target(L, 2, &st))
        return fail(L);
    size_t local_len;
    const char *local = read_local_socket(L, 1, &local_len);
    if (!local)
        return fail(L);
    if (!st.name) {
        const char *slash = strrchr(local, '/');
        st.name = slash + 1;
        st.name_len = strlen(st.name);
        if (st.name_len == 0 || !plain_path(st.name, st.name_len, false)) {
            msg_fail_got(
                L, -1, "proxy_socket",
                "has a file name that cannot name the remote socket: give "
                "target.socket_name");
            return fail(L);
        }
    }
    lua_pushlstring(L, st.dir, st.dir_len);
    lua_pushliteral(L, "/");
    lua_pushlstring(L, st.name, st.name_len);
    lua_concat(L, 3);
    int remote = lua_gettop(L);
    if (lua_rawlen(L, remote) > SSH_SUN_PATH_MAX) {
        lua_pushfstring(L,
                        "isolation: target.socket_dir and the socket name "
                        "make a path too long for a unix socket (%s: %d "
                        "bytes; at most %d)",
                        lua_tostring(L, remote), (int)lua_rawlen(L, remote),
                        SSH_SUN_PATH_MAX);
        return fail(L);
    }

    /* The launch line, as the remote shell will run it. */
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_pushvalue(L, remote);
    lua_setfield(L, -2, "proxy_socket");
    /* the reaper is a program of this host, not of the target: there the
     * sandbox ends with bwrap (--die-with-parent) and the hangup trap */
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "reap");
    lua_getfield(L, lua_upvalueindex(1), "wrap");
    lua_insert(L, -2);
    lua_call(L, 1, 2);
    if (lua_isnil(L, -2))
        return 2;
    lua_pop(L, 1);
    int line = lua_gettop(L);

    /*
     * The remote command: remove the socket when the shell exits (the
     * traps come first: the socket exists before the command starts);
     * refuse a socket_dir that is not the remote user's own directory. The
     * line runs in the background with the terminal as its stdin and the
     * shell waits for it: a shell runs a trap only once its foreground
     * command ends, while `wait` returns at once, so that the hangup sshd
     * gives the pty when the connection dies reaches the trap, which
     * passes it on to the sandbox and exits (removing the socket).
     */
    const char *dir = lua_pushlstring(L, st.dir, st.dir_len);
    const char *sock = lua_tostring(L, remote);
    lua_pushfstring(
        L,
        "trap 'rm -f -- %s' EXIT\n"
        "trap 'kill -HUP $! 2>/dev/null; exit 129' HUP\n"
        "trap 'kill -TERM $! 2>/dev/null; exit 143' TERM\n"
        "trap 'kill -INT $! 2>/dev/null; exit 130' INT\n"
        "test ! -h '%s' && test -d '%s' && test -O '%s' || { printf >&2 "
        "'isolation: socket_dir %%s is not a directory of this user; "
        "nothing was run\\n' '%s'; exit 126; }\n"
        "(\n%s\n) <&0 &\n"
        "wait $!\n",
        sock, dir, dir, dir, dir, lua_tostring(L, line));
    int command = lua_gettop(L);
    lua_pushfstring(L,
                    "umask 077 && mkdir -p -- '%s' && test ! -h '%s' && "
                    "test -O '%s' && chmod 0700 '%s'",
                    dir, dir, dir, dir);
    int prepare_command = lua_gettop(L);

    push_base(L, &st, true);
    int argv = lua_gettop(L);
    add(L, argv, "-R");
    lua_pushfstring(L, "%s:%s", sock, local);
    add(L, argv, lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, 1, "tty");
    add(L, argv, lua_toboolean(L, -1) || lua_isnil(L, -1) ? "-tt" : "-T");
    lua_pop(L, 1);
    add(L, argv, "--");
    add(L, argv, st.host);
    lua_pushvalue(L, command);
    lua_rawseti(L, argv, (lua_Integer)lua_rawlen(L, argv) + 1);

    lua_createtable(L, 0, 2);
    lua_pushvalue(L, remote);
    lua_setfield(L, -2, "socket");
    push_base(L, &st, false);
    int prepare = lua_gettop(L);
    add(L, prepare, "-T");
    add(L, prepare, "--");
    add(L, prepare, st.host);
    lua_pushvalue(L, prepare_command);
    lua_rawseti(L, prepare, (lua_Integer)lua_rawlen(L, prepare) + 1);
    lua_setfield(L, -2, "prepare");
    return 2;
}

void isolation_ssh_open(lua_State *L)
{
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, l_ssh_argv, 1);
    lua_setfield(L, -2, "ssh_argv");
}
