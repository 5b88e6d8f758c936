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
 *
 * The line can be typed into a terminal (tmux send-keys, a paste), where
 * the tty and the line editor act on control bytes: ^U erases what came
 * before, ^C drops the line, a tab completes. So no control byte but
 * newline is ever written raw, and no physical line grows much past
 * WRAP_LINE_MAX: a tty in canonical mode (dash -i, any shell's typeahead)
 * keeps 4095 bytes of a line on Linux, 1023 on BSD, and drops the rest up
 * to the newline, which could leave a quote closed where the line meant it
 * open. Both are done in add_quoted (and add_element between words),
 * which find the current line's length in the buffer itself, so that a
 * prologue written before the elements counts too.
 */
#include "launch/launch.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <string.h>

/*
 * Bytes on one physical line before the line is continued on the next;
 * one more escape (144), token or UTF-8 sequence keeps it below 1023.
 */
#define WRAP_LINE_MAX 800
/* Control bytes spelled by one printf (4 bytes of escape each). */
#define WRAP_ESCAPE_RUN 32

/*
 * Bytes after the last newline in b. Any count from WRAP_LINE_MAX up means
 * the same (break now), so the search looks back no further.
 */
static size_t line_column(luaL_Buffer *b)
{
    size_t n = luaL_bufflen(b);
    size_t back = n < WRAP_LINE_MAX ? n : WRAP_LINE_MAX;
    const char *end = luaL_buffaddr(b) + n;
    const char *nl = memrchr(end - back, '\n', back);
    if (nl)
        return (size_t)(end - nl - 1);
    return back; /* n, or WRAP_LINE_MAX when the line is at least that */
}

/* A quote, a newline (resets the line) or a control byte. */
static bool is_special(unsigned char c)
{
    return c < 0x20 || c == '\'' || c == 0x7f;
}

/*
 * Appends s single-quoted; a quote inside becomes '\''. A run of control
 * bytes (C0 but newline, DEL) closes the quote and is spelled
 * "$(printf '\ooo...')": octal escapes in a printf format are POSIX, and
 * dash has no $'...'; the substitution strips only trailing newlines,
 * which a run never holds. Past WRAP_LINE_MAX the quote is closed by
 * '\<newline>' and reopened: outside quotes every POSIX shell removes a
 * backslash-newline, so the word is unchanged. A break waits for the end
 * of a UTF-8 sequence (a few bytes at most). Plain runs are copied whole.
 * col is the line's length before, the return value its length after.
 */
static size_t add_quoted(luaL_Buffer *b, size_t col, const char *s, size_t len)
{
    col++;
    luaL_addchar(b, '\'');
    size_t i = 0;
    while (i < len) {
        size_t room = col < WRAP_LINE_MAX ? WRAP_LINE_MAX - col : 0;
        size_t stop = len - i < room ? len : i + room;
        size_t j = i;
        while (j < stop && !is_special((unsigned char)s[j]))
            j++;
        luaL_addlstring(b, s + i, j - i);
        col += j - i;
        if (j == len)
            break;
        unsigned char c = (unsigned char)s[j];
        i = j + 1;
        if (col >= WRAP_LINE_MAX &&
            ((c & 0xc0) != 0x80 || col >= WRAP_LINE_MAX + 8)) {
            luaL_addstring(b, "'\\\n'");
            col = 1;
            i = j; /* c is written on the new line */
        } else if (c == '\'') {
            luaL_addstring(b, "'\\''");
            col += 4;
        } else if (c == '\n') {
            luaL_addchar(b, '\n');
            col = 0;
            /*
             * bash -i reads the first byte of a line typed inside a quote
             * as more than text: ^ as ^old^new^, a byte from 0x80 in the C
             * locale as a meta key (0xa3, M-#, ends the line). Such a line
             * starts with '' (close and reopen) instead.
             */
            if (i < len) {
                luaL_addstring(b, "''");
                col = 2;
            }
        } else if (!is_special(c)) {
            luaL_addchar(b, (char)c); /* a UTF-8 continuation at the limit */
            col++;
        } else {
            luaL_addstring(b, "'\"$(printf '");
            size_t end = j + WRAP_ESCAPE_RUN < len ? j + WRAP_ESCAPE_RUN : len;
            /* the run: control bytes only (not a quote, not a newline) */
            for (i = j; i < end && is_special((unsigned char)s[i]) &&
                        s[i] != '\'' && s[i] != '\n';
                 i++) {
                unsigned char e = (unsigned char)s[i];
                char oct[4] = {'\\', (char)('0' + (e >> 6)),
                               (char)('0' + ((e >> 3) & 7)),
                               (char)('0' + (e & 7))};
                luaL_addlstring(b, oct, sizeof oct);
            }
            luaL_addstring(b, "')\"'");
            col += 16 + 4 * (i - j);
        }
    }
    luaL_addchar(b, '\'');
    return col + 1;
}

static void add_single_quoted(luaL_Buffer *b, const char *s, size_t len)
{
    add_quoted(b, line_column(b), s, len);
}

static void add_element(luaL_Buffer *b, const char *s, size_t len)
{
    size_t col = line_column(b);
    /* after the separator, outside any quote: continue on the next line */
    if (col >= WRAP_LINE_MAX) {
        luaL_addstring(b, "\\\n");
        col = 0;
    }
    if (len == 0) {
        luaL_addstring(b, "''");
        return;
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '\0')
            continue;
        if (i > start)
            col = add_quoted(b, col, s + start, i - start);
        if (i < len) {
            i++;
            const char *token = s[i] == 'H' ? "\"" TOKEN_HOME_TEXT "\""
                                            : "\"" TOKEN_USER_TEXT "\"";
            luaL_addstring(b, token);
            col += strlen(token);
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
            /* a valid name: one word when set, none when unset; it
               counts toward the physical line like any word */
            if (line_column(&b) >= WRAP_LINE_MAX)
                luaL_addstring(&b, "\\\n");
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
        if (line_column(&b) >= WRAP_LINE_MAX)
            luaL_addstring(&b, "\\\n");
        luaL_addchar(&b, ' ');
        luaL_addchar(&b, (char)('0' + s->seccomp_fd));
        luaL_addchar(&b, '<');
        add_single_quoted(&b, s->seccomp_file, strlen(s->seccomp_file));
    }
    luaL_pushresult(&b);
}
