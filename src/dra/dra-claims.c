/* The claim engine, its calls, and prepare (see dra-claims.h; a prepare's planning is in
 * dra-claims-plan.c, unprepare in dra-claims-unprepare.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include "core/log.h"
#include "core/loop.h"
#include "dra/dra-cdi.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claim.h"
#include "dra/dra-claims-internal.h"
#include "dra/dra-mig.h"
#include "dra/dra-mps.h"
#include "dra/dra-shares.h"
#include "kube/kube.h"
#include "output/cdi.h"

int dra_claims_new(struct loop *l, struct kube *k, const struct dra_claims_options *o,
                   struct dra_claims **out, struct error *err)
{
    /* Room under PATH_MAX for the longest file name either directory gets: a spec named
     * after a UID of DRA_CLAIM_UID_MAX bytes, a temporary name beside it. */
    static const size_t dir_max = PATH_MAX - DRA_CLAIM_UID_MAX - 64;
    if (!o->node_name || !*o->node_name || strlen(o->node_name) > DRA_CLAIM_NAME_MAX)
        return error_set(err, -EINVAL, "DRA claims: the node name is missing or too long");
    if (!o->cdi_root || !*o->cdi_root || strlen(o->cdi_root) > dir_max)
        return error_set(err, -ENAMETOOLONG, "DRA claims: the CDI root is missing or longer than %zu bytes", dir_max);
    if (!o->plugin_dir || !*o->plugin_dir || strlen(o->plugin_dir) > dir_max)
        return error_set(err, -ENAMETOOLONG, "DRA claims: the plugin directory is missing or longer than %zu bytes", dir_max);
    char boot[DRA_CKPT_BOOT_ID_MAX];
    int r = dra_checkpoint_boot_id(o->boot_id_path, boot, err);
    if (r < 0)
        return r;
    struct dra_claims *c = xcalloc(1, sizeof(*c));
    struct error discarded = { 0 };
    r = dra_checkpoint_open(&c->ckpt, o->plugin_dir, boot, o->node_name, &discarded, err);
    if (r < 0) {
        free(c);
        return r;
    }
    /* A tolerated start: the claims are forgotten and the kubelet prepares them again. */
    if (r == 1)
        log_warning("%s", discarded.msg);
    /* MPS daemons of claims unprepared while we were down go; the others stay (adopted) */
    (void)dra_mps_sweep(o->plugin_dir, &c->ckpt);
    int swept = dra_cdi_sweep(o->cdi_root);
    if (swept > 0)
        log_info("removed %d CDI spec file(s) an earlier run staged under %s and never wrote", swept,
                 o->cdi_root);
    c->loop = l;
    c->kube = k;
    c->node_name = xstrdup(o->node_name);
    c->cdi_root = xstrdup(o->cdi_root);
    c->cfg = o->cfg;
    c->apply_config = o->apply_config;
    c->reset_config = o->reset_config;
    c->apply_cancel = o->apply_cancel;
    c->apply_userdata = o->apply_userdata;
    c->released = o->released;
    c->released_userdata = o->released_userdata;
    *out = c;
    return 0;
}

void dra_claims_set_devices(struct dra_claims *c, const struct config *cfg,
                            const struct inventory *inv, const struct dra_device_set *set)
{
    if (cfg)
        c->cfg = cfg;
    c->inv = inv;
    c->devices = set;
    /* once, with the first devices and before the kubelet can call (the daemon registers
     * after this): what a killed run made and never recorded goes */
    if (inv && set && !c->swept) {
        c->swept = true;
        dra_mig_sweep(inv, set, &c->ckpt);
    }
}

size_t dra_claims_prepared_count(const struct dra_claims *c)
{
    return c->ckpt.n_claims;
}

/* ---- calls ----------------------------------------------------------------------------- */

