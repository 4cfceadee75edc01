/* ResourceSlices (resource.k8s.io/v1) of the DRA device set: the device entries as
 * NVIDIA's driver writes them (attributes, capacities), the slice objects of one pool
 * (split beyond 128 devices), and the 1.34 API server's validation rules, so a slice is
 * checked before it is written (the API server would refuse the whole slice for one bad
 * device). Pure: JSON in, JSON out, no I/O. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "dra/dra-devices.h"
#include "node/inventory.h"

#define DRA_SLICE_MAX_DEVICES 128   /* spec.devices */
/* spec.devices where one of them consumes counters or carries taints (1.34+) */
#define DRA_SLICE_MAX_DEVICES_LIMITED 64
#define DRA_SLICE_MAX_COUNTER_SETS 8 /* spec.sharedCounters (1.36) */
#define DRA_COUNTERS_MAX 32         /* counters in a set, or in one consumption */
#define DRA_DEVICE_MAX_CONSUMPTIONS 2 /* consumesCounters entries of one device */
#define DRA_MIG_MEMORY_SLICES_MAX 16 /* memory-slice-<i> counters of one GPU (8 on A100/H100) */
#define DRA_DEVICE_MAX_ATTRS 32     /* attributes + capacities of one device */
#define DRA_DEVICE_MAX_TAINTS 4

/* The spec.devices entry of d: {"name", "attributes", "capacity"} (new reference).
 * Attributes NVML or sysfs could not tell are left out (a version that cannot be made
 * semver, an unknown brand, pcieRoot, numaNode < 0), never sent empty. */
json_t *dra_slice_device(const struct inventory *inv, const struct dra_device *d);
/* The entries of every device of s, in order (new reference). */
json_t *dra_slice_devices(const struct inventory *inv, const struct dra_device_set *s);
/* DynamicMIG: the counter set of every GPU of s whose devices consume one, in set order:
 * {"name": "gpu-<minor>-counter-set", "counters": {multiprocessors, copy-engines,
 * decoders, encoders, jpeg-engines, ofa-engines (the largest profile's), memory (the
 * largest profile's, bytes), memory-slice-<i>: 1}} (new reference; [] when none). */
json_t *dra_slice_counter_sets(const struct inventory *inv, const struct dra_device_set *s);
void dra_counter_set_name(const struct inv_gpu *g, char *out, size_t len);

/* Coerce a version as NVIDIA's driver does (Masterminds semver: "12.4" -> "12.4.0",
 * "550.163.01" -> "550.163.1", a leading "v" dropped) into out. Returns 0, or -EINVAL
 * for something that is no version at all. */
int dra_semver_normalize(const char *in, char *out, size_t len);
/* Strict semver 2.0.0 as the API server checks it. */
bool dra_semver_valid(const char *v);
/* A byte count as Kubernetes prints a binary-SI quantity: "80Gi", "81559Mi", "1000". */
void dra_quantity_binary(unsigned long long bytes, char *out, size_t len);

struct dra_slice_pool {
    const char *driver;              /* DRA_DRIVER_NAME */
    const char *node_name;           /* spec.nodeName and the pool name */
    const char *node_uid;            /* the owner reference; NULL or "": none */
    long long generation;            /* spec.pool.generation */
    json_t *counter_sets;            /* dra_slice_counter_sets() (borrowed); NULL: none */
    bool combined;                   /* an API server before 1.35: each counter set in the
                                      * slice of its devices (1.36 refuses that) */
};

/* The ResourceSlice objects of one pool holding `devices` (an array of device entries,
 * borrowed), every one with resourceSliceCount = their number and metadata.generateName
 * "<node>-<driver>-" (a node without devices still gets one empty slice, so the
 * scheduler sees the pool). Without counter sets: slices of at most 128 devices (64 with
 * a tainted one). With them (DynamicMIG), NVIDIA's split layout: counters-only slices (at
 * most 8 sets each), then the devices of each set (at most 64 a slice), then the rest;
 * p->combined: a slice per set holding it and its devices. New reference: an array. */
json_t *dra_slices_build(const struct dra_slice_pool *p, json_t *devices);

/* Check a ResourceSlice against the 1.34.9 API server's validation (the rules of its
 * v1 ResourceSlice validation that a plugin can break). Returns 0, or -EINVAL with
 * *msg (malloc'd) as the API server's Status message says it:
 *   ResourceSlice.resource.k8s.io "<name>" is invalid: <field>: <what>
 * (several causes in brackets, comma-separated, as the API server joins them).
 * `name` is what the message calls the object (metadata.name when NULL). */
int dra_slice_validate(const json_t *slice, const char *name, char **msg);
