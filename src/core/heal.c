/* The self-healing writer's retry, restore and log pacing; the policy is in heal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heal.h"
#include "loop.h"
#include "macro.h"

void heal_init(struct heal *h)
{
    free(h->error);
    *h = (struct heal){
        .retry = BACKOFF_INIT(HEAL_RETRY_MIN_MS, HEAL_RETRY_MAX_MS, 0, true),
        .restore = TOKENBUCKET_INIT(HEAL_RESTORE_PERIOD_MS, HEAL_RESTORE_BURST),
        .restore_log = RATELIMIT_INIT(HEAL_LOG_MS, HEAL_LOG_BURST),
        .flap_log = RATELIMIT_INIT(HEAL_LOG_MS, 1),
    };
}

void heal_clear(struct heal *h)
{
    free(h->error);
    h->error = NULL;
}

uint64_t heal_failed(struct heal *h, const char *why, bool *is_new)
{
    why = why ? why : "unknown error";
    *is_new = !h->error || strcmp(h->error, why) != 0;
    if (*is_new) {
        free(h->error);
        h->error = xstrdup(why);
    }
    return backoff_next(&h->retry);
}

bool heal_succeeded(struct heal *h)
{
    bool was_failing = h->error != NULL;
    backoff_reset(&h->retry);
    free(h->error);
    h->error = NULL;
    return was_failing;
}

const char *heal_more(unsigned n, char buf[HEAL_MORE_MAX])
{
    buf[0] = 0;
    if (n)
        snprintf(buf, HEAL_MORE_MAX, " (%u more not logged)", n);
    return buf;
}

uint64_t heal_restore_at(struct heal *h, uint64_t now_ms, bool *warn, char more[HEAL_MORE_MAX])
{
    unsigned left_out = 0;
    *warn = false;
    more[0] = 0;
    if (tokenbucket_take(&h->restore, now_ms))
        return 0;
    if (ratelimit_below_at(&h->flap_log, now_ms, &left_out)) {
        *warn = true;
        heal_more(left_out, more);
    }
    uint64_t wait_ms = tokenbucket_wait(&h->restore, now_ms);
    return wait_ms ? wait_ms : 1;
}

uint64_t heal_restore(struct heal *h, bool *warn, char more[HEAL_MORE_MAX])
{
    return heal_restore_at(h, loop_now_ms(), warn, more);
}

bool heal_say_at(struct heal *h, uint64_t now_ms, char more[HEAL_MORE_MAX])
{
    unsigned left_out = 0;
    more[0] = 0;
    if (!ratelimit_below_at(&h->restore_log, now_ms, &left_out))
        return false;
    heal_more(left_out, more);
    return true;
}

bool heal_say(struct heal *h, char more[HEAL_MORE_MAX])
{
    return heal_say_at(h, loop_now_ms(), more);
}
