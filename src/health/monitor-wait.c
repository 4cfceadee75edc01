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

#include "core/log.h"

/* A GPU registered in the event set (loop side only). NVML cannot unregister, so an
 * entry stays when its GPU leaves the inventory: its events are still recognised, and
 * it is not registered twice if it comes back. One entry per UUID ever seen. */
struct hm_reg {
    nvml_device dev;
    bool unsupported;          /* NOT_SUPPORTED: never registered, never retried */
    char uuid[96];
};

struct hm_waiter {
    nvml_event_set set;
    int efd;                   /* thread -> loop */
    int stop_fd;               /* stop -> thread (interrupts the backoff pause) */
    pthread_t thread;
    bool thread_started;
    atomic_bool stopping;
    atomic_int refs;           /* loop side + thread */
    atomic_uint_fast64_t wait_errors;
    struct hm_reg *regs;       /* loop side only */
    size_t n_regs, alloc_regs;

    pthread_mutex_t mu;        /* guards everything below */
    struct health_config params; /* wait fields only; rules unused (NULL) */
    struct hm_msg *queue;
    size_t n_queue, alloc_queue;
    uint64_t dropped;
};

static void waiter_unref(struct hm_waiter *w)
{
    if (atomic_fetch_sub(&w->refs, 1) != 1)
        return;
    /* the event set goes while the library is still loaded: this reference is ours */
    if (w->set)
        nvml_event_set_free(w->set);
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
    struct hm_waiter *w = arg;
    struct health_wait_state ws = { 0 };

    pthread_setname_np(pthread_self(), "gdp-nvml-events");

    while (!atomic_load(&w->stopping)) {
        struct hm_msg msg = { .kind = HM_MSG_EVENT };
        struct error err = { 0 };
        struct health_config p;

        pthread_mutex_lock(&w->mu);
        p = w->params;
        pthread_mutex_unlock(&w->mu);
        /* after a failure, a short wait proves quickly that waits work again */
        uint64_t timeout = p.wait_timeout_ms;
        if (ws.consecutive > 0)
            timeout = u64_min(timeout, ws.backoff_ms > p.wait_backoff_ms ? ws.backoff_ms
                                                                         : p.wait_backoff_ms);
        int r = nvml_event_wait(w->set, (unsigned)timeout, &msg.ev, &err);
        if (atomic_load(&w->stopping))
            break;
        if (r == 0)
            push(w, &msg);
        bool ok = r == 0 || r == -ETIMEDOUT;
        if (!ok) {
            atomic_fetch_add(&w->wait_errors, 1);
            log_debug("NVML event wait failed: %s", err.msg);
        }
        switch (health_wait_result(&p, &ws, ok)) {
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
            pause_ms(w, ws.backoff_ms);
    }
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

    if ((r = nvml_event_set_create(&w->set, err)) < 0) {
        error_prefix(err, "creating the NVML event set");
        w->set = NULL;
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
    sigset_t all, old;
    int r;

    /* The thread must not take the signals the loop reads from its signalfd. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_fetch_add(&w->refs, 1);
    r = -pthread_create(&w->thread, NULL, waiter_thread, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        atomic_fetch_sub(&w->refs, 1);
        return error_set(err, r, "starting the health thread: %s", strerror(-r));
    }
    w->thread_started = true;
    return 0;
}

void hm_waiter_stop(struct hm_waiter *w)
{
    uint64_t one = 1;

    if (!w)
        return;
    if (w->thread_started) {
        atomic_store(&w->stopping, true);
        (void)!write(w->stop_fd, &one, sizeof(one));
        pthread_detach(w->thread);
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

int hm_waiter_register(struct hm_waiter *w, const char *uuid, struct error *err)
{
    struct hm_reg *reg = reg_by_uuid(w, uuid);
    nvml_device dev;
    uint64_t supported;
    int r;

    if (reg)
        return reg->unsupported ? -ENOTSUP : 0;
    if ((r = nvml_device_by_uuid(uuid, &dev, err)) < 0 ||
        (r = nvml_device_supported_events(dev, &supported, err)) < 0)
        return r;
    /* what the reference asks for, as far as the device supports it */
    uint64_t mask = (NVML_EVT_XID_CRITICAL | NVML_EVT_DOUBLE_BIT_ECC | NVML_EVT_SINGLE_BIT_ECC) &
                    supported;
    r = nvml_device_register_events(dev, mask, w->set, err);
    if (r < 0 && r != -ENOTSUP)
        return r;
    w->regs = grow_array(w->regs, &w->alloc_regs, w->n_regs + 1, sizeof(*w->regs));
    reg = &w->regs[w->n_regs++];
    *reg = (struct hm_reg){ .dev = dev, .unsupported = r == -ENOTSUP };
    snprintf(reg->uuid, sizeof(reg->uuid), "%s", uuid);
    return r;
}

bool hm_waiter_registered(const struct hm_waiter *w, const char *uuid)
{
    const struct hm_reg *reg = reg_by_uuid(w, uuid);
    return reg && !reg->unsupported;
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
