/* Health policy: Xid classes and names, the per-device recovery state machine and
 * event-wait error tracking, over the settings config_load() checked
 * (config/config-health.c). Pure: no NVML, no threads, no clock, no environment, no
 * logging. */
#include "policy/health.h"

#include <inttypes.h>
#include <stdio.h>
#include <strings.h>

#include "core/backoff.h"

/* Our reading of NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors), see
 * docs/health.md for the reasoning per row. Xids without a row get default_class. */
static const struct {
    uint64_t xid;
    enum health_class cls;
    const char *name;
} xid_table[] = {
    /* the reference plugin's default-ignored set: the application dies, the GPU is fine */
    { 13, HEALTH_IGNORE, "graphics engine exception" },
    { 31, HEALTH_IGNORE, "GPU memory page fault" },
    { 43, HEALTH_IGNORE, "GPU stopped processing (channel reset)" },
    { 45, HEALTH_IGNORE, "preemptive cleanup after an earlier error" },
    { 68, HEALTH_IGNORE, "video decoder exception" },
    { 109, HEALTH_IGNORE, "context switch timeout" },
    /* the GPU itself may be in a bad state but usually works again: probe it */
    { 8, HEALTH_RECOVER, "GPU stopped processing (idle timeout)" },
    { 32, HEALTH_RECOVER, "invalid or corrupted push buffer stream" },
    { 38, HEALTH_RECOVER, "driver firmware error" },
    { 63, HEALTH_RECOVER, "ECC page retirement or row remapping recorded" },
    { 69, HEALTH_RECOVER, "graphics engine class error" },
    { 92, HEALTH_RECOVER, "high single-bit ECC error rate" },
    { 94, HEALTH_RECOVER, "contained ECC error" },
    /* the GPU needs a reset, a reboot or service before it can be trusted */
    { 48, HEALTH_NEVER, "double-bit ECC error" },
    { 61, HEALTH_NEVER, "internal micro-controller breakpoint" },
    { 62, HEALTH_NEVER, "internal micro-controller halt" },
    { 64, HEALTH_NEVER, "ECC page retirement or row remapping failure" },
    { 74, HEALTH_NEVER, "NVLink error" },
    { 95, HEALTH_NEVER, "uncontained ECC error" },
    { 119, HEALTH_NEVER, "GSP RPC timeout" },
    { 120, HEALTH_NEVER, "GSP error" },
    { 140, HEALTH_NEVER, "unrecovered ECC error" },
    { 154, HEALTH_NEVER, "GPU recovery action required" },
    /* gone from the bus: only NVML seeing it again brings it back */
    { 79, HEALTH_LOST, "GPU has fallen off the bus" },
};

const char *health_xid_name(uint64_t xid)
{
    for (size_t i = 0; i < ELEMENTSOF(xid_table); i++)
        if (xid_table[i].xid == xid)
            return xid_table[i].name;
    return "";
}

/* The built-in table's class, or hc->default_class for Xids without a row. */
static enum health_class builtin_class(const struct health_config *hc, uint64_t xid)
{
    for (size_t i = 0; i < ELEMENTSOF(xid_table); i++)
        if (xid_table[i].xid == xid)
            return xid_table[i].cls;
    return hc->default_class;
}

static bool dp_listed(const struct health_config *hc, enum health_rule_kind kind, uint64_t xid)
{
    for (size_t i = 0; i < hc->n_rules; i++)
        if (hc->rules[i].kind == kind && hc->rules[i].xid == xid)
            return true;
    return false;
}

enum health_class health_classify(const struct health_config *hc, uint64_t xid)
{
    enum health_class c = HEALTH_IGNORE;
    bool ruled = false;
    /* rules are few (tens); the last matching one wins, so scan backwards */
    for (size_t i = hc->n_rules; i > 0 && !ruled; i--)
        if (hc->rules[i - 1].kind == HEALTH_RULE_SET && hc->rules[i - 1].xid == xid) {
            c = hc->rules[i - 1].cls;
            ruled = true;
        }
    if (!ruled)
        c = builtin_class(hc, xid);
    /* The reference's variables come last and only decide ignore vs act: a disabled
     * Xid is ignored; an enabled one (or any, under enable-all) that would be ignored
     * acts with its built-in class, or RECOVER if that is ignore too. */
    if (dp_listed(hc, HEALTH_RULE_DP_DISABLE, xid))
        c = HEALTH_IGNORE;
    if (c == HEALTH_IGNORE && (hc->enable_all || dp_listed(hc, HEALTH_RULE_DP_ENABLE, xid))) {
        c = builtin_class(hc, xid);
        if (c == HEALTH_IGNORE)
            c = HEALTH_RECOVER;
    }
    return c;
}

/* ---- recovery state machine */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t doubled(const struct health_config *hc, uint64_t q)
{
    return u64_min(q > UINT64_MAX / 2 ? UINT64_MAX : q * 2, hc->max_quiet_ms);
}

static void set_reason(struct health_unit *u, const char *what)
{
    switch (u->cls) {
    case HEALTH_NEVER:
        snprintf(u->reason, sizeof(u->reason), "%s, never auto-recovers", what);
        break;
    case HEALTH_LOST:
        snprintf(u->reason, sizeof(u->reason), "%s, Unhealthy until NVML sees the GPU again",
                 what);
        break;
    case HEALTH_RECOVER:
        snprintf(u->reason, sizeof(u->reason), "%s, probe after %" PRIu64 "s quiet", what,
                 (u->quiet_ms + 999) / 1000);
        break;
    case HEALTH_IGNORE:
        u->reason[0] = '\0';
        break;
    }
}

