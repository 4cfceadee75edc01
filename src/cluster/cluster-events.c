/* Events on the Node: aggregated and rate-limited by cluster-evcache.c, then created
 * (POST) or bumped (PATCH count and lastTimestamp of the existing Event), like the
 * kubelet's EventRecorder. Best effort: a failure is logged at debug level, except the
 * first 403, which kube/ logs naming the verb and resource RBAC lacks. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "cluster/cluster-internal.h"
#include "cluster/cluster-objects.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"

/* Requests in flight at once; beyond it an event is dropped (the API server is slow or
 * gone: the kubelet keeps being served, the events are lost, as client-go's are when
 * its queue of 1000 fills). */
#define EVENTS_MAX_INFLIGHT 16

struct event_req {
    struct cluster *c;
    struct kube_req *q;
    struct event_req *next, **pprev; /* c->events */
    char *name;
    json_t *create;    /* the full Event, to create if the PATCH finds it gone */
};

void cluster_now_rfc3339(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void event_req_free(struct event_req *r)
{
    if (r->pprev) {
        *r->pprev = r->next;
        if (r->next)
            r->next->pprev = r->pprev;
    }
    r->c->events_inflight--;
    free(r->name);
    json_decref(r->create);
    free(r);
}

static void on_event_done(struct kube *k, int status, json_t *body, void *userdata)
{
    struct event_req *r = userdata;
    struct cluster *c = r->c;
    r->q = NULL;
    if (status == 404 && r->create) {
        /* Events expire (1 h by default): the one we meant to bump is gone. */
        cluster_evcache_forget(&c->evcache, r->name);
        _cleanup_free_ char *path = xasprintf("/api/v1/namespaces/default/events");
        struct error err = { 0 };
        json_t *ev = TAKE_PTR(r->create);
        r->q = kube_request(k, KUBE_POST, path, ev, on_event_done, r, &err);
        json_decref(ev);
        if (r->q)
            return;
        log_debug("Event %s not posted: %s", r->name, err.msg);
    } else if (status < 200 || status > 299) {
        if (status < 0)
            log_debug("Event %s not posted: %s", r->name, strerror(-status));
        else
            log_debug("Event %s not posted: HTTP %d", r->name, status);
    }
    event_req_free(r);
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

    struct kube *k = cluster_kube(c);
    if (!k)
        return;
    if (c->events_inflight >= EVENTS_MAX_INFLIGHT) {
        log_debug("Event %s dropped: %u Events already in flight", reason, c->events_inflight);
        return;
    }
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
    struct event_req *r = xcalloc(1, sizeof(*r));
    r->c = c;
    c->events_inflight++;
    r->next = c->events;
    if (r->next)
        r->next->pprev = &r->next;
    r->pprev = &c->events;
    c->events = r;
    r->name = xstrdup(d.name);
    r->create = cluster_event_build(c->node, d.name, type, reason, message, d.count,
                                    d.first_time, now);
    struct error err = { 0 };
    struct kube_req *q;
    if (d.action == CLUSTER_EV_PATCH) {
        _cleanup_free_ char *path =
            xasprintf("/api/v1/namespaces/default/events/%s", d.name);
        json_t *patch = cluster_event_patch(message, d.count, now);
        q = kube_request(k, KUBE_PATCH_MERGE, path, patch, on_event_done, r, &err);
        json_decref(patch);
    } else {
        json_t *ev = TAKE_PTR(r->create);
        q = kube_request(k, KUBE_POST, "/api/v1/namespaces/default/events", ev, on_event_done,
                         r, &err);
        json_decref(ev);
    }
    if (!q) {
        log_debug("Event %s not posted: %s", reason, err.msg);
        event_req_free(r);
        return;
    }
    r->q = q;
}

void cluster_events_free(struct cluster *c)
{
    while (c->events) {
        kube_request_cancel(c->events->q);
        event_req_free(c->events);
    }
    cluster_evcache_clear(&c->evcache);
}
