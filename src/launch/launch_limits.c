/*
 * launch_limits.c - the launch spec's `limits` and `limits_via`: reading
 * them, and what each builder adds for them.
 *
 * bwrap_argv stays bwrap's own argv: only `tmpfs` is bwrap's (--size before
 * each --tmpfs). Everything else needs a program in front of bwrap, which
 * argv() and wrap() put there, outermost first:
 *
 *   systemd-run --user --scope ... --          limits_via systemd
 *   bash -c CGROUP_PROLOGUE isolation-cgroup M P C --   limits_via cgroup
 *   bash -c TIME_PROLOGUE isolation-time T GRACE --      time
 *   prlimit --nofile=N:N [--nproc= --as=] --   nofile; limits_via rlimit
 *   bwrap ...
 *
 * The builders stay pure: where the cgroup lives and whether it can be made
 * is found out by the line itself when it runs (the prologue below), which
 * refuses to start the sandbox (exit 125) rather than run it unlimited.
 */
#include "launch/launch.h"
#include "strarg.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

static const char *const limit_keys[] = {"memory", "pids", "tmpfs", "nofile",
                                         "cpu",    "time", NULL};

static const char *const via_names[] = {NULL, "systemd", "cgroup", "rlimit"};

/*
 * A positive integer, given as a Lua integer or as a float with an integral
 * value (JSON numbers decode as floats), at most max.
 */
static int read_count(lua_State *L, int v, const char *field, lua_Integer max,
                      const char *unit, lua_Integer *out)
{
    int ok = 0;
    lua_Integer n = 0;
    if (lua_type(L, v) == LUA_TNUMBER)
        n = lua_tointegerx(L, v, &ok);
    if (!ok || n < 1 || n > max) {
        lua_pushfstring(L, "must be a positive integer (%s), at most %I", unit,
                        (LUAI_UACINT)max);
        const char *what = lua_tostring(L, -1);
        return msg_fail_got(L, v, field, what);
    }
    *out = n;
    return 1;
}

static int read_cpu(lua_State *L, int v, double *out)
{
    double c = lua_type(L, v) == LUA_TNUMBER ? (double)lua_tonumber(L, v) : 0;
    /* one hundredth of a core is the smallest quota every mechanism takes */
    if (!(c >= 0.01 && c <= LIMITS_CPU_MAX))
        return msg_fail_got(L, v, "limits.cpu",
                            "must be a number of cores, 0.01 to 4096 (1.5 is "
                            "one and a half cores)");
    *out = c;
    return 1;
}

static int check_limit_keys(lua_State *L, int t)
{
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t len;
            const char *key = strarg_get(L, -1, "limits key", &len);
            if (!key)
                return 0;
            for (const char *const *k = limit_keys; *k && !known; k++)
                known = strarg_is(key, len, *k);
        }
        if (!known)
            return msg_fail_got(L, -1, "limits key",
                                "is unknown (accepted: memory, pids, tmpfs, "
                                "nofile, cpu, time)");
    }
    return 1;
}

static int read_via(lua_State *L, int v, struct launch_limits *l)
{
    static const char accepted[] =
        "must be \"systemd\", \"cgroup\" or \"rlimit\"";
    l->via = VIA_NONE;
    if (msg_is_absent(L, v))
        return 1;
    if (lua_type(L, v) != LUA_TSTRING)
        return msg_fail_got(L, v, "limits_via", accepted);
    size_t len;
    const char *s = strarg_get(L, v, "limits_via", &len);
    if (!s)
        return 0;
    for (int i = VIA_SYSTEMD; i <= VIA_RLIMIT; i++)
        if (strarg_is(s, len, via_names[i]))
            l->via = (enum limits_via)i;
    if (l->via == VIA_NONE)
        return msg_fail_got(L, v, "limits_via", accepted);
    return 1;
}

