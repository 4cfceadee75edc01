/* The health monitor: NVML event registration, the thread that blocks in
 * nvmlEventSetWait, and the loop-side state that the device-plugin service reads.
 *
 * Threads: everything here is called on the loop thread. The monitor owns one extra
 * thread that only waits for NVML events and hands them to the loop through an
 * eventfd (and a mutex-protected queue); the decisions (policy/health.h), probes and
 * timers all run on the loop. The policy is in policy/health.h, which also declares
 * health_config_load(). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/loop.h"
#include "node/inventory.h"
#include "policy/health.h"

struct health_monitor;

/* Called on the loop thread whenever the health of any device changed. */
typedef void (*health_changed_fn)(void *userdata);

/* Registers events for every GPU of inv and starts the wait thread. NVML must be open
 * (nvml_open) and stay open until after health_monitor_stop(). inv and hc are copied:
 * the caller may free them at any time. Per-device registration failures mark that
 * device Unhealthy (NOT_SUPPORTED: warning "too old", stays Healthy) and are not
 * errors; a failure to create the event set is. Health checks disabled: no thread,
 * everything Healthy. The initial health (registration failures) can be read as soon
 * as this returns; fn is only called for later changes. */
int health_monitor_start(struct loop *l, const struct inventory *inv,
                         const struct health_config *hc, health_changed_fn fn, void *userdata,
                         struct health_monitor **out, struct error *err);

/* Stops the thread and frees everything. NULL ok. NVML offers no way to interrupt a
 * wait, so this returns when the thread's current nvml_event_wait() does: at most the
 * configured waitTimeout (default 1 s). */
void health_monitor_stop(struct health_monitor *m);

/* gpu: index into inv->gpus; mig: -1 for the full GPU, else index into
 * gpus[gpu].migs. *reason (may be NULL) is set to "" for a healthy device, else to a
 * monitor-owned string valid until the next loop iteration, e.g.
 * "Xid 48 (double-bit ECC error), never auto-recovers". */
bool health_monitor_healthy(const struct health_monitor *m, int gpu, int mig,
                            const char **reason);

/* Counters for metrics. */
struct health_counters {
    uint64_t events, ignored, unhealthy_transitions, recoveries, wait_errors;
};
void health_monitor_counters(const struct health_monitor *m, struct health_counters *out);
