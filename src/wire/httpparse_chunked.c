/*
 * httpparse_chunked.c - follows a chunked body byte by byte to find where
 * it ends. The bytes themselves are relayed unchanged, so this reader must
 * agree with any strict reader on the other side: it refuses anything a
 * lenient one might read differently (a bare LF, whitespace around the
 * size, a size that overflows, data not followed by CRLF).
 */
#include "wire/httpparse.h"
#include "wire/httpparse_lex.h"

/* Longest chunk-size line (with extensions) or trailer line. */
#define CHUNK_LINE_MAX 4096
/* Chunk sizes up to 2^60: sixteen hex digits would overflow the check. */
#define CHUNK_SIZE_MAX (UINT64_C(1) << 60)

enum {
    CH_SIZE_FIRST, /* expecting the first hex digit of a size */
    CH_SIZE,       /* more hex digits, ';' or CR */
    CH_EXT,        /* chunk extension up to CR */
    CH_SIZE_LF,    /* LF after the size line */
    CH_DATA,       /* chunk data */
    CH_DATA_CR,    /* CR after data */
    CH_DATA_LF,    /* LF after data */
    CH_TRAILER,    /* start of a trailer line, or the final CR */
    CH_TRAILER_LINE,
    CH_TRAILER_LF,
    CH_END_LF, /* LF of the final blank line */
    CH_DONE,
    CH_BAD
};

void http_chunked_init(struct http_chunked *c)
{
    c->state = CH_SIZE_FIRST;
    c->remaining = 0;
    c->line_len = 0;
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

ssize_t http_chunked_feed(struct http_chunked *c, const char *buf, size_t n,
                          bool *done)
{
    size_t i = 0;
    *done = c->state == CH_DONE;
    if (c->state == CH_BAD)
        return -1;
    while (i < n && c->state != CH_DONE) {
        unsigned char ch = (unsigned char)buf[i];
        if (c->state == CH_DATA) {
            size_t take = n - i;
            if (take > c->remaining)
                take = (size_t)c->remaining;
            c->remaining -= take;
            i += take;
            if (c->remaining == 0)
                c->state = CH_DATA_CR;
            continue;
        }
        i++;
        if (++c->line_len > CHUNK_LINE_MAX)
            goto bad;
        switch (c->state) {
        case CH_SIZE_FIRST:
        case CH_SIZE: {
            int h = hexval(ch);
            if (h >= 0) {
                if (c->remaining >= CHUNK_SIZE_MAX >> 4)
                    goto bad;
                c->remaining = (c->remaining << 4) | (uint64_t)h;
                c->state = CH_SIZE;
            } else if (c->state == CH_SIZE && ch == ';') {
                c->state = CH_EXT;
            } else if (c->state == CH_SIZE && ch == '\r') {
                c->state = CH_SIZE_LF;
            } else {
                goto bad;
            }
            break;
        }
        case CH_EXT:
            if (ch == '\r')
                c->state = CH_SIZE_LF;
            else if (!http_is_value_char(ch))
                goto bad;
            break;
        case CH_SIZE_LF:
            if (ch != '\n')
                goto bad;
            c->line_len = 0;
            c->state = c->remaining ? CH_DATA : CH_TRAILER;
            break;
        case CH_DATA_CR:
            if (ch != '\r')
                goto bad;
            c->state = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (ch != '\n')
                goto bad;
            c->line_len = 0;
            c->state = CH_SIZE_FIRST;
            break;
        case CH_TRAILER:
            if (ch == '\r')
                c->state = CH_END_LF;
            else if (http_is_tchar(ch))
                c->state = CH_TRAILER_LINE;
            else
                goto bad; /* folding, or junk where a field name goes */
            break;
        case CH_TRAILER_LINE:
            if (ch == '\r')
                c->state = CH_TRAILER_LF;
            else if (!http_is_value_char(ch))
                goto bad;
            break;
        case CH_TRAILER_LF:
            if (ch != '\n')
                goto bad;
            c->line_len = 0;
            c->state = CH_TRAILER;
            break;
        case CH_END_LF:
            if (ch != '\n')
                goto bad;
            c->state = CH_DONE;
            break;
        default:
            goto bad;
        }
    }
    *done = c->state == CH_DONE;
    return (ssize_t)i;
bad:
    c->state = CH_BAD;
    return -1;
}