struct dra_claims_call *claims_call_new(struct dra_claims *c, const struct dra_claim_ref *claims,
                                        size_t n, dra_claims_done_fn done, void *userdata)
{
    struct dra_claims_call *call = xcalloc(1, sizeof(*call));
    call->c = c;
    call->n = n;
    call->done = done;
    call->userdata = userdata;
    call->results = xcalloc(n + 1, sizeof(*call->results));
    call->pend = xcalloc(n + 1, sizeof(*call->pend));
    for (size_t i = 0; i < n; i++)
        call->results[i].uid = xstrdup(claims[i].uid ? claims[i].uid : "");
    call->next = c->calls;
    if (c->calls)
        c->calls->pprev = &call->next;
    call->pprev = &c->calls;
    c->calls = call;
    return call;
}

static void call_free(struct dra_claims_call *call)
{
    if (call->next)
        call->next->pprev = call->pprev;
    *call->pprev = call->next;
    loop_timer_cancel(call->c->loop, call->timer);
    loop_timer_cancel(call->c->loop, call->early);
    json_decref(call->common);
    for (size_t i = 0; i < call->n; i++) {
        kube_request_cancel(call->pend[i].req);
        fs_stage_abort(&call->pend[i].stage);
        /* A hook in flight: its tool stopped. The record stays, as a crash would leave
         * it: PrepareStarted (a prepare), or the claim not yet unprepared (a reset). */
        if (call->pend[i].op)
            call->c->apply_cancel(call->c->apply_userdata, call->pend[i].op);
        json_decref(call->pend[i].spec);
        free(call->pend[i].namespace_);
        free(call->pend[i].name);
        dra_claim_result_clear(&call->results[i]);
    }
    free(call->pend);
    free(call->results);
    free(call);
}

void claims_call_finish(struct dra_claims_call *call)
{
    call->done(call->userdata, call->results, call->n);
    call_free(call);
}

static void finish_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_claims_call *call = userdata;
    call->timer = NULL;
    claims_call_finish(call);
}

struct dra_claims_call *claims_call_maybe_done(struct dra_claims_call *call)
{
    if (call->outstanding == 0 && !call->timer)
        call->timer = loop_timer_add(call->c->loop, 0, finish_timer, call);
    return call;
}

void dra_claims_set_deadline(struct dra_claims_call *call, uint64_t deadline_ms)
{
    uint64_t now = loop_now_ms(), left = deadline_ms > now ? deadline_ms - now : 0;
    if (!deadline_ms)
        return;
    call->deadline_ms = deadline_ms;
    left -= left > DRA_CLAIMS_DEADLINE_MARGIN_MS(left) ? DRA_CLAIMS_DEADLINE_MARGIN_MS(left) : left;
    for (size_t i = 0; i < call->n; i++)
        kube_request_set_wait_limit(call->pend[i].req, left > UINT32_MAX ? UINT32_MAX : (uint32_t)left);
}

void dra_claims_cancel(struct dra_claims_call *call)
{
    if (call)
        call_free(call);
}

void dra_claims_free(struct dra_claims *c)
{
    if (!c)
        return;
    while (c->calls)
        call_free(c->calls);
    loop_timer_cancel(c->loop, c->released_timer);
    dra_checkpoint_clear(&c->ckpt);
    free(c->node_name);
    free(c->cdi_root);
    free(c);
}

void claims_result_error(struct dra_claim_result *res, const char *verb, const char *ns,
                         const char *name, const struct error *err)
{
    free(res->error);
    if (ns && name)
        res->error = xasprintf("error %s devices for claim %s/%s:%s: %s", verb, ns, name, res->uid,
                               err->msg);
    else
        res->error = xasprintf("error %s devices for claim %s: %s", verb, res->uid, err->msg);
}

struct pending *claims_busy(const struct dra_claims *c, const char *uid)
{
    for (struct dra_claims_call *call = c->calls; call; call = call->next)
        for (size_t i = 0; i < call->n; i++)
            if ((call->pend[i].spec || call->pend[i].resetting) && streq(call->results[i].uid, uid))
                return &call->pend[i];
    return NULL;
}

