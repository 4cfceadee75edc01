/* Planning a claim's prepare (see dra-claims.h): which devices it gets and whether another
 * claim holds one (shares and DynamicMIG's placements included), its record, and the MIG
 * devices its placements need made. Split from dra-claims.c, which runs the calls. */
#include <errno.h>
#include <stdio.h>

#include "core/log.h"
#include "dra/dra-cdi.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claim.h"
#include "dra/dra-claims-internal.h"
#include "dra/dra-mig.h"
#include "dra/dra-mps.h"
#include "dra/dra-shares.h"

bool claims_devices_conflict(const struct dra_claims *c, const char *a, const char *b)
{
    if (streq(a, b))
        return true;
    /* only devices of one GPU can exclude each other, and the name says which GPU
     * ("gpu-<minor>", "gpu-<minor>-mig-..."): no lookup for the others, which is every
     * pair a Prepare compares against the checkpoint but a few */
    size_t pa = strspn(a + (strncmp(a, "gpu-", 4) ? 0 : 4), "0123456789"),
           pb = strspn(b + (strncmp(b, "gpu-", 4) ? 0 : 4), "0123456789");
    if (pa != pb || strncmp(a, b, 4 + pa) != 0)
        return false;
    const struct dra_device *x = dra_devices_find(c->devices, a), *y = dra_devices_find(c->devices, b);
    /* DynamicMIG: a carved GPU is either one full device or MIG devices on disjoint memory
     * slices (what the scheduler's counters say, checked again: a forged or stale claim) */
    if (!x || !y || x->gpu != y->gpu || !x->counters || !y->counters)
        return false;
    if (x->type != DRA_DEVICE_MIG_PLACEMENT || y->type != DRA_DEVICE_MIG_PLACEMENT)
        return true;
    const struct inv_gpu *g = &c->inv->gpus[x->gpu];
    const struct inv_placement *p = &g->mig_profiles[x->mig].placements[x->placement];
    const struct inv_placement *q = &g->mig_profiles[y->mig].placements[y->placement];
    return p->start < q->start + q->size && q->start < p->start + p->size;
}

/* The MIG device recorded for `device` in rec, or NULL. */
static const struct dra_ckpt_mig *recorded_mig(const struct dra_ckpt_claim *rec, const char *device)
{
    for (size_t j = 0; rec && j < rec->n_devices; j++)
        if (rec->devices[j].mig.uuid && streq(rec->devices[j].device, device))
            return &rec->devices[j].mig;
    return NULL;
}

const struct dra_ckpt_mig *claims_mig_holder(const struct dra_claims *c, const char *uid,
                                             const char *device, const char *mig_uuid)
{
    for (size_t k = 0; k < c->ckpt.n_claims; k++) {
        const struct dra_ckpt_claim *o = &c->ckpt.claims[k];
        for (size_t j = 0; !streq(o->uid, uid) && j < o->n_devices; j++) {
            const struct dra_ckpt_mig *m = &o->devices[j].mig;
            if (m->uuid && (mig_uuid ? streq(m->uuid, mig_uuid) : streq(o->devices[j].device, device)))
                return m;
        }
    }
    return NULL;
}

void claims_keep_made(const struct dra_claims *c, struct dra_ckpt_claim *rec)
{
    const struct dra_ckpt_claim *old = dra_checkpoint_find(&c->ckpt, rec->uid);
    for (size_t i = 0; old && i < rec->n_devices; i++) {
        const struct dra_ckpt_mig *m = recorded_mig(old, rec->devices[i].device);
        if (m && !rec->devices[i].mig.uuid)
            rec->devices[i].mig = (struct dra_ckpt_mig){ .parent_uuid = xstrdup(m->parent_uuid),
                                                         .uuid = xstrdup(m->uuid),
                                                         .gi_id = m->gi_id, .ci_id = m->ci_id };
    }
}

/* The MIG device of placement d for uid's record into *made: the one its earlier try made
 * (when it is still there), else the one another claim's shares of it hold (a share), else
 * one made now. */
