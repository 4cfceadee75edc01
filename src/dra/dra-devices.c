/* The DRA device set (see dra-devices.h): which devices of the inventory DRA offers and
 * the names NVIDIA's gpu-kubelet-plugin gives them, so that claims and DeviceClasses
 * written for it keep selecting the same devices. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml/nvml.h"

#include "dra/dra-devices.h"

/* NVIDIA's canonical profile spelling in a name: lower case, dots dropped, anything
 * else outside [a-z0-9-] turned into '-' ("1g.5gb+me" -> "1g5gb-me"). */
static void profile_token(const char *profile, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = profile; *p && o + 1 < len; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.')
            continue;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            c = '-';
        out[o++] = c;
    }
    out[o] = 0;
}

static bool name_taken(const struct dra_device_set *s, const char *name)
{
    return dra_devices_find(s, name) != NULL;
}

/* NVIDIA's name identifies a MIG device by its GPU instance; a GPU instance holding
 * several compute instances of the same profile (two 1c.2g.10gb in one 2g GI) would
 * give them one name, which the API server refuses as a duplicate and which would
 * take the whole slice down. The first keeps NVIDIA's name, later ones get "-ci<id>". */
static int mig_name(const struct dra_device_set *s, const struct inv_gpu *g,
                    const struct inv_mig *m, char *out, size_t len, struct error *err)
{
    char token[INV_PROFILE_MAX];
    profile_token(m->profile, token, sizeof(token));
    int n = snprintf(out, len, "gpu-%u-mig-%s-%u-%u", g->minor, token, m->gi_profile_id,
                     m->placement_start);
    if (n > 0 && (size_t)n < len && name_taken(s, out))
        n = snprintf(out, len, "gpu-%u-mig-%s-%u-%u-ci%u", g->minor, token, m->gi_profile_id,
                     m->placement_start, m->ci_id);
    if (n < 0 || (size_t)n >= len || (size_t)n > DRA_DEVICE_NAME_MAX - 1)
        return error_set(err, -ENAMETOOLONG, "MIG device %s of GPU %s: DRA name longer than 63 characters",
                         m->uuid, g->uuid);
    if (name_taken(s, out))
        return error_set(err, -EEXIST, "MIG device %s of GPU %s: DRA name \"%s\" already used",
                         m->uuid, g->uuid, out);
    return 0;
}

static struct dra_device *append(struct dra_device_set *s)
{
    s->devices = xreallocarray(s->devices, s->n + 1, sizeof(*s->devices));
    struct dra_device *d = &s->devices[s->n++];
    memset(d, 0, sizeof(*d));
    return d;
}

bool dra_mig_gpu_dynamic(const struct inv_gpu *g)
{
    return g->mig_capable && g->n_mig_profiles > 0 &&
           (g->arch_id >= NVML_ARCH_ID_HOPPER || g->mig_enabled);
}

bool dra_mig_gpu_whole(const struct inv_gpu *g)
{
    return !dra_mig_gpu_dynamic(g) ? !g->mig_enabled : g->arch_id >= NVML_ARCH_ID_HOPPER;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct dra_device *)a)->name, ((const struct dra_device *)b)->name);
}

/* The placements of GPU i, named as NVIDIA's driver names them and sorted by name: the
 * scheduler walks a slice's devices first fit, so the order decides which placement a
 * profile-only request gets. */
static int add_placements(struct dra_device_set *s, const struct inventory *inv, size_t i,
                          struct error *err)
{
    const struct inv_gpu *g = &inv->gpus[i];
    size_t first = s->n;
    for (size_t p = 0; p < g->n_mig_profiles; p++) {
        const struct inv_mig_profile *m = &g->mig_profiles[p];
        char token[INV_PROFILE_MAX];
        profile_token(m->name, token, sizeof(token));
        for (unsigned k = 0; k < m->n_placements; k++) {
            char name[DRA_DEVICE_NAME_MAX + 16];
            int n = snprintf(name, sizeof(name), "gpu-%u-mig-%s-%u-%u", g->minor, token, m->id,
                             m->placements[k].start);
            if (n < 0 || (size_t)n > DRA_DEVICE_NAME_MAX - 1)
                return error_set(err, -ENAMETOOLONG, "GPU %s: MIG placement name \"%s\" longer than 63 characters",
                                 g->uuid, name);
            if (name_taken(s, name))
                return error_set(err, -EEXIST, "GPU %s: DRA name \"%s\" already used", g->uuid, name);
            struct dra_device *d = append(s);
            memcpy(d->name, name, DRA_DEVICE_NAME_MAX);
            d->type = DRA_DEVICE_MIG_PLACEMENT;
            d->gpu = i;
            d->mig = p;
            d->placement = k;
            d->counters = true;
        }
    }
    qsort(s->devices + first, s->n - first, sizeof(*s->devices), by_name);
    return 0;
}

