/*
 * orphans.c - isolation._subreaper() and isolation._end_orphans(): what a
 * launching process takes over when the line's own reaper is killed.
 *
 * The line's reaper (bridge/reap.c) ends every process of a sandbox before
 * it exits; killed from outside (the OOM killer, an operator's kill -9 of
 * that one process; nothing inside the sandbox can reach it), it ends
 * nothing. Its children are then given to the nearest child subreaper:
 * bwrap, which dies with its parent, and then the sandbox's PID-namespace
 * init, whose own parent-death signal the sandbox can clear (ptrace of its
 * init). isolate makes itself a child subreaper, and once its session's
 * child has exited, SIGKILLs every child it still has (SIGKILL to a
 * namespace's init ends every process of the namespace, and the init's
 * exit completes only once they are gone) and reaps it, before the end
 * checks look at the workdir.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "isolation.h"

#define ORPHANS_MAX 256

static int l_subreaper(lua_State *L)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        lua_pushnil(L);
        lua_pushfstring(L, "isolation: cannot become a child subreaper: %s",
                        strerror(errno));
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* The parent of /proc/<pid>, from its stat line (the name in parentheses
 * may hold spaces and parentheses: the fields start after the last ')'),
 * or -1. */
static long parent_of(const char *pid)
{
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    const char *close = strrchr(buf, ')');
    char state;
    long ppid;
    if (!close || sscanf(close + 1, " %c %ld", &state, &ppid) != 2)
        return -1;
    return ppid;
}

/* The children of this process (zombies included) into pids, up to max:
 * every /proc entry whose parent is this process. Returns how many. */
static size_t children(pid_t self, pid_t *pids, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0)
            continue;
        if (parent_of(e->d_name) == (long)self)
            pids[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

static bool excluded(lua_State *L, pid_t pid)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, i);
        bool same =
            lua_isinteger(L, -1) && lua_tointeger(L, -1) == (lua_Integer)pid;
        lua_pop(L, 1);
        if (same)
            return true;
    }
    return false;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* _end_orphans(exclude, timeout_ms): SIGKILL to every child of this
 * process whose pid is not in the array exclude (children the caller
 * still waits for itself), each reaped; returns how many, or nil, err when
 * some were still there after timeout_ms (default 10 s: a process in
 * uninterruptible sleep). Only waitpid() of those pids: a child libuv
 * watches is never reaped here. */
static int l_end_orphans(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer timeout = luaL_optinteger(L, 2, 10000);
    pid_t self = getpid();
    pid_t pids[ORPHANS_MAX];
    lua_Integer ended = 0;
    double deadline = now_ms() + (double)timeout;
    for (;;) {
        size_t n = children(self, pids, ORPHANS_MAX), left = 0;
        for (size_t i = 0; i < n; i++) {
            if (excluded(L, pids[i]))
                continue;
            left++;
            kill(pids[i], SIGKILL);
            int status;
            if (waitpid(pids[i], &status, WNOHANG) == pids[i])
                ended++;
        }
        if (left == 0)
            break;
        if (now_ms() > deadline) {
            lua_pushnil(L);
            lua_pushfstring(
                L, "%d processes of the line still there %d ms after SIGKILL",
                (int)left, (int)timeout);
            return 2;
        }
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    lua_pushinteger(L, ended);
    return 1;
}

static const luaL_Reg orphans_functions[] = {
    {"_subreaper", l_subreaper}, {"_end_orphans", l_end_orphans}, {NULL, NULL}};

void isolation_orphans_open(lua_State *L)
{
    luaL_setfuncs(L, orphans_functions, 0);
}
