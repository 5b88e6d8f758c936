/*
 * reap.c - a local sandbox ends when its processes are gone.
 *
 * bwrap's monitor exits as soon as the command does; the sandbox's PID 1
 * (bwrap's init) then ends through the parent-death signal bwrap set on
 * it, and the kernel kills what is left of the namespace. A process of the
 * sandbox can clear that signal (it may ptrace its init: same uid), and the
 * namespace, with a setsid'd child writing the workdir, then outlived the
 * launch. So a local launch line runs behind this program:
 *
 *   isolation-bridge --reap GRACE -- COMMAND [ARG...]
 *
 * - It is a child subreaper (PR_SET_CHILD_SUBREAPER): every process below
 *   it whose parent dies becomes its child, the sandbox's init among them
 *   once bwrap's monitor is gone. Nothing below can leave the subtree:
 *   setsid, double forks and ptrace do not change a process's ancestry.
 * - Once COMMAND has ended it sends SIGKILL to each child it has and reaps
 *   until it has none. SIGKILL to a PID namespace's init kills every
 *   process of the namespace, and the init's exit completes only when they
 *   are gone; a host-side process left by the line (a limits shell) is
 *   killed, and what it leaves comes back to this program, until nothing
 *   does. Whatever the sandbox did to itself, the line's status comes back
 *   only after that.
 * - SIGTERM, SIGHUP, SIGINT and SIGQUIT (those not ignored when it started:
 *   isolate ignores the terminal's) go on to every process below it except
 *   bwrap's own, which do not relay signals and whose death would kill the
 *   command with no chance to clean up; GRACE seconds later, whatever still
 *   runs is killed as above. Each signal goes on once: a signal sent to
 *   the whole process group (a terminal's Ctrl-C, timeout(1)) reaches the
 *   command directly as well as through this program, and more copies
 *   change its meaning (the docker client ends itself with status 1 at its
 *   third SIGTERM or SIGINT, "forcefully exiting"); what ignores the first
 *   is killed at the end of the grace anyway.
 *
 * Options before "--":
 * - --time SECONDS: SECONDS after the start, the same as a forwarded
 *   SIGTERM (then SIGKILL GRACE seconds later); the exit status is then
 *   124, as timeout(1)'s. The timer is here, outside the sandbox: nothing
 *   inside can stop or signal it (a timeout(1) in a container runs as the
 *   agent's uid, which may SIGSTOP it).
 * - --container: COMMAND is "ENGINE run ..." (docker or podman). The
 *   reaper adds "--cidfile DIR/cid" after "run" (DIR a private directory
 *   it makes and removes), and once the command has ended, or its grace
 *   is over, runs "ENGINE kill --signal=KILL ID" and "ENGINE rm -f ID":
 *   the engine kills the container
 *   whatever its processes did to their init, and no container outlives
 *   the line. Killing the client alone leaves the container running.
 *   The container is not below this program (the engine's daemon runs
 *   it), so a SIGKILL to this program (an orchestrator's kill -9, the OOM
 *   killer), or to the caller's whole process group, would skip that
 *   removal: before the command starts, a watchdog child
 *   ("isolation-watch", in a session of its own, so that a kill of the
 *   caller's group does not reach it; SIGTERM, SIGHUP, SIGINT and SIGQUIT
 *   ignored) waits on a pipe whose only write end this program holds.
 *   EOF (this program died, however) makes it wait up to REAP_WATCH_CID
 *   seconds for the cidfile and remove the container the same way. On
 *   the normal end this program has removed it itself, and SIGKILLs the
 *   watchdog before closing the pipe: one removal, no watchdog left. A
 *   reaper above this one (the session manager's) inherits the watchdog
 *   once this program is gone: it spares a child that runs this program's
 *   own file under the watchdog's name for REAP_WATCH_LIFE seconds, and
 *   passes it no signal, so the removal completes. A SIGKILL to both at
 *   once (kill -9 -1) still leaves the container running.
 *
 * - --env: COMMAND's first words are taken as env(1) takes them: "-i"
 *   empties the environment, then each NAME=VALUE word sets a variable,
 *   and the first word without "=" is the program. Only the command's
 *   environment changes (this program keeps its own). A local bwrap line
 *   starts bwrap from an empty environment: here, rather than through an
 *   env(1) of its own behind this program, which cost one more exec at
 *   every launch. Not with --container.
 *
 * It exits with COMMAND's status (dying of the same signal when COMMAND
 * did), or 125 when processes were still there REAP_KILL_WAIT seconds after
 * their SIGKILL (a process in uninterruptible sleep), saying so. No process
 * of the sandbox can signal or trace it: it is outside the sandbox's PID
 * namespace, and runs before it exists.
 */
