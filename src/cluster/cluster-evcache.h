/* Event aggregation and rate limiting, like client-go's EventCorrelator (pure: time is
 * passed in, nothing is sent).
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
#include <stdint.h>

#include "core/tokenbucket.h"

#define CLUSTER_EVCACHE_SIZE 64
#define CLUSTER_EVCACHE_BURST 25
#define CLUSTER_EVCACHE_REFILL_MS (5u * 60u * 1000u)

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
};

enum cluster_ev_action { CLUSTER_EV_DROP, CLUSTER_EV_CREATE, CLUSTER_EV_PATCH };

struct cluster_ev_decision {
    enum cluster_ev_action action;
    const char *name;       /* cache-owned, valid until the next call */
    const char *first_time; /* cache-owned */
    unsigned count;         /* the count to send */
};

void cluster_evcache_init(struct cluster_evcache *c);
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
