/*
 * test_tlshello.c - tls_hello_sni on real ClientHello bytes: one record,
 * many records, every split point, no SNI, non-TLS, and broken lengths.
 */
#include <stdio.h>
#include <string.h>

#include "hello_builder.h"
#include "runner.h"
#include "wire/tlshello.h"

static uint8_t H[40000];
static char name[256];

static enum tls_sni sni(const uint8_t *b, size_t n)
{
    memset(name, 'Z', sizeof name);
    return tls_hello_sni(b, n, name, sizeof name);
}

/* Every prefix must ask for more; the whole gives want. */
static void expect_whole(const uint8_t *b, size_t n, enum tls_sni want,
                         int line)
{
    int bad = -1;
    for (size_t k = 0; k < n && bad < 0; k++) {
        if (sni(b, k) != TLS_SNI_NEED_MORE)
            bad = (int)k;
    }
    CHECKM(bad < 0, "line %d: prefix %d is not NEED_MORE", line, bad);
    enum tls_sni got = sni(b, n);
    CHECKM(got == want, "line %d: got %d want %d", line, got, want);
}

static void found(void)
{
    struct hello_opts o = {.sni = "example.com"};
    size_t n = build_hello(&o, H, sizeof H);
    expect_whole(H, n, TLS_SNI_FOUND, __LINE__);
    CHECK(strcmp(name, "example.com") == 0);

    /* Bytes after the hello (the next record) do not matter. */
    memcpy(H + n, "\x17\x03\x03\x00\x01X", 6);
    CHECK(sni(H, n + 6) == TLS_SNI_FOUND && strcmp(name, "example.com") == 0);

    /* The name comes back unchanged: the caller normalizes it. */
    o.sni = "Example.COM.";
    n = build_hello(&o, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_FOUND && strcmp(name, "Example.COM.") == 0);

    /* Across records of every small size, each prefix incomplete. */
    o.sni = "a.example.net";
    size_t sizes[] = {1, 2, 3, 5, 7, 13, 64, 100, 200};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        o.record_size = sizes[i];
        n = build_hello(&o, H, sizeof H);
        expect_whole(H, n, TLS_SNI_FOUND, __LINE__);
        CHECKM(strcmp(name, "a.example.net") == 0, "records of %zu", sizes[i]);
    }
    o.record_size = 0;

    /* Record versions 3.0 to 3.4 all frame a hello. */
    o.record_minor = 3;
    n = build_hello(&o, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_FOUND);
    o.record_minor = 0;

    /* A large hello (padding) up to the limit is fine. */
    o.pad = 12000;
    o.record_size = 4000;
    n = build_hello(&o, H, sizeof H);
    CHECK(n <= TLS_HELLO_MAX);
    expect_whole(H, n, TLS_SNI_FOUND, __LINE__);

    /* Longest legal name that fits: namecap - 1 bytes. */
    char longname[256];
    memset(longname, 'a', 255);
    longname[255] = '\0';
    struct hello_opts ol = {.sni = longname};
    n = build_hello(&ol, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_FOUND && strlen(name) == 255);
    char small[8];
    CHECK(tls_hello_sni(H, n, small, sizeof small) == TLS_SNI_MALFORMED);
    /* A session id of 0 bytes. */
    struct hello_opts os = {.sni = "example.com", .sid_len = -1};
    n = build_hello(&os, H, sizeof H);
    expect_whole(H, n, TLS_SNI_FOUND, __LINE__);
}

static void absent(void)
{
    struct hello_opts o = {0};
    size_t n = build_hello(&o, H, sizeof H);
    expect_whole(H, n, TLS_SNI_ABSENT, __LINE__);
    o.no_extensions = true;
    n = build_hello(&o, H, sizeof H);
    expect_whole(H, n, TLS_SNI_ABSENT, __LINE__);
    o.record_size = 3;
    n = build_hello(&o, H, sizeof H);
    expect_whole(H, n, TLS_SNI_ABSENT, __LINE__);
}

