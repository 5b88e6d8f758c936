/*
 * fuzz_request.c - http_parse_request, http_parse_request_origin and
 * http_write_upstream_head.
 * Besides memory errors it checks what the proxy relies on: spans inside
 * the input, a port in range, a prefix never judged differently from the
 * whole, and a writer that never writes past its buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int inside(const char *b, size_t n, struct http_span s)
{
    return s.n == 0 || (s.p >= b && s.p + s.n <= b + n) ||
           (s.n == 1 && s.p[0] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A heap copy of exactly size bytes so that ASan sees any overread. */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    size_t max_head = size > 0 && (data[0] & 1) ? 512 : 65536;
    static struct http_request req, pre;
    const char *why = NULL;
    int r = http_parse_request(buf, size, max_head, &req, &why);
    if (r < 0 && !why)
        abort();
    if (r > 0) {
        if ((size_t)r != req.head_len || req.head_len > size ||
            req.head_len > max_head || req.port < 1 || req.port > 65535 ||
            req.nheaders > HTTP_MAX_HEADERS || req.host_kind == HOST_INVALID ||
            !inside(buf, size, req.method))
            abort();
        if (!req.is_connect &&
            (!inside(buf, size, req.path) || req.path.n == 0))
            abort();
        for (size_t i = 0; i < req.nheaders; i++) {
            if (!inside(buf, size, req.headers[i].name) ||
                !inside(buf, size, req.headers[i].value) ||
                req.headers[i].name.n == 0)
                abort();
        }
        if (!req.is_connect) {
            size_t need = http_write_upstream_head(&req, size & 2, NULL, 0);
            char *out = malloc(need);
            if (http_write_upstream_head(&req, size & 2, out, need) != need)
                abort();
            /* The head ends in exactly one blank line. */
            if (need < 4 || memcmp(out + need - 4, "\r\n\r\n", 4) != 0)
                abort();
            for (size_t i = 0; i + 4 < need; i++) {
                if (out[i] == '\r' && out[i + 1] == '\n' && out[i + 2] == '\r')
                    abort();
                if ((out[i] == '\n' && (i == 0 || out[i - 1] != '\r')) ||
                    out[i] == '\0')
                    abort();
            }
            free(out);
        }
    }
    /* A prefix is incomplete, or judged like the whole. */
    for (int k = 0; k < 2 && size > 0; k++) {
        size_t cut = k == 0 ? size - 1 : (size * 7919u) % size;
        int p = http_parse_request(buf, cut, max_head, &pre, &why);
        if (p != 0 && p != r)
            abort();
        if (p > 0 && (size_t)p > cut)
            abort();
    }
    /* The origin-form parser (a proxy with routes) judges every other
     * head exactly as the plain one; what only it accepts is origin form,
     * its path a span of the input starting with '/', no host. */
    static struct http_request org;
    const char *owhy = NULL;
    int o = http_parse_request_origin(buf, size, max_head, &org, &owhy);
    if (o < 0 && !owhy)
        abort();
    if (r > 0 && (o != r || org.origin_form))
        abort();
    if (o > 0 && !org.origin_form && o != r)
        abort();
    if (o > 0 && org.origin_form &&
        (!inside(buf, size, org.path) || org.path.n == 0 ||
         org.path.p[0] != '/' || org.host[0] != '\0' || org.is_connect))
        abort();
    for (int k = 0; k < 2 && size > 0; k++) {
        size_t cut = k == 0 ? size - 1 : (size * 7919u) % size;
        int p = http_parse_request_origin(buf, cut, max_head, &pre, &owhy);
        if (p != 0 && p != o)
            abort();
    }
    free(buf);
    return 0;
}
