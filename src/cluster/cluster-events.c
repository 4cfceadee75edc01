/* Events on the Node: aggregated and rate-limited by cluster-evcache.c, then created
 * (POST) or bumped (PATCH count and lastTimestamp of the existing Event), like the
 * kubelet's EventRecorder. A failed request is retried from cluster-evcache.c's bounded
 * queue (capped backoff for at least 2.5 minutes), so an Event raised during an API
 * outage or an RBAC gap is delivered after it. Single failures are debug lines (the
 * first 403 is logged by kube/, naming the verb and resource RBAC lacks); an Event
 * dropped (given up, or no room) is one rate-limited warning. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "cluster/cluster-internal.h"
#include "cluster/cluster-objects.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"

/* Requests in flight at once; the other queued Events wait for one to end (the API
 * server is slow or gone: the kubelet keeps being served). */
#define EVENTS_MAX_INFLIGHT 16
#define EVENTS_PATH "/api/v1/namespaces/default/events"

static void pump(struct cluster *c);

void cluster_now_rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* One warning per CLUSTER_EVQ_WARN_INTERVAL_MS: what an operator must know is that
 * Events are being lost, and why (the last one's cause), not each of them. */
static void dropped(struct cluster *c, struct cluster_evq_item *it, const char *why)
{
    struct cluster_evcache *e = &c->evcache;
    unsigned suppressed = 0;
    if (ratelimit_below(&e->warn, &suppressed))
        log_warning("Event %s (%s) dropped: %s; %llu Events dropped so far (%llu given up "
                    "after retrying, %llu for room in the queue of %u)%s",
                    it->reason, it->name, why,
                    (unsigned long long)(e->q.dropped_full + e->q.dropped_giveup),
                    (unsigned long long)e->q.dropped_giveup,
                    (unsigned long long)e->q.dropped_full, CLUSTER_EVQ_MAX,
                    suppressed ? "; this warning is repeated at most every 5 minutes" : "");
    else
        log_debug("Event %s (%s) dropped: %s", it->reason, it->name, why);
    /* The cache must not bump an Event the server never got. */
    if (!it->exists)
        cluster_evcache_forget(e, it->name);
}

static void on_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    (void)l;
    (void)t;
    struct cluster *c = userdata;
    c->events_timer = NULL;
    pump(c);
}

static void on_event_done(struct kube *k, int status, json_t *body, void *userdata);

/* Start one item's request. false: it could not even be queued (err says why). */
static bool send_item(struct cluster *c, struct kube *k, struct cluster_evq_item *it,
                      struct error *err)
{
    json_t *body;
    it->changed = false;
    it->owner = c;
    if (it->exists) {
        _cleanup_free_ char *path = xasprintf(EVENTS_PATH "/%s", it->name);
        body = cluster_event_patch(it->message, it->count, it->last_time);
        it->req = kube_request(k, KUBE_PATCH_MERGE, path, body, on_event_done, it, err);
    } else {
        body = cluster_event_build(c->node, it->name, it->type, it->reason, it->message,
                                   it->count, it->first_time, it->last_time);
        it->req = kube_request(k, KUBE_POST, EVENTS_PATH, body, on_event_done, it, err);
    }
    json_decref(body);
    if (!it->req)
        return false;
    c->events_inflight++;
    return true;
}

/* A try failed: retry it later, or give it up. */
static void failed(struct cluster *c, struct cluster_evq_item *it, const char *why)
{
    if (cluster_evq_failed(it, loop_now_ms())) {
        log_debug("Event %s (%s) not delivered: %s; try %u, retrying in %llu ms", it->reason,
                  it->name, why, it->tries,
                  (unsigned long long)(it->next_ms - loop_now_ms()));
        return;
    }
    c->evcache.q.dropped_giveup++;
    _cleanup_free_ char *msg =
        xasprintf("%s, still after %u tries over %llu s", why, it->tries,
                  (unsigned long long)((loop_now_ms() - it->since_ms) / 1000));
    dropped(c, it, msg);
    cluster_evq_remove(&c->evcache.q, it);
    cluster_evq_item_free(it);
}

