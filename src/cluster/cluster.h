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
struct kube;
struct cluster_selection;

enum cluster_labels_mode {
    CLUSTER_LABELS_OFF,
    CLUSTER_LABELS_FILE,         /* NFD local feature file (--use-node-feature-api=false) */
    CLUSTER_LABELS_NODEFEATURE,  /* NFD NodeFeature object (GFD's default) */
    CLUSTER_LABELS_NODE_PATCH,   /* the Node's own labels (--node-labels-patch) */
};

struct cluster_options {
    enum cluster_labels_mode labels;
    const char *output_file;     /* CLUSTER_LABELS_FILE */
    bool keep_output_file;       /* left in place at exit (GFD with --sleep-interval
                                  * infinite), instead of removed as GFD removes it */
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

/* Per-node configuration is asked for and possible: --config-dir and a node name (without
 * the name, cluster_new logs why it is off). The one test serve and `list` share. */
bool cluster_config_on(const struct config_cluster *k);

/* The per-node selection serve would make now, for one-shot commands (`list`): the
 * Node read with one GET on a loop of its own (the API client's default deadline), then
 * cluster_select_config() with serve's arguments. When the Node cannot be read (no
 * client, no answer, an error status), one warning names the node and the error, and the
 * selection is made without the label, as serve does after CLUSTER_CONFIG_WAIT_MS; the
 * selection's note then says so. Only when cluster_config_on(k). Returns 0, or -errno
 * from the selection itself (err says why; serve then runs the configuration of the
 * flags, environment and --config-file). */
int cluster_config_select_now(const struct config_cluster *k, struct cluster_selection *out,
                              struct error *err);

/* The API client for k's --kubeconfig (or in-cluster credentials), --kube-api-qps and
 * --kube-api-burst: the one place serve's features and `list` create it. See kube_new. */
int cluster_kube_new(struct loop *l, const struct config_cluster *k, struct kube **out,
                     struct error *err);

/* The API client of every feature that talks to the API server (DRA's slices and claims
 * too: one connection per process), made on first use from the settings cluster_new
 * read. NULL when it cannot be made (no credentials): said once, in one error line. */
struct kube *cluster_kube(struct cluster *c);

/* Labels are delivered somewhere (--gfd). */
bool cluster_labels_enabled(const struct cluster *c);
/* The node's current label set (copied): delivered if it differs from what was last
 * delivered (or the last delivery failed). */
void cluster_labels_publish(struct cluster *c, const struct labels *l);

/* Where the delivery stands: 1 the last label set handed over is delivered, 0 it is
 * being delivered (or nothing was handed over yet), -1 its last attempt failed and waits
 * for the retry (the failure is logged). For GFD's --oneshot. */
int cluster_labels_settled(const struct cluster *c);

/* An Event on the Node ("Normal" / "Warning"), aggregated and rate-limited. Dropped
 * silently when Events are off. */
_printf_(4, 5) void cluster_event(struct cluster *c, const char *type, const char *reason,
                                  const char *fmt, ...);
