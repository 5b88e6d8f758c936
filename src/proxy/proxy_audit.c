/*
 * proxy_audit.c - the audit log: one JSON object a line per proxy event,
 * appended as the events happen.
 *
 * The loop's thread only formats a line and appends it to a queue in
 * memory; a thread of the log's own does the write(2). A slow or stuck
 * file system (NFS, FUSE, dirty-page throttling) therefore never holds a
 * relay, and a full one costs one failed write: the failure is reported
 * once on stderr, and from then on lines are counted as dropped instead of
 * written (a line the disk cut short must not be continued by the next).
 * The queue is bounded too: a writer that cannot keep up loses lines, the
 * proxy never waits for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy/proxy.h"

/* Queued bytes the writer has not taken yet; more are dropped. */
#define AUDIT_QUEUE_MAX (1024 * 1024)
/* How long a close waits for the queue to reach the disk. */
#define AUDIT_CLOSE_WAIT_NS 2000000000ULL
/* Room for a line beside its session: every other text field at its full
 * length with each byte JSON-escaped, the keys and the numbers. */
#define AUDIT_LINE_ROOM 3072

struct proxy_audit {
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t wake, idle;
    int fd;
    char *path;
    char *session; /* a JSON value: a quoted string, or null */
    char *line;    /* the loop thread's line being made */
    size_t line_cap;
    char *buf; /* queued lines */
    size_t len, cap;
    bool writing, stopping, failed, orphan;
    atomic_ullong dropped;
};

/* Appends s as the body of a JSON string. The event texts hold printable
 * ASCII only (proxy_event.c escapes the rest as \xNN), so '"' and '\' are
 * all there is to escape; anything else is written as \u00NN anyway. */
static size_t json_text(char *out, size_t o, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (o + 7 >= cap)
            break;
        if (*p == '"' || *p == '\\') {
            out[o++] = '\\';
            out[o++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[*p >> 4];
            out[o + 5] = hex[*p & 0xf];
            o += 6;
        } else {
            out[o++] = (char)*p;
        }
    }
    return o;
}

static size_t json_string(char *out, size_t o, size_t cap, const char *s)
{
    if (o >= cap || cap - o < 3)
        return o;
    out[o++] = '"';
    o = json_text(out, o, cap - 1, s);
    out[o++] = '"';
    return o;
}

static size_t put(char *out, size_t o, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (o >= cap || n >= cap - o)
        return o;
    memcpy(out + o, s, n);
    return o + n;
}

static size_t format_line(const struct proxy_audit *a,
                          const struct proxy_event *e, char *out, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char num[96];
    size_t o = 0;
    snprintf(num, sizeof num,
             "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    o = put(out, o, cap, num);
    o = put(out, o, cap, ",\"session\":");
    o = put(out, o, cap, a->session);
    o = put(out, o, cap, ",\"type\":");
    o = json_string(out, o, cap, e->type);
    o = put(out, o, cap, ",\"code\":");
    o = json_string(out, o, cap, e->code);
    o = put(out, o, cap, ",\"method\":");
    o = json_string(out, o, cap, e->method);
    o = put(out, o, cap, ",\"host\":");
    o = json_string(out, o, cap, e->host);
    snprintf(num, sizeof num,
             ",\"port\":%d,\"status\":%d,\"bytes_up\":%llu,\"bytes_down\":%llu,"
             "\"duration\":%llu.%06llu",
             e->port, e->status, (unsigned long long)e->bytes_up,
             (unsigned long long)e->bytes_down,
             (unsigned long long)(e->duration_us / 1000000),
             (unsigned long long)(e->duration_us % 1000000));
    o = put(out, o, cap, num);
    o = put(out, o, cap, ",\"reason\":");
    o = json_string(out, o, cap, e->reason);
    if (e->address[0]) {
        o = put(out, o, cap, ",\"address\":");
        o = json_string(out, o, cap, e->address);
    }
    if (e->address_class) {
        o = put(out, o, cap, ",\"address_class\":");
        o = json_string(out, o, cap, e->address_class);
    }
    if (e->via[0]) {
        o = put(out, o, cap, ",\"via\":");
        o = json_string(out, o, cap, e->via);
    }
    o = put(out, o, cap, "}\n");
    return o;
}

static void audit_free(struct proxy_audit *a)
{
    if (a->fd >= 0)
        close(a->fd);
    uv_mutex_destroy(&a->mu);
    uv_cond_destroy(&a->wake);
    uv_cond_destroy(&a->idle);
    free(a->buf);
    free(a->line);
    free(a->path);
    free(a->session);
    free(a);
}

/* Writes all of buf; 0, or the errno of the write that failed. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return EIO;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void writer_main(void *arg)
{
    struct proxy_audit *a = arg;
    /* Process signals belong to the Lua thread. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    char *spare = NULL;
    size_t spare_cap = 0;
    uv_mutex_lock(&a->mu);
    for (;;) {
        while (a->len == 0 && !a->stopping)
            uv_cond_wait(&a->wake, &a->mu);
        if (a->len == 0)
            break;
        /* Take the queue; the loop's thread fills the other buffer. */
        char *buf = a->buf;
        size_t len = a->len, cap = a->cap;
        a->buf = spare;
        a->cap = spare_cap;
        a->len = 0;
        a->writing = true;
        bool skip = a->failed; /* queued before the failure was known */
        uv_mutex_unlock(&a->mu);
        int err = skip ? -1 : write_all(a->fd, buf, len);
        uv_mutex_lock(&a->mu);
        a->writing = false;
        spare = buf;
        spare_cap = cap;
        if (err) {
            uint64_t lines = 0;
            for (size_t i = 0; i < len; i++)
                lines += buf[i] == '\n';
            atomic_fetch_add(&a->dropped, lines);
        }
        if (err > 0 && !a->failed) {
            a->failed = true;
            fprintf(stderr,
                    "isolation.proxy: audit log %s: write failed (%s); "
                    "later lines are not written\n",
                    a->path, strerror(err));
            fflush(stderr);
        }
        uv_cond_broadcast(&a->idle);
    }
    a->writing = false;
    uv_cond_broadcast(&a->idle);
    bool orphan = a->orphan;
    uv_mutex_unlock(&a->mu);
    free(spare);
    if (orphan)
        audit_free(a);
}

