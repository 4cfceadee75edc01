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

json_t *dra_slice_device(const struct inventory *inv, const struct dra_device *d)
{
    const struct inv_gpu *g = &inv->gpus[d->gpu];
    json_t *attrs = json_object(), *caps = json_object();

    if (d->type == DRA_DEVICE_GPU) {
        attr_string(attrs, "type", "gpu");
        attr_string(attrs, "uuid", g->uuid);
        parent_attrs(attrs, inv, g);
        cap_bytes(caps, "memory", g->memory_bytes);
    } else {
        const struct inv_mig *m = &g->migs[d->mig];
        attr_string(attrs, "type", "mig");
        attr_string(attrs, "uuid", m->uuid);
        attr_string(attrs, "parentUUID", g->uuid);
        attr_string(attrs, "profile", m->profile);
        parent_attrs(attrs, inv, g);
        cap_count(caps, "multiprocessors", m->multiprocessors);
        cap_count(caps, "copyEngines", m->copy_engines);
        cap_count(caps, "decoders", m->decoders);
        cap_count(caps, "encoders", m->encoders);
        cap_count(caps, "jpegEngines", m->jpegs);
        cap_count(caps, "ofaEngines", m->ofas);
        cap_bytes(caps, "memory", m->memory_bytes);
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

json_t *dra_slices_build(const struct dra_slice_pool *p, json_t *devices)
{
    size_t n = json_array_size(devices);
    size_t count = n ? (n + DRA_SLICE_MAX_DEVICES - 1) / DRA_SLICE_MAX_DEVICES : 1;
    json_t *out = json_array();
    char gen_name[300];
    snprintf(gen_name, sizeof(gen_name), "%s-%s-", p->node_name, p->driver);

    for (size_t i = 0; i < count; i++) {
        json_t *part = json_array();
        for (size_t j = i * DRA_SLICE_MAX_DEVICES; j < n && j < (i + 1) * DRA_SLICE_MAX_DEVICES; j++)
            json_array_append(part, json_array_get(devices, j));
        json_t *md = json_pack("{s:s}", "generateName", gen_name);
        if (p->node_uid && *p->node_uid)
            json_object_set_new(md, "ownerReferences",
                                json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1", "kind",
                                          "Node", "name", p->node_name, "uid", p->node_uid,
                                          "controller", 1));
        json_t *spec = json_pack("{s:s, s:s, s:{s:s, s:I, s:I}, s:o}", "driver", p->driver,
                                 "nodeName", p->node_name, "pool", "name", p->node_name,
                                 "generation", (json_int_t)p->generation, "resourceSliceCount",
                                 (json_int_t)count, "devices", part);
        json_array_append_new(out, json_pack("{s:s, s:s, s:o, s:o}", "apiVersion",
                                             "resource.k8s.io/v1", "kind", "ResourceSlice",
                                             "metadata", md, "spec", spec));
    }
    return out;
}
