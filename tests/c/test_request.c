/*
 * test_request.c - http_parse_request: every refusal the proxy promises,
 * the header filtering, keep-alive, and that every prefix of a head is
 * either incomplete or refused with the status the whole head gets.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runner.h"
#include "wire/httpparse.h"

static struct http_request R;
static const char *why;

static int parse_n(const char *s, size_t n, size_t max)
{
    why = NULL;
    return http_parse_request(s, n, max, &R, &why);
}

/*
 * Parses s whole and at every prefix; the prefixes must give 0 or the same
 * refusal, and a refusal must come with a reason. Returns the result for
 * the whole input (R filled from it).
 */
static int parse_max(const char *s, size_t n, size_t max, int line)
{
    int whole = parse_n(s, n, max);
    int bad_prefix = -1;
    for (size_t k = 0; k < n && bad_prefix < 0; k++) {
        struct http_request tmp;
        const char *w = NULL;
        int r = http_parse_request(s, k, max, &tmp, &w);
        if (!(r == 0 || (r == whole && (whole < 0 || k >= (size_t)whole))) ||
            (r < 0 && !w))
            bad_prefix = (int)k;
    }
    CHECKM(bad_prefix < 0, "line %d: prefix of %d bytes disagrees", line,
           bad_prefix);
    if (whole < 0)
        CHECKM(why != NULL, "line %d: refusal without a reason", line);
    return parse_n(s, n, max);
}

#define PARSE(s) parse_max((s), strlen(s), 65536, __LINE__)
#define EXPECT(s, status)                                                      \
    do {                                                                       \
        int r_ = PARSE(s);                                                     \
        CHECKM(r_ == (status), "got %d (%s) for %s", r_, why ? why : "", (s)); \
    } while (0)

static int has_header(const char *name)
{
    for (size_t i = 0; i < R.nheaders; i++) {
        if (R.headers[i].name.n == strlen(name) &&
            strncasecmp(R.headers[i].name.p, name, strlen(name)) == 0)
            return 1;
    }
    return 0;
}

