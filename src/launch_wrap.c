/*
 * launch_wrap.c - one shell command line for an argv. Every element is
 * single-quoted (a quote inside becomes '\''), so nothing in a path or a
 * command is ever shell syntax. The only text left expandable is what a
 * builder marked as a token: `$HOME`, emitted as "$HOME", and docker's user
 * `$(id -u):$(id -g)`, emitted as "$(id -u):$(id -g)". Both are fixed
 * strings written by this module, never taken from the spec.
 *
 * A bwrap spec with seccomp_file gets one more word at the end, a
 * redirection: ` N<'path'`, path single-quoted like every element (it can
 * hold no token: the $HOME form is refused). The line is one simple
 * command, bwrap's, so the redirection applies to bwrap wherever a caller
 * puts the line (`exec <line>`, `bash -c <line>`, after a loop that closes
 * descriptors); running it opens the file on N for bwrap, and the argv is
 * still exactly the builder's: a redirection is not an argument.
 */
#include "launch.h"

#include <lauxlib.h>
#include <string.h>

static void add_single_quoted(luaL_Buffer *b, const char *s, size_t len)
{
    luaL_addchar(b, '\'');
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\'')
            luaL_addstring(b, "'\\''");
        else
            luaL_addchar(b, s[i]);
    }
    luaL_addchar(b, '\'');
}

static void add_element(luaL_Buffer *b, const char *s, size_t len)
{
    if (len == 0) {
        luaL_addstring(b, "''");
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '\0')
            continue;
        if (i > start)
            add_single_quoted(b, s + start, i - start);
        if (i < len) {
            i++;
            luaL_addstring(b, s[i] == 'H' ? "\"" TOKEN_HOME_TEXT "\""
                                          : "\"" TOKEN_USER_TEXT "\"");
            start = i + 1;
        }
    }
}

void launch_push_wrapped(lua_State *L, int idx, const struct launch_spec *s)
{
    idx = lua_absindex(L, idx);
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
        size_t len;
        lua_rawgeti(L, idx, i);
        /* the element sits above the buffer: copy it out first */
        const char *e = lua_tolstring(L, -1, &len);
        lua_pop(L, 1); /* still referenced by the table at idx */
        if (i > 1)
            luaL_addchar(&b, ' ');
        if (len > 2 && e[0] == '\0' && e[1] == TOKEN_ENV_PASS) {
            /* a valid name: one word when set, none when unset */
            lua_pushfstring(L, "${%s+\"%s=$%s\"}", e + 2, e + 2, e + 2);
            luaL_addvalue(&b);
            continue;
        }
        if (i == 1 && launch_needs_prologue(s))
            launch_add_prologue(&b, s, e, len, add_element);
        else
            add_element(&b, e, len);
    }
    if (s->mode == MODE_BWRAP && s->seccomp_file) {
        /* one digit: the spec reader refuses more with seccomp_file */
        luaL_addchar(&b, ' ');
        luaL_addchar(&b, (char)('0' + s->seccomp_fd));
        luaL_addchar(&b, '<');
        add_single_quoted(&b, s->seccomp_file, strlen(s->seccomp_file));
    }
    luaL_pushresult(&b);
}
