/* Discovery (see discover.h): NVML and sysfs into a plain inventory, per GPU (facts,
 * NUMA node, MIG devices), per pair (PCIe level, NVLinks), with GPUs lost during a
 * reload carried over from the previous inventory. MIG naming is in node/mig.c. */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "discover.h"
#include "node/host.h"
#include "node/mig.h"
#include "nvml/nvml.h"

void inventory_clear(struct inventory *inv)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        free(inv->gpus[i].migs);
        free(inv->gpus[i].mig_profiles);
    }
    free(inv->gpus);
    free(inv->links);
    driver_files_clear(&inv->driver);
    memset(inv, 0, sizeof(*inv));
}

int discover_numa_node(const char *sysfs_root, const char *bus_id, bool *bad)
{
    char path[4096], buf[32];
    *bad = false;
    int n = snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node",
                     sysfs_root && *sysfs_root ? sysfs_root : "/sys", bus_id);
    if (n < 0 || (size_t)n >= sizeof(path))
        return -1;
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = 0;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    while (*end == '\n' || *end == ' ')
        end++;
    if (errno || end == buf || *end || v > 65535) {
        *bad = true;
        return -1;
    }
    return v < 0 ? -1 : (int)v;
}

int discover_pcie_root(const char *sysfs_root, const char *bus_id, char *out, size_t len)
{
    char link[4096], real[PATH_MAX], devices[PATH_MAX];
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/sys";
    out[0] = 0;
    int n = snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bus_id);
    if (n < 0 || (size_t)n >= sizeof(link))
        return -ENAMETOOLONG;
    if (!realpath(link, real))
        return -errno;
    snprintf(link, sizeof(link), "%s/devices", root);
    if (!realpath(link, devices))
        return -errno;
    size_t dl = strlen(devices);
    if (strncmp(real, devices, dl) != 0 || real[dl] != '/')
        return -ENOENT;
    const char *comp = real + dl + 1, *end = strchr(comp, '/');
    size_t cl = end ? (size_t)(end - comp) : strlen(comp);
    /* "pci<domain>:<bus>": a device straight under /sys/devices without one (a virtual
     * or platform device) has no PCIe root */
    if (!end || cl < 4 || strncmp(comp, "pci", 3) != 0 || cl >= len)
        return -ENOENT;
    memcpy(out, comp, cl);
    out[cl] = 0;
    return 0;
}

static int discover_migs(const struct discover_options *opt, nvml_device dev, struct inv_gpu *g,
                         struct error *err)
{
    unsigned max = 0;
    int r = nvml_device_max_mig_count(dev, &max, err);
    if (r < 0)
        return error_prefix(err, "GPU %s", g->uuid);
    for (unsigned j = 0; j < max; j++) {
        nvml_device mig;
        r = nvml_device_mig_by_index(dev, j, &mig, err);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return error_prefix(err, "GPU %s MIG slot %u", g->uuid, j);
        g->migs = xreallocarray(g->migs, g->n_migs + 1, sizeof(*g->migs));
        struct inv_mig *m = &g->migs[g->n_migs];
        memset(m, 0, sizeof(*m));
        m->mig_index = j;
        struct nvml_mig_info info;
        if ((r = nvml_device_uuid(mig, m->uuid, sizeof(m->uuid), err)) < 0 ||
            (r = nvml_mig_info(dev, mig, &info, err)) < 0)
            return error_prefix(err, "GPU %s MIG slot %u", g->uuid, j);
        m->gi_id = info.gi_id;
        m->ci_id = info.ci_id;
        m->gi_profile_id = info.gi_profile_id;
        m->placement_start = info.placement_start;
        m->placement_size = info.placement_size;
        m->ci_profile_id = info.ci_profile_id;
        m->memory_bytes = info.memory_bytes;
        m->multiprocessors = info.multiprocessors;
        m->gi_slices = info.gi_slices;
        m->ci_slices = info.ci_slices;
        m->copy_engines = info.copy_engines;
        m->decoders = info.decoders;
        m->encoders = info.encoders;
        m->jpegs = info.jpegs;
        m->ofas = info.ofas;
        mig_profile_name(info.gi_slices, info.ci_slices, info.memory_bytes, g->memory_bytes,
                         info.variant, m->profile, sizeof(m->profile));
        mig_resolve_caps(opt->proc_root, g->minor, m);
        g->n_migs++;
    }
    return 0;
}

