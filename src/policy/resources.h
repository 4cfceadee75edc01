/* What each plugin socket advertises: resources (nvidia.com/gpu, nvidia.com/mig-1g.5gb,
 * nvidia.com/gpu.shared, ...) and their devices, built from the inventory and the
 * configuration by a pure function (policy/resources.c): MIG strategy, device-id
 * strategy (runtime names only; kubelet IDs are always UUIDs), sharing (replicas) and
 * renaming are all applied here. Device IDs from NVML are checked here before they can
 * reach an env value or a path: a device whose UUID is not a plain identifier is left
 * out (one error line), the others are served. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "core/error.h"
#include "node/inventory.h"

struct rs_device {
    char *id;            /* kubelet device ID: the GPU or MIG UUID, plus "::<k>" for
                            replicas, whatever --device-id-strategy says */
    char *base_id;       /* the physical device as the container runtime is told it
                            (NVIDIA_VISIBLE_DEVICES, volume mounts, CDI names): the uuid,
                            or the index under --device-id-strategy=index */
    char *uuid;          /* GPU or MIG UUID of the physical device */
    char *index;         /* "3" or "3:1" */
    int gpu;             /* index into inventory.gpus */
    int mig;             /* -1, or index into gpus[gpu].migs */
    int replica;         /* -1, or k of "::k" */
    int replicas;        /* 1 if not shared */
    int numa_node;       /* -1: none */
    uint64_t memory_bytes;
    char **paths;        /* device nodes, NULL-terminated: /dev/nvidia<minor>, MIG caps */
};

struct rs_resource {
    char *name;          /* "nvidia.com/gpu" */
    char *socket_name;   /* "nvidia-gpu.sock" */
    enum sharing_strategy sharing;
    bool fail_requests_greater_than_one;
    struct rs_device *devices;
    size_t n_devices;
    size_t *by_id;       /* device positions sorted by id, for resources_find_device;
                            NULL (hand-built resources) means a linear search */
};

struct resource_set {
    struct rs_resource *resources;
    size_t n_resources;
};

/* Build the resources of this node. Fails (err set, naming the GPU / MIG profile /
 * config field) where the reference refuses to start. */
int resources_build(const struct inventory *inv, const struct config *cfg,
                    struct resource_set *out, struct error *err);
void resources_clear(struct resource_set *rs);

/* The device nodes a container needs for one GPU (mig NULL: /dev/nvidia<minor>) or one
 * MIG device (plus its GI and CI capability nodes): NULL-terminated, each element and the
 * array malloc'd. NULL (err set, naming the MIG device) when discovery could not resolve
 * a capability minor. The one home of these paths: the device plugin's devices and the
 * DRA claim specs both take them from here. */
char **resources_device_paths(const struct inv_gpu *gpu, const struct inv_mig *mig,
                              struct error *err);
/* Find a device of a resource by kubelet ID; NULL if unknown. */
const struct rs_device *resources_find_device(const struct rs_resource *r, const char *id);
