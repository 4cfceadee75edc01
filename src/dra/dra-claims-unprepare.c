/* Unpreparing claims (see dra-claims.h): what their sharing configs set on their GPUs put
 * back through the reset_config hook, then their CDI specs and records removed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/loop.h"
#include "dra/dra-cdi.h"
#include "dra/dra-claim.h"
#include "dra/dra-claims-internal.h"
#include "dra/dra-mig.h"
#include "kube/kube.h"

static bool has_config(const struct dra_ckpt_device *d, const char *device)
{
    return d->config.sharing != DRA_SHARING_NONE && streq(d->device, device);
}

/* Whether no other device of rec (those after k where later says so, else those before)
 * nor any other recorded claim uses MPS daemon mps. */
static bool mps_alone(const struct dra_claims *c, const struct dra_ckpt_claim *rec, size_t k,
                      const char *mps, bool later)
{
    for (size_t j = later ? k + 1 : 0; j < (later ? rec->n_devices : k); j++)
        if (streq(rec->devices[j].config.mps.id, mps) &&
            rec->devices[j].config.sharing == DRA_SHARING_MPS)
            return false;
    for (size_t i = 0; i < c->ckpt.n_claims; i++) {
        const struct dra_ckpt_claim *o = &c->ckpt.claims[i];
        for (size_t j = 0; o != rec && j < o->n_devices; j++)
            if (o->devices[j].config.sharing == DRA_SHARING_MPS &&
                streq(o->devices[j].config.mps.id, mps))
                return false;
    }
    return true;
}

/* Whether device k of rec is reset when rec goes: it has a sharing config, no earlier
 * device of rec names it (once is enough), and no other recorded claim holds it with a
 * sharing config. Only adminAccess results let two claims hold one device (dra-claims.h);
 * the setting of the one still recorded stays, and the last one to go resets it. A claim
 * whose prepare applies its configs now is recorded (PrepareStarted), so it counts.
 * A share's MPS v3 namespace is its own: always reset, *ns_only set unless it is the
 * daemon's last share (the last of rec's too, so its other namespaces go first). */
static bool to_reset(const struct dra_claims *c, const struct dra_ckpt_claim *rec, size_t k,
                     bool *ns_only)
{
    const char *device = rec->devices[k].device;
    const struct dra_config *cfg = &rec->devices[k].config;
    *ns_only = false;
    if (cfg->sharing == DRA_SHARING_NONE)
        return false;
    /* MPS: what is reset is a daemon, by its id; it stops when no other record uses it
     * (a GPU's shares share one; two claims holding one GPU through adminAccess each have
     * their own, and each one's goes with its claim) */
    if (cfg->sharing == DRA_SHARING_MPS && cfg->mps.id[0]) {
        if (!cfg->mps.ns[0])
            return mps_alone(c, rec, k, cfg->mps.id, false);
        *ns_only = !mps_alone(c, rec, k, cfg->mps.id, true);
        return true;
    }
    for (size_t j = 0; j < k; j++)
        if (has_config(&rec->devices[j], device))
            return false;
    for (size_t i = 0; i < c->ckpt.n_claims; i++) {
        const struct dra_ckpt_claim *o = &c->ckpt.claims[i];
        for (size_t j = 0; o != rec && j < o->n_devices; j++)
            if (has_config(&o->devices[j], device))
                return false;
    }
    return true;
}

const struct dra_ckpt_claim *claims_reset_overlap(const struct dra_claims *c,
                                                  const struct dra_ckpt_claim *rec,
                                                  const char **device)
{
    for (const struct dra_claims_call *call = c->calls; call; call = call->next)
        for (size_t i = 0; i < call->n; i++) {
            const struct dra_ckpt_claim *o = call->pend[i].resetting
                ? dra_checkpoint_find(&c->ckpt, call->results[i].uid) : NULL;
            for (size_t j = 0; o && j < o->n_devices; j++)
                for (size_t k = 0; k < rec->n_devices; k++)
                    if (o->devices[j].config.sharing != DRA_SHARING_NONE &&
                        has_config(&rec->devices[k], o->devices[j].device)) {
                        *device = rec->devices[k].device;
                        return o;
                    }
        }
    return NULL;
}

static int reset_failed(struct error *err, const struct dra_ckpt_device *d)
{
    return error_prefix(err, "resetting %s on %s", dra_sharing_name(d->config.sharing), d->device);
}

static void reset_done(void *userdata, int r, const struct error *e);

/* The GPUs of p's claim reset from its record's device p->dev on, one at a time: 1 while
 * one is in flight (reset_done goes on), 0 when all are, -errno (err). The record is
 * found anew each time (other claims' writes move it); it stays while p resets: another
 * prepare or unprepare of the claim is refused meanwhile. */
