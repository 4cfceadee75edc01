/* One case runner for the C tests whose meson entries each name a case: `prog <case>` runs
 * that case, `prog` with no argument runs every case, and a name no case has is an error
 * (exit 2, the known names listed): a meson entry left naming a case that was renamed or
 * removed fails instead of passing without running anything. */
#pragma once

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tests/common/check.h"

struct test_case {
    const char *name;
    void (*fn)(void);
};

/* 0 when every check passed, 1 when one failed, 2 for an unknown case name. */
static inline int test_cases_run(int argc, char **argv, const struct test_case *cases, size_t n)
{
    const char *want = argc > 1 ? argv[1] : NULL;
    size_t ran = 0;
    for (size_t i = 0; i < n; i++)
        if (!want || strcmp(want, cases[i].name) == 0) {
            cases[i].fn();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "%s: no case \"%s\"; the cases:", argv[0], want ? want : "");
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %s", cases[i].name);
        fputc('\n', stderr);
        return 2;
    }
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
