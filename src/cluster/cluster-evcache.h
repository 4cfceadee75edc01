/* Event aggregation and rate limiting, like client-go's EventCorrelator, and the queue of
 * Events to deliver with its retry policy (all pure: time is passed in, nothing is sent).
 *
 * - Same type + reason + message as an Event already posted (client-go's eventLogger
 *   key, our object being always the one Node): the existing Event is PATCHed with
 *   count + 1 and a new lastTimestamp instead of a new Event being created.
 * - A token bucket for the source and object (client-go's EventSourceObjectSpamFilter):
 *   25 events at once, then one per 5 minutes; events past it are dropped (counted).
 * - The remembered Events are a bounded LRU (client-go keeps 4096 across all objects;
 *   we have one object and a handful of reasons).
 * client-go's third stage, folding >= 10 similar events (same reason, different
 * messages) into one "(combined from similar events)" Event, is left out: our messages
 * differ by GPU, and one Event per GPU is what an operator wants to read. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backoff.h"
#include "core/ratelimit.h"
#include "core/tokenbucket.h"

#define CLUSTER_EVCACHE_SIZE 64
#define CLUSTER_EVCACHE_BURST 25
#define CLUSTER_EVCACHE_REFILL_MS (5u * 60u * 1000u)

/* The queue of Events to deliver (pure too: time is passed in, nothing is sent). An
 * Event whose request fails is retried, not dropped: client-go retries an Event 12
 * times 10 s apart; ours waits with capped backoff (1 s doubling to 30 s, jittered, so
 * the end of an outage is seen within 30 s) and gives up only after at least
 * CLUSTER_EVQ_GIVEUP_TRIES tries over at least CLUSTER_EVQ_GIVEUP_MS. Any failure is
 * retried, a 403 too: RBAC is often granted after the pod starts.
 *
 * One item per Event object (by name): an Event aggregated again while it waits
 * changes the waiting item (the latest count, message and lastTimestamp), so the queue
 * holds at most one request per Event, and what finally gets through carries the
 * latest count. Bounded: when CLUSTER_EVQ_MAX items wait, the oldest Normal one not in
 * flight is dropped (else the oldest not in flight): a Warning is what an operator
 * must not miss. */
#define CLUSTER_EVQ_MAX 64
#define CLUSTER_EVQ_RETRY_FIRST_MS 1000u
#define CLUSTER_EVQ_RETRY_MAX_MS 30000u
#define CLUSTER_EVQ_GIVEUP_MS (150u * 1000u)
#define CLUSTER_EVQ_GIVEUP_TRIES 12u
/* "Events dropped": one warning per 5 minutes at most, the next one says how many. */
#define CLUSTER_EVQ_WARN_INTERVAL_MS (5u * 60u * 1000u)

struct kube_req;

struct cluster_evq_item {
    char *name, *type, *reason, *message, *first_time, *last_time;
    unsigned count;
    bool exists;            /* created on the server: PATCH it, else POST it */
    bool changed;           /* aggregated again while in flight: send once more */
    bool flipped;           /* 404 -> POST or 409 -> PATCH done once since the last success */
    struct kube_req *req;   /* in flight (the caller's); never dropped while set */
    void *owner;            /* the caller's, for its request's callback */
    uint64_t since_ms;      /* first failure of the current run */
    uint64_t next_ms;       /* not before (0: now) */
    unsigned tries;         /* failed tries in the current run */
    struct backoff backoff;
};

struct cluster_evq {
    struct cluster_evq_item *items[CLUSTER_EVQ_MAX];
    size_t n;
    uint64_t dropped_full;   /* dropped to make room */
    uint64_t dropped_giveup; /* given up after retrying */
};


struct cluster_evcache_entry {
    char *key;          /* type \x1f reason \x1f message */
    char *name;         /* the Event object's name */
    char *first_time;   /* RFC 3339, the Event's firstTimestamp */
    unsigned count;
    uint64_t used;      /* LRU tick */
};

struct cluster_evcache {
    struct cluster_evcache_entry e[CLUSTER_EVCACHE_SIZE];
    uint64_t tick;
    struct tokenbucket bucket; /* time in ms */
    uint64_t dropped;
    struct cluster_evq q;
    struct ratelimit warn;     /* the warning that Events are being dropped */
};

enum cluster_ev_action { CLUSTER_EV_DROP, CLUSTER_EV_CREATE, CLUSTER_EV_PATCH };

struct cluster_ev_decision {
    enum cluster_ev_action action;
    const char *name;       /* cache-owned, valid until the next call */
    const char *first_time; /* cache-owned */
    unsigned count;         /* the count to send */
};

void cluster_evcache_init(struct cluster_evcache *c);
/* Frees the remembered Events and the queue (the caller cancels what is in flight). */
void cluster_evcache_clear(struct cluster_evcache *c);
/* now_ms: a monotonic clock for the bucket. new_name / now_rfc3339 are used if the
 * event is new. */
struct cluster_ev_decision cluster_evcache_observe(struct cluster_evcache *c, const char *type,
                                                   const char *reason, const char *message,
                                                   uint64_t now_ms, const char *new_name,
                                                   const char *now_rfc3339);
/* The Event `name` is gone on the server (a PATCH got 404: Events expire after an
 * hour): forget it, so the same event next time creates a new one. */
void cluster_evcache_forget(struct cluster_evcache *c, const char *name);

/* An Event to send (evcache's decision d, d.action != CLUSTER_EV_DROP; exists: PATCH).
 * Merged into the item of the same name if one waits. Returns the item; *dropped
 * (may be NULL) gets the item dropped to make room, to be freed with
 * cluster_evq_item_free (NULL: none). */
struct cluster_evq_item *cluster_evq_push(struct cluster_evq *q, const char *name,
                                          const char *type, const char *reason,
                                          const char *message, unsigned count,
                                          const char *first_time, const char *last_time,
                                          bool exists,
                                          struct cluster_evq_item **dropped);
/* A try of `it` failed at now_ms. true: retry at it->next_ms; false: give up (it has
 * been tried for long enough); the caller then removes it. */
bool cluster_evq_failed(struct cluster_evq_item *it, uint64_t now_ms);
/* The first item due at now_ms and not in flight, or NULL; *next_ms (may be NULL)
 * gets the earliest time a waiting item not in flight is due (UINT64_MAX: none). */
struct cluster_evq_item *cluster_evq_due(const struct cluster_evq *q, uint64_t now_ms,
                                         uint64_t *next_ms);
/* Take `it` out of the queue (not freed). */
void cluster_evq_remove(struct cluster_evq *q, struct cluster_evq_item *it);
void cluster_evq_item_free(struct cluster_evq_item *it);
