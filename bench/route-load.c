/*
 * route-load.c - bench/route.sh's client: the same HTTPS request to the same
 * TLS upstream three ways, so that rows differ only in the path:
 *
 *   direct   TLS from here to the upstream (the floor: what a client with
 *            the key in hand pays)
 *   route    plain HTTP to the proxy, GET /<route>/<path>; the proxy makes
 *            the TLS connection and adds the secret (credential routes)
 *   connect  CONNECT through the proxy, then TLS through the tunnel (the
 *            path a route replaces)
 *
 *   rate        C threads for T s, each opening a connection, sending K
 *               requests on it (keep-alive), closing, again: requests/s,
 *               p50 and p99 of one request (the first of a connection
 *               includes its connect, CONNECT and TLS handshake), the
 *               proxy's CPU per request (--pid)
 *   throughput  one connection, one GET of --path (a large file): MB/s of
 *               the body
 *
 * The client verifies the upstream as the proxy does: the chain against
 * --ca, the IP address in the certificate; no server name (the upstream is
 * an IP literal, and the proxy's SNI check relays a ClientHello without
 * one).
 *
 * usage: route-load --mode direct|route|connect --target 127.0.0.1:PORT
 *          [--proxy 127.0.0.1:PORT] [--route NAME] --ca FILE --path /p
 *          (rate --conc C --time T --keep K [--pid PID] | throughput)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum mode { DIRECT, ROUTE, CONNECT };

static enum mode mode;
static const char *target, *proxy, *route = "up", *ca, *path = "/json";
static int conc = 1, keep = 1;
static double secs = 3;
static long pid;
static SSL_CTX *ctx;
static struct sockaddr_in target_sa, proxy_sa;
static char target_ip[64];
static int target_port;
static double deadline;
static atomic_long errors;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *m)
{
    fprintf(stderr, "route-load: %s\n", m);
    exit(2);
}

static void parse_addr(const char *s, struct sockaddr_in *sa, char *ip,
                       int *port)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    char *c = strrchr(buf, ':');
    if (!c)
        die("an address is IP:PORT");
    *c = '\0';
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)atoi(c + 1));
    if (inet_pton(AF_INET, buf, &sa->sin_addr) != 1)
        die("an address is IPv4:PORT");
    if (ip)
        snprintf(ip, 64, "%s", buf);
    if (port)
        *port = atoi(c + 1);
}

struct conn {
    int fd;
    SSL *ssl;
    char buf[65536];
    size_t have; /* bytes in buf not yet consumed */
};

