/*
 * launch_bwrap.c - the bwrap command line. bwrap applies mounts in argument
 * order and a later mount covers an earlier one at or above its path, so the
 * order is the security property here: the system, /dev and /proc (with
 * the host's kernel knobs in it read-only, right after it), the fresh tmpfs
 * on /tmp and $HOME, then the agent's config binds, then every other bind
 * sorted so that a parent comes before anything inside it (a workdir under /tmp
 * or $HOME survives the tmpfs; a read-only bind inside the workdir is not
 * covered by the read-write workdir), and the proxy socket and the bridge
 * program last, at fixed single-file paths.
 */
#include "isolation.h"
#include "launch/launch.h"

#include <stdbool.h>
#include <string.h>

/*
 * Components of a path, counting $HOME as two (/home/<user>). Only a
 * preference among mounts that no rule below orders: parents first, given
 * order kept, as the mounts read.
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

static bool is_home_token(const char *p)
{
    return strncmp(p, "$HOME/", 6) == 0;
}

/* Length without one trailing slash. */
static size_t trimmed_len(const char *p)
{
    size_t n = strlen(p);
    return n > 1 && p[n - 1] == '/' ? n - 1 : n;
}

/* a is b, or a directory above it; both in the same frame ($HOME or /). */
static bool at_or_above(const char *a, const char *b)
{
    size_t la = trimmed_len(a), lb = trimmed_len(b);
    if (la > lb || strncmp(a, b, la) != 0)
        return false;
    return la == lb || b[la] == '/' || (la == 1 && a[0] == '/');
}

/*
 * Whether user mount a (at index ia) must come before b. Between two $HOME
 * paths, or two absolute ones, nesting is known: the outer first (the same
 * path twice: the given order). Between a $HOME path and an absolute one it
 * is not: it depends on where $HOME is at run time (/root, /home/u,
 * /srv/ci/home/u), which a pure builder cannot know. There the read-only one
 * goes last, so that whichever of the two turns out to be inside the other,
 * nothing read-only is covered by something writable; the price, when the
 * read-only one is the outer, is that the writable one inside it is
 * read-only too (the safe way to be wrong). Two of the same mode need no
 * order: nested binds at their own paths show the same host files.
 */
static bool must_precede(const struct mount *a, size_t ia,
                         const struct mount *b, size_t ib)
{
    bool ha = is_home_token(a->path), hb = is_home_token(b->path);
    if (ha == hb) {
        const char *pa = a->path + (ha ? 5 : 0), *pb = b->path + (hb ? 5 : 0);
        if (at_or_above(pa, pb) && at_or_above(pb, pa))
            return ia < ib;
        return at_or_above(pa, pb);
    }
    return (a->kind == MOUNT_RW || a->kind == MOUNT_RW_TRY) &&
           (b->kind == MOUNT_RO || b->kind == MOUNT_RO_TRY);
}

/*
 * Orders the user mounts m[0..n) by must_precede, preferring, among those
 * free to go next, the shallower and then the earlier given (the order
 * without any $HOME question). False when the rules contradict each other
 * (a cycle through two $HOME/absolute pairs); *x and *y then name a pair of
 * that cycle and m is left as it was.
 */
static bool order_user_mounts(struct mount *m, size_t n, size_t *x, size_t *y)
{
    struct mount orig[LAUNCH_MAX_MOUNTS], res[LAUNCH_MAX_MOUNTS];
    unsigned indeg[LAUNCH_MAX_MOUNTS];
    bool placed[LAUNCH_MAX_MOUNTS] = {false};
    memcpy(orig, m, n * sizeof *m);
    for (size_t b = 0; b < n; b++) {
        indeg[b] = 0;
        for (size_t a = 0; a < n; a++)
            if (a != b && must_precede(&orig[a], a, &orig[b], b))
                indeg[b]++;
    }
    for (size_t k = 0; k < n; k++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!placed[i] && indeg[i] == 0 &&
                (best == n ||
                 path_depth(orig[i].path) < path_depth(orig[best].path)))
                best = i;
        if (best == n) {
            *x = *y = 0;
            for (size_t a = 0; a < n; a++)
                for (size_t b = 0; b < n; b++)
                    if (!placed[a] && !placed[b] &&
                        is_home_token(orig[a].path) !=
                            is_home_token(orig[b].path) &&
                        must_precede(&orig[a], a, &orig[b], b)) {
                        *x = a;
                        *y = b;
                    }
            return false;
        }
        placed[best] = true;
        res[k] = orig[best];
        for (size_t b = 0; b < n; b++)
            if (!placed[b] && must_precede(&orig[best], best, &orig[b], b))
                indeg[b]--;
    }
    memcpy(m, res, n * sizeof *m);
    return true;
}