static int carve_one(struct dra_claims *c, const char *uid, const struct dra_device *d,
                     bool share, struct inv_mig *made, struct error *err)
{
    const struct dra_ckpt_mig *own = recorded_mig(dra_checkpoint_find(&c->ckpt, uid), d->name);
    const struct dra_ckpt_mig *other = share ? claims_mig_holder(c, uid, d->name, NULL) : NULL;
    int r;
    if (own && (!other || streq(own->uuid, other->uuid))) {
        r = dra_mig_find(c->inv, d, own->uuid, c->cfg->proc_root, made, err);
        if (r != -ENOENT || other)
            return r < 0 ? error_prefix(err, "share of %s", d->name) : 0;
        /* gone since (the sweep of a restart): made anew, its old UUID forgotten first so
         * that a failure below leaves nothing for an undo to look for */
        if ((r = dra_checkpoint_set_mig(&c->ckpt, uid, d->name, NULL, err)) < 0)
            return r;
    } else if (other) {
        /* the MIG device the placement's other shares use: their daemon too */
        r = dra_mig_find(c->inv, d, other->uuid, c->cfg->proc_root, made, err);
        return r < 0 ? error_prefix(err, "share of %s", d->name) : 0;
    }
    return dra_mig_create(c->inv, d, c->cfg->proc_root, made, err);
}

/* The MIG devices of the placements among devs, made (or found: shares) in order into
 * made[] and recorded in uid's record (in memory; saved when it completes), with their
 * shares' MPS daemons. On failure the record holds what was made: undo destroys it. */
int claims_carve(struct dra_claims *c, const char *uid, const struct dra_device **devs,
                 struct inv_mig *made, size_t n, struct error *err)
{
    for (size_t i = 0; i < n; i++) {
        const struct dra_device *d = devs[i];
        if (d->type != DRA_DEVICE_MIG_PLACEMENT)
            continue;
        const struct inv_gpu *g = &c->inv->gpus[d->gpu];
        int r = carve_one(c, uid, d, d->shared, &made[i], err);
        if (r < 0)
            return r;
        struct dra_ckpt_mig m = { .parent_uuid = (char *)g->uuid, .uuid = made[i].uuid,
                                  .gi_id = made[i].gi_id, .ci_id = made[i].ci_id };
        if ((r = dra_checkpoint_set_mig(&c->ckpt, uid, d->name, &m, err)) < 0)
            return r;
        /* each share of it: the MPS daemon of the MIG device, known now */
        const struct dra_ckpt_claim *rec = dra_checkpoint_find(&c->ckpt, uid);
        for (size_t j = 0; rec && j < rec->n_devices; j++) {
            const struct dra_ckpt_device *e = &rec->devices[j];
            struct dra_config cfg;
            if (!e->share_id || !streq(e->device, d->name))
                continue;
            dra_shares_mps(c->inv, d, made[i].uuid, uid, e, &cfg);
            if ((r = dra_checkpoint_set_config(&c->ckpt, uid, j, &cfg, err)) < 0)
                return r;
        }
    }
    return 0;
}

bool claims_any_placement(const struct dra_device **devs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (devs[i]->type == DRA_DEVICE_MIG_PLACEMENT)
            return true;
    return false;
}

/* The other claim holding a device of claim (prepared, or its configs being applied or its
 * GPUs reset), or NULL. */
const struct dra_ckpt_claim *claims_overlap(const struct dra_claims *c, const struct dra_claim *claim,
                                            const char **device)
{
    for (size_t k = 0; k < c->ckpt.n_claims; k++) {
        const struct dra_ckpt_claim *o = &c->ckpt.claims[k];
        if (streq(o->uid, claim->uid) ||
            (o->state != DRA_CKPT_PREPARE_COMPLETED && !claims_busy(c, o->uid)))
            continue;
        for (size_t i = 0; i < claim->n_allocs; i++) {
            if (claim->allocs[i].admin_access)
                continue;
            for (size_t j = 0; j < o->n_devices; j++)
                if (!o->devices[j].admin_access &&
                    !dra_shares_coexist(o->devices[j].device, o->devices[j].share_id,
                                        claim->allocs[i].device, claim->allocs[i].share_id) &&
                    claims_devices_conflict(c, o->devices[j].device, claim->allocs[i].device)) {
                    *device = claim->allocs[i].device;
                    return o;
                }
        }
    }
    return NULL;
}