void proxy_audit_event(struct proxy_audit *a, const struct proxy_event *e)
{
    char *line = a->line;
    size_t n = format_line(a, e, line, a->line_cap);
    uv_mutex_lock(&a->mu);
    bool ok = !a->failed && a->len + n <= AUDIT_QUEUE_MAX;
    if (ok && a->len + n > a->cap) {
        size_t cap = a->cap ? a->cap : 16384;
        while (cap < a->len + n)
            cap *= 2;
        char *b = realloc(a->buf, cap);
        if (b) {
            a->buf = b;
            a->cap = cap;
        } else {
            ok = false;
        }
    }
    if (ok) {
        memcpy(a->buf + a->len, line, n);
        a->len += n;
        uv_cond_signal(&a->wake);
    }
    uv_mutex_unlock(&a->mu);
    if (!ok)
        atomic_fetch_add(&a->dropped, 1);
}

uint64_t proxy_audit_dropped(struct proxy_audit *a)
{
    return atomic_load(&a->dropped);
}

void proxy_audit_close(struct proxy_audit *a)
{
    uv_mutex_lock(&a->mu);
    a->stopping = true;
    uv_cond_signal(&a->wake);
    uint64_t until = uv_hrtime() + AUDIT_CLOSE_WAIT_NS;
    while (a->len > 0 || a->writing) {
        uint64_t now = uv_hrtime();
        if (now >= until ||
            uv_cond_timedwait(&a->idle, &a->mu, until - now) != 0)
            break;
    }
    bool drained = a->len == 0 && !a->writing;
    /* A writer stuck in the disk frees the log itself when it returns. */
    a->orphan = !drained;
    uv_mutex_unlock(&a->mu);
    if (drained) {
        uv_thread_join(&a->thread);
        audit_free(a);
    }
}

/* session as a JSON value, its bytes escaped as the event texts are. */
static char *session_json(const char *s, size_t len)
{
    if (!s)
        return strdup("null");
    static const char hex[] = "0123456789abcdef";
    char *text = malloc(len * 4 + 1);
    if (!text)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            text[o++] = (char)ch;
        } else {
            text[o++] = '\\';
            text[o++] = 'x';
            text[o++] = hex[ch >> 4];
            text[o++] = hex[ch & 0xf];
        }
    }
    text[o] = '\0';
    size_t cap = o * 6 + 8;
    char *out = malloc(cap);
    if (out) {
        size_t n = json_string(out, 0, cap, text);
        out[n] = '\0';
    }
    free(text);
    return out;
}

struct proxy_audit *proxy_audit_open(const char *path, const char *session,
                                     size_t session_len, char *err,
                                     size_t errcap)
{
    /* O_NOFOLLOW: a symlink planted at the name is not followed. The checks
     * on the open file refuse what O_CREAT found instead of making: a file
     * of another user (in a sticky /tmp), a hard link to someone's file, a
     * device or FIFO, a log others can read. */
    int fd = open(path,
                  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC |
                      O_NOCTTY | O_NONBLOCK,
                  0600);
    if (fd < 0 && errno == ELOOP) {
        snprintf(err, errcap,
                 "isolation: audit_log %s: is a symbolic link, which is not "
                 "followed (give the file's own path)",
                 path);
        return NULL;
    }
    if (fd < 0) {
        snprintf(err, errcap, "isolation: audit_log %s: cannot open it (%s)",
                 path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0)
        why = "cannot stat it";
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (st.st_uid != geteuid())
        why = "belongs to another user";
    else if (st.st_nlink != 1)
        why = "has more than one name (a hard link)";
    else if (st.st_mode & 077)
        why = "can be read or written by group or others (chmod 600 it)";
    if (why) {
        close(fd);
        snprintf(err, errcap, "isolation: audit_log %s: %s", path, why);
        return NULL;
    }
    struct proxy_audit *a = calloc(1, sizeof *a);
    if (!a) {
        close(fd);
        snprintf(err, errcap, "isolation: audit_log: out of memory");
        return NULL;
    }
    a->fd = fd;
    a->path = strdup(path);
    a->session = session_json(session, session_len);
    a->line_cap = AUDIT_LINE_ROOM + (a->session ? strlen(a->session) : 0);
    a->line = malloc(a->line_cap);
    atomic_init(&a->dropped, 0);
    uv_mutex_init(&a->mu);
    uv_cond_init(&a->wake);
    uv_cond_init(&a->idle);
    if (!a->path || !a->session || !a->line ||
        uv_thread_create(&a->thread, writer_main, a) != 0) {
        audit_free(a);
        snprintf(err, errcap,
                 "isolation: audit_log %s: cannot start its "
                 "writer",
                 path);
        return NULL;
    }
    return a;
}
