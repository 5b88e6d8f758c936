/*
 * launch_prologue.c - the run-time check at the start of a bwrap or docker
 * wrap() line. Only the shell that runs the line knows $HOME (a local
 * shell, an ssh target's, a tmux server's), so only it can refuse what the
 * pure builders cannot see: no usable HOME (the line mounts an empty
 * directory at $HOME, and `--tmpfs ""` would not even start), and a
 * workdir or bind that is $HOME or a directory above it (its bind would
 * bring the whole home back over that empty directory, read-write).
 *
 * The line must stay one simple command that a caller can put after
 * `exec`, so the check is not a statement before it: it is the program
 * name. The first word is a command substitution that runs the checks and,
 * only when all pass, prints the program's name ("bwrap", "docker"). A
 * check that fails prints one line to stderr and prints `false` instead,
 * so the line runs false (status 1) with the same words and nothing else;
 * a substitution that cannot run at all gives the empty name, which no
 * shell can execute. Either way nothing of the sandbox is started.
 *
 * The substitution is a subshell of the shell that runs the line: it may
 * cd and set variables without touching the caller's. It is POSIX sh
 * (dash and bash), on a few short physical lines (each a statement of the
 * substitution: a typed line stays under a terminal's limit), uses no `!` (an
 * interactive bash would expand it as history inside the double quotes), calls
 * cd and printf through `command` (a user's cd function or alias must not print
 * into the program name) and keeps every status 0 on the success path (a
 * caller's `set -e` is inherited by dash's subshells). It forks nothing but
 * itself: cd, printf, case and [ are builtins.
 */
#include "launch/launch.h"

#include <stdio.h>
#include <string.h>

/*
 * Fails the check: one line to stderr (the values as printf arguments,
 * never in the format), then the program name `false`.
 */
static void add_refusal(luaL_Buffer *b, const char *message, const char *args)
{
    luaL_addstring(b, "command printf >&2 'isolation: ");
    luaL_addstring(b, message);
    luaL_addstring(b, "; nothing was run\\n' ");
    luaL_addstring(b, args);
    luaL_addstring(b, "; command printf false; exit 0");
}

/*
 * HOME must be absolute, without . or .. components, and not /. One that
 * exists must be a directory this shell can enter (its physical path is
 * what the binds are compared with); one that does not exist has nothing
 * that a bind could expose, and the comparisons are skipped (h empty).
 * bash keeps a leading // in PWD after `cd -P //x`: it is the same path.
 */
static void add_home_check(luaL_Buffer *b)
{
    luaL_addstring(b, "case ${HOME-} in */./*|*/../*|*/.|*/..|/) ");
    add_refusal(b,
                "HOME must be an absolute path other than / and without . "
                "or ..: the line mounts an empty directory at $HOME (got "
                "HOME=\"%s\")",
                "\"$HOME\"");
    luaL_addstring(b, ";;\n/*) ;; *) ");
    add_refusal(b,
                "HOME is unset, empty or relative (got HOME=\"%s\"): the "
                "line mounts an empty directory at $HOME; set HOME to your "
                "home directory",
                "\"${HOME-}\"");
    luaL_addstring(b, ";; esac\nh=; "
                      "if command cd -P -- \"$HOME\" >/dev/null 2>&1; then "
                      "case $PWD in //*) h=${PWD#/};; *) h=$PWD;; esac; "
                      "elif [ -e \"$HOME\" ] || [ -h \"$HOME\" ]; then ");
    add_refusal(b, "HOME (%s) is not a directory this shell can enter",
                "\"$HOME\"");
    luaL_addstring(b, "; fi\ncase $h in /) ");
    add_refusal(b, "HOME (%s) resolves to /", "\"$HOME\"");
    luaL_addstring(b, ";; esac\n");
}

/*
 * Each (field, path) pair given to `set --`: a path that is a directory
 * must not be $HOME or above it, compared physically (cd -P: a symlink to
 * the home, or to a parent of it, is caught where it leads). A path that
 * is not a directory this shell can enter cannot hold the home.
 */
static void add_paths_check(luaL_Buffer *b)
{
    luaL_addstring(b, "while case $# in 0) false;; esac; do "
                      "if case $h in '') false;; esac && "
                      "command cd -P -- \"$2\" >/dev/null 2>&1; then "
                      "case $PWD in //*) p=${PWD#/};; *) p=$PWD;; esac; "
                      "case $h/ in \"${p%/}/\"*) ");
    add_refusal(b,
                "%s %s is $HOME (%s) or a directory above it: the sandbox "
                "would see (and, read-write, change) the whole home; use a "
                "directory inside it",
                "\"$1\" \"$2\" \"$h\"");
    luaL_addstring(b, ";; esac; fi; shift 2; done\n");
}

/* One path as a word: a leading $HOME token stays expandable. */
static void add_path(luaL_Buffer *b, const char *path, launch_word_fn add_word)
{
    if (strncmp(path, TOKEN_HOME_TEXT, 5) == 0 &&
        (path[5] == '/' || path[5] == '\0')) {
        luaL_addstring(b, "\"" TOKEN_HOME_TEXT "\"");
        path += 5;
        if (!*path)
            return;
    }
    add_word(b, path, strlen(path));
}

