/* ResourceSlice JSON (see dra-slice.h): device entries named and described as NVIDIA's
 * gpu-kubelet-plugin does (nvidia-dra-driver notes, §3), and the slices of one pool.
 * Validation is in dra-slice-validate.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra-slice.h"

#define STD_PREFIX "resource.kubernetes.io/"

/* One run of digits as Go's strconv.ParseUint would read it (leading zeros allowed,
 * dropped). Returns the characters used, 0 if none or too large. */
static size_t read_number(const char *s, unsigned long long *v)
{
    size_t i = 0;
    *v = 0;
    while (s[i] >= '0' && s[i] <= '9') {
        if (*v > (~0ULL - 9) / 10)
            return 0;
        *v = *v * 10 + (unsigned long long)(s[i] - '0');
        i++;
    }
    return i;
}

int dra_semver_normalize(const char *in, char *out, size_t len)
{
    unsigned long long part[3] = { 0, 0, 0 };
    const char *p = in;
    if (*p == 'v')
        p++;
    for (int i = 0; i < 3; i++) {
        size_t n = read_number(p, &part[i]);
        if (!n)
            return -EINVAL;
        p += n;
        if (i < 2 && *p != '.')
            break;
        if (i < 2)
            p++;
    }
    /* what follows the numbers must already be semver's pre-release / build part */
    int n = snprintf(out, len, "%llu.%llu.%llu%s", part[0], part[1], part[2], p);
    if (n < 0 || (size_t)n >= len)
        return -ENOBUFS;
    return (*p && *p != '-' && *p != '+') || !dra_semver_valid(out) ? -EINVAL : 0;
}

