/* core/suggest: the edit distance (with transpositions) and the closest-word choice
 * behind "unknown flag --mig-stratgy; did you mean --mig-strategy?". */
#include <stdio.h>
#include <string.h>

#include "core/suggest.h"
#include "tests/common/check.h"

int test_failures;

static size_t dist(const char *a, const char *b)
{
    return suggest_distance(a, strlen(a), b, strlen(b));
}

static const char *closest(const char *word, const char *const *cands)
{
    struct suggest s;
    suggest_init(&s, word, strlen(word));
    for (; *cands; cands++)
        suggest_offer(&s, *cands);
    return suggest_best(&s);
}

int main(void)
{
    CHECK(dist("", "") == 0);
    CHECK(dist("abc", "abc") == 0);
    CHECK(dist("", "abc") == 3);
    CHECK(dist("kitten", "sitting") == 3);
    CHECK(dist("mig-stratgy", "mig-strategy") == 1);   /* insertion */
    CHECK(dist("mig-strategy", "mig-stratgy") == 1);   /* deletion */
    CHECK(dist("mig-strategy", "mig-strategx") == 1);  /* substitution */
    CHECK(dist("mig-startegy", "mig-strategy") == 1);  /* transposition: 1, not 2 */
    CHECK(dist("ca", "abc") == 3);                     /* optimal string alignment */
    char longw[SUGGEST_MAX_LEN + 2];
    memset(longw, 'a', sizeof(longw) - 1);
    longw[sizeof(longw) - 1] = 0;
    CHECK(dist(longw, "a") == SUGGEST_FAR);

    static const char *const flags[] = { "mig-strategy", "fail-on-init-error", "driver-root",
                                         "dev-root", "v", "help", "h", "output", NULL };
    CHECK_STR(closest("mig-stratgy", flags), "mig-strategy");
    CHECK_STR(closest("fail-on-init-eror", flags), "fail-on-init-error");
    CHECK_STR(closest("hepl", flags), "help");
    CHECK_STR(closest("outptu", flags), "output");
    CHECK_STR(closest("drv-root", flags), "dev-root");
    /* ties keep the first offered */
    static const char *const tie[] = { "ab", "ba", NULL };
    CHECK_STR(closest("aa", tie), "ab");
    /* nothing close: no suggestion */
    CHECK(closest("bogus", flags) == NULL);
    CHECK(closest("kubelet-socket", flags) == NULL);
    /* the limit grows with the word: 3 edits in 12 letters are still close... */
    CHECK_STR(closest("mig-strtgyy", flags), "mig-strategy");
    /* ...but a one-letter word suggests nothing (any one-letter flag is 1 away) */
    CHECK(closest("x", flags) == NULL);
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
