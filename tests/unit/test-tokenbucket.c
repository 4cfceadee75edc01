/* core/tokenbucket: the API client's (5 per second, burst 10) and the Event filter's
 * (25, then one per 5 min) policies: burst exhaustion, refill at exact times, the wait
 * until the next token, equal timestamps, a clock that goes backwards, overflow. */
#include <stdint.h>

#include "core/tokenbucket.h"
#include "tests/common/check.h"

int test_failures;

int main(void)
{
    /* API client: 5 per second (period 200 ms in µs), burst 10. */
    struct tokenbucket b = TOKENBUCKET_INIT(200000, 10);
    int taken = 0;
    for (int i = 0; i < 15; i++)
        taken += tokenbucket_take(&b, 1000000); /* equal timestamps: the burst only */
    CHECK(taken == 10);
    CHECK(tokenbucket_wait(&b, 1000000) == 200000);
    CHECK(tokenbucket_wait(&b, 1100000) == 100000);
    CHECK(!tokenbucket_take(&b, 1199999));
    CHECK(tokenbucket_take(&b, 1200000)); /* exactly one period after leaving full */
    CHECK(!tokenbucket_take(&b, 1200000));
    CHECK(tokenbucket_wait(&b, 1250000) == 150000);
    /* Refills counted from exact period boundaries however often it is asked. */
    for (uint64_t t = 1200001; t < 1400000; t += 7001)
        CHECK(!tokenbucket_take(&b, t));
    CHECK(tokenbucket_take(&b, 1400000));
    /* A long quiet refills to the burst, not beyond. */
    taken = 0;
    for (int i = 0; i < 20; i++)
        taken += tokenbucket_take(&b, 100000000);
    CHECK(taken == 10);

    /* Events: 25 at once, then one per 5 minutes (ms). */
    struct tokenbucket e = TOKENBUCKET_INIT(300000, 25);
    taken = 0;
    for (int i = 0; i < 43; i++)
        taken += tokenbucket_take(&e, 5000);
    CHECK(taken == 25);
    CHECK(!tokenbucket_take(&e, 304999));
    CHECK(tokenbucket_take(&e, 305000));
    CHECK(!tokenbucket_take(&e, 305000));
    /* Two periods later: two tokens (the grid stays at 5000 + k * 300000). */
    CHECK(tokenbucket_take(&e, 905000));
    CHECK(tokenbucket_take(&e, 905000));
    CHECK(!tokenbucket_take(&e, 905000));
    CHECK(tokenbucket_wait(&e, 905000) == 300000);

    /* Partly drained, then a take while not full: the grid is not reset by it. */
    struct tokenbucket p = TOKENBUCKET_INIT(100, 3);
    CHECK(tokenbucket_take(&p, 0));   /* 2 left, next token at 100 */
    CHECK(tokenbucket_take(&p, 50));  /* 1 left */
    CHECK(tokenbucket_take(&p, 60));  /* 0 left */
    CHECK(!tokenbucket_take(&p, 99));
    CHECK(tokenbucket_take(&p, 100)); /* not 150 or 160 */
    CHECK(tokenbucket_take(&p, 200));
    CHECK(tokenbucket_take(&p, 300)); /* 0 left, due at 400 */
    CHECK(!tokenbucket_take(&p, 300));

    /* A clock that goes backwards adds no tokens. */
    CHECK(!tokenbucket_take(&p, 10));
    CHECK(!tokenbucket_take(&p, 0));
    CHECK(tokenbucket_wait(&p, 350) == 50);
    CHECK(tokenbucket_take(&p, 400));

    /* Overflow: a period of 1 and a time far ahead saturate at the burst. */
    struct tokenbucket o = TOKENBUCKET_INIT(1, 4);
    for (int i = 0; i < 4; i++)
        CHECK(tokenbucket_take(&o, 0));
    CHECK(!tokenbucket_take(&o, 0));
    taken = 0;
    for (int i = 0; i < 10; i++)
        taken += tokenbucket_take(&o, UINT64_MAX);
    CHECK(taken == 4);
    CHECK(o.tokens == 0);

    /* A period longer than the clock: no token comes back, no wrap. */
    struct tokenbucket l = TOKENBUCKET_INIT(UINT64_MAX, 1);
    CHECK(tokenbucket_take(&l, 0));
    CHECK(!tokenbucket_take(&l, UINT64_MAX - 1));
    CHECK(tokenbucket_wait(&l, 1) == UINT64_MAX - 1);
    return test_failures ? 1 : 0;
}
