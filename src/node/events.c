/* Health monitor: NVML event registration, the wait thread, and the loop side that
 * applies policy/health decisions, probes recovering devices and tells the service.
 *
 * The only thing that runs off the loop is health_thread(): it blocks in
 * nvml_event_wait(), queues what it saw and writes the eventfd the loop watches.
 *
 * NVML cannot interrupt a wait, so the wait timeout is long (no idle wakeups) and stop
 * does not join the thread: it sets the stop flag, detaches the thread and drops the
 * loop's reference on the monitor. The thread holds its own reference on the monitor
 * and on the NVML library and lets go of both when its wait returns. A second eventfd
 * interrupts the backoff pause after a failed wait. */
#include "node/events.h"

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/eventfd.h>

#include "core/log.h"
#include "nvml/nvml.h"

enum msg_kind { MSG_EVENT, MSG_WAIT_FAILING, MSG_WAIT_OK };

struct msg {
    enum msg_kind kind;
    struct nvml_event ev;
    char detail[160];          /* MSG_WAIT_FAILING: the last wait error */
};

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

    nvml_event_set set;
    int efd;                   /* thread -> loop */
    int stop_fd;               /* stop -> thread (interrupts the backoff pause) */
    pthread_t thread;
    bool thread_started;
    atomic_bool stopping;
    atomic_int refs;           /* loop side + thread */

    pthread_mutex_t mu;        /* guards queue */
    struct msg *queue;
    size_t n_queue, alloc_queue;

    struct loop_timer *timer;
    uint64_t timer_at;

    bool wait_failing;         /* loop-side view of the thread's wait state */
    char wait_reason[200];

    uint64_t events, ignored, transitions, recoveries;
    atomic_uint_fast64_t wait_errors;
};

static void monitor_unref(struct health_monitor *m);

/* ---- thread side */

static void push(struct health_monitor *m, const struct msg *msg)
{
    uint64_t one = 1;

    pthread_mutex_lock(&m->mu);
    m->queue = grow_array(m->queue, &m->alloc_queue, m->n_queue + 1, sizeof(*m->queue));
    m->queue[m->n_queue++] = *msg;
    pthread_mutex_unlock(&m->mu);
    /* only fails with EAGAIN when the counter is about to overflow: the loop is
     * woken anyway */
    (void)!write(m->efd, &one, sizeof(one));
}

/* Sleep ms unless stop is requested first. */
static void pause_ms(struct health_monitor *m, uint64_t ms)
{
    struct pollfd p = { .fd = m->stop_fd, .events = POLLIN };
    (void)poll(&p, 1, (int)u64_min(ms, 60000));
}

static void *health_thread(void *arg)
{
    struct health_monitor *m = arg;
    struct health_wait_state ws = { 0 };

    pthread_setname_np(pthread_self(), "gdp-nvml-events");

    while (!atomic_load(&m->stopping)) {
        struct msg msg = { .kind = MSG_EVENT };
        struct error err = { 0 };

        int r = nvml_event_wait(m->set, (unsigned)m->hc.wait_timeout_ms, &msg.ev, &err);
        if (atomic_load(&m->stopping))
            break;
        if (r == 0)
            push(m, &msg);
        bool ok = r == 0 || r == -ETIMEDOUT;
        if (!ok) {
            atomic_fetch_add(&m->wait_errors, 1);
            log_debug("NVML event wait failed: %s", err.msg);
        }
        switch (health_wait_result(&m->hc, &ws, ok)) {
        case HEALTH_WAIT_NOW_FAILING:
            msg = (struct msg){ .kind = MSG_WAIT_FAILING };
            snprintf(msg.detail, sizeof(msg.detail), "%.150s", err.msg);
            push(m, &msg);
            break;
        case HEALTH_WAIT_NOW_OK:
            msg = (struct msg){ .kind = MSG_WAIT_OK };
            push(m, &msg);
            break;
        case HEALTH_WAIT_SAME:
            break;
        }
        if (!ok)
            pause_ms(m, ws.backoff_ms);
    }
    monitor_unref(m);
    nvml_close(); /* the thread's own reference, taken in health_monitor_start */
    return NULL;
}

/* ---- loop side */