bool health_unit_fail(const struct health_config *hc, struct health_unit *u,
                      enum health_class cls, uint64_t xid, const char *what, uint64_t now)
{
    if (cls == HEALTH_IGNORE)
        return false;
    /* a suspicion is replaced by the real thing, which starts from a healthy unit's
     * state (the suspicion touched neither the quiet period nor the flap history) */
    bool was_suspect = u->suspect;
    if (was_suspect) {
        u->suspect = false;
        u->cls = HEALTH_IGNORE;
    }
    bool was_healthy = health_unit_healthy(u);
    if (was_healthy) {
        /* damping: coming back and failing soon after means the last quiet period
         * was too short */
        if (u->ever_failed && u->recovered_at_ms > 0 && now >= u->recovered_at_ms &&
            now - u->recovered_at_ms < hc->flap_window_ms && u->quiet_ms > 0)
            u->quiet_ms = doubled(hc, u->quiet_ms);
        else
            u->quiet_ms = hc->quiet_ms;
        u->since_ms = now;
        u->cls = cls;
        u->xid = xid;
    } else if (cls >= u->cls) {
        u->cls = cls;
        u->xid = xid;
    } else {
        /* a milder failure of an Unhealthy device: restart the quiet period, keep the
         * worse cause and its reason */
        u->probe_at_ms = sat_add(now, u->quiet_ms);
        return false;
    }
    u->ever_failed = true;
    u->probe_at_ms = sat_add(now, u->quiet_ms);
    set_reason(u, what);
    return was_healthy;
}

bool health_unit_suspect(const struct health_config *hc, struct health_unit *u,
                         enum health_class cls, uint64_t xid, const char *what, uint64_t now)
{
    if (cls == HEALTH_IGNORE || !health_unit_healthy(u))
        return false;
    uint64_t delay = u64_min(hc->unattributed_probe_ms, hc->quiet_ms);
    u->cls = cls > HEALTH_RECOVER ? HEALTH_RECOVER : cls;
    u->xid = xid;
    u->since_ms = now;
    u->suspect = true;
    u->probe_at_ms = sat_add(now, delay);
    snprintf(u->reason, sizeof(u->reason),
             "%s on a device NVML could not name, probe after %" PRIu64 "ms", what, delay);
    return true;
}

bool health_unit_probe_due(const struct health_unit *u, uint64_t now)
{
    return (u->cls == HEALTH_RECOVER || u->cls == HEALTH_LOST) && now >= u->probe_at_ms;
}

uint64_t health_unit_deadline(const struct health_unit *u)
{
    if (u->cls == HEALTH_RECOVER || u->cls == HEALTH_LOST)
        return u->probe_at_ms;
    return UINT64_MAX;
}

bool health_unit_probe_result(const struct health_config *hc, struct health_unit *u,
                              bool ok, bool lost, const char *detail, uint64_t now)
{
    if (u->cls != HEALTH_RECOVER && u->cls != HEALTH_LOST)
        return false;
    if (ok) {
        /* a cleared suspicion was no failure: flap damping does not count it */
        if (!u->suspect)
            u->recovered_at_ms = now;
        u->suspect = false;
        u->cls = HEALTH_IGNORE;
        u->reason[0] = '\0';
        return true;
    }
    if (u->suspect) {
        /* it did not answer: from now on a failure like any other */
#define UNNAMED_PROBE_FAILED " on a device NVML could not name; probe failed ("
#define UNNAMED_DETAIL_MAX 80
        /* sized from its parts: the cause, the text, at most 80 bytes of detail, ")" */
        char cause[32] = "an event";
        char what[sizeof(cause) + sizeof(UNNAMED_PROBE_FAILED ")") + UNNAMED_DETAIL_MAX];
        if (u->xid)
            snprintf(cause, sizeof(cause), "Xid %" PRIu64, u->xid);
        snprintf(what, sizeof(what), "%s" UNNAMED_PROBE_FAILED "%.*s)", cause,
                 UNNAMED_DETAIL_MAX, detail ? detail : "unknown");
#undef UNNAMED_DETAIL_MAX
#undef UNNAMED_PROBE_FAILED
        health_unit_fail(hc, u, lost ? HEALTH_LOST : u->cls, u->xid, what, now);
        return false;
    }
    if (lost)
        u->cls = HEALTH_LOST;
    u->quiet_ms = doubled(hc, u->quiet_ms);
    u->probe_at_ms = sat_add(now, u->quiet_ms);
    /* keep the cause visible next to why it is still out */
    char cause[64];
    if (u->xid)
        snprintf(cause, sizeof(cause), "Xid %" PRIu64, u->xid);
    else
        snprintf(cause, sizeof(cause), "%s", u->cls == HEALTH_LOST ? "GPU lost" : "Unhealthy");
    snprintf(u->reason, sizeof(u->reason), "%s; probe failed (%s), next probe in %" PRIu64 "s",
             cause, detail ? detail : "unknown", (u->quiet_ms + 999) / 1000);
    return false;
}

/* ---- event-wait errors */

enum health_wait_change health_wait_result(const struct health_config *hc,
                                           struct health_wait_state *ws, bool ok)
{
    if (ok) {
        bool was = ws->failing;
        ws->consecutive = 0;
        ws->failing = false;
        ws->backoff_ms = 0;
        return was ? HEALTH_WAIT_NOW_OK : HEALTH_WAIT_SAME;
    }
    ws->consecutive++;
    ws->backoff_ms = backoff_grow(ws->backoff_ms, hc->wait_backoff_ms, hc->wait_backoff_max_ms);
    if (!ws->failing && ws->consecutive >= hc->wait_error_threshold) {
        ws->failing = true;
        return HEALTH_WAIT_NOW_FAILING;
    }
    return HEALTH_WAIT_SAME;
}