/* A vGPU guest's GPU takes no part in DynamicMIG, as in NVIDIA's driver: without its
 * profiles the GPU is published plain (dra_mig_gpu_dynamic). A driver without the call, or
 * one that cannot tell, is taken as no guest (NVIDIA's behaviour on bare metal). */
static bool vgpu_guest(nvml_device dev, const struct inv_gpu *g)
{
    struct error e = { 0 };
    bool guest = false;
    int r = nvml_device_vgpu_guest(dev, &guest, &e);
    if (r == -ENOSYS || r == -ENOTSUP)
        log_debug("GPU %u (%s): %s, taken as no vGPU guest", g->index, g->uuid, e.msg);
    else if (r < 0)
        log_warning("GPU %u (%s): %s, taken as no vGPU guest, ignoring", g->index, g->uuid, e.msg);
    else if (guest)
        log_info("GPU %u (%s): vGPU guest detected — skipping DynamicMIG", g->index, g->uuid);
    return guest;
}

/* What DynamicMIG may create on g, named as go-nvlib names a profile whose compute
 * instance spans the GPU instance ("1g.10gb", never "1c.2g.20gb"). */
static int discover_mig_profiles(nvml_device dev, struct inv_gpu *g, struct error *err)
{
    struct nvml_gi_profile p[32];
    unsigned n = 0;
    int r = nvml_device_gi_profiles(dev, p, ELEMENTSOF(p), &n, err);
    if (r < 0)
        return error_prefix(err, "GPU %s: MIG profiles", g->uuid);
    g->mig_profiles = n ? xcalloc(n, sizeof(*g->mig_profiles)) : NULL;
    for (unsigned i = 0; i < n; i++) {
        struct inv_mig_profile *m = &g->mig_profiles[g->n_mig_profiles++];
        *m = (struct inv_mig_profile){
            .index = p[i].index, .id = p[i].id, .slices = p[i].slices,
            .memory_bytes = p[i].memory_bytes, .multiprocessors = p[i].multiprocessors,
            .copy_engines = p[i].copy_engines, .decoders = p[i].decoders,
            .encoders = p[i].encoders, .jpegs = p[i].jpegs, .ofas = p[i].ofas,
            .n_placements = p[i].n_placements,
        };
        mig_profile_name(p[i].slices, p[i].slices, p[i].memory_bytes, g->memory_bytes,
                         p[i].variant, m->name, sizeof(m->name));
        for (unsigned k = 0; k < p[i].n_placements && k < INV_MIG_PLACEMENTS_MAX; k++)
            m->placements[k] = (struct inv_placement){ p[i].placements[k].start,
                                                       p[i].placements[k].size };
    }
    return 0;
}

static int discover_gpu(unsigned index, const struct discover_options *opt, nvml_device dev,
                        struct inv_gpu *g, struct error *err)
{
    char busid[64];
    int r;

    g->index = index;
    g->numa_node = -1;
    if ((r = nvml_device_uuid(dev, g->uuid, sizeof(g->uuid), err)) < 0)
        return error_prefix(err, "GPU %u", index);
    if ((r = nvml_device_minor(dev, &g->minor, err)) < 0 ||
        (r = nvml_device_pci_bus_id(dev, busid, sizeof(busid), err)) < 0 ||
        (r = nvml_device_compute_capability(dev, &g->cc_major, &g->cc_minor, err)) < 0)
        return error_prefix(err, "GPU %s", g->uuid);
    if (nvml_bus_id_normalize(busid, g->bus_id, sizeof(g->bus_id)) < 0)
        return error_set(err, -EINVAL, "GPU %s: malformed PCI bus id \"%s\"", g->uuid, busid);

