/* GPU node labels exactly as NVIDIA's gpu-feature-discovery (GFD) v0.20 computes them
 * (docs/labels.md): the derivation (labels.c, pure: inventory + config in, labels out,
 * no NVML, no filesystem, no logging) and the NFD local feature file (labels-file.c).
 *
 * The input is the node state serve and list build (state/node-state.h): its inventory
 * (NVML facts, plus the host facts node/host.c reads from sysfs: machine type, PCI
 * class, vGPU capability) and its configuration (MIG strategy, sharing). So serve, list
 * and `gpu-device-plugin labels` cannot disagree about a node.
 *
 * Keys are full ("nvidia.com/gpu.product"); values are strings. A label set is kept
 * sorted by key with unique keys; setting a key again replaces its value (GFD merges its
 * labelers in order, later ones overriding earlier ones: the derivation relies on that).
 *
 * Thread rules: none; a label set is a plain value owned by whoever holds the pointer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "core/error.h"
#include "node/inventory.h"

struct label {
    char *key;     /* "nvidia.com/gpu.count" */
    char *value;   /* "8" */
};

struct labels {
    struct label *items;   /* sorted by key (strcmp), keys unique */
    size_t n;
    size_t alloc;
};

struct labels *labels_new(void);
void labels_free(struct labels *l);
DEFINE_CLEANUP_FUNC(struct labels, labels_free)
#define _cleanup_labels_ _cleanup_(labels_freep)

/* Set key to value (both copied), replacing an existing value. */
void labels_set(struct labels *l, const char *key, const char *value);
/* The value of key, or NULL. */
const char *labels_get(const struct labels *l, const char *key);
/* Same keys with the same values. */
bool labels_equal(const struct labels *a, const struct labels *b);

/* What the derivation needs besides the inventory. */
struct labels_input {
    const struct config *cfg;          /* MIG strategy, time-slicing / MPS sharing */
    /* The node. Its host facts (inv->host) are used even when NVML could not be
     * opened. */
    const struct inventory *inv;
    /* NVML could not be opened and --fail-on-init-error=false: GFD's "null" manager,
     * which labels no device: only the timestamp and vGPU labels come out. */
    bool nvml_missing;
    /* nvidia.com/gfd.timestamp value (Unix seconds); 0: no timestamp label
     * (--no-timestamp). GFD computes it once per (re)start, not per relabel. */
    uint64_t timestamp;
};

/* Derive the label set of this node. Fails where GFD fails to label (and exits): a
 * driver version that is not X.Y[.Z], an unknown CUDA driver version, MPS sharing with
 * a MIG-enabled GPU, a vGPU capability without its host driver record. Returns 0 with
 * *out set (free with labels_free), or -errno with err naming what failed. */
int labels_derive(const struct labels_input *in, struct labels **out, struct error *err);

/* Write the NFD local feature file: one "key=value\n" per label, sorted. Atomic: a
 * temporary file in the same directory (created there, nowhere else), fsync, mode 0644,
 * rename over `path`, fsync of the directory; readers see the old file or the new one,
 * never a part. The directory must exist (NFD's features.d is made by whoever mounts
 * it). NULL or empty path: written to stdout, as GFD does. Returns 0 or -errno with err
 * naming the path. */
int labels_write_feature_file(const struct labels *l, const char *path, struct error *err);
/* Remove the feature file (GFD does on exit unless oneshot or infinite sleep). Returns
 * 0, also when it did not exist, or -errno. */
int labels_remove_feature_file(const char *path);

/* GFD's sanitiser for label values taken from the hardware (product names, machine
 * type): characters outside [A-Za-z0-9-_. ] are dropped, then runs of spaces become one
 * '-' and leading/trailing spaces go. Returns malloc'd. */
char *labels_sanitise(const char *in);
/* The GPU family GFD names for a compute capability ("ampere", "undefined", ...). */
const char *labels_arch_family(int cc_major, int cc_minor);
