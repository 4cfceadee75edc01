/* The devices this node offers through DRA, named and described exactly as NVIDIA's DRA
 * driver (gpu.nvidia.com) does, so that DeviceClasses and claims written for it select
 * the same devices: "gpu-<minor>" for a full GPU, "gpu-<parent minor>-mig-<profile>-
 * <GI profile id>-<placement start>" for an existing MIG device. Pure: built from the
 * inventory, no I/O. Their ResourceSlice JSON is dra-slice.h's. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "core/error.h"
#include "node/inventory.h"

#define DRA_DEVICE_NAME_MAX 64        /* a DNS label: at most 63 characters */

enum dra_device_type { DRA_DEVICE_GPU, DRA_DEVICE_MIG };

struct dra_device {
    char name[DRA_DEVICE_NAME_MAX];
    enum dra_device_type type;
    size_t gpu;                       /* index into inventory->gpus */
    size_t mig;                       /* index into gpus[gpu].migs (DRA_DEVICE_MIG only) */
};

struct dra_device_set {
    struct dra_device *devices;
    size_t n;
};

/* Every device of inv that DRA serves (a GPU with MIG enabled offers its MIG devices,
 * not itself, as NVIDIA's driver does). `serve` (may be NULL: all) says, per GPU index,
 * whether DRA serves that GPU at all (the rest belong to the device plugin). Returns 0
 * or -errno with err set. */
int dra_devices_build(const struct inventory *inv, const bool *serve, struct dra_device_set *out,
                      struct error *err);
void dra_device_set_clear(struct dra_device_set *s);
/* The device named `name`, or NULL. */
const struct dra_device *dra_devices_find(const struct dra_device_set *s, const char *name);
