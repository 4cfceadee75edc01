/* MIG: modes, MIG device handles, GPU/compute instances and their profile tables. */
#include <stdio.h>
#include <string.h>

#include "sim-migstate.h"
#include "sim-state.h"

_public_ nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(currentMode);
    NONNULL(pendingMode);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    *currentMode = d->mig_mode;
    *pendingMode = d->mig_pending;
    pthread_mutex_unlock(&sim_lock);
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(count);
    *count = d->mig_table ? d->mig_table->max_devices : 0;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(migDevice);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= d->mig_table->max_devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    if (d->mig_mode == NVML_DEVICE_MIG_ENABLE && index < d->mv->n_migs) {
        *migDevice = (nvmlDevice_t)(void *)d->mv->migs[index];
        r = NVML_SUCCESS;
    }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

_public_ nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
    DEV(migDevice, SIM_ANY);
    NONNULL(device);
    if (!d->is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(void *)d->parent;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    DEV(device, SIM_ANY);
    NONNULL(isMigDevice);
    *isMigDevice = d->is_mig;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    DEV(device, SIM_QUERY);
    NONNULL(id);
    if (!d->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = d->gi->id;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    DEV(device, SIM_QUERY);
    NONNULL(id);
    if (!d->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = d->ci->id;
    return NVML_SUCCESS;
}

static nvmlReturn_t attributes(nvmlDevice_t device, nvmlDeviceAttributes_t *a)
{
    DEV(device, SIM_QUERY);
    NONNULL(a);
    if (!d->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    const struct sim_gi_profile *g = d->gi->prof;
    *a = (nvmlDeviceAttributes_t){
        .multiprocessorCount = d->ci->prof.sms,
        .sharedCopyEngineCount = g->ce,
        .sharedDecoderCount = g->dec,
        .sharedEncoderCount = g->enc,
        .sharedJpegCount = g->jpeg,
        .sharedOfaCount = g->ofa,
        .gpuInstanceSliceCount = g->slices,
        .computeInstanceSliceCount = d->ci->prof.slices,
        .memorySizeMB = g->memory_mb,
    };
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    return attributes(device, attributes_);
}
_public_ nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    return attributes(device, attributes_);
}

/* Resolve a GI profile (by index or by id) on a MIG-capable GPU. */
static nvmlReturn_t gi_profile(nvmlDevice_t device, unsigned key, bool by_id, const struct sim_gi_profile **out)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!by_id && key >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    const struct sim_gi_profile *p = by_id ? sim_mig_gi_by_id(d->mig_table, key) : sim_mig_gi_by_index(d->mig_table, key);
    if (!p)
        return by_id ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
    *out = p;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                          nvmlGpuInstanceProfileInfo_t *info)
{
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_profile(device, profile, false, &p);
    if (r)
        return r;
    NONNULL(info);
    *info = (nvmlGpuInstanceProfileInfo_t){
        .id = p->id, .isP2pSupported = 0, .sliceCount = p->slices, .instanceCount = p->instances,
        .multiprocessorCount = p->sms, .copyEngineCount = p->ce, .decoderCount = p->dec,
        .encoderCount = p->enc, .jpegCount = p->jpeg, .ofaCount = p->ofa, .memorySizeMB = p->memory_mb,
    };
    return NVML_SUCCESS;
}

/* v2 and v3 share a size but not a layout: the version word picks the one to fill. */
static nvmlReturn_t gi_profile_v(nvmlDevice_t device, unsigned key, bool by_id, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    NONNULL(info);
    if (info->version != nvmlGpuInstanceProfileInfo_v2 && info->version != nvmlGpuInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const struct sim_gi_profile *p;
    nvmlReturn_t r = gi_profile(device, key, by_id, &p);
    if (r)
        return r;
    if (info->version == nvmlGpuInstanceProfileInfo_v2) {
        *info = (nvmlGpuInstanceProfileInfo_v2_t){
            .version = nvmlGpuInstanceProfileInfo_v2, .id = p->id, .sliceCount = p->slices,
            .instanceCount = p->instances, .multiprocessorCount = p->sms, .copyEngineCount = p->ce,
            .decoderCount = p->dec, .encoderCount = p->enc, .jpegCount = p->jpeg, .ofaCount = p->ofa,
            .memorySizeMB = p->memory_mb,
        };
        snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
    } else {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)(void *)info;
        *v3 = (nvmlGpuInstanceProfileInfo_v3_t){
            .version = nvmlGpuInstanceProfileInfo_v3, .id = p->id, .sliceCount = p->slices,
            .instanceCount = p->instances, .multiprocessorCount = p->sms, .copyEngineCount = p->ce,
            .decoderCount = p->dec, .encoderCount = p->enc, .jpegCount = p->jpeg, .ofaCount = p->ofa,
            .memorySizeMB = p->memory_mb, .capabilities = 0,
        };
        snprintf(v3->name, sizeof(v3->name), "MIG %s", p->name);
    }
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                           nvmlGpuInstanceProfileInfo_v2_t *info)
{
    return gi_profile_v(device, profile, false, info);
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profileId,
                                                               nvmlGpuInstanceProfileInfo_v2_t *info)
{
    return gi_profile_v(device, profileId, true, info);
}

/* A MIG-capable GPU: returns with sim_lock held and the view refreshed, or an error
 * (NOT_SUPPORTED with MIG mode off) without it. */
nvmlReturn_t sim_mig_gpu_enter(nvmlDevice_t device, struct sim_device **out)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    if (d->mig_mode != NVML_DEVICE_MIG_ENABLE) {
        pthread_mutex_unlock(&sim_lock);
        return NVML_ERROR_NOT_SUPPORTED;
    }
    *out = d;
    return NVML_SUCCESS;
}