#include "reap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REAP_GRACE_MAX 3600
/* seconds from the SIGKILL until the end is reported as failed */
#define REAP_KILL_WAIT 30
#define REAP_EXIT_FAILED 125
/* the longest --time: limits.time's own bound */
#define REAP_TIME_MAX (366L * 24 * 3600)
/* seconds the watchdog waits for the engine to write the cidfile: a client
 * killed with this program may still be creating the container */
#define REAP_WATCH_CID 60
/* the watchdog's comm: what pgrep -x finds */
#define REAP_WATCH_NAME "isolation-watch"
/* the descriptor the watchdog reads this program's end from */
#define REAP_WATCH_FD 3
/* seconds a watchdog lives at most once its pipe has closed: the wait for
 * the id, then two engine commands of at most REAP_KILL_WAIT each; a
 * margin. How long a reaper above gives a watchdog it adopted. */
#define REAP_WATCH_LIFE (REAP_WATCH_CID + 2 * REAP_KILL_WAIT + 10)

static const int forwarded[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

static int fail(int code, const char *what, const char *detail)
{
    fprintf(stderr, "isolation-bridge --reap: %s: %s\n", what, detail);
    return code;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The parent pid and command name of pid, from /proc/PID/stat. */
static bool read_stat(const char *pid, pid_t *ppid, char *comm, size_t size)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "PID (COMM) STATE PPID ...": COMM may hold ")" and spaces */
    char *open = strchr(buf, '(');
    char *close = strrchr(buf, ')');
    if (!open || !close || close < open)
        return false;
    size_t len = (size_t)(close - open - 1);
    if (len >= size)
        len = size - 1;
    memcpy(comm, open + 1, len);
    comm[len] = '\0';
    char state;
    int parent;
    if (sscanf(close + 1, " %c %d", &state, &parent) != 2)
        return false;
    *ppid = (pid_t)parent;
    return true;
}

struct proc {
    pid_t pid, ppid;
    bool bwrap, watch;
};

/*
 * Whether pid runs this program's own file (compared by device and inode
 * of /proc/PID/exe): with the name REAP_WATCH_NAME, a watchdog, forked by
 * a reaper and never exec'ed. Only exec'ing this file makes a process's
 * exe this file, and a process that does is bounded all the same (a
 * watchdog is spared for REAP_WATCH_LIFE seconds only).
 */
static bool runs_this_program(const char *pid)
{
    static struct stat self;
    static int known; /* 0 not yet, 1 known, -1 unknown */
    if (known == 0)
        known = stat("/proc/self/exe", &self) == 0 ? 1 : -1;
    if (known < 0)
        return false;
    char path[300]; /* a d_name is at most 255 bytes */
    struct stat st;
    snprintf(path, sizeof path, "/proc/%s/exe", pid);
    return stat(path, &st) == 0 && st.st_dev == self.st_dev &&
           st.st_ino == self.st_ino;
}

/* Every process of the system (up to max); the count. */
static size_t proc_table(struct proc *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char comm[32];
        pid_t ppid;
        if (!read_stat(e->d_name, &ppid, comm, sizeof comm))
            continue;
        bool watch =
            strcmp(comm, REAP_WATCH_NAME) == 0 && runs_this_program(e->d_name);
        out[n++] = (struct proc){(pid_t)atoi(e->d_name), ppid,
                                 strcmp(comm, "bwrap") == 0, watch};
    }
    closedir(d);
    return n;
}

#define REAP_PROCS_MAX 65536
static struct proc procs[REAP_PROCS_MAX];

/* The watchdog (a child of this program), 0 when there is none or it has
 * been reaped: no signal of this program's own passes may reach it. */
static pid_t watch_pid;

/*
 * Sends sig to every process below this one: only to the direct children
 * when direct_only, else to all descendants except bwrap's own processes.
 * Never to this program's watchdog (it must outlive this program), nor to
 * what runs below a watchdog (its engine commands). When spare_adopted,
 * not to a watchdog this program adopted either (a reaper below was
 * killed: its watchdog, now this program's child, is removing its
 * container). Returns how many adopted watchdogs it spared.
 */
