/*
 * fuzz_chunked.c - http_chunked_feed: the same body fed whole, in two
 * pieces at a fuzzer-chosen point, and a byte at a time must give the same
 * verdict and the same end.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/httpparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes of the body, -1 malformed, -2 not ended. */
static long run(const char *b, size_t n, size_t split, size_t step)
{
    struct http_chunked c;
    bool done = false;
    http_chunked_init(&c);
    size_t pos = 0;
    while (pos < n) {
        size_t take = step ? step : (pos < split ? split - pos : n - pos);
        if (take > n - pos)
            take = n - pos;
        ssize_t r = http_chunked_feed(&c, b + pos, take, &done);
        if (r < 0)
            return -1;
        if ((size_t)r > take)
            abort();
        pos += (size_t)r;
        if (done)
            return (long)pos;
        if ((size_t)r != take)
            abort(); /* stopped early without ending */
    }
    return -2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t split = ((size_t)data[0] << 8 | data[1]);
    data += 2, size -= 2;
    split = size ? split % (size + 1) : 0;
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    long whole = run(buf, size, size, 0);
    if (run(buf, size, split, 0) != whole || run(buf, size, 0, 1) != whole)
        abort();
    free(buf);
    return 0;
}
