/*
 * tlshello.c - the server name of a TLS ClientHello, read in place.
 *
 * The hello is one handshake message that may be cut into several TLS
 * records; a reader walks the records and presents their payloads as one
 * byte stream, so nothing is copied or allocated. Every length must agree
 * with the one around it: a hello that a server might read differently
 * (two server_name extensions, a name with a NUL, bytes after the
 * extensions) is MALFORMED, never "no name".
 */
#include <stdbool.h>
#include <string.h>

#include "wire/tlshello.h"

#define TLS_RECORD_HANDSHAKE 22
#define TLS_HANDSHAKE_CLIENT_HELLO 1
#define TLS_RECORD_MAX 16384
#define TLS_EXT_SERVER_NAME 0
#define TLS_NAME_HOST 0

enum { R_OK = 0, R_MORE = 1, R_BAD = 2 };

/* A cursor over the payload bytes of consecutive handshake records. */
struct reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;     /* absolute offset of the next payload byte */
    size_t rec_end; /* absolute end of the current record's payload */
};

/* Moves to the next record when the current one is used up. */
static int next_record(struct reader *r)
{
    size_t h = r->rec_end;
    if (h + 5 > TLS_HELLO_MAX)
        return R_BAD;
    if (h + 5 > r->len) {
        /* Judge the header bytes that did arrive. */
        if (h < r->len && r->buf[h] != TLS_RECORD_HANDSHAKE)
            return R_BAD;
        if (h + 1 < r->len && r->buf[h + 1] != 3)
            return R_BAD;
        return R_MORE;
    }
    size_t n = (size_t)r->buf[h + 3] << 8 | r->buf[h + 4];
    if (r->buf[h] != TLS_RECORD_HANDSHAKE || r->buf[h + 1] != 3 || n == 0 ||
        n > TLS_RECORD_MAX)
        return R_BAD;
    r->pos = h + 5;
    r->rec_end = r->pos + n;
    return R_OK;
}

/* Reads one payload byte. */
static int get8(struct reader *r, uint8_t *out)
{
    if (r->pos == r->rec_end) {
        int s = next_record(r);
        if (s != R_OK)
            return s;
    }
    if (r->pos >= TLS_HELLO_MAX)
        return R_BAD;
    if (r->pos >= r->len)
        return R_MORE;
    *out = r->buf[r->pos++];
    return R_OK;
}

static int get16(struct reader *r, size_t *out)
{
    uint8_t a, b;
    int s = get8(r, &a);
    if (s == R_OK)
        s = get8(r, &b);
    if (s == R_OK)
        *out = (size_t)a << 8 | b;
    return s;
}

static int get24(struct reader *r, size_t *out)
{
    uint8_t a;
    size_t bc;
    int s = get8(r, &a);
    if (s == R_OK)
        s = get16(r, &bc);
    if (s == R_OK)
        *out = (size_t)a << 16 | bc;
    return s;
}

static int skip(struct reader *r, size_t n)
{
    while (n > 0) {
        if (r->pos == r->rec_end) {
            int s = next_record(r);
            if (s != R_OK)
                return s;
        }
        size_t here = r->rec_end - r->pos;
        if (here > n)
            here = n;
        if (r->pos + here > TLS_HELLO_MAX)
            return R_BAD;
        if (r->pos + here > r->len) {
            return R_MORE;
        }
        r->pos += here;
        n -= here;
    }
    return R_OK;
}

#define TRY(expr)                                                              \
    do {                                                                       \
        int s_ = (expr);                                                       \
        if (s_ != R_OK)                                                        \
            return s_ == R_MORE ? TLS_SNI_NEED_MORE : TLS_SNI_MALFORMED;       \
    } while (0)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            return TLS_SNI_MALFORMED;                                          \
    } while (0)

/* server_name extension body of n bytes: one host_name, copied to name. */
static enum tls_sni read_server_name(struct reader *r, size_t n, char *name,
                                     size_t namecap, bool *found)
{
    size_t list;
    CHECK(n >= 2);
    TRY(get16(r, &list));
    CHECK(list + 2 == n && list > 0);
    while (list > 0) {
        uint8_t type;
        size_t nl;
        CHECK(list >= 3);
        TRY(get8(r, &type));
        TRY(get16(r, &nl));
        list -= 3;
        CHECK(nl <= list);
        list -= nl;
        if (type != TLS_NAME_HOST) {
            TRY(skip(r, nl));
            continue;
        }
        CHECK(!*found && nl > 0 && nl < namecap);
        for (size_t i = 0; i < nl; i++) {
            uint8_t c;
            TRY(get8(r, &c));
            CHECK(c != 0);
            name[i] = (char)c;
        }
        name[nl] = '\0';
        *found = true;
    }
    return TLS_SNI_FOUND;
}

enum tls_sni tls_hello_sni(const uint8_t *buf, size_t len, char *name,
                           size_t namecap)
{
    if (len == 0)
        return TLS_SNI_NEED_MORE;
    if (buf[0] != TLS_RECORD_HANDSHAKE || (len > 1 && buf[1] != 3))
        return TLS_SNI_NOT_TLS;

    struct reader r = {buf, len, 0, 0};
    uint8_t type, b;
    size_t hlen, n;
    TRY(get8(&r, &type));
    CHECK(type == TLS_HANDSHAKE_CLIENT_HELLO);
    TRY(get24(&r, &hlen));
    /* 38 bytes: version, random, and the three minimal length fields. */
    CHECK(hlen >= 2 + 32 + 1 + 2 + 2 + 1 + 1 && hlen + 4 + 5 <= TLS_HELLO_MAX);
    size_t used = 0; /* body bytes consumed, checked against hlen */

    TRY(skip(&r, 2 + 32)); /* legacy_version, random */
    TRY(get8(&r, &b));     /* legacy_session_id */
    CHECK(b <= 32 && 2 + 32 + 1 + (size_t)b + 2 <= hlen);
    TRY(skip(&r, b));
    used = 2 + 32 + 1 + b;

    /* Each length is checked against hlen before it is read, so a hello
     * that claims less than its fields need is MALFORMED at once instead
     * of waiting for bytes beyond its end. */
    TRY(get16(&r, &n)); /* cipher_suites */
    CHECK(n >= 2 && n % 2 == 0 && used + 2 + n <= hlen);
    TRY(skip(&r, n));
    used += 2 + n;

    CHECK(used + 1 <= hlen); /* compression_methods */
    TRY(get8(&r, &b));
    CHECK(b >= 1 && used + 1 + b <= hlen);
    TRY(skip(&r, b));
    used += 1 + b;

    if (used == hlen)
        return TLS_SNI_ABSENT; /* no extensions at all */
    size_t ext_total;
    CHECK(used + 2 <= hlen);
    TRY(get16(&r, &ext_total));
    used += 2;
    CHECK(used + ext_total == hlen);

    bool found = false, seen_sni = false;
    while (ext_total > 0) {
        size_t et, el;
        CHECK(ext_total >= 4);
        TRY(get16(&r, &et));
        TRY(get16(&r, &el));
        ext_total -= 4;
        CHECK(el <= ext_total);
        ext_total -= el;
        if (et != TLS_EXT_SERVER_NAME) {
            TRY(skip(&r, el));
            continue;
        }
        CHECK(!seen_sni);
        seen_sni = true;
        enum tls_sni s = read_server_name(&r, el, name, namecap, &found);
        if (s != TLS_SNI_FOUND)
            return s;
    }
    return found ? TLS_SNI_FOUND : TLS_SNI_ABSENT;
}
