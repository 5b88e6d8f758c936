/*
 * httpparse.h - strict HTTP/1.x parsing for the proxy: request heads
 * (CONNECT and absolute-form forward requests), response heads (to find
 * where a response ends on a kept-alive connection) and chunked bodies.
 *
 * Pure functions over byte buffers: no allocation, no I/O. They are the
 * proxy's attack surface and have fuzz targets in fuzz/.
 */
#ifndef ISOLATION_HTTPPARSE_H
#define ISOLATION_HTTPPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire/hostparse.h"

/* Longest request line before 414. */
#define HTTP_MAX_REQUEST_LINE 8192
#define HTTP_MAX_HEADERS 128

enum http_body { BODY_NONE = 0, BODY_LENGTH, BODY_CHUNKED, BODY_UNTIL_CLOSE };

struct http_span {
    const char *p;
    size_t n;
};

struct http_header {
    struct http_span name;
    struct http_span value; /* leading and trailing whitespace trimmed */
};

struct http_request {
    size_t head_len; /* bytes up to and including the blank line */
    bool is_connect;
    struct http_span method;
    enum host_kind host_kind;
    char host[HOST_NAME_CAP]; /* normalized by host_parse; IPv6 unbracketed */
    struct host_addr addr;    /* for HOST_IPV4 / HOST_IPV6 */
    int port;                 /* 1..65535; forward: from the URI, else 80 */
    struct http_span path;    /* forward: origin-form target, "/" when empty */
    int version_minor;        /* HTTP/1.<minor>, 0 or 1 */
    bool keep_alive;          /* the client may send another request after */
    enum http_body body;      /* BODY_NONE, BODY_LENGTH or BODY_CHUNKED */
    uint64_t content_length;  /* BODY_LENGTH may be 0 ("Content-Length: 0") */
    /* End-to-end headers to send upstream, in order: Host, Proxy-*,
     * Connection, Keep-Alive, TE, Trailer, Upgrade, Transfer-Encoding is
     * kept only as "chunked" via body, Content-Length only via body and
     * content_length, and every header the Connection header names are
     * left out. */
    size_t nheaders;
    struct http_header headers[HTTP_MAX_HEADERS];
    /* The Proxy-Authorization value (the last one) and how many came:
     * the proxy checks it, and never sends it upstream. */
    struct http_span proxy_auth;
    unsigned proxy_auths;
    /* http_parse_request_origin only: the target was in origin form
     * ("/path"); host is empty, port 0, path the target, and the Host
     * header is not compared with anything (the proxy's routes decide). */
    bool origin_form;
};

/*
 * Parses the request head at the start of buf[0..len).
 *   > 0  complete and valid: the head's length (req filled)
 *     0  incomplete; nothing seen so far is invalid and no limit is passed
 *   < 0  refused: -400, -414 (request line over HTTP_MAX_REQUEST_LINE
 *        or over max_head), -431 (head over max_head), -501 (a method
 *        the proxy does not relay, e.g. one with an Upgrade), -505 (not
 *        HTTP/1.0 or 1.1).
 * *why (when not NULL) gets a short static reason for a refusal.
 * 400 covers: origin-form targets; userinfo, '\' or '%' in the authority;
 * a bad or missing port; a numeric host that is not a canonical IP literal;
 * CONNECT with anything but host:port; HTTP/1.1 without Host or with two;
 * a Host header naming another host or port than the URI; Content-Length
 * with Transfer-Encoding; a Transfer-Encoding other than exactly "chunked";
 * differing or non-numeric Content-Length; NUL, bare CR, bare LF,
 * whitespace before a colon, obsolete line folding; a CONNECT with a body.
 */
int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req, const char **why);

/* The same, but an origin-form target ("/path", printable ASCII, no
 * fragment) is accepted and marked (req->origin_form): a proxy with routes
 * answers those itself. */
int http_parse_request_origin(const char *buf, size_t len, size_t max_head,
                              struct http_request *req, const char **why);

/*
 * Writes the origin-form request head for upstream: "<method> <path>
 * HTTP/1.1", "Host: <uri host[:port]>", the kept headers, the body framing
 * header, and "Connection: keep-alive" or "close" as keep_upstream says.
 * Returns the length written, or the length needed when it exceeds cap
 * (then nothing useful is in out).
 */
size_t http_write_upstream_head(const struct http_request *req,
                                bool keep_upstream, char *out, size_t cap);

struct http_response {
    size_t head_len;
    int status;
    int version_minor;
    bool keep_alive;     /* the upstream will keep the connection open */
    enum http_body body; /* BODY_UNTIL_CLOSE when nothing frames it */
    uint64_t content_length;
};

/*
 * Parses a response head, like http_parse_request (> 0, 0, < 0 as -502 for
 * a malformed response). request_was_head: no body follows whatever the
 * headers say. 1xx, 204 and 304 have no body. A 1xx other than 101 is
 * followed by another response head, which the caller parses again.
 */
int http_parse_response(const char *buf, size_t len, size_t max_head,
                        bool request_was_head, struct http_response *res,
                        const char **why);

/* Finds the end of a chunked body as it streams by, trailers included. */
struct http_chunked {
    int state;
    uint64_t remaining; /* bytes left in the current chunk's data */
    size_t line_len;    /* bytes of the current size or trailer line */
};

void http_chunked_init(struct http_chunked *c);

/*
 * Consumes up to n bytes of a chunked body. Returns how many belong to the
 * body (the rest, if any, is the next message), sets *done when the body's
 * last byte has been consumed, and returns -1 on a malformed body.
 */
ssize_t http_chunked_feed(struct http_chunked *c, const char *buf, size_t n,
                          bool *done);

#endif