static void add_pair(luaL_Buffer *b, const char *field, const char *path,
                     launch_word_fn add_word)
{
    luaL_addchar(b, ' ');
    add_word(b, field, strlen(field));
    luaL_addchar(b, ' ');
    add_path(b, path, add_word);
}

/*
 * A protected path, pinned parent or command-naming agent config that is a
 * symbolic link to a directory must lead inside the workdir (an agent's:
 * inside $HOME). bwrap and docker follow such a link, the source on the
 * host and the destination inside, so a relative link the sandbox left in
 * an earlier session (the workdir and the agent's config are its to
 * write) binds the host directory it names over the same path inside: a
 * pin read-write (tried: `.git -> ../../../usr/local/share/x` made that
 * host directory writable from inside), a protected path read-only.
 * Inside the workdir (or $HOME, where only the agent's own binds are
 * shown) a target gives nothing new. Compared physically (cd -P), as the
 * home check does; a link to a file cannot be read without readlink, which
 * is no builtin: isolate and the session manager check those
 * (isolation.protect). The workdir's paths are listed relative to it: the
 * line stays short enough to type.
 */
static void add_symlink_check(luaL_Buffer *b, const struct launch_spec *s,
                              launch_word_fn add_word)
{
    const char *const *agent =
        s->agent_config_ro ? NULL : launch_agent_protected(s->agent);
    bool agent_any = agent && *agent;
    if (s->npins + s->nprotect == 0 && !agent_any)
        return;
    size_t wlen = strlen(s->workdir);
    luaL_addstring(b, "if command cd -P -- ");
    add_word(b, s->workdir, wlen);
    /* The list goes on over continuation lines, a few words each: one
     * physical line of a typed line stays short (wrap_spec: <= 1000). */
    luaL_addstring(b, " >/dev/null 2>&1; then w=$PWD; for p in \\\n");
    size_t words = 0;
    for (size_t i = 0; i < s->npins + s->nprotect; i++) {
        const char *rel =
            i < s->npins ? s->pins[i] + wlen + 1 : s->protect[i - s->npins];
        luaL_addstring(b, words && words % 6 == 0 ? " \\\n" : " ");
        add_word(b, rel, strlen(rel));
        words++;
    }
    for (const char *const *a = agent; a && *a; a++) {
        luaL_addstring(b, words && words % 6 == 0 ? " \\\n" : " ");
        add_path(b, *a, add_word);
        words++;
    }
    luaL_addstring(
        b, " \\\n; do case $p in /*) q=$p; top=$h;; *) q=$w/$p; top=$w;; esac; "
           "if [ -h \"$q\" ] && command cd -P -- \"$q\" >/dev/null 2>&1; "
           "then case $PWD/ in \"${top%/}\"/*) ;; *) ");
    add_refusal(b,
                "%s is a symbolic link to %s, outside %s: a protected path, "
                "its parent or an agent config that names commands may not "
                "lead out (the bind would follow it to that host directory); "
                "remove it or move it aside",
                "\"$q\" \"$PWD\" \"$top\"");
    luaL_addstring(b, ";; esac; fi; done; fi\n");
}

static void add_indexed(luaL_Buffer *b, const char *field,
                        const char *const *paths, size_t n,
                        launch_word_fn add_word)
{
    char name[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s[%zu]", field, i + 1);
        add_pair(b, name, paths[i], add_word);
    }
}

bool launch_needs_prologue(const struct launch_spec *s)
{
    /* both always use the $HOME token (bwrap's tmpfs, docker's HOME=) */
    return s->mode == MODE_BWRAP || s->mode == MODE_DOCKER;
}

void launch_add_prologue(luaL_Buffer *b, const struct launch_spec *s,
                         const char *program, size_t len,
                         launch_word_fn add_word)
{
    luaL_addstring(b, "\"$(");
    add_home_check(b);
    luaL_addstring(b, "set --");
    add_pair(b, "workdir", s->workdir, add_word);
    for (const char *const *a = launch_agent_paths(s->agent); *a; a++)
        add_pair(b, "agent config", *a, add_word);
    add_indexed(b, "binds", s->binds, s->nbinds, add_word);
    add_indexed(b, "ro_binds", s->ro_binds, s->nro_binds, add_word);
    add_indexed(b, "tools", s->tools, s->ntools, add_word);
    if (s->ca_cert)
        add_pair(b, "ca_cert", s->ca_cert, add_word);
    if (s->proxy_socket)
        add_pair(b, "proxy_socket", s->proxy_socket, add_word);
    if (s->bridge_path)
        add_pair(b, "bridge_path", s->bridge_path, add_word);
    luaL_addstring(b, "\n");
    add_paths_check(b);
    add_symlink_check(b, s, add_word);
    luaL_addstring(b, "command printf %s ");
    add_word(b, program, len);
    luaL_addstring(b, ")\"");
}