int claims_device(const struct dra_claims *c, const char *device, const struct inv_gpu **gpu,
                  const struct inv_mig **mig, struct error *err)
{
    if (!c->devices || !c->inv)
        return error_set(err, -EAGAIN, "devices not discovered yet");
    const struct dra_device *dev = dra_devices_find(c->devices, device);
    if (!dev)
        return error_set(err, -ENODEV, "device %s is not a device of node %s", device, c->node_name);
    *gpu = &c->inv->gpus[dev->gpu];
    *mig = dev->type == DRA_DEVICE_MIG ? &(*gpu)->migs[dev->mig] : NULL;
    return 0;
}

/* ---- prepare ---------------------------------------------------------------------------- */

/* Best effort: what is left is found again by the kubelet's next prepare or unprepare.
 * The MIG devices the record says this prepare made go first (not another claim's). */
static void undo(struct dra_claims *c, const char *uid)
{
    struct error e = { 0 };
    if (claims_uncarve(c, uid, false, &e) < 0)
        log_warning("undoing the prepare of claim %s: %s", uid, e.msg);
    (void)dra_cdi_remove(c->cdi_root, uid, NULL);
    (void)dra_checkpoint_remove(&c->ckpt, uid, NULL);
    claims_released(c);
}

/* After PrepareStarted: the spec, then the same record completed, and the answer. */
static int complete(struct dra_claims *c, const char *uid, json_t *spec, struct fs_stage *st,
                    struct dra_claim_result *res, struct error *err)
{
    int r = dra_cdi_write(c->cdi_root, uid, spec, st, err);
    if (r < 0)
        return r;
    if ((r = dra_checkpoint_complete(&c->ckpt, uid, err)) < 0)
        return r;
    dra_ckpt_claim_result(dra_checkpoint_find(&c->ckpt, uid), res);
    return 0;
}

static void apply_done(void *userdata, int r, const struct error *e);

/* The sharing configs of p's claim from its record's device p->dev on, one at a time: 1
 * when one is in flight (apply_done goes on), 0 when all are applied, -errno (err). The
 * record is found anew each time: other claims' writes move it; a reload, the devices. */
static int apply_next(struct dra_claims *c, struct pending *p, struct error *err)
{
    const char *uid = p->call->results[p->i].uid;
    for (;; p->dev++) {
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&c->ckpt, uid);
        if (!rec)
            return error_set(err, -ENOENT, "its PrepareStarted record is gone");
        if (p->dev >= rec->n_devices)
            return 0;
        const struct dra_ckpt_device *d = &rec->devices[p->dev];
        if (d->config.sharing == DRA_SHARING_NONE)
            continue;
        const struct inv_gpu *gpu = NULL;
        const struct inv_mig *mig = NULL;
        int r = claims_device(c, d->device, &gpu, &mig, err);
        if (r == 0)
            r = c->apply_config(c->apply_userdata, gpu, mig, &d->config, apply_done, p, &p->op, err);
        if (r < 0)
            return error_prefix(err, "applying %s to %s", dra_sharing_name(d->config.sharing),
                                d->device);
        if (r > 0)
            return 1;
    }
}

/* The end of p's claim whose configs were being applied: r < 0 (err) fails it. */
static void applied(struct pending *p, int r, struct error *err)
{
    struct dra_claims_call *call = p->call;
    struct dra_claim_result *res = &call->results[p->i];
    if (r == 0)
        r = complete(call->c, res->uid, p->spec, &p->stage, res, err);
    fs_stage_abort(&p->stage);
    if (r < 0) {
        /* An MPS daemon not up yet: PrepareStarted kept (NVIDIA's), the kubelet retries. So
         * for any failure of a claim that made MIG devices (a placement's first share): its
         * retry takes them over, where an undo would destroy them and the retry make new
         * ones, each with a new daemon (named by its UUID) whose desired state the undo
         * cannot take back; its unprepare resets and destroys them. */
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&call->c->ckpt, res->uid);
        bool made = false;
        for (size_t i = 0; rec && i < rec->n_devices && !made; i++)
            made = rec->devices[i].mig.uuid != NULL;
        if (r != -EINPROGRESS && !made)
            undo(call->c, res->uid);
        claims_result_error(res, "preparing", p->namespace_, p->name, err);
    }
    json_decref(TAKE_PTR(p->spec));
}

