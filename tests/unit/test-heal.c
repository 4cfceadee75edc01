/* core/heal: the one pacing of the self-healing writers (labels, ResourceSlices).
 * Retries: capped backoff, jittered (the labels' copy had none: every node's publisher
 * retried in lock-step after an API server outage), a reason said once; restores: the
 * burst, then one per period, the "keep being changed" line once per window; lines
 * about restores: the burst per window, and a suffix only when lines were left out (the
 * ResourceSlices' copy printed "(0 more not logged)" on every line). */
#include <stdint.h>

#include "core/heal.h"
#include "tests/common/check.h"

int test_failures;

static void retries(void)
{
    struct heal h = { 0 };
    heal_init(&h);
    bool is_new = false;

    /* The first failure of a run: in the upper half of HEAL_RETRY_MIN_MS, and not always
     * the same (64 draws from 501 values all equal: about 1 in 10^170). */
    bool differ = false;
    uint64_t first = 0;
    for (int i = 0; i < 64; i++) {
        uint64_t d = heal_failed(&h, "HTTP 503", &is_new);
        CHECK(d >= HEAL_RETRY_MIN_MS / 2 && d <= HEAL_RETRY_MIN_MS);
        CHECK(is_new); /* after a success the reason is new again */
        if (i == 0)
            first = d;
        differ |= d != first;
        heal_failed(&h, "HTTP 503", &is_new);
        CHECK(!is_new); /* one warning per reason */
        CHECK(heal_succeeded(&h)); /* ends a run of failures: "works again" */
    }
    CHECK(differ);
    CHECK(!heal_succeeded(&h)); /* nothing failed: nothing to say */
    CHECK(h.error == NULL);

    /* Doubling, jittered, up to the cap and no further; a new reason is new again. */
    uint64_t d = 0;
    for (int i = 0; i < 40; i++) {
        d = heal_failed(&h, i < 30 ? "HTTP 503" : "connection refused", &is_new);
        CHECK(is_new == (i == 0 || i == 30));
        CHECK(d <= HEAL_RETRY_MAX_MS);
    }
    CHECK(d >= HEAL_RETRY_MAX_MS / 2);
    CHECK_STR(h.error, "connection refused");
    CHECK(heal_succeeded(&h));
    d = heal_failed(&h, "HTTP 503", &is_new);
    CHECK(d <= HEAL_RETRY_MIN_MS); /* back to the start */
    heal_clear(&h);
    CHECK(h.error == NULL);
}

static void restores(void)
{
    struct heal h = { 0 };
    heal_init(&h);
    bool warn = true;
    char more[HEAL_MORE_MAX];
    uint64_t t = 1000;

    for (unsigned i = 0; i < HEAL_RESTORE_BURST; i++)
        CHECK(heal_restore_at(&h, t, &warn, more) == 0 && !warn);
    /* Past the burst: wait for the next token, say so once, with no "(0 more ...)". */
    CHECK(heal_restore_at(&h, t, &warn, more) == HEAL_RESTORE_PERIOD_MS);
    CHECK(warn);
    CHECK_STR(more, "");
    CHECK(heal_restore_at(&h, t + 4000, &warn, more) == HEAL_RESTORE_PERIOD_MS - 4000);
    CHECK(!warn);
    CHECK(heal_restore_at(&h, t + 5000, &warn, more) > 0 && !warn);
    CHECK(heal_restore_at(&h, t + HEAL_RESTORE_PERIOD_MS, &warn, more) == 0);
    /* The next window: the line again, counting the two left out. */
    t += HEAL_LOG_MS;
    for (unsigned i = 0; i < HEAL_RESTORE_BURST; i++)
        heal_restore_at(&h, t, &warn, more);
    CHECK(heal_restore_at(&h, t, &warn, more) > 0 && warn);
    CHECK_STR(more, " (2 more not logged)");
    heal_clear(&h);
}

static void lines(void)
{
    struct heal h = { 0 };
    heal_init(&h);
    char more[HEAL_MORE_MAX] = "junk";
    for (unsigned i = 0; i < HEAL_LOG_BURST; i++) {
        CHECK(heal_say_at(&h, 0, more));
        CHECK_STR(more, ""); /* never "(0 more not logged)" */
    }
    CHECK(!heal_say_at(&h, 1, more));
    CHECK(!heal_say_at(&h, HEAL_LOG_MS - 1, more));
    CHECK(heal_say_at(&h, HEAL_LOG_MS, more));
    CHECK_STR(more, " (2 more not logged)");
    CHECK(heal_say_at(&h, HEAL_LOG_MS, more));
    CHECK_STR(more, "");
    heal_clear(&h);

    CHECK_STR(heal_more(0, more), "");
    CHECK_STR(heal_more(1, more), " (1 more not logged)");
    CHECK_STR(heal_more(UINT32_MAX, more), " (4294967295 more not logged)");
}

int main(void)
{
    retries();
    restores();
    lines();
    return test_failures ? 1 : 0;
}
