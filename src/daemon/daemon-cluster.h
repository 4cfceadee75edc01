/* What the serve daemon hands the cluster features (src/cluster/): the node's labels
 * after every state swap, and an Event for every device health transition. Kept out of
 * daemon.c so the daemon's state machine stays one concern. Loop-thread only. */
#pragma once

#include <stdint.h>

#include "state/node-state.h"

struct cluster;
struct health_monitor;

/* The health each device of the served state was last reported with, by UUID. */
struct daemon_health_view {
    struct daemon_health_unit {
        char uuid[INV_UUID_MAX];
        unsigned gpu_index;
        int mig;            /* -1: the full GPU */
        const char *resource; /* borrowed from the node state; NULL: advertised nowhere */
        bool healthy;
    } *units;
    size_t n;
};

/* Derive the labels of s (GFD's set; timestamp as given, 0 for none) and hand them to
 * the cluster for delivery. A derivation failure is logged; serving goes on. */
void daemon_cluster_publish_labels(struct cluster *c, const struct node_state *s,
                                   uint64_t timestamp);

/* Rebuild v for the state s (a swap) without reporting anything: a reload is not a
 * health transition. */
void daemon_health_view_reset(struct daemon_health_view *v, const struct node_state *s,
                              const struct health_monitor *h);
/* The monitor reported a change: post an Event for each unit whose health flipped. */
void daemon_health_view_update(struct daemon_health_view *v, struct cluster *c,
                               const struct health_monitor *h, const struct node_state *s);
void daemon_health_view_clear(struct daemon_health_view *v);