int dra_devices_build(const struct inventory *inv, const bool *serve, struct dra_device_set *out,
                      struct error *err)
{
    struct dra_device_set s = { 0 };
    int r;

    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        if (serve && !serve[i])
            continue;
        bool dynamic = dra_mig_gpu_dynamic(g);
        if (dra_mig_gpu_whole(g)) {
            char name[DRA_DEVICE_NAME_MAX];
            snprintf(name, sizeof(name), "gpu-%u", g->minor); /* at most 14 characters */
            if (name_taken(&s, name)) {
                r = error_set(err, -EEXIST, "GPU %s: DRA name \"%s\" already used (two GPUs with minor %u)",
                              g->uuid, name, g->minor);
                goto fail;
            }
            struct dra_device *d = append(&s);
            memcpy(d->name, name, sizeof(name));
            d->type = DRA_DEVICE_GPU;
            d->gpu = i;
            d->counters = dynamic;
        }
        if (dynamic) {
            /* what exists of MIG on it is not offered: placements replace it */
            if ((r = add_placements(&s, inv, i, err)) < 0)
                goto fail;
            continue;
        }
        if (!g->mig_enabled)
            continue;
        for (size_t j = 0; j < g->n_migs; j++) {
            char name[DRA_DEVICE_NAME_MAX + 16];
            if ((r = mig_name(&s, g, &g->migs[j], name, sizeof(name), err)) < 0)
                goto fail;
            struct dra_device *d = append(&s);
            memcpy(d->name, name, DRA_DEVICE_NAME_MAX);
            d->type = DRA_DEVICE_MIG;
            d->gpu = i;
            d->mig = j;
        }
    }
    *out = s;
    return 0;
fail:
    dra_device_set_clear(&s);
    return r;
}

uint64_t dra_device_memory(const struct inventory *inv, const struct dra_device *d)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    if (d->type == DRA_DEVICE_MIG)
        return g->migs[d->mig].memory_bytes;
    if (d->type == DRA_DEVICE_MIG_PLACEMENT)
        return g->mig_profiles[d->mig].memory_bytes;
    return g->memory_bytes;
}

const char *dra_device_uuid(const struct inventory *inv, const struct dra_device *d)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    if (d->type == DRA_DEVICE_MIG)
        return g->migs[d->mig].uuid;
    return d->type == DRA_DEVICE_GPU ? g->uuid : NULL;
}

void dra_share_grid(uint64_t memory, const struct dra_share_policy *p, struct dra_share_grid *out)
{
    const uint64_t mib = 1u << 20;
    uint64_t cap = memory / mib * mib, step = p->memory_step ? p->memory_step : mib;
    *out = (struct dra_share_grid){ .capacity = cap, .min = step, .step = step };
    /* max and default on the grid min + k * step, as the API's request policy wants */
    out->max = cap >= step ? step + (cap - step) / step * step : step;
    uint64_t def = p->memory_default ? p->memory_default : out->max;
    if (def < step)
        def = step;
    out->def = step + (def - step + step - 1) / step * step;
    if (out->def > out->max)
        out->def = out->max;
}

/* A full GPU (one DynamicMIG carves too: its counters are taken once, for its first share),
 * a DynamicMIG placement (its MIG device made at its first share's Prepare, destroyed after
 * its last: docs/dra.md "Shares of MIG devices made on demand"), or a MIG device that
 * exists. Not a compute instance narrower than its GPU instance: its memory is the GPU
 * instance's, which the instance's other compute instances use too, so offering it whole
 * would offer that memory twice. */
static bool shareable(const struct inventory *inv, const struct dra_device *d)
{
    if (d->type == DRA_DEVICE_GPU || d->type == DRA_DEVICE_MIG_PLACEMENT)
        return true;
    const struct inv_mig *m = &inv->gpus[d->gpu].migs[d->mig];
    return m->ci_slices == m->gi_slices;
}

void dra_devices_offer_shares(struct dra_device_set *s, const struct inventory *inv,
                              const struct dra_share_policy *p)
{
    for (size_t i = 0; i < s->n; i++) {
        struct dra_device *d = &s->devices[i];
        /* a device smaller than one step offers no share */
        d->shared = shareable(inv, d) && p->memory_step > 0 &&
                    dra_device_memory(inv, d) >= p->memory_step;
        if (d->shared)
            d->policy = *p;
    }
}

void dra_device_set_clear(struct dra_device_set *s)
{
    free(s->devices);
    *s = (struct dra_device_set){ 0 };
}

const struct dra_device *dra_devices_find(const struct dra_device_set *s, const char *name)
{
    for (size_t i = 0; s && name && i < s->n; i++)
        if (streq(s->devices[i].name, name))
            return &s->devices[i];
    return NULL;
}