static int signal_below(int sig, bool direct_only, bool spare_adopted)
{
    size_t n = proc_table(procs, REAP_PROCS_MAX);
    static pid_t queue[REAP_PROCS_MAX];
    size_t head = 0, tail = 0;
    int spared = 0;
    queue[tail++] = getpid();
    while (head < tail) {
        pid_t parent = queue[head++];
        for (size_t i = 0; i < n; i++) {
            if (procs[i].ppid != parent || procs[i].pid == parent ||
                (watch_pid > 0 && procs[i].pid == watch_pid))
                continue;
            if (spare_adopted && procs[i].watch) {
                spared++;
                continue;
            }
            if (!direct_only && tail < REAP_PROCS_MAX)
                queue[tail++] = procs[i].pid;
            if (direct_only || !procs[i].bwrap)
                kill(procs[i].pid, sig);
        }
    }
    return spared;
}

/* Reaps what has ended; records the command's status. -1 once no child
 * is left (ECHILD), else how many it reaped. */
static int reap_ended(pid_t command, int *status, bool *command_done)
{
    int reaped = 0;
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p == 0)
            return reaped;
        if (p < 0)
            return errno == ECHILD ? -1 : reaped;
        reaped++;
        if (p == watch_pid)
            watch_pid = 0; /* its pid may be reused from now on */
        if (p == command) {
            *status = st;
            *command_done = true;
        }
    }
}

/* Waits up to seconds (or for ever when < 0) for one of set. */
static int wait_signal(const sigset_t *set, double seconds)
{
    if (seconds < 0)
        return sigwaitinfo(set, NULL);
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (double)(time_t)seconds) * 1e9)};
    return sigtimedwait(set, NULL, &ts);
}

/*
 * The end: SIGKILL to every child, reaped until none is left. A watchdog
 * adopted from a reaper below that was killed is let finish the removal
 * of its container (its engine's, not below any reaper: killing the
 * watchdog would leave it running) for up to REAP_WATCH_LIFE seconds,
 * its own bound; then it is killed like the rest.
 */
static int kill_all(const sigset_t *set, pid_t command, int *status,
                    bool *command_done)
{
    double deadline = now() + REAP_KILL_WAIT;
    double spare_until = now() + REAP_WATCH_LIFE;
    /* no child left (the usual end): nothing to look for in /proc */
    if (reap_ended(command, status, command_done) < 0)
        return 0;
    for (;;) {
        int spared = signal_below(SIGKILL, true, now() < spare_until);
        if (reap_ended(command, status, command_done) < 0)
            return 0;
        if (spared > 0)
            deadline = now() + REAP_KILL_WAIT;
        else if (now() > deadline)
            return -1;
        wait_signal(set, 0.1); /* SIGCHLD, or try again */
    }
}

/* Exits as the command did: its code, or death by its signal. */
static int exit_like(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    int sig = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none); /* the command's core is not ours */
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    return 128 + sig;
}

