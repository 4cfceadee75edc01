/* GPU shares (see dra-shares.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/digest.h"
#include "dra/dra-cdi.h"
#include "dra/dra-share-hook.h"
#include "dra/dra-shares.h"

int dra_shares_record(const struct inventory *inv, const struct dra_device *d,
                      const struct dra_alloc *a, struct dra_ckpt_device *rec, struct error *err)
{
    if (a->share_id && !d->shared)
        return error_set(err, -EINVAL, "device %s is not offered as shares here, but its allocation "
                         "is share %s (a scheduler that saw an older slice, or a forged claim)",
                         d->name, a->share_id);
    if (!d->shared)
        return 0;
    if (!a->share_id)
        return error_set(err, -EINVAL, "device %s is offered as shares: its allocation carries no "
                         "shareID (a scheduler without DRAConsumableCapacity, or a forged claim)", d->name);
    struct dra_share_grid q;
    dra_share_grid(dra_device_memory(inv, d), &d->policy, &q);
    int64_t mem = a->memory >= 0 ? a->memory : (int64_t)q.def;
    int64_t comp = a->compute >= 0 ? a->compute : (int64_t)d->policy.compute_default;
    /* what the scheduler accounted is on the policy's grid; anything else was not made by it */
    if ((uint64_t)mem < q.min || (uint64_t)mem > q.max || ((uint64_t)mem - q.min) % q.step)
        return error_set(err, -EINVAL, "share %s of device %s: memory %lld bytes is not what the "
                         "device offers (%llu to %llu bytes in steps of %llu)", a->share_id, d->name,
                         (long long)mem, (unsigned long long)q.min, (unsigned long long)q.max,
                         (unsigned long long)q.step);
    if (comp < 1 || comp > 100)
        return error_set(err, -EINVAL, "share %s of device %s: compute %lld is not a percent of the "
                         "SMs (1 to 100)", a->share_id, d->name, (long long)comp);
    rec->share_id = xstrdup(a->share_id);
    rec->share_memory = (uint64_t)mem;
    rec->share_compute = (unsigned)comp;
    free(rec->cdi_id);
    rec->cdi_id = NULL; /* the caller names it with the share */
    return 0;
}

bool dra_shares_coexist(const char *a, const char *sa, const char *b, const char *sb)
{
    return sa && sb && streq(a, b) && !streq(sa, sb);
}

int dra_shares_fit(const struct inventory *inv, const struct dra_device_set *set,
                   const struct dra_checkpoint *ckpt, const struct dra_ckpt_claim *rec,
                   struct error *err)
{
    for (size_t i = 0; i < rec->n_devices; i++) {
        const struct dra_ckpt_device *want = &rec->devices[i];
        const struct dra_device *d = dra_devices_find(set, want->device);
        if (!want->share_id || !d)
            continue;
        bool first = true; /* each device once, with all of rec's shares of it */
        uint64_t mem = 0, comp = 0;
        for (size_t j = 0; j < rec->n_devices; j++) {
            const struct dra_ckpt_device *o = &rec->devices[j];
            if (o->share_id && streq(o->device, want->device)) {
                first = first && j >= i;
                mem += o->share_memory;
                comp += o->share_compute;
            }
        }
        if (!first)
            continue;
        for (size_t k = 0; k < ckpt->n_claims; k++) {
            const struct dra_ckpt_claim *cl = &ckpt->claims[k];
            if (streq(cl->uid, rec->uid))
                continue;
            for (size_t j = 0; j < cl->n_devices; j++)
                if (cl->devices[j].share_id && streq(cl->devices[j].device, want->device)) {
                    mem += cl->devices[j].share_memory;
                    comp += cl->devices[j].share_compute;
                }
        }
        struct dra_share_grid q;
        dra_share_grid(dra_device_memory(inv, d), &d->policy, &q);
        if (mem > q.capacity || comp > 100)
            return error_set(err, -ENOSPC, "device %s cannot hold share %s: its shares would take "
                             "%llu MiB of its %llu MiB and %llu%% of its SMs (a scheduler that "
                             "counted otherwise, or a forged claim)", want->device, want->share_id,
                             (unsigned long long)(mem >> 20), (unsigned long long)(q.capacity >> 20),
                             (unsigned long long)comp);
    }
    return 0;
}

