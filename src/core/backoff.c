/* Capped exponential backoff with optional jitter and fast retries; the policy is in
 * backoff.h. */
#include <sys/random.h>

#include "backoff.h"
#include "loop.h"

uint64_t backoff_grow(uint64_t prev_ms, uint64_t first_ms, uint64_t max_ms)
{
    if (prev_ms == 0)
        return first_ms < max_ms ? first_ms : max_ms;
    if (prev_ms >= max_ms || prev_ms > UINT64_MAX / 2)
        return max_ms;
    return prev_ms * 2 < max_ms ? prev_ms * 2 : max_ms;
}

uint64_t backoff_random_below(uint64_t n)
{
    uint64_t x = 0;
    if (n == 0)
        return 0;
    if (getrandom(&x, sizeof(x), GRND_NONBLOCK) != (ssize_t)sizeof(x))
        x = loop_now_us();
    /* The modulo bias is below n / 2^64: nothing for the delays this spreads. */
    return x % n;
}

uint64_t backoff_after_outage(uint64_t outage_ms, uint64_t cap_ms)
{
    uint64_t span = outage_ms < cap_ms ? outage_ms : cap_ms;
    return span == UINT64_MAX ? backoff_random_below(span) : backoff_random_below(span + 1);
}

uint64_t backoff_jitter(uint64_t ms)
{
    return ms / 2 + backoff_random_below(ms / 2 + 1);
}

uint64_t backoff_next(struct backoff *b)
{
    unsigned fast = b->fast ? b->fast : 1;
    b->delay_ms = b->failures < fast ? backoff_grow(0, b->first_ms, b->max_ms)
                                     : backoff_grow(b->delay_ms, b->first_ms, b->max_ms);
    if (b->failures < UINT32_MAX)
        b->failures++;
    return b->jitter ? backoff_jitter(b->delay_ms) : b->delay_ms;
}

void backoff_reset(struct backoff *b)
{
    b->failures = 0;
    b->delay_ms = 0;
}
