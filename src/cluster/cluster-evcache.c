/* Event aggregation and rate limiting (see cluster-evcache.h). */
#include "cluster/cluster-evcache.h"
#include "core/macro.h"

void cluster_evcache_init(struct cluster_evcache *c)
{
    *c = (struct cluster_evcache){
        .bucket = TOKENBUCKET_INIT(CLUSTER_EVCACHE_REFILL_MS, CLUSTER_EVCACHE_BURST),
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
