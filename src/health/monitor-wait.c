/* The NVML event waiter: the health monitor's only thread, its event set and the
 * queue + eventfd towards the loop (see monitor-wait.h for the lifetime rules).
 *
 * Wait timeouts: while waits work, the thread waits waitTimeout (default 1 h: no idle
 * wakeups). After a failed wait it pauses for the backoff and then waits only that
 * long, so that when NVML works again a clean timeout (or an event) comes back within
 * a backoff and clears the "wait failing" marking, instead of after waitTimeout. */
#include "health/monitor-wait.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>

#include "core/log.h"

/* Why generations: NVML has no way to interrupt nvmlEventSetWait, and does not say
 * whether a wait in progress sees a device registered after it began (the simulator
 * assumes it does not, as a driver that fixes its listeners at the start of a wait
 * would behave). At the default waitTimeout (1 h) a GPU registered mid-wait (added at a
 * reload, re-registered after a recovery, new after a MIG change) could go an hour
 * without Xid monitoring. So a registration made while the thread sits in a long wait
 * starts a new *generation*: a fresh event set with every registration, and a thread
 * that waits on it. The old generation is superseded: its thread forwards only what its
 * wait returned before the switch began (anything later reaches the new set too) and
 * then ends, freeing its set, when that wait returns (an event on one of its GPUs, or
 * waitTimeout). Nothing polls while nothing changes: every thread waits waitTimeout.
 * Bounded: at most HM_MAX_OLD superseded threads linger; while that many do, the current
 * thread waits in slices of HM_SLICE_MS, so a registration made then is seen by its next
 * slice instead of needing yet another thread. A new GPU has monitoring within
 * HM_SLICE_MS of its registration either way.
 *
 * What the switch cannot tell apart (NVML events carry no time): an event that reached
 * the old set within microseconds of the switch may be delivered twice (harmless: the
 * second marks an already Unhealthy device) or, if the old thread was descheduled across
 * the switch, not at all. */
#define HM_SLICE_MS 1000
#define HM_MAX_OLD 2

/* A GPU registered in the event sets (loop side only). NVML cannot unregister, so an
 * entry stays when its GPU leaves the inventory: its events are still recognised, and
 * it is not registered twice if it comes back. One entry per UUID ever seen. */
struct hm_reg {
    nvml_device dev;
    uint64_t mask;             /* the event types it registered for */
    bool unsupported;          /* NOT_SUPPORTED: never registered, never retried */
    bool stale;                /* not in the current set: a switch could not register it
                                * (lost then); registered again once NVML answers */
    char uuid[96];
};

/* One event set and the thread that waits on it (which owns both once started). */
struct hm_gen {
    struct hm_waiter *w;
    nvml_event_set set;
    bool superseded;           /* under w->mu */
    bool long_wait;            /* under w->mu: in a wait longer than HM_SLICE_MS */
};

struct hm_waiter {
    struct hm_gen *cur;        /* the newest generation (set under mu) */
    bool running;              /* cur's thread started */
    int efd;                   /* thread -> loop */
    int stop_fd;               /* stop -> threads (interrupts the backoff pause) */
    atomic_bool stopping;
    atomic_int refs;           /* loop side + one per thread */
    atomic_uint_fast64_t wait_errors;
    struct hm_reg *regs;       /* loop side only */
    size_t n_regs, alloc_regs;