static json_t *entry_named(json_t *devices, const char *name)
{
    json_t *e;
    size_t i;
    json_array_foreach (devices, i, e)
        if (streq_ptr(json_string_value(json_object_get(e, "name")), name))
            return e;
    return NULL;
}

/* A shared device of a claim: its client limit's key (the container's CUDA ordinal, by
 * its GPU's PCI bus ID, MIG devices of one GPU by UUID) and its shares' memory summed. */
struct limit {
    const char *bus_id, *uuid;
    uint64_t memory;
};

static int by_ordinal(const void *a, const void *b)
{
    const struct limit *x = a, *y = b;
    int c = strcmp(x->bus_id, y->bus_id);
    return c ? c : strcmp(x->uuid, y->uuid);
}

/* "share-" and 16 hex digits of the SHA-256 of the device's UUID: short, as the daemon's
 * socket <plugins dir>/gpu.nvidia.com/mps/<id>/pipe/control must fit a Unix socket address
 * (108 bytes) under plugins directories of k0s or MicroK8s too (the UUID itself, 47 bytes
 * with a prefix, left 27 for the directory) */
#define SHARES_MPS_PREFIX "share-"
#define SHARES_MPS_HEX 16

bool dra_shares_mps_v3(const struct inventory *inv)
{
    /* "615.44.01": the branch is the number before the first dot ("" when NVML could not
     * say: no v3, as before r615) */
    return atoi(inv->driver_version) >= DRA_SHARES_MPS_V3_DRIVER;
}

void dra_shares_mps_ns(const char *uid, const char *share_id, char out[DRA_MPS_NS_MAX])
{
    _cleanup_free_ char *key = xasprintf("%s/%s", uid, share_id);
    char hex[65];
    digest_sha256_hex(key, strlen(key), hex);
    snprintf(out, DRA_MPS_NS_MAX, "s%.16s", hex);
}

void dra_shares_mps(const struct inventory *inv, const struct dra_device *d, const char *uuid,
                    const char *uid, const struct dra_ckpt_device *share, struct dra_config *out)
{
    /* a MIG device's is NVIDIA's MigDeviceConfig with MPS: its UUID the daemon's device */
    *out = dra_config_default(d->type == DRA_DEVICE_GPU ? DRA_CONFIG_GPU : DRA_CONFIG_MIG);
    out->sharing = DRA_SHARING_MPS;
    out->mps.thread_pct = -1;
    out->mps.pinned_mib = -1;
    out->mps.n_group = 1;
    /* a UUID fits (the old MIG form "MIG-GPU-<UUID>/<GI>/<CI>" too; bounded all the same) */
    snprintf(out->mps.group[0], sizeof(out->mps.group[0]), "%.*s",
             (int)sizeof(out->mps.group[0]) - 1, uuid);
    char hex[65];
    digest_sha256_hex(uuid, strlen(uuid), hex);
    snprintf(out->mps.id, sizeof(out->mps.id), SHARES_MPS_PREFIX "%.*s", SHARES_MPS_HEX, hex);
    if (!dra_shares_mps_v3(inv))
        return;
    dra_shares_mps_ns(uid, share->share_id, out->mps.ns);
    out->mps.ns_mib = (int64_t)(share->share_memory >> 20);
    out->mps.ns_pct = (int)share->share_compute;
}

