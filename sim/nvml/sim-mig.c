/* The simulator's MIG profile tables (see sim-mig.h) and
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

/* The tables below are from NVIDIA's public MIG User Guide ("Supported MIG profiles") and
 * public `nvidia-smi mig -lgip` listings as we recall them: profile names, ids, instance
 * counts and placements are as published; memory MiB, SM and engine counts are
 * approximations chosen to round to the published names (go-nvlib's rule) and are NOT
 * verified against hardware. Check with `nvidia-smi mig -lgip` / `-lgipp` before relying
 * on a figure. */

/* A100-SXM4-80GB / A100 80GB PCIe: A100-40GB geometry, twice the memory. */
static const struct sim_gi_profile a100_80gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 7, 9856, 14, 1, 0, 0, 0, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 9856, 14, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 4, 19968, 14, 1, 1, 0, 0, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 3, 19968, 28, 2, 1, 0, 0, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 2, 40192, 42, 3, 2, 0, 0, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 1, 40192, 56, 4, 2, 0, 0, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 1, 80896, 98, 7, 5, 0, 1, 1, 8 },
};

/* A30 24GB: 4 compute slices, 4 memory slices; media engines only in the +me profiles
 * and the full GPU. */
static const struct sim_gi_profile a30_24gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, "1g.6gb", 1, 4, 5836, 14, 1, 0, 0, 0, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 21, "1g.6gb+me", 1, 1, 5836, 14, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, "2g.12gb", 2, 2, 11904, 28, 2, 2, 0, 0, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, 6, "2g.12gb+me", 2, 1, 11904, 28, 2, 2, 0, 1, 1, 2 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, "4g.24gb", 4, 1, 24064, 56, 4, 4, 0, 1, 1, 4 },
};

/* H200 141GB (SXM): H100 geometry and engines. */
static const struct sim_gi_profile h200_141gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.18gb", 1, 7, 17920, 16, 1, 1, 0, 1, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.18gb+me", 1, 1, 17920, 16, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.35gb", 1, 4, 35840, 26, 1, 1, 0, 1, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.35gb", 2, 3, 35840, 32, 2, 2, 0, 2, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.71gb", 3, 2, 71680, 60, 3, 3, 0, 3, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.71gb", 4, 1, 71680, 64, 4, 4, 0, 4, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.141gb", 7, 1, 143360, 132, 8, 7, 0, 7, 1, 8 },
};

/* B200 180GB: H100 geometry, Blackwell SM counts. */
static const struct sim_gi_profile b200_180gb[] = {
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.23gb", 1, 7, 22784, 18, 1, 1, 0, 1, 0, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.23gb+me", 1, 1, 22784, 18, 1, 1, 0, 1, 1, 1 },
    { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.45gb", 1, 4, 45568, 18, 1, 1, 0, 1, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.45gb", 2, 3, 45568, 36, 2, 2, 0, 2, 0, 2 },
    { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.90gb", 3, 2, 91392, 54, 3, 3, 0, 3, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.90gb", 4, 1, 91392, 72, 4, 4, 0, 4, 0, 4 },
    { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.180gb", 7, 1, 182528, 148, 8, 7, 0, 7, 1, 8 },
};

#define TABLE(gpu, arr, compute, memory, arch) { gpu, compute, memory, arr, ELEMENTSOF(arr), arch }
static const struct sim_mig_table tables[] = {
    TABLE("A100-40GB", a100_40gb, 7, 8, NVML_DEVICE_ARCH_AMPERE),
    TABLE("H100-80GB", h100_80gb, 7, 8, NVML_DEVICE_ARCH_HOPPER),
    TABLE("A100-80GB", a100_80gb, 7, 8, NVML_DEVICE_ARCH_AMPERE),
    TABLE("A30-24GB", a30_24gb, 4, 4, NVML_DEVICE_ARCH_AMPERE),
    TABLE("H200-141GB", h200_141gb, 7, 8, NVML_DEVICE_ARCH_HOPPER),
    TABLE("B200-180GB", b200_180gb, 7, 8, NVML_DEVICE_ARCH_BLACKWELL),
};

/* "A30" as a word of the name: not "RTX A3000". */
static bool has_word(const char *name, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = strstr(name, w); p; p = strstr(p + 1, w))
        if ((p == name || p[-1] == ' ' || p[-1] == '-') && (p[n] == 0 || p[n] == ' ' || p[n] == '-'))
            return true;
    return false;
}

const struct sim_mig_table *sim_mig_table_for(const char *name)
{
    /* Matched on the marketing name so that every form factor of a model (SXM, PCIE)
     * shares one table; anything else is treated as not MIG capable. */
    if (strstr(name, "A100") && strstr(name, "40GB"))
        return &tables[0];
    if (strstr(name, "H100") && strstr(name, "80GB"))
        return &tables[1];
    if (strstr(name, "A100") && strstr(name, "80GB"))
        return &tables[2];
    if (has_word(name, "A30"))
        return &tables[3];
    if (has_word(name, "H200"))
        return &tables[4];
    if (has_word(name, "B200"))
        return &tables[5];
    return NULL;
}

const struct sim_mig_table *sim_mig_table_at(unsigned i)
{
    return i < ELEMENTSOF(tables) ? &tables[i] : NULL;
}

bool sim_mig_placement_ok(const struct sim_mig_table *t, const struct sim_gi_profile *p, unsigned start)
{
    unsigned size = p->placement_size;
    /* Aligned, inside the memory slices, and the compute slices starting at `start` exist
     * (the last memory slice has no compute slice of its own: no 1g at 7, 2g at 6, 4g at 4). */
    return start % size == 0 && start + size <= t->memory_slices && start + p->slices <= t->max_devices;
}

unsigned sim_mig_gi_id_for(const struct sim_mig_table *t, const struct sim_gi_profile *p, unsigned start)
{
    /* The hardware's swizzle id: 0 for the whole GPU, then halves, quarters, eighths of the
     * memory slices (7g → 0, 3g/4g → 1-2, 2g/1g.10gb → 3-6, 1g → 7-14 on 8 memory slices). */
    return t->memory_slices / p->placement_size - 1 + start / p->placement_size;
}

bool sim_mig_ci_placement_ok(unsigned gi_slices, unsigned ci_slices, unsigned start)
{
    unsigned align = ci_slices == 3 ? 4 : ci_slices;
    return start % align == 0 && start + ci_slices <= gi_slices;
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