void dra_quantity_binary(unsigned long long bytes, char *out, size_t len)
{
    static const char *const suffix[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
    size_t e = 0;
    while (bytes && bytes % 1024 == 0 && e + 1 < sizeof(suffix) / sizeof(suffix[0])) {
        bytes /= 1024;
        e++;
    }
    snprintf(out, len, "%llu%s", bytes, suffix[e]);
}

static void attr_string(json_t *attrs, const char *name, const char *v)
{
    if (v && *v)
        json_object_set_new(attrs, name, json_pack("{s:s}", "string", v));
}

static void attr_version(json_t *attrs, const char *name, const char *v)
{
    char norm[72];
    if (v && *v && dra_semver_normalize(v, norm, sizeof(norm)) == 0)
        json_object_set_new(attrs, name, json_pack("{s:s}", "version", norm));
}

static void cap_count(json_t *caps, const char *name, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", v);
    json_object_set_new(caps, name, json_pack("{s:s}", "value", buf));
}

static void cap_bytes(json_t *caps, const char *name, unsigned long long v)
{
    char buf[32];
    dra_quantity_binary(v, buf, sizeof(buf));
    json_object_set_new(caps, name, json_pack("{s:s}", "value", buf));
}

/* What a MIG device copies from its parent, and what a full GPU has too. */
static void parent_attrs(json_t *attrs, const struct inventory *inv, const struct inv_gpu *g)
{
    char cc[32];
    attr_string(attrs, "productName", g->name);
    attr_string(attrs, "brand", g->brand);
    attr_string(attrs, "architecture", g->architecture);
    if (g->cc_major >= 0 && g->cc_minor >= 0 && (g->cc_major || g->cc_minor)) {
        snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
        attr_version(attrs, "cudaComputeCapability", cc);
    }
    attr_version(attrs, "driverVersion", inv->driver_version);
    attr_version(attrs, "cudaDriverVersion", inv->cuda_driver_version);
    attr_string(attrs, "addressingMode", g->addressing_mode);
    attr_string(attrs, STD_PREFIX "pciBusID", g->bus_id);
    attr_string(attrs, STD_PREFIX "pcieRoot", g->pcie_root);
    if (g->numa_node >= 0)
        json_object_set_new(attrs, STD_PREFIX "numaNode", json_pack("{s:i}", "int", g->numa_node));
}

/* ---- DynamicMIG: what a carved GPU's devices consume (NVIDIA's counter names) */

/* What one device takes of its GPU's counter set: the capacities (zeros included) and
 * the memory slices [slice, slice + slices). */
struct mig_use {
    unsigned long long sm, ce, dec, enc, jpeg, ofa, memory;
    unsigned slice, slices;
};

/* The counter set's values: per capacity the largest over the GPU's profiles, and as many
 * memory slices as the largest placement covers (8 on A100 and H100). */
static void mig_maxima(const struct inv_gpu *g, struct mig_use *u)
{
    memset(u, 0, sizeof(*u));
    for (size_t i = 0; i < g->n_mig_profiles; i++) {
        const struct inv_mig_profile *m = &g->mig_profiles[i];
#define SETMAX(f, v) u->f = u->f > (v) ? u->f : (v)
        SETMAX(sm, m->multiprocessors);
        SETMAX(ce, m->copy_engines);
        SETMAX(dec, m->decoders);
        SETMAX(enc, m->encoders);
        SETMAX(jpeg, m->jpegs);
        SETMAX(ofa, m->ofas);
        SETMAX(memory, m->memory_bytes);
        for (unsigned k = 0; k < m->n_placements; k++)
            SETMAX(slices, m->placements[k].start + m->placements[k].size);
#undef SETMAX
    }
    if (u->slices > DRA_MIG_MEMORY_SLICES_MAX)
        u->slices = DRA_MIG_MEMORY_SLICES_MAX;
}

static void mig_capacity(json_t *caps, const struct mig_use *u)
{
    cap_count(caps, "multiprocessors", u->sm);
    cap_count(caps, "copyEngines", u->ce);
    cap_count(caps, "decoders", u->dec);
    cap_count(caps, "encoders", u->enc);
    cap_count(caps, "jpegEngines", u->jpeg);
    cap_count(caps, "ofaEngines", u->ofa);
    cap_bytes(caps, "memory", u->memory);
}

static json_t *mig_counters(const struct mig_use *u)
{
    json_t *c = json_object();
    cap_count(c, "multiprocessors", u->sm);
    cap_count(c, "copy-engines", u->ce);
    cap_count(c, "decoders", u->dec);
    cap_count(c, "encoders", u->enc);
    cap_count(c, "jpeg-engines", u->jpeg);
    cap_count(c, "ofa-engines", u->ofa);
    cap_bytes(c, "memory", u->memory);
    for (unsigned i = u->slice; i < u->slice + u->slices && i < DRA_MIG_MEMORY_SLICES_MAX; i++) {
        char name[32];
        snprintf(name, sizeof(name), "memory-slice-%u", i);
        cap_count(c, name, 1);
    }
    return c;
}

void dra_counter_set_name(const struct inv_gpu *g, char *out, size_t len)
{
    snprintf(out, len, "gpu-%u-counter-set", g->minor);
}

static json_t *mig_consumes(const struct inv_gpu *g, const struct mig_use *u)
{
    char set[48];
    dra_counter_set_name(g, set, sizeof(set));
    return json_pack("[{s:s, s:o}]", "counterSet", set, "counters", mig_counters(u));
}

json_t *dra_slice_counter_sets(const struct inventory *inv, const struct dra_device_set *s)
{
    json_t *sets = json_array();
    size_t last = (size_t)-1;
    for (size_t i = 0; i < s->n; i++) {
        const struct dra_device *d = &s->devices[i];
        if (!d->counters || d->gpu == last)
            continue;
        last = d->gpu; /* a GPU's devices are adjacent in the set */
        const struct inv_gpu *g = &inv->gpus[d->gpu];
        struct mig_use all;
        mig_maxima(g, &all);
        char name[48];
        dra_counter_set_name(g, name, sizeof(name));
        json_array_append_new(sets, json_pack("{s:s, s:o}", "name", name, "counters", mig_counters(&all)));
    }
    return sets;
}

/* ---- GPU shares: a device many claims take a part of (consumable capacity) ---- */

static json_t *range(const char *def, const char *min, const char *max, const char *step)
{
    return json_pack("{s:s, s:{s:s, s:s, s:s}}", "default", def, "validRange", "min", min, "max",
                     max, "step", step);
}

/* memory: what the device (a full GPU, a MIG device) has in whole MiB, asked in steps;
 * compute: percent of its SMs (a share's MPS active thread percentage, the same number on
 * every GPU model and so portable across a fleet, where an SM count is not). Both
 * consumable: the scheduler sums the shares a device has given. Nothing else: on a device
 * with allowMultipleAllocations every capacity is consumable, and one without a request
 * policy is taken whole by each share (a MIG device's engines or memory slices would let
 * one share in). */
static json_t *share_device(const struct dra_device *d, uint64_t memory, json_t *attrs,
                            json_t *caps)
{
    struct dra_share_grid q;
    char cap[32], def[32], min[32], max[32], step[32], cdef[16];
    dra_share_grid(memory, &d->policy, &q);
    dra_quantity_binary(q.capacity, cap, sizeof(cap));
    dra_quantity_binary(q.def, def, sizeof(def));
    dra_quantity_binary(q.min, min, sizeof(min));
    dra_quantity_binary(q.max, max, sizeof(max));
    dra_quantity_binary(q.step, step, sizeof(step));
    snprintf(cdef, sizeof(cdef), "%u", d->policy.compute_default);
    json_object_set_new(caps, "memory", json_pack("{s:s, s:o}", "value", cap, "requestPolicy",
                                                  range(def, min, max, step)));
    json_object_set_new(caps, DRA_SHARE_COMPUTE, json_pack("{s:s, s:o}", "value", "100",
                                                           "requestPolicy",
                                                           range(cdef, "1", "100", "1")));
    return json_pack("{s:s, s:o, s:o, s:b}", "name", d->name, "attributes", attrs, "capacity",
                     caps, "allowMultipleAllocations", 1);
}

json_t *dra_slice_device(const struct inventory *inv, const struct dra_device *d)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    json_t *attrs = json_object(), *caps = json_object();

    if (d->type == DRA_DEVICE_GPU) {
        attr_string(attrs, "type", "gpu");
        attr_string(attrs, "uuid", g->uuid);
        parent_attrs(attrs, inv, g);
        if (d->shared) {
            json_t *dev = share_device(d, g->memory_bytes, attrs, caps);
            if (d->counters) { /* taken once, for the first share, as a placement's */
                struct mig_use all;
                mig_maxima(g, &all);
                json_object_set_new(dev, "consumesCounters", mig_consumes(g, &all));
            }
            return dev;
        } else if (!d->counters) {
            cap_bytes(caps, "memory", g->memory_bytes);
        } else {
            /* NVIDIA's: a carved GPU's capacities are its counters' (the largest
             * profile's, so memory is the 7g size, not the framebuffer), and it consumes
             * all of them: it and any placement exclude each other */
            struct mig_use all;
            mig_maxima(g, &all);
            mig_capacity(caps, &all);
            return json_pack("{s:s, s:o, s:o, s:o}", "name", d->name, "attributes", attrs,
                             "capacity", caps, "consumesCounters", mig_consumes(g, &all));
        }
    } else if (d->type == DRA_DEVICE_MIG_PLACEMENT) {
        const struct inv_mig_profile *m = &g->mig_profiles[d->mig];
        const struct inv_placement *pl = &m->placements[d->placement];
        /* no uuid: the device does not exist until a claim gets it */
        attr_string(attrs, "type", "mig");
        attr_string(attrs, "parentUUID", g->uuid);
        attr_string(attrs, "profile", m->name);
        parent_attrs(attrs, inv, g);
        struct mig_use use = { m->multiprocessors, m->copy_engines, m->decoders, m->encoders,
                               m->jpegs, m->ofas, m->memory_bytes, pl->start, pl->size };
        if (d->shared) {
            json_t *dev = share_device(d, m->memory_bytes, attrs, caps);
            json_object_set_new(dev, "consumesCounters", mig_consumes(g, &use));
            return dev;
        }
        mig_capacity(caps, &use);
        return json_pack("{s:s, s:o, s:o, s:o}", "name", d->name, "attributes", attrs,
                         "capacity", caps, "consumesCounters", mig_consumes(g, &use));
    } else {
        const struct inv_mig *m = &g->migs[d->mig];
        attr_string(attrs, "type", "mig");
        attr_string(attrs, "uuid", m->uuid);
        attr_string(attrs, "parentUUID", g->uuid);
        attr_string(attrs, "profile", m->profile);
        parent_attrs(attrs, inv, g);
        if (d->shared)
            return share_device(d, m->memory_bytes, attrs, caps);
        mig_capacity(caps, &(struct mig_use){ m->multiprocessors, m->copy_engines, m->decoders,
                                              m->encoders, m->jpegs, m->ofas, m->memory_bytes, 0, 0 });
        /* memorySlice<i> for each memory slice of the placement; bounded so that a
         * strange placement cannot push the device past 32 attributes + capacities
         * (at most 14 attributes, with addressingMode and numaNode, + 7 + 8 = 29) */
        for (unsigned i = 0; i < m->placement_size && i < 8; i++) {
            char name[32];
            snprintf(name, sizeof(name), "memorySlice%u", m->placement_start + i);
            cap_count(caps, name, 1);
        }
    }
    return json_pack("{s:s, s:o, s:o}", "name", d->name, "attributes", attrs, "capacity", caps);
}

