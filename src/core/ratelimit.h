/* Rate limiting of log lines a peer or a flood can provoke: at most `burst` lines per
 * `interval_ms` window, and the line that gets through next says how many were left
 * out ("(N more not logged)"). The one policy behind the gRPC server's and the
 * metrics listener's warnings, as systemd's ratelimit.h is for journald.
 *
 * A window starts at the first line after the previous window ended (not on a fixed
 * grid) and lasts interval_ms: a line at exactly begin + interval_ms starts the next
 * one. A clock that goes backwards starts a new window too: better one line too many
 * than a limiter silent until the clock catches up.
 *
 * Plain data: one per kind of line, owned by its caller, not thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct ratelimit {
    /* policy */
    uint64_t interval_ms;
    unsigned burst;       /* lines per window; 0 is taken as 1 */
    /* state */
    bool started;         /* a window has begun */
    uint64_t begin_ms;    /* when the current window began */
    unsigned num;         /* lines let through in it */
    unsigned suppressed;  /* refused since the last line let through */
};

#define RATELIMIT_INIT(interval, burst_)                                                   \
    ((struct ratelimit){ .interval_ms = (interval), .burst = (burst_) })

/* May a line be logged at now_ms? If so, *suppressed (may be NULL) gets how many were
 * refused since the last one let through, and the count starts over. */
bool ratelimit_below_at(struct ratelimit *r, uint64_t now_ms, unsigned *suppressed);

/* The same on the loop's monotonic clock (loop_now_ms). */
bool ratelimit_below(struct ratelimit *r, unsigned *suppressed);
