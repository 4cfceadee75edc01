/* Applying a prepared device's sharing config to its GPU, as NVIDIA's DRA driver does,
 * through the claim engine's apply_config hook (dra-claims.h):
 *   TimeSlicing on a GPU: compute mode DEFAULT through NVML (nvmlDeviceSetComputeMode),
 *     then `nvidia-smi compute-policy -i <uuid> --set-timeslice <0..3>` (Default, Short,
 *     Medium, Long): NVML has no public call for the compute time slice. The tool is run
 *     for Default too: an earlier claim may have left a longer slice on the GPU and
 *     nothing can read it back, so setting it is the only way to know it is the default.
 *   TimeSlicing on a MIG device: nothing to set (MigDeviceConfig has no interval, and a
 *     MIG device's compute mode is its GPU's, which the claim does not own).
 *   MPS: refused (a per-claim error; dra-config.c refuses it first).
 * Both need CAP_SYS_ADMIN (checked on an H200, driver 580: without it NVML answers
 * NO_PERMISSION and nvidia-smi exits 4, "Insufficient Permissions"); the claim then fails
 * with those words.
 *
 * Loop-only, and blocking: the hook is synchronous, so each tool run stalls the loop, at
 * most DRA_SHARING_TOOL_TIMEOUT_MS (then it is killed and the claim fails). Accepted
 * because it only happens for claims that ask for TimeSlicing, nvidia-smi answers in
 * well under a second, and the kubelet gives a prepare call 45 s. */
#pragma once

#include "core/error.h"
#include "dra/dra-config.h"
#include "node/inventory.h"

#define DRA_SHARING_TOOL_TIMEOUT_MS 10000

struct dra_sharing_options {
    /* The driver root as this process sees it (--driver-root-ctr-path): NVML is opened
     * from it and nvidia-smi looked up in its usr/bin, usr/sbin, bin, sbin; NULL, "" or
     * "/": the library by its plain name and the tool on PATH. */
    const char *driver_root;
    unsigned timeout_ms; /* per tool run; 0: DRA_SHARING_TOOL_TIMEOUT_MS */
};

struct dra_sharing_ctx;

/* Strings of o are copied. Never NULL. */
struct dra_sharing_ctx *dra_sharing_new(const struct dra_sharing_options *o);
void dra_sharing_free(struct dra_sharing_ctx *s);

/* The apply_config hook (userdata: a struct dra_sharing_ctx). 0, or -errno with err saying
 * what failed and naming the NVML call or the tool. */
int dra_sharing_apply(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                      const struct dra_config *cfg, struct error *err);
