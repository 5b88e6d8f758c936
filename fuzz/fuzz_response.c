/* fuzz_response.c - http_parse_response: memory safety, head length within
 * the input, and prefixes judged like the whole. */
#include <stdlib.h>
#include <string.h>

#include "wire/httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool head = data[0] & 1;
    size_t max_head = data[0] & 2 ? 256 : 65536;
    data++, size--;
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    struct http_response res, pre;
    const char *why = NULL;
    int r = http_parse_response(buf, size, max_head, head, &res, &why);
    if (r < 0 && (r != -502 || !why))
        abort();
    if (r > 0) {
        if ((size_t)r != res.head_len || res.head_len > size ||
            res.head_len > max_head || res.status < 100 || res.status > 599)
            abort();
        if (res.body == BODY_UNTIL_CLOSE && res.keep_alive)
            abort();
        if ((head || res.status < 200 || res.status == 204 ||
             res.status == 304) &&
            res.body != BODY_NONE)
            abort();
    }
    if (size > 0) {
        int p = http_parse_response(buf, size - 1, max_head, head, &pre, &why);
        if (p != 0 && p != r)
            abort();
    }
    free(buf);
    return 0;
}