static int dial(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static ssize_t c_read(struct conn *c, void *p, size_t n)
{
    if (c->ssl) {
        int r = SSL_read(c->ssl, p, (int)n);
        return r > 0 ? r : -1;
    }
    ssize_t r;
    do
        r = read(c->fd, p, n);
    while (r < 0 && errno == EINTR);
    return r > 0 ? r : -1;
}

static int c_write(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t r;
        if (c->ssl) {
            int w = SSL_write(c->ssl, p, (int)n);
            r = w > 0 ? w : -1;
        } else {
            r = write(c->fd, p, n);
        }
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Reads a response head into c->buf; returns its length, or -1. */
static ssize_t read_head(struct conn *c)
{
    for (;;) {
        char *e = c->have ? memmem(c->buf, c->have, "\r\n\r\n", 4) : NULL;
        if (e)
            return e + 4 - c->buf;
        if (c->have == sizeof c->buf)
            return -1;
        ssize_t r = c_read(c, c->buf + c->have, sizeof c->buf - c->have);
        if (r <= 0)
            return -1;
        c->have += (size_t)r;
    }
}

static void consume(struct conn *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->have - n);
    c->have -= n;
}

/* One response: status 200 and a Content-Length body, read whole.
 * Returns the body's length, or -1. */
static long long read_response(struct conn *c)
{
    ssize_t h = read_head(c);
    if (h < 0 || c->have < 12 || memcmp(c->buf + 9, "200", 3) != 0)
        return -1;
    long long len = -1;
    for (char *p = c->buf; p < c->buf + h;) {
        char *eol = memmem(p, (size_t)(c->buf + h - p), "\r\n", 2);
        if (!eol)
            break;
        if (eol - p > 15 && strncasecmp(p, "content-length:", 15) == 0)
            len = atoll(p + 15);
        p = eol + 2;
    }
    if (len < 0)
        return -1;
    consume(c, (size_t)h);
    long long left = len;
    while (left > 0) {
        if (c->have) {
            size_t n = (size_t)left < c->have ? (size_t)left : c->have;
            consume(c, n);
            left -= (long long)n;
            continue;
        }
        ssize_t r = c_read(c, c->buf, sizeof c->buf);
        if (r <= 0)
            return -1;
        c->have = (size_t)r;
    }
    return len;
}

static void c_close(struct conn *c)
{
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->have = 0;
}

static int tls_start(struct conn *c)
{
    c->ssl = SSL_new(ctx);
    if (!c->ssl)
        return -1;
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    X509_VERIFY_PARAM_set1_ip_asc(vp, target_ip);
    SSL_set_fd(c->ssl, c->fd);
    return SSL_connect(c->ssl) == 1 ? 0 : -1;
}

static int c_open(struct conn *c)
{
    c->have = 0;
    c->ssl = NULL;
    c->fd = dial(mode == DIRECT ? &target_sa : &proxy_sa);
    if (c->fd < 0)
        return -1;
    if (mode == CONNECT) {
        char req[256];
        int n = snprintf(req, sizeof req,
                         "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n",
                         target_ip, target_port, target_ip, target_port);
        if (c_write(c, req, (size_t)n) != 0)
            return -1;
        ssize_t h = read_head(c);
        if (h < 0 || memcmp(c->buf + 9, "200", 3) != 0)
            return -1;
        consume(c, (size_t)h);
    }
    if (mode != ROUTE && tls_start(c) != 0)
        return -1;
    return 0;
}

static int request(struct conn *c)
{
    char req[512];
    int n;
    if (mode == ROUTE)
        n = snprintf(req, sizeof req,
                     "GET /%s%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", route,
                     path);
    else
        n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: "
                     "Bearer bench-secret\r\n\r\n",
                     path, target_ip, target_port);
    if (c_write(c, req, (size_t)n) != 0)
        return -1;
    return read_response(c) < 0 ? -1 : 0;
}

struct worker {
    pthread_t t;
    uint32_t *lat; /* microseconds per request */
    size_t n, cap;
};

static void record(struct worker *w, double us)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 65536;
        w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
        if (!w->lat)
            die("out of memory");
    }
    w->lat[w->n++] = us > 4e9 ? 4000000000u : (uint32_t)us;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct conn *c = malloc(sizeof *c);
    if (!c)
        die("out of memory");
    while (now() < deadline) {
        double t0 = now();
        if (c_open(c) != 0) {
            atomic_fetch_add(&errors, 1);
            c_close(c);
            continue;
        }
        for (int i = 0; i < keep && now() < deadline; i++) {
            if (request(c) != 0) {
                atomic_fetch_add(&errors, 1);
                break;
            }
            double t1 = now();
            record(w, (t1 - t0) * 1e6);
            t0 = t1;
        }
        c_close(c);
    }
    free(c);
    return NULL;
}

