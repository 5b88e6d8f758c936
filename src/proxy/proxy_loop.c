/*
 * proxy_loop.c - the module's private uv loops. Proxies never put a handle
 * on luv's loop (luv 1.44 crashes on handles it did not create).
 *
 * Thread mode: a small pool of background threads (PROXY_LOOP_THREADS at
 * most), each with its own loop, serves the thread-mode proxies of the
 * process; a new proxy goes to the loop with the fewest proxies, starting
 * one if the pool has room, and a loop is joined when its last proxy
 * closes. Never a thread per proxy: past the pool's size, proxies share
 * loops (and the per-pass byte budget keeps them apart). The Lua thread
 * sends commands through a uv_async_t and waits for each to finish, so
 * errors are reported synchronously.
 *
 * luv mode: a second private loop, run with UV_RUN_NOWAIT on the Lua
 * thread whenever its backend fd is readable (a luv poll handle) or its
 * next timer is due (a luv timer, re-armed after every run). Both luv
 * handles are made by calling the luv module's own functions. on_event
 * callbacks run after uv_run returns, never inside it.
 */
#include <lauxlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "proxy/proxy.h"
#include "proxy/proxy_conn.h" /* the queue of parked connections */

atomic_long proxy_fds_used;
atomic_long proxy_fds_usable = 1L << 30;

/*
 * Every session proxy of a process shares its descriptors: the soft limit
 * goes up to the hard one (Debian's soft 1024 is 512 tunnels), and the
 * proxies together stop short of it by a reserve, so that one flooded
 * proxy cannot make a new session, the orchestrator's io.open or another
 * proxy's accept fail with EMFILE.
 */
void proxy_fds_setup(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = old;
    }
    long limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1UL << 30)
                     ? 1L << 30
                     : (long)rl.rlim_cur;
    long reserve =
        limit / 8 > PROXY_FD_RESERVE_MIN ? limit / 8 : PROXY_FD_RESERVE_MIN;
    atomic_store(&proxy_fds_usable, limit > reserve ? limit - reserve : 0);
}

static uv_once_t global_once = UV_ONCE_INIT;
static uv_mutex_t global_mu;
static struct proxy_loop *thread_loops[PROXY_LOOP_THREADS];
static struct proxy_loop *luv_loop;

/* A forked child has no background thread and must not wait for one: its
 * first proxy starts a loop of its own (the parent's copies are abandoned). */
static void forget_loops_in_child(void)
{
    memset(thread_loops, 0, sizeof thread_loops);
    luv_loop = NULL;
}

static void on_park_idle(uv_idle_t *h);

void proxy_loop_park(struct conn *c)
{
    struct proxy_loop *loop = c->px->loop;
    if (c->in_park)
        return;
    c->in_park = true;
    c->park_next = NULL;
    c->park_prev = loop->park_tail;
    if (loop->park_tail)
        loop->park_tail->park_next = c;
    else
        loop->park_head = c;
    loop->park_tail = c;
    if (!uv_is_active((uv_handle_t *)&loop->park_idle))
        uv_idle_start(&loop->park_idle, on_park_idle);
}

void proxy_loop_unpark(struct conn *c)
{
    struct proxy_loop *loop = c->px->loop;
    if (!c->in_park)
        return;
    c->in_park = false;
    if (c->park_prev)
        c->park_prev->park_next = c->park_next;
    else
        loop->park_head = c->park_next;
    if (c->park_next)
        c->park_next->park_prev = c->park_prev;
    else
        loop->park_tail = c->park_prev;
    c->park_prev = c->park_next = NULL;
    if (!loop->park_head)
        uv_idle_stop(&loop->park_idle);
}

/* Before each poll: the oldest parked connections read again (a resumed
 * one that finds its proxy's budget spent again goes to the back). While
 * any wait, the idle handle keeps the poll from blocking: a pass whose
 * resumed connections bring no event must not leave the rest parked
 * until some timer. */
static void on_park_idle(uv_idle_t *h)
{
    struct proxy_loop *loop = h->data;
    for (unsigned i = 0; i < PROXY_RESUME_PER_TURN && loop->park_head; i++) {
        struct conn *c = loop->park_head;
        proxy_loop_unpark(c);
        conn_resume(c);
    }
}

static void on_turn(uv_prepare_t *h)
{
    struct proxy_loop *loop = h->data;
    loop->turn++;
}

