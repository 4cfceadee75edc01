/* DynamicMIG's side effects (see dra-mig.h). */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "dra/dra-mig.h"
#include "node/mig.h"
#include "nvml/nvml.h"

#define LIVE_MAX 64u /* GPU instances of one GPU: 7 on every MIG GPU NVIDIA makes */

static int gpu_handle(const struct inv_gpu *g, nvml_device *dev, struct error *err)
{
    int r = nvml_device_by_uuid(g->uuid, dev, err);
    return r < 0 ? error_prefix(err, "GPU %s", g->uuid) : 0;
}

/* MIG mode off on a GPU that switches without a reset and has no MIG device left (as
 * NVIDIA's driver after each deletion): a full-GPU claim then gets a plain GPU. */
static void maybe_mig_off(const struct inv_gpu *g, nvml_device dev)
{
    struct nvml_mig_live live[LIVE_MAX];
    unsigned n = 0;
    bool current = false, pending = false;
    struct error e = { 0 };
    if (g->arch_id < NVML_ARCH_ID_HOPPER || nvml_device_mig_modes(dev, &current, &pending, &e) < 0 ||
        !current || nvml_device_mig_list(dev, live, LIVE_MAX, &n, &e) < 0 || n > 0)
        return;
    if (nvml_device_set_mig_mode(dev, false, &e) < 0)
        log_warning("GPU %s: turning MIG mode off with no MIG device left: %s", g->uuid, e.msg);
    else
        log_info("GPU %s: MIG mode off (no MIG device left)", g->uuid);
}

/* The live MIG device of profile p on g, as discovery describes an existing one. */
static void describe(const struct inv_gpu *g, const struct inv_mig_profile *p,
                     const struct nvml_mig_live *live, const char *proc_root, struct inv_mig *out)
{
    *out = (struct inv_mig){
        .gi_id = live->gi_id, .ci_id = live->ci_id, .gi_profile_id = live->gi_profile_id,
        .placement_start = live->placement.start, .placement_size = live->placement.size,
        .memory_bytes = p->memory_bytes, .multiprocessors = p->multiprocessors,
        .gi_slices = p->slices, .ci_slices = p->slices, .copy_engines = p->copy_engines,
        .decoders = p->decoders, .encoders = p->encoders, .jpegs = p->jpegs, .ofas = p->ofas,
    };
    snprintf(out->uuid, sizeof(out->uuid), "%s", live->uuid);
    snprintf(out->profile, sizeof(out->profile), "%s", p->name);
    mig_resolve_caps(proc_root, g->minor, out);
}

int dra_mig_create(const struct inventory *inv, const struct dra_device *d, const char *proc_root,
                   struct inv_mig *out, struct error *err)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    const struct inv_mig_profile *p = &g->mig_profiles[d->mig];
    const struct inv_placement *pl = &p->placements[d->placement];
    nvml_device dev;
    bool current = false, pending = false;
    int r;

    memset(out, 0, sizeof(*out));
    if ((r = gpu_handle(g, &dev, err)) < 0)
        return r;
    if ((r = nvml_device_mig_modes(dev, &current, &pending, err)) < 0)
        return error_prefix(err, "GPU %s: reading MIG mode", g->uuid);
    if (!current) {
        /* never on Ampere: its switch waits for a reset, and it takes part only with MIG
         * mode already on (dra_mig_gpu_dynamic) */
        if (g->arch_id < NVML_ARCH_ID_HOPPER)
            return error_set(err, -EOPNOTSUPP, "GPU %s: MIG mode is off and switching it needs a "
                             "GPU reset on this architecture", g->uuid);
        if ((r = nvml_device_set_mig_mode(dev, true, err)) < 0)
            return error_prefix(err, "error enabling MIG mode for device gpu-%u-%s", g->minor, g->uuid);
        log_info("GPU %s: MIG mode on (first MIG device)", g->uuid);
    }
    struct nvml_mig_live live;
    r = nvml_mig_create(dev, p->index, (struct nvml_placement){ pl->start, pl->size }, &live, err);
    if (r < 0) {
        if (!current)
            maybe_mig_off(g, dev);
        return error_prefix(err, "error creating MIG device '%s'", d->name);
    }
    describe(g, p, &live, proc_root, out);
    return 0;
}

int dra_mig_destroy(const struct inv_gpu *gpu, unsigned gi_id, const char *uuid, struct error *err)
{
    nvml_device dev;
    int r = gpu_handle(gpu, &dev, err);
    if (r < 0)
        return r;
    r = nvml_mig_destroy(dev, gi_id, uuid, err);
    if (r == -ESTALE) {
        /* not ours any more: someone destroyed ours and made another there */
        log_warning("GPU %s: %s; leaving it", gpu->uuid, err->msg);
        r = 0;
    }
    if (r < 0)
        return error_prefix(err, "error deleting MIG device %s", uuid ? uuid : "");
    maybe_mig_off(gpu, dev);
    return 0;
}

/* The live MIG device of g at the placement of `device`'s profile and start, or -ENOENT. */
static int find_live(const struct inv_gpu *g, nvml_device dev, const struct dra_device *d,
                     struct nvml_mig_live *out, struct error *err)
{
    struct nvml_mig_live live[LIVE_MAX];
    unsigned n = 0;
    int r = nvml_device_mig_list(dev, live, LIVE_MAX, &n, err);
    if (r < 0)
        return r;
    const struct inv_mig_profile *p = &g->mig_profiles[d->mig];
    for (unsigned i = 0; i < n; i++)
        if (live[i].gi_profile_id == p->id && live[i].placement.start == p->placements[d->placement].start) {
            *out = live[i];
            return 0;
        }
    return -ENOENT;
}