static int span_is(struct http_span s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static void valid_requests(void)
{
    const char *get = "GET http://Example.COM./a/b?q=1 HTTP/1.1\r\n"
                      "Host: example.com\r\nAccept: */*\r\n\r\nBODY";
    int r = PARSE(get);
    CHECKM(r == (int)strlen(get) - 4, "forward GET: %d %s", r, why);
    CHECK(!R.is_connect);
    CHECK(span_is(R.method, "GET"));
    CHECK(strcmp(R.host, "example.com") == 0);
    CHECK(R.host_kind == HOST_NAME);
    CHECK(R.port == 80);
    CHECK(span_is(R.path, "/a/b?q=1"));
    CHECK(R.version_minor == 1);
    CHECK(R.keep_alive);
    CHECK(R.body == BODY_NONE);
    CHECK(R.nheaders == 1 && span_is(R.headers[0].name, "Accept") &&
          span_is(R.headers[0].value, "*/*"));
    CHECK(R.head_len == strlen(get) - 4);

    r = PARSE("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
              "\r\n");
    CHECK(r > 0 && R.is_connect && R.port == 443 &&
          strcmp(R.host, "example.com") == 0 && R.body == BODY_NONE);

    r = PARSE(
        "CONNECT 127.0.0.1:8443 HTTP/1.1\r\nHost: 127.0.0.1:8443\r\n\r\n");
    CHECK(r > 0 && R.host_kind == HOST_IPV4 && R.port == 8443 &&
          R.addr.family == 4 && R.addr.bytes[0] == 127);

    r = PARSE("CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n");
    CHECK(r > 0 && R.host_kind == HOST_IPV6 && strcmp(R.host, "::1") == 0);

    /* A CONNECT Host without a port only has to name the same host. */
    EXPECT("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n",
           (int)strlen("CONNECT example.com:443 HTTP/1.1\r\nHost: "
                       "example.com\r\n\r\n"));

    r = PARSE(
        "GET http://example.com HTTP/1.1\r\nHost: example.com:80\r\n\r\n");
    CHECK(r > 0 && span_is(R.path, "/") && R.port == 80);

    r = PARSE("GET http://example.com:8080/x HTTP/1.0\r\n\r\n");
    CHECK(r > 0 && R.port == 8080 && R.version_minor == 0 && !R.keep_alive);

    r = PARSE("GET http://example.com/ HTTP/1.0\r\nConnection: Keep-Alive\r\n"
              "\r\n");
    CHECK(r > 0 && R.keep_alive);

    r = PARSE("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Connection: foo, close\r\n\r\n");
    CHECK(r > 0 && !R.keep_alive);

    r = PARSE("POST HTTP://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
              "Content-Length: 12\r\n\r\n");
    CHECK(r > 0 && R.body == BODY_LENGTH && R.content_length == 12);

    r = PARSE("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
              "Content-Length: 0\r\n\r\n");
    CHECK(r > 0 && R.body == BODY_LENGTH && R.content_length == 0);

    /* Transfer-Encoding: exactly "chunked", after one space or none; the
     * header's name is case-insensitive like every name. */
    r = PARSE("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
              "Transfer-Encoding: chunked\r\n\r\n");
    CHECK(r > 0 && R.body == BODY_CHUNKED);
    r = PARSE("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\n"
              "transfer-encoding:chunked\r\n\r\n");
    CHECK(r > 0 && R.body == BODY_CHUNKED);

    /* Header values are trimmed; an empty value is kept. */
    r = PARSE("GET http://example.com/ HTTP/1.1\r\nHost:example.com\r\n"
              "X-A: \t v a l \t\r\nX-Empty:\r\n\r\n");
    CHECK(r > 0 && R.nheaders == 2 && span_is(R.headers[0].value, "v a l") &&
          span_is(R.headers[1].value, ""));

    /* obs-text is allowed in values. */
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X-U: caf\xc3\xa9\r\n\r\n",
           (int)strlen("GET http://example.com/ HTTP/1.1\r\nHost: "
                       "example.com\r\nX-U: caf\xc3\xa9\r\n\r\n"));

    /* Incomplete heads. */
    CHECK(parse_n("", 0, 65536) == 0);
    CHECK(parse_n("GET http://example.com/ HTTP/1.1\r", 33, 65536) == 0);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n", 0);
}

static void hop_by_hop(void)
{
    int r = PARSE("GET http://example.com/ HTTP/1.1\r\n"
                  "Host: example.com\r\n"
                  "Connection: keep-alive, X-Secret, x-other\r\n"
                  "Keep-Alive: timeout=5\r\n"
                  "Proxy-Connection: keep-alive\r\n"
                  "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                  "Proxy-Authenticate: Basic\r\n"
                  "TE: trailers\r\n"
                  "Trailer: X-T\r\n"
                  "X-Secret: 1\r\n"
                  "X-Other: 2\r\n"
                  "Connection: X-Third\r\n"
                  "X-Third: 3\r\n"
                  "Accept: a\r\n"
                  "User-Agent: u\r\n"
                  "\r\n");
    CHECKM(r > 0, "hop-by-hop request: %d %s", r, why);
    CHECKM(R.nheaders == 2, "kept %zu headers", R.nheaders);
    CHECK(has_header("accept") && has_header("user-agent"));
    const char *gone[] = {"host",
                          "connection",
                          "keep-alive",
                          "proxy-connection",
                          "proxy-authorization",
                          "proxy-authenticate",
                          "te",
                          "trailer",
                          "x-secret",
                          "x-other",
                          "x-third",
                          "content-length",
                          "transfer-encoding"};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECKM(!has_header(gone[i]), "%s kept", gone[i]);
    /* Order is kept. */
    CHECK(span_is(R.headers[0].name, "Accept") &&
          span_is(R.headers[1].name, "User-Agent"));

    r = PARSE("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Transfer-Encoding: chunked\r\nContent-Type: x\r\n\r\n");
    CHECK(r > 0 && R.nheaders == 1 && has_header("content-type"));
    r = PARSE("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
              "Content-Length: 3\r\n\r\n");
    CHECK(r > 0 && R.nheaders == 0);
}