static bool visible_healthy(const struct health_monitor *m, const struct health_unit *u)
{
    return !m->wait_failing && health_unit_healthy(u);
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

/* Apply one failure to one unit; logs the transition once. Returns true if the
 * visible health changed. */
static bool fail_unit(struct health_monitor *m, size_t g, struct hm_mig *mig,
                      enum health_class cls, uint64_t xid, const char *what, uint64_t now)
{
    struct health_unit *u = mig ? &mig->unit : &m->gpus[g].unit;
    bool was_visible = visible_healthy(m, u);
    char name[200];

    if (!health_unit_fail(&m->hc, u, cls, xid, what, now))
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
                     const char *what, uint64_t now)
{
    bool changed = fail_unit(m, g, NULL, cls, xid, what, now);
    for (size_t i = 0; i < m->gpus[g].n_migs; i++)
        changed |= fail_unit(m, g, &m->gpus[g].migs[i], cls, xid, what, now);
    return changed;
}

static void rearm(struct health_monitor *m);

static bool handle_event(struct health_monitor *m, const struct nvml_event *ev, uint64_t now)
{
    char what[128];

    m->events++;
    if (!(ev->type & NVML_EVT_XID_CRITICAL)) {
        /* like the reference: ECC events are logged, the Xid that follows decides */
        m->ignored++;
        log_info("Ignoring non-Xid NVML event 0x%" PRIx64 " on %s", ev->type,
                 ev->uuid[0] ? ev->uuid : "unknown device");
        return false;
    }
    uint64_t xid = ev->data;
    enum health_class cls = health_classify(&m->hc, xid);
    if (cls == HEALTH_IGNORE) {
        m->ignored++;
        log_info("Skipping event Xid %" PRIu64 " (%s) on %s: ignored by policy", xid,
                 health_xid_name(xid), ev->uuid[0] ? ev->uuid : "unknown device");
        return false;
    }
    const char *xname = health_xid_name(xid);
    if (*xname)
        snprintf(what, sizeof(what), "Xid %" PRIu64 " (%s)", xid, xname);
    else
        snprintf(what, sizeof(what), "Xid %" PRIu64, xid);

    if (!ev->uuid[0]) {
        /* NVML could not name the device. The reference marks everything; we do too,
         * but never worse than RECOVER: a probe will bring the innocent back. */
        bool changed = false;
        if (cls > HEALTH_RECOVER)
            cls = HEALTH_RECOVER;
        log_warning("Xid %" PRIu64 " on a device NVML could not name: marking all devices",
                    xid);
        for (size_t g = 0; g < m->n_gpus; g++)
            changed |= fail_gpu(m, g, cls, xid, what, now);
        return changed;
    }
    for (size_t g = 0; g < m->n_gpus; g++) {
        struct hm_gpu *gpu = &m->gpus[g];
        if (streq(gpu->uuid, ev->uuid)) {
            bool attributed = ev->gi_id != NVML_EVT_NO_INSTANCE && ev->ci_id != NVML_EVT_NO_INSTANCE;
            if (!attributed || gpu->n_migs == 0)
                return fail_gpu(m, g, cls, xid, what, now);
            for (size_t i = 0; i < gpu->n_migs; i++)
                if (gpu->migs[i].gi == ev->gi_id && gpu->migs[i].ci == ev->ci_id)
                    return fail_unit(m, g, &gpu->migs[i], cls, xid, what, now);
            m->ignored++;
            log_info("Skipping event Xid %" PRIu64 " on %s GI %u CI %u: no such MIG device here",
                     xid, ev->uuid, ev->gi_id, ev->ci_id);
            return false;
        }
        for (size_t i = 0; i < gpu->n_migs; i++)
            if (streq(gpu->migs[i].uuid, ev->uuid))
                return fail_unit(m, g, &gpu->migs[i], cls, xid, what, now);
    }
    m->ignored++;
    log_info("Skipping event Xid %" PRIu64 " on unknown device %s", xid, ev->uuid);
    return false;
}

static bool set_wait_failing(struct health_monitor *m, bool failing, const char *detail)
{
    size_t healthy = 0;

    if (m->wait_failing == failing)
        return false;
    for (size_t g = 0; g < m->n_gpus; g++) {
        healthy += health_unit_healthy(&m->gpus[g].unit);
        for (size_t i = 0; i < m->gpus[g].n_migs; i++)
            healthy += health_unit_healthy(&m->gpus[g].migs[i].unit);
    }
    m->wait_failing = failing;
    if (failing) {
        snprintf(m->wait_reason, sizeof(m->wait_reason),
                 "NVML event wait failing %u times in a row (%s), back when waits work",
                 m->hc.wait_error_threshold, detail);
        log_error("All devices are Unhealthy: %s", m->wait_reason);
        m->transitions += healthy;
    } else {
        log_info("NVML event wait works again; devices are back to their own health");
        m->recoveries += healthy;
        m->wait_reason[0] = '\0';
    }
    return healthy > 0;
}

static void on_efd(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct health_monitor *m = userdata;
    uint64_t cnt;
    struct msg *q;
    size_t n;
    bool changed = false;

    (void)!read(fd, &cnt, sizeof(cnt));
    pthread_mutex_lock(&m->mu);
    q = TAKE_PTR(m->queue);
    n = m->n_queue;
    m->n_queue = m->alloc_queue = 0;
    pthread_mutex_unlock(&m->mu);

    uint64_t now = loop_now_ms();
    for (size_t i = 0; i < n; i++) {
        switch (q[i].kind) {
        case MSG_EVENT:
            changed |= handle_event(m, &q[i].ev, now);
            break;
        case MSG_WAIT_FAILING:
            changed |= set_wait_failing(m, true, q[i].detail);
            break;
        case MSG_WAIT_OK:
            changed |= set_wait_failing(m, false, NULL);
            break;
        }
    }
    free(q);
    rearm(m);
    if (changed && m->fn)
        m->fn(m->userdata);
}

/* Register events for one GPU. Returns 0, -ENOTSUP (too old: stays Healthy) or
 * another -errno with err filled. */
static int register_gpu(struct health_monitor *m, const char *uuid, struct error *err)
{
    nvml_device dev;
    uint64_t supported;
    int r;

    if ((r = nvml_device_by_uuid(uuid, &dev, err)) < 0 ||
        (r = nvml_device_supported_events(dev, &supported, err)) < 0)
        return r;
    uint64_t mask = (NVML_EVT_XID_CRITICAL | NVML_EVT_DOUBLE_BIT_ECC | NVML_EVT_SINGLE_BIT_ECC) &
                    supported;
    return nvml_device_register_events(dev, mask, m->set, err);
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
    if (r == 0 && !mig && gpu->needs_register) {
        r = register_gpu(m, gpu->uuid, &err);
        if (r == -ENOTSUP) {
            log_warning("%s: NVML events not supported (driver too old?); health checks "
                        "off for it",
                        name);
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

    for (size_t g = 0; g < m->n_gpus; g++) {
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

static void copy_inventory(struct health_monitor *m, const struct inventory *inv)
{
    m->n_gpus = inv->n_gpus;
    m->gpus = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*m->gpus));
    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *src = &inv->gpus[g];
        struct hm_gpu *dst = &m->gpus[g];
        snprintf(dst->uuid, sizeof(dst->uuid), "%s", src->uuid);
        dst->n_migs = src->n_migs;
        dst->migs = xcalloc(src->n_migs ? src->n_migs : 1, sizeof(*dst->migs));
        for (size_t i = 0; i < src->n_migs; i++) {
            snprintf(dst->migs[i].uuid, sizeof(dst->migs[i].uuid), "%s", src->migs[i].uuid);
            dst->migs[i].gi = src->migs[i].gi_id;
            dst->migs[i].ci = src->migs[i].ci_id;
        }
    }
}

static void monitor_free(struct health_monitor *m)
{
    if (!m)
        return;
    for (size_t g = 0; g < m->n_gpus; g++)
        free(m->gpus[g].migs);
    free(m->gpus);
    free(m->hc.rules);
    free(m->queue);
    if (m->efd >= 0)
        close(m->efd);
    if (m->stop_fd >= 0)
        close(m->stop_fd);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* The last of the loop side and the thread frees the monitor (and the event set,
 * while the library is still loaded: the thread holds its own NVML reference). */
static void monitor_unref(struct health_monitor *m)
{
    if (atomic_fetch_sub(&m->refs, 1) != 1)
        return;
    if (m->set)
        nvml_event_set_free(m->set);
    monitor_free(m);
}

int health_monitor_start(struct loop *l, const struct inventory *inv,
                         const struct health_config *hc, health_changed_fn fn, void *userdata,
                         struct health_monitor **out, struct error *err)
{
    struct health_monitor *m = xcalloc(1, sizeof(*m));
    uint64_t now = loop_now_ms();
    int r;

    m->loop = l;
    m->hc = *hc;
    m->hc.rules = xreallocarray(NULL, hc->n_rules ? hc->n_rules : 1, sizeof(*hc->rules));
    if (hc->n_rules)
        memcpy(m->hc.rules, hc->rules, hc->n_rules * sizeof(*hc->rules));
    m->fn = fn;
    m->userdata = userdata;
    m->efd = m->stop_fd = -1;
    pthread_mutex_init(&m->mu, NULL);
    atomic_init(&m->stopping, false);
    atomic_init(&m->refs, 1);
    atomic_init(&m->wait_errors, 0);
    copy_inventory(m, inv);

    if (hc->disabled) {
        log_info("Health checks disabled (DP_DISABLE_HEALTHCHECKS); all devices stay Healthy");
        *out = m;
        return 0;
    }

    if ((r = nvml_event_set_create(&m->set, err)) < 0) {
        error_prefix(err, "creating the NVML event set");
        monitor_free(m);
        return r;
    }
    for (size_t g = 0; g < m->n_gpus; g++) {
        struct error rerr = { 0 };
        char name[200];
        r = register_gpu(m, m->gpus[g].uuid, &rerr);
        if (r == 0)
            continue;
        describe(m, g, NULL, name, sizeof(name));
        if (r == -ENOTSUP) {
            log_warning("%s: NVML events not supported (driver too old?); health checks off "
                        "for it: %s",
                        name, rerr.msg);
            continue;
        }
        /* GPU_IS_LOST waits for NVML to see it again; other failures are probed too and
         * registration is retried once the device answers */
        char what[300];
        snprintf(what, sizeof(what), "event registration failed: %.200s", rerr.msg);
        m->gpus[g].needs_register = true;
        fail_gpu(m, g, r == -ENODEV ? HEALTH_LOST : HEALTH_RECOVER, 0, what, now);
    }

    m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    m->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->efd < 0 || m->stop_fd < 0) {
        r = error_set(err, -errno, "eventfd: %m");
        goto fail;
    }
    if ((r = loop_add_io(l, m->efd, EPOLLIN, on_efd, m)) < 0) {
        error_set(err, r, "watching the health eventfd: %s", strerror(-r));
        goto fail;
    }

    /* The thread must not take the signals the loop reads from its signalfd. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_fetch_add(&m->refs, 1);
    nvml_ref();
    r = -pthread_create(&m->thread, NULL, health_thread, m);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        atomic_fetch_sub(&m->refs, 1);
        nvml_close();
        loop_del_io(l, m->efd);
        error_set(err, r, "starting the health thread: %s", strerror(-r));
        goto fail;
    }
    m->thread_started = true;
    rearm(m);
    log_info("Health monitor started for %zu GPU(s), NVML wait timeout %" PRIu64 "ms",
             m->n_gpus, m->hc.wait_timeout_ms);
    *out = m;
    return 0;

fail:
    nvml_event_set_free(m->set);
    monitor_free(m);
    return r;
}

void health_monitor_stop(struct health_monitor *m)
{
    uint64_t one = 1;

    if (!m)
        return;
    if (m->thread_started) {
        atomic_store(&m->stopping, true);
        (void)!write(m->stop_fd, &one, sizeof(one));
        loop_del_io(m->loop, m->efd);
        pthread_detach(m->thread);
    }
    loop_timer_cancel(m->loop, m->timer);
    m->timer = NULL;
    monitor_unref(m);
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

void health_monitor_counters(const struct health_monitor *m, struct health_counters *out)
{
    *out = (struct health_counters){ 0 };
    if (!m)
        return;
    out->events = m->events;
    out->ignored = m->ignored;
    out->unhealthy_transitions = m->transitions;
    out->recoveries = m->recoveries;
    out->wait_errors = atomic_load(&m->wait_errors);
}
