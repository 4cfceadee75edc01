/* Preparing and unpreparing claims for the kubelet (NodePrepareResources /
 * NodeUnprepareResources), on the API client and the event loop:
 *
 * Prepare, per claim: a claim already PrepareCompleted in the checkpoint gets its
 * recorded answer (the kubelet repeats prepare after its restarts; no API call). Else
 * GET /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>; check its UID
 * (another: the claim got replaced), that it is allocated, and take the results of
 * gpu.nvidia.com in this node's pool (dra-claim.h: configs decoded and applied there);
 * map each device through the device set (unknown: an error naming it); refuse a device
 * that another prepared claim holds; with a sharing config, record PrepareStarted, apply
 * the devices' sharing configs (options.apply_config), write the claim's CDI spec
 * (dra-cdi.h) and record PrepareCompleted; without one (the spec its only effect, which
 * an unprepare removes by UID), write the spec and record PrepareCompleted once, one
 * checkpoint write instead of two; answer with the CDI IDs and base request names.
 * A failure after PrepareStarted, or of that one write, undoes the spec and the record.
 *
 * Applying a sharing config runs a tool (nvidia-smi) for up to seconds: the claim waits
 * for it on the loop, suspended after PrepareStarted, while other claims, calls and RPCs
 * are served. While it waits, its devices count as held (another claim wanting one is
 * refused as for a prepared claim), another prepare of it is refused (-EBUSY: the
 * kubelet retries), and an unprepare of it stops the tool and fails that prepare (as one
 * while its GET is in flight, below). A call
 * cancelled meanwhile (the kubelet gone, the plugin stopping) stops the tool and leaves
 * PrepareStarted recorded, as a crash would: the kubelet's next prepare or unprepare of
 * the claim finishes or undoes it.
 *
 * Why any overlap is refused, sharing config or not (as NVIDIA's driver does, except for
 * adminAccess results): the scheduler never gives one device to two claims; pods share a
 * GPU by sharing one claim. An overlap means a race or a force-deleted pod whose claim
 * was never unprepared, and giving the device twice would break the isolation the second
 * claim was promised.
 *
 * Unprepare, per claim: put back what its devices' sharing configs set on their GPUs
 * (options.reset_config, as recorded in its checkpoint record), then remove its CDI spec
 * (missing: fine) and its checkpoint record. The API is not asked (the claim may be
 * gone); a UID never prepared is a success; a claim without a sharing config runs no
 * hook. A reset runs on the loop as an apply does; a failed one fails that claim's
 * unprepare and leaves it recorded with its spec, so the kubelet's retry resets again.
 * A call cancelled meanwhile (the kubelet gone, the plugin stopping) stops the tool and
 * leaves the claim recorded as well. While it resets, another prepare or unprepare of
 * it is refused (-EBUSY: the kubelet retries), and so is a prepare of another claim with
 * a sharing config for one of its devices.
 * Ordered per claim UID, the later call winning whichever answer comes first: an
 * unprepare fails every prepare of the claim still under way ("unprepared while its
 * claim was being fetched" / "... its sharing configs were being applied"), its GET
 * cancelled or its tool stopped, so no spec, record or held device survives an unprepare
 * that answered success; a prepare that comes after the unprepare prepares (or, while
 * the unprepare still resets the claim's GPUs, is refused with -EBUSY until it is done).
 * Shared GPUs: a device is reset once per claim, and only when no other recorded claim
 * (prepared, or PrepareStarted) holds that device with a sharing config: only
 * adminAccess results let two claims hold one device, the setting of the one still
 * recorded must stay, and the last one with a sharing config to go resets the GPU.
 *
 * Per-claim errors go into that claim's result (NVIDIA's "error preparing devices for
 * claim <ns>/<name>:<uid>: ..."); a call never fails as a whole. Bounds: at most
 * DRA_CLAIMS_MAX_PER_CALL claims per call (past it, every claim of the call gets an error
 * and nothing is done), and those of dra-claim.h and dra-checkpoint.h.
 *
 * Loop-only. done is always called from the loop, never from inside the function that
 * started the call. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "core/error.h"
#include "dra/dra-config.h"
#include "dra/dra-devices.h"
#include "dra/dra-types.h"
#include "node/inventory.h"

/* DRA_CLAIMS_MAX_PER_CALL: dra-types.h, the one bound of the service and this engine. */
/* Spec files created while their claims' GETs are in flight, at most, across the calls:
 * held open until written, so bounded (a pod has a few claims); the others are created
 * when written. */
#define DRA_CLAIMS_STAGED_MAX 16

struct loop;
struct kube;
struct dra_claims;
struct dra_claims_call;
/* An apply_config or reset_config in flight: the hooks' own object. */
struct dra_apply_op;
/* The end of an apply_config or reset_config that was started: 0, or -errno with err
 * saying what failed. */
typedef void (*dra_apply_done_fn)(void *done_userdata, int r, const struct error *err);
/* The shape of the apply_config and reset_config hooks (their contract is below). */
typedef int (*dra_apply_fn)(void *userdata, const struct inv_gpu *gpu, const struct inv_mig *mig,
                            const struct dra_config *cfg, dra_apply_done_fn done,
                            void *done_userdata, struct dra_apply_op **op, struct error *err);