static int reset_next(struct dra_claims *c, struct pending *p, struct error *err)
{
    const char *uid = p->call->results[p->i].uid;
    for (;; p->dev++) {
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&c->ckpt, uid);
        if (!rec || p->dev >= rec->n_devices)
            return 0;
        bool ns_only;
        if (!to_reset(c, rec, p->dev, &ns_only))
            continue;
        const struct dra_ckpt_device *d = &rec->devices[p->dev];
        struct dra_config cfg = d->config;
        cfg.mps.ns_only = ns_only;
        const struct inv_gpu *gpu = NULL;
        const struct inv_mig *mig = NULL;
        int r = claims_device(c, d->device, &gpu, &mig, err);
        if (r == -ENODEV) {
            /* No longer DRA's (the GPU gone, or MIG or the device plugin took it at a
             * reload): nothing of it may be touched, and failing would fail every retry
             * of the kubelet, holding its pod's teardown forever. */
            log_warning("DRA: unpreparing claim %s: %s; its %s config is left as it is",
                        uid, err->msg, dra_sharing_name(d->config.sharing));
            continue;
        }
        if (r == 0)
            r = c->reset_config(c->apply_userdata, gpu, mig, &cfg, reset_done, p, &p->op, err);
        if (r < 0)
            return reset_failed(err, d);
        if (r > 0)
            return 1;
    }
}

/* DynamicMIG: the MIG devices uid's record made, destroyed in reverse order (the compute
 * instance, then the GPU instance; MIG mode off after a Hopper GPU's last), except one
 * another claim holds (a placement's shares: the last one's goes); with rollback, those
 * of a prepare that never completed are looked for at their placements. A failure
 * (processes still on it) keeps the record, so that the kubelet's retry destroys again. */
int claims_uncarve(struct dra_claims *c, const char *uid, bool rollback, struct error *err)
{
    const struct dra_ckpt_claim *rec = dra_checkpoint_find(&c->ckpt, uid);
    for (size_t i = rec ? rec->n_devices : 0; i-- > 0;) {
        const struct dra_ckpt_device *d = &rec->devices[i];
        if (!d->mig.uuid && !strstr(d->device, "-mig-"))
            continue;
        if (!c->inv || !c->devices)
            return error_set(err, -EAGAIN, "devices not discovered yet");
        bool seen = false; /* two shares of one placement in rec: destroyed once */
        for (size_t j = i + 1; j < rec->n_devices && !seen; j++)
            seen = streq(rec->devices[j].device, d->device);
        if (seen || claims_mig_holder(c, uid, d->device, d->mig.uuid))
            continue;
        int r = 0;
        if (!d->mig.uuid) {
            r = rollback && rec->state == DRA_CKPT_PREPARE_STARTED
                    ? dra_mig_rollback(c->inv, c->devices, d->device, err) : 0;
        } else {
            const struct inv_gpu *g = NULL;
            for (size_t k = 0; k < c->inv->n_gpus && !g; k++)
                if (streq(c->inv->gpus[k].uuid, d->mig.parent_uuid))
                    g = &c->inv->gpus[k];
            if (!g) /* its GPU is gone from the node: so is the MIG device */
                continue;
            r = dra_mig_destroy(g, d->mig.gi_id, d->mig.uuid, err);
        }
        if (r < 0)
            return r;
    }
    return 0;
}

/* The claim of res is reset (r == 0): its MIG devices, spec and record go. Else (r < 0,
 * err) it fails, and stays recorded with its spec, so that the kubelet's retry resets
 * again. */
static void unprepared(struct dra_claims *c, struct dra_claim_result *res, const char *ns,
                       const char *name, int r, struct error *err)
{
    /* The spec goes even without a record: a checkpoint discarded as corrupt forgot
     * claims whose specs are still there. Missing is fine. */
    bool recorded = dra_checkpoint_find(&c->ckpt, res->uid) != NULL;
    if (r == 0)
        r = claims_uncarve(c, res->uid, true, err);
    if (r == 0 && (r = dra_cdi_remove(c->cdi_root, res->uid, err)) == 0)
        r = dra_checkpoint_remove(&c->ckpt, res->uid, err);
    if (r < 0)
        claims_result_error(res, "unpreparing", ns, name, err);
    else if (recorded)
        claims_released(c);
}

static void released_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_claims *c = userdata;
    c->released_timer = NULL;
    c->released(c->released_userdata);
}

/* From a timer: the daemon's answer to it (moving a GPU to the device plugin) rebuilds
 * the devices this engine borrows, which must not change under a call's work. */
void claims_released(struct dra_claims *c)
{
    if (c->released && !c->released_timer)
        c->released_timer = loop_timer_add(c->loop, 0, released_timer, c);
}

/* A device name of dra-devices.h names the GPU of minor: "gpu-<minor>" or
 * "gpu-<minor>-mig-...". */
static bool names_gpu(const char *device, unsigned minor)
{
    char prefix[32];
    int n = snprintf(prefix, sizeof(prefix), "gpu-%u", minor);
    return strncmp(device, prefix, (size_t)n) == 0 &&
           (device[n] == '\0' || strncmp(device + n, "-mig-", 5) == 0);
}

const struct dra_ckpt_mig *dra_claims_placement_mig(const struct dra_claims *c, const char *device)
{
    return claims_mig_holder(c, "", device, NULL); /* "": no record's UID, so any claim's */
}