/* The record of a claim about to be prepared, and the spec's devices (deduplicated:
 * an admin-access result may name a device twice, a CDI spec may not). */
int claims_plan(struct dra_claims *c, const struct dra_claim *claim, struct dra_ckpt_claim *rec,
                const struct dra_device **devs, size_t *n_devs, struct error *err)
{
    *rec = (struct dra_ckpt_claim){ .uid = xstrdup(claim->uid), .namespace_ = xstrdup(claim->namespace_),
                                    .name = xstrdup(claim->name), .state = DRA_CKPT_PREPARE_STARTED };
    rec->devices = xcalloc(claim->n_allocs + 1, sizeof(*rec->devices));
    *n_devs = 0;
    for (size_t i = 0; i < claim->n_allocs; i++) {
        const struct dra_alloc *a = &claim->allocs[i];
        const struct dra_device *d = dra_devices_find(c->devices, a->device);
        if (!d)
            return error_set(err, -ENODEV, "device %s is not a device of node %s", a->device,
                             c->node_name);
        struct dra_ckpt_device *rd = &rec->devices[rec->n_devices++];
        *rd = (struct dra_ckpt_device){
            .device = xstrdup(a->device),
            .pool = xstrdup(c->node_name),
            .request = xstrdup(a->base_request),
            .cdi_id = dra_cdi_device_id(claim->uid, a->device),
            .admin_access = a->admin_access,
            .config = a->config,
        };
        int r = dra_shares_record(c->inv, d, a, rd, err);
        if (r < 0)
            return r;
        if (rd->share_id) {
            rd->cdi_id = dra_cdi_share_device_id(claim->uid, a->device, rd->share_id);
            /* a share is enforced through MPS: no other sharing on top of it */
            if (a->config.sharing != DRA_SHARING_NONE)
                return error_set(err, -EINVAL, "share %s of device %s: a device offered as shares "
                                 "is shared through MPS, %s cannot apply to a share", rd->share_id,
                                 a->device, dra_sharing_name(a->config.sharing));
            /* its device's one MPS control daemon, which every share of it uses; a
             * placement's is known once its MIG device is made (claims_carve): MPS, and
             * no daemon yet (what an unprepare before then resets: nothing) */
            if (d->type != DRA_DEVICE_MIG_PLACEMENT) {
                dra_shares_mps(c->inv, d, dra_device_uuid(c->inv, d), claim->uid, rd, &rd->config);
            } else {
                rd->config = dra_config_default(DRA_CONFIG_MIG);
                rd->config.sharing = DRA_SHARING_MPS;
            }
        } else if (d->type == DRA_DEVICE_MIG_PLACEMENT && a->config.sharing != DRA_SHARING_NONE) {
            /* NVIDIA's gate exclusion (DynamicMIG without MPS), kept */
            return error_set(err, -EOPNOTSUPP, "a sharing config on a MIG device made on demand "
                             "is not supported");
        }
        bool seen = false;
        for (size_t k = 0; k < *n_devs && !seen; k++)
            seen = devs[k] == d;
        if (!seen)
            devs[(*n_devs)++] = d;
    }
    /* MPS: each group's daemon and devices, its keys checked against them (dra-mps.h) */
    return dra_mps_plan(claim->uid, rec->devices, rec->n_devices, c->inv, c->devices, err);
}

/* Whether preparing rec changes anything outside its CDI spec (a sharing config applied to
 * a GPU): only then is PrepareStarted recorded first, so a crash in between can be rolled
 * back. A claim without one has the spec as its only effect, which an unprepare removes by
 * UID with or without a record, and a repeated prepare writes again: it is recorded once,
 * completed, after the spec (one checkpoint write per Prepare instead of two). */
bool claims_changes_devices(const struct dra_claims *c, const struct dra_ckpt_claim *rec)
{
    for (size_t i = 0; c->apply_config && i < rec->n_devices; i++)
        if (rec->devices[i].config.sharing != DRA_SHARING_NONE)
            return true;
    return false;
}

