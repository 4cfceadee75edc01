/* The DevicePlugin gRPC service of one resource: one Unix socket, one gRPC server,
 * the ListAndWatch streams the kubelet keeps open, and the unary RPCs.
 * Loop-thread only. The resource, config and topology it is given must outlive it. */
#pragma once

#include <stdbool.h>

#include "config/config.h"
#include "core/error.h"
#include "policy/resources.h"

struct loop;
struct topo_model;
struct dp_plugin;
struct grpc_server;

struct dp_callbacks {
    /* Health of a device right now; *reason (reason may be NULL) says why not. */
    bool (*device_healthy)(void *userdata, const struct rs_device *d, const char **reason);
};

/* Besides the DevicePlugin service, each plugin socket answers one method of our own
 * that the kubelet never calls: the live health of every device with its reason, as a
 * JSON payload (gRPC payloads are opaque bytes). `gpu-device-plugin list` uses it to show
 * what the running plugin sees. */
#define DP_STATUS_METHOD "/gpudeviceplugin.v1.Status/Devices"

struct metrics_series;
/* The series the RPCs of one resource update (daemon/daemon-metrics.c makes them); all
 * NULL while metrics are off, which makes every update a no-op. Latency is the
 * handler's time on the loop: decode, decide, encode. */
struct dp_metrics {
    struct metrics_series *allocate, *allocate_errors, *allocate_seconds;
    struct metrics_series *preferred, *preferred_errors, *preferred_seconds;
};

struct dp_context {
    const struct rs_resource *resource;
    const struct config *config;
    const struct inventory *inventory;
    const struct topo_model *topo;      /* NULL: no topology-aware placement */
    struct dp_callbacks callbacks;
    void *userdata;
    struct dp_metrics metrics;
};

/* Serve the resource on <socket_dir>/<resource->socket_name>. Returns 0 or -errno with
 * err naming the socket. */
int dp_plugin_start(struct loop *l, const char *socket_dir, const struct dp_context *ctx,
                    struct dp_plugin **out, struct error *err);
/* Close the socket and every stream. NULL ok. */
void dp_plugin_stop(struct dp_plugin *p);
/* Rebind the socket (the kubelet deletes every socket in its directory when it
 * restarts); streams of the old kubelet are closed. */
int dp_plugin_rebind(struct dp_plugin *p, struct error *err);
/* A reload kept this resource (same name and socket): answer from ctx from now on and,
 * with `send`, send the new list on every ListAndWatch stream if it changed (without:
 * the caller registers again and the kubelet's new stream gets it). Connections and
 * streams stay. */
void dp_plugin_retarget(struct dp_plugin *p, const struct dp_context *ctx, bool send);
/* Health or devices changed somewhere on the node: send the current list on every
 * ListAndWatch stream if this resource's list differs from the last one sent (an
 * unchanged list is not re-sent). */
void dp_plugin_devices_changed(struct dp_plugin *p);
const char *dp_plugin_socket_path(const struct dp_plugin *p);
unsigned dp_plugin_streams(const struct dp_plugin *p);
/* Test hook (tests/fuzz/fuzz-dp.c): the gRPC server behind the socket, so a socketpair
 * can be adopted into it with grpc_server_adopt() and fed in memory. */
struct grpc_server *dp_plugin_server(const struct dp_plugin *p);

/* One container of a GetPreferredAllocation request, as the service answers it (exported
 * so the fuzz target drives the same code). *ids points into the resource; free the
 * array. Returns 0 (n_ids 0: the reference's empty answer) or -errno with err set. */
struct V1beta1__ContainerPreferredAllocationRequest;
int dp_preferred_container(const struct dp_context *ctx,
                           const struct V1beta1__ContainerPreferredAllocationRequest *c,
                           const char ***ids, size_t *n_ids, struct error *err);

/* Exported for tests and benchmarks: encode the ListAndWatch message of a resource. */
int dp_encode_device_list(const struct dp_context *ctx, uint8_t **out, size_t *len);
