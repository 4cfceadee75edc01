/* Log rate limiting: interval + burst, with the count of lines left out; the policy is
 * in ratelimit.h. */
#include "ratelimit.h"
#include "loop.h"

bool ratelimit_below_at(struct ratelimit *r, uint64_t now_ms, unsigned *suppressed)
{
    unsigned burst = r->burst ? r->burst : 1;
    if (!r->started || now_ms < r->begin_ms || now_ms - r->begin_ms >= r->interval_ms) {
        r->started = true;
        r->begin_ms = now_ms;
        r->num = 0;
    }
    if (r->num >= burst) {
        if (r->suppressed < UINT32_MAX)
            r->suppressed++;
        return false;
    }
    r->num++;
    if (suppressed)
        *suppressed = r->suppressed;
    r->suppressed = 0;
    return true;
}

bool ratelimit_below(struct ratelimit *r, unsigned *suppressed)
{
    return ratelimit_below_at(r, loop_now_ms(), suppressed);
}
