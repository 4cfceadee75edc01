/* The simulator's MIG profile tables (sim/nvml/sim-mig.c), checked directly: lookup by
 * device name, placements (aligned, disjoint, enough for the instance count), the
 * hardware GI ids, the budgets a full set of instances of each profile needs, and names
 * that round (go-nvlib's rule) to the memory figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml/nvml-abi.h"
#include "sim-mig.h"

static int failures;
#define EXPECT(c, ...)                                                                \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #c);                   \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            failures++;                                                               \
        }                                                                             \
    } while (0)

/* Memory of the whole GPU as nvidia-smi reports it (MiB), for the name check. */
static const struct {
    const char *table;
    double total_mib;
} totals[] = {
    { "A100-40GB", 40960 }, { "H100-80GB", 81920 }, { "A100-80GB", 81920 },
    { "A30-24GB", 24576 },  { "H200-141GB", 143771 }, { "B200-180GB", 183359 },
};

static void check_table(const struct sim_mig_table *t)
{
    const struct sim_gi_profile *full = NULL;
    double total = 0;
    for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++)
        if (!strcmp(totals[i].table, t->gpu))
            total = totals[i].total_mib;
    EXPECT(total > 0, "%s: no total memory known", t->gpu);
    EXPECT(t->max_devices == 7 || t->max_devices == 4, "%s", t->gpu);
    EXPECT(t->memory_slices == 8 || t->memory_slices == 4, "%s", t->gpu);
    for (unsigned i = 0; i < t->n_gis; i++)
        if (!full || t->gis[i].slices > full->slices)
            full = &t->gis[i];
    EXPECT(full->slices == t->max_devices && full->placement_size == t->memory_slices && full->instances == 1,
           "%s: full profile %s", t->gpu, full->name);
    unsigned seen_ids[16] = { 0 };
    for (unsigned i = 0; i < t->n_gis; i++) {
        const struct sim_gi_profile *p = &t->gis[i];
        EXPECT(p->index < NVML_GPU_INSTANCE_PROFILE_COUNT, "%s %s", t->gpu, p->name);
        EXPECT(sim_mig_gi_by_id(t, p->id) == p && sim_mig_gi_by_index(t, p->index) == p, "%s %s: id/index unique",
               t->gpu, p->name);
        EXPECT(sim_mig_gi_by_name(t, p->name) == p, "%s %s", t->gpu, p->name);
        /* Placements: aligned, inside, pairwise disjoint, and enough of them. */
        unsigned starts[8], n = 0;
        for (unsigned s = 0; s < t->memory_slices; s++)
            if (sim_mig_placement_ok(t, p, s))
                starts[n++] = s;
        EXPECT(n >= 1 && n >= p->instances, "%s %s: %u placements for %u instances", t->gpu, p->name, n,
               p->instances);
        for (unsigned a = 0; a + 1 < n; a++)
            EXPECT(starts[a] + p->placement_size <= starts[a + 1], "%s %s: placements overlap", t->gpu, p->name);
        /* All instances at once fit the compute slices and the engines of the full GPU. */
        unsigned k = p->instances;
        EXPECT(k * p->slices <= t->max_devices && k * p->placement_size <= t->memory_slices, "%s %s: %u do not fit",
               t->gpu, p->name, k);
        EXPECT(k * p->ce <= full->ce && k * p->dec <= full->dec && k * p->enc <= full->enc &&
                   k * p->jpeg <= full->jpeg && k * p->ofa <= full->ofa,
               "%s %s: engines of %u instances exceed the GPU's", t->gpu, p->name, k);
        EXPECT(p->memory_mb * (t->memory_slices / p->placement_size) <= total + 1, "%s %s: memory", t->gpu, p->name);
        EXPECT(p->sms > 0 && p->sms <= full->sms, "%s %s: SMs", t->gpu, p->name);
        /* GI ids: the swizzle id, 0..14, one per (size, start). */
        for (unsigned a = 0; a < n; a++) {
            unsigned id = sim_mig_gi_id_for(t, p, starts[a]);
            EXPECT(id < 15, "%s %s: GI id %u", t->gpu, p->name, id);
            if (id < 15) {
                unsigned key = (p->placement_size << 8) | starts[a];
                EXPECT(!seen_ids[id] || seen_ids[id] == key, "%s %s: GI id %u for two placements", t->gpu, p->name,
                       id);
                seen_ids[id] = key;
            }
        }
        /* "<G>g.<GB>gb": GB = round(ceil(mem / total * 8) / 8 * ceil(total GiB)) (go-nvlib). */
        unsigned g, gb;
        EXPECT(sscanf(p->name, "%ug.%ugb", &g, &gb) == 2 && g == p->slices, "%s %s: name", t->gpu, p->name);
        double want = round(ceil(p->memory_mb / total * 8) / 8 * ceil(total / 1024));
        EXPECT((unsigned)want == gb, "%s %s: %u MiB rounds to %.0fgb", t->gpu, p->name, p->memory_mb, want);
        /* CI profiles: the full-GI one exists and fits. */
        struct sim_ci_profile ci;
        bool full_ci = false;
        for (unsigned c = 0; c < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; c++)
            if (sim_mig_ci_profile(p, c, &ci)) {
                EXPECT(ci.instances * ci.slices <= p->slices, "%s %s CI %s", t->gpu, p->name, ci.name);
                unsigned places = 0;
                for (unsigned s = 0; s < p->slices; s++)
                    places += sim_mig_ci_placement_ok(p->slices, ci.slices, s);
                EXPECT(places >= ci.instances, "%s %s CI %s: %u placements", t->gpu, p->name, ci.name, places);
                full_ci |= ci.slices == p->slices;
            }
        EXPECT(full_ci, "%s %s: no full-GI compute profile", t->gpu, p->name);
    }
}