static void apply_done(void *userdata, int r, const struct error *e)
{
    struct pending *p = userdata;
    struct dra_claims_call *call = p->call;
    struct error err = { 0 };
    p->op = NULL;
    if (r < 0) {
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&call->c->ckpt, call->results[p->i].uid);
        err = *e;
        if (rec) /* it is: an unprepare would have cancelled the apply */
            error_prefix(&err, "applying %s to %s",
                         dra_sharing_name(rec->devices[p->dev].config.sharing),
                         rec->devices[p->dev].device);
    } else {
        p->dev++;
        if ((r = apply_next(call->c, p, &err)) > 0)
            return;
    }
    applied(p, r, &err);
    if (--call->outstanding == 0)
        claims_call_finish(call);
}

/* -EBUSY (err) while a hook works on uid's claim for another call, else 0. */
static int busy_error(const struct dra_claims *c, const char *uid, struct error *err)
{
    const struct pending *busy = claims_busy(c, uid);
    if (!busy)
        return 0;
    if (busy->resetting)
        return error_set(err, -EBUSY, "it is being unprepared (its GPUs reset); try again");
    return error_set(err, -EBUSY, "its sharing configs are being applied by another prepare "
                                  "call; try again");
}

/* 1 when its sharing configs are being applied (apply_done answers res), else res is
 * answered: its devices, or an error in err (or already in res). */
static int prepare_claim(struct dra_claims *c, struct pending *p, json_t *body,
                         struct dra_claim_result *res, struct error *err)
{
    const char *uid = res->uid;
    int r;
    const char *api_uid = json_string_value(json_object_get(json_object_get(body, "metadata"), "uid"));
    if (!api_uid || !streq(api_uid, uid))
        return error_set(err, -ESTALE, "claim got replaced: the API server has UID %s",
                         api_uid ? api_uid : "(none)");
    /* Another call of the kubelet's may be applying its configs now (not twice at once on
     * one GPU) or unpreparing it, ... */
    if ((r = busy_error(c, uid, err)) < 0)
        return r;
    /* ... or have finished it while we waited. */
    const struct dra_ckpt_claim *done = dra_checkpoint_find(&c->ckpt, uid);
    if (done && done->state == DRA_CKPT_PREPARE_COMPLETED) {
        dra_ckpt_claim_result(done, res);
        return 0;
    }

    struct dra_claim claim;
    r = dra_claim_parse(body, DRA_DRIVER_NAME, c->node_name, &claim, err);
    if (r < 0)
        return r;
    struct dra_ckpt_claim rec = { 0 };
    const struct dra_device **devs = xcalloc(claim.n_allocs + 1, sizeof(*devs));
    struct inv_mig *made = NULL;
    size_t n_devs = 0;
    const char *dev = NULL;
    const struct dra_ckpt_claim *other;
    json_t *spec = NULL;

