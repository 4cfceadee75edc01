/* What the claim engine's two halves share (see dra-claims.h): dra-claims.c holds the
 * engine, its calls and prepare; dra-claims-unprepare.c unprepares, resetting what a
 * claim's sharing configs set on its GPUs first. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "core/fs.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claims.h"

struct kube_req;

struct dra_claims {
    struct loop *loop;
    struct kube *kube;
    char *node_name, *cdi_root;
    const struct config *cfg;
    dra_apply_fn apply_config;
    dra_apply_fn reset_config;
    void (*apply_cancel)(void *userdata, struct dra_apply_op *op);
    void *apply_userdata;
    const struct inventory *inv;
    const struct dra_device_set *devices;
    bool swept;                      /* DynamicMIG's start-up sweep ran (dra-mig.h) */
    struct dra_checkpoint ckpt;
    struct dra_claims_call *calls;   /* in flight, for dra_claims_free */
    void (*released)(void *userdata);
    void *released_userdata;
    struct loop_timer *released_timer; /* armed: released is called from the loop */
};

/* One claim of a call, while something of it is outstanding. */
struct pending {
    struct dra_claims_call *call;
    size_t i;
    char *namespace_, *name;
    struct kube_req *req;
    struct fs_stage stage; /* its CDI spec's file, made while its GET is in flight */
    /* While its sharing configs apply: the spec to write after. */
    json_t *spec;
    /* Unprepare: while its GPUs are reset (its record and spec go after). */
    bool resetting;
    size_t dev;              /* the record's device being applied or reset */
    struct dra_apply_op *op; /* the hook's run in flight (both cancelled by apply_cancel) */
};

struct dra_claims_call {
    struct dra_claims *c;
    struct dra_claim_result *results;
    struct pending *pend;
    size_t n, outstanding;
    struct loop_timer *timer, *early;
    json_t *common; /* the specs' common edits, made while the GETs are in flight */
    uint64_t deadline_ms; /* the kubelet's (dra_claims_set_deadline); 0: none */
    dra_claims_done_fn done;
    void *userdata;
    struct dra_claims_call *next, **pprev;
};

struct dra_claims_call *claims_call_new(struct dra_claims *c, const struct dra_claim_ref *claims,
                                        size_t n, dra_claims_done_fn done, void *userdata);
/* Answers and frees the call now (from the loop). */
void claims_call_finish(struct dra_claims_call *call);
/* Answers from the loop when nothing is outstanding (never from inside the starter). */
struct dra_claims_call *claims_call_maybe_done(struct dra_claims_call *call);
/* Every claim of a call past the bound gets the same error; nothing else is done. */
bool claims_over_bound(struct dra_claims_call *call, const char *verb);
/* error = "error <verb> devices for claim <ns>/<name>:<uid>: <err>" (NVIDIA's form). */
void claims_result_error(struct dra_claim_result *res, const char *verb, const char *ns,
                         const char *name, const struct error *err);
/* Records went: options.released is called from the loop. */
void claims_released(struct dra_claims *c);
/* The pending claim of uid that a hook works on (its sharing configs applied by a prepare,
 * or its GPUs reset by an unprepare), or NULL. */
struct pending *claims_busy(const struct dra_claims *c, const char *uid);
/* The GPU (and MIG device) of a recorded device: 0, -EAGAIN before the devices are
 * discovered, -ENODEV when the node has no such device (now); err set. */
int claims_device(const struct dra_claims *c, const char *device, const struct inv_gpu **gpu,
                  const struct inv_mig **mig, struct error *err);
/* Whether devices a and b (names of this node's device set) may not be held by two claims:
 * the same device, or on a GPU DynamicMIG carves, the full GPU and any placement, or two
 * placements sharing a memory slice. */
bool claims_devices_conflict(const struct dra_claims *c, const char *a, const char *b);
/* Planning (dra-claims-plan.c). The other claim holding a device of claim (prepared, or
 * its configs being applied or its GPUs reset), or NULL, *device naming it. */
struct dra_claim;
const struct dra_ckpt_claim *claims_overlap(const struct dra_claims *c, const struct dra_claim *claim,
                                            const char **device);
/* The record of a claim about to be prepared, and the spec's devices (deduplicated). */
int claims_plan(struct dra_claims *c, const struct dra_claim *claim, struct dra_ckpt_claim *rec,
                const struct dra_device **devs, size_t *n_devs, struct error *err);
/* Whether preparing rec changes anything outside its CDI spec (a sharing config): only then
 * is PrepareStarted recorded first. */
bool claims_changes_devices(const struct dra_claims *c, const struct dra_ckpt_claim *rec);
/* DynamicMIG: whether devs has a placement, and their MIG devices made (or, for shares,
 * found) into made[] and recorded in uid's record with their shares' MPS daemons (on
 * failure the record holds what was made: claims_uncarve destroys it). */
bool claims_any_placement(const struct dra_device **devs, size_t n);
int claims_carve(struct dra_claims *c, const char *uid, const struct dra_device **devs,
                 struct inv_mig *made, size_t n, struct error *err);
/* Before rec replaces the record of its UID (a try after one that kept PrepareStarted):
 * the MIG devices the old one made, taken over, so that the new try finds them. */
void claims_keep_made(const struct dra_claims *c, struct dra_ckpt_claim *rec);
/* The MIG device that a claim other than uid holds: by its UUID mig_uuid, or (NULL) the
 * one recorded for placement `device`; NULL when none does. A placement's shares hold one
 * MIG device: made by the first, destroyed by the last. */
const struct dra_ckpt_mig *claims_mig_holder(const struct dra_claims *c, const char *uid,
                                             const char *device, const char *mig_uuid);
/* The MIG devices uid's record made, destroyed (in reverse order) unless another claim
 * holds them; with rollback, those a PrepareStarted record names without a UUID are
 * looked for at their placements (a killed run's). */
int claims_uncarve(struct dra_claims *c, const char *uid, bool rollback, struct error *err);
/* The claim whose unprepare resets (now, or next) a device that rec has a sharing config
 * for, or NULL; *device: that device. Preparing rec meanwhile could set the GPU just
 * before the reset puts it back. */
const struct dra_ckpt_claim *claims_reset_overlap(const struct dra_claims *c,
                                                  const struct dra_ckpt_claim *rec,
                                                  const char **device);