    pthread_mutex_t mu;        /* guards everything below, and cur's flags */
    struct health_config params; /* wait fields only; rules unused (NULL) */
    struct health_wait_state ws; /* updated by the current generation's thread only */
    unsigned n_old;            /* superseded threads still waiting */
    uint64_t switch_ns;        /* when the newest switch began (CLOCK_MONOTONIC) */
    struct hm_msg *queue;
    size_t n_queue, alloc_queue;
    uint64_t dropped;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void gen_free(struct hm_gen *g)
{
    if (g && g->set)
        nvml_event_set_free(g->set);
    free(g);
}

static void waiter_unref(struct hm_waiter *w)
{
    if (atomic_fetch_sub(&w->refs, 1) != 1)
        return;
    /* a generation whose thread never ran; a started one is freed by its thread. The
     * event sets go while the library is still loaded: this reference is ours */
    if (!w->running)
        gen_free(w->cur);
    nvml_close();
    free(w->regs);
    free(w->queue);
    if (w->efd >= 0)
        close(w->efd);
    if (w->stop_fd >= 0)
        close(w->stop_fd);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* ---- thread side */

static void push(struct hm_waiter *w, const struct hm_msg *msg)
{
    uint64_t one = 1;

    pthread_mutex_lock(&w->mu);
    if (w->n_queue >= HM_QUEUE_MAX) {
        w->dropped++;
    } else {
        w->queue = grow_array(w->queue, &w->alloc_queue, w->n_queue + 1, sizeof(*w->queue));
        w->queue[w->n_queue++] = *msg;
    }
    pthread_mutex_unlock(&w->mu);
    /* only fails with EAGAIN when the counter is about to overflow: the loop is
     * woken anyway */
    (void)!write(w->efd, &one, sizeof(one));
}

/* Sleep ms unless stop is requested first. */
static void pause_ms(struct hm_waiter *w, uint64_t ms)
{
    struct pollfd p = { .fd = w->stop_fd, .events = POLLIN };
    (void)poll(&p, 1, (int)u64_min(ms, 60000));
}

static void *waiter_thread(void *arg)
{
    struct hm_gen *g = arg;
    struct hm_waiter *w = g->w;

    pthread_setname_np(pthread_self(), "gdp-nvml-events");

    while (!atomic_load(&w->stopping)) {
        struct hm_msg msg = { .kind = HM_MSG_EVENT };
        struct error err = { 0 };
        struct health_config p;
        struct health_wait_state ws;

        pthread_mutex_lock(&w->mu);
        if (g->superseded) {
            pthread_mutex_unlock(&w->mu);
            break;
        }
        p = w->params;
        ws = w->ws;
        /* after a failure, a short wait proves quickly that waits work again */
        uint64_t timeout = p.wait_timeout_ms;
        if (ws.consecutive > 0)
            timeout = u64_min(timeout, ws.backoff_ms > p.wait_backoff_ms ? ws.backoff_ms
                                                                         : p.wait_backoff_ms);
        /* no room for another generation: see new registrations within a slice */
        if (w->n_old >= HM_MAX_OLD)
            timeout = u64_min(timeout, HM_SLICE_MS);
        g->long_wait = timeout > HM_SLICE_MS;
        pthread_mutex_unlock(&w->mu);

        int r = nvml_event_wait(g->set, (unsigned)timeout, &msg.ev, &err);
        uint64_t returned = now_ns();
        if (atomic_load(&w->stopping))
            break;
        pthread_mutex_lock(&w->mu);
        g->long_wait = false;
        bool superseded = g->superseded, before_switch = returned < w->switch_ns;
        pthread_mutex_unlock(&w->mu);
        if (superseded) {
            /* later events reach the new set too; wait errors are the new thread's */
            if (r == 0 && before_switch)
                push(w, &msg);
            break;
        }
        if (r == 0)
            push(w, &msg);
        bool ok = r == 0 || r == -ETIMEDOUT;
        if (!ok) {
            atomic_fetch_add(&w->wait_errors, 1);
            log_debug("NVML event wait failed: %s", err.msg);
        }
        pthread_mutex_lock(&w->mu);
        if (g->superseded) { /* meanwhile: the wait state is the new thread's now */
            pthread_mutex_unlock(&w->mu);
            break;
        }
        enum health_wait_change change = health_wait_result(&p, &w->ws, ok);
        uint64_t backoff = w->ws.backoff_ms;
        pthread_mutex_unlock(&w->mu);
        switch (change) {
        case HEALTH_WAIT_NOW_FAILING:
            msg = (struct hm_msg){ .kind = HM_MSG_WAIT_FAILING };
            snprintf(msg.detail, sizeof(msg.detail), "%.150s", err.msg);
            push(w, &msg);
            break;
        case HEALTH_WAIT_NOW_OK:
            msg = (struct hm_msg){ .kind = HM_MSG_WAIT_OK };
            push(w, &msg);
            break;
        case HEALTH_WAIT_SAME:
            break;
        }
        if (!ok)
            pause_ms(w, backoff);
    }
    pthread_mutex_lock(&w->mu);
    if (g->superseded)
        w->n_old--;
    pthread_mutex_unlock(&w->mu);
    gen_free(g);
    waiter_unref(w);
    return NULL;
}

/* ---- loop side */

static void set_params(struct hm_waiter *w, const struct health_config *hc)
{
    w->params = *hc;
    w->params.rules = NULL;
    w->params.n_rules = 0;
}

static struct hm_gen *gen_new(struct hm_waiter *w, struct error *err)
{
    struct hm_gen *g = xcalloc(1, sizeof(*g));

    g->w = w;
    if (nvml_event_set_create(&g->set, err) < 0) {
        error_prefix(err, "creating the NVML event set");
        g->set = NULL;
        gen_free(g);
        return NULL;
    }
    return g;
}

/* Starts g's thread (detached: it ends on its own, see waiter_thread). */
static int gen_run(struct hm_gen *g, struct error *err)
{
    struct hm_waiter *w = g->w;
    sigset_t all, old;
    pthread_t t;
    int r;

    /* The thread must not take the signals the loop reads from its signalfd. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_fetch_add(&w->refs, 1);
    r = -pthread_create(&t, NULL, waiter_thread, g);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        atomic_fetch_sub(&w->refs, 1);
        return error_set(err, r, "starting the health thread: %s", strerror(-r));
    }
    pthread_detach(t);
    return 0;
}

int hm_waiter_new(const struct health_config *hc, struct hm_waiter **out, struct error *err)
{
    struct hm_waiter *w = xcalloc(1, sizeof(*w));
    int r;

    w->efd = w->stop_fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    atomic_init(&w->stopping, false);
    atomic_init(&w->refs, 1);
    atomic_init(&w->wait_errors, 0);
    set_params(w, hc);
    nvml_ref(); /* released by waiter_unref */

    if (!(w->cur = gen_new(w, err))) {
        r = err->code ? err->code : -EIO;
        goto fail;
    }
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->efd < 0 || w->stop_fd < 0) {
        r = error_set(err, -errno, "eventfd: %m");
        goto fail;
    }
    *out = w;
    return 0;

fail:
    waiter_unref(w);
    return r;
}

int hm_waiter_run(struct hm_waiter *w, struct error *err)
{
    int r = gen_run(w->cur, err);
    if (r == 0)
        w->running = true;
    return r;
}

void hm_waiter_stop(struct hm_waiter *w)
{
    uint64_t one = 1;

    if (!w)
        return;
    if (w->running) {
        atomic_store(&w->stopping, true);
        (void)!write(w->stop_fd, &one, sizeof(one));
    }
    waiter_unref(w);
}

static struct hm_reg *reg_by_uuid(const struct hm_waiter *w, const char *uuid)
{
    for (size_t i = 0; i < w->n_regs; i++)
        if (streq(w->regs[i].uuid, uuid))
            return &w->regs[i];
    return NULL;
}

/* A registration was just made in cur's set. If cur's thread sits in a long wait, that
 * wait may not see it: switch to a new generation (see the top of this file). If the
 * thread is between waits, or waits a slice, its next wait sees it. */
static void maybe_switch(struct hm_waiter *w)
{
    struct error err = { 0 };

    pthread_mutex_lock(&w->mu);
    bool needed = w->running && w->cur->long_wait;
    w->switch_ns = needed ? now_ns() : w->switch_ns;
    pthread_mutex_unlock(&w->mu);
    if (!needed)
        return;
    struct hm_gen *g = gen_new(w, &err);
    for (size_t i = 0; g && i < w->n_regs; i++) {
        if (w->regs[i].unsupported)
            continue;
        w->regs[i].stale = false;
        if (nvml_device_register_events(w->regs[i].dev, w->regs[i].mask, g->set, &err) < 0) {
            /* a GPU gone since (lost, removed): its events cannot come now; the monitor
             * registers it again when a probe finds it (hm_waiter_registered) */
            log_debug("%s: registering in the new event set: %s", w->regs[i].uuid, err.msg);
            w->regs[i].stale = true;
            memset(&err, 0, sizeof(err));
        }
    }
    if (g && gen_run(g, &err) < 0) {
        gen_free(g);
        g = NULL;
    }
    if (!g) {
        log_warning("NVML events of a newly registered GPU may wait for the current wait "
                    "to end (up to waitTimeout): %s", err.msg);
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->cur->superseded = true;
    w->n_old++;
    w->cur = g;
    pthread_mutex_unlock(&w->mu);
}

int hm_waiter_register(struct hm_waiter *w, const char *uuid, struct error *err)
{
    struct hm_reg *reg = reg_by_uuid(w, uuid);
    nvml_device dev;
    uint64_t supported;
    int r;

    if (reg && !reg->stale)
        return reg->unsupported ? -ENOTSUP : 0;
    if ((r = nvml_device_by_uuid(uuid, &dev, err)) < 0 ||
        (r = nvml_device_supported_events(dev, &supported, err)) < 0)
        return r;
    /* what the reference asks for, as far as the device supports it */
    uint64_t mask = (NVML_EVT_XID_CRITICAL | NVML_EVT_DOUBLE_BIT_ECC | NVML_EVT_SINGLE_BIT_ECC) &
                    supported;
    r = nvml_device_register_events(dev, mask, w->cur->set, err);
    if (r < 0 && r != -ENOTSUP)
        return r;
    if (reg) {
        /* stale: back in the current set, with the handle NVML gives for it now */
        reg->dev = dev;
        reg->mask = mask;
        reg->unsupported = r == -ENOTSUP;
        reg->stale = false;
        if (r == 0)
            maybe_switch(w);
        return r;
    }
    w->regs = grow_array(w->regs, &w->alloc_regs, w->n_regs + 1, sizeof(*w->regs));
    reg = &w->regs[w->n_regs++];
    *reg = (struct hm_reg){ .dev = dev, .mask = mask, .unsupported = r == -ENOTSUP };
    snprintf(reg->uuid, sizeof(reg->uuid), "%s", uuid);
    if (r == 0)
        maybe_switch(w);
    return r;
}

bool hm_waiter_registered(const struct hm_waiter *w, const char *uuid)
{
    const struct hm_reg *reg = reg_by_uuid(w, uuid);
    return reg && (reg->unsupported || !reg->stale);
}

const char *hm_waiter_uuid_of(const struct hm_waiter *w, nvml_device dev)
{
    for (size_t i = 0; dev && i < w->n_regs; i++)
        if (!w->regs[i].unsupported && w->regs[i].dev == dev)
            return w->regs[i].uuid;
    return NULL;
}

int hm_waiter_fd(const struct hm_waiter *w) { return w->efd; }

size_t hm_waiter_drain(struct hm_waiter *w, struct hm_msg **out, uint64_t *dropped)
{
    uint64_t cnt;
    size_t n;

    (void)!read(w->efd, &cnt, sizeof(cnt));
    pthread_mutex_lock(&w->mu);
    *out = TAKE_PTR(w->queue);
    n = w->n_queue;
    w->n_queue = w->alloc_queue = 0;
    *dropped = w->dropped;
    w->dropped = 0;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void hm_waiter_configure(struct hm_waiter *w, const struct health_config *hc)
{
    pthread_mutex_lock(&w->mu);
    set_params(w, hc);
    pthread_mutex_unlock(&w->mu);
}

uint64_t hm_waiter_errors(const struct hm_waiter *w)
{
    return atomic_load(&((struct hm_waiter *)w)->wait_errors);
}