struct dra_claims_options {
    const char *node_name;     /* our pool */
    const char *cdi_root;      /* where the per-claim specs go */
    const char *plugin_dir;    /* <kubelet plugins dir>/gpu.nvidia.com: the checkpoint's home */
    const struct config *cfg;  /* dev_root for the CDI edits; borrowed until
                                  dra_claims_set_devices gives another */
    const char *boot_id_path;  /* NULL: /proc/sys/kernel/random/boot_id */
    /* Applies the sharing config of a prepared device (gpu, and mig for a MIG device)
     * after PrepareStarted is recorded and before the CDI spec is written: TimeSlicing's
     * interval through NVML and nvidia-smi. Called only for devices with a sharing config,
     * one device of a claim at a time; a failure fails the claim. Returns 0 when applied
     * at once, -errno with err set when it failed, or 1 when it was started: *op is set,
     * and done(done_userdata, ...) is called once, later, from the loop, unless
     * apply_cancel(apply_userdata, *op) comes first (a cancelled call, the engine freed,
     * an unprepare of the claim). Meanwhile the claim waits and everything else is served.
     * gpu, mig and cfg are borrowed for the call only. NULL: configs are decoded, checked
     * and recorded, not applied. */
    dra_apply_fn apply_config;
    /* Puts back what apply_config set on the GPU of a device with a sharing config
     * (recorded in the checkpoint), when its claim is unprepared, before its spec and
     * record go: TimeSlicing's compute mode and interval back to the defaults. Called
     * only for devices to reset (the rule above), one at a time; a failure fails the
     * claim's unprepare. Same contract as apply_config, *op cancelled by apply_cancel,
     * same userdata. NULL: nothing is reset. */
    dra_apply_fn reset_config;
    void (*apply_cancel)(void *userdata, struct dra_apply_op *op);
    void *apply_userdata;
    /* Called from the loop (a 0 ms timer, never from inside a call's work) after records
     * went: an unprepare, or a prepare undone. What a record held may be free now
     * (dra_claims_holds_gpu). NULL: not told. */
    void (*released)(void *userdata);
    void *released_userdata;
};

/* Opens the checkpoint (a discarded one, of another boot or corrupt, is logged here, and
 * the engine starts empty). Strings of o are copied; loop, kube and o->cfg are borrowed.
 * 0 or -errno (err set) when the plugin dir or boot id cannot be used. */
int dra_claims_new(struct loop *l, struct kube *k, const struct dra_claims_options *o,
                   struct dra_claims **out, struct error *err);
/* Cancels every call in flight (and its API requests) without calling their done. Before
 * kube_free of the client it was given. NULL is ignored. */
void dra_claims_free(struct dra_claims *c);

/* The devices prepare maps claims onto, and the config their CDI edits follow: all
 * borrowed until the next call of this or dra_claims_free (the daemon's current node
 * state: a reload replaces all three). cfg NULL keeps the one in use. Until the first
 * call, every claim that needs a device fails with "devices not discovered yet". */
void dra_claims_set_devices(struct dra_claims *c, const struct config *cfg,
                            const struct inventory *inv, const struct dra_device_set *set);

/* results[i] answers claims[i]; they are the engine's, valid during the call of done. */
typedef void (*dra_claims_done_fn)(void *userdata, const struct dra_claim_result *results,
                                   size_t n);

/* Start a prepare / unprepare of n claims (refs copied). Never NULL: done is called once,
 * unless the call is cancelled first. */
struct dra_claims_call *dra_claims_prepare(struct dra_claims *c, const struct dra_claim_ref *claims,
                                           size_t n, dra_claims_done_fn done, void *userdata);
struct dra_claims_call *dra_claims_unprepare(struct dra_claims *c,
                                             const struct dra_claim_ref *claims, size_t n,
                                             dra_claims_done_fn done, void *userdata);
/* done is not called afterwards. NULL is ignored; not after (or from inside) done. What a
 * cancelled prepare already recorded stays prepared (the kubelet will repeat it); a claim
 * whose reset a cancelled unprepare stopped stays recorded (the kubelet will repeat that). */
void dra_claims_cancel(struct dra_claims_call *call);
/* The kubelet's deadline for call (loop_now_ms() time; 0: none), right after it started
 * (dra_claims_prepare): a claim's GET waits in the API client's rate limit (a 429's
 * Retry-After included) until DRA_CLAIMS_DEADLINE_MARGIN of the time left before it at
 * most, instead of the client's own wait bound when that is later, and then fails saying
 * so, so that the kubelet gets the cause before it gives up. */
void dra_claims_set_deadline(struct dra_claims_call *call, uint64_t deadline_ms);
/* The answer's share of the time left before the kubelet's deadline: a tenth of it, at
 * least 20 ms and at most 1 s. */
#define DRA_CLAIMS_DEADLINE_MARGIN_MS(left) ((left) / 10 < 20 ? 20 : (left) / 10 > 1000 ? 1000 : (left) / 10)

/* Whether a recorded claim (prepared, or PrepareStarted) holds a device of the GPU of
 * this minor (the GPU itself or one of its MIG devices: named "gpu-<minor>..."). Such a
 * GPU stays with DRA until its last claim is unprepared (node-state.h). */
bool dra_claims_holds_gpu(const struct dra_claims *c, unsigned minor);

/* DynamicMIG: the MIG device a prepared claim made for placement `device`, or NULL. */
const struct dra_ckpt_mig *dra_claims_placement_mig(const struct dra_claims *c, const char *device);
/* The MIG devices prepared claims made on the GPU of this UUID (uuid, gi_id, ci_id of
 * out[] filled; at most max): what the health monitor watches for DynamicMIG. */
size_t dra_claims_gpu_migs(const struct dra_claims *c, const char *gpu_uuid, struct inv_mig *out,
                           size_t max);

/* How many claims the checkpoint holds (tests, metrics). */
size_t dra_claims_prepared_count(const struct dra_claims *c);