/* What the chosen mechanism cannot do at all, checked against the mode. */
static int check_enforceable(lua_State *L, int limits_idx,
                             const struct launch_spec *s)
{
    const struct launch_limits *l = &s->limits;
    bool any =
        l->memory || l->pids || l->tmpfs || l->nofile || l->cpu > 0 || l->time;
    if (!any)
        return 1;
    if (s->mode == MODE_NONE)
        return msg_fail_got(L, limits_idx, "limits",
                            "need mode \"bwrap\" or \"docker\": mode \"\" runs "
                            "the command without a sandbox to hold them");
    if (s->mode != MODE_BWRAP)
        return 1;
    bool total = l->memory || l->pids || l->cpu > 0;
    if (total && l->via == VIA_NONE) {
        lua_pushfstring(L,
                        "isolation: limits.%s needs limits_via (\"systemd\", "
                        "\"cgroup\" or \"rlimit\") in mode \"bwrap\": bwrap "
                        "itself cannot enforce it; isolation.preflight() "
                        "says which mechanisms work here (got nil)",
                        l->memory ? "memory"
                        : l->pids ? "pids"
                                  : "cpu");
        return 0;
    }
    if (l->cpu > 0 && l->via == VIA_RLIMIT) {
        lua_pushliteral(L, "isolation: limits.cpu cannot be enforced with "
                           "limits_via \"rlimit\": RLIMIT_CPU counts CPU "
                           "seconds per process, not cores; use "
                           "\"systemd\" or \"cgroup\" (got \"rlimit\")");
        return 0;
    }
    return 1;
}

int launch_limits_read(lua_State *L, int idx, struct launch_spec *s)
{
    struct launch_limits *l = &s->limits;
    memset(l, 0, sizeof *l);
    lua_pushliteral(L, "limits_via");
    lua_rawget(L, idx);
    if (!read_via(L, lua_gettop(L), l))
        return 0;
    lua_pushliteral(L, "limits");
    lua_rawget(L, idx);
    int t = lua_gettop(L);
    if (msg_is_absent(L, t))
        return 1;
    if (lua_type(L, t) != LUA_TTABLE)
        return msg_fail_got(
            L, t, "limits",
            "must be a table {memory = bytes, pids = n, tmpfs = "
            "bytes, nofile = n, cpu = cores, time = seconds}");
    if (!check_limit_keys(L, t))
        return 0;
    struct {
        const char *key, *field, *unit;
        lua_Integer max, *out;
    } counts[] = {
        {"memory", "limits.memory", "bytes", LIMITS_BYTES_MAX, &l->memory},
        {"pids", "limits.pids", "processes", LIMITS_COUNT_MAX, &l->pids},
        {"tmpfs", "limits.tmpfs", "bytes", LIMITS_BYTES_MAX, &l->tmpfs},
        {"nofile", "limits.nofile", "descriptors", LIMITS_COUNT_MAX,
         &l->nofile},
        {"time", "limits.time", "seconds", LIMITS_TIME_MAX, &l->time},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        lua_getfield(L, t, counts[i].key);
        if (!msg_is_absent(L, -1) &&
            !read_count(L, lua_gettop(L), counts[i].field, counts[i].max,
                        counts[i].unit, counts[i].out))
            return 0;
        lua_pop(L, 1);
    }
    lua_getfield(L, t, "cpu");
    if (!msg_is_absent(L, -1) && !read_cpu(L, lua_gettop(L), &l->cpu))
        return 0;
    lua_pop(L, 1);
    return check_enforceable(L, t, s);
}

const char *launch_limits_via_name(enum limits_via via)
{
    return via_names[via];
}

/* The cpu share as text: "1.5", "0.25" (no trailing zeros). */
static void push_number(lua_State *L, double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", v);
    lua_pushstring(L, buf);
}

/*
 * The cgroup prologue, run by bash in front of bwrap with the limits as
 * $1 (memory bytes), $2 (pids), $3 (cpu quota in microseconds per 100 ms
 * period), "-" for one not set, then "--" and bwrap's argv.
 *
 * The cgroup is made as a child of the cgroup the line already runs in
 * (never beside it: the caller's own limits, a systemd slice or a CI job's
 * cgroup, keep applying), named isolation.<pid of this shell>, in each
 * hierarchy a limit needs: cgroup v1's memory, pids and cpu where they are
 * mounted, else cgroup v2. The shell moves itself in, runs bwrap in the
 * foreground (so the sandbox keeps the terminal), then moves itself back
 * out and removes the cgroup. Its exit status is bwrap's.
 *
 * When the shell is killed instead, bwrap dies with it (--die-with-parent)
 * and the kernel ends the sandbox's pid namespace, so the cgroup is left
 * empty: the next launch's prologue (and isolation.limits.cleanup, which
 * isolate and the session manager run) removes every isolation.<pid> whose
 * process is gone. rmdir cannot remove a cgroup that still holds a
 * process, so a live sandbox's cgroup is never taken away.
 */
