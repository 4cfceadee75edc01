/* The MPS control daemons of the `mps-control-daemon` entrypoint, as NVIDIA's
 * (k8s-device-plugin cmd/mps-control-daemon, v0.20.0) runs them, one per resource shared
 * with MPS, under the MPS root (/mps in NVIDIA's DaemonSet, the host's --mps-root mounted
 * there):
 *   start: `nvidia-smi -i <uuid> -c EXCLUSIVE_PROCESS` for each GPU of the resource;
 *          <root>/<resource>/pipe and /log made; `nvidia-cuda-mps-control -d` with
 *          CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY; per GPU index
 *          `set_default_device_pinned_mem_limit <index> <memory / replicas>M` and once
 *          `set_default_active_thread_percentage <100 / replicas>` written to
 *          nvidia-cuda-mps-control; then <root>/<resource>/.started, which the plugin
 *          waits for before it serves the resource;
 *   stop:  `quit` to the daemon, compute mode DEFAULT again, .started removed.
 * The tools are NVIDIA's, found on PATH (the NVIDIA container runtime puts them in the
 * container; nvidia-smi run through core/nvsmi.h, as DRA runs it); a missing one is named
 * in the error. Every tool run is bounded by
 * MPS_TOOL_TIMEOUT_MS. These change GPU settings (compute mode): only this entrypoint
 * runs them, and only for resources a config shares with MPS. */
#pragma once

#include "core/error.h"
#include "policy/resources.h"

#define MPS_TOOL_TIMEOUT_MS 30000

int mps_daemon_start(const char *root, const struct rs_resource *res, struct error *err);
int mps_daemon_stop(const char *root, const struct rs_resource *res, struct error *err);

/* `mps-control-daemon mount-shm`: a fresh 64 MiB tmpfs at <root>/shm (an old mount there
 * detached first), for the daemons' and clients' shared memory. */
int mps_mount_shm(const char *root, struct error *err);
