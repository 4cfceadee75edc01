/* Health monitor, loop side: which units (GPUs, MIG devices) exist, what their health
 * is, which GPUs are registered in the event set, and what each NVML event, probe and
 * reload (retarget) does to them. The thread that waits for NVML events is the waiter
 * (health/monitor-wait.c); the rules are policy/health.c.
 *
 * One monitor lives for the whole process: a reload retargets it to the new inventory
 * and config, so it never leaves a thread or fd behind. Units keep their health by
 * UUID; GPU and MIG indices follow the newest inventory. */
#include "health/monitor-internal.h"

#include <inttypes.h>
#include <stdio.h>

#include "core/log.h"
#include "metrics/metrics.h"
#include "nvml/nvml.h"


static bool visible_healthy(const struct health_monitor *m, const struct health_unit *u)
{
    return !active(m) || (!m->wait_failing && health_unit_healthy(u));
}

static void describe(const struct health_monitor *m, size_t g, const struct hm_mig *mig,
                     char *buf, size_t len)
{
    if (mig)
        snprintf(buf, len, "MIG device %s (GPU %zu, GI %u, CI %u)", mig->uuid, g, mig->gi,
                 mig->ci);
    else
        snprintf(buf, len, "GPU %s (index %zu)", m->gpus[g].uuid, g);
}

/* Apply one failure (or, suspect, an unattributed suspicion) to one unit; logs the
 * transition once. Returns true if the visible health changed. */
static bool fail_unit(struct health_monitor *m, size_t g, struct hm_mig *mig,
                      enum health_class cls, uint64_t xid, const char *what, uint64_t now,
                      bool suspect)
{
    struct health_unit *u = mig ? &mig->unit : &m->gpus[g].unit;
    bool was_visible = visible_healthy(m, u);
    char name[200];

    if (suspect ? !health_unit_suspect(&m->hc, u, cls, xid, what, now)
                : !health_unit_fail(&m->hc, u, cls, xid, what, now))
        return false;
    describe(m, g, mig, name, sizeof(name));
    log_warning("%s is Unhealthy: %s", name, u->reason);
    if (was_visible) {
        m->transitions++;
        return true;
    }
    return false;
}

/* Every unit of GPU g: the GPU itself and all its MIG devices. */
static bool fail_gpu(struct health_monitor *m, size_t g, enum health_class cls, uint64_t xid,
                     const char *what, uint64_t now, bool suspect)
{
    bool changed = fail_unit(m, g, NULL, cls, xid, what, now, suspect);
    for (size_t i = 0; i < m->gpus[g].n_migs; i++)
        changed |= fail_unit(m, g, &m->gpus[g].migs[i], cls, xid, what, now, suspect);
    return changed;
}

static int gpu_by_uuid(const struct health_monitor *m, const char *uuid)
{
    for (size_t g = 0; g < m->n_gpus; g++)
        if (streq(m->gpus[g].uuid, uuid))
            return (int)g;
    return -1;
}

/* Which unit an event is about. By the handle it carries first: a GPU that fell off
 * the bus (Xid 79) can no longer be named by UUID, but its handle is the one we
 * registered. Then by UUID (GPU or MIG device). Returns 0 with *g, *mig (-1: the
 * whole GPU); -ENOENT for a device that is not ours (any more); -ENXIO when the event
 * cannot be attributed at all. *name: the UUID to log, "" if none. */
static int event_target(const struct health_monitor *m, const struct nvml_event *ev, int *g,
                        int *mig, const char **name)
{
    *name = ev->uuid;
    *mig = -1;
    const char *uuid = ev->device ? hm_waiter_uuid_of(m->waiter, ev->device) : NULL;
    if (uuid) {
        *name = uuid;
        *g = gpu_by_uuid(m, uuid);
        return *g < 0 ? -ENOENT : 0;
    }
    if (!ev->uuid[0])
        return -ENXIO;
    for (size_t i = 0; i < m->n_gpus; i++) {
        if (streq(m->gpus[i].uuid, ev->uuid)) {
            *g = (int)i;
            return 0;
        }
        for (size_t j = 0; j < m->gpus[i].n_migs; j++)
            if (streq(m->gpus[i].migs[j].uuid, ev->uuid)) {
                *g = (int)i;
                *mig = (int)j;
                return 0;
            }
    }
    return -ENOENT;
}