static const char cgroup_prologue[] =
    "set -u\n"
    "mem=$1 pids=$2 quota=$3; shift 4\n"
    "name=isolation.$$ made= leave=\n"
    "die() {\n"
    "  printf 'isolation: limits_via cgroup: %s; the sandbox was not "
    "started\\n' \"$*\" >&2\n"
    "  for d in $leave; do printf '%s\\n' $$ > \"$d/cgroup.procs\"; done "
    "2>/dev/null\n"
    "  for d in $made; do rmdir \"$d\" 2>/dev/null; done\n"
    "  exit 125\n"
    "}\n"
    /* this process's cgroup directory for controller $1 (v1, else v2) */
    "home() {\n"
    "  local ctls rel root\n"
    "  while IFS=: read -r _ ctls rel; do\n"
    "    case \",$ctls,\" in *\",$1,\"*) [ -d \"/sys/fs/cgroup/$1\" ] && "
    "{ printf '%s' \"/sys/fs/cgroup/$1${rel%/}\"; return 0; } ;; esac\n"
    "  done < /proc/self/cgroup\n"
    "  for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do\n"
    "    if [ -f \"$root/cgroup.controllers\" ] && "
    "grep -qw \"$1\" \"$root/cgroup.controllers\"; then\n"
    "      rel=$(sed -n 's/^0:://p' /proc/self/cgroup)\n"
    "      printf '%s' \"$root${rel%/}\"; return 0\n"
    "    fi\n"
    "  done\n"
    "  return 1\n"
    "}\n"
    /*
     * earlier sandboxes' cgroups whose shell is gone (or a zombie nobody
     * reaped yet): empty, removable
     */
    "sweep() {\n"
    "  local d p\n"
    "  for d in \"$1\"/isolation.*; do\n"
    "    p=${d##*/isolation.}\n"
    "    case $p in ''|*[!0-9]*) continue ;; esac\n"
    "    case $(cat \"/proc/$p/stat\" 2>/dev/null) in ''|*') Z '*) rmdir "
    "\"$d\" 2>/dev/null ;; esac\n"
    "  done\n"
    "}\n"
    "put() { printf '%s\\n' \"$2\" > \"$1\" 2>/dev/null || die \"cannot write "
    "$2 to $1\"; }\n"
    /* makes $name under controller $1's cgroup; sets $dir and $v2 */
    "mk_cg() {\n"
    "  local base\n"
    "  base=$(home \"$1\") || die \"no cgroup hierarchy with the $1 "
    "controller\"\n"
    "  sweep \"$base\"\n"
    "  dir=$base/$name v2=\n"
    "  [ -f \"$base/cgroup.controllers\" ] && v2=1\n"
    "  if [ -n \"$v2\" ]; then printf '+%s\\n' \"$1\" > "
    "\"$base/cgroup.subtree_control\" 2>/dev/null; fi\n"
    "  case \" $made \" in *\" $dir \"*) return 0 ;; esac\n"
    "  rmdir \"$dir\" 2>/dev/null; mkdir \"$dir\" 2>/dev/null || die "
    "\"cannot make $dir\"\n"
    "  made=\"$made $dir\" leave=\"$leave $base\"\n"
    "}\n"
    "if [ \"$mem\" != - ]; then\n"
    "  mk_cg memory\n"
    "  if [ -n \"$v2\" ]; then put \"$dir/memory.max\" \"$mem\"\n"
    "    [ -f \"$dir/memory.swap.max\" ] && put \"$dir/memory.swap.max\" 0\n"
    "  else put \"$dir/memory.limit_in_bytes\" \"$mem\"\n"
    "    [ -f \"$dir/memory.memsw.limit_in_bytes\" ] && put "
    "\"$dir/memory.memsw.limit_in_bytes\" \"$mem\"\n"
    "  fi\n"
    "  memdir=$dir memv2=$v2\n"
    "fi\n"
    "if [ \"$pids\" != - ]; then mk_cg pids; put \"$dir/pids.max\" "
    "\"$pids\"; fi\n"
    "if [ \"$quota\" != - ]; then mk_cg cpu\n"
    "  if [ -n \"$v2\" ]; then put \"$dir/cpu.max\" \"$quota 100000\"\n"
    "  else put \"$dir/cpu.cfs_period_us\" 100000; put "
    "\"$dir/cpu.cfs_quota_us\" \"$quota\"; fi\n"
    "fi\n"
    "for d in $made; do put \"$d/cgroup.procs\" $$; done\n"
    "\"$@\"\n"
    "rc=$?\n"
    "for d in $leave; do printf '%s\\n' $$ > \"$d/cgroup.procs\" "
    "2>/dev/null; done\n"
    "if [ \"$mem\" != - ]; then\n"
    "  if [ -n \"$memv2\" ]; then f=$memdir/memory.events; else "
    "f=$memdir/memory.oom_control; fi\n"
    "  n=$(sed -n 's/^oom_kill //p' \"$f\" 2>/dev/null)\n"
    "  [ \"${n:-0}\" -gt 0 ] 2>/dev/null && printf 'isolation: the kernel "
    "killed %s process(es) of the sandbox at its memory limit (%s "
    "bytes)\\n' \"$n\" \"$mem\" >&2\n"
    "fi\n"
    "for d in $made; do\n"
    "  for i in 1 2 3 4 5 6 7 8 9 10; do rmdir \"$d\" 2>/dev/null && break; "
    "sleep 0.1; done\n"
    "done\n"
    "exit $rc\n";

