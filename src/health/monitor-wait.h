/* The NVML event waiter of the health monitor (health/monitor.c is its only user): the
 * event set, the thread that blocks in nvml_event_wait() on it, and the queue plus
 * eventfd that hand what the thread saw to the loop.
 *
 * Lifetime: created once when health checks are first enabled and kept for the whole
 * process (reloads retarget the monitor, they do not replace the waiter), so there are
 * two eventfds however often the plugin reloads, and one thread and one event set while
 * no new GPU is registered. Registering a GPU while the thread sits in a long wait
 * switches to a new event set and thread (a *generation*, see monitor-wait.c) so that
 * the GPU is watched within a second; the old thread ends when its wait returns, and at
 * most two old ones linger. NVML cannot interrupt a wait: hm_waiter_stop() tells the
 * (detached) threads to stop; each holds its own reference on the waiter, frees its
 * event set, and lets the waiter (and its NVML reference) go when its wait returns.
 *
 * Threads: every function here is called on the loop thread; the waiter's own thread
 * only reads its parameters (under the waiter's mutex) and pushes messages. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "nvml/nvml.h"
#include "policy/health.h"

enum hm_msg_kind { HM_MSG_EVENT, HM_MSG_WAIT_FAILING, HM_MSG_WAIT_OK };

struct hm_msg {
    enum hm_msg_kind kind;
    struct nvml_event ev;
    char detail[160];          /* HM_MSG_WAIT_FAILING: the last wait error */
};

/* Messages queued and not yet drained beyond this are dropped (and counted): a flood of
 * NVML events must not grow the process without bound while the loop is busy. */
#define HM_QUEUE_MAX 4096

struct hm_waiter;

/* Creates the event set and the eventfds and takes an NVML reference (NVML must be
 * open). The thread does not run yet: register devices first, then hm_waiter_run(). */
int hm_waiter_new(const struct health_config *hc, struct hm_waiter **out, struct error *err);
/* Starts the thread. On failure the waiter is unchanged (free it with hm_waiter_stop). */
int hm_waiter_run(struct hm_waiter *w, struct error *err);
/* Stops and lets go: see the lifetime note above. NULL ok. */
void hm_waiter_stop(struct hm_waiter *w);

/* Register the GPU with this UUID for Xid and ECC events (as far as it supports them)
 * unless it already is. 0: registered (now or before); -ENOTSUP: too old (remembered,
 * not retried; err filled the first time only); other -errno: not registered. NVML has
 * no unregister: a registration lasts as long as the waiter. Its events reach the loop
 * within a second even if the thread is in the middle of a long wait (a wait does not
 * see a registration made after it began: a new one starts, see monitor-wait.c). */
int hm_waiter_register(struct hm_waiter *w, const char *uuid, struct error *err);
/* Nothing to register for this UUID: its events are watched, or never can be
 * (NOT_SUPPORTED). False for a GPU that a switch to a new event set could not register
 * (lost at the time): register it again once it answers. */
bool hm_waiter_registered(const struct hm_waiter *w, const char *uuid);
/* The UUID of the GPU whose registered handle dev is; NULL if none (or dev NULL). */
const char *hm_waiter_uuid_of(const struct hm_waiter *w, nvml_device dev);
/* Readable (EPOLLIN) when messages are queued. */
int hm_waiter_fd(const struct hm_waiter *w);
/* Takes every queued message (*out: caller frees). Returns their number; *dropped gets
 * the number dropped since the last drain. */
size_t hm_waiter_drain(struct hm_waiter *w, struct hm_msg **out, uint64_t *dropped);
/* New wait timeout / error threshold / backoff (from a reloaded config). A wait already
 * in progress keeps its timeout. */
void hm_waiter_configure(struct hm_waiter *w, const struct health_config *hc);
/* Failed waits so far. */
uint64_t hm_waiter_errors(const struct hm_waiter *w);
