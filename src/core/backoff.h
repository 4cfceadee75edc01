/* Capped exponential backoff: the one policy behind every retry timer (kubelet
 * registration, serving a resource, the gRPC listener's accept pause, the API client's
 * reconnect and watch retry, label publishing). Callers differ only in parameters.
 *
 * The n-th failure in a row (n = 0, 1, ...) waits
 *     first_ms                                   while n < fast (at least once),
 *     min(first_ms * 2^(n - fast + 1), max_ms)   after that,
 * so fast = 8 gives eight retries first_ms apart and then doubles from 2 * first_ms;
 * fast = 0 or 1 doubles from the second retry. The doubling saturates at max_ms
 * without overflowing, however many failures there are. With jitter the wait is a
 * random point in the upper half [d/2, d] of the nominal delay d, so that clients that
 * failed together (an API server restart) do not retry in lock-step.
 *
 * Plain data, no clock, no allocation: one per retrying thing, owned by its caller. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct backoff {
    /* policy */
    uint64_t first_ms; /* >= 1 */
    uint64_t max_ms;   /* >= first_ms */
    unsigned fast;     /* failures that wait first_ms before the doubling starts */
    bool jitter;
    /* state */
    unsigned failures; /* in a row, since backoff_reset() */
    uint64_t delay_ms; /* nominal delay of the last backoff_next() (no jitter); 0 before */
};

#define BACKOFF_INIT(first, max, fast_, jitter_)                                           \
    ((struct backoff){ .first_ms = (first), .max_ms = (max), .fast = (fast_),             \
                       .jitter = (jitter_) })

/* One more failure: how long to wait before the next try (jittered if asked). */
uint64_t backoff_next(struct backoff *b);

/* Success (or a new start): the next failure waits first_ms again. */
void backoff_reset(struct backoff *b);

/* The doubling step alone, for a caller that keeps only its current delay: prev_ms 0
 * gives first_ms, else min(2 * prev_ms, max_ms), saturating. */
uint64_t backoff_grow(uint64_t prev_ms, uint64_t first_ms, uint64_t max_ms);

/* A random point in [ms/2, ms] (getrandom: an unseeded random() would give every
 * process restarted together the same sequence, the lock-step jitter is there to avoid). */
uint64_t backoff_jitter(uint64_t ms);

/* A uniformly random value in [0, n) (0 when n is 0), from the same source. For spreading
 * what is not a retry: the API client's watch timeouts, the first try after an outage. */
uint64_t backoff_random_below(uint64_t n);

/* The wait before the first try once a peer that was unreachable for outage_ms answers
 * again: a random point in [0, min(outage_ms, cap_ms)]. Clients that lost the peer
 * together do not all come back in the same second, and a brief blip still recovers in
 * about its own length. */
uint64_t backoff_after_outage(uint64_t outage_ms, uint64_t cap_ms);
