/* MIG at run time: nvmlDeviceSetMigMode, creating and destroying GPU and compute
 * instances, remaining capacities, compute-instance placements, and the control
 * commands `busy` and `reset`. The state lives in sim-migstate.c (shared between
 * processes with MOCK_NVML_STATE); every mutation runs between sim_ms_begin() and
 * sim_ms_commit()/sim_ms_abort() under sim_lock. */
#include <stdio.h>
#include <string.h>

#include "sim-migstate.h"
#include "sim-state.h"

/* Not in the project's NVML declarations (no caller of ours uses it). */
nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                                 nvmlComputeInstancePlacement_t *placements,
                                                                 unsigned int *count);

static nvmlReturn_t abort_with(nvmlReturn_t r)
{
    sim_ms_abort();
    pthread_mutex_unlock(&sim_lock);
    return r;
}

static nvmlReturn_t done(struct sim_device *gpu)
{
    sim_ms_commit(gpu);
    pthread_mutex_unlock(&sim_lock);
    return NVML_SUCCESS;
}

static unsigned gi_mask(const struct sim_gi_profile *p, unsigned start)
{
    return ((1u << p->placement_size) - 1) << start;
}

/* The engines of the whole GPU: the budget the GIs share. */
static const struct sim_gi_profile *full_profile(const struct sim_mig_table *t)
{
    const struct sim_gi_profile *f = &t->gis[0];
    for (unsigned i = 1; i < t->n_gis; i++)
        if (t->gis[i].slices > f->slices)
            f = &t->gis[i];
    return f;
}

/* Does a GI of `p` fit at `start` next to the GIs of `r`? NVML_SUCCESS, or
 * INSUFFICIENT_RESOURCES: placement occupied, compute slices, instance count or engines
 * used up. */
