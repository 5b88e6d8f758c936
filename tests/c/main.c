/* main.c - runs every C-level suite of the parsers. */
#include <stdlib.h>

#include "runner.h"

int test_passed, test_failed;

void check_(int ok, const char *what, const char *file, int line,
            const char *msg)
{
    if (ok) {
        test_passed++;
        return;
    }
    test_failed++;
    fprintf(stderr, "FAIL %s:%d: %s%s%s\n", file, line, what, msg ? " -- " : "",
            msg ? msg : "");
}

int main(void)
{
    test_request();
    test_upstream();
    test_response();
    test_chunked();
    test_tlshello();
    test_socks5();
    test_hostclass();
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}
