/* test_upstream.c - http_write_upstream_head. */
#include <string.h>

#include "wire/httpparse.h"
#include "runner.h"

static char out[8192];

static size_t write_for(const char *head, bool keep, struct http_request *req)
{
    const char *why = NULL;
    int r = http_parse_request(head, strlen(head), 65536, req, &why);
    CHECKM(r > 0, "parse %s: %s", head, why ? why : "");
    if (r <= 0)
        return 0;
    size_t n = http_write_upstream_head(req, keep, out, sizeof out - 1);
    out[n < sizeof out ? n : sizeof out - 1] = '\0';
    return n;
}

#define EXPECT_HEAD(head, keep, want)                                          \
    do {                                                                       \
        struct http_request req_;                                              \
        size_t n_ = write_for((head), (keep), &req_);                          \
        CHECKM(n_ == strlen(want) && strcmp(out, (want)) == 0,                 \
               "wrote [%s] want [%s]", out, (want));                           \
    } while (0)

void test_upstream(void)
{
    EXPECT_HEAD("GET http://Example.com./a?b HTTP/1.1\r\nHost: example.com\r\n"
                "Accept: */*\r\nProxy-Authorization: Basic eA==\r\n"
                "Connection: keep-alive, X-Drop\r\nX-Drop: 1\r\n\r\n",
                true,
                "GET /a?b HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n"
                "Connection: keep-alive\r\n\r\n");
    EXPECT_HEAD("GET http://example.com:8080 HTTP/1.0\r\n\r\n", false,
                "GET / HTTP/1.0\r\nHost: example.com:8080\r\n"
                "Connection: close\r\n\r\n");
    EXPECT_HEAD("GET http://example.com/k HTTP/1.0\r\n"
                "Connection: keep-alive\r\n\r\n",
                true,
                "GET /k HTTP/1.0\r\nHost: example.com\r\n"
                "Connection: keep-alive\r\n\r\n");
    EXPECT_HEAD("POST http://[::1]:81/p HTTP/1.1\r\nHost: [::1]:81\r\n"
                "Content-Length: 5\r\nX-A:  v \r\n\r\n",
                true,
                "POST /p HTTP/1.1\r\nHost: [::1]:81\r\nX-A: v\r\n"
                "Content-Length: 5\r\nConnection: keep-alive\r\n\r\n");
    EXPECT_HEAD("POST http://127.0.0.1/p HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Transfer-Encoding: chunked\r\nTE: trailers\r\n\r\n",
                false,
                "POST /p HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    EXPECT_HEAD("PUT http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
                "Content-Length: 0\r\n\r\n",
                true,
                "PUT / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n"
                "Connection: keep-alive\r\n\r\n");

    /* Too small a buffer: the needed length, and no write past cap. */
    struct http_request req;
    const char *h = "GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n"
                    "\r\n";
    const char *why;
    CHECK(http_parse_request(h, strlen(h), 65536, &req, &why) > 0);
    size_t need = http_write_upstream_head(&req, true, out, sizeof out);
    for (size_t cap = 0; cap < need; cap++) {
        memset(out, 'Z', sizeof out);
        size_t got = http_write_upstream_head(&req, true, out, cap);
        int clean = 1;
        for (size_t i = cap; i < sizeof out; i++)
            clean &= out[i] == 'Z';
        CHECKM(got == need && clean, "cap %zu", cap);
    }
}
