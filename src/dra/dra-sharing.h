/* Applying a prepared device's sharing config to its GPU, and putting the GPU back when
 * the claim is unprepared, through the claim engine's apply_config and reset_config hooks
 * (dra-claims.h). NVIDIA's DRA driver runs `nvidia-smi -c DEFAULT` and `nvidia-smi
 * compute-policy --set-timeslice` for both; we set the compute mode through NVML
 * (nvmlDeviceSetComputeMode) and run nvidia-smi only for the time slice, which NVML has
 * no public call for.
 *   TimeSlicing on a GPU: compute mode DEFAULT through NVML, then `nvidia-smi
 *     compute-policy -i <uuid> --set-timeslice <0..3>` (Default, Short, Medium, Long).
 *     The tool is run for Default too: an earlier claim may have left a longer slice on
 *     the GPU and nothing can read it back, so setting it is the only way to know it is
 *     the default. Reset: the same with Default (0), so that the next claim finds the GPU
 *     as the driver leaves it, not with this claim's Long slice.
 *   TimeSlicing on a MIG device: nothing to set or reset (MigDeviceConfig has no
 *     interval, and a MIG device's compute mode is its GPU's, which the claim does not
 *     own).
 *   MPS (a GPU or a MIG device): the group's desired state written for mps-control-daemon
 *     (dra-mps.h; the same for every device of the group, so only the first writes),
 *     then its daemon waited for on the loop (startup.log), DRA_MPS_READY_TIMEOUT_MS at
 *     most: then -EINPROGRESS, DRA_MPS_NOT_READY, and the claim stays PrepareStarted for
 *     the kubelet's retry (NVIDIA's). Reset: the desired state removed and the daemon's
 *     directory waited for (DRA_MPS_STOP_TIMEOUT_MS; the runner removes it once the
 *     daemon has quit and the compute mode is DEFAULT again).
 * Both need CAP_SYS_ADMIN (checked on an H200, driver 580: without it NVML answers
 * NO_PERMISSION and nvidia-smi exits 4, "Insufficient Permissions"); the claim then fails
 * with those words.
 *
 * Loop-only. The NVML call is synchronous (it answers at once); the tool runs on the loop
 * (core/nvsmi.h, over core/tool.h), which serves everything else meanwhile, and is killed past
 * DRA_SHARING_TOOL_TIMEOUT_MS (the claim then fails; the kubelet gives a prepare call
 * 45 s). */
#pragma once

#include "core/error.h"
#include "dra/dra-claims.h"
#include "dra/dra-config.h"
#include "node/inventory.h"

#define DRA_SHARING_TOOL_TIMEOUT_MS 10000

struct dra_sharing_options {
    struct loop *loop; /* the tools run on it */
    /* The driver root as this process sees it (--driver-root-ctr-path): NVML is opened
     * from it and nvidia-smi looked up in its usr/bin, usr/sbin, bin, sbin; NULL, "" or
     * "/": the library by its plain name and the tool on PATH. */
    const char *driver_root;
    unsigned timeout_ms; /* per tool run; 0: DRA_SHARING_TOOL_TIMEOUT_MS */
    /* <plugins dir>/gpu.nvidia.com, where MPS's desired states go (dra-mps.h); NULL: MPS
     * claims fail, saying so. */
    const char *plugin_dir;
    unsigned mps_ready_ms; /* 0: DRA_MPS_READY_TIMEOUT_MS */
    unsigned mps_stop_ms;  /* 0: DRA_MPS_STOP_TIMEOUT_MS */
};

struct dra_sharing_ctx;

/* Strings of o are copied. Never NULL. */
struct dra_sharing_ctx *dra_sharing_new(const struct dra_sharing_options *o);
void dra_sharing_free(struct dra_sharing_ctx *s);

/* The apply_config hook (userdata: a struct dra_sharing_ctx; contract in dra-claims.h):
 * 0 when nothing is left to wait for, 1 while nvidia-smi runs or an MPS daemon is waited
 * for (done says how it ended), or -errno; errors name the NVML call or the tool. */
int dra_sharing_apply(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                      const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                      struct dra_apply_op **op, struct error *err);
/* The reset_config hook: what dra_sharing_apply set put back (TimeSlicing on a GPU:
 * compute mode DEFAULT, time slice Default, with the same tool, timeout, results and
 * error words; MPS: its daemon stopped, above); nothing for anything else. */
int dra_sharing_reset(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                      const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                      struct dra_apply_op **op, struct error *err);
/* The apply_cancel hook (of an apply or a reset): the tool killed and reaped (or the MPS
 * wait ended: the desired state stays as it is), done not called. */
void dra_sharing_cancel(void *sharing, struct dra_apply_op *op);