/* The live MIG device at placement d of inv (its GPU's handle in *dev): 0, -ENOENT (err
 * untouched), or -errno (err). */
static int live_at(const struct inventory *inv, const struct dra_device *d, nvml_device *dev,
                   struct nvml_mig_live *live, struct error *err)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    int r = gpu_handle(g, dev, err);
    if (r < 0)
        return r;
    r = find_live(g, *dev, d, live, err);
    return r < 0 && r != -ENOENT ? error_prefix(err, "GPU %s: listing MIG devices", g->uuid) : r;
}

int dra_mig_find(const struct inventory *inv, const struct dra_device *d, const char *uuid,
                 const char *proc_root, struct inv_mig *out, struct error *err)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    nvml_device dev;
    struct nvml_mig_live live;
    int r = live_at(inv, d, &dev, &live, err);
    if (r == -ENOENT || (r == 0 && !streq(live.uuid, uuid)))
        return error_set(err, -ENOENT, "MIG device %s of %s is gone", uuid, d->name);
    if (r < 0)
        return r;
    describe(g, &g->mig_profiles[d->mig], &live, proc_root, out);
    return 0;
}

int dra_mig_rollback(const struct inventory *inv, const struct dra_device_set *set,
                     const char *device, struct error *err)
{
    const struct dra_device *d = dra_devices_find(set, device);
    if (!d || d->type != DRA_DEVICE_MIG_PLACEMENT)
        return 0;
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    nvml_device dev;
    struct nvml_mig_live live;
    int r = live_at(inv, d, &dev, &live, err);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    log_info("GPU %s: destroying MIG device %s (GPU instance %u) of an unfinished prepare of %s",
             g->uuid, *live.uuid ? live.uuid : "without a compute instance", live.gi_id, device);
    return dra_mig_destroy(g, live.gi_id, live.uuid, err);
}

/* Whether a record of ckpt in `state` names the placement `name` (and, for a completed
 * one, the live device's UUID when it recorded one). */
static bool named(const struct dra_checkpoint *ckpt, const char *name, const char *uuid,
                  enum dra_ckpt_state state)
{
    for (size_t i = 0; i < ckpt->n_claims; i++) {
        const struct dra_ckpt_claim *cl = &ckpt->claims[i];
        if (cl->state != state)
            continue;
        for (size_t j = 0; j < cl->n_devices; j++) {
            const struct dra_ckpt_device *d = &cl->devices[j];
            if (streq(d->device, name) &&
                (state != DRA_CKPT_PREPARE_COMPLETED || !d->mig.uuid || streq(d->mig.uuid, uuid)))
                return true;
        }
    }
    return false;
}

static void sweep_gpu(const struct inventory *inv, const struct dra_device_set *set, size_t gi,
                      const struct dra_checkpoint *ckpt)
{
    const struct inv_gpu *g = &inv->gpus[gi];
    nvml_device dev;
    struct error e = { 0 };
    struct nvml_mig_live live[LIVE_MAX];
    unsigned n = 0;
    if (gpu_handle(g, &dev, &e) < 0 || nvml_device_mig_list(dev, live, LIVE_MAX, &n, &e) < 0) {
        log_warning("DynamicMIG: GPU %s: cannot look for MIG devices a killed run left: %s",
                    g->uuid, e.msg);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        /* its name, as the placement it sits at */
        const char *name = NULL;
        for (size_t k = 0; k < set->n && !name; k++) {
            const struct dra_device *d = &set->devices[k];
            if (d->type == DRA_DEVICE_MIG_PLACEMENT && d->gpu == gi &&
                g->mig_profiles[d->mig].id == live[i].gi_profile_id &&
                g->mig_profiles[d->mig].placements[d->placement].start == live[i].placement.start)
                name = d->name;
        }
        if (name && named(ckpt, name, live[i].uuid, DRA_CKPT_PREPARE_COMPLETED))
            continue; /* a prepared claim's */
        if (!name || !named(ckpt, name, live[i].uuid, DRA_CKPT_PREPARE_STARTED)) {
            log_warning("DynamicMIG: GPU %s has MIG device %s (GPU instance %u, memory slices "
                        "%u-%u) that no claim of this plugin made; leaving it (placements that "
                        "overlap it fail to prepare until it is gone)", g->uuid,
                        *live[i].uuid ? live[i].uuid : "without a compute instance", live[i].gi_id,
                        live[i].placement.start, live[i].placement.start + live[i].placement.size - 1);
            continue;
        }
        log_info("DynamicMIG: GPU %s: destroying MIG device %s (%s) of a prepare that never "
                 "finished", g->uuid, *live[i].uuid ? live[i].uuid : "without a compute instance", name);
        if (dra_mig_destroy(g, live[i].gi_id, live[i].uuid, &e) < 0)
            log_warning("DynamicMIG: GPU %s: %s", g->uuid, e.msg);
    }
    maybe_mig_off(g, dev);
}

void dra_mig_sweep(const struct inventory *inv, const struct dra_device_set *set,
                   const struct dra_checkpoint *ckpt)
{
    for (size_t i = 0; i < inv->n_gpus; i++)
        if (dra_mig_gpu_dynamic(&inv->gpus[i]) && !inv->gpus[i].lost)
            sweep_gpu(inv, set, i, ckpt);
}
