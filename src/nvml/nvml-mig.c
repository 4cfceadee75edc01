/* MIG through NVML: the devices that exist (their slots and what discovery names them
 * by) and, for DynamicMIG, the profiles a GPU offers and the creation and destruction of
 * a MIG device (see nvml.h). */
#include <stdio.h>
#include <string.h>

#include "nvml-internal.h"

int nvml_device_max_mig_count(nvml_device dev, unsigned *count, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetMaxMigDeviceCount, to_nvml(dev), count);
}

int nvml_device_mig_by_index(nvml_device dev, unsigned index, nvml_device *mig,
                             struct error *err)
{
    nvmlDevice_t d = NULL;
    int r = NVML_CALL(err, nvmlDeviceGetMigDeviceHandleByIndex, to_nvml(dev), index, &d);
    if (r == -EINVAL) /* the reference treats INVALID_ARGUMENT like an empty slot */
        r = -ENOENT;
    *mig = from_nvml(d);
    return r;
}

/* The variant of a GPU-instance profile, from the profile index that encodes it. */
static enum nvml_gi_variant gi_profile_variant(unsigned profile_index)
{
    switch (profile_index) {
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1:
        return NVML_GI_VARIANT_ME;
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
        return NVML_GI_VARIANT_ME_ALL;
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX:
    case NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX:
        return NVML_GI_VARIANT_GFX;
    case NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME:
    case NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
        return NVML_GI_VARIANT_NO_ME;
    default:
        return NVML_GI_VARIANT_PLAIN;
    }
}

int nvml_mig_info(nvml_device parent, nvml_device mig, struct nvml_mig_info *info,
                  struct error *err)
{
    nvmlDeviceAttributes_t attr;
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    nvmlGpuInstanceInfo_t gi_info;
    nvmlComputeInstanceInfo_t ci_info;
    int r;

    memset(info, 0, sizeof(*info));
    memset(&attr, 0, sizeof(attr));
    memset(&gi_info, 0, sizeof(gi_info));
    memset(&ci_info, 0, sizeof(ci_info));

    if ((r = NVML_CALL(err, nvmlDeviceGetGpuInstanceId, to_nvml(mig), &info->gi_id)) < 0 ||
        (r = NVML_CALL(err, nvmlDeviceGetComputeInstanceId, to_nvml(mig), &info->ci_id)) < 0 ||
        (r = NVML_CALL(err, nvmlDeviceGetAttributes_v2, to_nvml(mig), &attr)) < 0 ||
        (r = NVML_CALL(err, nvmlDeviceGetGpuInstanceById, to_nvml(parent), info->gi_id, &gi)) < 0 ||
        (r = NVML_CALL(err, nvmlGpuInstanceGetInfo, gi, &gi_info)) < 0 ||
        (r = NVML_CALL(err, nvmlGpuInstanceGetComputeInstanceById, gi, info->ci_id, &ci)) < 0 ||
        (r = NVML_CALL(err, nvmlComputeInstanceGetInfo_v2, ci, &ci_info)) < 0)
        return r;

    info->gi_profile_id = gi_info.profileId;
    info->placement_start = gi_info.placement.start;
    info->placement_size = gi_info.placement.size;
    info->ci_profile_id = ci_info.profileId;
    info->memory_bytes = attr.memorySizeMB << 20;
    info->multiprocessors = attr.multiprocessorCount;
    info->copy_engines = attr.sharedCopyEngineCount;
    info->decoders = attr.sharedDecoderCount;
    info->encoders = attr.sharedEncoderCount;
    info->jpegs = attr.sharedJpegCount;
    info->ofas = attr.sharedOfaCount;
    info->gi_slices = attr.gpuInstanceSliceCount;
    info->ci_slices = attr.computeInstanceSliceCount;

