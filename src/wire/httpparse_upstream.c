/*
 * httpparse_upstream.c - writes the origin-form head a forward request is
 * sent upstream with. Everything in it comes from the parsed request: the
 * Host is the URI's (already checked against the allowlist), framing comes
 * from the parsed body, never from a header the client wrote.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "wire/httpparse.h"

struct out {
    char *p;
    size_t cap, n;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->n < o->cap) {
        size_t room = o->cap - o->n;
        memcpy(o->p + o->n, s, n < room ? n : room);
    }
    o->n += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

size_t http_write_upstream_head(const struct http_request *req,
                                bool keep_upstream, char *out, size_t cap)
{
    struct out o = {out, cap, 0};
    char num[32];
    put(&o, req->method.p, req->method.n);
    puts_(&o, " ");
    put(&o, req->path.p, req->path.n);
    /* The client's own version: an HTTP/1.0 client cannot read a chunked
     * response, and a server answers a 1.0 request without one. (A 1.0
     * request never has a chunked body: the parser refuses that.) */
    puts_(&o, req->version_minor == 0 ? " HTTP/1.0\r\nHost: "
                                      : " HTTP/1.1\r\nHost: ");
    bool v6 = req->host_kind == HOST_IPV6;
    if (v6)
        puts_(&o, "[");
    puts_(&o, req->host);
    if (v6)
        puts_(&o, "]");
    if (req->port != 80) {
        snprintf(num, sizeof num, ":%d", req->port);
        puts_(&o, num);
    }
    puts_(&o, "\r\n");
    for (size_t i = 0; i < req->nheaders; i++) {
        put(&o, req->headers[i].name.p, req->headers[i].name.n);
        puts_(&o, ": ");
        put(&o, req->headers[i].value.p, req->headers[i].value.n);
        puts_(&o, "\r\n");
    }
    if (req->body == BODY_CHUNKED) {
        puts_(&o, "Transfer-Encoding: chunked\r\n");
    } else if (req->body == BODY_LENGTH) {
        snprintf(num, sizeof num, "Content-Length: %" PRIu64 "\r\n",
                 req->content_length);
        puts_(&o, num);
    }
    puts_(&o, keep_upstream ? "Connection: keep-alive\r\n\r\n"
                            : "Connection: close\r\n\r\n");
    return o.n;
}