json_t *dra_slice_devices(const struct inventory *inv, const struct dra_device_set *s)
{
    json_t *a = json_array();
    for (size_t i = 0; i < s->n; i++)
        json_array_append_new(a, dra_slice_device(inv, &s->devices[i]));
    return a;
}

/* One ResourceSlice of the pool: metadata and the spec's fixed part, with `devices` and/or
 * `counters` (either may be NULL: left out; stolen). resourceSliceCount is filled in once
 * the count is known. */
static json_t *slice_new(const struct dra_slice_pool *p, json_t *devices, json_t *counters)
{
    char gen_name[300];
    snprintf(gen_name, sizeof(gen_name), "%s-%s-", p->node_name, p->driver);
    json_t *md = json_pack("{s:s}", "generateName", gen_name);
    if (p->node_uid && *p->node_uid)
        json_object_set_new(md, "ownerReferences",
                            json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1", "kind",
                                      "Node", "name", p->node_name, "uid", p->node_uid,
                                      "controller", 1));
    json_t *spec = json_pack("{s:s, s:s, s:{s:s, s:I, s:I}}", "driver", p->driver, "nodeName",
                             p->node_name, "pool", "name", p->node_name, "generation",
                             (json_int_t)p->generation, "resourceSliceCount", (json_int_t)0);
    if (counters)
        json_object_set_new(spec, "sharedCounters", counters);
    if (devices || !counters)
        json_object_set_new(spec, "devices", devices ? devices : json_array());
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "resource.k8s.io/v1", "kind",
                     "ResourceSlice", "metadata", md, "spec", spec);
}