static nvmlReturn_t gi_fits(const struct sim_mig_table *t, const struct sim_ms_gpu *r, const struct sim_gi_profile *p,
                            unsigned start)
{
    const struct sim_gi_profile *f = full_profile(t);
    unsigned mem = 0, slices = p->slices, same = 1;
    unsigned ce = p->ce, dec = p->dec, enc = p->enc, jpeg = p->jpeg, ofa = p->ofa;
    if (r->n_gi >= SIM_MS_MAX_GI)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (unsigned g = 0; g < r->n_gi; g++) {
        const struct sim_gi_profile *q = sim_mig_gi_by_id(t, r->gi[g].profile);
        if (!q)
            continue;
        mem |= gi_mask(q, r->gi[g].start);
        slices += q->slices;
        same += q == p;
        ce += q->ce, dec += q->dec, enc += q->enc, jpeg += q->jpeg, ofa += q->ofa;
    }
    if ((mem & gi_mask(p, start)) || slices > t->max_devices || same > p->instances || ce > f->ce ||
        dec > f->dec || enc > f->enc || jpeg > f->jpeg || ofa > f->ofa)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

/* First valid placement of `p` that fits, or -1. */
static int first_gi_start(const struct sim_mig_table *t, const struct sim_ms_gpu *r, const struct sim_gi_profile *p)
{
    for (unsigned s = 0; s < t->memory_slices; s++)
        if (sim_mig_placement_ok(t, p, s) && gi_fits(t, r, p, s) == NVML_SUCCESS)
            return (int)s;
    return -1;
}

static struct sim_ms_gi *rec_gi(struct sim_ms_gpu *r, uint64_t serial)
{
    for (unsigned g = 0; g < r->n_gi; g++)
        if (r->gi[g].serial == serial)
            return &r->gi[g];
    return NULL;
}

_public_ nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus)
{
    DEV(device, SIM_GPU_ONLY);
    NONNULL(activationStatus);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    if (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&sim_lock);
    struct sim_ms_gpu *r = sim_ms_begin(d);
    if (d->settings_error != NVML_SUCCESS)
        return abort_with(d->settings_error);
    if (r->n_gi || r->busy)
        return abort_with(NVML_ERROR_IN_USE);
    unsigned arch = sim_ms_arch(d);
    if (arch >= NVML_DEVICE_ARCH_HOPPER && arch != NVML_DEVICE_ARCH_UNKNOWN) {
        /* Hopper and later: the change takes effect at once. */
        r->mode_current = r->mode_pending = mode;
        *activationStatus = NVML_SUCCESS;
    } else {
        /* Ampere: pending until the GPU is reset (control command `reset`). */
        r->mode_pending = mode;
        *activationStatus = mode == r->mode_current ? NVML_SUCCESS : NVML_ERROR_RESET_REQUIRED;
    }
    done(d);
    sim_settings_log("nvmlDeviceSetMigMode", d, mode);
    return NVML_SUCCESS;
}

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned profileId, const nvmlGpuInstancePlacement_t *pl,
                              nvmlGpuInstance_t *out)
{
    DEV(device, SIM_GPU_ONLY);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    NONNULL(out);
    const struct sim_mig_table *t = d->mig_table;
    const struct sim_gi_profile *p = sim_mig_gi_by_id(t, profileId);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (pl && (pl->size != p->placement_size || !sim_mig_placement_ok(t, p, pl->start)))
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&sim_lock);
    struct sim_ms_gpu *r = sim_ms_begin(d);
    if (r->mode_current != NVML_DEVICE_MIG_ENABLE)
        return abort_with(NVML_ERROR_NOT_SUPPORTED);
    if (d->settings_error != NVML_SUCCESS)
        return abort_with(d->settings_error);
    int start = pl ? (int)pl->start : first_gi_start(t, r, p);
    if (start < 0 || gi_fits(t, r, p, (unsigned)start) != NVML_SUCCESS)
        return abort_with(NVML_ERROR_INSUFFICIENT_RESOURCES);
    /* The hardware's id for the placement; a profile's static GI may hold it under
     * another placement: then the lowest free id. */
    unsigned id = sim_mig_gi_id_for(t, p, (unsigned)start), taken = 0;
    for (unsigned g = 0; g < r->n_gi; g++)
        taken |= 1u << r->gi[g].id;
    for (unsigned k = 0; taken & (1u << id); k++)
        id = k;
    uint64_t serial = sim_ms_serial();
    r->gi[r->n_gi++] = (struct sim_ms_gi){ .id = id, .profile = p->id, .start = (unsigned)start, .serial = serial };
    sim_ms_commit(d);
    nvmlReturn_t ret = NVML_ERROR_UNKNOWN;
    for (unsigned g = 0; g < d->mv->n_gis; g++)
        if (d->mv->gis[g]->serial == serial) {
            *out = (nvmlGpuInstance_t)(void *)d->mv->gis[g];
            ret = NVML_SUCCESS;
        }
    pthread_mutex_unlock(&sim_lock);
    return ret;
}

_public_ nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstance)
{
    return create_gi(device, profileId, NULL, gpuInstance);
}

_public_ nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                               const nvmlGpuInstancePlacement_t *placement,
                                                               nvmlGpuInstance_t *gpuInstance)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return create_gi(device, profileId, placement, gpuInstance);
}

