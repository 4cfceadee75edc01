/* Event aggregation and rate limiting (see cluster-evcache.h). */
#include "cluster/cluster-evcache.h"
#include "core/macro.h"

void cluster_evcache_init(struct cluster_evcache *c)
{
    *c = (struct cluster_evcache){
        .bucket = TOKENBUCKET_INIT(CLUSTER_EVCACHE_REFILL_MS, CLUSTER_EVCACHE_BURST),
        .warn = RATELIMIT_INIT(CLUSTER_EVQ_WARN_INTERVAL_MS, 1),
    };
}

static void entry_clear(struct cluster_evcache_entry *e)
{
    free(e->key);
    free(e->name);
    free(e->first_time);
    *e = (struct cluster_evcache_entry){ 0 };
}

void cluster_evcache_clear(struct cluster_evcache *c)
{
    for (size_t i = 0; i < CLUSTER_EVCACHE_SIZE; i++)
        entry_clear(&c->e[i]);
    for (size_t i = 0; i < c->q.n; i++)
        cluster_evq_item_free(c->q.items[i]);
    c->q.n = 0;
}

struct cluster_ev_decision cluster_evcache_observe(struct cluster_evcache *c, const char *type,
                                                   const char *reason, const char *message,
                                                   uint64_t now_ms, const char *new_name,
                                                   const char *now_rfc3339)
{
    /* No timer: the bucket is refilled when an event arrives. */
    if (!tokenbucket_take(&c->bucket, now_ms)) {
        c->dropped++;
        return (struct cluster_ev_decision){ .action = CLUSTER_EV_DROP };
    }
    _cleanup_free_ char *key = xasprintf("%s\x1f%s\x1f%s", type, reason, message);
    struct cluster_evcache_entry *victim = &c->e[0];
    c->tick++;
    for (size_t i = 0; i < CLUSTER_EVCACHE_SIZE; i++) {
        struct cluster_evcache_entry *e = &c->e[i];
        if (e->key && streq(e->key, key)) {
            e->count++;
            e->used = c->tick;
            return (struct cluster_ev_decision){ CLUSTER_EV_PATCH, e->name, e->first_time,
                                                 e->count };
        }
        if (!e->key ? victim->key != NULL : victim->key && e->used < victim->used)
            victim = e;
    }
    entry_clear(victim);
    *victim = (struct cluster_evcache_entry){
        .key = TAKE_PTR(key),
        .name = xstrdup(new_name),
        .first_time = xstrdup(now_rfc3339),
        .count = 1,
        .used = c->tick,
    };
    return (struct cluster_ev_decision){ CLUSTER_EV_CREATE, victim->name, victim->first_time, 1 };
}

void cluster_evcache_forget(struct cluster_evcache *c, const char *name)
{
    for (size_t i = 0; i < CLUSTER_EVCACHE_SIZE; i++)
        if (c->e[i].name && streq(c->e[i].name, name))
            entry_clear(&c->e[i]);
}

/* ---- the delivery queue ---- */

void cluster_evq_item_free(struct cluster_evq_item *it)
{
    if (!it)
        return;
    free(it->name);
    free(it->type);
    free(it->reason);
    free(it->message);
    free(it->first_time);
    free(it->last_time);
    free(it);
}

static void set_str(char **dst, const char *src)
{
    free(*dst);
    *dst = xstrdup(src);
}

void cluster_evq_remove(struct cluster_evq *q, struct cluster_evq_item *it)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->items[i] == it) {
            memmove(&q->items[i], &q->items[i + 1], (q->n - i - 1) * sizeof(q->items[0]));
            q->n--;
            return;
        }
}

/* The item to drop for room: the oldest Normal one not in flight, else the oldest not
 * in flight (items are in queueing order). */
static struct cluster_evq_item *victim(const struct cluster_evq *q)
{
    struct cluster_evq_item *any = NULL;
    for (size_t i = 0; i < q->n; i++) {
        struct cluster_evq_item *it = q->items[i];
        if (it->req)
            continue;
        if (streq(it->type, "Normal"))
            return it;
        if (!any)
            any = it;
    }
    return any;
}

struct cluster_evq_item *cluster_evq_push(struct cluster_evq *q, const char *name,
                                          const char *type, const char *reason,
                                          const char *message, unsigned count,
                                          const char *first_time, const char *last_time,
                                          bool exists,
                                          struct cluster_evq_item **dropped)
{
    if (dropped)
        *dropped = NULL;
    for (size_t i = 0; i < q->n; i++) {
        struct cluster_evq_item *it = q->items[i];
        if (!streq(it->name, name))
            continue;
        /* Still waiting: the next try sends the latest; whether it exists on the
         * server is what the queue learnt, not what the cache assumes. */
        set_str(&it->message, message);
        set_str(&it->last_time, last_time);
        it->count = count;
        if (it->req)
            it->changed = true;
        return it;
    }
    if (q->n == CLUSTER_EVQ_MAX) {
        /* In flight are at most a few (the caller's cap is far below the bound). */
        struct cluster_evq_item *v = victim(q);
        cluster_evq_remove(q, v);
        q->dropped_full++;
        if (dropped)
            *dropped = v;
        else
            cluster_evq_item_free(v);
    }
    struct cluster_evq_item *it = xcalloc(1, sizeof(*it));
    it->name = xstrdup(name);
    it->type = xstrdup(type);
    it->reason = xstrdup(reason);
    it->message = xstrdup(message);
    it->first_time = xstrdup(first_time);
    it->last_time = xstrdup(last_time);
    it->count = count;
    it->exists = exists;
    it->backoff = BACKOFF_INIT(CLUSTER_EVQ_RETRY_FIRST_MS, CLUSTER_EVQ_RETRY_MAX_MS, 0, true);
    q->items[q->n++] = it;
    return it;
}

bool cluster_evq_failed(struct cluster_evq_item *it, uint64_t now_ms)
{
    if (it->tries == 0)
        it->since_ms = now_ms;
    it->tries++;
    if (it->tries >= CLUSTER_EVQ_GIVEUP_TRIES && now_ms - it->since_ms >= CLUSTER_EVQ_GIVEUP_MS)
        return false;
    it->next_ms = now_ms + backoff_next(&it->backoff);
    return true;
}

struct cluster_evq_item *cluster_evq_due(const struct cluster_evq *q, uint64_t now_ms,
                                         uint64_t *next_ms)
{
    uint64_t next = UINT64_MAX;
    struct cluster_evq_item *due = NULL;
    for (size_t i = 0; i < q->n; i++) {
        struct cluster_evq_item *it = q->items[i];
        if (it->req)
            continue;
        if (it->next_ms <= now_ms && !due)
            due = it;
        if (it->next_ms < next)
            next = it->next_ms;
    }
    if (next_ms)
        *next_ms = next;
    return due;
}