    struct error merr = { 0 };
    if (nvml_device_memory_total(dev, &g->memory_bytes, &merr) < 0)
        log_warning("GPU %s: %s, reporting memory as 0, ignoring", g->uuid, merr.msg);

    /* DRA attributes only: a driver without these symbols still serves its GPUs. */
    struct error ierr = { 0 };
    if (nvml_device_brand(dev, g->brand, sizeof(g->brand), &ierr) < 0)
        log_debug("GPU %s: %s, no brand attribute", g->uuid, ierr.msg);
    if (nvml_device_architecture(dev, g->architecture, sizeof(g->architecture), &ierr) < 0)
        log_debug("GPU %s: %s, no architecture attribute", g->uuid, ierr.msg);
    if (nvml_device_architecture_id(dev, &g->arch_id, &ierr) < 0)
        g->arch_id = 0;
    /* No mode (NOT_SUPPORTED, or a driver without the call) is no attribute, as in NVIDIA's
     * driver; where that driver refuses to start (a mode added after us, another error) the
     * GPU is still served, without the attribute. */
    r = nvml_device_addressing_mode(dev, g->addressing_mode, sizeof(g->addressing_mode), &ierr);
    if (r < 0)
        g->addressing_mode[0] = 0;
    if (r == -ENOTSUP || r == -ENOSYS)
        log_debug("GPU %s: %s, no addressingMode attribute", g->uuid, ierr.msg);
    else if (r < 0)
        log_warning("GPU %s: %s, publishing no addressingMode attribute, ignoring", g->uuid, ierr.msg);

    bool bad = false;
    g->numa_node = discover_numa_node(opt->sysfs_root, g->bus_id, &bad);
    if (bad)
        log_warning("GPU %s: %s/bus/pci/devices/%s/numa_node is not a number, sending no "
                    "topology, ignoring", g->uuid, opt->sysfs_root, g->bus_id);

    if ((r = discover_pcie_root(opt->sysfs_root, g->bus_id, g->pcie_root, sizeof(g->pcie_root))) < 0)
        /* By index and bus ID: a UUID that resources.c will refuse is named only there. */
        log_debug("GPU %u (%s): no PCIe root in sysfs: %s (no pcieRoot attribute)", g->index,
                  g->bus_id, strerror(-r));

    if ((r = host_pci_class(opt->sysfs_root, g->bus_id, &g->pci_class)) < 0) {
        log_debug("GPU %s: PCI class unreadable under %s: %s (gpu.mode label unknown)", g->uuid,
                  opt->sysfs_root, strerror(-r));
        g->pci_class = 0;
    }

    bool enabled = false;
    struct error mig_err = { 0 };
    r = nvml_device_mig_mode(dev, &enabled, &mig_err);
    if (r == 0) {
        g->mig_capable = true;
        g->mig_enabled = enabled;
    } else if (r != -ENOTSUP && r != -ENOSYS) {
        *err = mig_err;
        return error_prefix(err, "GPU %s", g->uuid);
    }
    if (opt->with_mig_profiles && g->mig_capable && !vgpu_guest(dev, g) &&
        (r = discover_mig_profiles(dev, g, err)) < 0)
        return r;
    if (opt->with_mig && g->mig_enabled)
        return discover_migs(opt, dev, g, err);
    return 0;
}

/* Pair links: PCIe common ancestor, and NVLinks either direct (remote is the peer) or
 * through NVSwitches (remote is a switch both GPUs reach: all-to-all, counted as the
 * links the two share on common switches). */
