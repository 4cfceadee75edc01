#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/macro.h"
#include "fixtures.h"
#include "tests/common/scratch.h"

int test_failures;

static const struct {
    const char *name, *tag;
    uint64_t mem;
    int ccmaj, ccmin;
    bool mig;
} models[] = {
    [FX_A100] = { "NVIDIA A100-SXM4-40GB", "a1000000", 42949672960ull, 8, 0, true },
    [FX_H100] = { "NVIDIA H100 80GB HBM3", "h1000000", 85899345920ull, 9, 0, true },
    [FX_T4] = { "NVIDIA T4", "74000000", 16106127360ull, 7, 5, false },
};

void fx_inventory(struct inventory *inv, enum fx_model model, unsigned n)
{
    memset(inv, 0, sizeof(*inv));
    snprintf(inv->driver_version, sizeof(inv->driver_version), "550.163.01");
    inv->gpus = xcalloc(n, sizeof(*inv->gpus));
    inv->n_gpus = n;
    for (unsigned i = 0; i < n; i++) {
        struct inv_gpu *g = &inv->gpus[i];
        g->index = i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%s-0000-0000-0000-%012u", models[model].tag, i);
        snprintf(g->name, sizeof(g->name), "%s", models[model].name);
        snprintf(g->bus_id, sizeof(g->bus_id), "0000:%02x:00.0", 0x10 + i);
        g->minor = i;
        g->memory_bytes = models[model].mem;
        g->cc_major = models[model].ccmaj;
        g->cc_minor = models[model].ccmin;
        g->numa_node = model == FX_T4 ? -1 : (int)(i / (n / 2 ? n / 2 : 1));
        g->mig_capable = models[model].mig;
    }
    inv->links = xcalloc((size_t)n * n, sizeof(*inv->links));
}

void fx_enable_mig(struct inventory *inv, unsigned g, const char *const *profiles, size_t n)
{
    struct inv_gpu *gpu = &inv->gpus[g];
    gpu->mig_enabled = true;
    gpu->migs = xcalloc(n, sizeof(*gpu->migs));
    gpu->n_migs = n;
    for (size_t m = 0; m < n; m++) {
        struct inv_mig *x = &gpu->migs[m];
        x->mig_index = (unsigned)m;
        snprintf(x->uuid, sizeof(x->uuid), "MIG-%08u-0000-0000-0000-%012zu", g, m);
        x->gi_id = (unsigned)m + 1;
        x->ci_id = 0;
        snprintf(x->profile, sizeof(x->profile), "%s", profiles[m]);
        x->memory_bytes = (uint64_t)(atoi(strchr(profiles[m], '.') + 1)) << 30;
        /* what discovery reads from fx_proc_root()'s mig-minors for this GPU minor */
        x->gi_cap_minor = 1000 + (int)gpu->minor * 100 + (int)x->gi_id;
        x->ci_cap_minor = 5000 + (int)gpu->minor * 1000 + (int)x->gi_id * 10 + (int)x->ci_id;
    }
}

void fx_inventory_free(struct inventory *inv)
{
    inventory_clear(inv); /* the one that knows every part, the driver's files included */
}

char *fx_proc_root(void)
{
    char *root = xstrdup(scratch_dir("gdp-res-proc-"));
    _cleanup_free_ char *d1 = xasprintf("%s/driver", root);
    _cleanup_free_ char *d2 = xasprintf("%s/driver/nvidia-caps", root);
    _cleanup_free_ char *f = xasprintf("%s/mig-minors", d2);
    mkdir(d1, 0755);
    mkdir(d2, 0755);
    FILE *fp = fopen(f, "we");
    if (!fp)
        abort();
    fprintf(fp, "config 1\nmonitor 2\n");
    for (int g = 0; g < 16; g++)
        for (int gi = 0; gi < 16; gi++) {
            fprintf(fp, "gpu%d/gi%d/access %d\n", g, gi, 1000 + g * 100 + gi);
            for (int ci = 0; ci < 8; ci++)
                fprintf(fp, "gpu%d/gi%d/ci%d/access %d\n", g, gi, ci, 5000 + g * 1000 + gi * 10 + ci);
        }
    fclose(fp);
    return root;
}

void fx_config(struct config *c, const char *proc_root)
{
    config_init_defaults(c);
    free(c->proc_root);
    c->proc_root = xstrdup(proc_root);
}

void fx_add_replicated(struct config_sharing *s, const char *name, const char *rename, int replicas)
{
    s->present = true;
    s->resources = xreallocarray(s->resources, s->n_resources + 1, sizeof(*s->resources));
    s->resources[s->n_resources++] = (struct config_replicated){
        .name = xstrdup(name),
        .rename = rename ? xstrdup(rename) : NULL,
        .replicas = replicas,
        .devices_kind = DEVICES_ALL,
    };
}

void fx_rmtree(const char *dir)
{
    scratch_remove(dir);
}
