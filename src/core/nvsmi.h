/* nvidia-smi: the one place that knows how this plugin finds it, with which environment it
 * runs and which arguments set what, for the two callers that change GPU settings with it:
 *   DRA's time slice per claim (dra/dra-sharing.c): `compute-policy --set-timeslice`,
 *     which NVML has no public call for; on the loop, the tool under the driver root;
 *   mps-control-daemon's compute mode (mps/mps.c): `-c EXCLUSIVE_PROCESS` / `-c DEFAULT`,
 *     the very calls NVIDIA's mps-control-daemon makes; blocking, the tool on PATH.
 * DRA sets its compute mode (DEFAULT, before the slice) through NVML instead: in-process,
 * no fork on a Prepare's path, and the plugin already holds NVML open; mps-control-daemon
 * keeps NVIDIA's tool calls, which NVIDIA's chart and the integration test pin.
 * Every run goes through core/tool (bounded time and output, always reaped). */
#pragma once

#include "core/error.h"
#include "core/tool.h"

#define NVSMI_NAME "nvidia-smi"

/* The tool under driver_root's usr/bin, usr/sbin, bin or sbin (the first executable one);
 * with no driver root (NULL, "" or "/") or none there, "nvidia-smi" for PATH. Malloc'd. */
char *nvsmi_path(const char *driver_root);

/* The environment of a run: ours; with a driver root, the NVML library this process
 * loaded from it (nvml_path, when it holds a '/') preloaded, and any LD_PRELOAD of ours
 * left out, so that the tool talks to the same library (the container may have none of
 * its own). envp points into environ and preload: valid until nvsmi_env_clear or a change of
 * the environment. */
struct nvsmi_env {
    char **envp;
    char *preload;
};
void nvsmi_env_init(struct nvsmi_env *e, const char *driver_root, const char *nvml_path);
void nvsmi_env_clear(struct nvsmi_env *e);

/* `nvidia-smi -i <uuid> -c <mode>` ("EXCLUSIVE_PROCESS", "DEFAULT"), waited for
 * (tool_run, timeout_ms). 0 or -errno, err "setting compute mode <mode> on <uuid>: ..."
 * naming the tool and what it said. */
int nvsmi_set_compute_mode(const char *driver_root, const char *nvml_path, const char *uuid,
                           const char *mode, unsigned timeout_ms, struct error *err);

/* `nvidia-smi compute-policy -i <uuid> --set-timeslice <value>` (0..3: Default, Short,
 * Medium, Long) started on the loop (tool_start: done called from it later). The run, or
 * NULL with err set. */
struct tool_run *nvsmi_set_timeslice(struct loop *l, const char *driver_root,
                                     const char *nvml_path, const char *uuid, unsigned value,
                                     unsigned timeout_ms, tool_done_fn done, void *userdata,
                                     struct error *err);
