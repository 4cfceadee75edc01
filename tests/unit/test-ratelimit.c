/* core/ratelimit: one line per window with burst 1 (the gRPC and metrics listeners'
 * policy), burst exhaustion and the next window, the "(N more not logged)" count,
 * equal timestamps and a clock that goes backwards. */
#include <stdint.h>

#include "core/ratelimit.h"
#include "tests/common/check.h"

int test_failures;

int main(void)
{
    unsigned sup = 99;

    /* Burst 1, 10 s: the first line passes, with nothing left out before it. */
    struct ratelimit r = RATELIMIT_INIT(10000, 1);
    CHECK(ratelimit_below_at(&r, 0, &sup) && sup == 0); /* t = 0 is a time like any other */
    CHECK(!ratelimit_below_at(&r, 0, &sup));             /* equal timestamp: same window */
    CHECK(!ratelimit_below_at(&r, 5000, &sup));
    CHECK(!ratelimit_below_at(&r, 9999, &sup));
    sup = 99;
    CHECK(ratelimit_below_at(&r, 10000, &sup) && sup == 3); /* window end: the next one */
    CHECK(r.suppressed == 0);
    CHECK(!ratelimit_below_at(&r, 10001, NULL));
    sup = 99;
    CHECK(ratelimit_below_at(&r, 50000, &sup) && sup == 1); /* a long quiet: one window */

    /* Burst 3: three lines, then refused; the count goes to the first of the next window. */
    struct ratelimit b = RATELIMIT_INIT(1000, 3);
    int passed = 0;
    for (int i = 0; i < 10; i++)
        passed += ratelimit_below_at(&b, 100 + (uint64_t)i, &sup);
    CHECK(passed == 3);
    CHECK(b.suppressed == 7);
    passed = 0;
    sup = 99;
    CHECK(ratelimit_below_at(&b, 1100, &sup) && sup == 7);
    for (int i = 0; i < 5; i++)
        passed += ratelimit_below_at(&b, 1100, &sup); /* equal timestamps */
    CHECK(passed == 2);

    /* Burst 0 is taken as 1. */
    struct ratelimit z = RATELIMIT_INIT(1000, 0);
    CHECK(ratelimit_below_at(&z, 5, NULL));
    CHECK(!ratelimit_below_at(&z, 6, NULL));

    /* A clock that goes backwards starts a new window rather than silencing the limiter
     * until it catches up. */
    struct ratelimit k = RATELIMIT_INIT(60000, 1);
    CHECK(ratelimit_below_at(&k, 1000000, NULL));
    CHECK(!ratelimit_below_at(&k, 1000001, NULL));
    sup = 99;
    CHECK(ratelimit_below_at(&k, 5, &sup) && sup == 1);
    CHECK(!ratelimit_below_at(&k, 6, NULL));
    CHECK(ratelimit_below_at(&k, 60005, NULL));

    /* Near the end of the clock: no overflow in the window arithmetic. */
    struct ratelimit e = RATELIMIT_INIT(UINT64_MAX, 1);
    CHECK(ratelimit_below_at(&e, UINT64_MAX - 1, NULL));
    CHECK(!ratelimit_below_at(&e, UINT64_MAX, NULL));

    /* The loop clock: a second call at once is refused. */
    struct ratelimit l = RATELIMIT_INIT(60000, 1);
    CHECK(ratelimit_below(&l, &sup) && sup == 0);
    CHECK(!ratelimit_below(&l, &sup));
    return test_failures ? 1 : 0;
}
