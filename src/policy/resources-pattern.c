/* The resources.gpus / resources.mig name patterns (anchored, '*' wildcard, §3.3):
 * resources_pattern_match(), declared in resources-warn.h. MIG capability minors are
 * node/mig.c's (discovery puts them in the inventory). */
#include <errno.h>
#include <stdio.h>

#include "policy/resources-warn.h"

bool resources_pattern_match(const char *p, const char *s)
{
    /* Iterative glob with one backtrack point: linear enough for names of < 64 chars. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}
