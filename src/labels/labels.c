/* Label derivation (labels.h): the labels GFD v0.20 gives a node, computed from the
 * inventory and the configuration alone. GFD builds its set by merging labelers in a
 * fixed order, later keys overriding earlier ones; the functions below follow that
 * order (timestamp, machine type, versions, MIG capability, MPS capability, full-GPU
 * resources, MIG resources, GPU mode, vGPU) so the overrides come out the same. Where
 * GFD's result depends on Go map iteration order (several GPU models on one node), the
 * model of the GPU with the lowest NVML index is labelled (docs/labels.md). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "labels/labels.h"

#define PREFIX "nvidia.com/"
#define GPU_RESOURCE "nvidia.com/gpu"
#define CLASS_VGA 0x030000u
#define CLASS_3D 0x030200u

_printf_(3, 0) static void vsetf(struct labels *l, const char *key, const char *fmt, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    /* values are numbers and sanitised names cut to our inventory's sizes */
    if (n >= 0 && (size_t)n < sizeof(buf))
        labels_set(l, key, buf);
}

_printf_(3, 4) static void setf(struct labels *l, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsetf(l, key, fmt, ap);
    va_end(ap);
}

/* ---- sharing, as GFD's spec.Sharing reads the config */

/* GFD's gpu.sharing-strategy value of the sharing in force. */
static const char *sharing_strategy(const struct config *cfg)
{
    switch (config_sharing_strategy(cfg)) {
    case SHARING_MPS: return "mps";
    case SHARING_TIME_SLICING: return "time-slicing";
    case SHARING_NONE: break;
    }
    return "none";
}

/* One resource's labeler (GFD resourceLabeler). cfg NULL: sharing disabled (the
 * labels of a MIG-enabled GPU's parent: replicas 0). */
struct rlab {
    const char *resource;   /* "nvidia.com/gpu", "nvidia.com/mig-1g.5gb" */
    const struct config *cfg;
};

static const struct config_replicated *replication(const struct rlab *rl)
{
    if (!rl->cfg)
        return NULL;
    const struct config_sharing *s = config_sharing_section(rl->cfg);
    for (size_t i = 0; i < s->n_resources; i++)
        if (streq(s->resources[i].name, rl->resource))
            return &s->resources[i];
    return NULL;
}

static int rl_replicas(const struct rlab *rl)
{
    if (!rl->cfg)
        return 0;
    const struct config_replicated *r = replication(rl);
    return r && r->replicas > 0 ? r->replicas : 1;
}

static void rl_set(const struct rlab *rl, struct labels *l, const char *suffix, const char *value)
{
    _cleanup_free_ char *key = xasprintf("%s.%s", rl->resource, suffix);
    labels_set(l, key, value);
}

_printf_(4, 5) static void rl_setf(const struct rlab *rl, struct labels *l, const char *suffix,
                                   const char *fmt, ...)
{
    _cleanup_free_ char *key = xasprintf("%s.%s", rl->resource, suffix);
    va_list ap;
    va_start(ap, fmt);
    vsetf(l, key, fmt, ap);
    va_end(ap);
}

/* Sanitised non-empty parts joined by '-', "-SHARED" when replicated and not renamed. */
static char *rl_product(const struct rlab *rl, const char *const *parts, size_t n)
{
    char *out = xstrdup("");
    for (size_t i = 0; i < n; i++) {
        if (!parts[i] || !*parts[i])
            continue;
        _cleanup_free_ char *s = labels_sanitise(parts[i]);
        char *joined = xasprintf("%s%s%s", out, *out ? "-" : "", s);
        free(out);
        out = joined;
    }
    const struct config_replicated *r = replication(rl);
    if (*out && r && r->replicas > 1 && !(r->rename && *r->rename)) {
        char *joined = xasprintf("%s-SHARED", out);
        free(out);
        out = joined;
    }
    return out;
}