/* Send what is due, within the in-flight cap; arm the timer for the next retry. */
static void pump(struct cluster *c)
{
    struct kube *k = cluster_kube(c);
    if (!k)
        return;
    uint64_t next = UINT64_MAX;
    struct cluster_evq_item *it;
    while (c->events_inflight < EVENTS_MAX_INFLIGHT &&
           (it = cluster_evq_due(&c->evcache.q, loop_now_ms(), &next))) {
        struct error err = { 0 };
        if (!send_item(c, k, it, &err))
            failed(c, it, err.msg);
    }
    if (c->events_inflight >= EVENTS_MAX_INFLIGHT)
        return; /* the next completion pumps again */
    if (c->events_timer) {
        loop_timer_cancel(c->loop, c->events_timer);
        c->events_timer = NULL;
    }
    if (next != UINT64_MAX) {
        uint64_t now = loop_now_ms();
        c->events_timer = loop_timer_add(c->loop, next > now ? next - now : 0, on_timer, c);
    }
}

static void on_event_done(struct kube *k, int status, json_t *body, void *userdata)
{
    (void)k;
    (void)body;
    struct cluster_evq_item *it = userdata;
    struct cluster *c = it->owner;
    it->req = NULL;
    c->events_inflight--;
    if (status >= 200 && status <= 299) {
        it->exists = true;
        it->flipped = false;
        it->tries = 0;
        backoff_reset(&it->backoff);
        if (it->changed) {
            /* Aggregated again meanwhile: send the latest count at once. */
            it->next_ms = 0;
        } else {
            cluster_evq_remove(&c->evcache.q, it);
            cluster_evq_item_free(it);
        }
        pump(c);
        return;
    }
    if (status == 404 && it->exists && !it->flipped) {
        /* Events expire (1 h by default): the one we meant to bump is gone; create it
         * again under the same name, with the count so far. */
        it->exists = false;
        it->flipped = true;
        it->next_ms = 0;
    } else if (status == 409 && !it->exists && !it->flipped) {
        /* Already there: an earlier POST got through but its answer was lost. */
        it->exists = true;
        it->flipped = true;
        it->next_ms = 0;
    } else {
        /* (A second 404 or 409 in a row is a server contradicting itself: backoff, not
         * a request loop.) */
        if (status == 404 || status == 409)
            it->exists = status == 409;
        _cleanup_free_ char *why =
            status < 0 ? xstrdup(strerror(-status)) : xasprintf("HTTP %d", status);
        failed(c, it, why);
    }
    pump(c);
}

void cluster_event(struct cluster *c, const char *type, const char *reason, const char *fmt,
                   ...)
{
    if (!c || !c->events_on)
        return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);

    char now[32];
    cluster_now_rfc3339(now);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* client-go's name: <object>.<unix nanoseconds in hex> */
    _cleanup_free_ char *name = xasprintf(
        "%s.%llx", c->node, (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    struct cluster_ev_decision d =
        cluster_evcache_observe(&c->evcache, type, reason, message, loop_now_ms(), name, now);
    if (d.action == CLUSTER_EV_DROP) {
        log_debug("Event %s dropped by the rate limit (%llu so far)", reason,
                  (unsigned long long)c->evcache.dropped);
        return;
    }
    struct cluster_evq_item *out = NULL;
    cluster_evq_push(&c->evcache.q, d.name, type, reason, message, d.count, d.first_time, now,
                     d.action == CLUSTER_EV_PATCH, &out);
    if (out) {
        dropped(c, out, "the queue is full");
        cluster_evq_item_free(out);
    }
    pump(c);
}

void cluster_events_free(struct cluster *c)
{
    for (size_t i = 0; i < c->evcache.q.n; i++)
        kube_request_cancel(c->evcache.q.items[i]->req);
    if (c->events_timer)
        loop_timer_cancel(c->loop, c->events_timer);
    c->events_timer = NULL;
    cluster_evcache_clear(&c->evcache);
}