static void add(struct mount *out, size_t *n, enum mount_kind kind,
                const char *path, const char *why)
{
    out[*n] = (struct mount){kind, path, NULL, why};
    (*n)++;
}

/*
 * The caller's mounts, in the given order: workdir, protect's pins, binds,
 * ro_binds, tools, ca_cert, the protected paths (last: at the same path as a
 * bind, the read-only one wins).
 */
static size_t user_mounts(const struct launch_spec *s, struct mount *out)
{
    size_t n = 0;
    add(out, &n, MOUNT_RW, s->workdir, "workdir, start directory");
    n += launch_protect_pins(s, out + n);
    for (size_t i = 0; i < s->nbinds; i++)
        add(out, &n, MOUNT_RW, s->binds[i], "binds");
    for (size_t i = 0; i < s->nro_binds; i++)
        add(out, &n, MOUNT_RO, s->ro_binds[i], "ro_binds");
    for (size_t i = 0; i < s->ntools; i++)
        add(out, &n, MOUNT_RO, s->tools[i], "tools, a program's installation");
    if (s->ca_cert)
        add(out, &n, MOUNT_RO, s->ca_cert, "ca_cert, single file");
    n += launch_protect_leaves(s, out + n);
    return n;
}

/* The key a mount came from: the start of its description. */
static void push_origin(lua_State *L, const struct mount *m)
{
    const char *comma = strchr(m->why, ',');
    lua_pushlstring(L, m->why,
                    comma ? (size_t)(comma - m->why) : strlen(m->why));
    lua_pushliteral(L, " ");
    msg_push_quoted(L, m->path, strlen(m->path));
    lua_concat(L, 3);
}

int launch_bwrap_check_order(lua_State *L, const struct launch_spec *s)
{
    struct mount m[LAUNCH_MAX_MOUNTS];
    size_t n = user_mounts(s, m), x, y;
    if (order_user_mounts(m, n, &x, &y))
        return 1;
    push_origin(L, &m[x]);
    push_origin(L, &m[y]);
    lua_pushfstring(L,
                    "isolation: %s (read-write) and %s (read-only) cannot "
                    "both keep their modes in every place $HOME may be: with "
                    "the other mounts, which of a $HOME/ path and an "
                    "absolute path must come first depends on $HOME; give "
                    "nested mounts both as $HOME/ paths or both as absolute "
                    "paths",
                    lua_tostring(L, -2), lua_tostring(L, -1));
    return 0;
}

/*
 * What a fresh procfs still shows of the host, covered right after --proc.
 * The kernel under the sandbox is the host's: its sysctls, IRQ routing and
 * SysRq are not per namespace, and a root launch reaches them as uid 0
 * (bwrap 0.8.0 skips its own read-only remount of /proc/sys whenever
 * access(W_OK) fails on the directory, and a sysctl file checks only the
 * owner). The list is the container runtimes' default (Docker's and runc's
 * ReadonlyPaths and MaskedPaths) minus what Linux no longer has;
 * docs/reference/launch-spec.md says why each. bwrap has no conditional tmpfs,
 * and a mount on a path a kernel lacks is an error, so each entry is one that
 * exists on every kernel with procfs, or a -try whose source exists exactly
 * when the entry does (the same kernel is on both sides).
 */