/* product, count, replicas, sharing-strategy */
static void rl_base(const struct rlab *rl, struct labels *l, size_t count,
                    const char *const *parts, size_t n)
{
    int replicas = rl_replicas(rl);
    _cleanup_free_ char *product = rl_product(rl, parts, n);
    rl_set(rl, l, "product", product);
    rl_setf(rl, l, "count", "%zu", count);
    rl_setf(rl, l, "replicas", "%d", replicas);
    rl_set(rl, l, "sharing-strategy",
           rl->cfg && replicas > 1 ? sharing_strategy(rl->cfg) : "none");
}

/* ---- full GPUs */

static void full_gpu_labels(const struct inv_gpu *g, size_t count, const struct config *cfg,
                            struct labels *l)
{
    const struct rlab rl = { GPU_RESOURCE, cfg };
    const char *parts[] = { g->name };
    rl_base(&rl, l, count, parts, ELEMENTSOF(parts));
    uint64_t mib = g->memory_bytes >> 20;
    if (mib)
        rl_setf(&rl, l, "memory", "%" PRIu64, mib);
    if (g->cc_major != 0) {
        rl_set(&rl, l, "family", labels_arch_family(g->cc_major, g->cc_minor));
        rl_setf(&rl, l, "compute.major", "%d", g->cc_major);
        rl_setf(&rl, l, "compute.minor", "%d", g->cc_minor);
    }
}

/* GFD's newGPULabelers: one labeler per GPU model, counted over all GPUs of that name
 * (MIG enabled or not); MIG-enabled models first and without sharing, then full-GPU
 * models, which override. With several models in a group GFD applies them in Go map
 * order, so its result is random and can mix two models' values (one's product, the
 * other's memory); we apply only the lowest-indexed model of each group. */
static void gpu_labels(const struct inventory *inv, const struct config *cfg, struct labels *l)
{
    for (int pass = 0; pass < 2; pass++) {
        bool want_mig = pass == 0;
        const struct inv_gpu *first = NULL;
        for (size_t i = 0; i < inv->n_gpus && !first; i++)
            if (inv->gpus[i].mig_enabled == want_mig)
                first = &inv->gpus[i];
        if (!first)
            continue;
        size_t count = 0;
        for (size_t j = 0; j < inv->n_gpus; j++)
            count += streq(inv->gpus[j].name, first->name);
        full_gpu_labels(first, count, want_mig ? NULL : cfg, l);
    }
}

/* ---- MIG */

/* The MIG device name GFD uses: the profile with '+' turned into '.'. */
static void mig_name(const struct inv_mig *m, char *out, size_t size)
{
    snprintf(out, size, "%s", m->profile);
    for (char *p = out; *p; p++)
        if (*p == '+')
            *p = '.';
}

static void mig_resource_labels(const char *resource, const struct inv_gpu *parent,
                                const struct inv_mig *m, size_t count, const struct config *cfg,
                                struct labels *l)
{
    const struct rlab rl = { resource, cfg };
    char name[INV_PROFILE_MAX];
    mig_name(m, name, sizeof(name));
    const char *parts[] = { parent->name, "MIG", name };
    rl_base(&rl, l, count, parts, ELEMENTSOF(parts));
    rl_setf(&rl, l, "memory", "%" PRIu64, m->memory_bytes >> 20);
    rl_setf(&rl, l, "multiprocessors", "%u", m->multiprocessors);
    rl_setf(&rl, l, "slices.gi", "%u", m->gi_slices);
    rl_setf(&rl, l, "slices.ci", "%u", m->ci_slices);
    rl_setf(&rl, l, "engines.copy", "%u", m->copy_engines);
    rl_setf(&rl, l, "engines.decoder", "%u", m->decoders);
    rl_setf(&rl, l, "engines.encoder", "%u", m->encoders);
    rl_setf(&rl, l, "engines.jpeg", "%u", m->jpegs);
    rl_setf(&rl, l, "engines.ofa", "%u", m->ofas);
}

/* Count the MIG devices named like `m` on MIG-enabled GPUs; *first: is `m` the first. */
static size_t mig_count(const struct inventory *inv, const struct inv_mig *m, bool *first)
{
    char want[INV_PROFILE_MAX], name[INV_PROFILE_MAX];
    size_t count = 0;
    mig_name(m, want, sizeof(want));
    *first = true;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        for (size_t j = 0; g->mig_enabled && j < g->n_migs; j++) {
            mig_name(&g->migs[j], name, sizeof(name));
            if (!streq(name, want))
                continue;
            if (&g->migs[j] == m && count)
                *first = false;
            count++;
        }
    }
    return count;
}

