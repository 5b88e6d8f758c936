/*
 * gen_corpus.c - writes the seed corpus of the fuzz targets:
 * <dir>/<target>/<name>. Run by `make fuzz-corpus`; the output is committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hello_builder.h"

static const char *root;

static void put(const char *target, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, target);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

static void text(const char *target, const char *name, const char *s)
{
    put(target, name, s, strlen(s));
}

/* Response and chunked seeds carry their control bytes first. */
static void prefixed(const char *target, const char *name, const char *pre,
                     size_t pn, const char *s)
{
    char buf[4096];
    memcpy(buf, pre, pn);
    memcpy(buf + pn, s, strlen(s));
    put(target, name, buf, pn + strlen(s));
}

int main(int argc, char **argv)
{
    root = argc > 1 ? argv[1] : "fuzz/corpus";
    mkdir(root, 0755);

    text("fuzz_request", "get",
         "GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n"
         "Accept: */*\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\n"
         "Proxy-Authorization: Basic eA==\r\n\r\n");
    text("fuzz_request", "connect",
         "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    text("fuzz_request", "connect6",
         "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n");
    text("fuzz_request", "post_chunked",
         "POST http://127.0.0.1:8080/up HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
         "Transfer-Encoding: chunked\r\nTE: trailers\r\n\r\n5\r\nhello\r\n");
    text("fuzz_request", "post_length",
         "POST http://example.net/ HTTP/1.0\r\nContent-Length: 3\r\n"
         "Connection: keep-alive\r\n\r\nabc");
    text("fuzz_request", "cl_te",
         "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
         "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    text("fuzz_request", "te_not_exact",
         "POST http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
         "Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    text("fuzz_request", "fold",
         "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX: a\r\n"
         " b\r\n\r\n");
    text("fuzz_request", "userinfo",
         "GET http://u:p@example.com:0/ HTTP/1.1\r\nHost: example.com\r\n\r\n");
    text("fuzz_request", "upgrade",
         "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n"
         "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");

    prefixed("fuzz_response", "ok", "\0", 1,
             "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    prefixed("fuzz_response", "chunked", "\0", 1,
             "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
             "Connection: keep-alive\r\n\r\n");
    prefixed("fuzz_response", "head", "\1", 1,
             "HTTP/1.0 304 Not Modified\r\nContent-Length: 9\r\n\r\n");
    prefixed("fuzz_response", "continue", "\0", 1,
             "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
    prefixed("fuzz_response", "close", "\2", 1,
             "HTTP/1.1 200 OK\r\nConnection: close\r\nX: y\r\n\r\n");

    prefixed("fuzz_chunked", "simple", "\0\7", 2, "5\r\nhello\r\n0\r\n\r\n");
    prefixed("fuzz_chunked", "ext_trailer", "\0\x15", 2,
             "a;x=\"y\"\r\n0123456789\r\n1\r\nz\r\n0\r\nX-T: 1\r\n\r\nNEXT");
    prefixed("fuzz_chunked", "bad", "\0\1", 2, "5\r\nhello\n0\r\n\r\n");

    static uint8_t h[40000];
    struct hello_opts o = {.sni = "example.com"};
    put("fuzz_tlshello", "sni", h, build_hello(&o, h, sizeof h));
    o.record_size = 17;
    put("fuzz_tlshello", "sni_records", h, build_hello(&o, h, sizeof h));
    struct hello_opts none = {0};
    put("fuzz_tlshello", "no_sni", h, build_hello(&none, h, sizeof h));
    none.no_extensions = true;
    put("fuzz_tlshello", "no_ext", h, build_hello(&none, h, sizeof h));
    struct hello_opts two = {.sni = "example.com", .sni2 = "example.net"};
    put("fuzz_tlshello", "two_names", h, build_hello(&two, h, sizeof h));
    struct hello_opts dup = {.sni = "example.com", .dup_sni_ext = true};
    put("fuzz_tlshello", "dup_ext", h, build_hello(&dup, h, sizeof h));
    struct hello_opts pad = {
        .sni = "a.example.net", .pad = 600, .record_size = 300};
    put("fuzz_tlshello", "padded", h, build_hello(&pad, h, sizeof h));
    text("fuzz_tlshello", "http", "GET / HTTP/1.1\r\n\r\n");
    /* SOCKS5: greeting (+ RFC 1929 auth) + request. */
    static const char s_name[] = "\5\1\0\5\1\0\3\22pinned.example.com\1\273";
    put("fuzz_socks5", "connect_name", s_name, sizeof s_name - 1);
    static const char s_v4[] = "\5\1\0\5\1\0\1\177\0\0\1\0\120";
    put("fuzz_socks5", "connect_v4", s_v4, sizeof s_v4 - 1);
    static const char s_v6[] = "\5\1\0\5\1\0\4\0\0\0\0\0\0\0\0\0\0\0"
                               "\0\0\0\0\1\0\120";
    put("fuzz_socks5", "connect_v6", s_v6, sizeof s_v6 - 1);
    static const char s_auth[] = "\5\2\0\2\1\11isolation\6secret"
                                 "\5\1\0\3\13example.com\0\26";
    put("fuzz_socks5", "auth_connect", s_auth, sizeof s_auth - 1);
    static const char s_bind[] = "\5\1\0\5\2\0\1\177\0\0\1\0\120";
    put("fuzz_socks5", "bind", s_bind, sizeof s_bind - 1);
    static const char s_nul[] = "\5\1\0\5\1\0\3\3a\0b\0\120";
    put("fuzz_socks5", "name_nul", s_nul, sizeof s_nul - 1);
    return 0;
}