    /* The profile index (which carries the variant) is only found by
     * matching the instance's profile id against every profile the GPU offers. */
    bool found = false;
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT && !found; p++) {
        nvmlGpuInstanceProfileInfo_t pi;
        memset(&pi, 0, sizeof(pi));
        if (!nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo ||
            nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo(to_nvml(parent), p, &pi) != NVML_SUCCESS)
            continue;
        if (pi.id == gi_info.profileId) {
            info->gi_slices = pi.sliceCount;
            info->variant = gi_profile_variant(p);
            found = true;
        }
    }
    if (!found)
        return error_set(err, -ENOENT, "GPU instance %u: profile id %u matches no GPU instance profile",
                         info->gi_id, gi_info.profileId);
    found = false;
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT && !found; p++) {
        nvmlComputeInstanceProfileInfo_t pi;
        memset(&pi, 0, sizeof(pi));
        if (!nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo ||
            nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &pi) != NVML_SUCCESS)
            continue;
        if (pi.id == ci_info.profileId) {
            info->ci_slices = pi.sliceCount;
            found = true;
        }
    }
    if (!found)
        return error_set(err, -ENOENT,
                         "compute instance %u/%u: profile id %u matches no compute instance profile",
                         info->gi_id, info->ci_id, ci_info.profileId);
    return 0;
}

int nvml_device_architecture_id(nvml_device dev, unsigned *arch, struct error *err)
{
    nvmlDeviceArchitecture_t a = NVML_DEVICE_ARCH_UNKNOWN;
    int r = NVML_CALL(err, nvmlDeviceGetArchitecture, to_nvml(dev), &a);
    *arch = r == 0 ? (unsigned)a : 0;
    return r;
}