static void mig_invalid(const struct inv_gpu *g, struct labels *l)
{
    const struct rlab rl = { GPU_RESOURCE, NULL };
    const char *parts[] = { g->name, "MIG", "INVALID" };
    _cleanup_free_ char *product = rl_product(&rl, parts, ELEMENTSOF(parts));
    rl_set(&rl, l, "product", product);
    rl_set(&rl, l, "count", "0");
    rl_set(&rl, l, "replicas", "0");
    rl_set(&rl, l, "sharing-strategy", "");
    rl_set(&rl, l, "memory", "0");
}

static void mig_single(const struct inventory *inv, const struct config *cfg, struct labels *l)
{
    const struct inv_gpu *first_enabled = NULL, *first_mig_parent = NULL;
    const struct inv_mig *first_mig = NULL;
    bool empty = false, disabled = false, several = false;
    size_t total = 0;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        if (!g->mig_enabled) {
            disabled = true;
            continue;
        }
        if (!first_enabled)
            first_enabled = g;
        empty |= g->n_migs == 0;
        for (size_t j = 0; j < g->n_migs; j++, total++) {
            char a[INV_PROFILE_MAX], b[INV_PROFILE_MAX];
            if (!first_mig) {
                first_mig = &g->migs[j];
                first_mig_parent = g;
                continue;
            }
            mig_name(first_mig, a, sizeof(a));
            mig_name(&g->migs[j], b, sizeof(b));
            several |= !streq(a, b);
        }
    }
    if (!first_enabled)
        return; /* no MIG-enabled GPU: the same as strategy none */
    if (empty || disabled || several) {
        mig_invalid(first_enabled, l);
        return;
    }
    mig_resource_labels(GPU_RESOURCE, first_mig_parent, first_mig, total, cfg, l);
}

static void mig_mixed(const struct inventory *inv, const struct config *cfg, struct labels *l)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct inv_gpu *g = &inv->gpus[i];
        for (size_t j = 0; g->mig_enabled && j < g->n_migs; j++) {
            bool first;
            size_t count = mig_count(inv, &g->migs[j], &first);
            if (!first)
                continue;
            char name[INV_PROFILE_MAX];
            mig_name(&g->migs[j], name, sizeof(name));
            _cleanup_free_ char *resource = xasprintf(PREFIX "mig-%s", name);
            mig_resource_labels(resource, g, &g->migs[j], count, cfg, l);
        }
    }
}

/* ---- node-wide labels */

static int version_labels(const struct inventory *inv, struct labels *l, struct error *err)
{
    const char *v = inv->driver_version;
    char parts[3][32] = { "", "", "" };
    size_t n = 1, k = 0;
    for (const char *p = v; *p; p++) {
        if (*p == '.') {
            if (++n > 3)
                break;
            k = 0;
            continue;
        }
        if (k + 1 < sizeof(parts[0]))
            parts[n - 1][k++] = *p, parts[n - 1][k] = 0;
    }
    if (n < 2 || n > 3)
        return error_set(err, -EINVAL, "error getting driver version: Version \"%s\" does not "
                         "match format \"X.Y[.Z]\"", v);
    if (inv->cuda_version <= 0)
        return error_set(err, -ENODATA, "error getting cuda driver version: "
                         "nvmlSystemGetCudaDriverVersion failed");
    int cmaj = inv->cuda_version / 1000, cmin = inv->cuda_version % 1000 / 10;
    labels_set(l, PREFIX "cuda.driver.major", parts[0]);
    labels_set(l, PREFIX "cuda.driver.minor", parts[1]);
    labels_set(l, PREFIX "cuda.driver.rev", parts[2]);
    setf(l, PREFIX "cuda.runtime.major", "%d", cmaj);
    setf(l, PREFIX "cuda.runtime.minor", "%d", cmin);
    labels_set(l, PREFIX "cuda.driver-version.major", parts[0]);
    labels_set(l, PREFIX "cuda.driver-version.minor", parts[1]);
    labels_set(l, PREFIX "cuda.driver-version.revision", parts[2]);
    labels_set(l, PREFIX "cuda.driver-version.full", v);
    setf(l, PREFIX "cuda.runtime-version.major", "%d", cmaj);
    setf(l, PREFIX "cuda.runtime-version.minor", "%d", cmin);
    setf(l, PREFIX "cuda.runtime-version.full", "%d.%d", cmaj, cmin);
    return 0;
}

