/* The MPS control daemons of DRA claims (`mps-control-daemon --dra`): the runner of the
 * desired states the plugin writes (src/dra/dra-mps.h has the files; docs/dra.md, "MPS
 * sharing", the design). One daemon per <plugins dir>/gpu.nvidia.com/mps/<id>/desired.json,
 * started as NVIDIA's per-claim Deployment starts it:
 *   <id>/running.json (a copy of the desired state: from now on the id is ours to clean
 *   up, also after our restart), pipe/ log/ shm/ made, a tmpfs on shm (half of MemTotal,
 *   65536k when it cannot be read), `nvidia-smi -i <uuid> -c EXCLUSIVE_PROCESS` for each
 *   full GPU, `nvidia-cuda-mps-control -d` (-M: multiUser) with CUDA_MPS_PIPE_DIRECTORY
 *   and CUDA_MPS_LOG_DIRECTORY the id's and CUDA_VISIBLE_DEVICES its UUIDs, then
 *   `set_default_active_thread_percentage <n>` and per device
 *   `set_default_device_pinned_mem_limit <uuid> <n>M`, then log/startup.log "startup
 *   complete" (NVIDIA's readiness marker, which the plugin waits for);
 * and, when desired.json is gone: `quit`, `nvidia-smi -i <uuid> -c DEFAULT` per full GPU,
 * shm unmounted, the id's directory removed (the plugin's unprepare waits for that).
 * The directory is watched through core/sockwatch (its .changed file, which the plugin
 * rewrites after every change; without inotify a stat every 2 s), and rescanned whole
 * on each change: level-triggered, so a lost event or our own restart changes nothing.
 * A start or stop that failed is tried again after MPS_DRA_RETRY_MS.
 * At our start every desired id is started anew (a daemon of our earlier run, if any
 * survived, told to quit first): the daemons are our container's processes and end with
 * it. At our stop (SIGTERM) each is told to quit; desired states, directories and
 * compute modes stay for the next start. Every tool run is bounded (MPS_TOOL_TIMEOUT_MS)
 * and blocks this loop, which has nothing else to serve. */
#pragma once

#include "core/error.h"

#define MPS_DRA_RETRY_MS 30000u

struct loop;
struct mps_dra;

/* Watches <plugins_dir>/gpu.nvidia.com/mps (made if missing) and starts what it holds.
 * 0 or -errno with err set. */
int mps_dra_start(struct loop *l, const char *plugins_dir, struct mps_dra **out, struct error *err);
/* Every daemon told to quit (nothing else changed); freed. NULL is ignored. */
void mps_dra_stop(struct mps_dra *d);
