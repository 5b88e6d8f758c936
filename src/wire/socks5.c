/*
 * socks5.c - the SOCKS5 head parser (socks5.h). A name (ATYP 3) goes
 * through host_parse like an HTTP CONNECT authority, so that the allowlist
 * sees the same normalized host whichever protocol asked; a name holding
 * NUL or control bytes is refused here, before host_parse could cut it.
 */
#include <arpa/inet.h>
#include <string.h>

#include "wire/socks5.h"

int socks5_parse_greeting(const uint8_t *p, size_t n, struct socks5_greeting *g)
{
    if (n < 1)
        return 0;
    if (p[0] != 5)
        return SOCKS5_E_VERSION;
    if (n < 2)
        return 0;
    size_t nm = p[1];
    if (nm == 0)
        return SOCKS5_E_BAD;
    if (n < 2 + nm)
        return 0;
    g->no_auth = g->userpass = 0;
    for (size_t i = 0; i < nm; i++) {
        if (p[2 + i] == SOCKS5_METHOD_NONE)
            g->no_auth = 1;
        else if (p[2 + i] == SOCKS5_METHOD_USERPASS)
            g->userpass = 1;
    }
    return (int)(2 + nm);
}

int socks5_parse_auth(const uint8_t *p, size_t n, struct socks5_auth *a)
{
    if (n < 1)
        return 0;
    if (p[0] != 1)
        return SOCKS5_E_VERSION;
    if (n < 2)
        return 0;
    size_t ul = p[1];
    if (ul == 0)
        return SOCKS5_E_BAD;
    if (n < 3 + ul)
        return 0;
    size_t pl = p[2 + ul];
    if (pl == 0)
        return SOCKS5_E_BAD;
    if (n < 3 + ul + pl)
        return 0;
    a->user = p + 2;
    a->user_len = ul;
    a->pass = p + 3 + ul;
    a->pass_len = pl;
    return (int)(3 + ul + pl);
}

static int parse_name(const uint8_t *name, size_t len, struct socks5_request *r)
{
    if (len == 0)
        return SOCKS5_E_NAME;
    for (size_t i = 0; i < len; i++)
        if (name[i] < 0x21 || name[i] >= 0x7f)
            return SOCKS5_E_NAME;
    r->kind =
        host_parse((const char *)name, len, r->host, sizeof r->host, &r->addr);
    return r->kind == HOST_INVALID ? SOCKS5_E_NAME : 0;
}

int socks5_parse_request(const uint8_t *p, size_t n, struct socks5_request *r)
{
    if (n < 1)
        return 0;
    if (p[0] != 5)
        return SOCKS5_E_VERSION;
    if (n < 4)
        return 0;
    if (p[2] != 0)
        return SOCKS5_E_BAD;
    size_t alen, off = 4;
    switch (p[3]) {
    case 1:
        alen = 4;
        break;
    case 4:
        alen = 16;
        break;
    case 3:
        if (n < 5)
            return 0;
        alen = p[4];
        off = 5;
        break;
    default:
        return SOCKS5_E_ATYP;
    }
    size_t total = off + alen + 2;
    if (n < total)
        return 0;
    memset(r, 0, sizeof *r);
    r->cmd = p[1];
    if (p[3] == 3) {
        int e = parse_name(p + off, alen, r);
        if (e < 0)
            return e;
    } else {
        r->kind = alen == 4 ? HOST_IPV4 : HOST_IPV6;
        r->addr.family = alen == 4 ? 4 : 6;
        memcpy(r->addr.bytes, p + off, alen);
        inet_ntop(alen == 4 ? AF_INET : AF_INET6, p + off, r->host,
                  sizeof r->host);
    }
    r->port = (p[off + alen] << 8) | p[off + alen + 1];
    return (int)total;
}

uint8_t socks5_reply_for(int err)
{
    return err == SOCKS5_E_ATYP ? SOCKS5_REP_ATYP : SOCKS5_REP_GENERAL;
}