static void refusals(void)
{
    /* Targets. */
    EXPECT("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", -400);
    EXPECT("GET * HTTP/1.1\r\nHost: example.com\r\n\r\n", -400);
    EXPECT("GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
           -400);
    EXPECT("GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
           -400);
    EXPECT("GET http://user@example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
           -400);
    EXPECT("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com\\@evil.example.net/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example%2ecom/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://[fe80::1%25eth0]/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:0/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:65536/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:abc/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:080/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:-1/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com:+80/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http:///path HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://127.1/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://2130706433/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://0x7f000001/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://0177.0.0.1/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://1.2.3.04/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://::1/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://[example.com]/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://[::1/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://[::1]x/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://exa_mple..com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com?q HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/#frag HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/\x7f HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/\xff HTTP/1.1\r\n\r\n", -400);
    /* CONNECT targets. */
    EXPECT("CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n", -400);
    EXPECT("CONNECT example.com: HTTP/1.1\r\nHost: example.com\r\n\r\n", -400);
    EXPECT("CONNECT http://example.com:443/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT example.com:443/x HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT /example.com:443 HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT user@example.com:443 HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT example.com:0 HTTP/1.1\r\nHost: example.com:0\r\n\r\n",
           -400);
    EXPECT("CONNECT example.com:99999 HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", -400);
    EXPECT("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
           "Content-Length: 5\r\n\r\n",
           -400);
    EXPECT("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
           "Transfer-Encoding: chunked\r\n\r\n",
           -400);
    /* Request line shape and version. */
    EXPECT("GET  http://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/  HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1 \r\n\r\n", -400);
    EXPECT("GET\thttp://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT(" GET http://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("G(T http://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/ http/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.10\r\n\r\n", -400);
    EXPECT("GET http://example.com/\r\n\r\n", -400);
    EXPECT("\r\nGET http://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/2.0\r\n\r\n", -505);
    EXPECT("GET http://example.com/ HTTP/0.9\r\n\r\n", -505);
    EXPECT("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", -505);
    /* Host. */
    EXPECT("GET http://example.com/ HTTP/1.1\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Host: example.com\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: evil.example.net\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
           -400);
    EXPECT("GET http://example.com:8080/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
           -400);
    EXPECT("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:444\r\n\r\n",
           -400);
    EXPECT("CONNECT example.com:443 HTTP/1.1\r\nHost: example.net:443\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.0\r\nHost: example.net\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: \r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: u@example.com\r\n\r\n",
           -400);
    /* Framing. */
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: gzip, chunked\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: chunked, chunked\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: identity\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Transfer-Encoding: \"chunked\"\r\n\r\n",
           -400);
    /* "Exactly chunked": no other spelling, case, parameter or whitespace. */
    static const char *const te_refused[] = {
        "Chunked",
        "CHUNKED",
        "chunkeD",
        "chunked;a=b",
        "chunked ;",
        "chunked,",
        ", chunked",
        "chunked, identity",
        "identity, chunked",
        "chunk",
        "chunkedx",
        "x-chunked",
        "chunked ",
        "chunked\t",
        "\tchunked",
        "  chunked",
        " \tchunked",
        "chun ked",
        "",
        " ",
        "chunked\xc2\xa0",
        "\xef\xbb\xbf"
        "chunked",
        "chunked\x80",
    };
    for (size_t i = 0; i < sizeof te_refused / sizeof te_refused[0]; i++) {
        char head[256];
        snprintf(head, sizeof head,
                 "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
                 "Transfer-Encoding:%s%s\r\n\r\n",
                 te_refused[i][0] == ' ' || te_refused[i][0] == '\t' ? "" : " ",
                 te_refused[i]);
        int got = parse_max(head, strlen(head), 65536, __LINE__);
        CHECKM(got == -400, "Transfer-Encoding \"%s\": %d", te_refused[i], got);
    }
    EXPECT("POST http://example.com/ HTTP/1.0\r\n"
           "Transfer-Encoding: chunked\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 3\r\nContent-Length: 4\r\n\r\n",
           -400);
    /* Identical duplicates are refused too (docs/wire.md says why). */
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 3\r\nContent-Length: 3\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 3, 3\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: abc\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: -1\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: +1\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: \r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 99999999999999999999\r\n\r\n",
           -400);
    EXPECT("POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Content-Length: 0x10\r\n\r\n",
           -400);
    /* Bytes and lines. */
    static const char nul[] = "GET http://example.com/ HTTP/1.1\r\nHost: "
                              "example.com\r\nX: a\0b\r\n\r\n";
    CHECK(parse_max(nul, sizeof nul - 1, 65536, __LINE__) == -400);
    static const char nul_line[] = "GET http://exa\0mple.com/ HTTP/1.1\r\n\r\n";
    CHECK(parse_max(nul_line, sizeof nul_line - 1, 65536, __LINE__) == -400);
    EXPECT("GET http://example.com/ HTTP/1.1\nHost: example.com\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\r\n\r\n",
           -400);
    EXPECT(
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX: a\rb\r\n"
        "\r\n",
        -400);
    EXPECT("GET http://example.com/ HTTP/1.1\rHost: example.com\r\n\r\n", -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost : example.com\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost\t: example.com\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X-A: 1\r\n continued\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X-A: 1\r\n\tcontinued\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\n Host: example.com\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X(A): 1\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X\x80: 1\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           ": 1\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "NoColon\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X: a\x01z\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "X: a\x7fz\r\n\r\n",
           -400);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Connection: a b\r\n\r\n",
           -400);
    /* Upgrades are not relayed. */
    EXPECT("GET http://example.com/ws HTTP/1.1\r\nHost: example.com\r\n"
           "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
           -501);
    EXPECT("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
           "Upgrade: h2c\r\n\r\n",
           -501);
}

