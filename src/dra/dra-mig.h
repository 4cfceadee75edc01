/* DynamicMIG's side effects on the GPU (see docs/dra.md, "MIG on demand"): the MIG device
 * of a placement made at Prepare and destroyed at Unprepare, MIG mode switched on for the
 * first one and off after the last on GPUs that switch without a reset (Hopper and newer;
 * Ampere's mode is never touched), and the sweep at start of what a killed run made and
 * never recorded. Synchronous NVML calls (microseconds on the simulator; NVIDIA's driver
 * makes the same calls the same way), on the loop thread. */
#pragma once

#include <stdbool.h>

#include "core/error.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-devices.h"
#include "node/inventory.h"

/* Make the MIG device of placement d (a DRA_DEVICE_MIG_PLACEMENT of inv) and describe it
 * in *out as discovery describes an existing one (ids, UUID, profile, capability minors
 * from proc_root). Nothing is left behind on failure. -EBUSY: the placement (or what it
 * needs) is taken. */
int dra_mig_create(const struct inventory *inv, const struct dra_device *d, const char *proc_root,
                   struct inv_mig *out, struct error *err);
/* The MIG device `uuid` made for placement d (a share's: another claim's, or this claim's
 * earlier try), described as dra_mig_create does. -ENOENT (err): it is not at the
 * placement any more (destroyed, or another in its place). */
int dra_mig_find(const struct inventory *inv, const struct dra_device *d, const char *uuid,
                 const char *proc_root, struct inv_mig *out, struct error *err);
/* Destroy the MIG device of GPU instance gi_id on gpu if it is still `uuid` (a device made
 * in its place by someone else since is left alone, and so is a gone one: 0), then switch
 * MIG mode off on a Hopper+ GPU left with none. -EBUSY: processes still use it. */
int dra_mig_destroy(const struct inv_gpu *gpu, unsigned gi_id, const char *uuid, struct error *err);
/* The MIG device a PrepareStarted record's placement `device` may have left (a run killed
 * between making it and recording it), destroyed: the one at that placement with that
 * profile. 0 when there is none. */
int dra_mig_rollback(const struct inventory *inv, const struct dra_device_set *set,
                     const char *device, struct error *err);
/* At start: every MIG device on a carved GPU that no PrepareCompleted record of ckpt holds
 * and a PrepareStarted one names is destroyed (logged); one that nothing names was made by
 * someone else and is left alone (one warning: it takes placements the scheduler may
 * give). Then MIG mode off on Hopper+ GPUs left with none. Best effort: errors are logged. */
void dra_mig_sweep(const struct inventory *inv, const struct dra_device_set *set,
                   const struct dra_checkpoint *ckpt);