static bool handle_event(struct health_monitor *m, const struct nvml_event *ev, uint64_t now)
{
    char what[128];
    const char *name;
    int g = -1, mig = -1;

    m->events++;
    if (!active(m)) {
        m->ignored++;
        return false;
    }
    int r = event_target(m, ev, &g, &mig, &name);
    if (!(ev->type & NVML_EVT_XID_CRITICAL)) {
        /* like the reference: ECC events are logged, the Xid that follows decides */
        m->ignored++;
        log_info("Ignoring non-Xid NVML event 0x%" PRIx64 " on %s", ev->type,
                 *name ? name : "unknown device");
        return false;
    }
    uint64_t xid = ev->data;
    metrics_inc(metrics_series_u64(m->xids, xid));
    enum health_class cls = health_classify(&m->hc, xid);
    if (cls == HEALTH_IGNORE) {
        m->ignored++;
        log_info("Skipping event Xid %" PRIu64 " (%s) on %s: ignored by policy", xid,
                 health_xid_name(xid), *name ? name : "unknown device");
        return false;
    }
    const char *xname = health_xid_name(xid);
    if (*xname)
        snprintf(what, sizeof(what), "Xid %" PRIu64 " (%s)", xid, xname);
    else
        snprintf(what, sizeof(what), "Xid %" PRIu64, xid);

    if (r == -ENXIO) {
        /* No handle we know and no name. The reference marks everything; we do too,
         * but never worse than RECOVER and with a quick probe: the innocent answer it
         * and come back within seconds, the guilty one (gone, or not answering) stays. */
        bool changed = false;
        log_warning("Xid %" PRIu64 " on a device NVML could not name: marking all devices "
                    "and probing them in %" PRIu64 "ms",
                    xid, u64_min(m->hc.unattributed_probe_ms, m->hc.quiet_ms));
        for (size_t i = 0; i < m->n_gpus; i++)
            changed |= fail_gpu(m, i, cls, xid, what, now, true);
        return changed;
    }
    if (r < 0) {
        m->ignored++;
        log_info("Skipping event Xid %" PRIu64 " on unknown device %s", xid, name);
        return false;
    }
    if (mig >= 0)
        return fail_unit(m, (size_t)g, &m->gpus[g].migs[mig], cls, xid, what, now, false);
    struct hm_gpu *gpu = &m->gpus[g];
    bool attributed = ev->gi_id != NVML_EVT_NO_INSTANCE && ev->ci_id != NVML_EVT_NO_INSTANCE;
    if (!attributed || gpu->n_migs == 0)
        return fail_gpu(m, (size_t)g, cls, xid, what, now, false);
    for (size_t i = 0; i < gpu->n_migs; i++)
        if (gpu->migs[i].gi == ev->gi_id && gpu->migs[i].ci == ev->ci_id)
            return fail_unit(m, (size_t)g, &gpu->migs[i], cls, xid, what, now, false);
    m->ignored++;
    log_info("Skipping event Xid %" PRIu64 " on %s GI %u CI %u: no such MIG device here", xid,
             name, ev->gi_id, ev->ci_id);
    return false;
}

/* How many units are Unhealthy only because of the wait marking, if it changes. */
static size_t own_healthy(const struct health_monitor *m)
{
    size_t healthy = 0;

    for (size_t g = 0; g < m->n_gpus; g++) {
        healthy += health_unit_healthy(&m->gpus[g].unit);
        for (size_t i = 0; i < m->gpus[g].n_migs; i++)
            healthy += health_unit_healthy(&m->gpus[g].migs[i].unit);
    }
    return healthy;
}

