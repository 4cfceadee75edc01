/* The devices this node offers through DRA, named and described exactly as NVIDIA's DRA
 * driver (gpu.nvidia.com) does, so that DeviceClasses and claims written for it select
 * the same devices: "gpu-<minor>" for a full GPU, "gpu-<parent minor>-mig-<profile>-
 * <GI profile id>-<placement start>" for an existing MIG device. Pure: built from the
 * inventory, no I/O. Their ResourceSlice JSON is dra-slice.h's. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "node/inventory.h"

#define DRA_DEVICE_NAME_MAX 64        /* a DNS label: at most 63 characters */

/* GPU shares (consumable capacity, KEP-5075): how a shared device's (a full GPU's or a MIG
 * device's) capacities are asked for. memory: a share is a whole number of steps (at least
 * one, at most what the device has);
 * compute: percent of the SMs, 1..100. */
struct dra_share_policy {
    uint64_t memory_step;             /* bytes, whole MiB, > 0 */
    uint64_t memory_default;          /* bytes; 0: the whole device */
    unsigned compute_default;         /* 1..100 */
};
/* DRA_SHARE_COMPUTE: the compute capacity's name */
#define DRA_SHARE_COMPUTE "compute"
/* A shared device's memory capacity (`memory`, its dra_device_memory, in whole MiB) and
 * the policy's grid: min (one step), max (the most steps that fit) and the default (on the
 * grid, at most max). */
struct dra_share_grid {
    uint64_t capacity, min, max, step, def;
};
void dra_share_grid(uint64_t memory, const struct dra_share_policy *p, struct dra_share_grid *out);

/* DRA_DEVICE_MIG_PLACEMENT: a MIG device DynamicMIG creates when a claim gets it
 * ("gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>"), one per profile and
 * placement of a GPU that takes part (dra_mig_gpu_dynamic). */
enum dra_device_type { DRA_DEVICE_GPU, DRA_DEVICE_MIG, DRA_DEVICE_MIG_PLACEMENT };

struct dra_device {
    char name[DRA_DEVICE_NAME_MAX];
    enum dra_device_type type;
    size_t gpu;                       /* index into inventory->gpus */
    size_t mig;                       /* DRA_DEVICE_MIG: index into gpus[gpu].migs;
                                       * _PLACEMENT: into gpus[gpu].mig_profiles */
    unsigned placement;               /* _PLACEMENT: index into the profile's placements */
    bool counters;                    /* consumes its GPU's counter set (DynamicMIG) */
    bool shared;                      /* offered as shares (dra_devices_offer_shares) */
    struct dra_share_policy policy;   /* of a shared one */
};



/* Whether DynamicMIG carves GPU g (NVIDIA's rule): its MIG profiles are known (discovery
 * reads them only with DynamicMIG on) and MIG mode switches without a reset (Hopper and
 * newer) or is already on (Ampere, whose full GPU is then not offered: turning MIG off
 * would take a reset). */
bool dra_mig_gpu_dynamic(const struct inv_gpu *g);
/* Whether the full GPU g is offered beside its placements (Hopper and newer). */
bool dra_mig_gpu_whole(const struct inv_gpu *g);

struct dra_device_set {
    struct dra_device *devices;
    size_t n;
};

/* Every device of inv that DRA serves (a GPU with MIG enabled offers its MIG devices,
 * not itself, as NVIDIA's driver does; a GPU DynamicMIG carves offers its placements,
 * sorted by name, after its full GPU where that is offered). `serve` (may be NULL: all) says, per GPU index,
 * whether DRA serves that GPU at all (the rest belong to the device plugin). Returns 0
 * or -errno with err set. */
int dra_devices_build(const struct inventory *inv, const bool *serve, struct dra_device_set *out,
                      struct error *err);
void dra_device_set_clear(struct dra_device_set *s);
/* Offer as shares under policy p (copied into each) every full GPU of s (carved by
 * DynamicMIG or not), every DynamicMIG placement, and every existing MIG device whose
 * compute instance spans its GPU instance; none smaller than one memory step. */
void dra_devices_offer_shares(struct dra_device_set *s, const struct inventory *inv,
                              const struct dra_share_policy *p);
/* The memory of device d of inv (a GPU's, a MIG device's own, a placement's profile's). */
uint64_t dra_device_memory(const struct inventory *inv, const struct dra_device *d);
/* The UUID of device d of inv ("GPU-..." or "MIG-..."); NULL for a placement (it has none
 * until Prepare makes it). */
const char *dra_device_uuid(const struct inventory *inv, const struct dra_device *d);
/* The device named `name`, or NULL. */
const struct dra_device *dra_devices_find(const struct dra_device_set *s, const char *name);