/*
 * The time prologue: $1 seconds, $2 the grace period, then "--" and the
 * rest of the line. Not timeout(1): timeout catches SIGINT, SIGQUIT and
 * SIGHUP and, on exec, hands bwrap the default action for them even when
 * the caller ignored them (isolate does, so that Ctrl-C at the terminal
 * reaches the command and not bwrap, whose death would SIGKILL it), and a
 * SIGTERM to bwrap is not relayed to the command, which would never get the
 * chance to clean up.
 *
 * So: the rest of the line runs in the foreground (the sandbox keeps the
 * terminal, every signal disposition is the caller's), and a watchdog
 * subshell (in the background: it ignores the terminal's SIGINT) waits in
 * one-second steps, leaving early when this shell is gone. At the limit it
 * sends SIGTERM to every process below the line that is not bwrap's own:
 * the command and what it started, as a terminal would; after the grace
 * period, SIGKILL to what is still there (bwrap, which takes the whole
 * sandbox with it). The line then exits 124, as timeout(1) does; a command
 * that ends first keeps its own status.
 */
static const char time_prologue[] =
    "t=$1 g=$2; shift 3\n"
    /* the watchdog finds the sandbox through it: without it, fail closed */
    "[ -r \"/proc/$$/task/$$/children\" ] || { printf 'isolation: limits.time "
    "needs /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN); the sandbox "
    "was not started\\n' >&2; exit 125; }\n"
    "below() { local c; for c in $(cat \"/proc/$1/task/$1/children\" "
    "2>/dev/null); do printf '%s\\n' \"$c\"; below \"$c\"; done; }\n"
    "(\n"
    "  fired=0 s=\n"
    "  trap 'kill $s 2>/dev/null; exit $fired' TERM\n"
    "  n=0\n"
    "  while [ $n -lt \"$t\" ]; do\n"
    "    sleep 1 & s=$!; wait $s\n"
    "    kill -0 $$ 2>/dev/null || exit 0\n"
    "    n=$((n + 1))\n"
    "  done\n"
    "  fired=124\n"
    "  printf 'isolation: the time limit (%s s) is reached: SIGTERM to the "
    "sandbox, SIGKILL in %s s\\n' \"$t\" \"$g\" >&2\n"
    "  for p in $(below $$); do\n"
    "    [ \"$p\" = \"$BASHPID\" ] && continue\n"
    "    [ \"$(cat \"/proc/$p/comm\" 2>/dev/null)\" = bwrap ] || kill -TERM "
    "\"$p\" 2>/dev/null\n"
    "  done\n"
    "  sleep \"$g\" & s=$!; wait $s\n"
    "  for p in $(cat \"/proc/$$/task/$$/children\" 2>/dev/null); do\n"
    "    [ \"$p\" = \"$BASHPID\" ] || kill -KILL \"$p\" 2>/dev/null\n"
    "  done\n"
    "  exit 124\n"
    ") &\n"
    "w=$!\n"
    "\"$@\"\n"
    "rc=$?\n"
    "kill -TERM $w 2>/dev/null\n"
    "wait $w\n"
    "[ $? = 124 ] && exit 124\n"
    "exit $rc\n";