static bool set_wait_failing(struct health_monitor *m, bool failing, const char *detail)
{
    if (m->wait_failing == failing)
        return false;
    m->wait_failing = failing;
    if (failing)
        snprintf(m->wait_reason, sizeof(m->wait_reason),
                 "NVML event wait failing %u times in a row (%s), back when waits work",
                 m->hc.wait_error_threshold, detail);
    else
        m->wait_reason[0] = '\0';
    if (!active(m))
        return false; /* tracked for when checks come back on; nothing visible */
    size_t healthy = own_healthy(m);
    if (failing) {
        log_error("All devices are Unhealthy: %s", m->wait_reason);
        m->transitions += healthy;
    } else {
        log_info("NVML event wait works again; devices are back to their own health");
        m->recoveries += healthy;
    }
    return healthy > 0;
}

static void rearm(struct health_monitor *m);

static void on_waiter(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct health_monitor *m = userdata;
    struct hm_msg *q;
    uint64_t dropped;
    bool changed = false;

    size_t n = hm_waiter_drain(m->waiter, &q, &dropped);
    if (dropped > 0)
        log_warning("%" PRIu64 " NVML event(s) dropped: more than %d queued while the loop "
                    "was busy",
                    dropped, HM_QUEUE_MAX);
    uint64_t now = loop_now_ms();
    for (size_t i = 0; i < n; i++) {
        switch (q[i].kind) {
        case HM_MSG_EVENT:
            changed |= handle_event(m, &q[i].ev, now);
            break;
        case HM_MSG_WAIT_FAILING:
            changed |= set_wait_failing(m, true, q[i].detail);
            break;
        case HM_MSG_WAIT_OK:
            changed |= set_wait_failing(m, false, NULL);
            break;
        }
    }
    free(q);
    rearm(m);
    if (changed && m->fn)
        m->fn(m->userdata);
}

/* A device answers NVML again: handle by UUID, name, and (full GPUs) memory size. */
static int probe(const char *uuid, bool is_mig, struct error *err)
{
    nvml_device dev;
    char name[INV_NAME_MAX];
    uint64_t mem;
    int r;

    if ((r = nvml_device_by_uuid(uuid, &dev, err)) < 0 ||
        (r = nvml_device_name(dev, name, sizeof(name), err)) < 0)
        return r;
    if (!is_mig && (r = nvml_device_memory_total(dev, &mem, err)) < 0 && r != -ENOTSUP)
        return r;
    return 0;
}

static void warn_unsupported(const char *name, const char *detail)
{
    log_warning("%s: NVML events not supported (driver too old?); health checks off for it%s%s",
                name, *detail ? ": " : "", detail);
}

static bool probe_unit(struct health_monitor *m, size_t g, struct hm_mig *mig, uint64_t now)
{
    struct health_unit *u = mig ? &mig->unit : &m->gpus[g].unit;
    struct hm_gpu *gpu = &m->gpus[g];
    struct error err = { 0 };
    char name[200];
    bool was_visible = visible_healthy(m, u);

    if (!health_unit_probe_due(u, now))
        return false;
    describe(m, g, mig, name, sizeof(name));
    int r = probe(mig ? mig->uuid : gpu->uuid, mig != NULL, &err);
    /* also a GPU that was lost when the waiter moved to a new event set */
    if (r == 0 && !mig && (gpu->needs_register || !hm_waiter_registered(m->waiter, gpu->uuid))) {
        r = hm_waiter_register(m->waiter, gpu->uuid, &err);
        if (r == -ENOTSUP) {
            warn_unsupported(name, "");
            r = 0;
        }
        if (r == 0)
            gpu->needs_register = false;
    }
    if (r < 0) {
        bool lost = r == -ENODEV || r == -ENOENT;
        health_unit_probe_result(&m->hc, u, false, lost, err.msg, now);
        log_info("%s still Unhealthy: %s", name, u->reason);
        return false;
    }
    uint64_t xid = u->xid;
    uint64_t out_ms = now - u->since_ms;
    health_unit_probe_result(&m->hc, u, true, false, NULL, now);
    m->recoveries++;
    if (xid)
        log_info("%s is Healthy again: probe ok %" PRIu64 "ms after Xid %" PRIu64, name, out_ms,
                 xid);
    else
        log_info("%s is Healthy again: probe ok after %" PRIu64 "ms", name, out_ms);
    return was_visible != visible_healthy(m, u);
}

