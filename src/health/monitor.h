/* The health monitor: NVML event registration, the thread that blocks in
 * nvmlEventSetWait, and the loop-side state that the device-plugin service reads.
 *
 * One monitor per process: it is started once, retargeted on every reload (new
 * inventory, new config) and stopped at exit, so reloads leave no thread or fd behind.
 *
 * Threads: everything here is called on the loop thread. The monitor owns one extra
 * thread that only waits for NVML events and hands them to the loop through an
 * eventfd (and a mutex-protected queue); the decisions (policy/health.h), probes and
 * timers all run on the loop. The settings are config/config-health.h. */
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
 * (nvml_open) whenever health checks are enabled here or by a retarget; the monitor
 * then takes its own NVML reference, so the caller may close its own afterwards. inv
 * and hc are copied: the caller may free them at any time. Per-device registration
 * failures mark that device Unhealthy (NOT_SUPPORTED: warning "too old", stays
 * Healthy) and are not errors; a failure to create the event set is. A GPU with
 * inv_gpu.lost starts Unhealthy (lost) and is registered once a probe finds it. Health
 * checks disabled: no thread, everything Healthy. The initial health can be read as
 * soon as this returns; fn is only called for later changes, on the loop. */
int health_monitor_start(struct loop *l, const struct inventory *inv,
                         const struct health_config *hc, health_changed_fn fn, void *userdata,
                         struct health_monitor **out, struct error *err);

/* Switch to a new inventory and config (a reload). Units keep their health by UUID
 * (GPU UUID, MIG UUID) and GPU/MIG indices follow the new inventory; GPUs new to the
 * monitor are registered in the same event set (NVML has no unregister: a removed GPU's
 * events are recognised and ignored). A config that disables health checks makes
 * everything Healthy and events ignored; one that enables them again starts from
 * Healthy. Wait timeout and backoff changes apply from the thread's next wait. fn is
 * not called: the caller re-reads health for the new inventory. Failing to enable
 * health checks (event set or thread) returns an error; the monitor then carries on
 * with checks off (everything Healthy) and a later retarget tries again. */
int health_monitor_retarget(struct health_monitor *m, const struct inventory *inv,
                            const struct health_config *hc, struct error *err);

/* Frees everything; called once, at exit. NULL ok. NVML offers no way to interrupt a
 * wait, so the thread is told to stop and detached: it frees the event set and drops
 * its NVML reference when its current wait returns. Returns at once. */
void health_monitor_stop(struct health_monitor *m);

/* gpu: index into inv->gpus; mig: -1 for the full GPU, else index into
 * gpus[gpu].migs. *reason (may be NULL) is set to "" for a healthy device, else to a
 * monitor-owned string valid until the next loop iteration, e.g.
 * "Xid 48 (double-bit ECC error), never auto-recovers". */
bool health_monitor_healthy(const struct health_monitor *m, int gpu, int mig,
                            const char **reason);

/* DynamicMIG: the MIG devices of GPU gpu are now migs (n; uuid, gi_id and ci_id are read),
 * made or destroyed since the last discovery; each keeps the health its UUID had. An Xid
 * NVML attributes to one of them (GI, CI) makes exactly it Unhealthy. Until the next
 * retarget, which takes the inventory's again. 0, or -ENOENT for no such GPU. */
int health_monitor_set_migs(struct health_monitor *m, int gpu, const struct inv_mig *migs, size_t n);
/* The index (for health_monitor_healthy) of GPU gpu's MIG device uuid, or -1. */
int health_monitor_mig_index(const struct health_monitor *m, int gpu, const char *uuid);

/* The last Xid that made the unit Unhealthy, kept after it recovers (0: none yet);
 * gpu/mig as for health_monitor_healthy. */
uint64_t health_monitor_last_xid(const struct health_monitor *m, int gpu, int mig);
/* Count every Xid event handed over (ignored ones too) in f, a counter family with one
 * label, the code (metrics; NULL: not counted). */
struct metrics_family;
void health_monitor_count_xids(struct health_monitor *m, struct metrics_family *f);

/* Counters for metrics. */
struct health_counters {
    uint64_t events, ignored, unhealthy_transitions, recoveries, wait_errors;
};
void health_monitor_counters(const struct health_monitor *m, struct health_counters *out);