/* All GPUs in one PCI class: compute or graphics; anything else (or unreadable) unknown. */
static const char *gpu_mode(const struct inventory *inv)
{
    uint32_t c = inv->gpus[0].pci_class;
    for (size_t i = 0; i < inv->n_gpus; i++)
        if (inv->gpus[i].pci_class == 0 || inv->gpus[i].pci_class != c)
            return "unknown";
    return c == CLASS_3D ? "compute" : c == CLASS_VGA ? "graphics" : "unknown";
}

static int device_labels(const struct inventory *inv, const struct config *cfg, struct labels *l,
                         struct error *err)
{
    int r;
    _cleanup_free_ char *machine = labels_sanitise(inv->host.read ? inv->host.machine_type
                                                                   : "unknown");
    labels_set(l, PREFIX "gpu.machine", machine);
    if ((r = version_labels(inv, l, err)) < 0)
        return r;

    bool capable = false, enabled = false;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        capable |= inv->gpus[i].mig_capable;
        enabled |= inv->gpus[i].mig_enabled;
    }
    labels_set(l, PREFIX "mig.capable", capable ? "true" : "false");
    bool mps = config_sharing_strategy(cfg) == SHARING_MPS;
    if (mps && enabled)
        return error_set(err, -ENOTSUP, "error creating sharing labeler: failed to check "
                         "MPS-capable: MPS sharing is not supported for mig devices");
    labels_set(l, PREFIX "mps.capable", mps ? "true" : "false");

    gpu_labels(inv, cfg, l);
    switch (cfg->mig_strategy) {
    case MIG_STRATEGY_NONE:
        break;
    case MIG_STRATEGY_SINGLE:
        labels_set(l, PREFIX "mig.strategy", "single");
        mig_single(inv, cfg, l);
        break;
    case MIG_STRATEGY_MIXED:
        labels_set(l, PREFIX "mig.strategy", "mixed");
        mig_mixed(inv, cfg, l);
        break;
    }
    labels_set(l, PREFIX "gpu.mode", gpu_mode(inv));
    /* gpu.clique: our NVML module does not read fabric info (docs/labels.md). */
    return 0;
}

static int vgpu_labels(const struct inv_host *h, struct labels *l, struct error *err)
{
    if (!h->read || h->vgpu == INV_VGPU_UNKNOWN)
        return 0; /* GFD logs the error and labels nothing */
    labels_set(l, PREFIX "vgpu.present", h->vgpu == INV_VGPU_PRESENT ? "true" : "false");
    if (h->vgpu != INV_VGPU_PRESENT)
        return 0;
    if (h->vgpu_record_missing[0])
        return error_set(err, -ENODATA, "error getting vGPU device info: cannot find driver "
                         "version record in vendor specific capability for device %s",
                         h->vgpu_record_missing);
    labels_set(l, PREFIX "vgpu.host-driver-version", h->vgpu_host_driver_version);
    labels_set(l, PREFIX "vgpu.host-driver-branch", h->vgpu_host_driver_branch);
    return 0;
}

int labels_derive(const struct labels_input *in, struct labels **out, struct error *err)
{
    _cleanup_labels_ struct labels *l = labels_new();
    int r;
    if (in->timestamp)
        setf(l, PREFIX "gfd.timestamp", "%" PRIu64, in->timestamp);
    if (!in->nvml_missing && in->inv->n_gpus > 0 &&
        (r = device_labels(in->inv, in->cfg, l, err)) < 0)
        return r;
    if ((r = vgpu_labels(&in->inv->host, l, err)) < 0)
        return r;
    *out = TAKE_PTR(l);
    return 0;
}