static void on_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct health_monitor *m = userdata;
    uint64_t now = loop_now_ms();
    bool changed = false;

    m->timer = NULL;   /* freed by the loop after we return */
    for (size_t g = 0; g < m->n_gpus; g++) {
        changed |= probe_unit(m, g, NULL, now);
        for (size_t i = 0; i < m->gpus[g].n_migs; i++)
            changed |= probe_unit(m, g, &m->gpus[g].migs[i], now);
    }
    rearm(m);
    if (changed && m->fn)
        m->fn(m->userdata);
}

/* One timer for the earliest probe; no timer while nothing is recovering. */
static void rearm(struct health_monitor *m)
{
    uint64_t at = UINT64_MAX;

    for (size_t g = 0; active(m) && g < m->n_gpus; g++) {
        at = u64_min(at, health_unit_deadline(&m->gpus[g].unit));
        for (size_t i = 0; i < m->gpus[g].n_migs; i++)
            at = u64_min(at, health_unit_deadline(&m->gpus[g].migs[i].unit));
    }
    if (m->timer && m->timer_at == at)
        return;
    loop_timer_cancel(m->loop, m->timer);
    m->timer = NULL;
    if (at == UINT64_MAX)
        return;
    uint64_t now = loop_now_ms();
    m->timer = loop_timer_add(m->loop, at > now ? at - now : 0, on_timer, m);
    m->timer_at = at;
}

static void free_gpus(struct hm_gpu *gpus, size_t n)
{
    for (size_t g = 0; g < n; g++)
        free(gpus[g].migs);
    free(gpus);
}

/* The units of inv; with keep, each takes the health its UUID had in old[]. */
static struct hm_gpu *build_gpus(const struct inventory *inv, const struct hm_gpu *old,
                                 size_t n_old, bool keep)
{
    struct hm_gpu *gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*gpus));

    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *src = &inv->gpus[g];
        struct hm_gpu *dst = &gpus[g];
        const struct hm_gpu *prev = NULL;
        snprintf(dst->uuid, sizeof(dst->uuid), "%s", src->uuid);
        for (size_t o = 0; keep && old && !prev && o < n_old; o++)
            if (streq(old[o].uuid, src->uuid))
                prev = &old[o];
        if (prev) {
            dst->unit = prev->unit;
            dst->needs_register = prev->needs_register;
        }
        hm_set_migs(dst, src->migs, src->n_migs, prev);
    }
    return gpus;
}

/* Register every GPU that is not registered yet, marking those that fail (and those the
 * inventory says are lost) Unhealthy. */
static void register_all(struct health_monitor *m, const struct inventory *inv, uint64_t now)
{
    for (size_t g = 0; g < m->n_gpus; g++) {
        struct hm_gpu *gpu = &m->gpus[g];
        struct error rerr = { 0 };
        char name[200], what[300];

        if (gpu->needs_register)
            continue; /* Unhealthy and probed: the probe registers it */
        if (inv->gpus[g].lost) {
            /* carried over from the previous discovery, NVML cannot read it now */
            gpu->needs_register = !hm_waiter_registered(m->waiter, gpu->uuid);
            fail_gpu(m, g, HEALTH_LOST, 0, "GPU lost: NVML cannot read it", now, false);
            continue;
        }
        int r = hm_waiter_register(m->waiter, gpu->uuid, &rerr);
        if (r == 0)
            continue;
        describe(m, g, NULL, name, sizeof(name));
        if (r == -ENOTSUP) {
            if (rerr.msg[0]) /* first time only: later ones come from the table */
                warn_unsupported(name, rerr.msg);
            continue;
        }
        /* GPU_IS_LOST waits for NVML to see it again; other failures are probed too and
         * registration is retried once the device answers */
        snprintf(what, sizeof(what), "event registration failed: %.200s", rerr.msg);
        gpu->needs_register = true;
        fail_gpu(m, g, r == -ENODEV ? HEALTH_LOST : HEALTH_RECOVER, 0, what, now, false);
    }
}

