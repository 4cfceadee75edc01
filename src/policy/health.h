/* Health policy: which Xids matter, what they cost a device, and when it may come
 * back. Pure decisions, no NVML, no threads, time passed in (milliseconds on any
 * monotonic clock), so every rule is unit-testable. The event thread, probes and
 * timers that drive these functions live in health/monitor.c.
 *
 * Classes, in increasing severity (a device keeps the worst class it has seen until
 * it recovers):
 *   IGNORE   application-level errors: logged and counted, health untouched
 *   RECOVER  Unhealthy; after a quiet period a probe through NVML decides
 *   LOST     NVML cannot see the GPU (Xid 79, GPU_IS_LOST): Unhealthy until a probe
 *            finds it again
 *   NEVER    needs a GPU reset, a reboot or service: Unhealthy until the plugin
 *            restarts
 * The settings (struct health_config, config/config-health.h) are parsed and
 * checked by config_load(); this module only reads them.
 * docs/health.md describes the defaults and where they come from. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config-health.h"
#include "core/error.h"

/* The class an Xid gets under hc. */
enum health_class health_classify(const struct health_config *hc, uint64_t xid);
/* "double-bit ECC error"; "" for Xids we have no words for. Static lifetime. */
const char *health_xid_name(uint64_t xid);

/* ---- per-device recovery state machine */
struct health_unit {
    enum health_class cls;     /* HEALTH_IGNORE: healthy */
    uint64_t xid;              /* last Xid that counted; 0 for non-Xid causes */
    uint64_t since_ms;         /* when it went Unhealthy */
    uint64_t probe_at_ms;      /* next probe (RECOVER / LOST) */
    uint64_t quiet_ms;         /* current quiet period (0 before the first failure) */
    uint64_t recovered_at_ms;  /* last recovery; 0: never recovered */
    bool ever_failed;
    bool suspect;              /* marked only by an unattributed event (health_unit_suspect) */
    char reason[160];          /* for `list` and logs; "" while healthy */
};

static inline bool health_unit_healthy(const struct health_unit *u)
{
    return u->cls == HEALTH_IGNORE;
}

/* A failure of class cls (> IGNORE) at `now`; `what` describes it ("Xid 48 (...)",
 * "event registration failed: ..."). Returns true when the unit went from healthy
 * (or only suspect, see health_unit_suspect) to Unhealthy. An already Unhealthy unit keeps the worse class and its quiet period
 * starts over. Failing again within flap_window_ms of the last recovery doubles the
 * previous quiet period (up to max_quiet_ms). */
bool health_unit_fail(const struct health_config *hc, struct health_unit *u,
                      enum health_class cls, uint64_t xid, const char *what, uint64_t now);
/* An event that cannot be attributed to any device marks every device: a healthy unit
 * goes Unhealthy with class min(cls, RECOVER) and is probed after
 * min(unattributed_probe_ms, quiet_ms) instead of the quiet period. A good probe brings
 * it back without counting as a recovery for flap damping; a failed one turns it into a
 * plain failure (quiet period, doubling). A real failure while suspect replaces the
 * suspicion. An already Unhealthy unit is left as it is. Returns true when the unit
 * went from healthy to Unhealthy. */
bool health_unit_suspect(const struct health_config *hc, struct health_unit *u,
                         enum health_class cls, uint64_t xid, const char *what, uint64_t now);
/* True when a probe should run now. */
bool health_unit_probe_due(const struct health_unit *u, uint64_t now);
/* When the next probe is due; UINT64_MAX if none (healthy or NEVER). */
uint64_t health_unit_deadline(const struct health_unit *u);
/* Result of a probe: ok → healthy again (returns true). Failure: stays Unhealthy,
 * the quiet period doubles (capped) before the next probe; `lost` upgrades to LOST;
 * `detail` says why it failed. */
bool health_unit_probe_result(const struct health_config *hc, struct health_unit *u,
                              bool ok, bool lost, const char *detail, uint64_t now);

/* ---- event-wait error tracking (runs on the event thread) */
struct health_wait_state {
    unsigned consecutive;      /* failed waits in a row */
    bool failing;              /* threshold reached: every device Unhealthy */
    uint64_t backoff_ms;       /* delay before the next wait */
};

enum health_wait_change { HEALTH_WAIT_SAME, HEALTH_WAIT_NOW_FAILING, HEALTH_WAIT_NOW_OK };

/* Feed the outcome of one wait (ok includes a timeout). After a failure,
 * ws->backoff_ms is how long to pause before waiting again (0 after success); the
 * caller also keeps its next wait that short (ws->consecutive > 0), so the wait that
 * proves NVML works again comes within a backoff, not after wait_timeout_ms. */
enum health_wait_change health_wait_result(const struct health_config *hc,
                                           struct health_wait_state *ws, bool ok);
