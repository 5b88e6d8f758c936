/*
 * socks-load.c - the SOCKS5 row of `make bench` (bench/socks.sh): the same
 * tunnel, opened the same way, through SOCKS5 and through HTTP CONNECT, so
 * that the two rows differ only in the protocol. The shared harness's
 * loadgen speaks HTTP CONNECT only.
 *
 *   socks-load --proto socks5|connect --proxy HOST:PORT --target HOST:PORT
 *              rate [--conc C] [--time T] [--pid PID]
 *              throughput [--bytes B]
 *
 * rate: C threads, each opening tunnels one after another for T seconds:
 * connect, the handshake (SOCKS5: greeting, method reply, CONNECT request,
 * reply, as curl and nc send them; HTTP: CONNECT, the 200 head), "PING\n"
 * to the harness's blast through the tunnel, "PONG\n" back, close. Prints
 * tunnels/s, p50 and p99 (µs, socket() to PONG) and, with --pid, the CPU
 * the proxy used per tunnel (utime + stime from /proc/PID/stat).
 * throughput: one tunnel, "SRC B\n", B bytes read; MB/s.
 * One key=value line on stdout. Errors count; none is retried.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define MAX_SAMPLES (1 << 20)

static struct {
    int socks;
    struct sockaddr_in proxy;
    uint8_t target_ip[4];
    int target_port;
    char target_text[64];
    int conc;
    double seconds;
    unsigned long long bytes;
    int pid;
} O = {.conc = 32, .seconds = 5, .bytes = 1ULL << 30};

static atomic_int stop_flag;
static atomic_long errors;
static long *samples; /* µs per tunnel, all threads */
static atomic_long nsamples;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_exact(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The HTTP CONNECT head, up to its blank line; 0 for a 200. */
static int read_connect_head(int fd)
{
    char head[1024];
    size_t n = 0;
    while (n < sizeof head - 1) {
        ssize_t r = recv(fd, head + n, 1, 0);
        if (r <= 0)
            return -1;
        n++;
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[n] = '\0';
    return strncmp(head, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
}

static int handshake(int fd)
{
    if (!O.socks) {
        char req[160];
        int n =
            snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
                     O.target_text, O.target_text);
        return write_all(fd, req, (size_t)n) < 0 ? -1 : read_connect_head(fd);
    }
    uint8_t greet[3] = {5, 1, 0}, method[2];
    if (write_all(fd, greet, 3) < 0 || read_exact(fd, method, 2) < 0 ||
        method[0] != 5 || method[1] != 0)
        return -1;
    uint8_t req[10] = {5, 1, 0, 1};
    memcpy(req + 4, O.target_ip, 4);
    req[8] = (uint8_t)(O.target_port >> 8);
    req[9] = (uint8_t)O.target_port;
    uint8_t rep[10];
    if (write_all(fd, req, 10) < 0 || read_exact(fd, rep, 10) < 0 ||
        rep[1] != 0)
        return -1;
    return 0;
}

static int open_tunnel(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&O.proxy, sizeof O.proxy) < 0 ||
        handshake(fd) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *rate_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        double t0 = now_s();
        int fd = open_tunnel();
        char pong[5];
        if (fd < 0 || write_all(fd, "PING\n", 5) < 0 ||
            read_exact(fd, pong, 5) < 0 || memcmp(pong, "PONG\n", 5) != 0) {
            atomic_fetch_add(&errors, 1);
            if (fd >= 0)
                close(fd);
            continue;
        }
        close(fd);
        long i = atomic_fetch_add(&nsamples, 1);
        if (i < MAX_SAMPLES)
            samples[i] = (long)((now_s() - t0) * 1e6);
    }
    return NULL;
}

