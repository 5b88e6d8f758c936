/*
 * proxy_dns.c - name lookups on threads of each proxy's own.
 *
 * uv_getaddrinfo runs on libuv's thread pool, which is the process's: 4
 * threads, of which at most 2 run "slow" work such as getaddrinfo at a
 * time (libuv 1.44), for every proxy of the process. One session whose
 * names hang (a domain whose name server never answers: glibc waits 5 s a
 * try, 2 tries) held them all, and every other session's lookups waited
 * behind it and got 504 dns_timeout. So each proxy looks names up on
 * threads of its own, PROXY_DNS_THREADS at most, started when a lookup
 * finds none idle and ended after PROXY_DNS_IDLE_MS without work: one
 * proxy's hanging lookups hold only its own threads, and its other lookups
 * wait in its own queue, oldest first, their dns_timeout running from the
 * request.
 *
 * A lookup in progress cannot be stopped: a connection that gives up
 * (dns_timeout, closed) only drops its claim on the job, and the thread
 * throws the answer away. The shared state lives until the proxy and the
 * last of its threads have let go of it, so a closed proxy never waits for
 * a lookup, and a thread never touches a closed proxy.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy/proxy_conn.h"

struct dns_job {
    struct dns_job *next;
    /* The connection waiting for the answer; NULL once it gave up (set on
     * the loop's thread, under mu). */
    struct conn *c;
    char host[HOST_NAME_CAP];
    int status; /* 0 or a libuv error */
    unsigned naddr;
    struct host_addr addrs[PROXY_MAX_ADDRS];
};

struct proxy_dns {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct dns_job *todo, *todo_tail; /* waiting for a thread */
    unsigned ntodo;
    struct dns_job *done, *done_tail; /* answered, for the loop */
    unsigned threads, idle;
    unsigned refs;    /* the proxy's, and each thread's */
    bool closed;      /* the proxy is closing: no more answers */
    uv_async_t async; /* wakes the loop; closed with the proxy */
    struct proxy *px;
};

static void dns_unref_locked(struct proxy_dns *d, bool *last)
{
    *last = --d->refs == 0;
}

static void dns_free(struct proxy_dns *d)
{
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
}

static void jobs_free(struct dns_job *j)
{
    while (j) {
        struct dns_job *next = j->next;
        free(j);
        j = next;
    }
}

/* getaddrinfo's error as libuv gives it (uv_getaddrinfo's statuses). */
static int gai_status(int err)
{
    switch (err) {
    case 0:
        return 0;
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
        return UV_EAI_ADDRFAMILY;
#endif
    case EAI_AGAIN:
        return UV_EAI_AGAIN;
    case EAI_BADFLAGS:
        return UV_EAI_BADFLAGS;
    case EAI_FAMILY:
        return UV_EAI_FAMILY;
    case EAI_MEMORY:
        return UV_EAI_MEMORY;
#ifdef EAI_NODATA
    case EAI_NODATA:
        return UV_EAI_NODATA;
#endif
    case EAI_NONAME:
        return UV_EAI_NONAME;
    case EAI_OVERFLOW:
        return UV_EAI_OVERFLOW;
    case EAI_SERVICE:
        return UV_EAI_SERVICE;
    case EAI_SOCKTYPE:
        return UV_EAI_SOCKTYPE;
    case EAI_SYSTEM:
        return errno ? uv_translate_sys_error(errno) : UV_EAI_FAIL;
    default:
        return UV_EAI_FAIL;
    }
}

static void lookup(struct dns_job *j)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    errno = 0;
    j->status = gai_status(getaddrinfo(j->host, NULL, &hints, &res));
    j->naddr = 0;
    for (struct addrinfo *ai = res; ai && j->naddr < PROXY_MAX_ADDRS;
         ai = ai->ai_next) {
        struct host_addr a;
        memset(&a, 0, sizeof a);
        if (ai->ai_family == AF_INET) {
            a.family = 4;
            memcpy(a.bytes, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
        } else if (ai->ai_family == AF_INET6) {
            a.family = 6;
            memcpy(a.bytes, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr,
                   16);
        } else {
            continue;
        }
        bool dup = false;
        for (unsigned i = 0; i < j->naddr; i++)
            dup = dup || memcmp(&j->addrs[i], &a, sizeof a) == 0;
        if (!dup)
            j->addrs[j->naddr++] = a;
    }
    if (res)
        freeaddrinfo(res);
}