const char *launch_limits_cgroup_prologue(void)
{
    return cgroup_prologue;
}

static void add_integer(struct argv_buf *b, const char *fmt, lua_Integer n)
{
    lua_pushfstring(b->L, fmt, (LUAI_UACINT)n);
    argv_add_top(b);
}

static void add_systemd(struct argv_buf *b, const struct launch_limits *l)
{
    argv_add(b, "systemd-run");
    argv_add(b, "--user");
    argv_add(b, "--scope");
    argv_add(b, "--quiet");
    argv_add(b, "--collect");
    if (l->memory) {
        argv_add(b, "-p");
        add_integer(b, "MemoryMax=%I", l->memory);
        argv_add(b, "-p");
        argv_add(b, "MemorySwapMax=0");
    }
    if (l->pids) {
        argv_add(b, "-p");
        add_integer(b, "TasksMax=%I", l->pids);
    }
    if (l->cpu > 0) {
        argv_add(b, "-p");
        push_number(b->L, l->cpu * 100);
        lua_pushfstring(b->L, "CPUQuota=%s%%", lua_tostring(b->L, -1));
        lua_remove(b->L, -2);
        argv_add_top(b);
    }
    argv_add(b, "--");
}

static void add_cgroup(struct argv_buf *b, const struct launch_limits *l)
{
    argv_add(b, "bash");
    argv_add(b, "-c");
    argv_add(b, cgroup_prologue);
    argv_add(b, "isolation-cgroup");
    if (l->memory)
        add_integer(b, "%I", l->memory);
    else
        argv_add(b, "-");
    if (l->pids)
        add_integer(b, "%I", l->pids);
    else
        argv_add(b, "-");
    if (l->cpu > 0)
        add_integer(b, "%I", (lua_Integer)(l->cpu * 100000 + 0.5));
    else
        argv_add(b, "-");
    argv_add(b, "--");
}

static void add_prlimit(struct argv_buf *b, const struct launch_limits *l)
{
    bool rlimit = l->via == VIA_RLIMIT;
    if (!l->nofile && !(rlimit && (l->pids || l->memory)))
        return;
    argv_add(b, "prlimit");
    if (l->nofile) {
        lua_pushfstring(b->L, "--nofile=%I:%I", (LUAI_UACINT)l->nofile,
                        (LUAI_UACINT)l->nofile);
        argv_add_top(b);
    }
    if (rlimit && l->pids) {
        lua_pushfstring(b->L, "--nproc=%I:%I", (LUAI_UACINT)l->pids,
                        (LUAI_UACINT)l->pids);
        argv_add_top(b);
    }
    if (rlimit && l->memory) {
        lua_pushfstring(b->L, "--as=%I:%I", (LUAI_UACINT)l->memory,
                        (LUAI_UACINT)l->memory);
        argv_add_top(b);
    }
    argv_add(b, "--");
}

void launch_limits_push_prefix(lua_State *L, const struct launch_spec *s)
{
    const struct launch_limits *l = &s->limits;
    struct argv_buf b;
    argv_start(&b, L);
    if (s->mode != MODE_BWRAP)
        return;
    bool total = l->memory || l->pids || l->cpu > 0;
    if (total && l->via == VIA_SYSTEMD)
        add_systemd(&b, l);
    else if (total && l->via == VIA_CGROUP)
        add_cgroup(&b, l);
    /*
     * Inside the mechanism: at the limit the watchdog ends the sandbox, not
     * the cgroup shell, which lives on to remove its cgroup.
     */
    if (l->time) {
        argv_add(&b, "bash");
        argv_add(&b, "-c");
        argv_add(&b, time_prologue);
        argv_add(&b, "isolation-time");
        add_integer(&b, "%I", l->time);
        add_integer(&b, "%I", LIMITS_TIME_GRACE);
        argv_add(&b, "--");
    }
    add_prlimit(&b, l);
}

