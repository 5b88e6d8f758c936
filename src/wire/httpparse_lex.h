/*
 * httpparse_lex.h - the byte-level rules the request and response parsers
 * share (internal to httpparse*.c). Lines end in CRLF and nothing else: a
 * parser that accepted a bare LF or CR where the next hop does not would
 * let a client hide one request inside another.
 */
#ifndef ISOLATION_HTTPPARSE_LEX_H
#define ISOLATION_HTTPPARSE_LEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum http_line_result { LINE_MORE = 0, LINE_DONE = 1, LINE_BAD = -1 };

/*
 * Finds the CRLF that ends the line starting at buf[start], looking only at
 * buf[0..lim). On LINE_DONE *eol is the index of the CR. A NUL, a bare LF
 * or a CR not followed by LF is LINE_BAD (with *why).
 */
static inline enum http_line_result http_lex_line(const char *buf, size_t lim,
                                                  size_t start, size_t *eol,
                                                  const char **why)
{
    /*
     * The proxy reads a head again each time more of it arrives, so this
     * is the hot loop: libc's memchr scans many bytes per cycle, three
     * passes of it beat one byte-by-byte pass by far.
     */
    if (start >= lim)
        return LINE_MORE;
    const char *p = buf + start;
    const char *cr = memchr(p, '\r', lim - start);
    size_t span = cr ? (size_t)(cr - p) : lim - start;
    const char *nul = memchr(p, '\0', span);
    const char *lf = memchr(p, '\n', span);
    if (nul || lf) {
        *why =
            (nul && (!lf || nul < lf)) ? "NUL byte in head" : "bare LF in head";
        return LINE_BAD;
    }
    if (!cr || (size_t)(cr - buf) + 1 == lim)
        return LINE_MORE;
    if (cr[1] != '\n') {
        *why = "bare CR in head";
        return LINE_BAD;
    }
    *eol = (size_t)(cr - buf);
    return LINE_DONE;
}

/* RFC 9110 tchar: ALPHA, DIGIT and !#$%&'*+-.^_`|~, as a 128-bit set. */
static inline bool http_is_tchar(unsigned char c)
{
    static const uint64_t set[2] = {UINT64_C(0x03ff6cfa00000000),
                                    UINT64_C(0x57ffffffc7fffffe)};
    return c < 128 && (set[c >> 6] >> (c & 63)) & 1;
}

/* field-value bytes: HTAB, SP, VCHAR, obs-text. */
static inline bool http_is_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static inline bool http_is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static inline char http_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

/* Case-insensitive comparison of p[0..n) with the NUL-terminated lit. */
static inline bool http_ieq(const char *p, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n; i++) {
        if (lit[i] == '\0' || http_lower(p[i]) != http_lower(lit[i]))
            return false;
    }
    return lit[i] == '\0';
}

static inline bool http_iprefix(const char *p, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n >= k && http_ieq(p, k, lit);
}

/*
 * One header line (without its CRLF): name, ':', OWS, value, OWS. A line
 * that starts with whitespace is obsolete folding; whitespace or any other
 * non-token byte before the colon is refused.
 */
static inline bool http_lex_header(const char *line, size_t n,
                                   const char **name, size_t *name_n,
                                   const char **value, size_t *value_n,
                                   const char **why)
{
    if (n > 0 && http_is_ows((unsigned char)line[0])) {
        *why = "obsolete line folding";
        return false;
    }
    size_t i = 0;
    while (i < n && line[i] != ':') {
        unsigned char c = (unsigned char)line[i];
        if (!http_is_tchar(c)) {
            *why = http_is_ows(c) ? "whitespace before a header's colon"
                                  : "invalid character in a header name";
            return false;
        }
        i++;
    }
    if (i == n) {
        *why = "header line without a colon";
        return false;
    }
    if (i == 0) {
        *why = "empty header name";
        return false;
    }
    *name = line;
    *name_n = i;
    size_t v = i + 1, end = n;
    while (v < end && http_is_ows((unsigned char)line[v]))
        v++;
    while (end > v && http_is_ows((unsigned char)line[end - 1]))
        end--;
    for (size_t k = v; k < end; k++) {
        if (!http_is_value_char((unsigned char)line[k])) {
            *why = "control character in a header value";
            return false;
        }
    }
    *value = line + v;
    *value_n = end - v;
    return true;
}

/*
 * Content-Length: 1*DIGIT and nothing else (no sign, no list, no
 * whitespace inside); at most 18 digits so that it fits in any size type.
 */
static inline bool http_lex_length(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 18)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = v;
    return true;
}

/*
 * Walks a comma-separated token list (Connection). Calls back for each
 * non-empty element; false when an element is not a token.
 */
struct http_list_iter {
    const char *p;
    size_t n, pos;
};

static inline int http_list_next(struct http_list_iter *it, const char **tok,
                                 size_t *tok_n)
{
    while (it->pos < it->n) {
        size_t s = it->pos;
        while (it->pos < it->n && it->p[it->pos] != ',')
            it->pos++;
        size_t e = it->pos;
        if (it->pos < it->n)
            it->pos++; /* the comma */
        while (s < e && http_is_ows((unsigned char)it->p[s]))
            s++;
        while (e > s && http_is_ows((unsigned char)it->p[e - 1]))
            e--;
        if (s == e)
            continue;
        for (size_t k = s; k < e; k++) {
            if (!http_is_tchar((unsigned char)it->p[k]))
                return -1;
        }
        *tok = it->p + s;
        *tok_n = e - s;
        return 1;
    }
    return 0;
}

/* "HTTP/1.0" or "HTTP/1.1": the minor version; -505 for another
 * well-formed version, -1 for anything else. */
static inline int http_lex_version(const char *p, size_t n)
{
    if (n != 8 || memcmp(p, "HTTP/", 5) != 0 || p[6] != '.' || p[5] < '0' ||
        p[5] > '9' || p[7] < '0' || p[7] > '9')
        return -1;
    if (p[5] == '1' && (p[7] == '0' || p[7] == '1'))
        return p[7] - '0';
    return -505;
}

#endif