static void not_tls(void)
{
    const char *texts[] = {"GET / HTTP/1.1\r\n",
                           "SSH-2.0-OpenSSH_9.2\r\n",
                           "\x17\x03\x03\x00\x05hello",
                           "\x80\x2e\x01\x03\x01",
                           "\x16\x02\x00",
                           "\x16\x16"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        CHECKM(sni((const uint8_t *)texts[i], strlen(texts[i])) ==
                   TLS_SNI_NOT_TLS,
               "%zu", i);
    CHECK(sni((const uint8_t *)"", 0) == TLS_SNI_NEED_MORE);
    CHECK(sni((const uint8_t *)"\x16", 1) == TLS_SNI_NEED_MORE);
    CHECK(sni((const uint8_t *)"\x16\x03", 2) == TLS_SNI_NEED_MORE);
}

/* Offsets in a one-record hello built with sid_len 32 and our suites. */
enum {
    OFF_HS_LEN = 6,
    OFF_SID_LEN = 43,
    OFF_CIPHERS_LEN = 76,
    OFF_COMP_LEN = 88,
    OFF_EXT_TOTAL = 90,
    OFF_SNI_EXT_LEN = 103,
    OFF_SNI_LIST = 105,
    OFF_NAME_LEN = 108,
    OFF_NAME = 110,
};

static size_t base(void)
{
    struct hello_opts o = {.sni = "example.com"};
    return build_hello(&o, H, sizeof H);
}

static void malformed(void)
{
    size_t n = base();
    CHECK(H[OFF_NAME] == 'e' && H[OFF_NAME_LEN + 1] == 11);
    CHECK(sni(H, n) == TLS_SNI_FOUND);

    struct {
        size_t off;
        int delta;
    } edits[] = {
        {OFF_HS_LEN + 2, -1},     {OFF_SID_LEN, 1},
        {OFF_SID_LEN, -1},        {OFF_CIPHERS_LEN + 1, 1},
        {OFF_CIPHERS_LEN + 1, 2}, {OFF_CIPHERS_LEN + 1, -2},
        {OFF_COMP_LEN, 1},        {OFF_COMP_LEN, -1},
        {OFF_EXT_TOTAL + 1, 1},   {OFF_EXT_TOTAL + 1, -1},
        {OFF_SNI_EXT_LEN + 1, 1}, {OFF_SNI_EXT_LEN + 1, -1},
        {OFF_SNI_LIST + 1, 1},    {OFF_SNI_LIST + 1, -1},
        {OFF_NAME_LEN + 1, 1},    {OFF_NAME_LEN + 1, -1},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        n = base();
        H[edits[i].off] = (uint8_t)(H[edits[i].off] + edits[i].delta);
        enum tls_sni got = sni(H, n);
        CHECKM(got == TLS_SNI_MALFORMED, "edit %zu (offset %zu %+d) gave %d", i,
               edits[i].off, edits[i].delta, got);
    }

    n = base();
    H[OFF_SID_LEN] = 33; /* over 32 */
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    n = base();
    H[5] = 2; /* ServerHello */
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    n = base();
    H[3] = 0, H[4] = 0; /* empty record */
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    n = base();
    H[3] = 0x40, H[4] = 0x01; /* record over 2^14 */
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    n = base();
    H[OFF_NAME + 3] = 0; /* NUL inside the name */
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    /* Two server_name extensions, or two host_names in one. */
    struct hello_opts o = {.sni = "example.com", .dup_sni_ext = true};
    n = build_hello(&o, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
    struct hello_opts o2 = {.sni = "example.com", .sni2 = "example.net"};
    n = build_hello(&o2, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
    /* An empty name. */
    struct hello_opts o3 = {.sni = ""};
    n = build_hello(&o3, H, sizeof H);
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);

    /* The second record is not a handshake record. */
    struct hello_opts o4 = {.sni = "example.com", .record_size = 50};
    n = build_hello(&o4, H, sizeof H);
    H[55] = 23;
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
    CHECK(sni(H, 56) == TLS_SNI_MALFORMED);
    n = build_hello(&o4, H, sizeof H);
    H[56] = 2;
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
    CHECK(sni(H, 57) == TLS_SNI_MALFORMED);

    /* Over TLS_HELLO_MAX: MALFORMED, and never NEED_MORE at the limit. */
    struct hello_opts big = {
        .sni = "example.com", .pad = 17000, .record_size = 8000};
    n = build_hello(&big, H, sizeof H);
    CHECK(n > TLS_HELLO_MAX);
    CHECK(sni(H, TLS_HELLO_MAX) == TLS_SNI_MALFORMED);
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
    /* Just over in records: the total with record headers counts. */
    struct hello_opts edge = {
        .sni = "example.com", .pad = 16000, .record_size = 100};
    n = build_hello(&edge, H, sizeof H);
    CHECK(n > TLS_HELLO_MAX);
    CHECK(sni(H, TLS_HELLO_MAX) == TLS_SNI_MALFORMED);
    /* A hello that claims less than its fields need: MALFORMED at once,
     * not a wait for bytes past its end. */
    n = base();
    H[OFF_HS_LEN] = 0, H[OFF_HS_LEN + 1] = 0, H[OFF_HS_LEN + 2] = 45;
    CHECK(sni(H, OFF_SID_LEN + 1) == TLS_SNI_MALFORMED);
    /* A hello whose length field claims more than the limit. */
    n = base();
    H[OFF_HS_LEN] = 0x01;
    CHECK(sni(H, n) == TLS_SNI_MALFORMED);
}

/* Hellos captured from `openssl s_client` (OpenSSL 3.0, TLS 1.3 with
 * key_share, supported_versions, and so on): what a real client sends. */
static size_t load(const char *path, uint8_t *out, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(out, 1, cap, f);
    fclose(f);
    return n;
}

static void captured(void)
{
    size_t n = load("tests/c/fixtures/openssl_sni.bin", H, sizeof H);
    CHECKM(n > 0, "tests/c/fixtures/openssl_sni.bin (run from the top)");
    expect_whole(H, n, TLS_SNI_FOUND, __LINE__);
    CHECK(strcmp(name, "Example.COM.") == 0);
    n = load("tests/c/fixtures/openssl_nosni.bin", H, sizeof H);
    CHECK(n > 0);
    expect_whole(H, n, TLS_SNI_ABSENT, __LINE__);
}

void test_tlshello(void)
{
    captured();
    found();
    absent();
    not_tls();
    malformed();
}