static nvmlReturn_t leave(nvmlReturn_t r)
{
    pthread_mutex_unlock(&sim_lock);
    return r;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_mig_gpu_enter(device, &d);
    if (r)
        return r;
    if (!count)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    const struct sim_gi_profile *p = sim_mig_gi_by_id(d->mig_table, profileId);
    if (!p)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned n = 0;
    for (unsigned g = 0; g < d->mv->n_gis; g++)
        if (d->mv->gis[g]->prof == p) {
            if (gpuInstances)
                gpuInstances[n] = (nvmlGpuInstance_t)(void *)d->mv->gis[g];
            n++;
        }
    *count = n;
    return leave(NVML_SUCCESS);
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_mig_gpu_enter(device, &d);
    if (r)
        return r;
    if (!gpuInstance)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned g = 0; g < d->mv->n_gis; g++)
        if (d->mv->gis[g]->id == id) {
            *gpuInstance = (nvmlGpuInstance_t)(void *)d->mv->gis[g];
            return leave(NVML_SUCCESS);
        }
    return leave(NVML_ERROR_NOT_FOUND);
}

static nvmlReturn_t placements(nvmlDevice_t device, unsigned profileId, nvmlGpuInstancePlacement_t *pl, unsigned *count)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(count);
    if (!d->mig_table)
        return NVML_ERROR_NOT_SUPPORTED;
    const struct sim_gi_profile *p = sim_mig_gi_by_id(d->mig_table, profileId);
    if (!p)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = 0;
    for (unsigned s = 0; s < d->mig_table->memory_slices; s++) {
        if (!sim_mig_placement_ok(d->mig_table, p, s))
            continue;
        if (pl) {
            if (n >= *count)
                return NVML_ERROR_INSUFFICIENT_SIZE;
            pl[n] = (nvmlGpuInstancePlacement_t){ s, p->placement_size };
        }
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                                    nvmlGpuInstancePlacement_t *placements_,
                                                                    unsigned int *count)
{
    return placements(device, profileId, placements_, count);
}
_public_ nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                                 nvmlGpuInstancePlacement_t *placements_,
                                                                 unsigned int *count)
{
    return placements(device, profileId, placements_, count);
}

_public_ nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    GI(gpuInstance);
    NONNULL(info);
    *info = (nvmlGpuInstanceInfo_t){
        .device = (nvmlDevice_t)(void *)gi->parent,
        .id = gi->id,
        .profileId = gi->prof->id,
        .placement = { gi->start, gi->prof->placement_size },
    };
    return NVML_SUCCESS;
}