void launch_limits_prepend(lua_State *L, int argv_idx,
                           const struct launch_spec *s)
{
    argv_idx = lua_absindex(L, argv_idx);
    launch_limits_push_prefix(L, s);
    int pre = lua_gettop(L);
    lua_Integer np = (lua_Integer)lua_rawlen(L, pre);
    if (np > 0) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, argv_idx);
        for (lua_Integer i = n; i >= 1; i--) {
            lua_rawgeti(L, argv_idx, i);
            lua_rawseti(L, argv_idx, i + np);
        }
        for (lua_Integer i = 1; i <= np; i++) {
            lua_rawgeti(L, pre, i);
            lua_rawseti(L, argv_idx, i);
        }
    }
    lua_pop(L, 1);
}

/* limits.tmpfs: the sandbox cannot fill RAM through /tmp or $HOME */
void launch_limits_add_tmpfs_size(struct argv_buf *b,
                                  const struct launch_spec *s)
{
    if (!s->limits.tmpfs)
        return;
    argv_add(b, "--size");
    add_integer(b, "%I", s->limits.tmpfs);
}

/*
 * bwrap's --dev /dev is a tmpfs of its own, without a size and writable by
 * the sandbox's user (as root or not): `head -c 30G /dev/zero > /dev/x`
 * would fill RAM past every tmpfs limit. With limits.tmpfs it is remounted
 * read-only (the device nodes are bind mounts of their own and keep
 * working: a read-only mount does not stop writes to a device) and
 * /dev/shm, which POSIX semaphores and shm_open need writable, becomes a
 * sized tmpfs of its own.
 */
void launch_limits_add_dev(struct argv_buf *b, const struct launch_spec *s)
{
    if (!s->limits.tmpfs)
        return;
    argv_add(b, "--remount-ro");
    argv_add(b, "/dev");
    launch_limits_add_tmpfs_size(b, s);
    argv_add(b, "--tmpfs");
    argv_add(b, "/dev/shm");
}

void launch_limits_add_docker(struct argv_buf *b, const struct launch_spec *s)
{
    const struct launch_limits *l = &s->limits;
    if (l->memory) {
        /* the same value for memory+swap: no swap beyond the limit */
        argv_add(b, "--memory");
        add_integer(b, "%I", l->memory);
        argv_add(b, "--memory-swap");
        add_integer(b, "%I", l->memory);
    }
    if (l->pids) {
        argv_add(b, "--pids-limit");
        add_integer(b, "%I", l->pids);
    }
    if (l->cpu > 0) {
        argv_add(b, "--cpus");
        push_number(b->L, l->cpu);
        argv_add_top(b);
    }
    if (l->nofile) {
        argv_add(b, "--ulimit");
        lua_pushfstring(b->L, "nofile=%I:%I", (LUAI_UACINT)l->nofile,
                        (LUAI_UACINT)l->nofile);
        argv_add_top(b);
    }
    if (l->tmpfs) {
        argv_add(b, "--tmpfs");
        add_integer(b, "/tmp:rw,nosuid,nodev,size=%I,mode=1777", l->tmpfs);
    }
}

/*
 * Only for a line without the reaper (reap = false: a line for another
 * host): the reaper's --time enforces limits.time from the host, where the
 * agent cannot SIGSTOP it. In the container, in front of its bash: a
 * timeout in front of `docker
 * run` would end the client, not the container (which --rm then keeps
 * running until it ends by itself).
 */
void launch_limits_add_docker_time(struct argv_buf *b,
                                   const struct launch_spec *s)
{
    if (!s->limits.time || s->reap_path)
        return;
    /*
     * --foreground: the command keeps the container's terminal; what it
     * started ends with the container when timeout, its PID 1, exits.
     */
    argv_add(b, "timeout");
    argv_add(b, "--foreground");
    argv_add(b, "-k");
    add_integer(b, "%I", LIMITS_TIME_GRACE);
    add_integer(b, "%I", s->limits.time);
}

static void add_line(luaL_Buffer *b, lua_State *L, const char *fmt,
                     lua_Integer n, const char *how)
{
    lua_pushfstring(L, fmt, (LUAI_UACINT)n);
    luaL_addvalue(b);
    luaL_addstring(b, how);
    luaL_addchar(b, '\n');
}

