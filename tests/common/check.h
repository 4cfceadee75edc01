/* Assertions shared by the C tests. A failed check prints file:line and what failed,
 * counts into test_failures and lets the test go on, so one run reports every
 * failure. Each test program defines `int test_failures;` once and exits non-zero when it
 * is not 0. */
#pragma once

#include <stdio.h>
#include <string.h>

extern int test_failures;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);  \
            test_failures++;                                                          \
        }                                                                             \
    } while (0)

#define CHECK_STR(a, b)                                                               \
    do {                                                                              \
        const char *_a = (a), *_b = (b);                                              \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                                      \
            fprintf(stderr, "%s:%d: \"%s\" != \"%s\" (%s)\n", __FILE__, __LINE__,      \
                    _a ? _a : "(null)", _b ? _b : "(null)", #a);                      \
            test_failures++;                                                          \
        }                                                                             \
    } while (0)

#define CHECK_STR_CONTAINS(s, sub)                                                    \
    do {                                                                              \
        const char *_s = (s), *_sub = (sub);                                          \
        if (!_s || !strstr(_s, _sub)) {                                               \
            fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,      \
                    __LINE__, _s ? _s : "(null)", _sub);                              \
            test_failures++;                                                          \
        }                                                                             \
    } while (0)