/* Health checks are on for the first time: the event set, then (after registration)
 * the thread. */
static int enable(struct health_monitor *m, const struct inventory *inv, uint64_t now,
                  struct error *err)
{
    int r;

    if ((r = hm_waiter_new(&m->hc, &m->waiter, err)) < 0)
        return r;
    register_all(m, inv, now);
    if ((r = hm_waiter_run(m->waiter, err)) == 0 &&
        (r = loop_add_io(m->loop, hm_waiter_fd(m->waiter), EPOLLIN, on_waiter, m)) < 0)
        error_set(err, r, "watching the health eventfd: %s", strerror(-r));
    if (r < 0) {
        hm_waiter_stop(m->waiter);
        m->waiter = NULL;
    }
    return r;
}

int health_monitor_retarget(struct health_monitor *m, const struct inventory *inv,
                            const struct health_config *hc, struct error *err)
{
    uint64_t now = loop_now_ms();
    bool was_active = active(m);
    int r = 0;

    free(m->hc.rules);
    m->hc = *hc;
    m->hc.rules = xreallocarray(NULL, hc->n_rules ? hc->n_rules : 1, sizeof(*hc->rules));
    if (hc->n_rules)
        memcpy(m->hc.rules, hc->rules, hc->n_rules * sizeof(*hc->rules));

    /* health is kept only while checks stay on: turning them off makes everything
     * Healthy, and turning them back on starts from there */
    struct hm_gpu *gpus = build_gpus(inv, m->gpus, m->n_gpus, was_active && !hc->disabled);
    free_gpus(m->gpus, m->n_gpus);
    m->gpus = gpus;
    m->n_gpus = inv->n_gpus;

    if (hc->disabled) {
        log_info("Health checks disabled (DP_DISABLE_HEALTHCHECKS); all devices stay Healthy");
    } else if (!m->waiter) {
        /* nothing to watch, nothing to ask NVML (which a reload may not have opened) */
        if (inv->n_gpus > 0)
            r = enable(m, inv, now, err);
    } else {
        hm_waiter_configure(m->waiter, &m->hc);
        register_all(m, inv, now);
    }
    if (active(m))
        log_info("Health monitor watching %zu GPU(s), NVML wait timeout %" PRIu64 "ms",
                 m->n_gpus, m->hc.wait_timeout_ms);
    rearm(m);
    return r;
}

int health_monitor_start(struct loop *l, const struct inventory *inv,
                         const struct health_config *hc, health_changed_fn fn, void *userdata,
                         struct health_monitor **out, struct error *err)
{
    struct health_monitor *m = xcalloc(1, sizeof(*m));
    int r;

    m->loop = l;
    m->fn = fn;
    m->userdata = userdata;
    if ((r = health_monitor_retarget(m, inv, hc, err)) < 0) {
        health_monitor_stop(m);
        return r;
    }
    *out = m;
    return 0;
}

void health_monitor_stop(struct health_monitor *m)
{
    if (!m)
        return;
    if (m->waiter) {
        loop_del_io(m->loop, hm_waiter_fd(m->waiter));
        hm_waiter_stop(m->waiter);
    }
    loop_timer_cancel(m->loop, m->timer);
    free_gpus(m->gpus, m->n_gpus);
    free(m->hc.rules);
    free(m);
}
