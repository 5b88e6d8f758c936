/*
 * fuzz_socks5.c - the SOCKS5 head parsers (socks5.h) over one input: the
 * greeting, the RFC 1929 auth message and the request, each from where
 * the previous one ended (as the proxy feeds them). Besides memory errors
 * it checks what the proxy relies on: a taken length inside the input, a
 * prefix never judged differently from the whole (needs-more only), a
 * name without control bytes, a port in range.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/socks5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const uint8_t *p, size_t n)
{
    struct socks5_request r;
    int k = socks5_parse_request(p, n, &r);
    if (k > 0) {
        if ((size_t)k > n || r.port < 0 || r.port > 65535)
            abort();
        if (r.kind != HOST_NAME && r.kind != HOST_IPV4 && r.kind != HOST_IPV6)
            abort();
        for (const char *h = r.host; *h; h++)
            if ((unsigned char)*h < 0x21 || (unsigned char)*h >= 0x7f)
                abort();
        /* Every proper prefix needs more. */
        for (size_t i = 0; i < (size_t)k; i++) {
            struct socks5_request q;
            if (socks5_parse_request(p, i, &q) != 0)
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A heap copy of exactly size bytes so that ASan sees any overread. */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    struct socks5_greeting g;
    int k = socks5_parse_greeting(buf, size, &g);
    size_t off = k > 0 ? (size_t)k : 0;
    if (off > size)
        abort();
    if (k > 0 && g.userpass) {
        struct socks5_auth a;
        int m = socks5_parse_auth(buf + off, size - off, &a);
        if (m > 0) {
            if (off + (size_t)m > size || a.user_len == 0 || a.pass_len == 0 ||
                a.user < buf + off || a.pass + a.pass_len > buf + off + m)
                abort();
            off += (size_t)m;
        }
    }
    check_request(buf + off, size - off);
    check_request(buf, size);
    free(buf);
    return 0;
}