static void *dns_thread(void *arg)
{
    struct proxy_dns *d = arg;
    pthread_setname_np(pthread_self(), "isolation-dns"); /* ps, /proc */
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->todo && !d->closed) {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += PROXY_DNS_IDLE_MS / 1000;
            d->idle++;
            int r = pthread_cond_timedwait(&d->cv, &d->mu, &until);
            d->idle--;
            if (r == ETIMEDOUT && !d->todo)
                break;
        }
        struct dns_job *j = d->todo;
        if (!j || d->closed)
            break;
        d->todo = j->next;
        d->ntodo--;
        if (!d->todo)
            d->todo_tail = NULL;
        j->next = NULL;
        bool wanted = j->c != NULL;
        pthread_mutex_unlock(&d->mu);
        if (wanted)
            lookup(j);
        pthread_mutex_lock(&d->mu);
        if (d->closed) {
            free(j);
            break;
        }
        if (d->done_tail)
            d->done_tail->next = j;
        else
            d->done = j;
        d->done_tail = j;
        uv_async_send(&d->async); /* open while !closed (see close) */
    }
    d->threads--;
    bool last;
    dns_unref_locked(d, &last);
    pthread_mutex_unlock(&d->mu);
    if (last)
        dns_free(d);
    return NULL;
}

/* On the loop's thread: the answers that came, to their connections. */
static void on_answers(uv_async_t *a)
{
    struct proxy_dns *d = a->data;
    pthread_mutex_lock(&d->mu);
    struct dns_job *j = d->done;
    d->done = d->done_tail = NULL;
    pthread_mutex_unlock(&d->mu);
    while (j) {
        struct dns_job *next = j->next;
        struct conn *c = j->c; /* only this thread changes it */
        if (c) {
            c->dns_job = NULL;
            c->naddr = (uint8_t)j->naddr;
            memcpy(c->addrs, j->addrs, j->naddr * sizeof *j->addrs);
            conn_resolved(c, j->status);
        }
        free(j);
        j = next;
    }
}

static void on_async_closed(uv_handle_t *h)
{
    struct proxy_dns *d = h->data;
    struct proxy *p = d->px;
    pthread_mutex_lock(&d->mu);
    bool last;
    dns_unref_locked(d, &last);
    pthread_mutex_unlock(&d->mu);
    if (last)
        dns_free(d);
    p->handles--;
    proxy_maybe_release(p);
}

static struct proxy_dns *dns_of(struct proxy *p, uv_loop_t *loop)
{
    if (p->dns)
        return p->dns;
    struct proxy_dns *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bool ok = pthread_mutex_init(&d->mu, NULL) == 0;
    if (ok && pthread_cond_init(&d->cv, &ca) != 0) {
        pthread_mutex_destroy(&d->mu);
        ok = false;
    }
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(d);
        return NULL;
    }
    if (uv_async_init(loop, &d->async, on_answers) != 0) {
        dns_free(d);
        return NULL;
    }
    uv_unref((uv_handle_t *)&d->async); /* never keeps a loop alive alone */
    d->async.data = d;
    d->px = p;
    d->refs = 1;
    p->handles++;
    p->dns = d;
    return d;
}

int proxy_dns_start(struct conn *c, const char *name)
{
    struct proxy_dns *d = dns_of(c->px, &c->px->loop->uv);
    struct dns_job *j = d ? calloc(1, sizeof *j) : NULL;
    if (!j)
        return UV_ENOMEM;
    j->c = c;
    snprintf(j->host, sizeof j->host, "%s", name);
    int r = 0;
    pthread_mutex_lock(&d->mu);
    /* A new thread unless an idle one will take the job (idle threads
     * not yet woken for the jobs queued before it). */
    if (d->idle <= d->ntodo && d->threads < PROXY_DNS_THREADS) {
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        r = pthread_create(&t, &attr, dns_thread, d);
        pthread_attr_destroy(&attr);
        if (r == 0) {
            d->threads++;
            d->refs++;
        } else if (d->threads > 0) {
            r = 0; /* the job waits for a thread it has */
        } else {
            r = uv_translate_sys_error(r);
        }
    }
    if (r == 0) {
        if (d->todo_tail)
            d->todo_tail->next = j;
        else
            d->todo = j;
        d->todo_tail = j;
        d->ntodo++;
        pthread_cond_signal(&d->cv);
        c->dns_job = j;
    }
    pthread_mutex_unlock(&d->mu);
    if (r != 0)
        free(j);
    return r;
}

void proxy_dns_cancel(struct conn *c)
{
    struct dns_job *j = c->dns_job;
    if (!j)
        return;
    struct proxy_dns *d = c->px->dns;
    pthread_mutex_lock(&d->mu);
    j->c = NULL; /* its thread skips it, or throws its answer away */
    pthread_mutex_unlock(&d->mu);
    c->dns_job = NULL;
}

void proxy_dns_close(struct proxy *p)
{
    struct proxy_dns *d = p->dns;
    if (!d)
        return;
    p->dns = NULL;
    pthread_mutex_lock(&d->mu);
    d->closed = true;
    struct dns_job *todo = d->todo, *done = d->done;
    d->todo = d->todo_tail = d->done = d->done_tail = NULL;
    d->ntodo = 0;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    jobs_free(todo);
    jobs_free(done);
    /* The proxy's reference goes with the handle (on_async_closed). */
    uv_close((uv_handle_t *)&d->async, on_async_closed);
}