bool dra_shares_mps_id_valid(const char *id)
{
    size_t p = strlen(SHARES_MPS_PREFIX), n = strlen(id);
    return n == p + SHARES_MPS_HEX && strncmp(id, SHARES_MPS_PREFIX, p) == 0 &&
           strspn(id + p, "abcdef0123456789") == SHARES_MPS_HEX;
}

void dra_shares_spec(json_t *spec, const struct config *cfg, const struct inventory *inv,
                     const struct dra_device_set *set, const struct dra_ckpt_claim *rec)
{
    json_t *old = json_object_get(spec, "devices"), *devices = json_array();
    struct limit lim[DRA_CLAIM_MAX_RESULTS];
    size_t n_lim = 0;
    unsigned comp = 0;
    bool shares = false;

    for (size_t i = 0; i < rec->n_devices; i++) {
        const struct dra_ckpt_device *r = &rec->devices[i];
        _cleanup_free_ char *base = xasprintf("%s-%s", rec->uid, r->device);
        _cleanup_free_ char *name = r->share_id ? xasprintf("%s-%s", base, r->share_id) : xstrdup(base);
        json_t *e = entry_named(old, base);
        if (!e || entry_named(devices, name))
            continue; /* named twice (admin access): once */
        json_t *copy = json_deep_copy(e);
        json_object_set_new(copy, "name", json_string(name));
        json_array_append_new(devices, copy);
        const struct dra_device *d = dra_devices_find(set, r->device);
        /* a placement's: the MIG device made for it */
        const char *uuid = r->mig.uuid ? r->mig.uuid : d ? dra_device_uuid(inv, d) : NULL;
        if (!r->share_id || !uuid)
            continue;
        /* only where the hook was installed (at start): a hook the runtime cannot find
         * fails the container */
        char hook[PATH_MAX];
        json_t *hooks = cfg && dra_share_hook_path(cfg, hook, sizeof(hook)) == 0 && access(hook, X_OK) == 0
                            ? dra_share_hook_edits(cfg, uuid, r->share_memory)
                            : NULL;
        if (hooks) {
            json_t *ce = json_object_get(copy, "containerEdits");
            json_t *have = json_object_get(ce, "hooks");
            if (!json_is_array(have))
                json_object_set_new(ce, "hooks", json_incref(hooks));
            else
                json_array_extend(have, hooks);
            json_decref(hooks);
        }
        shares = true;
        comp = comp && comp < r->share_compute ? comp : r->share_compute;
        size_t k = 0;
        while (k < n_lim && !streq(lim[k].uuid, uuid))
            k++;
        if (k == n_lim && n_lim < DRA_CLAIM_MAX_RESULTS)
            lim[n_lim++] = (struct limit){ inv->gpus[d->gpu].bus_id, uuid, 0 };
        if (k < n_lim)
            lim[k].memory += r->share_memory;
    }
    json_object_set_new(spec, "devices", devices);
    if (!shares)
        return;
    /* the limits by each device's ordinal in the container: PCI bus order */
    qsort(lim, n_lim, sizeof(*lim), by_ordinal);
    char limits[DRA_CLAIM_MAX_RESULTS * 24] = "";
    size_t len = 0;
    for (size_t k = 0; k < n_lim; k++) {
        int w = snprintf(limits + len, sizeof(limits) - len, "%s%zu=%lluM", k ? "," : "", k,
                         (unsigned long long)(lim[k].memory >> 20));
        if (w > 0 && (size_t)w < sizeof(limits) - len)
            len += (size_t)w;
    }
    json_t *edits = json_deep_copy(json_object_get(spec, "containerEdits"));
    if (!edits)
        edits = json_object();
    json_t *env = json_object_get(edits, "env");
    if (!json_is_array(env)) {
        env = json_array();
        json_object_set_new(edits, "env", env);
    }
    json_array_append_new(env, json_string("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
    json_array_append_new(env, json_sprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s", limits));
    json_array_append_new(env, json_sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%u", comp));
    json_object_set_new(spec, "containerEdits", edits);
}