static void discover_links(struct inventory *inv, nvml_device *handles)
{
    size_t n = inv->n_gpus;
    enum { MAX_LINKS = 64 };
    char(*remotes)[MAX_LINKS][32] = xcalloc(n ? n : 1, sizeof(*remotes));
    unsigned *nrem = xcalloc(n ? n : 1, sizeof(*nrem));

    inv->links = xcalloc(n ? n * n : 1, sizeof(*inv->links));
    for (size_t a = 0; a < n; a++) {
        struct error e = { 0 };
        if (!handles[a]) /* carried over while lost: its links come from the old inventory */
            continue;
        if (nvml_device_nvlink_remotes(handles[a], remotes[a], MAX_LINKS, &nrem[a], &e) < 0) {
            log_warning("GPU %s: NVLink query failed: %s, scoring its pairs without NVLink, ignoring",
                        inv->gpus[a].uuid, e.msg);
            nrem[a] = 0;
        }
    }
    for (size_t a = 0; a < n; a++) {
        for (size_t b = 0; b < n; b++) {
            if (a == b)
                continue;
            struct inv_link *l = inventory_link(inv, a, b);
            struct error e = { 0 };
            if (!handles[a] || !handles[b]) {
                l->pcie_level = -1;
                continue;
            } else if (b > a) {
                if (nvml_device_common_ancestor(handles[a], handles[b], &l->pcie_level, &e) < 0) {
                    log_debug("GPUs %u/%u: %s, pair scored without PCIe level", inv->gpus[a].index,
                              inv->gpus[b].index, e.msg);
                    l->pcie_level = -1;
                }
            } else {
                l->pcie_level = inventory_link(inv, b, a)->pcie_level;
            }
            unsigned direct = 0, switched = 0;
            for (unsigned k = 0; k < nrem[a]; k++) {
                const char *rem = remotes[a][k];
                if (streq(rem, inv->gpus[b].bus_id)) {
                    direct++;
                    continue;
                }
                bool is_gpu = false;
                for (size_t c = 0; c < n && !is_gpu; c++)
                    is_gpu = streq(rem, inv->gpus[c].bus_id);
                if (is_gpu)
                    continue;
                /* a's link k reaches a switch; it counts if b also reaches that switch,
                 * one per matching link of b, without reusing b's links */
                unsigned a_same = 0, b_same = 0;
                for (unsigned x = 0; x < nrem[a]; x++)
                    a_same += streq(remotes[a][x], rem);
                for (unsigned x = 0; x < nrem[b]; x++)
                    b_same += streq(remotes[b][x], rem);
                /* count each switch once: only at its first occurrence in a's list */
                bool first = true;
                for (unsigned x = 0; x < k && first; x++)
                    first = !streq(remotes[a][x], rem);
                if (first)
                    switched += a_same < b_same ? a_same : b_same;
            }
            l->nvlinks = direct + switched;
        }
    }
    free(remotes);
    free(nrem);
}

static const struct inv_gpu *previous_gpu(const struct inventory *prev, unsigned index)
{
    for (size_t i = 0; prev && i < prev->n_gpus; i++)
        if (prev->gpus[i].index == index)
            return &prev->gpus[i];
    return NULL;
}

/* GPU `index` answers GPU_IS_LOST. Keep its old record when the previous inventory has
 * one (its handle slot stays NULL: links are carried too), else leave it out. */
static void carry_lost(const struct discover_options *opt, unsigned index, struct inventory *out,
                       const char *why)
{
    const struct inv_gpu *old = previous_gpu(opt->previous, index);
    if (!old) {
        log_error("GPU %u: %s; not advertising it, ignoring", index, why);
        return;
    }
    struct inv_gpu *g = &out->gpus[out->n_gpus++];
    *g = *old;
    g->lost = true;
    g->migs = NULL;
    if (old->n_migs) {
        g->migs = xreallocarray(NULL, old->n_migs, sizeof(*g->migs));
        memcpy(g->migs, old->migs, old->n_migs * sizeof(*g->migs));
    }
    g->mig_profiles = NULL;
    if (old->n_mig_profiles) {
        g->mig_profiles = xreallocarray(NULL, old->n_mig_profiles, sizeof(*g->mig_profiles));
        memcpy(g->mig_profiles, old->mig_profiles, old->n_mig_profiles * sizeof(*g->mig_profiles));
    }
    log_error("GPU %u (%s): %s; keeping it advertised as Unhealthy until NVML sees it again",
              index, old->uuid, why);
}

