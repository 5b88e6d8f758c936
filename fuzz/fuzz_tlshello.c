/*
 * fuzz_tlshello.c - tls_hello_sni: memory safety, a NUL-terminated name
 * that fits, never NEED_MORE once TLS_HELLO_MAX bytes are there, and a
 * prefix that is either incomplete or judged like the whole.
 */
#include <stdlib.h>
#include <string.h>

#include "wire/tlshello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    char name[256];
    enum tls_sni r = tls_hello_sni(buf, size, name, sizeof name);
    if (r == TLS_SNI_FOUND) {
        size_t n = strnlen(name, sizeof name);
        if (n == 0 || n == sizeof name)
            abort();
    }
    if (r == TLS_SNI_NEED_MORE && size >= TLS_HELLO_MAX)
        abort();
    if (size > 0) {
        char pname[256];
        for (int k = 0; k < 2; k++) {
            size_t cut = k == 0 ? size - 1 : (size * 7919u) % size;
            enum tls_sni p = tls_hello_sni(buf, cut, pname, sizeof pname);
            if (p != TLS_SNI_NEED_MORE && p != r)
                abort();
            if (p == TLS_SNI_FOUND && strcmp(pname, name) != 0)
                abort();
        }
    }
    free(buf);
    return 0;
}
