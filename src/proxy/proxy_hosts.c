/*
 * proxy_hosts.c - names in /etc/hosts, answered on the loop's thread.
 *
 * A lookup with getaddrinfo runs on libuv's thread pool: 4 threads for the
 * whole process, shared by every proxy (and by everything else that uses
 * the pool). Another session's lookups that hang (a domain whose name
 * server does not answer) can hold all of them; a name in /etc/hosts must
 * not wait behind them, since answering it needs no network at all. So
 * /etc/hosts is read here, on the loop's thread, before any lookup, when
 * the system reads it first too (nsswitch.conf "hosts: files ..."); a
 * name it does not hold, or a file it cannot read, goes to getaddrinfo as
 * before (never a different answer from nothing: a miss here is only
 * slower).
 *
 * Like glibc's "files" source for getaddrinfo, every line naming the host
 * (as its name or an alias, in any case) adds its address; glibc re-reads
 * the file on each lookup, this keeps it parsed and reads it again when
 * its identity, size or modification time change (one stat per lookup).
 * Addresses come in the file's order (glibc then sorts them by RFC 6724:
 * a dial may try another first; each is checked before any dial all the
 * same). Lines whose address inet_pton does not take (IPv6 scopes,
 * shorthand IPv4) are skipped, as are files over HOSTS_MAX_BYTES.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/proxy.h"

#define HOSTS_PATH "/etc/hosts"
#define NSSWITCH_PATH "/etc/nsswitch.conf"
#define HOSTS_MAX_BYTES (16u << 20)

struct hosts_entry {
    const char *name; /* lowercase, in hosts_text */
    unsigned line;    /* file order among equal names */
    struct host_addr addr;
};

struct file_id {
    bool seen; /* stat succeeded */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

static pthread_mutex_t hosts_mu = PTHREAD_MUTEX_INITIALIZER;
static bool hosts_loaded;
static struct file_id hosts_id, nss_id;
static bool files_first; /* nsswitch.conf's hosts line starts with files */
static char *hosts_text;
static struct hosts_entry *hosts;
static size_t nhosts;

static void file_id_of(const char *path, struct file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0)
        return;
    id->seen = true;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtime = st.st_mtim;
}

static bool file_id_same(const struct file_id *a, const struct file_id *b)
{
    return a->seen == b->seen && a->dev == b->dev && a->ino == b->ino &&
           a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* The whole file, NUL-terminated; NULL if unreadable or too large. */
static char *read_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (size_t)st.st_size < HOSTS_MAX_BYTES)
        buf = malloc((size_t)st.st_size + 1);
    size_t len = 0;
    while (buf && len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
        if (n <= 0)
            break; /* shorter than stat said: what was read */
        len += (size_t)n;
    }
    close(fd);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* Does the hosts line of nsswitch.conf name files first? (No file: glibc's
 * default consults dns first.) */
static bool nsswitch_files_first(void)
{
    char *text = read_file(NSSWITCH_PATH);
    bool first = false;
    for (char *line = text; line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        line += strspn(line, " \t");
        if (strncmp(line, "hosts:", 6) == 0) {
            line += 6;
            line += strspn(line, " \t");
            first = strncmp(line, "files", 5) == 0 &&
                    (line[5] == '\0' || strchr(" \t#[", line[5]));
            break;
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    return first;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct hosts_entry *x = a, *y = b;
    int r = strcmp(x->name, y->name);
    if (r)
        return r;
    return (x->line > y->line) - (x->line < y->line);
}

/* Parses text (modified in place: names end with NUL, lowercased) into a
 * sorted array of (name, address); false if out of memory. */
static bool hosts_parse(char *text, struct hosts_entry **out, size_t *nout)
{
    struct hosts_entry *e = NULL;
    size_t n = 0, cap = 0;
    unsigned lineno = 0;
    for (char *line = text; line && *line; lineno++) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *tok = strtok_r(line, " \t\r\f\v", &save);
        struct host_addr a;
        memset(&a, 0, sizeof a);
        if (tok && inet_pton(AF_INET, tok, a.bytes) == 1)
            a.family = 4;
        else if (tok && inet_pton(AF_INET6, tok, a.bytes) == 1)
            a.family = 6;
        while (a.family && (tok = strtok_r(NULL, " \t\r\f\v", &save))) {
            if (strlen(tok) >= HOST_NAME_CAP)
                continue;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                struct hosts_entry *m = realloc(e, ncap * sizeof *e);
                if (!m) {
                    free(e);
                    return false;
                }
                e = m;
                cap = ncap;
            }
            for (char *q = tok; *q; q++)
                *q = (char)tolower((unsigned char)*q);
            e[n].name = tok;
            e[n].line = lineno;
            e[n].addr = a;
            n++;
        }
        line = end ? end + 1 : NULL;
    }
    if (n)
        qsort(e, n, sizeof *e, entry_cmp);
    *out = e;
    *nout = n;
    return true;
}

/* Under hosts_mu: the parsed file matches the files on disk. */
static void hosts_refresh(void)
{
    struct file_id hid, nid;
    file_id_of(HOSTS_PATH, &hid);
    file_id_of(NSSWITCH_PATH, &nid);
    if (hosts_loaded && file_id_same(&hid, &hosts_id) &&
        file_id_same(&nid, &nss_id))
        return;
    free(hosts);
    free(hosts_text);
    hosts = NULL;
    hosts_text = NULL;
    nhosts = 0;
    hosts_loaded = true;
    hosts_id = hid;
    nss_id = nid;
    files_first = nsswitch_files_first();
    if (!files_first)
        return;
    hosts_text = read_file(HOSTS_PATH);
    if (hosts_text && !hosts_parse(hosts_text, &hosts, &nhosts)) {
        /* Out of memory: no answers here (getaddrinfo gives them), and
         * another try at the next lookup. */
        free(hosts_text);
        hosts_text = NULL;
        hosts_loaded = false;
    }
}

unsigned proxy_hosts_lookup(const char *name, struct host_addr *out,
                            unsigned cap)
{
    char key[HOST_NAME_CAP];
    size_t len = strlen(name);
    if (len == 0 || len >= sizeof key)
        return 0;
    for (size_t i = 0; i <= len; i++)
        key[i] = (char)tolower((unsigned char)name[i]);
    pthread_mutex_lock(&hosts_mu);
    hosts_refresh();
    /* The first entry for key: a binary search for the lowest index. */
    size_t lo = 0, hi = nhosts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(hosts[mid].name, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    unsigned n = 0;
    for (size_t i = lo; i < nhosts && n < cap && !strcmp(hosts[i].name, key);
         i++) {
        bool dup = false;
        for (unsigned j = 0; j < n && !dup; j++)
            dup = memcmp(&out[j], &hosts[i].addr, sizeof out[j]) == 0;
        if (!dup)
            out[n++] = hosts[i].addr;
    }
    pthread_mutex_unlock(&hosts_mu);
    return n;
}
