/* The publisher of this node's ResourceSlices (resource.k8s.io/v1): one pool named after
 * the node, owned by the Node, holding the devices it is given (split beyond 128 per
 * slice, see dra-slice.h), with unhealthy devices tainted when the API server keeps
 * device taints and withdrawn when it drops them (1.34 drops them silently unless the
 * DRADeviceTaints gate is on; detected from what a write returns).
 *
 * It converges what the API server holds (list + watch of the slices of this node and
 * driver) to what it was given: slices are named "<node>-<driver>-<index>", created,
 * updated (the pool generation bumped for a new content) or deleted, one request at a
 * time, and only when something differs: a steady state costs the watch and nothing
 * else. A slice deleted by someone (the kubelet wipes a plugin's slices when it starts)
 * or changed is restored, rate-limited; a failed write is retried with capped backoff,
 * its reason logged once. A slice is checked with dra_slice_validate() before it is
 * sent; one that fails is logged and not sent.
 *
 * Everything runs on the loop thread; the API client is borrowed and must outlive it. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

struct kube;
struct loop;
struct dra_publish;

/* One device that is not healthy (the rest are). */
struct dra_unhealthy_device {
    const char *device;              /* the device's name in the slice */
    bool lost;                       /* the GPU fell off the bus: gpu.nvidia.com/gpu-lost */
    unsigned xid;                    /* else the Xid that made it unhealthy: gpu.nvidia.com/xid */
};

enum dra_taint_mode {
    DRA_TAINTS_UNKNOWN,              /* no taint written yet */
    DRA_TAINTS_KEPT,                 /* DRADeviceTaints on: unhealthy devices are tainted */
    DRA_TAINTS_DROPPED,              /* off: unhealthy devices are left out of the slice */
};

enum dra_partition_mode {
    DRA_PARTITIONS_UNKNOWN,          /* no counter written yet (or none to write) */
    DRA_PARTITIONS_KEPT,             /* DRAPartitionableDevices on: counters kept */
    DRA_PARTITIONS_DROPPED,          /* off: the server dropped them; placements withdrawn */
};
struct dra_publish_stats {
    unsigned creates, updates, deletes; /* writes sent (answered or not) */
    unsigned failures;               /* requests that failed (retried with backoff) */
    unsigned write_failures;         /* of those, slice writes (creates, updates, deletes)
                                      * refused or never answered (the metrics' count) */
    unsigned restores;               /* convergences started by someone else's change */
    enum dra_taint_mode taints;
    enum dra_partition_mode partitions;
    bool converged;                  /* the server holds what was asked, nothing pending */
    const char *error;               /* why the last request failed, while it is retried;
                                      * NULL once one works (borrowed: valid until the
                                      * loop runs again) */
};

/* Starts the watch and reads the Node's UID (the owner); nothing is written before the
 * first dra_publish_set(). node and driver are copied. NULL only if the watch could not
 * start, err saying why (nothing logged). */
struct dra_publish *dra_publish_new(struct loop *l, struct kube *k, const char *node,
                                    const char *driver, struct error *err);
/* Stops everything; the slices stay (the kubelet removes a plugin's slices when it
 * unregisters). NULL is ignored. */
void dra_publish_free(struct dra_publish *p);

/* What the pool should hold: `devices` (an array of device entries as
 * dra_slice_devices() makes them, copied) and which of them are unhealthy (`unhealthy`,
 * n entries, copied; names that are not in devices are ignored). Cheap when nothing
 * changed: no request is made then. */
void dra_publish_set(struct dra_publish *p, json_t *devices, const struct dra_unhealthy_device *unhealthy,
                     size_t n);

/* As dra_publish_set, with DynamicMIG's counter sets (dra_slice_counter_sets(), copied;
 * NULL or empty: none), which the devices' consumesCounters name. With counter sets the
 * API server's version is read once (GET /version) to choose the layout (split from
 * 1.35, combined before). Should the server drop the counters (DRAPartitionableDevices
 * off), the placements are withdrawn and the full GPUs offered without them: a device
 * whose consumption the scheduler cannot see would be handed out twice. */
void dra_publish_set_pool(struct dra_publish *p, json_t *devices, json_t *counter_sets,
                          const struct dra_unhealthy_device *unhealthy, size_t n);
/* Where the devices come from again once let go of: fn calls dra_publish_set_pool() with
 * what it would publish now (called from inside the publisher, which then takes the
 * devices without converging on its own). Without a source the last devices are held. */
typedef void (*dra_publish_source_fn)(void *userdata);
void dra_publish_set_source(struct dra_publish *p, dra_publish_source_fn fn, void *userdata);

void dra_publish_get_stats(const struct dra_publish *p, struct dra_publish_stats *out);
/* Whether the API server holds the slices as asked now: the last round converged and
 * nothing waits since (a restore of a slice someone else deleted or changed, paced by
 * the restore token bucket; a retry; a request in flight). stats.converged says only
 * that the last round ended. For /readyz. */
bool dra_publish_converged(const struct dra_publish *p);

/* Moves the API connection on now (kube_send_now: connect, the TLS handshake as far as the
 * server has answered, what is queued), for a caller about to keep the loop busy; calls
 * nothing back. NULL is ignored. */
void dra_publish_send_now(struct dra_publish *p);
