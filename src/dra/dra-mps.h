/* MPS sharing of DRA claims (sharing.strategy MPS, NVIDIA's MPSSupport), the plugin's half.
 *
 * NVIDIA's driver creates a Deployment per claim config group that runs the MPS control
 * daemon. Here the chart's mps-control-daemon DaemonSet runs them (src/mps/mps-dra.c, its
 * --dra mode), handed a desired state by the plugin through files in
 * <plugins dir>/gpu.nvidia.com/mps/ (docs/dra.md, "MPS sharing", says why):
 *   <id>/desired.json   written by the plugin (atomically) at Prepare: the group's device
 *                       UUIDs sorted ascending (the order indices name), the limits in
 *                       the daemon's units (whole MiB, percent), multiUser; removed at
 *                       Unprepare;
 *   .changed            rewritten by the plugin after every change of the above: the one
 *                       file the runner watches (core/sockwatch), then it rescans;
 *   <id>/running.json   the runner's: it owns the id from then on (stops it, resets the
 *                       compute mode, unmounts shm, removes the directory);
 *   <id>/log/startup.log "startup complete": the daemon serves (NVIDIA's marker);
 *   <id>/pipe, <id>/shm the container's /tmp/nvidia-mps and /dev/shm (dra_mps_cdi_edits);
 * a GPU share's daemon on an r615+ driver (desired "protocol": 3, dra-shares.h) also has
 *   <id>/ns/<ns>.json   written by the plugin at the share's Prepare: the namespace's
 *                       {"activeThreadPercentage", "pinnedMemoryLimitMiB"}; removed at
 *                       its Unprepare;
 *   <id>/ns/<ns>.ready  the runner's, once the namespace is made, its limits set and read
 *                       back; removed once it is deleted;
 *   <id>/ns/<ns>.failed the runner's: why it could not be made (the Prepare's error);
 *   <id>/pipe/shares/<ns> the namespace's pipe directory (server "shares"): the only pipe
 *                       directory the share's container sees, at /tmp/nvidia-mps.
 * id = "<claim UID>-<first 5 hex of sha256(sorted UUIDs joined by ",")>", NVIDIA's.
 *
 * A group: the devices of one claim whose configs ask for the same daemon (dra-config.h,
 * dra_mps_config_same). Loop-only. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-config.h"
#include "dra/dra-devices.h"
#include "node/inventory.h"

#define DRA_MPS_SUBDIR "mps"
#define DRA_MPS_DESIRED "desired.json"
#define DRA_MPS_RUNNING "running.json"
#define DRA_MPS_TRIGGER ".changed"
#define DRA_MPS_READY_MARKER "log/startup.log"
#define DRA_MPS_NS_DIR "ns"
#define DRA_MPS_NS_DESIRED ".json"
#define DRA_MPS_NS_READY ".ready"
#define DRA_MPS_NS_FAILED ".failed"
#define DRA_MPS_SERVER "shares" /* the one v3 server of a share daemon */
/* NVIDIA's readiness bound: its backoff 1 s doubling, 4 steps, is about 15 s at most. */
#define DRA_MPS_READY_TIMEOUT_MS 15000u
/* The runner's stop: `quit`, nvidia-smi -c DEFAULT per GPU, an unmount, each bounded. */
#define DRA_MPS_STOP_TIMEOUT_MS 30000u
#define DRA_MPS_NOT_READY "MPS control daemon is not yet ready: waiting for MPS control daemon to come online"

/* id of the group of claim uid with these n UUIDs (sorted ascending). */
void dra_mps_id(const char *uid, const char (*uuids)[DRA_MPS_KEY_MAX], size_t n,
                char out[DRA_MPS_ID_MAX]);
/* Whether id has the form of one of claim uid's. */
bool dra_mps_id_of(const char *id, const char *uid);

/* Groups the MPS devices of claim uid (devs: its record's, n of them; device names of set,
 * on inv), and sets each one's config.mps id and group; checks the per-device keys
 * against the group and multiUser's compute capability (NVIDIA's messages). DynamicMIG
 * placements are left alone (the claim engine refuses a sharing config on them). 0 or
 * -errno with err set. */
int dra_mps_plan(const char *uid, struct dra_ckpt_device *devs, size_t n,
                 const struct inventory *inv, const struct dra_device_set *set, struct error *err);

/* NVIDIA's edits for the devices of spec (dra_cdi_spec's, claim uid) that devs give an MPS
 * group: CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps, <id>/shm on /dev/shm and <id>/pipe on
 * /tmp/nvidia-mps. plugin_dir: <plugins dir>/gpu.nvidia.com as the host sees it. */
void dra_mps_cdi_edits(json_t *spec, const char *uid, const struct dra_ckpt_device *devs,
                       size_t n, const char *plugin_dir);

/* The group's desired state written (unless the same is there) and the runner told. */
int dra_mps_desire(const char *plugin_dir, const struct dra_mps_config *m, struct error *err);
/* Unprepare's half: desired.json of id removed and the runner told; 1 when the runner owns
 * the id (its directory goes when it has stopped the daemon), 0 when nothing is left (no
 * such id, or the runner had not taken it: its directory removed here). -errno, err. */
int dra_mps_undesire(const char *plugin_dir, const char *id, struct error *err);

/* A share's namespace (m->ns, in daemon m->id) desired: its file written (unless the same
 * is there) and the runner told. 0 or -errno, err. */
int dra_mps_ns_desire(const char *plugin_dir, const struct dra_mps_config *m, struct error *err);
/* Its file removed and the runner told: 1 when the runner made it (its .ready goes when it
 * is deleted), 0 when it never did. -errno, err. */
int dra_mps_ns_undesire(const char *plugin_dir, const char *id, const char *ns, struct error *err);

/* Waiting on the loop, a timer checking (20 ms doubling to 1 s): until id's daemon is
 * ready (startup.log) or until its directory is gone; with ns, until that namespace of it
 * is made (<ns>.ready; <ns>.failed ends the wait with the runner's reason, -EIO) or
 * deleted. 0 when it already is; 1 with *out set (done is called once from the loop,
 * unless dra_mps_wait_cancel comes first), or -errno. At timeout_ms done gets
 * -EINPROGRESS (ready: DRA_MPS_NOT_READY) or -ETIMEDOUT. */
struct loop;
struct dra_mps_wait;
typedef void (*dra_mps_wait_fn)(void *userdata, int r, const struct error *err);
int dra_mps_wait(struct loop *l, const char *plugin_dir, const char *id, const char *ns,
                 bool ready, unsigned timeout_ms, dra_mps_wait_fn done, void *userdata,
                 struct dra_mps_wait **out);
void dra_mps_wait_cancel(struct dra_mps_wait *w);

/* At start: the desired states of claims the checkpoint does not hold removed (a claim
 * unprepared, or forgotten, while the plugin was down), and the namespaces of GPU share
 * daemons whose shares it does not hold; the others' daemons stay. The number removed. */
int dra_mps_sweep(const char *plugin_dir, const struct dra_checkpoint *ck);
