/* MIG state that changes at run time (GPU/compute instances created and destroyed, MIG
 * mode set): one fixed-size record per GPU, kept either in process memory or, with
 * MOCK_NVML_STATE=<file>, in a file every process of the simulated host maps (see
 * docs/simulator.md, "Creating MIG devices").
 *
 * The records are the truth; the objects handed out as handles (struct sim_gi, sim_ci,
 * the MIG struct sim_device) are a per-process view built from them by sim_ms_refresh().
 * Objects come from per-GPU pools allocated once, so a handle stays a valid pointer for
 * the life of the process: a destroyed instance's object is marked dead (NOT_FOUND /
 * INVALID_ARGUMENT) and reused only after SIM_MS_POOL - 8 later creations.
 *
 * Everything here runs under sim_lock. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sim-model.h"

#define SIM_MS_MAX_GI 8
#define SIM_MS_MAX_CI 8
#define SIM_MS_POOL 48

/* ---- the records (the file's layout: fixed size, little-endian host order) */
struct sim_ms_ci {
    uint32_t id, profile, start, busy; /* profile: CI profile id */
    uint64_t serial;                   /* creation number: identity across processes */
    char uuid[48];                     /* MIG-... */
};

struct sim_ms_gi {
    uint32_t id, profile, start, n_ci; /* profile: GI profile id; start: memory slice */
    uint64_t serial;
    struct sim_ms_ci ci[SIM_MS_MAX_CI];
};

struct sim_ms_gpu {
    char uuid[80];
    uint32_t mode_current, mode_pending, n_gi, busy;
    struct sim_ms_gi gi[SIM_MS_MAX_GI];
};

/* ---- the per-process view of one GPU (sim_device.mv) */
struct sim_mig_view {
    /* What every refresh writes comes first, on the block's first page with its malloc
     * header: the pools (57 KiB a GPU) are then resident only where an instance was
     * made, so that a host with MIG off costs one page per GPU, not two. */
    unsigned gi_next, ci_next;               /* round-robin allocation cursors */
    struct sim_gi *gis[SIM_MS_MAX_GI];       /* live GIs in record order */
    unsigned n_gis;
    struct sim_device *migs[SIM_MS_MAX_GI * SIM_MS_MAX_CI]; /* live MIG devices, slot order */
    unsigned n_migs;
    bool busy; /* the GPU's busy flag (SetMigMode → IN_USE) */
    struct sim_gi gi_pool[SIM_MS_POOL];
    struct sim_ci ci_pool[SIM_MS_POOL];
    struct sim_device mig_pool[SIM_MS_POOL]; /* mig_pool[i] is ci_pool[i]'s MIG device */
};

/* At the first successful init, after the profile is loaded: build the initial records
 * from the profile's MIG instances and open/attach MOCK_NVML_STATE. Writes one line on
 * stderr and returns NVML_ERROR_UNKNOWN on failure. */
nvmlReturn_t sim_ms_init(struct sim_node *nd);
/* Bring every GPU's view up to date with the records (cheap when nothing changed). */
void sim_ms_refresh(void);

/* A mutation: sim_ms_begin() locks the records (flock LOCK_EX on the state file),
 * refreshes and returns the GPU's record to edit in place (a scratch copy);
 * sim_ms_commit() publishes it (crash-safe: the other copy of the file is written, then
 * the generation flips), writes/removes the capability files that changed, refreshes the
 * view and unlocks; sim_ms_abort() drops the edit and unlocks. */
struct sim_ms_gpu *sim_ms_begin(struct sim_device *gpu);
void sim_ms_commit(struct sim_device *gpu);
void sim_ms_abort(void);
/* A fresh serial (identity of a new instance) and MIG UUID for it, inside a mutation. */
uint64_t sim_ms_serial(void);
void sim_ms_new_uuid(const struct sim_device *gpu, unsigned gi, unsigned ci, uint64_t serial, char *out,
                     size_t size);

/* Handle checks against the pools: the live object, or NULL (dead or not ours). `*ours` is
 * set when the pointer is one of the pool's objects, dead or alive. */
struct sim_gi *sim_ms_gi_of(const void *h, bool *ours);
struct sim_ci *sim_ms_ci_of(const void *h, bool *ours);
struct sim_device *sim_ms_mig_of(const void *h, bool *ours);
/* Live MIG device by UUID (case-insensitive), or by GI/CI id of `gpu`. */
struct sim_device *sim_ms_find_mig_uuid(const char *uuid);
struct sim_device *sim_ms_find_mig_ids(struct sim_device *gpu, unsigned gi, unsigned ci);
/* The GI/CI profile tables view of a record's profile ids. */
unsigned sim_ms_arch(const struct sim_device *gpu);
/* The GPU's record as the view was last synced (under sim_lock, after sim_ms_refresh). */
const struct sim_ms_gpu *sim_ms_record(const struct sim_device *gpu);
