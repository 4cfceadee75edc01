/* What the health monitor's loop-side files share (monitor.c: events, probes, reloads;
 * monitor-units.c: the answers about units and the MIG devices DynamicMIG makes and
 * destroys): the units and the monitor. Nothing outside src/health includes this. */
#pragma once

#include "health/monitor.h"
#include "health/monitor-wait.h"

struct hm_mig {
    char uuid[INV_UUID_MAX];
    unsigned gi, ci;
    struct health_unit unit;
};

struct hm_gpu {
    char uuid[INV_UUID_MAX];
    struct health_unit unit;
    bool needs_register;       /* registration failed: retry after a good probe */
    struct hm_mig *migs;
    size_t n_migs;
};

struct health_monitor {
    struct loop *loop;
    struct health_config hc;   /* private copy */
    health_changed_fn fn;
    void *userdata;

    struct hm_gpu *gpus;
    size_t n_gpus;

    struct hm_waiter *waiter;  /* NULL until health checks are first enabled */

    struct loop_timer *timer;
    uint64_t timer_at;

    bool wait_failing;         /* loop-side view of the waiter's state */
    char wait_reason[200];

    uint64_t events, ignored, transitions, recoveries;
    struct metrics_family *xids; /* counts every Xid handed over, by code */
};

/* Health checks on: events count, probes run. Off (disabled by config, or the event
 * set could not be made): everything is Healthy. */
static inline bool active(const struct health_monitor *m)
{
    return m->waiter && !m->hc.disabled;
}

/* dst's MIG units: migs (n), each taking the health its UUID had in prev (may be NULL). */
void hm_set_migs(struct hm_gpu *dst, const struct inv_mig *migs, size_t n, const struct hm_gpu *prev);
