/*
 * hello_builder.h - builds real TLS ClientHello bytes for the tests and the
 * fuzz seed corpus: the layout of RFC 8446 4.1.2, with a server_name
 * extension (RFC 6066 3), optional padding, and the handshake message cut
 * into records of a chosen size.
 */
#ifndef ISOLATION_HELLO_BUILDER_H
#define ISOLATION_HELLO_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hello_opts {
    const char *sni;      /* NULL: no server_name extension */
    const char *sni2;     /* a second host_name entry in the same list */
    bool dup_sni_ext;     /* a second server_name extension */
    bool no_extensions;   /* stop after compression_methods */
    size_t pad;           /* bytes of a padding extension (21) */
    size_t record_size;   /* 0: one record; else records of at most this */
    uint8_t record_minor; /* record version 3.x (default 1) */
    int sid_len;          /* legacy_session_id length (default 32) */
};

struct bytes {
    uint8_t *p;
    size_t n, cap;
};

static inline void b_put(struct bytes *b, const void *src, size_t n)
{
    if (b->n + n <= b->cap)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void b_u8(struct bytes *b, unsigned v)
{
    uint8_t x = (uint8_t)v;
    b_put(b, &x, 1);
}

static inline void b_u16(struct bytes *b, unsigned v)
{
    b_u8(b, v >> 8);
    b_u8(b, v & 0xff);
}

static inline void b_u24(struct bytes *b, unsigned v)
{
    b_u8(b, v >> 16);
    b_u16(b, v & 0xffff);
}

static inline void b_sni_ext(struct bytes *b, const char *a, const char *c)
{
    size_t la = strlen(a), lc = c ? strlen(c) : 0;
    size_t list = 3 + la + (c ? 3 + lc : 0);
    b_u16(b, 0); /* server_name */
    b_u16(b, (unsigned)(list + 2));
    b_u16(b, (unsigned)list);
    b_u8(b, 0); /* host_name */
    b_u16(b, (unsigned)la);
    b_put(b, a, la);
    if (c) {
        b_u8(b, 0);
        b_u16(b, (unsigned)lc);
        b_put(b, c, lc);
    }
}

/* Writes the records to out (cap bytes); returns their length. */
static inline size_t build_hello(const struct hello_opts *o, uint8_t *out,
                                 size_t cap)
{
    static uint8_t hs_buf[70000];
    struct bytes body = {hs_buf + 4, 0, sizeof hs_buf - 4};
    b_u16(&body, 0x0303);
    for (int i = 0; i < 32; i++)
        b_u8(&body, (unsigned)(i * 7 + 1));
    int sid = o->sid_len ? o->sid_len : 32;
    if (sid < 0)
        sid = 0;
    b_u8(&body, (unsigned)sid);
    for (int i = 0; i < sid; i++)
        b_u8(&body, 0xaa);
    static const uint16_t suites[] = {0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f};
    b_u16(&body, sizeof suites);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        b_u16(&body, suites[i]);
    b_u8(&body, 1);
    b_u8(&body, 0); /* null compression */
    if (!o->no_extensions) {
        uint8_t ext_buf[70000];
        struct bytes ext = {ext_buf, 0, sizeof ext_buf};
        /* supported_versions: TLS 1.3, 1.2 */
        b_u16(&ext, 43);
        b_u16(&ext, 5);
        b_u8(&ext, 4);
        b_u16(&ext, 0x0304);
        b_u16(&ext, 0x0303);
        if (o->sni)
            b_sni_ext(&ext, o->sni, o->sni2);
        /* supported_groups: x25519 */
        b_u16(&ext, 10);
        b_u16(&ext, 4);
        b_u16(&ext, 2);
        b_u16(&ext, 0x001d);
        if (o->dup_sni_ext)
            b_sni_ext(&ext, o->sni ? o->sni : "example.com", NULL);
        if (o->pad) {
            b_u16(&ext, 21);
            b_u16(&ext, (unsigned)o->pad);
            for (size_t i = 0; i < o->pad; i++)
                b_u8(&ext, 0);
        }
        b_u16(&body, (unsigned)ext.n);
        b_put(&body, ext_buf, ext.n);
    }
    hs_buf[0] = 1; /* client_hello */
    hs_buf[1] = (uint8_t)(body.n >> 16);
    hs_buf[2] = (uint8_t)(body.n >> 8);
    hs_buf[3] = (uint8_t)body.n;
    size_t hs_n = body.n + 4;

    struct bytes rec = {out, 0, cap};
    size_t step = o->record_size ? o->record_size : 16384;
    for (size_t off = 0; off < hs_n; off += step) {
        size_t n = hs_n - off < step ? hs_n - off : step;
        b_u8(&rec, 22);
        b_u8(&rec, 3);
        b_u8(&rec, o->record_minor ? o->record_minor : 1);
        b_u16(&rec, (unsigned)n);
        b_put(&rec, hs_buf + off, n);
    }
    return rec.n;
}

#endif
