/*
 * proxy_auth.c - the `token` proxy option. A client proves it holds the
 * token as HTTP Basic credentials (user "isolation", the token as the
 * password) or as SOCKS5 username/password (RFC 1929). The comparison
 * takes the same time whatever bytes differ, so that timing tells an
 * attacker nothing about the token; the token is kept only here and never
 * put in an event or a log.
 */
#include <string.h>

#include "proxy/proxy.h"

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t base64(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    return o;
}

void proxy_token_set(struct proxy_opts *o, const char *token, size_t len)
{
    uint8_t cred[10 + sizeof o->token];
    memcpy(cred, "isolation:", 10);
    memcpy(cred + 10, token, len);
    memcpy(o->token, token, len);
    o->token_len = len;
    o->token_basic_len = base64(cred, 10 + len, o->token_basic);
    memset(cred, 0, sizeof cred);
}

/* Equal, in a time that depends only on want_len. */
static bool same(const uint8_t *want, size_t want_len, const uint8_t *got,
                 size_t got_len)
{
    volatile uint8_t diff = want_len != got_len;
    for (size_t i = 0; i < want_len; i++)
        diff |= want[i] ^ (got_len ? got[i % got_len] : 0xff);
    return diff == 0;
}

bool proxy_token_http_ok(const struct proxy_opts *o, const char *value,
                         size_t len)
{
    /* "Basic" (any case), spaces, the credentials. */
    if (len < 6 || strncasecmp(value, "basic ", 6) != 0)
        return false;
    size_t i = 6;
    while (i < len && value[i] == ' ')
        i++;
    return same((const uint8_t *)o->token_basic, o->token_basic_len,
                (const uint8_t *)value + i, len - i);
}

bool proxy_token_socks_ok(const struct proxy_opts *o, const uint8_t *user,
                          size_t user_len, const uint8_t *pass, size_t pass_len)
{
    bool user_ok = same((const uint8_t *)"isolation", 9, user, user_len);
    bool pass_ok = same(o->token, o->token_len, pass, pass_len);
    return user_ok & pass_ok;
}
