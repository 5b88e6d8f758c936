/*
 * test_chunked.c - http_chunked_feed: whole bodies, every split point,
 * byte-at-a-time, what follows the body, and malformed bodies.
 */
#include <string.h>

#include "wire/httpparse.h"
#include "runner.h"

/* Feeds s in pieces of the given sizes (0-terminated list, the rest at
 * once at the end); returns the bytes that belonged to the body, -1 on a
 * refusal, -2 when the body did not end. */
static long feed_split(const char *s, size_t n, size_t split)
{
    struct http_chunked c;
    bool done = false;
    http_chunked_init(&c);
    size_t used = 0;
    size_t parts[2] = {split, n - split};
    for (int p = 0; p < 2 && !done; p++) {
        ssize_t r = http_chunked_feed(&c, s + used, parts[p], &done);
        if (r < 0)
            return -1;
        if ((size_t)r != parts[p] && !done)
            return -3; /* stopped early without ending */
        used += (size_t)r;
        if (done)
            break;
    }
    return done ? (long)used : -2;
}

static long feed_bytes(const char *s, size_t n)
{
    struct http_chunked c;
    bool done = false;
    http_chunked_init(&c);
    for (size_t i = 0; i < n; i++) {
        ssize_t r = http_chunked_feed(&c, s + i, 1, &done);
        if (r < 0)
            return -1;
        if (done)
            return r == 1 ? (long)i + 1 : -3;
        if (r != 1)
            return -3;
    }
    return -2;
}

/* The body's length in s (the rest is the next message), or -1/-2. */
static void expect_body(const char *s, size_t n, long want, int line)
{
    long whole = feed_split(s, n, n);
    CHECKM(whole == want, "line %d: whole gave %ld, want %ld", line, whole,
           want);
    int bad = -1;
    for (size_t k = 0; k <= n && bad < 0; k++) {
        if (feed_split(s, n, k) != want)
            bad = (int)k;
    }
    CHECKM(bad < 0, "line %d: split at %d disagrees", line, bad);
    CHECKM(feed_bytes(s, n) == want, "line %d: byte at a time", line);
}

#define BODY(s, want) expect_body((s), sizeof(s) - 1, (want), __LINE__)

void test_chunked(void)
{
    BODY("0\r\n\r\n", 5);
    BODY("5\r\nhello\r\n0\r\n\r\n", 15);
    BODY("5\r\nhello\r\n0\r\n\r\nGET http://next/ HTTP/1.1\r\n", 15);
    BODY("A\r\n0123456789\r\n1;ext=\"v\"\r\nx\r\n00\r\n\r\n", 35);
    BODY("1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n", 37);
    BODY("1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\nZ",
         51);
    BODY("3\r\n\r\n\r\r\n0\r\n\r\n", 13); /* CR LF inside data is data */
    /* Incomplete. */
    BODY("5\r\nhello\r\n", -2);
    BODY("5\r\nhello\r\n0\r\n", -2);
    BODY("5\r\nhello\r\n0\r\nX: 1\r\n", -2);
    BODY("ffffffff\r\n", -2);
    /* Malformed. */
    BODY("\r\n", -1);
    BODY("x\r\n", -1);
    BODY(";x\r\n", -1);
    BODY(" 5\r\nhello\r\n0\r\n\r\n", -1);
    BODY("5 \r\nhello\r\n0\r\n\r\n", -1);
    BODY("+5\r\nhello\r\n0\r\n\r\n", -1);
    BODY("0x5\r\nhello\r\n0\r\n\r\n", -1);
    BODY("5\nhello\r\n0\r\n\r\n", -1);
    BODY("5\r\nhello\n0\r\n\r\n", -1);
    BODY("5\r\nhelloX\r\n0\r\n\r\n", -1);
    BODY("5\r\nhello\r\n0\r\n\n", -1);
    BODY("5\r\nhello\r\n0\n\r\n", -1);
    BODY("5\r\nhello\r\n0\r\n X: 1\r\n\r\n", -1);
    BODY("5\r\nhello\r\n0\r\nX: 1\n\r\n", -1);
    BODY("5\r\nhello\r\n0\r\nX: \x01\r\n\r\n", -1);
    BODY("5\r\rhello\r\n0\r\n\r\n", -1);
    BODY("1;a\x01\r\nx\r\n0\r\n\r\n", -1);
    BODY("10000000000000000\r\n", -1); /* 2^64: overflow */
    BODY("1000000000000000\r\n", -1);  /* 2^60: over the cap */
    static const char nul[] = "5\r\nhe\0lo\r\n0\r\n\r\n"; /* NUL in data: ok */
    expect_body(nul, sizeof nul - 1, 15, __LINE__);

    /* An over-long size line or trailer line is refused. */
    static char longline[5000 + 16];
    memset(longline, 'a', sizeof longline);
    memcpy(longline, "1;", 2);
    CHECK(feed_split(longline, sizeof longline, sizeof longline) == -1);
    static char longtrailer[5000 + 16];
    memset(longtrailer, 'a', sizeof longtrailer);
    memcpy(longtrailer, "0\r\nX:", 5);
    CHECK(feed_split(longtrailer, sizeof longtrailer, sizeof longtrailer) ==
          -1);
    /* Leading zeros are many, but the line stays short: fine. */
    BODY("0000000000000000000000001\r\nx\r\n0\r\n\r\n", 35);

    /* After done, nothing more is consumed; after -1, it stays -1. */
    struct http_chunked c;
    bool done = false;
    http_chunked_init(&c);
    CHECK(http_chunked_feed(&c, "0\r\n\r\n", 5, &done) == 5 && done);
    done = false;
    CHECK(http_chunked_feed(&c, "abc", 3, &done) == 0 && done);
    http_chunked_init(&c);
    CHECK(http_chunked_feed(&c, "z", 1, &done) == -1);
    CHECK(http_chunked_feed(&c, "0\r\n\r\n", 5, &done) == -1);
    /* A big chunk streams through in pieces. */
    http_chunked_init(&c);
    CHECK(http_chunked_feed(&c, "100000\r\n", 8, &done) == 8 && !done);
    static char data[4096];
    size_t total = 0;
    while (total < 0x100000) {
        ssize_t r = http_chunked_feed(&c, data, sizeof data, &done);
        if (r != (ssize_t)sizeof data)
            break;
        total += sizeof data;
    }
    CHECK(total == 0x100000 && !done);
    CHECK(http_chunked_feed(&c, "\r\n0\r\n\r\nNEXT", 11, &done) == 7 && done);
}
