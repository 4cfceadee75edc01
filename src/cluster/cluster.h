/* The cluster-facing features of `serve`, over the Kubernetes API client (kube/):
 * GPU node labels (NFD NodeFeature object, NFD feature file, or a patch of the Node's
 * labels), per-node configuration chosen by a node label, and Events on the Node.
 *
 * The API client is created only when an enabled feature needs it; with none enabled
 * (NVIDIA's default deployment, which gives the plugin no RBAC) the plugin opens no
 * connection at all. A feature that cannot work (no node name, no credentials) is
 * logged in one line and turned off; the plugin keeps serving the kubelet whatever the
 * API server does.
 *
 * The settings are read once, at start (cluster_new); a SIGHUP reload changes what the
 * daemon serves, not which cluster features run. Loop-thread only. */
#pragma once

#include <stdbool.h>

#include "config/config.h"
#include "core/error.h"

struct loop;
struct labels;
struct cluster;

enum cluster_labels_mode {
    CLUSTER_LABELS_OFF,
    CLUSTER_LABELS_FILE,         /* NFD local feature file (--use-node-feature-api=false) */
    CLUSTER_LABELS_NODEFEATURE,  /* NFD NodeFeature object (GFD's default) */
    CLUSTER_LABELS_NODE_PATCH,   /* the Node's own labels (--node-labels-patch) */
};

struct cluster_options {
    enum cluster_labels_mode labels;
    const char *output_file;     /* CLUSTER_LABELS_FILE */
};

/* Apply a per-node configuration: path is the selected file, "" for the empty config,
 * NULL for the configuration of the flags, environment and --config-file (used when no
 * named config can be selected). Returns 0, or -errno with err saying why the config was
 * refused (the running state is then unchanged). */
typedef int (*cluster_apply_fn)(void *userdata, const char *path, struct error *err);

/* Reads cfg->cluster and o (copied). Never fails: problems are logged. */
struct cluster *cluster_new(struct loop *l, const struct config *cfg,
                            const struct cluster_options *o, cluster_apply_fn apply,
                            void *userdata);
/* Cancels every request; removes the feature file (as GFD does on exit). NULL ok. */
void cluster_free(struct cluster *c);

/* Per-node configuration is on (--config-dir and a node name). Then serve starts the
 * daemon from the first apply call instead of at once: cluster_config_start() makes it
 * from the loop, once the Node's label is known, or after CLUSTER_CONFIG_WAIT_MS without
 * an answer from the API server (then without the label; the label applies when it
 * comes). */
bool cluster_config_enabled(const struct cluster *c);
void cluster_config_start(struct cluster *c);
#define CLUSTER_CONFIG_WAIT_MS 10000u

/* Labels are delivered somewhere (--gfd). */
bool cluster_labels_enabled(const struct cluster *c);
/* The node's current label set (copied): delivered if it differs from what was last
 * delivered (or the last delivery failed). */
void cluster_labels_publish(struct cluster *c, const struct labels *l);

/* An Event on the Node ("Normal" / "Warning"), aggregated and rate-limited. Dropped
 * silently when Events are off. */
_printf_(4, 5) void cluster_event(struct cluster *c, const char *type, const char *reason,
                                  const char *fmt, ...);