static size_t proc_guards(struct mount *out)
{
    size_t n = 0;
    /* read-only: a write changes the host's kernel */
    add(out, &n, MOUNT_RO_TRY, "/proc/sys",
        "kernel settings, read-only: core_pattern runs a program as root");
    add(out, &n, MOUNT_RO_TRY, "/proc/sysrq-trigger",
        "SysRq, read-only: reboot, crash, kill all, when present");
    add(out, &n, MOUNT_RO_TRY, "/proc/irq",
        "IRQ affinity, read-only, when present");
    add(out, &n, MOUNT_RO_TRY, "/proc/bus",
        "PCI/USB config, read-only, when present");
    add(out, &n, MOUNT_RO_TRY, "/proc/fs",
        "filesystem knobs, read-only, when present");
    /* Docker masks these directories; read-only is what bwrap can do
     * where present: their writable files (acpi/wakeup, scsi/scsi) reach
     * devices; their contents are hardware inventory, no secret */
    add(out, &n, MOUNT_RO_TRY, "/proc/acpi", "ACPI, read-only, when present");
    add(out, &n, MOUNT_RO_TRY, "/proc/scsi",
        "SCSI add/remove, read-only, when present");
    add(out, &n, MOUNT_RO_TRY, "/proc/asound",
        "sound cards, read-only, when present");
    /* masked: what they show is the host's, beyond the pid namespace */
    out[n++] = (struct mount){MOUNT_RO, "/dev/null", "/proc/timer_list",
                              "masked: every host task's timers, pid, name"};
    out[n++] = (struct mount){MOUNT_RO, "/dev/null", "/proc/interrupts",
                              "masked: per-CPU interrupt counts, a keystroke "
                              "timing side channel"};
    /*
     * /proc/keys exists exactly when the kernel has keys, and so does the
     * directory /proc/sys/kernel/keys: the source resolves to /dev/null
     * through it, or does not exist, and -try skips the mount.
     */
    out[n++] = (struct mount){
        MOUNT_RO_TRY, "/proc/sys/kernel/keys/../../../../dev/null",
        "/proc/keys",
        "masked: descriptions of the keys the launcher can see, when present"};
    return n;
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
    n += proc_guards(out + n);
    add(out, &n, MOUNT_TMPFS, "/tmp", "empty, private");
    add(out, &n, MOUNT_TMPFS, "$HOME", "empty, private: hides the home");

    n += launch_agent_mounts(s, out + n);
    size_t first = n;
    n += user_mounts(s, out + n);
    size_t x, y;
    /* a contradiction was refused by launch_bwrap_check_order already */
    (void)order_user_mounts(out + first, n - first, &x, &y);

    /*
     * After every user mount, so that no bind shows them again: what only
     * root may read on the host (mask_files, mask_dirs), which a root
     * launch would read inside as their owner (--cap-drop leaves the
     * owner's own permission).
     */
    for (size_t i = 0; i < s->nmask_files; i++)
        out[n++] = (struct mount){MOUNT_RO, "/dev/null", s->mask_files[i],
                                  "masked: only root may read it"};
    for (size_t i = 0; i < s->nmask_dirs; i++)
        add(out, &n, MOUNT_TMPFS, s->mask_dirs[i],
            "masked, empty: only root may read it");

    if (s->deny) {
        /* Read-only: connect() needs no write to the mount, and the
         * sandbox (the socket's owner when the proxy's user launched it)
         * must not chmod the host's socket open to every local user. */
        out[n] = (struct mount){MOUNT_RO, s->proxy_socket,
                                ISOLATION_SANDBOX_PROXY_SOCKET,
                                "proxy socket, single file: the only way out"};
        n++;
        if (s->bridge != BRIDGE_SOCAT)
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
        if (m->kind == MOUNT_TMPFS)
            launch_limits_add_tmpfs_size(&b, s);
        argv_add(&b, mount_flag(m->kind));
        argv_add_path(&b, m->path);
        if (m->kind != MOUNT_DEV && m->kind != MOUNT_PROC &&
            m->kind != MOUNT_TMPFS)
            argv_add_path(&b, m->sandbox_path ? m->sandbox_path : m->path);
        if (m->kind == MOUNT_DEV) {
            /* the GPU nodes before /dev may turn read-only (limits) */
            launch_gpu_bwrap(&b, s);
            launch_limits_add_dev(&b, s);
        }
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
    /*
     * --cap-drop leaves a root launch its full bounding set (bwrap drops it
     * only inside a user namespace): any exec of a root-owned program would
     * get those capabilities back the day no_new_privs does not hold. A user
     * namespace of its own (uid 0 maps to 0 for root, as bwrap already does
     * for everyone else) empties it, and --disable-userns makes it the last:
     * no namespace inside in which a fresh /proc or a mount could be made.
     */
    argv_add(&b, "--unshare-user");
    argv_add(&b, "--disable-userns");
    if (s->deny || s->none)
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
    if (s->deny && s->bridge == BRIDGE_PASS) {
        launch_add_pass_command(&b, s);
        return;
    }
    argv_add(&b, "--");
    argv_add(&b, "bash");
    argv_add(&b, "-c");
    /* -- ends bash's options: a command (or script) starting with - or + is
     * the text to run, and what follows it is $0, $1, ... as without -- */
    argv_add(&b, "--");
    if (!s->deny) {
        argv_add(&b, s->command);
        return;
    }
    launch_push_deny_script(L, s);
    argv_add_top(&b);
    /* The command is a positional parameter: it is never parsed twice. */
    argv_add(&b, "bash");
    argv_add(&b, s->command);
    if (s->bridge != BRIDGE_SOCAT)
        argv_add(&b, s->bridge_path);
}