static long cpu_ticks(long p)
{
    if (!p)
        return 0;
    char fn[64], buf[4096];
    snprintf(fn, sizeof fn, "/proc/%ld/stat", p);
    FILE *f = fopen(fn, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = strrchr(buf, ')');
    if (!s)
        return 0;
    long ut = 0, st = 0;
    /* fields after ")": state ppid pgrp session tty tpgid flags minflt
     * cminflt majflt cmajflt utime stime */
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
               &ut, &st) != 2)
        return 0;
    return ut + st;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *what = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "rate") == 0 || strcmp(a, "throughput") == 0) {
            what = a;
            continue;
        }
        if (!v)
            die("an option needs a value");
        i++;
        if (strcmp(a, "--mode") == 0)
            mode = strcmp(v, "direct") == 0  ? DIRECT
                   : strcmp(v, "route") == 0 ? ROUTE
                   : strcmp(v, "connect") == 0
                       ? CONNECT
                       : (die("--mode direct|route|connect"), DIRECT);
        else if (strcmp(a, "--target") == 0)
            target = v;
        else if (strcmp(a, "--proxy") == 0)
            proxy = v;
        else if (strcmp(a, "--route") == 0)
            route = v;
        else if (strcmp(a, "--ca") == 0)
            ca = v;
        else if (strcmp(a, "--path") == 0)
            path = v;
        else if (strcmp(a, "--conc") == 0)
            conc = atoi(v);
        else if (strcmp(a, "--time") == 0)
            secs = atof(v);
        else if (strcmp(a, "--keep") == 0)
            keep = atoi(v);
        else if (strcmp(a, "--pid") == 0)
            pid = atol(v);
        else
            die("unknown option");
    }
    if (!what || !target || !ca || (mode != DIRECT && !proxy) || conc < 1 ||
        keep < 1)
        die("usage: route-load --mode direct|route|connect --target IP:PORT "
            "[--proxy IP:PORT] --ca FILE [--route NAME] [--path P] "
            "(rate --conc C --time T --keep K [--pid PID] | throughput)");
    parse_addr(target, &target_sa, target_ip, &target_port);
    if (proxy)
        parse_addr(proxy, &proxy_sa, NULL, NULL);
    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        die("cannot load --ca");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);

    const char *mname = mode == DIRECT  ? "direct"
                        : mode == ROUTE ? "route"
                                        : "connect";
    if (strcmp(what, "throughput") == 0) {
        struct conn *c = malloc(sizeof *c);
        if (!c || c_open(c) != 0)
            die("throughput: cannot connect");
        char req[512];
        int n = mode == ROUTE
                    ? snprintf(req, sizeof req,
                               "GET /%s%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                               route, path)
                    : snprintf(req, sizeof req,
                               "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path,
                               target_ip, target_port);
        double t0 = now();
        long long len = c_write(c, req, (size_t)n) == 0 ? read_response(c) : -1;
        double dt = now() - t0;
        c_close(c);
        free(c);
        if (len < 0)
            die("throughput: the request failed");
        printf("mode=%s bytes=%lld secs=%.3f mbps=%.1f\n", mname, len, dt,
               (double)len / dt / 1e6);
        return 0;
    }

    struct worker *w = calloc((size_t)conc, sizeof *w);
    if (!w)
        die("out of memory");
    long hz = sysconf(_SC_CLK_TCK);
    long cpu0 = cpu_ticks(pid);
    double t0 = now();
    deadline = t0 + secs;
    for (int i = 0; i < conc; i++)
        pthread_create(&w[i].t, NULL, run, &w[i]);
    size_t total = 0;
    for (int i = 0; i < conc; i++) {
        pthread_join(w[i].t, NULL);
        total += w[i].n;
    }
    double dt = now() - t0;
    long cpu1 = cpu_ticks(pid);
    uint32_t *all = malloc((total ? total : 1) * sizeof *all);
    if (!all)
        die("out of memory");
    size_t k = 0;
    for (int i = 0; i < conc; i++) {
        memcpy(all + k, w[i].lat, w[i].n * sizeof *all);
        k += w[i].n;
        free(w[i].lat);
    }
    qsort(all, total, sizeof *all, cmp_u32);
    double p50 = total ? all[total / 2] : 0;
    double p99 = total ? all[total * 99 / 100] : 0;
    double cpu_us =
        pid && total ? (double)(cpu1 - cpu0) * 1e6 / (double)hz / (double)total
                     : 0;
    printf("mode=%s conc=%d keep=%d requests=%zu rate=%.0f p50_us=%.0f "
           "p99_us=%.0f cpu_us=%.1f errors=%ld\n",
           mname, conc, keep, total, (double)total / dt, p50, p99, cpu_us,
           atomic_load(&errors));
    free(all);
    free(w);
    SSL_CTX_free(ctx);
    return 0;
}
