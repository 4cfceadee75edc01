/* The simulator's MIG profile tables (A100-40GB, H100-80GB; see sim-mig.h) and
 * lookups of GPU- and compute-instance profiles by index, id and name. */

#include <stdio.h>
#include <string.h>

#include "core/macro.h"
#include "nvml/nvml-abi.h"
#include "sim-mig.h"

/* A100-SXM4-40GB / A100-PCIE-40GB: 7 compute slices, 8 memory slices. Memory sizes are
 * what the driver reports per instance (MiB), smaller than the nominal "5gb". */
static const struct sim_gi_profile a100_40gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 7, 4864, 14, 1, 0, 0, 0, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 4864, 14, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.10gb", 1, 4, 9856, 14, 1, 1, 0, 0, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 3, 9856, 28, 2, 1, 0, 0, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 2, 20096, 42, 3, 2, 0, 0, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 1, 20096, 56, 4, 2, 0, 0, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 1, 40320, 98, 7, 5, 0, 1, 1, 8 },
};

/* H100 80GB HBM3 (SXM5): same slice geometry, Hopper engine counts. */
static const struct sim_gi_profile h100_80gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 7, 9984, 16, 1, 1, 0, 1, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 9984, 16, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 4, 20096, 26, 1, 1, 0, 1, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 3, 20096, 32, 2, 2, 0, 2, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 2, 40448, 60, 3, 3, 0, 3, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 1, 40448, 64, 4, 4, 0, 4, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 1, 81152, 132, 8, 7, 0, 7, 1, 8 },
};

static const struct sim_mig_table tables[] = {
    { "A100-40GB", 7, 8, a100_40gb, ELEMENTSOF(a100_40gb) },
    { "H100-80GB", 7, 8, h100_80gb, ELEMENTSOF(h100_80gb) },
};

const struct sim_mig_table *sim_mig_table_for(const char *name)
{
    /* Matched on the marketing name so that every A100 40GB form factor (SXM4, PCIE)
     * shares one table; anything else is treated as not MIG capable. */
    if (strstr(name, "A100") && strstr(name, "40GB"))
        return &tables[0];
    if (strstr(name, "H100") && strstr(name, "80GB"))
        return &tables[1];
    return NULL;
}

const struct sim_gi_profile *sim_mig_gi_by_index(const struct sim_mig_table *t, unsigned index)
{
    for (unsigned i = 0; t && i < t->n_gis; i++)
        if (t->gis[i].index == index)
            return &t->gis[i];
    return NULL;
}

const struct sim_gi_profile *sim_mig_gi_by_id(const struct sim_mig_table *t, unsigned id)
{
    for (unsigned i = 0; t && i < t->n_gis; i++)
        if (t->gis[i].id == id)
            return &t->gis[i];
    return NULL;
}

const struct sim_gi_profile *sim_mig_gi_by_name(const struct sim_mig_table *t, const char *name)
{
    if (startswith(name, "MIG "))
        name += 4;
    for (unsigned i = 0; t && i < t->n_gis; i++)
        if (streq(t->gis[i].name, name))
            return &t->gis[i];
    return NULL;
}

/* Compute-slice counts by NVML_COMPUTE_INSTANCE_PROFILE_* index (6 and 8 slice profiles
 * and the REV1/NVL variants exist on no GPU we simulate). */
static const unsigned ci_slices_by_index[] = { 1, 2, 3, 4, 7 };

bool sim_mig_ci_profile(const struct sim_gi_profile *gi, unsigned index, struct sim_ci_profile *out)
{
    if (index >= ELEMENTSOF(ci_slices_by_index))
        return false;
    unsigned c = ci_slices_by_index[index];
    if (c > gi->slices)
        return false;
    /* A 3-slice CI only fits the 3g and 7g layouts. */
    if (c == 3 && gi->slices != 3 && gi->slices != 7)
        return false;
    *out = (struct sim_ci_profile){
        .index = index,
        .id = index,
        .slices = c,
        .instances = gi->slices / c,
        .sms = gi->sms * c / gi->slices,
    };
    if (c == gi->slices)
        snprintf(out->name, sizeof(out->name), "%s", gi->name);
    else {
        /* The CI name carries the GI's base name, without a +me style suffix. */
        size_t base = strcspn(gi->name, "+-");
        snprintf(out->name, sizeof(out->name), "%uc.%.*s", c, (int)base, gi->name);
    }
    return true;
}

bool sim_mig_ci_by_name(const struct sim_gi_profile *gi, const char *name, struct sim_ci_profile *out)
{
    if (startswith(name, "MIG "))
        name += 4;
    size_t base = strcspn(gi->name, "+-");
    for (unsigned i = 0; i < ELEMENTSOF(ci_slices_by_index); i++) {
        if (!sim_mig_ci_profile(gi, i, out))
            continue;
        if (streq(out->name, name))
            return true;
        /* "1g.5gb" names the full-GI CI of a "1g.5gb+me" GI too. */
        if (out->slices == gi->slices && strlen(name) == base && strncmp(name, gi->name, base) == 0)
            return true;
        /* Explicit "<c>c." form for a full-GI CI ("2c.2g.10gb"). */
        char full[80];
        snprintf(full, sizeof(full), "%uc.%.*s", out->slices, (int)base, gi->name);
        if (streq(full, name))
            return true;
    }
    return false;
}
