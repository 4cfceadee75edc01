/* A token bucket: `burst` tokens, one more every `period` while below the burst. The
 * one policy behind the API client's request rate limit (client-go's QPS and burst) and
 * the Event spam filter (client-go's EventSourceObjectSpamFilter: 25, then one per
 * 5 min).
 *
 * Time is whatever unit the caller passes (the API client µs, the Event cache ms),
 * `period` in the same unit; monotonic is expected, but a clock that goes backwards
 * only delays the refill, never adds tokens. Tokens are whole: a bucket that leaves
 * full at t has its next token at t + period, t + 2 * period, ..., exactly, however
 * often it is asked in between. Plain data, owned by the caller, not thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct tokenbucket {
    /* policy */
    uint64_t period;  /* >= 1 */
    unsigned burst;   /* >= 1 */
    /* state */
    unsigned tokens;
    uint64_t at;      /* below the burst: the time refills are counted from */
};

/* Full at the start. */
#define TOKENBUCKET_INIT(period_, burst_)                                                  \
    ((struct tokenbucket){ .period = (period_), .burst = (burst_), .tokens = (burst_) })

/* Take a token at `now` if there is one. */
bool tokenbucket_take(struct tokenbucket *b, uint64_t now);

/* How long from `now` until a token is there (0: one is there now). */
uint64_t tokenbucket_wait(struct tokenbucket *b, uint64_t now);
