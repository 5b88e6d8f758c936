/*
 * runner.h - a minimal test runner: CHECK records a failure with its line
 * and keeps going; main prints "N passed, M failed" and exits non-zero on
 * any failure.
 */
#ifndef ISOLATION_TEST_RUNNER_H
#define ISOLATION_TEST_RUNNER_H

#include <stdio.h>

extern int test_passed, test_failed;

#define CHECK(cond) check_((cond), #cond, __FILE__, __LINE__, NULL)
#define CHECKM(cond, ...)                                                      \
    do {                                                                       \
        char msg_[512];                                                        \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                              \
        check_((cond), #cond, __FILE__, __LINE__, msg_);                       \
    } while (0)

void check_(int ok, const char *what, const char *file, int line,
            const char *msg);

void test_request(void);
void test_upstream(void);
void test_response(void);
void test_chunked(void);
void test_tlshello(void);
void test_socks5(void);
void test_hostclass(void);

#endif