    if (claim.n_allocs == 0) {
        r = error_set(err, -ENOENT, "no device of %s is allocated in pool %s (allocated to "
                                    "another node?)", DRA_DRIVER_NAME, c->node_name);
        goto out;
    }
    if (!c->devices || !c->inv) {
        r = error_set(err, -EAGAIN, "devices not discovered yet");
        goto out;
    }
    if ((other = claims_overlap(c, &claim, &dev))) {
        r = error_set(err, -EBUSY, "device %s is already prepared for claim %s/%s:%s; a device is "
                                   "never given to two claims (pods share a GPU by sharing one claim)",
                      dev, other->namespace_, other->name, other->uid);
        goto out;
    }
    if ((r = claims_plan(c, &claim, &rec, devs, &n_devs, err)) < 0)
        goto out;
    if (claims_changes_devices(c, &rec) && (other = claims_reset_overlap(c, &rec, &dev))) {
        r = error_set(err, -EBUSY, "device %s is being reset by the unprepare of claim %s/%s:%s; "
                                   "try again", dev, other->namespace_, other->name, other->uid);
        goto out;
    }
    if ((r = dra_shares_fit(c->inv, c->devices, &c->ckpt, &rec, err)) < 0)
        goto out;
    bool carves = claims_any_placement(devs, n_devs);
    if (carves) {
        /* DynamicMIG: recorded PrepareStarted before anything is made, so that what a
         * killed run made is found at start (dra_mig_sweep) or by the next try (which
         * takes over what an earlier one made and kept) */
        claims_keep_made(c, &rec);
        if ((r = dra_checkpoint_put(&c->ckpt, &rec, err)) < 0)
            goto out;
        made = xcalloc(n_devs, sizeof(*made));
        if ((r = claims_carve(c, uid, devs, made, n_devs, err)) < 0) {
            undo(c, uid);
            goto out;
        }
    }
    /* the record: with its placements' MIG devices and their shares' daemon now */
    const struct dra_ckpt_claim *now = carves ? dra_checkpoint_find(&c->ckpt, uid) : &rec;
    spec = dra_cdi_spec(c->cfg, c->inv, uid, devs, made, n_devs, p->call->common, err);
    if (!spec) {
        r = err->code;
        if (carves)
            undo(c, uid);
        goto out;
    }
    dra_shares_spec(spec, c->cfg, c->inv, c->devices, now); /* a share's own name first */
    dra_mps_cdi_edits(spec, uid, now->devices, now->n_devices, c->ckpt.dir);
    if (!claims_changes_devices(c, now) && carves) {
        if ((r = complete(c, uid, spec, &p->stage, res, err)) < 0)
            undo(c, uid);
        goto out;
    }
    if (!claims_changes_devices(c, now)) {
        rec.state = DRA_CKPT_PREPARE_COMPLETED;
        if ((r = dra_cdi_write(c->cdi_root, uid, spec, &p->stage, err)) < 0)
            goto out;
        if ((r = dra_checkpoint_put(&c->ckpt, &rec, err)) < 0) {
            undo(c, uid);
            goto out;
        }
        rec = (struct dra_ckpt_claim){ 0 };
        dra_ckpt_claim_result(dra_checkpoint_find(&c->ckpt, uid), res);
        goto out;
    }
    if (!carves && (r = dra_checkpoint_put(&c->ckpt, &rec, err)) < 0)
        goto out;
    rec = (struct dra_ckpt_claim){ 0 };
    p->spec = TAKE_PTR(spec);
    p->dev = 0;
    if ((r = apply_next(c, p, err)) <= 0)
        applied(p, r, err);
out:
    json_decref(spec);
    dra_ckpt_claim_clear(&rec);
    free(made);
    free(devs);
    dra_claim_clear(&claim);
    return r > 0 ? 1 : 0;
}

static void got_claim(struct kube *k, int status, json_t *body, void *userdata)
{
    struct pending *p = userdata;
    struct dra_claims_call *call = p->call;
    struct dra_claim_result *res = &call->results[p->i];
    struct error err = { 0 };
    p->req = NULL;

    if (status == 200 && body) {
        if (prepare_claim(call->c, p, body, res, &err) > 0)
            return; /* apply_done goes on */
    } else if (status == 404) {
        error_set(&err, -ENOENT, "claim not found in the API server");
    } else if (status == KUBE_E_THROTTLED && call->deadline_ms) {
        error_set(&err, status, "getting the claim: never sent: it waited in this client's own "
                  "rate limit (--kube-api-qps, --kube-api-burst) until the kubelet's deadline for "
                  "the call was near");
    } else if (status < 0) {
        error_set(&err, status, "getting the claim: %s", kube_strerror(status));
    } else {
        error_set(&err, -EIO, "getting the claim: HTTP %d%s%s", status,
                  kube_status_message(body) ? ": " : "",
                  kube_status_message(body) ? kube_status_message(body) : "");
    }
    fs_stage_abort(&p->stage); /* not written: an error, or answered from the checkpoint */
    if (err.code && !res->error)
        claims_result_error(res, "preparing", p->namespace_, p->name, &err);
    if (--call->outstanding == 0)
        claims_call_finish(call);
}