int main(void)
{
    static const struct {
        const char *name, *table;
    } names[] = {
        { "NVIDIA A100-SXM4-40GB", "A100-40GB" }, { "NVIDIA A100-PCIE-40GB", "A100-40GB" },
        { "NVIDIA A100-SXM4-80GB", "A100-80GB" }, { "NVIDIA A100 80GB PCIe", "A100-80GB" },
        { "NVIDIA A30", "A30-24GB" },             { "NVIDIA RTX A3000", NULL },
        { "NVIDIA H100 80GB HBM3", "H100-80GB" }, { "NVIDIA H100 PCIe", NULL },
        { "NVIDIA H200", "H200-141GB" },          { "NVIDIA H200 NVL", "H200-141GB" },
        { "NVIDIA B200", "B200-180GB" },          { "Tesla T4", NULL },
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct sim_mig_table *t = sim_mig_table_for(names[i].name);
        EXPECT(names[i].table ? t && !strcmp(t->gpu, names[i].table) : !t, "%s", names[i].name);
    }
    unsigned n = 0;
    for (const struct sim_mig_table *t; (t = sim_mig_table_at(n)); n++)
        check_table(t);
    EXPECT(n == 6, "%u tables", n);
    /* The published placements of the brief (A100/H100 and A30). */
    const struct sim_mig_table *a100 = sim_mig_table_for("NVIDIA A100-SXM4-40GB");
    const struct sim_mig_table *a30 = sim_mig_table_for("NVIDIA A30");
    static const struct {
        const char *table, *profile;
        unsigned mask; /* valid starts */
    } want[] = {
        { "a100", "1g.5gb", 0x7f },  { "a100", "1g.5gb+me", 0x7f }, { "a100", "1g.10gb", 0x55 },
        { "a100", "2g.10gb", 0x15 }, { "a100", "3g.20gb", 0x11 },   { "a100", "4g.20gb", 0x01 },
        { "a100", "7g.40gb", 0x01 }, { "a30", "1g.6gb", 0x0f },     { "a30", "1g.6gb+me", 0x0f },
        { "a30", "2g.12gb", 0x05 },  { "a30", "2g.12gb+me", 0x05 }, { "a30", "4g.24gb", 0x01 },
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct sim_mig_table *t = want[i].table[1] == '1' ? a100 : a30;
        const struct sim_gi_profile *p = sim_mig_gi_by_name(t, want[i].profile);
        unsigned mask = 0;
        for (unsigned s = 0; p && s < t->memory_slices; s++)
            mask |= (unsigned)sim_mig_placement_ok(t, p, s) << s;
        EXPECT(p && mask == want[i].mask, "%s %s: placements 0x%x", t->gpu, want[i].profile, mask);
    }
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures != 0;
}
