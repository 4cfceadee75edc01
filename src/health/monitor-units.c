/* The health monitor's answers about its units, and the MIG devices DynamicMIG makes and
 * destroys between discoveries (see monitor.h). Loop thread only, as monitor.c. */
#include <stdio.h>

#include "health/monitor-internal.h"

void hm_set_migs(struct hm_gpu *dst, const struct inv_mig *migs, size_t n, const struct hm_gpu *prev)
{
    struct hm_mig *out = xcalloc(n ? n : 1, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        struct hm_mig *mig = &out[i];
        snprintf(mig->uuid, sizeof(mig->uuid), "%s", migs[i].uuid);
        mig->gi = migs[i].gi_id;
        mig->ci = migs[i].ci_id;
        for (size_t j = 0; prev && j < prev->n_migs; j++)
            if (streq(prev->migs[j].uuid, mig->uuid))
                mig->unit = prev->migs[j].unit;
    }
    dst->migs = out;
    dst->n_migs = n;
}

int health_monitor_set_migs(struct health_monitor *m, int gpu, const struct inv_mig *migs, size_t n)
{
    if (!m || gpu < 0 || (size_t)gpu >= m->n_gpus)
        return -ENOENT;
    struct hm_gpu *g = &m->gpus[gpu];
    /* called after every DRA call: unchanged (the common case) costs no allocation */
    bool same = g->n_migs == n;
    for (size_t i = 0; same && i < n; i++)
        same = streq(g->migs[i].uuid, migs[i].uuid) && g->migs[i].gi == migs[i].gi_id &&
               g->migs[i].ci == migs[i].ci_id;
    if (same)
        return 0;
    struct hm_gpu old = *g;
    hm_set_migs(g, migs, n, &old);
    free(old.migs);
    return 0;
}

int health_monitor_mig_index(const struct health_monitor *m, int gpu, const char *uuid)
{
    if (!m || gpu < 0 || (size_t)gpu >= m->n_gpus || !uuid)
        return -1;
    for (size_t i = 0; i < m->gpus[gpu].n_migs; i++)
        if (streq(m->gpus[gpu].migs[i].uuid, uuid))
            return (int)i;
    return -1;
}

bool health_monitor_healthy(const struct health_monitor *m, int gpu, int mig,
                            const char **reason)
{
    const struct health_unit *u;

    if (reason)
        *reason = "";
    if (!m)
        return true;
    if (gpu < 0 || (size_t)gpu >= m->n_gpus || mig < -1 ||
        (mig >= 0 && (size_t)mig >= m->gpus[gpu].n_migs)) {
        if (reason)
            *reason = "unknown device";
        return false;
    }
    if (!active(m))
        return true;
    u = mig < 0 ? &m->gpus[gpu].unit : &m->gpus[gpu].migs[mig].unit;
    if (!health_unit_healthy(u)) {
        if (reason)
            *reason = u->reason;
        return false;
    }
    if (m->wait_failing) {
        if (reason)
            *reason = m->wait_reason;
        return false;
    }
    return true;
}

uint64_t health_monitor_last_xid(const struct health_monitor *m, int gpu, int mig)
{
    if (!m || gpu < 0 || (size_t)gpu >= m->n_gpus ||
        (mig >= 0 && (size_t)mig >= m->gpus[gpu].n_migs))
        return 0;
    return mig < 0 ? m->gpus[gpu].unit.xid : m->gpus[gpu].migs[mig].unit.xid;
}

void health_monitor_count_xids(struct health_monitor *m, struct metrics_family *f) { m->xids = f; }

void health_monitor_counters(const struct health_monitor *m, struct health_counters *out)
{
    *out = (struct health_counters){ 0 };
    if (!m)
        return;
    out->events = m->events;
    out->ignored = m->ignored;
    out->unhealthy_transitions = m->transitions;
    out->recoveries = m->recoveries;
    out->wait_errors = m->waiter ? hm_waiter_errors(m->waiter) : 0;
}