/* utime + stime of the process in seconds (its reaped children too). */
static double cpu_of(int pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ut, st, cut, cst;
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
               "%llu %llu",
               &ut, &st, &cut, &cst) != 4)
        return -1;
    return (double)(ut + st + cut + cst) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int run_rate(void)
{
    samples = calloc(MAX_SAMPLES, sizeof *samples);
    if (!samples)
        return 1;
    pthread_t th[MAX_THREADS];
    double cpu0 = O.pid ? cpu_of(O.pid) : -1;
    double t0 = now_s();
    for (int i = 0; i < O.conc; i++)
        pthread_create(&th[i], NULL, rate_thread, NULL);
    struct timespec d = {.tv_sec = (time_t)O.seconds,
                         .tv_nsec =
                             (long)((O.seconds - (time_t)O.seconds) * 1e9)};
    nanosleep(&d, NULL);
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < O.conc; i++)
        pthread_join(th[i], NULL);
    double took = now_s() - t0;
    double cpu1 = O.pid ? cpu_of(O.pid) : -1;
    long n = atomic_load(&nsamples);
    long kept = n < MAX_SAMPLES ? n : MAX_SAMPLES;
    qsort(samples, (size_t)kept, sizeof *samples, cmp_long);
    printf("proto=%s mode=rate conc=%d secs=%.1f tunnels=%ld errors=%ld "
           "rate=%.0f p50_us=%ld p99_us=%ld",
           O.socks ? "socks5" : "connect", O.conc, took, n,
           atomic_load(&errors), (double)n / took,
           kept ? samples[kept / 2] : -1,
           kept ? samples[(long)((double)kept * 0.99)] : -1);
    if (O.pid && cpu0 >= 0 && cpu1 >= 0 && n > 0)
        printf(" cpu_us=%.1f", (cpu1 - cpu0) * 1e6 / (double)n);
    printf("\n");
    return n > 0 ? 0 : 1;
}

static int run_throughput(void)
{
    int fd = open_tunnel();
    if (fd < 0) {
        fprintf(stderr, "socks-load: no tunnel\n");
        return 1;
    }
    char cmd[64];
    int len = snprintf(cmd, sizeof cmd, "SRC %llu\n", O.bytes);
    double t0 = now_s();
    if (write_all(fd, cmd, (size_t)len) < 0)
        return 1;
    static char buf[1 << 18];
    unsigned long long got = 0;
    while (got < O.bytes) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (unsigned long long)r;
    }
    double took = now_s() - t0;
    close(fd);
    printf("proto=%s mode=throughput bytes=%llu secs=%.2f mbps=%.0f\n",
           O.socks ? "socks5" : "connect", got, took, (double)got / took / 1e6);
    return got == O.bytes ? 0 : 1;
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    int port = atoi(colon + 1);
    if (port < 1 || port > 65535 || inet_pton(AF_INET, host, &a->sin_addr) != 1)
        return -1;
    a->sin_port = htons((uint16_t)port);
    return 0;
}

static int usage(void)
{
    fputs("usage: socks-load --proto socks5|connect --proxy H:P --target H:P "
          "(rate [--conc C] [--time T] [--pid PID] | throughput [--bytes "
          "B])\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    const char *mode = NULL;
    struct sockaddr_in target;
    int have_target = 0, have_proxy = 0, have_proto = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--proto") && v) {
            O.socks = !strcmp(v, "socks5");
            have_proto = O.socks || !strcmp(v, "connect");
            i++;
        } else if (!strcmp(a, "--proxy") && v) {
            have_proxy = parse_addr(v, &O.proxy) == 0;
            i++;
        } else if (!strcmp(a, "--target") && v) {
            have_target = parse_addr(v, &target) == 0;
            snprintf(O.target_text, sizeof O.target_text, "%s", v);
            i++;
        } else if (!strcmp(a, "--conc") && v) {
            O.conc = atoi(v);
            i++;
        } else if (!strcmp(a, "--time") && v) {
            O.seconds = atof(v);
            i++;
        } else if (!strcmp(a, "--bytes") && v) {
            O.bytes = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--pid") && v) {
            O.pid = atoi(v);
            i++;
        } else if (!mode && (!strcmp(a, "rate") || !strcmp(a, "throughput"))) {
            mode = a;
        } else {
            return usage();
        }
    }
    if (!mode || !have_proto || !have_proxy || !have_target || O.conc < 1 ||
        O.conc > MAX_THREADS || O.seconds <= 0 || O.bytes == 0)
        return usage();
    memcpy(O.target_ip, &target.sin_addr, 4);
    O.target_port = ntohs(target.sin_port);
    return !strcmp(mode, "rate") ? run_rate() : run_throughput();
}
