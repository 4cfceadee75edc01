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
#define DRA_DEVICE_MAX_ATTRS 32     /* attributes + capacities of one device */
#define DRA_DEVICE_MAX_TAINTS 4

/* The spec.devices entry of d: {"name", "attributes", "capacity"} (new reference).
 * Attributes NVML or sysfs could not tell are left out (a version that cannot be made
 * semver, an unknown brand, pcieRoot, numaNode < 0), never sent empty. */
json_t *dra_slice_device(const struct inventory *inv, const struct dra_device *d);
/* The entries of every device of s, in order (new reference). */
json_t *dra_slice_devices(const struct inventory *inv, const struct dra_device_set *s);

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
};

/* The ResourceSlice objects of one pool holding `devices` (an array of device entries,
 * borrowed), at most 128 devices each, every one with resourceSliceCount = their number
 * and metadata.generateName "<node>-<driver>-" (a node without devices still gets one
 * empty slice, so the scheduler sees the pool). New reference: an array. */
json_t *dra_slices_build(const struct dra_slice_pool *p, json_t *devices);

/* Check a ResourceSlice against the 1.34.9 API server's validation (the rules of its
 * v1 ResourceSlice validation that a plugin can break). Returns 0, or -EINVAL with
 * *msg (malloc'd) as the API server's Status message says it:
 *   ResourceSlice.resource.k8s.io "<name>" is invalid: <field>: <what>
 * (several causes in brackets, comma-separated, as the API server joins them).
 * `name` is what the message calls the object (metadata.name when NULL). */
int dra_slice_validate(const json_t *slice, const char *name, char **msg);