static void limits(void)
{
    size_t n = HTTP_MAX_REQUEST_LINE + 100;
    char *buf = malloc(n + 64);
    /* Request line of exactly the limit: accepted. */
    const char *pre = "GET http://example.com/";
    const char *post = " HTTP/1.0\r\n\r\n";
    size_t fill = HTTP_MAX_REQUEST_LINE - strlen(pre) - strlen(post) + 4;
    memcpy(buf, pre, strlen(pre));
    memset(buf + strlen(pre), 'a', fill);
    memcpy(buf + strlen(pre) + fill, post, strlen(post));
    size_t total = strlen(pre) + fill + strlen(post);
    CHECKM(parse_n(buf, total, 65536) == (int)total, "line at limit: %s", why);
    /* One byte longer: 414, already before the line ends. */
    memcpy(buf + strlen(pre), "a", 1);
    memset(buf + strlen(pre), 'a', fill + 1);
    memcpy(buf + strlen(pre) + fill + 1, post, strlen(post));
    CHECK(parse_n(buf, total + 1, 65536) == -414);
    CHECK(parse_max(buf, total + 1, 65536, __LINE__) == -414);
    memset(buf, 'a', n);
    memcpy(buf, "GET http://example.com/", 23);
    CHECK(parse_n(buf, n, 65536) == -414);
    CHECK(parse_n(buf, HTTP_MAX_REQUEST_LINE + 2, 65536) == -414);
    CHECK(parse_n(buf, HTTP_MAX_REQUEST_LINE + 1, 65536) == 0);
    /* A head limit below the line limit: a line that does not end within
     * the head limit is an oversized request line, 414 (not 431). */
    CHECK(parse_n(buf, n, 1024) == -414);
    CHECK(parse_max(buf, n, 1024, __LINE__) == -414);
    CHECK(parse_n(buf, 1024, 1024) == -414);
    CHECK(parse_n(buf, 1023, 1024) == 0);
    CHECK(parse_n(buf, 5000, 4096) == -414);
    /* Its CRLF must fit too: a line of max_head - 1 bytes and its CR. */
    buf[1023] = '\r';
    CHECK(parse_n(buf, 1024, 1024) == -414);
    buf[1023] = 'a';
    free(buf);

    /* Head over max_head: 431 as soon as max_head bytes have no end. */
    char head[4096];
    int k = snprintf(head, sizeof head,
                     "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
                     "X-Pad: %0300d\r\n\r\n",
                     0);
    CHECK(parse_n(head, (size_t)k, (size_t)k) == k);
    CHECK(parse_n(head, (size_t)k, (size_t)k - 1) == -431);
    CHECK(parse_max(head, (size_t)k, (size_t)k - 1, __LINE__) == -431);
    CHECK(parse_n(head, (size_t)k - 2, (size_t)k - 1) == 0);
    CHECK(parse_n(head, (size_t)k - 1, (size_t)k - 1) == -431);

    /* Too many header fields. */
    static char many[16384];
    size_t m = (size_t)snprintf(many, sizeof many,
                                "GET http://example.com/ HTTP/1.1\r\n"
                                "Host: example.com\r\n");
    for (int i = 0; i < HTTP_MAX_HEADERS - 1; i++)
        m += (size_t)snprintf(many + m, sizeof many - m, "X-%d: v\r\n", i);
    memcpy(many + m, "\r\n", 2);
    CHECKM(parse_n(many, m + 2, 65536) == (int)m + 2, "128 headers: %s", why);
    CHECK(R.nheaders == HTTP_MAX_HEADERS - 1);
    m += (size_t)snprintf(many + m, sizeof many - m, "X-last: v\r\n\r\n");
    CHECK(parse_n(many, m, 65536) == -431);
}