static nvmlReturn_t ci_profile(struct sim_gi *gi, unsigned profile, unsigned eng, struct sim_ci_profile *out)
{
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || eng >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    return sim_mig_ci_profile(gi->prof, profile, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                   unsigned int engProfile,
                                                                   nvmlComputeInstanceProfileInfo_t *info)
{
    GI(gpuInstance);
    NONNULL(info);
    struct sim_ci_profile p;
    nvmlReturn_t r = ci_profile(gi, profile, engProfile, &p);
    if (r)
        return r;
    *info = (nvmlComputeInstanceProfileInfo_t){
        .id = p.id, .sliceCount = p.slices, .instanceCount = p.instances, .multiprocessorCount = p.sms,
        .sharedCopyEngineCount = gi->prof->ce, .sharedDecoderCount = gi->prof->dec,
        .sharedEncoderCount = gi->prof->enc, .sharedJpegCount = gi->prof->jpeg, .sharedOfaCount = gi->prof->ofa,
    };
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                    unsigned int engProfile,
                                                                    nvmlComputeInstanceProfileInfo_v2_t *info)
{
    GI(gpuInstance);
    NONNULL(info);
    if (info->version != nvmlComputeInstanceProfileInfo_v2 && info->version != nvmlComputeInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    struct sim_ci_profile p;
    nvmlReturn_t r = ci_profile(gi, profile, engProfile, &p);
    if (r)
        return r;
    unsigned version = info->version;
    /* v3 = v2 + a trailing capabilities word; write only what the caller's version has. */
    *info = (nvmlComputeInstanceProfileInfo_v2_t){
        .version = version, .id = p.id, .sliceCount = p.slices, .instanceCount = p.instances,
        .multiprocessorCount = p.sms, .sharedCopyEngineCount = gi->prof->ce, .sharedDecoderCount = gi->prof->dec,
        .sharedEncoderCount = gi->prof->enc, .sharedJpegCount = gi->prof->jpeg, .sharedOfaCount = gi->prof->ofa,
    };
    snprintf(info->name, sizeof(info->name), "MIG %s", p.name);
    if (version == nvmlComputeInstanceProfileInfo_v3)
        ((nvmlComputeInstanceProfileInfo_v3_t *)(void *)info)->capabilities = 0;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstances, unsigned int *count)
{
    GI(gpuInstance);
    NONNULL(count);
    unsigned n = 0;
    pthread_mutex_lock(&sim_lock);
    for (unsigned k = 0; k < gi->n_live_cis; k++)
        if (gi->live_cis[k]->prof.id == profileId) {
            if (computeInstances)
                computeInstances[n] = (nvmlComputeInstance_t)(void *)gi->live_cis[k];
            n++;
        }
    pthread_mutex_unlock(&sim_lock);
    *count = n;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                            nvmlComputeInstance_t *computeInstance)
{
    GI(gpuInstance);
    NONNULL(computeInstance);
    nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
    pthread_mutex_lock(&sim_lock);
    for (unsigned k = 0; k < gi->n_live_cis; k++)
        if (gi->live_cis[k]->id == id) {
            *computeInstance = (nvmlComputeInstance_t)(void *)gi->live_cis[k];
            r = NVML_SUCCESS;
        }
    pthread_mutex_unlock(&sim_lock);
    return r;
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t *info, bool legacy)
{
    struct sim_ci *ci;
    nvmlReturn_t r = sim_ci(h, &ci);
    if (r)
        return r;
    NONNULL(info);
    if (legacy) {
        /* Old callers pass the 24-byte layout without placement. */
        nvmlComputeInstanceInfo_legacy_t *l = (nvmlComputeInstanceInfo_legacy_t *)(void *)info;
        *l = (nvmlComputeInstanceInfo_legacy_t){
            .device = (nvmlDevice_t)(void *)ci->mig,
            .gpuInstance = (nvmlGpuInstance_t)(void *)ci->gi,
            .id = ci->id,
            .profileId = ci->prof.id,
        };
        return NVML_SUCCESS;
    }
    *info = (nvmlComputeInstanceInfo_t){
        .device = (nvmlDevice_t)(void *)ci->mig, /* the MIG device, as NVML gives it */
        .gpuInstance = (nvmlGpuInstance_t)(void *)ci->gi,
        .id = ci->id,
        .profileId = ci->prof.id,
        .placement = { ci->start, ci->prof.slices },
    };
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info, false);
}
_public_ nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info, true);
}
