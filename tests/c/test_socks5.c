/*
 * test_socks5.c - the SOCKS5 head parsers: whole messages, every prefix
 * needing more, and the malformed ones the proxy must refuse.
 */
#include <string.h>

#include "runner.h"
#include "wire/socks5.h"

#define B(s) (const uint8_t *)(s), sizeof(s) - 1

static void greetings(void)
{
    struct socks5_greeting g;
    CHECK(socks5_parse_greeting(B("\5\1\0"), &g) == 3 && g.no_auth &&
          !g.userpass);
    CHECK(socks5_parse_greeting(B("\5\2\0\2"), &g) == 4 && g.no_auth &&
          g.userpass);
    CHECK(socks5_parse_greeting(B("\5\1\1"), &g) == 3 && !g.no_auth &&
          !g.userpass);
    CHECK(socks5_parse_greeting(B(""), &g) == 0);
    CHECK(socks5_parse_greeting(B("\5"), &g) == 0);
    CHECK(socks5_parse_greeting(B("\5\2\0"), &g) == 0);
    CHECK(socks5_parse_greeting(B("\4\1\0"), &g) == SOCKS5_E_VERSION);
    CHECK(socks5_parse_greeting(B("G"), &g) == SOCKS5_E_VERSION);
    CHECK(socks5_parse_greeting(B("\5\0"), &g) == SOCKS5_E_BAD);
}

static void auths(void)
{
    struct socks5_auth a;
    static const char m[] = "\1\11isolation\6secret";
    CHECK(socks5_parse_auth(B(m), &a) == (int)sizeof m - 1);
    CHECK(a.user_len == 9 && memcmp(a.user, "isolation", 9) == 0);
    CHECK(a.pass_len == 6 && memcmp(a.pass, "secret", 6) == 0);
    for (size_t i = 0; i < sizeof m - 1; i++)
        CHECKM(socks5_parse_auth((const uint8_t *)m, i, &a) == 0, "%zu", i);
    CHECK(socks5_parse_auth(B("\5\1a\1b"), &a) == SOCKS5_E_VERSION);
    CHECK(socks5_parse_auth(B("\1\0\1b"), &a) == SOCKS5_E_BAD);
    CHECK(socks5_parse_auth(B("\1\1a\0"), &a) == SOCKS5_E_BAD);
}

static void requests(void)
{
    struct socks5_request r;
    static const char name[] = "\5\1\0\3\23Pinned.Example.COM.\1\273";
    CHECK(socks5_parse_request(B(name), &r) == (int)sizeof name - 1);
    CHECK(r.cmd == SOCKS5_CMD_CONNECT && r.kind == HOST_NAME);
    CHECKM(strcmp(r.host, "pinned.example.com") == 0, "%s", r.host);
    CHECK(r.port == 443);
    for (size_t i = 0; i < sizeof name - 1; i++)
        CHECKM(socks5_parse_request((const uint8_t *)name, i, &r) == 0, "%zu",
               i);

    CHECK(socks5_parse_request(B("\5\1\0\1\177\0\0\1\0\120"), &r) == 10);
    CHECK(r.kind == HOST_IPV4 && r.addr.family == 4 && r.port == 80);
    CHECK(strcmp(r.host, "127.0.0.1") == 0);

    CHECK(socks5_parse_request(B("\5\1\0\4\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\1"
                                 "\0\26"),
                               &r) == 22);
    CHECK(r.kind == HOST_IPV6 && strcmp(r.host, "::1") == 0 && r.port == 22);

    /* A dotted quad sent as a name is the address, for the address rule. */
    CHECK(socks5_parse_request(B("\5\1\0\3\011"
                                 "127.0.0.1\0\120"),
                               &r) > 0);
    CHECK(r.kind == HOST_IPV4);

    /* BIND and UDP parse: the proxy answers "command not supported". */
    CHECK(socks5_parse_request(B("\5\2\0\1\177\0\0\1\0\120"), &r) == 10 &&
          r.cmd == SOCKS5_CMD_BIND);
    CHECK(socks5_parse_request(B("\5\3\0\1\177\0\0\1\0\120"), &r) == 10 &&
          r.cmd == SOCKS5_CMD_UDP);

    CHECK(socks5_parse_request(B("\4\1\0\1\177\0\0\1\0\120"), &r) ==
          SOCKS5_E_VERSION);
    CHECK(socks5_parse_request(B("\5\1\1\1\177\0\0\1\0\120"), &r) ==
          SOCKS5_E_BAD);
    CHECK(socks5_parse_request(B("\5\1\0\2\177\0\0\1\0\120"), &r) ==
          SOCKS5_E_ATYP);
    CHECK(socks5_parse_request(B("\5\1\0\3\0\0\120"), &r) == SOCKS5_E_NAME);
    CHECK(socks5_parse_request(B("\5\1\0\3\3a\0b\0\120"), &r) == SOCKS5_E_NAME);
    CHECK(socks5_parse_request(B("\5\1\0\3\3a\nb\0\120"), &r) == SOCKS5_E_NAME);
    CHECK(socks5_parse_request(B("\5\1\0\3\3a b\0\120"), &r) == SOCKS5_E_NAME);
    CHECK(socks5_parse_request(B("\5\1\0\3\3a\377b\0\120"), &r) ==
          SOCKS5_E_NAME);
    CHECK(socks5_parse_request(B("\5\1\0\3\3a..\0\120"), &r) == SOCKS5_E_NAME);

    /* An over-long name: a 64-byte label, and a 254-byte name. */
    uint8_t big[5 + 255 + 2] = {5, 1, 0, 3};
    big[4] = 64;
    memset(big + 5, 'a', 64);
    CHECK(socks5_parse_request(big, 5 + 64 + 2, &r) == SOCKS5_E_NAME);
    big[4] = 255;
    for (int i = 0; i < 255; i++)
        big[5 + i] = i % 50 == 49 ? '.' : 'a';
    CHECK(socks5_parse_request(big, sizeof big, &r) == SOCKS5_E_NAME);
}

/* The reply for a refused request: 0x08 only for an unknown ATYP. */
static void replies(void)
{
    struct socks5_request r;
    static const uint8_t atyps[] = {0, 2, 5, 9, 255};
    for (size_t i = 0; i < sizeof atyps; i++) {
        uint8_t q[10] = {5, 1, 0, atyps[i], 127, 0, 0, 1, 0, 80};
        int e = socks5_parse_request(q, sizeof q, &r);
        CHECKM(e == SOCKS5_E_ATYP, "ATYP %u", atyps[i]);
        CHECKM(socks5_reply_for(e) == SOCKS5_REP_ATYP, "ATYP %u", atyps[i]);
    }
    CHECK(SOCKS5_REP_ATYP == 0x08);
    CHECK(socks5_reply_for(SOCKS5_E_VERSION) == SOCKS5_REP_GENERAL);
    CHECK(socks5_reply_for(SOCKS5_E_BAD) == SOCKS5_REP_GENERAL);
    CHECK(socks5_reply_for(SOCKS5_E_NAME) == SOCKS5_REP_GENERAL);
}

void test_socks5(void)
{
    greetings();
    auths();
    requests();
    replies();
}