int nvml_device_gi_profiles(nvml_device dev, struct nvml_gi_profile *out, unsigned max,
                            unsigned *n, struct error *err)
{
    *n = 0;
    if (!nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo)
        return nvml_missing(err, "nvmlDeviceGetGpuInstanceProfileInfo");
    if (!nvml_sym.nvmlDeviceGetGpuInstancePossiblePlacements_v2)
        return nvml_missing(err, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT && *n < max; p++) {
        nvmlGpuInstanceProfileInfo_t pi;
        memset(&pi, 0, sizeof(pi));
        nvmlReturn_t r = nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo(to_nvml(dev), p, &pi);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (r != NVML_SUCCESS)
            return nvml_fail(err, "nvmlDeviceGetGpuInstanceProfileInfo", r);
        nvmlGpuInstancePlacement_t pl[NVML_MIG_MAX_PLACEMENTS * 2];
        unsigned count = ELEMENTSOF(pl);
        r = nvml_sym.nvmlDeviceGetGpuInstancePossiblePlacements_v2(to_nvml(dev), pi.id, pl, &count);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (r != NVML_SUCCESS)
            return nvml_fail(err, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", r);
        struct nvml_gi_profile *g = &out[*n];
        *g = (struct nvml_gi_profile){
            .index = p, .id = pi.id, .slices = pi.sliceCount, .instances = pi.instanceCount,
            .memory_bytes = (uint64_t)pi.memorySizeMB << 20,
            .multiprocessors = pi.multiprocessorCount, .copy_engines = pi.copyEngineCount,
            .decoders = pi.decoderCount, .encoders = pi.encoderCount, .jpegs = pi.jpegCount,
            .ofas = pi.ofaCount, .variant = gi_profile_variant(p),
        };
        /* a GPU with more placements than a MIG GPU has memory slices is not one we
         * understand: its extra placements are not offered (bounded, never overrun) */
        for (unsigned i = 0; i < count && i < ELEMENTSOF(pl) && g->n_placements < NVML_MIG_MAX_PLACEMENTS; i++)
            g->placements[g->n_placements++] = (struct nvml_placement){ pl[i].start, pl[i].size };
        if (g->n_placements)
            (*n)++;
    }
    return 0;
}

int nvml_device_mig_modes(nvml_device dev, bool *current, bool *pending, struct error *err)
{
    unsigned c = 0, p = 0;
    int r = NVML_CALL(err, nvmlDeviceGetMigMode, to_nvml(dev), &c, &p);
    *current = r == 0 && c == NVML_DEVICE_MIG_ENABLE;
    *pending = r == 0 && p == NVML_DEVICE_MIG_ENABLE;
    return r;
}

#ifndef GDP_NVML_READ_ONLY
int nvml_device_set_mig_mode(nvml_device dev, bool enable, struct error *err)
{
    nvmlReturn_t status = NVML_SUCCESS;
    int r = NVML_CALL(err, nvmlDeviceSetMigMode, to_nvml(dev),
                      enable ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &status);
    if (r < 0)
        return r;
    /* The call can succeed while the switch itself waits: both are checked (NVIDIA's
     * driver reads only one of the two, through go-nvml's swapped names). */
    if (status == NVML_ERROR_RESET_REQUIRED)
        return error_set(err, -EAGAIN, "nvmlDeviceSetMigMode: the switch waits for a GPU reset");
    return status == NVML_SUCCESS ? 0 : nvml_fail(err, "nvmlDeviceSetMigMode (activation)", status);
}
#else
int nvml_device_set_mig_mode(nvml_device dev, bool enable, struct error *err)
{
    (void)dev;
    (void)enable;
    return error_set(err, -ENOSYS, "this binary changes no GPU setting (gpu-smoke's read-only build)");
}
#endif

/* The first compute instance of gi (DynamicMIG makes exactly one) and its device's UUID;
 * -ENOENT when it has none. */
static int first_ci(nvmlGpuInstance_t gi, nvmlComputeInstance_t *ci, char *uuid, size_t len,
                    struct error *err)
{
    if (!nvml_sym.nvmlGpuInstanceGetComputeInstances)
        return nvml_missing(err, "nvmlGpuInstanceGetComputeInstances");
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        nvmlComputeInstanceProfileInfo_t pi;
        memset(&pi, 0, sizeof(pi));
        if (!nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo ||
            nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &pi) != NVML_SUCCESS)
            continue;
        nvmlComputeInstance_t cis[8];
        unsigned count = ELEMENTSOF(cis);
        if (nvml_sym.nvmlGpuInstanceGetComputeInstances(gi, pi.id, cis, &count) != NVML_SUCCESS ||
            count == 0)
            continue;
        nvmlComputeInstanceInfo_t info;
        memset(&info, 0, sizeof(info));
        int r;
        *ci = cis[0];
        if ((r = NVML_CALL(err, nvmlComputeInstanceGetInfo_v2, cis[0], &info)) < 0)
            return r;
        return NVML_CALL(err, nvmlDeviceGetUUID, info.device, uuid, (unsigned)len);
    }
    return error_set(err, -ENOENT, "no compute instance");
}

#ifndef GDP_NVML_READ_ONLY
/* The compute-instance profile index that spans a GPU instance of `slices` slices: the
 * first NVML accepts with that slice count, never 1_SLICE_REV1 (NVIDIA's driver skips it
 * too). Found on a live GPU instance: NVML answers compute profiles only there. */
static int full_ci_profile(nvmlGpuInstance_t gi, unsigned slices, nvmlComputeInstanceProfileInfo_t *out,
                           struct error *err)
{
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        if (p == NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1)
            continue;
        memset(out, 0, sizeof(*out));
        if (nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo &&
            nvml_sym.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, p, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, out) == NVML_SUCCESS &&
            out->sliceCount == slices)
            return 0;
    }
    return error_set(err, -ENOENT, "no compute instance profile spans a %u-slice GPU instance",
                     slices);
}

int nvml_mig_create(nvml_device dev, unsigned profile_index, struct nvml_placement placement,
                    struct nvml_mig_live *out, struct error *err)
{
    nvmlGpuInstanceProfileInfo_t pi;
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    nvmlGpuInstanceInfo_t gi_info;
    nvmlComputeInstanceProfileInfo_t ci_prof;
    nvmlComputeInstanceInfo_t ci_info;
    int r;

