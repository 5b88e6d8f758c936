/*
 * socks5.h - the SOCKS5 head (RFC 1928, RFC 1929), parsed strictly.
 *
 * Pure functions over the bytes received so far: each returns 0 when more
 * bytes are needed, the number of bytes its message took when it is whole
 * and well-formed, or a negative SOCKS5_E_* when it is not (the proxy then
 * closes, or replies with socks5_reply_for). Nothing is allocated.
 */
#ifndef ISOLATION_SOCKS5_H
#define ISOLATION_SOCKS5_H

#include <stddef.h>
#include <stdint.h>

#include "wire/hostparse.h"

enum {
    SOCKS5_E_VERSION = -1, /* not version 5 (or 1 for RFC 1929 auth) */
    SOCKS5_E_BAD = -2,     /* a malformed field (no methods, reserved byte) */
    SOCKS5_E_ATYP = -3,    /* an address type other than 1, 3, 4 */
    SOCKS5_E_NAME = -4,    /* a name that is empty, has NUL/control bytes or
                              is not a valid host name */
};

enum { SOCKS5_CMD_CONNECT = 1, SOCKS5_CMD_BIND = 2, SOCKS5_CMD_UDP = 3 };

/* Reply codes (RFC 1928 section 6). */
enum {
    SOCKS5_REP_OK = 0x00,
    SOCKS5_REP_GENERAL = 0x01,
    SOCKS5_REP_NOT_ALLOWED = 0x02,
    SOCKS5_REP_NET_UNREACHABLE = 0x03,
    SOCKS5_REP_HOST_UNREACHABLE = 0x04,
    SOCKS5_REP_REFUSED = 0x05,
    SOCKS5_REP_TTL = 0x06,
    SOCKS5_REP_COMMAND = 0x07,
    SOCKS5_REP_ATYP = 0x08,
};

enum { SOCKS5_METHOD_NONE = 0x00, SOCKS5_METHOD_USERPASS = 0x02 };

struct socks5_greeting {
    int no_auth;  /* method 0x00 offered */
    int userpass; /* method 0x02 offered */
};

struct socks5_auth {
    const uint8_t *user, *pass; /* inside the input */
    size_t user_len, pass_len;
};

struct socks5_request {
    int cmd;
    enum host_kind kind;      /* HOST_NAME, HOST_IPV4 or HOST_IPV6 */
    char host[HOST_NAME_CAP]; /* normalized (host_parse), or the address */
    struct host_addr addr;    /* for HOST_IPV4 / HOST_IPV6 */
    int port;                 /* 0..65535 as sent */
};

int socks5_parse_greeting(const uint8_t *p, size_t n,
                          struct socks5_greeting *g);
int socks5_parse_auth(const uint8_t *p, size_t n, struct socks5_auth *a);
int socks5_parse_request(const uint8_t *p, size_t n, struct socks5_request *r);

/* The reply code for a request the parser refused (a SOCKS5_E_* value):
 * "address type not supported" for an unknown ATYP, else general failure. */
uint8_t socks5_reply_for(int err);

#endif
