/* Token bucket with whole tokens and exact refill times; the policy is in
 * tokenbucket.h. */
#include "tokenbucket.h"

/* Credit the periods that have passed since b->at, up to the burst. */
static void refill(struct tokenbucket *b, uint64_t now)
{
    uint64_t period = b->period ? b->period : 1;
    unsigned burst = b->burst ? b->burst : 1;
    if (b->tokens >= burst) {
        b->tokens = burst;
        return;
    }
    if (now <= b->at)
        return;
    uint64_t n = (now - b->at) / period;
    if (n >= burst - b->tokens) {
        b->tokens = burst;
        return;
    }
    b->tokens += (unsigned)n;
    b->at += n * period;
}

bool tokenbucket_take(struct tokenbucket *b, uint64_t now)
{
    refill(b, now);
    if (b->tokens == 0)
        return false;
    if (b->tokens == (b->burst ? b->burst : 1))
        b->at = now; /* leaving full: the next token is a period from now */
    b->tokens--;
    return true;
}

uint64_t tokenbucket_wait(struct tokenbucket *b, uint64_t now)
{
    refill(b, now);
    if (b->tokens > 0)
        return 0;
    /* No token: refill() found now < at + period. */
    return b->at + (b->period ? b->period : 1) - now;
}