    memset(out, 0, sizeof(*out));
    memset(&pi, 0, sizeof(pi));
    memset(&gi_info, 0, sizeof(gi_info));
    memset(&ci_info, 0, sizeof(ci_info));
    if ((r = NVML_CALL(err, nvmlDeviceGetGpuInstanceProfileInfo, to_nvml(dev), profile_index, &pi)) < 0)
        return r;
    nvmlGpuInstancePlacement_t pl = { placement.start, placement.size };
    if (!nvml_sym.nvmlDeviceCreateGpuInstanceWithPlacement)
        return nvml_missing(err, "nvmlDeviceCreateGpuInstanceWithPlacement");
    nvmlReturn_t nr = nvml_sym.nvmlDeviceCreateGpuInstanceWithPlacement(to_nvml(dev), pi.id, &pl, &gi);
    if (nr != NVML_SUCCESS) {
        r = nvml_fail(err, "nvmlDeviceCreateGpuInstanceWithPlacement", nr);
        return nr == NVML_ERROR_INSUFFICIENT_RESOURCES ? error_set(err, -EBUSY, "%s", err->msg) : r;
    }
    if ((r = NVML_CALL(err, nvmlGpuInstanceGetInfo, gi, &gi_info)) < 0 ||
        (r = full_ci_profile(gi, pi.sliceCount, &ci_prof, err)) < 0 ||
        (r = NVML_CALL(err, nvmlGpuInstanceCreateComputeInstance, gi, ci_prof.id, &ci)) < 0)
        goto undo;
    if ((r = NVML_CALL(err, nvmlComputeInstanceGetInfo_v2, ci, &ci_info)) < 0 ||
        (r = NVML_CALL(err, nvmlDeviceGetUUID, ci_info.device, out->uuid, sizeof(out->uuid))) < 0) {
        (void)(nvml_sym.nvmlComputeInstanceDestroy ? nvml_sym.nvmlComputeInstanceDestroy(ci) : 0);
        goto undo;
    }
    out->gi_id = gi_info.id;
    out->ci_id = ci_info.id;
    out->gi_profile_id = gi_info.profileId;
    out->placement = (struct nvml_placement){ gi_info.placement.start, gi_info.placement.size };
    return 0;
undo:
    /* best effort: what cannot be destroyed now is found by the start-up sweep */
    (void)(nvml_sym.nvmlGpuInstanceDestroy ? nvml_sym.nvmlGpuInstanceDestroy(gi) : 0);
    return r;
}

int nvml_mig_destroy(nvml_device dev, unsigned gi_id, const char *uuid, struct error *err)
{
    nvmlGpuInstance_t gi = NULL;
    nvmlComputeInstance_t ci = NULL;
    char live[96] = "";
    int r = NVML_CALL(err, nvmlDeviceGetGpuInstanceById, to_nvml(dev), gi_id, &gi);
    if (r == -ENOENT || r == -ENOTSUP) /* gone already, or MIG mode off: nothing to destroy */
        return 0;
    if (r < 0)
        return r;
    struct error e = { 0 };
    int c = first_ci(gi, &ci, live, sizeof(live), &e);
    if (c < 0 && c != -ENOENT)
        return error_set(err, c, "%s", e.msg);
    if (uuid && *uuid && !streq(live, uuid))
        return error_set(err, -ESTALE, "GPU instance %u is %s, not %s: made by someone else",
                         gi_id, *live ? live : "a GPU instance without a compute instance", uuid);
    if (c == 0) {
        if (!nvml_sym.nvmlComputeInstanceDestroy)
            return nvml_missing(err, "nvmlComputeInstanceDestroy");
        nvmlReturn_t nr = nvml_sym.nvmlComputeInstanceDestroy(ci);
        if (nr == NVML_ERROR_IN_USE)
            return error_set(err, -EBUSY, "nvmlComputeInstanceDestroy: %s",
                             nvml_sym.nvmlErrorString(nr));
        if (nr != NVML_SUCCESS && nr != NVML_ERROR_NOT_FOUND)
            return nvml_fail(err, "nvmlComputeInstanceDestroy", nr);
    }
    if (!nvml_sym.nvmlGpuInstanceDestroy)
        return nvml_missing(err, "nvmlGpuInstanceDestroy");
    nvmlReturn_t nr = nvml_sym.nvmlGpuInstanceDestroy(gi);
    if (nr == NVML_ERROR_IN_USE)
        return error_set(err, -EBUSY, "nvmlGpuInstanceDestroy: %s", nvml_sym.nvmlErrorString(nr));
    return nr == NVML_SUCCESS || nr == NVML_ERROR_NOT_FOUND ? 0 : nvml_fail(err, "nvmlGpuInstanceDestroy", nr);
}
#else
int nvml_mig_create(nvml_device dev, unsigned profile_index, struct nvml_placement placement,
                    struct nvml_mig_live *out, struct error *err)
{
    (void)dev;
    (void)profile_index;
    (void)placement;
    memset(out, 0, sizeof(*out));
    return error_set(err, -ENOSYS, "this binary changes no GPU setting (gpu-smoke's read-only build)");
}

