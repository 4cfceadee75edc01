/* The JSON the cluster features send, built from plain inputs (pure: no I/O, no
 * logging), so each shape is unit-tested without an API server.
 *
 * Labels are a jansson object of key -> string value ("nvidia.com/gpu.count": "8"). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* Annotations under a domain this project owns (NVIDIA's tools set none of these). */
/* The label keys this plugin wrote with --node-labels-patch, comma separated, sorted:
 * the next patch removes those it no longer produces and never touches other keys. */
#define CLUSTER_OWNED_LABELS_ANNOTATION "gpu-device-plugin.github.io/owned-labels"
/* The per-node config applied on this node ("" for the empty config). */
#define CLUSTER_CONFIG_ANNOTATION "gpu-device-plugin.github.io/config"

#define CLUSTER_NODEFEATURE_GROUP_VERSION "nfd.k8s-sigs.io/v1alpha1"
#define CLUSTER_NODEFEATURE_NODE_LABEL "nfd.node.kubernetes.io/node-name"

/* A JSON merge patch (RFC 7386) for a Node whose current labels and annotations are
 * node_labels / node_annotations (objects, or NULL): sets each label of `labels` whose
 * value differs, sets to null each key listed in the owned-labels annotation that
 * `labels` no longer has, and rewrites that annotation. NULL when nothing changes. */
json_t *cluster_node_labels_patch(const json_t *labels, const json_t *node_labels,
                                  const json_t *node_annotations);

/* The NodeFeature object named nvidia-features-for-<node> in ns (GFD's shape).
 * owner_refs: an array (borrowed, copied), or NULL for none. */
json_t *cluster_nodefeature_build(const char *node, const char *ns, const json_t *labels,
                                  const json_t *owner_refs);
/* existing (a NodeFeature from the server) already says what `want` says: the same
 * spec.labels, the node-name label and the owner references. */
bool cluster_nodefeature_same(const json_t *existing, const json_t *want);
/* Owner references for the NodeFeature from this pod (a Pod object): its DaemonSet
 * (controller) and the pod itself. NULL when the pod has no DaemonSet owner. */
json_t *cluster_owner_refs_from_pod(const json_t *pod);

/* A core/v1 Event on Node `node` (involvedObject uid = the node name, as the kubelet
 * does: `kubectl describe node` looks events up by that too). */
json_t *cluster_event_build(const char *node, const char *name, const char *type,
                            const char *reason, const char *message, unsigned count,
                            const char *first_time, const char *last_time);
/* The merge patch that bumps an existing Event. */
json_t *cluster_event_patch(const char *message, unsigned count, const char *last_time);