static bool ignored(int sig)
{
    struct sigaction sa;
    return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

static long parse_seconds(const char *s, long max)
{
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : -1;
    if (!s || !end || *end || end == s || v < 0 || v > max)
        return -1;
    return v;
}

/* The container's id from the cidfile, or "" when the engine wrote none. */
static void read_cid(const char *cidfile, char *cid, size_t size)
{
    cid[0] = '\0';
    FILE *f = fopen(cidfile, "re");
    if (!f)
        return;
    size_t n = fread(cid, 1, size - 1, f);
    fclose(f);
    cid[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!((cid[i] >= '0' && cid[i] <= '9') ||
              (cid[i] >= 'a' && cid[i] <= 'f'))) {
            cid[i] = '\0';
            break;
        }
}

/* ENGINE VERB... ID, its output dropped; waits for it up to
 * REAP_KILL_WAIT seconds (an engine that hangs is killed). */
static void engine_run(const char *engine, const char *verb, const char *opt,
                       const char *cid)
{
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return;
    if (p == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        FILE *null = freopen("/dev/null", "w", stdout);
        (void)null;
        null = freopen("/dev/null", "w", stderr);
        (void)null;
        execlp(engine, engine, verb, opt, cid, (char *)NULL);
        _exit(127);
    }
    double deadline = now() + REAP_KILL_WAIT;
    while (waitpid(p, NULL, WNOHANG) == 0) {
        if (now() > deadline) {
            kill(p, SIGKILL);
            waitpid(p, NULL, 0);
            break;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/*
 * ENGINE kill --signal KILL ID, then ENGINE rm -f ID: rm -f alone gives
 * podman's container its stop timeout (10 s of SIGTERM first), which a
 * container whose init is stopped spends running.
 */
static void container_remove(const char *engine, const char *cidfile)
{
    char cid[129];
    read_cid(cidfile, cid, sizeof cid);
    if (!cid[0])
        return;
    engine_run(engine, "kill", "--signal=KILL", cid);
    engine_run(engine, "rm", "-f", cid);
}

/* Closes every descriptor from `from` up. */
static void close_from(int from)
{
    if (close_range((unsigned)from, ~0U, 0) == 0)
        return;
    /* a kernel before 5.9: one by one, up to the descriptor limit */
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)max)
        max = (long)rl.rlim_cur;
    for (long fd = from; fd < max; fd++)
        close((int)fd);
}

/*
 * The watchdog, in the child: fd is the read end of the pipe whose only
 * write end the reaper holds. Returns never.
 *
 * - setsid: a kill of the caller's process group (kill -9 -PGID) or a
 *   terminal's signal does not reach it; the forwarded signals are
 *   ignored (a subreaper above passes its SIGTERM to every process below
 *   it): only SIGKILL ends it, and the reaper sends that on its normal end.
 * - It holds nothing of the caller's: stdin, stdout and stderr are
 *   /dev/null and every other descriptor but the pipe is closed. A caller
 *   that reads the line's output until EOF, or waits for a pipe it gave
 *   the line to close, must not wait for the watchdog.
 * - EOF means the reaper is gone without removing the container (only
 *   its death closes the pipe before the watchdog's own SIGKILL). The
 *   client may still be creating the container: the id is waited for up
 *   to REAP_WATCH_CID seconds.
 */
static _Noreturn void watch_main(int fd, const char *engine,
                                 const char *cidfile, const char *cid_dir)
{
    prctl(PR_SET_NAME, REAP_WATCH_NAME, 0, 0, 0);
    setsid();
    for (size_t i = 0; i < NFORWARDED; i++)
        signal(forwarded[i], SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    if (fd != REAP_WATCH_FD && dup2(fd, REAP_WATCH_FD) < 0)
        _exit(REAP_EXIT_FAILED);
    close_from(REAP_WATCH_FD + 1); /* the write end among them */
    int null = open("/dev/null", O_RDWR);
    for (int std = 0; null >= 0 && std <= 2; std++)
        if (null != std)
            dup2(null, std);
    if (null > 2)
        close(null);

    char c;
    ssize_t n;
    do
        n = read(REAP_WATCH_FD, &c, 1);
    while (n < 0 && errno == EINTR);

    double deadline = now() + REAP_WATCH_CID;
    char cid[129];
    for (read_cid(cidfile, cid, sizeof cid); !cid[0] && now() < deadline;
         read_cid(cidfile, cid, sizeof cid)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    container_remove(engine, cidfile);
    unlink(cidfile);
    rmdir(cid_dir);
    _exit(0);
}

/* Forks the watchdog; its pipe's write end (close-on-exec: the command
 * must not hold it), or -1. */
static int watch_start(const char *engine, const char *cidfile,
                       const char *cid_dir)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t w = fork();
    if (w == 0)
        watch_main(p[0], engine, cidfile, cid_dir);
    close(p[0]);
    if (w < 0) {
        int e = errno;
        close(p[1]);
        errno = e;
        return -1;
    }
    watch_pid = w;
    return p[1];
}

/* The normal end, the container removed: SIGKILL to the watchdog before
 * its pipe closes, so that it never removes it a second time. Reaped here
 * (a SIGKILL ends a process blocked in read() at once): left to kill_all,
 * it would still be there at its first look, and cost the end a scan of
 * /proc. */
static void watch_stop(int fd)
{
    if (watch_pid > 0) {
        kill(watch_pid, SIGKILL);
        while (waitpid(watch_pid, NULL, 0) < 0 && errno == EINTR)
            ;
        watch_pid = 0;
    }
    if (fd >= 0)
        close(fd);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: isolation-bridge --reap GRACE [--time SECONDS] "
            "[--container | --env] -- COMMAND [ARG...]   (GRACE: seconds, 0 "
            "to 3600; SECONDS: 1 to %ld; --container: COMMAND is ENGINE run "
            "...; --env: COMMAND is [-i] [NAME=VALUE...] PROGRAM [ARG...], "
            "as env(1) takes it)\n",
            REAP_TIME_MAX);
    return 2;
}

/* --env: the command's environment as env(1) makes it from its words:
 * "-i" starts from nothing, else from this program's own; each NAME=VALUE
 * word then sets NAME (a later word for a name wins, as putenv does).
 * Returns the array (allocated; its strings are the words' and environ's)
 * and sets *prog to the program's words; NULL (said on stderr) when there
 * is no program or a word sets no name ("=x"). */
static char **env_of(char **words, char ***prog)
{
    bool clear = *words && strcmp(*words, "-i") == 0;
    if (clear)
        words++;
    size_t nw = 0, ne = 0;
    while (words[nw] && strchr(words[nw], '='))
        nw++;
    while (!clear && environ[ne])
        ne++;
    char **envp = calloc(ne + nw + 1, sizeof *envp);
    if (!envp) {
        fprintf(stderr, "isolation-bridge --reap --env: %s\n", strerror(errno));
        return NULL;
    }
    size_t n = 0;
    for (; n < ne; n++)
        envp[n] = environ[n];
    for (size_t i = 0; i < nw; i++) {
        size_t klen = (size_t)(strchr(words[i], '=') - words[i]);
        if (klen == 0) {
            fprintf(stderr, "isolation-bridge --reap --env: cannot set '%s'\n",
                    words[i]);
            free(envp);
            return NULL;
        }
        size_t j = 0;
        while (j < n && strncmp(envp[j], words[i], klen + 1) != 0)
            j++;
        envp[j] = words[i];
        if (j == n)
            n++;
    }
    if (!words[nw]) {
        fprintf(stderr, "isolation-bridge --reap --env: no program\n");
        free(envp);
        return NULL;
    }
    *prog = words + nw;
    return envp;
}

/*
 * Starts the command: posix_spawnp, whose child shares this program's
 * memory until its exec (a vfork: no page tables copied; about 1 ms less
 * than fork and exec on the 2 shared cores bench/startup.sh measures, at
 * every launch), with the signal mask this program started with. The
 * program is found in the PATH of the command's own environment, as
 * env(1) and execvp find it. Returns 0 and the pid, or the errno of the
 * failed start (said on stderr).
 */
static int spawn_command(char **prog, char **envp, const sigset_t *mask,
                         pid_t *pid)
{
    posix_spawnattr_t attr;
    int e = posix_spawnattr_init(&attr);
    if (e == 0)
        e = posix_spawnattr_setsigmask(&attr, mask);
    if (e == 0)
        e = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    if (e == 0) {
        char **own = environ;
        environ = envp; /* posix_spawnp looks up PATH in environ */
        e = posix_spawnp(pid, prog[0], NULL, &attr, prog, envp);
        environ = own;
    }
    posix_spawnattr_destroy(&attr);
    if (e != 0)
        fprintf(stderr, "isolation-bridge --reap: %s: %s\n", prog[0],
                strerror(e));
    return e;
}

int reap_main(int argc, char **argv)
{
    long grace = parse_seconds(argc > 1 ? argv[1] : NULL, REAP_GRACE_MAX);
    long limit = 0;
    bool container = false, env = false;
    int a = 2;
    while (grace >= 0 && a < argc && strcmp(argv[a], "--") != 0) {
        if (strcmp(argv[a], "--time") == 0 && a + 1 < argc) {
            limit = parse_seconds(argv[a + 1], REAP_TIME_MAX);
            if (limit < 1)
                return usage();
            a += 2;
        } else if (strcmp(argv[a], "--container") == 0) {
            container = true;
            a++;
        } else if (strcmp(argv[a], "--env") == 0) {
            env = true;
            a++;
        } else {
            return usage();
        }
    }
    if (grace < 0 || a + 1 >= argc || strcmp(argv[a], "--") != 0)
        return usage();
    char **cmd = argv + a + 1;
    int ncmd = argc - a - 1;
    if ((container && (ncmd < 2 || strcmp(cmd[1], "run") != 0)) ||
        (container && env))
        return usage();

    /* ENGINE run --cidfile DIR/cid ...: the container's id, for its end */
    char cidfile[4096] = "", cid_dir[4096] = "";
    char **run = cmd;
    if (container) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || tmp[0] != '/')
            tmp = "/tmp";
        snprintf(cid_dir, sizeof cid_dir, "%s/isolation-cid-XXXXXX", tmp);
        if (!mkdtemp(cid_dir))
            return fail(REAP_EXIT_FAILED, "mkdtemp", strerror(errno));
        snprintf(cidfile, sizeof cidfile, "%s/cid", cid_dir);
        run = calloc((size_t)ncmd + 3, sizeof *run);
        if (!run)
            return fail(REAP_EXIT_FAILED, "calloc", strerror(errno));
        run[0] = cmd[0];
        run[1] = cmd[1];
        run[2] = "--cidfile";
        run[3] = cidfile;
        for (int k = 2; k < ncmd; k++)
            run[k + 2] = cmd[k];
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        if (run != cmd)
            free(run);
        return fail(REAP_EXIT_FAILED, "PR_SET_CHILD_SUBREAPER",
                    strerror(errno));
    }

    /* before the command: it must not hold the write end */
    int watch_fd = -1;
    if (container) {
        watch_fd = watch_start(cmd[0], cidfile, cid_dir);
        if (watch_fd < 0) {
            int e = errno;
            free(run);
            rmdir(cid_dir);
            return fail(REAP_EXIT_FAILED, "the watchdog", strerror(e));
        }
    }

    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGPIPE); /* a closed stderr must not end the reaper */
    for (size_t i = 0; i < NFORWARDED; i++)
        if (!ignored(forwarded[i]))
            sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, &old);

    fflush(NULL);
    char **prog = run, **envp = environ;
    if (env)
        envp = env_of(run, &prog);
    pid_t command = -1;
    int started = envp ? spawn_command(prog, envp, &old, &command) : -1;
    if (env)
        free(envp);
    if (run != cmd)
        free(run); /* the child has its copy; the cid file is cidfile */
    if (started != 0) {
        if (container) {
            watch_stop(watch_fd);
            rmdir(cid_dir);
        }
        /* as a shell and execvp's callers report a program they cannot
           run; the --env words' own failure is this program's */
        if (started < 0)
            return REAP_EXIT_FAILED;
        return started == ENOENT ? 127 : 126;
    }

    int status = 0;
    bool command_done = false;
    double deadline = -1; /* set by the first forwarded signal */
    double time_up = limit ? now() + (double)limit : -1;
    bool timed_out = false;
    sigset_t passed; /* the signals already passed on: each goes on once */
    sigemptyset(&passed);
    while (!command_done) {
        if (time_up >= 0 && !timed_out && now() >= time_up) {
            timed_out = true;
            fprintf(stderr,
                    "isolation-bridge --reap: the time limit (%ld s) is "
                    "reached: SIGTERM to the command, SIGKILL %ld s later\n",
                    limit, grace);
            if (!sigismember(&passed, SIGTERM))
                signal_below(SIGTERM, false, true);
            sigaddset(&passed, SIGTERM);
            if (deadline < 0)
                deadline = now() + (double)grace;
        }
        double left = deadline < 0 ? -1 : deadline - now();
        if (deadline >= 0 && left <= 0)
            break;
        if (!timed_out && time_up >= 0 && (left < 0 || time_up - now() < left))
            left = time_up - now();
        if (left < 0 && deadline >= 0)
            left = 0;
        int sig = wait_signal(&set, left);
        if (sig == SIGCHLD || sig < 0) {
            reap_ended(command, &status, &command_done);
            continue;
        }
        if (sig == SIGPIPE)
            continue;
        if (!sigismember(&passed, sig))
            signal_below(sig, false, true);
        sigaddset(&passed, sig);
        if (deadline < 0)
            deadline = now() + (double)grace;
    }
    if (container) {
        container_remove(cmd[0], cidfile);
        unlink(cidfile);
        rmdir(cid_dir);
        watch_stop(watch_fd);
    }
    if (kill_all(&set, command, &status, &command_done) < 0) {
        fprintf(stderr,
                "isolation-bridge --reap: processes of the sandbox were still "
                "there %d s after SIGKILL (uninterruptible sleep?)\n",
                REAP_KILL_WAIT);
        return REAP_EXIT_FAILED;
    }
    if (timed_out)
        return 124;
    return exit_like(status);
}