int nvml_mig_destroy(nvml_device dev, unsigned gi_id, const char *uuid, struct error *err)
{
    (void)dev;
    (void)gi_id;
    (void)uuid;
    return error_set(err, -ENOSYS, "this binary changes no GPU setting (gpu-smoke's read-only build)");
}
#endif

int nvml_device_mig_list(nvml_device dev, struct nvml_mig_live *out, unsigned max, unsigned *n,
                         struct error *err)
{
    *n = 0;
    if (!nvml_sym.nvmlDeviceGetGpuInstances)
        return nvml_missing(err, "nvmlDeviceGetGpuInstances");
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
        nvmlGpuInstanceProfileInfo_t pi;
        memset(&pi, 0, sizeof(pi));
        if (!nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo ||
            nvml_sym.nvmlDeviceGetGpuInstanceProfileInfo(to_nvml(dev), p, &pi) != NVML_SUCCESS)
            continue;
        nvmlGpuInstance_t gis[NVML_MIG_MAX_PLACEMENTS];
        unsigned count = ELEMENTSOF(gis);
        nvmlReturn_t nr = nvml_sym.nvmlDeviceGetGpuInstances(to_nvml(dev), pi.id, gis, &count);
        if (nr == NVML_ERROR_NOT_SUPPORTED) /* MIG mode off: none */
            return 0;
        if (nr != NVML_SUCCESS)
            return nvml_fail(err, "nvmlDeviceGetGpuInstances", nr);
        for (unsigned i = 0; i < count && i < ELEMENTSOF(gis); i++) {
            if (*n >= max)
                return error_set(err, -ENOBUFS, "more than %u MIG devices", max);
            nvmlGpuInstanceInfo_t info;
            memset(&info, 0, sizeof(info));
            int r = NVML_CALL(err, nvmlGpuInstanceGetInfo, gis[i], &info);
            if (r < 0)
                return r;
            struct nvml_mig_live *m = &out[(*n)++];
            memset(m, 0, sizeof(*m));
            m->gi_id = info.id;
            m->gi_profile_id = info.profileId;
            m->placement = (struct nvml_placement){ info.placement.start, info.placement.size };
            nvmlComputeInstance_t ci = NULL;
            struct error e = { 0 };
            if (first_ci(gis[i], &ci, m->uuid, sizeof(m->uuid), &e) == 0) {
                nvmlComputeInstanceInfo_t ci_info;
                memset(&ci_info, 0, sizeof(ci_info));
                if (NVML_CALL(&e, nvmlComputeInstanceGetInfo_v2, ci, &ci_info) == 0)
                    m->ci_id = ci_info.id;
            } else {
                m->uuid[0] = 0;
            }
        }
    }
    return 0;
}