_public_ nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    GI(gpuInstance);
    struct sim_device *d = gi->parent;
    pthread_mutex_lock(&sim_lock);
    struct sim_ms_gpu *r = sim_ms_begin(d);
    struct sim_ms_gi *rg = rec_gi(r, gi->serial);
    if (!rg)
        return abort_with(NVML_ERROR_NOT_FOUND);
    if (d->settings_error != NVML_SUCCESS)
        return abort_with(d->settings_error);
    if (rg->n_ci)
        return abort_with(NVML_ERROR_IN_USE);
    unsigned g = (unsigned)(rg - r->gi);
    memmove(&r->gi[g], &r->gi[g + 1], (r->n_gi - g - 1) * sizeof(r->gi[0]));
    r->n_gi--;
    memset(&r->gi[r->n_gi], 0, sizeof(r->gi[0]));
    return done(d);
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                                unsigned int *count)
{
    struct sim_device *d;
    nvmlReturn_t ret = sim_mig_gpu_enter(device, &d);
    if (ret)
        return ret;
    const struct sim_gi_profile *p = sim_mig_gi_by_id(d->mig_table, profileId);
    if (!count || !p) {
        pthread_mutex_unlock(&sim_lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    /* How many more fit, placed first-free one after the other. */
    struct sim_ms_gpu r = *sim_ms_record(d);
    unsigned n = 0;
    int s;
    while ((s = first_gi_start(d->mig_table, &r, p)) >= 0) {
        r.gi[r.n_gi++] = (struct sim_ms_gi){ .profile = p->id, .start = (unsigned)s };
        n++;
    }
    pthread_mutex_unlock(&sim_lock);
    *count = n;
    return NVML_SUCCESS;
}

/* ---- compute instances */

static nvmlReturn_t ci_prof(const struct sim_gi *gi, unsigned profileId, struct sim_ci_profile *out)
{
    if (profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    return sim_mig_ci_profile(gi->prof, profileId, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t ci_fits(const struct sim_gi *gi, const struct sim_ms_gi *rg, const struct sim_ci_profile *p,
                            unsigned start)
{
    unsigned used = 0, same = 1;
    if (rg->n_ci >= SIM_MS_MAX_CI)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (unsigned c = 0; c < rg->n_ci; c++) {
        struct sim_ci_profile q;
        if (!sim_mig_ci_profile(gi->prof, rg->ci[c].profile, &q))
            continue;
        used |= ((1u << q.slices) - 1) << rg->ci[c].start;
        same += q.id == p->id;
    }
    if ((used & (((1u << p->slices) - 1) << start)) || same > p->instances)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    return NVML_SUCCESS;
}

static int first_ci_start(const struct sim_gi *gi, const struct sim_ms_gi *rg, const struct sim_ci_profile *p)
{
    for (unsigned s = 0; s < gi->prof->slices; s++)
        if (sim_mig_ci_placement_ok(gi->prof->slices, p->slices, s) && ci_fits(gi, rg, p, s) == NVML_SUCCESS)
            return (int)s;
    return -1;
}

static nvmlReturn_t create_ci(nvmlGpuInstance_t h, unsigned profileId, const nvmlComputeInstancePlacement_t *pl,
                              nvmlComputeInstance_t *out)
{
    GI(h);
    NONNULL(out);
    struct sim_ci_profile p;
    nvmlReturn_t ret = ci_prof(gi, profileId, &p);
    if (ret)
        return ret;
    if (pl && (pl->size != p.slices || !sim_mig_ci_placement_ok(gi->prof->slices, p.slices, pl->start)))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_device *d = gi->parent;
    pthread_mutex_lock(&sim_lock);
    struct sim_ms_gpu *r = sim_ms_begin(d);
    struct sim_ms_gi *rg = rec_gi(r, gi->serial);
    if (!rg)
        return abort_with(NVML_ERROR_NOT_FOUND);
    if (d->settings_error != NVML_SUCCESS)
        return abort_with(d->settings_error);
    int start = pl ? (int)pl->start : first_ci_start(gi, rg, &p);
    if (start < 0 || ci_fits(gi, rg, &p, (unsigned)start) != NVML_SUCCESS)
        return abort_with(NVML_ERROR_INSUFFICIENT_RESOURCES);
    unsigned id = 0, taken = 0;
    for (unsigned c = 0; c < rg->n_ci; c++)
        taken |= 1u << rg->ci[c].id;
    while (taken & (1u << id))
        id++;
    struct sim_ms_ci *rc = &rg->ci[rg->n_ci++];
    *rc = (struct sim_ms_ci){ .id = id, .profile = p.id, .start = (unsigned)start, .serial = sim_ms_serial() };
    sim_ms_new_uuid(d, rg->id, id, rc->serial, rc->uuid, sizeof(rc->uuid));
    uint64_t serial = rc->serial;
    sim_ms_commit(d);
    ret = NVML_ERROR_UNKNOWN;
    for (unsigned c = 0; c < gi->n_live_cis; c++)
        if (gi->live_cis[c]->serial == serial) {
            *out = (nvmlComputeInstance_t)(void *)gi->live_cis[c];
            ret = NVML_SUCCESS;
        }
    pthread_mutex_unlock(&sim_lock);
    return ret;
}

_public_ nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                           nvmlComputeInstance_t *computeInstance)
{
    return create_ci(gpuInstance, profileId, NULL, computeInstance);
}

_public_ nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance,
                                                                        unsigned int profileId,
                                                                        const nvmlComputeInstancePlacement_t *placement,
                                                                        nvmlComputeInstance_t *computeInstance)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return create_ci(gpuInstance, profileId, placement, computeInstance);
}

_public_ nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    CI(computeInstance);
    struct sim_device *d = ci->gi->parent;
    pthread_mutex_lock(&sim_lock);
    struct sim_ms_gpu *r = sim_ms_begin(d);
    struct sim_ms_gi *rg = rec_gi(r, ci->gi->serial);
    unsigned c = 0;
    while (rg && c < rg->n_ci && rg->ci[c].serial != ci->serial)
        c++;
    if (!rg || c == rg->n_ci)
        return abort_with(NVML_ERROR_NOT_FOUND);
    if (d->settings_error != NVML_SUCCESS)
        return abort_with(d->settings_error);
    if (rg->ci[c].busy)
        return abort_with(NVML_ERROR_IN_USE);
    memmove(&rg->ci[c], &rg->ci[c + 1], (rg->n_ci - c - 1) * sizeof(rg->ci[0]));
    rg->n_ci--;
    memset(&rg->ci[rg->n_ci], 0, sizeof(rg->ci[0]));
    return done(d);
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                         unsigned int profileId, unsigned int *count)
{
    GI(gpuInstance);
    NONNULL(count);
    struct sim_ci_profile p;
    if (!sim_mig_ci_profile(gi->prof, profileId, &p))
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    const struct sim_ms_gpu *r = sim_ms_record(gi->parent);
    unsigned n = 0;
    for (unsigned g = 0; g < r->n_gi; g++)
        if (r->gi[g].serial == gi->serial) {
            struct sim_ms_gi rg = r->gi[g];
            int s;
            while ((s = first_ci_start(gi, &rg, &p)) >= 0) {
                rg.ci[rg.n_ci++] = (struct sim_ms_ci){ .profile = p.id, .start = (unsigned)s };
                n++;
            }
        }
    pthread_mutex_unlock(&sim_lock);
    *count = n;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance,
                                                                          unsigned int profileId,
                                                                          nvmlComputeInstancePlacement_t *placements,
                                                                          unsigned int *count)
{
    GI(gpuInstance);
    NONNULL(count);
    struct sim_ci_profile p;
    nvmlReturn_t ret = ci_prof(gi, profileId, &p);
    if (ret)
        return ret;
    unsigned n = 0;
    for (unsigned s = 0; s < gi->prof->slices; s++) {
        if (!sim_mig_ci_placement_ok(gi->prof->slices, p.slices, s))
            continue;
        if (placements) {
            if (n >= *count)
                return NVML_ERROR_INSUFFICIENT_SIZE;
            placements[n] = (nvmlComputeInstancePlacement_t){ s, p.slices };
        }
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

/* ---- control commands */

const char *sim_mig_set_busy_locked(struct sim_device *d, bool busy)
{
    struct sim_device *gpu = d->is_mig ? d->parent : d;
    if (!gpu->mv)
        return "not a MIG-capable GPU or a MIG device";
    struct sim_ms_gpu *r = sim_ms_begin(gpu);
    if (!d->is_mig) {
        r->busy = busy;
    } else {
        struct sim_ms_gi *rg = rec_gi(r, d->gi->serial);
        unsigned c = 0;
        while (rg && c < rg->n_ci && rg->ci[c].serial != d->ci->serial)
            c++;
        if (!rg || c == rg->n_ci) {
            sim_ms_abort();
            return "the MIG device is gone";
        }
        rg->ci[c].busy = busy;
    }
    sim_ms_commit(gpu);
    return NULL;
}

const char *sim_mig_reset_locked(struct sim_device *gpu)
{
    if (gpu->is_mig || !gpu->mv)
        return "not a MIG-capable GPU";
    struct sim_ms_gpu *r = sim_ms_begin(gpu);
    if (r->n_gi) {
        sim_ms_abort();
        return "GPU instances exist";
    }
    r->mode_current = r->mode_pending;
    sim_ms_commit(gpu);
    return NULL;
}