static const char *counter_set_of(json_t *device)
{
    json_t *c = json_array_get(json_object_get(device, "consumesCounters"), 0);
    return json_string_value(json_object_get(c, "counterSet"));
}

/* Append the devices of `devices` that consume counter set `set` (NULL: those that
 * consume none) as slices of at most the API's bound: 64 where a device consumes
 * counters or carries taints, else 128. `counters` (stolen, may be NULL) goes into the
 * first of them (the combined layout). */
static void append_group(json_t *out, const struct dra_slice_pool *p, json_t *devices,
                         const char *set, json_t *counters)
{
    json_t *part = json_array(), *d;
    size_t i, max = DRA_SLICE_MAX_DEVICES;
    json_array_foreach (devices, i, d) {
        const char *cs = counter_set_of(d);
        if (set ? !(cs && streq(cs, set)) : cs != NULL)
            continue;
        if (cs || json_object_get(d, "taints"))
            max = DRA_SLICE_MAX_DEVICES_LIMITED;
    }
    json_array_foreach (devices, i, d) {
        const char *cs = counter_set_of(d);
        if (set ? !(cs && streq(cs, set)) : cs != NULL)
            continue;
        if (json_array_size(part) == max) {
            json_array_append_new(out, slice_new(p, part, counters));
            counters = NULL;
            part = json_array();
        }
        json_array_append(part, d);
    }
    if (json_array_size(part) || counters)
        json_array_append_new(out, slice_new(p, part, counters));
    else
        json_decref(part);
}

json_t *dra_slices_build(const struct dra_slice_pool *p, json_t *devices)
{
    json_t *out = json_array(), *set;
    size_t n_sets = json_array_size(p->counter_sets), i;

    if (!p->combined) {
        /* the split layout (1.35+, the only one 1.36 accepts): counters-only slices first,
         * at most 8 sets each (NVIDIA puts every set in one slice and so cannot publish a
         * 9-GPU node); the scheduler finds a set anywhere in the pool by its unique name */
        for (size_t k = 0; k < n_sets; k += DRA_SLICE_MAX_COUNTER_SETS) {
            json_t *sets = json_array();
            for (size_t j = k; j < n_sets && j < k + DRA_SLICE_MAX_COUNTER_SETS; j++)
                json_array_append(sets, json_array_get(p->counter_sets, j));
            json_array_append_new(out, slice_new(p, NULL, sets));
        }
    }
    json_array_foreach (p->counter_sets, i, set) {
        const char *name = json_string_value(json_object_get(set, "name"));
        /* before 1.35 a device finds its counters only in its own slice */
        append_group(out, p, devices, name ? name : "", p->combined ? json_pack("[O]", set) : NULL);
    }
    append_group(out, p, devices, NULL, NULL);
    /* a node without devices still gets one empty slice, so the scheduler sees the pool */
    if (json_array_size(out) == 0)
        json_array_append_new(out, slice_new(p, NULL, NULL));
    json_t *sl;
    json_array_foreach (out, i, sl)
        json_object_set_new(json_object_get(json_object_get(sl, "spec"), "pool"),
                            "resourceSliceCount", json_integer((json_int_t)json_array_size(out)));
    return out;
}
