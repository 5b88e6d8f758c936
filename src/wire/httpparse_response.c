/*
 * httpparse_response.c - reads an upstream response head far enough to know
 * where the response ends, so that a kept-alive upstream connection is
 * reused only when its framing is unambiguous. The head itself is relayed
 * to the client as it came.
 */
#include <string.h>

#include "wire/httpparse.h"
#include "wire/httpparse_lex.h"

#define REFUSE(reason)                                                         \
    do {                                                                       \
        if (why)                                                               \
            *why = (reason);                                                   \
        return -502;                                                           \
    } while (0)

/* "HTTP/1.x SSS[ reason]": the status, or -1. */
static int parse_status_line(const char *p, size_t n, int *minor)
{
    if (n < 12 || p[8] != ' ')
        return -1;
    int m = http_lex_version(p, 8);
    if (m < 0)
        return -1;
    int status = 0;
    for (size_t i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        status = status * 10 + (p[i] - '0');
    }
    if (status < 100 || status > 599)
        return -1;
    if (n > 12 && p[12] != ' ')
        return -1;
    for (size_t i = 13; i < n; i++) {
        if (!http_is_value_char((unsigned char)p[i]))
            return -1;
    }
    *minor = m;
    return status;
}

int http_parse_response(const char *buf, size_t len, size_t max_head,
                        bool request_was_head, struct http_response *res,
                        const char **why)
{
    const char *reason = "malformed response";
    size_t lim = len < max_head ? len : max_head;
    size_t eol = 0;
    memset(res, 0, sizeof *res);

    enum http_line_result r = http_lex_line(buf, lim, 0, &eol, &reason);
    if (r == LINE_BAD)
        REFUSE(reason);
    if (r == LINE_MORE) {
        if (len >= max_head)
            REFUSE("response head too large");
        return 0;
    }
    int status = parse_status_line(buf, eol, &res->version_minor);
    if (status < 0)
        REFUSE("malformed status line");
    if (status == 101)
        REFUSE("101 Switching Protocols without an Upgrade request");
    res->status = status;

    int lengths = 0, encodings = 0;
    bool chunked = false, conn_close = false, conn_keep_alive = false;
    uint64_t cl = 0;
    size_t pos = eol + 2;
    for (;;) {
        r = http_lex_line(buf, lim, pos, &eol, &reason);
        if (r == LINE_BAD)
            REFUSE(reason);
        if (r == LINE_MORE) {
            if (len >= max_head)
                REFUSE("response head too large");
            return 0;
        }
        if (eol == pos)
            break;
        const char *name, *value;
        size_t nn, vn;
        if (!http_lex_header(buf + pos, eol - pos, &name, &nn, &value, &vn,
                             &reason))
            REFUSE(reason);
        pos = eol + 2;
        if (http_ieq(name, nn, "content-length")) {
            uint64_t v;
            if (!http_lex_length(value, vn, &v))
                REFUSE("Content-Length is not a number");
            /* Identical repeats are harmless; differing ones are not. */
            if (lengths++ && v != cl)
                REFUSE("differing Content-Lengths");
            cl = v;
        } else if (http_ieq(name, nn, "transfer-encoding")) {
            /* Only a lone, exact "chunked" frames the body; any other
             * coding leaves it running until the upstream closes. */
            encodings++;
            chunked = http_ieq(value, vn, "chunked");
        } else if (http_ieq(name, nn, "connection")) {
            struct http_list_iter it = {value, vn, 0};
            const char *tok;
            size_t tn;
            int rr;
            while ((rr = http_list_next(&it, &tok, &tn)) > 0) {
                if (http_ieq(tok, tn, "close"))
                    conn_close = true;
                else if (http_ieq(tok, tn, "keep-alive"))
                    conn_keep_alive = true;
            }
            if (rr < 0)
                REFUSE("invalid token in Connection");
        }
    }
    res->head_len = eol + 2;
    res->keep_alive =
        res->version_minor == 1 ? !conn_close : conn_keep_alive && !conn_close;
    if (request_was_head || status < 200 || status == 204 || status == 304) {
        res->body = BODY_NONE;
    } else if (encodings) {
        /* RFC 9112 6.3: Transfer-Encoding overrides Content-Length, and a
         * message with both must not be reused. */
        res->body =
            (encodings == 1 && chunked) ? BODY_CHUNKED : BODY_UNTIL_CLOSE;
        if (lengths || res->body == BODY_UNTIL_CLOSE)
            res->keep_alive = false;
    } else if (lengths) {
        res->body = BODY_LENGTH;
        res->content_length = cl;
    } else {
        res->body = BODY_UNTIL_CLOSE;
        res->keep_alive = false;
    }
    return (int)res->head_len;
}