int proxy_turns_start(struct proxy_loop *loop)
{
    int r = uv_prepare_init(&loop->uv, &loop->turn_prep);
    if (r != 0)
        return r;
    loop->turn_prep.data = loop;
    uv_prepare_start(&loop->turn_prep, on_turn);
    uv_unref((uv_handle_t *)&loop->turn_prep); /* keeps no loop alive */
    uv_idle_init(&loop->uv, &loop->park_idle);
    loop->park_idle.data = loop;
    uv_unref((uv_handle_t *)&loop->park_idle);
    return 0;
}

void proxy_turns_close(struct proxy_loop *loop)
{
    if (uv_is_closing((uv_handle_t *)&loop->turn_prep))
        return;
    uv_close((uv_handle_t *)&loop->turn_prep, NULL);
    uv_close((uv_handle_t *)&loop->park_idle, NULL);
}

static void global_init(void)
{
    if (uv_mutex_init(&global_mu) != 0)
        abort();
    pthread_atfork(NULL, NULL, forget_loops_in_child);
}

static int run_cmd(struct proxy *p, enum proxy_cmd cmd)
{
    if (cmd == PROXY_CMD_OPEN) {
        int r = proxy_start(p);
        if (r == 0)
            p->loop->serving++;
        return r;
    }
    if (cmd == PROXY_CMD_CLOSE) {
        if (!p->closing)
            p->loop->serving--;
        proxy_stop(p);
    }
    return 0;
}

/* ---- thread mode ---- */

static void on_async(uv_async_t *a)
{
    struct proxy_loop *loop = a->data;
    uv_mutex_lock(&loop->mu);
    struct proxy *list = loop->cmds;
    loop->cmds = NULL;
    bool stop = loop->stopping;
    uv_mutex_unlock(&loop->mu);
    /* Commands were pushed in front: run them in the order they came. */
    struct proxy *rev = NULL;
    while (list) {
        struct proxy *next = list->cmd_next;
        list->cmd_next = rev;
        rev = list;
        list = next;
    }
    while (rev) {
        struct proxy *next = rev->cmd_next;
        int status = run_cmd(rev, rev->cmd);
        uv_mutex_lock(&loop->mu);
        rev->cmd_status = status;
        rev->cmd_done = true;
        uv_cond_broadcast(&loop->cond);
        uv_mutex_unlock(&loop->mu);
        rev = next;
    }
    if (stop) {
        proxy_turns_close(loop);
        uv_close((uv_handle_t *)&loop->async, NULL);
    }
}

static void thread_main(void *arg)
{
    struct proxy_loop *loop = arg;
    /* Process signals belong to the Lua thread; a write to a closed peer
     * must give EPIPE here, not SIGPIPE. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    uv_run(&loop->uv, UV_RUN_DEFAULT);
}

static struct proxy_loop *thread_loop_start(char *err, size_t errcap)
{
    struct proxy_loop *loop = calloc(1, sizeof *loop);
    if (!loop) {
        snprintf(err, errcap, "isolation: proxy: out of memory");
        return NULL;
    }
    loop->mode = PROXY_THREAD;
    int r = uv_loop_init(&loop->uv);
    if (r == 0) {
        r = proxy_turns_start(loop);
        if (r != 0)
            uv_loop_close(&loop->uv);
    }
    if (r == 0) {
        r = uv_async_init(&loop->uv, &loop->async, on_async);
        if (r != 0) {
            proxy_turns_close(loop);
            uv_run(&loop->uv, UV_RUN_DEFAULT);
            uv_loop_close(&loop->uv);
        }
    }
    if (r != 0) {
        snprintf(err, errcap, "isolation: proxy loop: %s", uv_strerror(r));
        free(loop);
        return NULL;
    }
    loop->async.data = loop;
    uv_mutex_init(&loop->mu);
    uv_cond_init(&loop->cond);
    r = uv_thread_create(&loop->thread, thread_main, loop);
    if (r != 0) {
        snprintf(err, errcap, "isolation: proxy thread: %s", uv_strerror(r));
        proxy_turns_close(loop);
        uv_close((uv_handle_t *)&loop->async, NULL);
        uv_run(&loop->uv, UV_RUN_DEFAULT);
        uv_loop_close(&loop->uv);
        uv_mutex_destroy(&loop->mu);
        uv_cond_destroy(&loop->cond);
        free(loop);
        return NULL;
    }
    return loop;
}

static void thread_loop_stop(struct proxy_loop *loop)
{
    uv_mutex_lock(&loop->mu);
    loop->stopping = true;
    uv_mutex_unlock(&loop->mu);
    uv_async_send(&loop->async);
    /* Returns once every handle is closed; a lookup still running in
     * libuv's thread pool is waited for. */
    uv_thread_join(&loop->thread);
    uv_loop_close(&loop->uv);
    relay_pool_free(loop);
    uv_mutex_destroy(&loop->mu);
    uv_cond_destroy(&loop->cond);
    free(loop);
}

