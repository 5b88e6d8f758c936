/* test_response.c - http_parse_response: status line, framing, reuse. */
#include <string.h>

#include "wire/httpparse.h"
#include "runner.h"

static struct http_response S;

static int parse_resp(const char *s, bool head)
{
    const char *why = NULL;
    size_t n = strlen(s);
    int whole = http_parse_response(s, n, 65536, head, &S, &why);
    for (size_t k = 0; k < n; k++) {
        struct http_response tmp;
        int r = http_parse_response(s, k, 65536, head, &tmp, &why);
        if (!(r == 0 || (r == whole && (whole < 0 || k >= (size_t)whole)))) {
            CHECKM(0, "prefix %zu of [%s] gave %d, whole %d", k, s, r, whole);
            break;
        }
    }
    return http_parse_response(s, n, 65536, head, &S, &why);
}

void test_response(void)
{
    const char *ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    CHECK(parse_resp(ok, false) == (int)strlen(ok) - 5);
    CHECK(S.status == 200 && S.body == BODY_LENGTH && S.content_length == 5 &&
          S.keep_alive && S.version_minor == 1);

    CHECK(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_CHUNKED && S.keep_alive);

    CHECK(parse_resp("HTTP/1.1 200 OK\r\n\r\n", false) > 0);
    CHECK(S.body == BODY_UNTIL_CLOSE && !S.keep_alive);

    CHECK(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                     "Connection: close\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_LENGTH && !S.keep_alive);

    CHECK(parse_resp("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n", false) >
          0);
    CHECK(S.version_minor == 0 && !S.keep_alive);
    CHECK(parse_resp("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n"
                     "Connection: keep-alive\r\n\r\n",
                     false) > 0);
    CHECK(S.keep_alive);

    /* No body: HEAD, 1xx, 204, 304, whatever the headers say. */
    CHECK(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true) > 0);
    CHECK(S.body == BODY_NONE && S.keep_alive);
    CHECK(parse_resp("HTTP/1.1 204 No Content\r\n\r\n", false) > 0);
    CHECK(S.body == BODY_NONE && S.keep_alive);
    CHECK(parse_resp("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_NONE);
    CHECK(parse_resp("HTTP/1.1 100 Continue\r\n\r\n", false) > 0);
    CHECK(S.status == 100 && S.body == BODY_NONE);
    CHECK(parse_resp("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false) > 0);
    CHECK(S.status == 200 && S.body == BODY_LENGTH && S.content_length == 0);
    CHECK(parse_resp("HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", false) > 0);

    /* Transfer-Encoding wins over Content-Length, and ends reuse. */
    CHECK(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_CHUNKED && !S.keep_alive);
    CHECK(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_UNTIL_CLOSE && !S.keep_alive);
    CHECK(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_UNTIL_CLOSE && !S.keep_alive);
    /* Identical repeated lengths are accepted for responses. */
    CHECK(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
                     "Content-Length: 5\r\n\r\n",
                     false) > 0);
    CHECK(S.body == BODY_LENGTH && S.content_length == 5);

    /* Malformed: -502. */
    const char *bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        "HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\n\r\n",
        "HTTP/1.1 099 OK\r\n\r\n",
        "HTTP/1.1 600 OK\r\n\r\n",
        "HTTP/1.1 abc OK\r\n\r\n",
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1  200 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "HTTP/1.1 200 O\x01K\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
        "\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECKM(parse_resp(bad[i], false) == -502, "%s", bad[i]);
    static const char nul[] = "HTTP/1.1 200 OK\r\nX: \0\r\n\r\n";
    const char *why;
    CHECK(http_parse_response(nul, sizeof nul - 1, 65536, false, &S, &why) ==
          -502);

    /* Head size limit. */
    const char *big = "HTTP/1.1 200 OK\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    size_t n = strlen(big);
    CHECK(http_parse_response(big, n, n, false, &S, &why) == (int)n);
    CHECK(http_parse_response(big, n, n - 1, false, &S, &why) == -502);
    CHECK(http_parse_response(big, n - 2, n - 1, false, &S, &why) == 0);
}
