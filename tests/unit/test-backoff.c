/* core/backoff: every caller's schedule (kept exactly as before the callers shared it),
 * the cap without overflow, jitter bounds, reset, the uniform draw. */
#include <stdint.h>

#include "core/backoff.h"
#include "tests/common/check.h"

int test_failures;

/* The first n nominal delays of a policy, checked against want[]. */
static int schedule_is(struct backoff b, const uint64_t *want, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        uint64_t d = backoff_next(&b);
        if (d != want[i] || b.delay_ms != want[i] || b.failures != i + 1)
            return 0;
    }
    return 1;
}

int main(void)
{
    /* Registration: 8 retries 1 ms apart, then doubling from 2 ms to 10 s. */
    static const uint64_t reg[] = { 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 16, 32, 64, 128, 256,
                                    512, 1024, 2048, 4096, 8192, 10000, 10000 };
    CHECK(schedule_is(BACKOFF_INIT(1, 10000, 8, false), reg, sizeof(reg) / sizeof(*reg)));
    /* Serving a resource: 100 ms doubling to 10 s; fast 0 and 1 are the same policy. */
    static const uint64_t start[] = { 100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000 };
    CHECK(schedule_is(BACKOFF_INIT(100, 10000, 0, false), start, 9));
    CHECK(schedule_is(BACKOFF_INIT(100, 10000, 1, false), start, 9));
    /* gRPC accept pause: 10 ms doubling to 1 s. */
    static const uint64_t acc[] = { 10, 20, 40, 80, 160, 320, 640, 1000, 1000 };
    CHECK(schedule_is(BACKOFF_INIT(10, 1000, 0, false), acc, 9));
    /* Label publishing: 1 s doubling to 5 min. */
    static const uint64_t pub[] = { 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000,
                                    256000, 300000, 300000 };
    CHECK(schedule_is(BACKOFF_INIT(1000, 300000, 0, false), pub, 11));

    /* The cap: a huge cap and many failures saturate instead of wrapping to 0. */
    struct backoff big = BACKOFF_INIT(3, UINT64_MAX, 0, false);
    uint64_t prev = 0;
    int monotonic = 1;
    for (int i = 0; i < 200; i++) {
        uint64_t d = backoff_next(&big);
        monotonic &= d >= prev && d != 0;
        prev = d;
    }
    CHECK(monotonic);
    CHECK(big.delay_ms == UINT64_MAX);
    CHECK(backoff_grow(UINT64_MAX / 2 + 1, 1, UINT64_MAX) == UINT64_MAX);
    CHECK(backoff_grow(UINT64_MAX - 1, 1, UINT64_MAX) == UINT64_MAX);
    CHECK(backoff_grow(0, 5, 3) == 3);          /* first above the cap: the cap */
    CHECK(backoff_grow(7, 1, 10) == 10);        /* 14 > 10 */
    CHECK(backoff_grow(20, 1, 10) == 10);       /* above the cap already */
    CHECK(backoff_grow(0, 100, 5000) == 100);   /* the health wait's steps */
    CHECK(backoff_grow(100, 100, 5000) == 200);
    CHECK(backoff_grow(4000, 100, 5000) == 5000);

    /* Reset: the next failure waits first_ms again, and the fast retries come again. */
    struct backoff r = BACKOFF_INIT(1, 10000, 8, false);
    for (int i = 0; i < 30; i++)
        (void)backoff_next(&r);
    CHECK(r.delay_ms == 10000);
    backoff_reset(&r);
    CHECK(r.failures == 0 && r.delay_ms == 0);
    CHECK(schedule_is(r, reg, sizeof(reg) / sizeof(*reg)));

    /* Jitter: always within [d/2, d] of the nominal delay, and not constant. */
    struct backoff j = BACKOFF_INIT(100, 30000, 0, true);
    int in_bounds = 1, varies = 0;
    for (int i = 0; i < 12; i++) {
        uint64_t d = backoff_next(&j);
        in_bounds &= d >= j.delay_ms / 2 && d <= j.delay_ms;
    }
    CHECK(in_bounds);
    CHECK(j.delay_ms == 30000);
    uint64_t first = backoff_jitter(30000);
    for (int i = 0; i < 64; i++) {
        uint64_t d = backoff_jitter(30000);
        in_bounds &= d >= 15000 && d <= 30000;
        varies |= d != first;
    }
    CHECK(in_bounds);
    CHECK(varies);
    CHECK(backoff_jitter(0) == 0);
    CHECK(backoff_jitter(1) <= 1);
    CHECK(backoff_jitter(UINT64_MAX) >= UINT64_MAX / 2);

    /* Uniform in [0, n): bounds, and over 4000 draws in 10 buckets each gets 280-520
     * (a fixed or clustered value fails; a false failure: below 1e-8). */
    unsigned buckets[10] = { 0 };
    in_bounds = 1;
    for (int i = 0; i < 4000; i++) {
        uint64_t v = backoff_random_below(300);
        in_bounds &= v < 300;
        buckets[v < 300 ? v / 30 : 0]++;
    }
    CHECK(in_bounds);
    for (int i = 0; i < 10; i++)
        CHECK(buckets[i] >= 280 && buckets[i] <= 520);
    CHECK(backoff_random_below(0) == 0);
    CHECK(backoff_random_below(1) == 0);

    /* After an outage: within [0, min(outage, cap)], over the whole of it. */
    uint64_t lo = UINT64_MAX, hi = 0;
    in_bounds = 1;
    for (int i = 0; i < 400; i++) {
        uint64_t a = backoff_after_outage(500, 30000), b = backoff_after_outage(600000, 30000);
        in_bounds &= a <= 500 && b <= 30000;
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    CHECK(in_bounds);
    CHECK(lo < 3000 && hi > 27000);
    CHECK(backoff_after_outage(0, 30000) == 0);
    CHECK(backoff_after_outage(UINT64_MAX, UINT64_MAX) < UINT64_MAX);
    return test_failures ? 1 : 0;
}