/* ---- luv mode ---- */

/* Calls handle:method(...) for the luv handle in the registry; pcall'd. */
static void luv_call(lua_State *L, struct proxy_loop *loop, int ref,
                     const char *method, int nargs)
{
    int base = lua_gettop(L) - nargs;
    if (loop->lua_dead) {
        lua_settop(L, base);
        return;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_getfield(L, -1, method);
    lua_insert(L, base + 1);
    lua_insert(L, base + 2);
    if (lua_pcall(L, nargs + 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "isolation.proxy: luv %s failed: %s\n", method,
                lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

/*
 * Writes to a closed peer happen on the Lua thread in luv mode: they must
 * give EPIPE, not a SIGPIPE that ends the process. Ignoring SIGPIPE would
 * leak into every child the program starts with popen or os.execute, so it
 * is blocked while the private loop runs and a SIGPIPE raised meanwhile is
 * consumed before the old mask comes back.
 */
static void luv_run_private(struct proxy_loop *loop)
{
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    uv_run(&loop->uv, UV_RUN_NOWAIT);
    if (!sigismember(&old, SIGPIPE)) {
        sigset_t pending;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_only, NULL, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
}

static bool any_events(struct proxy_loop *loop)
{
    for (struct proxy *p = loop->luv_proxies; p; p = p->luv_next) {
        if (p->on_event_ref == LUA_NOREF)
            continue;
        uv_mutex_lock(&p->mu);
        bool some = p->ev_head != NULL;
        uv_mutex_unlock(&p->mu);
        if (some)
            return true;
    }
    return false;
}

static void luv_rearm(lua_State *L, struct proxy_loop *loop, bool in_timer)
{
    int t = uv_backend_timeout(&loop->uv);
    if (t != 0 && any_events(loop))
        t = 0;
    /* libuv 1.44 runs a timer restarted with 0 from its own callback
     * again in the same pass, forever: give it a millisecond. */
    if (t == 0 && in_timer)
        t = 1;
    if (t < 0) {
        luv_call(L, loop, loop->timer_ref, "stop", 0);
        return;
    }
    lua_pushinteger(L, t);
    lua_pushinteger(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, loop->drive_ref);
    luv_call(L, loop, loop->timer_ref, "start", 3);
}

/*
 * No proxy left: stop polling so that uv.run() can return. The two luv
 * handles and the private loop stay for the next proxy: luv 1.44 crashes
 * at exit on a handle whose close callback has not run yet, and nothing
 * guarantees that uv.run() is called again after a close.
 */
/* The Lua state is closing and no proxy is left: the private loop goes.
 * (A lookup still in the thread pool keeps it, and it stays allocated.) */
static void luv_loop_free(struct proxy_loop *loop)
{
    proxy_turns_close(loop);
    for (int i = 0; i < 64 && uv_loop_alive(&loop->uv); i++)
        luv_run_private(loop);
    if (luv_loop == loop)
        luv_loop = NULL;
    if (uv_loop_close(&loop->uv) == 0) {
        relay_pool_free(loop);
        free(loop);
    }
}

static void luv_idle(lua_State *L, struct proxy_loop *loop)
{
    if (loop->lua_dead) {
        luv_loop_free(loop);
        return;
    }
    /* Close callbacks of the last connections. */
    for (int i = 0; i < 64 && uv_loop_alive(&loop->uv); i++)
        luv_run_private(loop);
    if (loop->polling) {
        luv_call(L, loop, loop->poll_ref, "stop", 0);
        luv_call(L, loop, loop->timer_ref, "stop", 0);
        loop->polling = false;
    }
}

static void luv_poll_start(lua_State *L, struct proxy_loop *loop)
{
    if (loop->polling)
        return;
    lua_pushliteral(L, "r");
    lua_rawgeti(L, LUA_REGISTRYINDEX, loop->drive_ref);
    luv_call(L, loop, loop->poll_ref, "start", 2);
    loop->polling = true;
}

/* Passes the private loop wants right away (uv_backend_timeout 0: write
 * and connect callbacks, closes, due timers) run here and now; left to
 * the timer, each would wait a millisecond (see luv_rearm), and a tunnel
 * takes several: 2.4 ms of added latency per tunnel, measured. */
#define LUV_PASSES_MAX 16

static void luv_run_once(lua_State *L, struct proxy_loop *loop)
{
    loop->in_drive = true;
    luv_run_private(loop);
    for (int i = 1; i < LUV_PASSES_MAX && uv_backend_timeout(&loop->uv) == 0;
         i++)
        luv_run_private(loop);
    /* on_event runs here, after uv_run: it may close proxies. */
    struct proxy *batch[64];
    size_t n = 0;
    for (struct proxy *p = loop->luv_proxies; p && n < 64; p = p->luv_next) {
        atomic_fetch_add(&p->refs, 1);
        batch[n++] = p;
    }
    for (size_t i = 0; i < n; i++) {
        if (!loop->lua_dead)
            proxy_events_dispatch(L, batch[i]);
        proxy_unref(batch[i]);
    }
    loop->in_drive = false;
    if (loop->nproxies == 0) {
        luv_idle(L, loop);
        return;
    }
    luv_rearm(L, loop, true);
}

static int luv_drive(lua_State *L)
{
    struct proxy_loop *loop = lua_touserdata(L, lua_upvalueindex(1));
    if (!loop->in_drive)
        luv_run_once(L, loop);
    return 0;
}

void proxy_loop_kick(lua_State *L, struct proxy_loop *loop)
{
    if (loop->mode != PROXY_LUV || loop->in_drive)
        return;
    loop->in_drive = true;
    luv_run_private(loop);
    loop->in_drive = false;
    if (loop->nproxies == 0)
        luv_idle(L, loop);
    else
        luv_rearm(L, loop, false);
}

static int luv_sentinel_gc(lua_State *L)
{
    struct proxy_loop *loop = *(struct proxy_loop **)lua_touserdata(L, 1);
    loop->lua_dead = true;
    if (loop->nproxies == 0 && !loop->in_drive)
        luv_loop_free(loop);
    return 0;
}

/* Calls luv[fname](args...) and refs its one result. */
static int luv_new(lua_State *L, int luv_idx, const char *fname, int nargs,
                   int *ref)
{
    int base = lua_gettop(L) - nargs;
    lua_getfield(L, luv_idx, fname);
    lua_insert(L, base + 1);
    if (lua_pcall(L, nargs, 1, 0) != LUA_OK)
        return -1;
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushfstring(L, "luv.%s returned nil", fname);
        return -1;
    }
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static struct proxy_loop *luv_loop_start(lua_State *L, int luv_idx, char *err,
                                         size_t errcap)
{
    struct proxy_loop *loop = calloc(1, sizeof *loop);
    if (!loop) {
        snprintf(err, errcap, "isolation: proxy: out of memory");
        return NULL;
    }
    loop->mode = PROXY_LUV;
    loop->poll_ref = loop->timer_ref = loop->drive_ref = loop->luv_ref =
        LUA_NOREF;
    int r = uv_loop_init(&loop->uv);
    if (r == 0 && (r = proxy_turns_start(loop)) != 0)
        uv_loop_close(&loop->uv);
    if (r != 0) {
        snprintf(err, errcap, "isolation: proxy loop: %s", uv_strerror(r));
        free(loop);
        return NULL;
    }
    lua_pushvalue(L, luv_idx);
    loop->luv_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushlightuserdata(L, loop);
    lua_pushcclosure(L, luv_drive, 1);
    loop->drive_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushinteger(L, uv_backend_fd(&loop->uv));
    if (luv_new(L, luv_idx, "new_poll", 1, &loop->poll_ref) != 0 ||
        luv_new(L, luv_idx, "new_timer", 0, &loop->timer_ref) != 0) {
        snprintf(err, errcap, "isolation: loop: cannot make luv handles: %s",
                 lua_tostring(L, -1));
        lua_pop(L, 1);
        if (loop->poll_ref != LUA_NOREF)
            luv_call(L, loop, loop->poll_ref, "close", 0);
        luaL_unref(L, LUA_REGISTRYINDEX, loop->poll_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, loop->drive_ref);
        luaL_unref(L, LUA_REGISTRYINDEX, loop->luv_ref);
        proxy_turns_close(loop);
        uv_run(&loop->uv, UV_RUN_NOWAIT);
        uv_loop_close(&loop->uv);
        free(loop);
        return NULL;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    loop->L = lua_tothread(L, -1);
    lua_pop(L, 1);
    /* Made after the luv handles, so finalized before them when the Lua
     * state closes: from then on the luv handles are not touched. */
    struct proxy_loop **sentinel = lua_newuserdatauv(L, sizeof *sentinel, 0);
    *sentinel = loop;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, luv_sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    luaL_ref(L, LUA_REGISTRYINDEX);
    return loop;
}

/* How many loop threads the pool may run: one per CPU, at most
 * PROXY_LOOP_THREADS, at least 2. One loop serves a flooding proxy's ready
 * sockets before every pass of a quiet one (0.1-1 ms per pass under 512
 * bulk tunnels, several passes per request); on a loop of its own the
 * quiet proxy's thread, mostly asleep, is run as soon as it wakes, even
 * when the kernel has fewer CPUs than busy threads. */
static unsigned pool_size(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2)
        return 2;
    return n > PROXY_LOOP_THREADS ? PROXY_LOOP_THREADS : (unsigned)n;
}

/* Under global_mu: the loop a new proxy joins. An empty slot while the
 * pool has room and every running loop has a proxy; else the running loop
 * with the fewest proxies (the earliest of equals). */
static struct proxy_loop *thread_loop_pick(char *err, size_t errcap)
{
    unsigned size = pool_size();
    struct proxy_loop *best = NULL;
    int free_slot = -1;
    for (unsigned i = 0; i < size; i++) {
        struct proxy_loop *l = thread_loops[i];
        if (!l) {
            if (free_slot < 0)
                free_slot = (int)i;
        } else if (!best || l->nproxies < best->nproxies) {
            best = l;
        }
    }
    if (free_slot < 0 || (best && best->nproxies == 0))
        return best;
    bool first = true;
    for (unsigned i = 0; i < PROXY_LOOP_THREADS; i++)
        if (thread_loops[i])
            first = false;
    if (first)
        proxy_fds_setup();
    struct proxy_loop *loop = thread_loop_start(err, errcap);
    if (!loop)
        return best; /* a thread that cannot start: share a running loop */
    loop->slot = (unsigned)free_slot;
    thread_loops[free_slot] = loop;
    return loop;
}

/* ---- both ---- */

struct proxy_loop *proxy_loop_acquire(lua_State *L, enum proxy_mode mode,
                                      int luv_idx, char *err, size_t errcap)
{
    uv_once(&global_once, global_init);
    struct proxy_loop *loop;
    if (mode == PROXY_THREAD) {
        uv_mutex_lock(&global_mu);
        loop = thread_loop_pick(err, errcap);
        if (loop)
            loop->nproxies++;
        uv_mutex_unlock(&global_mu);
        return loop;
    }
    /* One per Lua state (its registry holds the luv handles); a loop of
     * a state that is gone is left behind. */
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main = lua_tothread(L, -1);
    lua_pop(L, 1);
    if (!luv_loop || luv_loop->L != main) {
        proxy_fds_setup();
        luv_loop = luv_loop_start(L, luv_idx, err, errcap);
    }
    loop = luv_loop;
    if (loop) {
        loop->nproxies++;
        luv_poll_start(L, loop);
    }
    return loop;
}

int proxy_loop_submit(struct proxy *p, enum proxy_cmd cmd)
{
    struct proxy_loop *loop = p->loop;
    if (loop->mode == PROXY_LUV)
        return run_cmd(p, cmd);
    uv_mutex_lock(&loop->mu);
    p->cmd = cmd;
    p->cmd_done = false;
    p->cmd_next = loop->cmds;
    loop->cmds = p;
    uv_mutex_unlock(&loop->mu);
    uv_async_send(&loop->async);
    uv_mutex_lock(&loop->mu);
    while (!p->cmd_done)
        uv_cond_wait(&loop->cond, &loop->mu);
    int status = p->cmd_status;
    uv_mutex_unlock(&loop->mu);
    return status;
}

void proxy_loop_release(lua_State *L, struct proxy *p)
{
    struct proxy_loop *loop = p->loop;
    if (loop->mode == PROXY_THREAD) {
        uv_mutex_lock(&global_mu);
        if (--loop->nproxies == 0) {
            if (thread_loops[loop->slot] == loop)
                thread_loops[loop->slot] = NULL;
            thread_loop_stop(loop);
        }
        uv_mutex_unlock(&global_mu);
        return;
    }
    for (struct proxy **pp = &loop->luv_proxies; *pp; pp = &(*pp)->luv_next) {
        if (*pp == p) {
            *pp = p->luv_next;
            break;
        }
    }
    loop->nproxies--;
    /* Inside a drive the teardown (or re-arm) happens when it ends. */
    proxy_loop_kick(L, loop);
}