/* Every byte value in a header name and in a method: only tchars pass. */
static void token_chars(void)
{
    int wrong = 0;
    for (int c = 0; c < 256; c++) {
        int tchar = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') ||
                    (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
        char head[128];
        int n = snprintf(head, sizeof head,
                         "GET http://example.com/ HTTP/1.1\r\n"
                         "Host: example.com\r\nX%cY: v\r\n\r\n",
                         c ? c : '?');
        if (c == 0)
            head[n - 11] = '\0'; /* the byte after "X" */
        int r = parse_n(head, (size_t)n, 65536);
        /* "X:Y: v" is the header X with the value "Y: v". */
        if ((r > 0) != (tchar || c == ':'))
            wrong++;
        n = snprintf(head, sizeof head,
                     "G%cT http://example.com/ HTTP/1.1\r\n"
                     "Host: example.com\r\n\r\n",
                     c ? c : '?');
        if (c == 0)
            head[1] = '\0';
        r = parse_n(head, (size_t)n, 65536);
        /* ' ' splits the line into four parts: refused too. */
        if ((r > 0) != tchar)
            wrong++;
    }
    CHECKM(wrong == 0, "%d byte values judged wrongly", wrong);
}

/* http_parse_request_origin: an origin-form target is taken (for a
 * route) with any Host; the plain parser still refuses it; everything else
 * is as strict. */
static void origin_form(void)
{
    const char *h = "GET /anthropic/v1/messages?x=1 HTTP/1.1\r\nHost: "
                    "127.0.0.1:3128\r\nx-api-key: k\r\n\r\n";
    why = NULL;
    CHECK(http_parse_request(h, strlen(h), 65536, &R, &why) == -400);
    CHECK(http_parse_request_origin(h, strlen(h), 65536, &R, &why) ==
          (int)strlen(h));
    CHECK(R.origin_form);
    CHECK(R.path.n == strlen("/anthropic/v1/messages?x=1"));
    CHECK(R.host[0] == '\0' && R.port == 0);
    const char *absolute = "GET http://example.com/ HTTP/1.1\r\nHost: "
                           "example.com\r\n\r\n";
    CHECK(http_parse_request_origin(absolute, strlen(absolute), 65536, &R,
                                    &why) > 0);
    CHECK(!R.origin_form);
    static const char *const bad[] = {
        "GET /a#frag HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /a HTTP/1.1\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
        "Transfer-Encoding: chunked\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECKM(http_parse_request_origin(bad[i], strlen(bad[i]), 65536, &R,
                                         &why) == -400,
               "origin form accepted %s", bad[i]);
}

void test_request(void)
{
    origin_form();
    token_chars();
    valid_requests();
    hop_by_hop();
    refusals();
    limits();
}