/* Pairs with a carried-over GPU cannot be queried: take them from the old inventory. */
static void carry_links(const struct inventory *prev, struct inventory *inv)
{
    for (size_t a = 0; a < inv->n_gpus; a++) {
        for (size_t b = 0; b < inv->n_gpus; b++) {
            if (a == b || !(inv->gpus[a].lost || inv->gpus[b].lost))
                continue;
            size_t pa = SIZE_MAX, pb = SIZE_MAX;
            for (size_t i = 0; i < prev->n_gpus; i++) {
                if (streq(prev->gpus[i].uuid, inv->gpus[a].uuid))
                    pa = i;
                if (streq(prev->gpus[i].uuid, inv->gpus[b].uuid))
                    pb = i;
            }
            if (pa != SIZE_MAX && pb != SIZE_MAX && prev->links)
                *inventory_link(inv, a, b) = *inventory_link(prev, pa, pb);
        }
    }
}

int discover_node(const struct discover_options *opt, struct inventory *out, struct error *err)
{
    unsigned count = 0;
    int r;

    if ((r = nvml_system_driver_version(out->driver_version, sizeof(out->driver_version), NULL)) < 0)
        out->driver_version[0] = 0;
    int cuda = 0;
    if (nvml_system_cuda_version(&cuda, NULL) == 0 && cuda > 0) {
        out->cuda_version = cuda;
        snprintf(out->cuda_driver_version, sizeof(out->cuda_driver_version), "%d.%d",
                 cuda / 1000, (cuda % 1000) / 10);
    }

    if ((r = nvml_device_count(&count, err)) < 0)
        return r;
    nvml_device *handles = xcalloc(count ? count : 1, sizeof(*handles));
    out->gpus = xcalloc(count ? count : 1, sizeof(*out->gpus));
    for (unsigned i = 0; i < count; i++) {
        nvml_device dev;
        char name[INV_NAME_MAX];
        if ((r = nvml_device_by_index(i, &dev, err)) < 0 ||
            (r = nvml_device_name(dev, name, sizeof(name), err)) < 0) {
            if (r == -ENODEV) {
                /* A GPU that fell off the bus cannot even be named; the reference exits
                 * (and crash-loops, taking every GPU off the node). Serve the others. */
                carry_lost(opt, i, out, err->msg); /* no handle: handles[] stays NULL */
                memset(err, 0, sizeof(*err));
                continue;
            }
            error_prefix(err, "GPU %u", i);
            goto fail;
        }
        /* The DGX display adapter is not a compute GPU; its index is still used up. */
        if (streq(name, "DGX Display") || streq(name, "NVIDIA DGX Display"))
            continue;
        struct inv_gpu *g = &out->gpus[out->n_gpus];
        snprintf(g->name, sizeof(g->name), "%s", name);
        out->n_gpus++;
        if ((r = discover_gpu(i, opt, dev, g, err)) < 0) {
            if (r != -ENODEV)
                goto fail;
            free(g->migs);
            free(g->mig_profiles);
            memset(g, 0, sizeof(*g));
            out->n_gpus--;
            carry_lost(opt, i, out, err->msg);
            memset(err, 0, sizeof(*err));
            continue;
        }
        handles[out->n_gpus - 1] = dev;
    }
    if (opt->with_links) {
        discover_links(out, handles);
        if (opt->previous)
            carry_links(opt->previous, out);
    } else
        out->links = xcalloc(out->n_gpus ? out->n_gpus * out->n_gpus : 1, sizeof(*out->links));
    free(handles);
    return 0;
fail:
    free(handles);
    inventory_clear(out);
    return r;
}
