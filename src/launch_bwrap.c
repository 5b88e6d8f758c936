/*
 * launch_bwrap.c - the bwrap command line. bwrap applies mounts in argument
 * order and a later mount covers an earlier one at or above its path, so the
 * order is the security property here: the fresh tmpfs on /tmp and $HOME
 * first, then the agent's config binds, then every other bind sorted so
 * that a parent comes before anything inside it (a workdir under /tmp or $HOME
 * survives the tmpfs; a read-only bind inside the workdir is not covered by the
 * read-write workdir), and the proxy socket and the bridge program last, at
 * fixed single-file paths.
 */
#include "isolation.h"
#include "launch.h"

#include <string.h>

/*
 * Components of a path. "$HOME/..." paths count $HOME as two components
 * (/home/<user>): exact for two $HOME paths, and for a literal path under a
 * home directory of that usual shape. Only the relative order of nested
 * paths matters.
 */
static int path_depth(const char *p)
{
    int depth = 0;
    if (strncmp(p, "$HOME", 5) == 0) {
        depth = 2;
        p += 5;
    }
    for (; *p; p++)
        if (*p == '/' && p[1] != '\0')
            depth++;
    return depth;
}

static void add(struct mount *out, size_t *n, enum mount_kind kind,
                const char *path, const char *why)
{
    out[*n] = (struct mount){kind, path, NULL, why};
    (*n)++;
}

size_t launch_bwrap_mounts(const struct launch_spec *s, struct mount *out)
{
    size_t n = 0;
    add(out, &n, MOUNT_RO, "/usr", "system");
    add(out, &n, MOUNT_RO, "/etc", "system");
    add(out, &n, MOUNT_RO_TRY, "/bin", "system, when present");
    add(out, &n, MOUNT_RO_TRY, "/lib", "system, when present");
    add(out, &n, MOUNT_RO_TRY, "/lib64", "system, when present");
    add(out, &n, MOUNT_RO_TRY, "/sbin", "system, when present");
    add(out, &n, MOUNT_DEV, "/dev", "private minimal /dev");
    add(out, &n, MOUNT_PROC, "/proc", "the sandbox's own processes");
    add(out, &n, MOUNT_TMPFS, "/tmp", "empty, private");
    add(out, &n, MOUNT_TMPFS, "$HOME", "empty, private: hides the home");

    for (const char *const *a = launch_agent_paths(s->agent); *a; a++)
        add(out, &n, MOUNT_RW_TRY, *a, "agent config, when present");
    size_t first = n;
    add(out, &n, MOUNT_RW, s->workdir, "workdir, start directory");
    for (size_t i = 0; i < s->nbinds; i++)
        add(out, &n, MOUNT_RW, s->binds[i], "binds");
    for (size_t i = 0; i < s->nro_binds; i++)
        add(out, &n, MOUNT_RO, s->ro_binds[i], "ro_binds");
    if (s->ca_cert)
        add(out, &n, MOUNT_RO, s->ca_cert, "ca_cert, single file");

    /* Stable insertion sort by depth: parents first, given order kept. */
    for (size_t i = first + 1; i < n; i++) {
        struct mount m = out[i];
        int d = path_depth(m.path);
        size_t j = i;
        while (j > first && path_depth(out[j - 1].path) > d) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = m;
    }

    if (s->deny) {
        out[n] = (struct mount){MOUNT_RW, s->proxy_socket,
                                ISOLATION_SANDBOX_PROXY_SOCKET,
                                "proxy socket, single file: the only way out"};
        n++;
        if (s->bridge == BRIDGE_BUILTIN)
            add(out, &n, MOUNT_RO, s->bridge_path,
                "built-in bridge program, single file");
    }
    return n;
}

static const char *mount_flag(enum mount_kind kind)
{
    switch (kind) {
    case MOUNT_RO:
        return "--ro-bind";
    case MOUNT_RO_TRY:
        return "--ro-bind-try";
    case MOUNT_RW:
        return "--bind";
    case MOUNT_RW_TRY:
        return "--bind-try";
    case MOUNT_DEV:
        return "--dev";
    case MOUNT_PROC:
        return "--proc";
    default:
        return "--tmpfs";
    }
}

void launch_push_bwrap(lua_State *L, const struct launch_spec *s)
{
    struct mount mounts[LAUNCH_MAX_MOUNTS];
    size_t n = launch_bwrap_mounts(s, mounts);
    struct argv_buf b;
    argv_start(&b, L);
    argv_add(&b, "bwrap");
    for (size_t i = 0; i < n; i++) {
        const struct mount *m = &mounts[i];
        argv_add(&b, mount_flag(m->kind));
        argv_add_path(&b, m->path);
        if (m->kind != MOUNT_DEV && m->kind != MOUNT_PROC &&
            m->kind != MOUNT_TMPFS)
            argv_add_path(&b, m->sandbox_path ? m->sandbox_path : m->path);
    }
    argv_add(&b, "--chdir");
    argv_add(&b, s->workdir);
    if (s->ca_cert)
        for (const char *const *e = launch_ca_env; *e; e++) {
            argv_add(&b, "--setenv");
            argv_add(&b, *e);
            argv_add(&b, s->ca_cert);
        }
    /*
     * bwrap started by root leaves the sandbox every capability: it could
     * mknod the host's disk and mount it. No capability, whoever launches.
     */
    argv_add(&b, "--cap-drop");
    argv_add(&b, "ALL");
    if (s->deny)
        argv_add(&b, "--unshare-net");
    argv_add(&b, "--unshare-pid");
    argv_add(&b, "--unshare-ipc");
    argv_add(&b, "--unshare-uts");
    argv_add(&b, "--die-with-parent");
    /*
     * The caller's filter (isolation.tty_seccomp_filter(): no TIOCSTI, no
     * TIOCLINUX), applied to everything in the sandbox. bwrap reads it to
     * EOF and closes the descriptor, so the command does not inherit it.
     * With seccomp_file, wrap() adds the redirection that opens it there.
     */
    if (s->seccomp_fd >= 0) {
        argv_add(&b, "--seccomp");
        lua_pushfstring(L, "%d", s->seccomp_fd);
        argv_add_top(&b);
    }
    argv_add(&b, "--");
    argv_add(&b, "bash");
    argv_add(&b, "-c");
    if (!s->deny) {
        argv_add(&b, s->command);
        return;
    }
    launch_push_deny_script(L, s);
    argv_add_top(&b);
    /* The command is a positional parameter: it is never parsed twice. */
    argv_add(&b, "bash");
    argv_add(&b, s->command);
    if (s->bridge == BRIDGE_BUILTIN)
        argv_add(&b, s->bridge_path);
}