static const char *total_how(enum limits_via via, const char *what)
{
    if (via == VIA_SYSTEMD)
        return strcmp(what, "memory") == 0
                   ? "systemd user scope (MemoryMax, MemorySwapMax=0): the "
                     "sandbox's total"
               : strcmp(what, "pids") == 0
                   ? "systemd user scope (TasksMax): the sandbox's total"
                   : "systemd user scope (CPUQuota)";
    if (via == VIA_CGROUP)
        return strcmp(what, "memory") == 0
                   ? "a cgroup made for this sandbox (memory.max or "
                     "memory.limit_in_bytes and memsw; removed after): the "
                     "sandbox's total; the kernel kills a process at it"
               : strcmp(what, "pids") == 0
                   ? "a cgroup made for this sandbox (pids.max; removed "
                     "after): the sandbox's total, counting the line's own "
                     "shells (and a watchdog when time is set) and "
                     "bwrap's two "
                     "processes"
                   : "a cgroup made for this sandbox (cpu.max or "
                     "cpu.cfs_quota_us per 100 ms period)";
    return strcmp(what, "memory") == 0
               ? "prlimit --as (RLIMIT_AS): address space per process, not "
                 "the sandbox's total"
               : "prlimit --nproc (RLIMIT_NPROC): counts every process of "
                 "the launching user, inside and outside the sandbox; no "
                 "effect at all when root launches";
}

void launch_limits_add_dry_run(luaL_Buffer *b, lua_State *L,
                               const struct launch_spec *s)
{
    const struct launch_limits *l = &s->limits;
    bool docker = s->mode == MODE_DOCKER;
    if (!(l->memory || l->pids || l->tmpfs || l->nofile || l->cpu > 0 ||
          l->time)) {
        luaL_addstring(b, "limits: none: the sandbox may use all of the "
                          "machine's memory, processes and CPU, and fill "
                          "RAM through /tmp\n");
        return;
    }
    luaL_addstring(b, "limits");
    if (!docker && l->via != VIA_NONE) {
        luaL_addstring(b, " (limits_via ");
        luaL_addstring(b, via_names[l->via]);
        luaL_addchar(b, ')');
    }
    luaL_addstring(b, ":\n");
    if (l->memory)
        add_line(b, L, "  memory %I bytes: ", l->memory,
                 docker ? "docker --memory, --memory-swap (no swap)"
                        : total_how(l->via, "memory"));
    if (l->pids)
        add_line(b, L, "  pids %I: ", l->pids,
                 docker ? "docker --pids-limit" : total_how(l->via, "pids"));
    if (l->cpu > 0) {
        push_number(L, l->cpu);
        lua_pushfstring(L, "  cpu %s cores: %s\n", lua_tostring(L, -1),
                        docker ? "docker --cpus" : total_how(l->via, "cpu"));
        lua_remove(L, -2);
        luaL_addvalue(b);
    }
    if (l->tmpfs)
        add_line(b, L, "  tmpfs %I bytes: ", l->tmpfs,
                 docker ? "docker --tmpfs /tmp size= (writing past it gives "
                          "ENOSPC)"
                        : "bwrap --size on each of /tmp, $HOME and /dev/shm, "
                          "and /dev read-only (writing past it gives "
                          "ENOSPC)");
    if (l->nofile)
        add_line(b, L, "  nofile %I: ", l->nofile,
                 docker ? "docker --ulimit nofile (RLIMIT_NOFILE, per "
                          "process)"
                        : "prlimit --nofile (RLIMIT_NOFILE, per process)");
    if (l->time) {
        lua_pushfstring(L,
                        "  time %I seconds: %s, SIGKILL %d seconds later; "
                        "exit status 124\n",
                        (LUAI_UACINT)l->time,
                        docker && s->reap_path
                            ? "the bridge's reaper on the host (--time), "
                              "SIGTERM to the client, which passes it on; "
                              "the container removed by the engine (rm -f)"
                        : docker ? "timeout in the container (no reaper: "
                                   "the command can stop it), SIGTERM to the "
                                   "command"
                                 : "a watchdog in front of bwrap, SIGTERM "
                                   "to every process in the sandbox",
                        (int)LIMITS_TIME_GRACE);
        luaL_addvalue(b);
    }
}