bool claims_over_bound(struct dra_claims_call *call, const char *verb)
{
    if (call->n <= DRA_CLAIMS_MAX_PER_CALL)
        return false;
    struct error err = { 0 };
    error_set(&err, -E2BIG, "%zu claims in one call, more than the bound of %d", call->n,
              DRA_CLAIMS_MAX_PER_CALL);
    for (size_t i = 0; i < call->n; i++)
        claims_result_error(&call->results[i], verb, NULL, NULL, &err);
    return true;
}

/* What the claims' specs need that the claims do not decide, done while the API server
 * answers their GETs: the control nodes looked up (a stat each) and each spec's file
 * created (a new inode), about 0.2 ms of a Prepare's own work off its path here. */
static void early_work(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_claims_call *call = userdata;
    call->early = NULL;
    call->common = cdi_common_edits(call->c->cfg, call->c->inv);
    size_t staged = 0; /* at most DRA_CLAIMS_STAGED_MAX files open, across the calls */
    for (const struct dra_claims_call *o = call->c->calls; o; o = o->next)
        for (size_t i = 0; i < o->n; i++)
            staged += o->pend[i].stage.tmp != NULL;
    for (size_t i = 0; i < call->n && staged < DRA_CLAIMS_STAGED_MAX; i++)
        /* A failure is met again, and said, when the spec is written. */
        if (call->pend[i].req &&
            dra_cdi_stage(call->c->cdi_root, call->results[i].uid, &call->pend[i].stage, NULL) == 0)
            staged++;
}

struct dra_claims_call *dra_claims_prepare(struct dra_claims *c, const struct dra_claim_ref *claims,
                                           size_t n, dra_claims_done_fn done, void *userdata)
{
    struct dra_claims_call *call = claims_call_new(c, claims, n, done, userdata);
    if (claims_over_bound(call, "preparing"))
        return claims_call_maybe_done(call);
    for (size_t i = 0; i < n; i++) {
        struct dra_claim_result *res = &call->results[i];
        const struct dra_claim_ref *ref = &claims[i];
        struct error err = { 0 };
        if (!dra_claim_uid_valid(res->uid)) {
            error_set(&err, -EINVAL, "not a claim UID");
            claims_result_error(res, "preparing", NULL, NULL, &err);
            continue;
        }
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&c->ckpt, res->uid);
        if (rec && rec->state == DRA_CKPT_PREPARE_COMPLETED) {
            /* Not the answer of a claim whose record is about to go. */
            if (busy_error(c, res->uid, &err) < 0)
                claims_result_error(res, "preparing", rec->namespace_, rec->name, &err);
            else
                dra_ckpt_claim_result(rec, res);
            continue;
        }
        /* Both go into the GET's path: "..", "a/b" or "a..b" never may. Not quoted: they
         * are the peer's bytes. */
        if (!dra_claim_dns_label(ref->namespace_)) {
            error_set(&err, -EINVAL, "namespace is not a DNS label (at most 63 of a-z, 0-9 and "
                                     "'-', a letter or digit first and last)");
            claims_result_error(res, "preparing", NULL, NULL, &err);
            continue;
        }
        if (!dra_claim_object_name_valid(ref->name)) {
            error_set(&err, -EINVAL, "name is not a DNS subdomain (at most 253 of a-z, 0-9, '-' "
                                     "and '.', a letter or digit first, last and beside each '.')");
            claims_result_error(res, "preparing", NULL, NULL, &err);
            continue;
        }
        struct pending *p = &call->pend[i];
        *p = (struct pending){ .call = call, .i = i, .namespace_ = xstrdup(ref->namespace_),
                               .name = xstrdup(ref->name) };
        _cleanup_free_ char *path = xasprintf("/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
                                              ref->namespace_, ref->name);
        p->req = kube_request(c->kube, KUBE_GET, path, NULL, got_claim, p, &err);
        if (!p->req) {
            error_prefix(&err, "getting the claim");
            claims_result_error(res, "preparing", p->namespace_, p->name, &err);
            continue;
        }
        call->outstanding++;
    }
    /* Armed after the API client's own 0 ms timer, so it runs once the GETs are sent. */
    if (call->outstanding)
        call->early = loop_timer_add(c->loop, 0, early_work, call);
    return claims_call_maybe_done(call);
}