size_t dra_claims_gpu_migs(const struct dra_claims *c, const char *gpu_uuid, struct inv_mig *out,
                           size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < c->ckpt.n_claims; i++)
        for (size_t j = 0; j < c->ckpt.claims[i].n_devices && n < max; j++) {
            const struct dra_ckpt_device *d = &c->ckpt.claims[i].devices[j];
            bool seen = false; /* a placement's shares hold one MIG device */
            for (size_t k = 0; k < n && !seen && d->mig.uuid; k++)
                seen = streq(out[k].uuid, d->mig.uuid);
            if (!d->mig.uuid || seen || !streq(d->mig.parent_uuid, gpu_uuid))
                continue;
            out[n] = (struct inv_mig){ .gi_id = d->mig.gi_id, .ci_id = d->mig.ci_id };
            snprintf(out[n].uuid, sizeof(out[n].uuid), "%s", d->mig.uuid);
            n++;
        }
    return n;
}

bool dra_claims_holds_gpu(const struct dra_claims *c, unsigned minor)
{
    for (size_t i = 0; i < c->ckpt.n_claims; i++)
        for (size_t j = 0; j < c->ckpt.claims[i].n_devices; j++)
            if (names_gpu(c->ckpt.claims[i].devices[j].device, minor))
                return true;
    return false;
}

static void reset_done(void *userdata, int r, const struct error *e)
{
    struct pending *p = userdata;
    struct dra_claims_call *call = p->call;
    struct error err = { 0 };
    p->op = NULL;
    if (r < 0) {
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&call->c->ckpt, call->results[p->i].uid);
        err = *e;
        if (rec) /* it is: nothing removes the record of a claim being reset */
            reset_failed(&err, &rec->devices[p->dev]);
    } else {
        p->dev++;
        if ((r = reset_next(call->c, p, &err)) > 0)
            return;
    }
    p->resetting = false;
    unprepared(call->c, &call->results[p->i], p->namespace_, p->name, r, &err);
    if (--call->outstanding == 0)
        claims_call_finish(call);
}

/* A prepare of the claim that is still under way loses to this later unprepare: it fails
 * (answered from the loop), and nothing of it may land after the unprepare answered. One
 * waiting for its claim's GET: the GET is cancelled (its answer would prepare the claim
 * again and block its GPU for every later claim) and its staged spec file goes. One
 * waiting for its sharing configs: the tool is stopped, and what it set is reset below as
 * for any claim. */
static void stop_prepare(struct dra_claims *c, struct pending *p)
{
    struct error err = { 0 };
    if (p->req) {
        kube_request_cancel(TAKE_PTR(p->req));
        error_set(&err, -ECANCELED, "unprepared while its claim was being fetched");
    } else {
        c->apply_cancel(c->apply_userdata, TAKE_PTR(p->op));
        json_decref(TAKE_PTR(p->spec));
        error_set(&err, -ECANCELED, "unprepared while its sharing configs were being applied");
    }
    fs_stage_abort(&p->stage);
    claims_result_error(&p->call->results[p->i], "preparing", p->namespace_, p->name, &err);
    p->call->outstanding--;
    claims_call_maybe_done(p->call);
}

/* Every prepare of uid still under way (several calls may prepare one claim). */
static void stop_prepares(struct dra_claims *c, const char *uid)
{
    for (struct dra_claims_call *call = c->calls; call; call = call->next)
        for (size_t i = 0; i < call->n; i++) {
            struct pending *p = &call->pend[i];
            if ((p->req || p->spec) && streq(call->results[i].uid, uid))
                stop_prepare(c, p);
        }
}

struct dra_claims_call *dra_claims_unprepare(struct dra_claims *c,
                                             const struct dra_claim_ref *claims, size_t n,
                                             dra_claims_done_fn done, void *userdata)
{
    struct dra_claims_call *call = claims_call_new(c, claims, n, done, userdata);
    if (claims_over_bound(call, "unpreparing"))
        return claims_call_maybe_done(call);
    for (size_t i = 0; i < n; i++) {
        struct dra_claim_result *res = &call->results[i];
        const struct dra_claim_ref *ref = &claims[i];
        struct error err = { 0 };
        /* Not a UID we could have prepared (or named a file after): nothing to undo. */
        if (!dra_claim_uid_valid(res->uid))
            continue;
        struct pending *busy = claims_busy(c, res->uid);
        if (busy && busy->resetting) {
            error_set(&err, -EBUSY, "its GPUs are being reset by another unprepare call; try again");
            claims_result_error(res, "unpreparing", ref->namespace_, ref->name, &err);
            continue;
        }
        stop_prepares(c, res->uid);
        struct pending *p = &call->pend[i];
        *p = (struct pending){ .call = call, .i = i };
        int r = c->reset_config ? reset_next(c, p, &err) : 0;
        if (r > 0) {
            p->resetting = true;
            p->namespace_ = ref->namespace_ ? xstrdup(ref->namespace_) : NULL;
            p->name = ref->name ? xstrdup(ref->name) : NULL;
            call->outstanding++;
            continue;
        }
        unprepared(c, res, ref->namespace_, ref->name, r, &err);
    }
    return claims_call_maybe_done(call);
}
