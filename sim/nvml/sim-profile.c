/* Profile → struct sim_node: the top level, system, devices and MIG (topology sections in
 * sim-profile-topo.c, the YAML reader in sim-yaml.c). The profile format is NVIDIA's mock-NVML YAML (keys we do
 * not use are ignored) plus the extensions in docs/simulator.md. Every problem is
 * reported as one "<file>:<line>: <what>" line; the first problem wins. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/macro.h"
#include "sim-errors.h"
#include "sim-model.h"
#include "sim-yaml.h"

#define SIM_MAX_PROFILE_BYTES (16u << 20)

static const struct {
    const char *name;
    unsigned value;
} brands[] = {
    { "unknown", NVML_BRAND_UNKNOWN }, { "quadro", NVML_BRAND_QUADRO },
    { "tesla", NVML_BRAND_TESLA },     { "nvs", NVML_BRAND_NVS },
    { "grid", NVML_BRAND_GRID },       { "geforce", NVML_BRAND_GEFORCE },
    { "titan", NVML_BRAND_TITAN },     { "nvidia_vapps", NVML_BRAND_NVIDIA_VAPPS },
    { "nvidia_vpc", NVML_BRAND_NVIDIA_VPC }, { "nvidia_vcs", NVML_BRAND_NVIDIA_VCS },
    { "nvidia_vws", NVML_BRAND_NVIDIA_VWS }, { "nvidia_cloud_gaming", NVML_BRAND_NVIDIA_CLOUD_GAMING },
    { "quadro_rtx", NVML_BRAND_QUADRO_RTX }, { "nvidia_rtx", NVML_BRAND_NVIDIA_RTX },
    { "nvidia", NVML_BRAND_NVIDIA },   { "geforce_rtx", NVML_BRAND_GEFORCE_RTX },
    { "titan_rtx", NVML_BRAND_TITAN_RTX },
}, archs[] = {
    { "kepler", NVML_DEVICE_ARCH_KEPLER }, { "maxwell", NVML_DEVICE_ARCH_MAXWELL },
    { "pascal", NVML_DEVICE_ARCH_PASCAL }, { "volta", NVML_DEVICE_ARCH_VOLTA },
    { "turing", NVML_DEVICE_ARCH_TURING }, { "ampere", NVML_DEVICE_ARCH_AMPERE },
    { "ada", NVML_DEVICE_ARCH_ADA },       { "hopper", NVML_DEVICE_ARCH_HOPPER },
    { "blackwell", NVML_DEVICE_ARCH_BLACKWELL }, { "rubin", NVML_DEVICE_ARCH_RUBIN },
    { "unknown", NVML_DEVICE_ARCH_UNKNOWN },
}, addressing_modes[] = {
    { "none", NVML_DEVICE_ADDRESSING_MODE_NONE }, { "hmm", NVML_DEVICE_ADDRESSING_MODE_HMM },
    { "ats", NVML_DEVICE_ADDRESSING_MODE_ATS },   { "unsupported", SIM_ADDRESSING_UNSUPPORTED },
}, virt_modes[] = { /* NVIDIA's mock profiles spell them none, passthrough, vgpu */
    { "none", NVML_GPU_VIRTUALIZATION_MODE_NONE },
    { "passthrough", NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH },
    { "vgpu", NVML_GPU_VIRTUALIZATION_MODE_VGPU },
    { "host_vgpu", NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU },
    { "host_vsga", NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA },
};

#define get_named(c, n, what, table, v) get_named_(c, n, what, table, ELEMENTSOF(table), v)
static int get_named_(struct yp_ctx *c, yaml_node_t *n, const char *what,
                      const __typeof__(brands[0]) *table, size_t len, unsigned *v)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!strcasecmp(table[i].name, s)) {
            *v = table[i].value;
            return 0;
        }
    uint64_t x;
    char *end;
    errno = 0;
    x = strtoull(s, &end, 0);
    if (*s && !errno && !*end && x <= 0xffffffffULL) {
        *v = (unsigned)x;
        return 0;
    }
    return yp_fail(c, n, "%s: unknown value '%s'", what, s);
}

static int parse_system(struct yp_ctx *c, yaml_node_t *root, struct sim_node *nd)
{
    snprintf(nd->driver_version, sizeof(nd->driver_version), "550.54.15");
    nd->cuda_version = 12040;
    yaml_node_t *sys = yp_map_get(c, root, "system", 6);
    if (!sys) {
        snprintf(nd->nvml_version, sizeof(nd->nvml_version), "12.%.70s", nd->driver_version);
        return 0;
    }
    if (!yp_is_map(sys))
        return yp_fail(c, sys, "system: expected a mapping");
    yaml_node_t *n;
    if ((n = yp_map_get(c, sys, "driver_version", 14)) &&
        yp_str(c, n, "system.driver_version", nd->driver_version, sizeof(nd->driver_version)) < 0)
        return -EINVAL;
    if ((n = yp_map_get(c, sys, "nvml_version", 12))) {
        if (yp_str(c, n, "system.nvml_version", nd->nvml_version, sizeof(nd->nvml_version)) < 0)
            return -EINVAL;
    } else
        snprintf(nd->nvml_version, sizeof(nd->nvml_version), "12.%.70s", nd->driver_version);

    yaml_node_t *maj = yp_map_get(c, sys, "cuda_version_major", 18);
    yaml_node_t *min = yp_map_get(c, sys, "cuda_version_minor", 18);
    if (maj) {
        int a = 0, b = 0;
        if (yp_int(c, maj, "system.cuda_version_major", 1, 99, &a) < 0 ||
            YP_OPT(yp_int, c, min, "system.cuda_version_minor", 0, 99, &b) < 0)
            return -EINVAL;
        nd->cuda_version = a * 1000 + b * 10;
    } else if ((n = yp_map_get(c, sys, "cuda_version", 12))) {
        const char *s = yp_scalar(c, n, "system.cuda_version");
        unsigned a, b;
        char tail;
        if (!s)
            return -EINVAL;
        if (sscanf(s, "%u.%u%c", &a, &b, &tail) != 2 || a < 1 || a > 99 || b > 99)
            return yp_fail(c, n, "system.cuda_version: expected MAJOR.MINOR, got '%s'", s);
        nd->cuda_version = (int)(a * 1000 + b * 10);
    }
    if ((n = yp_map_get(c, sys, "init_error", 10))) {
        const char *s = yp_scalar(c, n, "system.init_error");
        if (!s)
            return -EINVAL;
        if (sim_parse_return(s, &nd->init_error) < 0)
            return yp_fail(c, n, "system.init_error: unknown NVML return code '%s'", s);
    }
    return 0;
}

static int parse_mig_mode(struct yp_ctx *c, yaml_node_t *n, const char *what, unsigned *mode)
{
    bool on;
    if (yp_bool(c, n, what, &on) < 0)
        return -EINVAL;
    *mode = on ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return 0;
}

static int parse_device(struct yp_ctx *c, yaml_node_t *dn, yaml_node_t *defs, unsigned idx,
                        struct sim_device *d)
{
    yaml_node_t *n;
    if (!yp_is_map(dn))
        return yp_fail(c, dn, "devices[%u]: expected a mapping", idx);
    d->index = idx;
    d->numa_node = -1;
    d->root_complex = -1;
    d->pcie_switch = -1;
    d->events_supported = true;
    d->brand = NVML_BRAND_NVIDIA;
    d->arch = NVML_DEVICE_ARCH_UNKNOWN;

    if ((n = yp_map_get(c, dn, "index", 5))) {
        unsigned i = 0;
        if (yp_uint(c, n, "index", SIM_MAX_DEVICES, &i) < 0)
            return -EINVAL;
        if (i != idx)
            return yp_fail(c, n, "index: %u does not match the device's position %u in devices", i, idx);
    }
    if (!(n = yp_map_get(c, dn, "uuid", 4)))
        return yp_fail(c, dn, "devices[%u]: missing uuid", idx);
    if (yp_str(c, n, "uuid", d->uuid, NVML_DEVICE_UUID_ASCII_LEN) < 0)
        return -EINVAL;
    if (!startswith(d->uuid, "GPU-") || strlen(d->uuid) < 5 || strpbrk(d->uuid, " /\t"))
        return yp_fail(c, n, "uuid: '%s' is not a GPU UUID (GPU-...)", d->uuid);

    if (!(n = yp_dget(c, dn, defs, "name")))
        return c->failed ? -EINVAL : yp_fail(c, dn, "devices[%u]: missing name", idx);
    if (yp_str(c, n, "name", d->name, NVML_DEVICE_NAME_V2_BUFFER_SIZE) < 0)
        return -EINVAL;
#define FIELD(path, getter, ...)                                                      \
    do {                                                                              \
        yaml_node_t *f_ = yp_dget(c, dn, defs, path);                                    \
        if (c->failed || YP_OPT(getter, c, f_, path, __VA_ARGS__) < 0)                   \
            return -EINVAL;                                                           \
    } while (0)
    FIELD("serial", yp_str, d->serial, sizeof(d->serial));
    FIELD("board_part_number", yp_str, d->board_part, sizeof(d->board_part));
    FIELD("brand", get_named, brands, &d->brand);
    FIELD("architecture", get_named, archs, &d->arch);
    /* Without a profile saying otherwise: HMM from Turing on, the mode NVIDIA's open kernel
     * modules (the default since R560) give an x86 GPU by mirroring the CPU's page tables;
     * NOT_SUPPORTED before Turing (NVML documents the call for Turing or newer).
     * Coherent systems (Grace) answer ATS; NONE: neither is active. */
    d->addressing_mode = d->arch < NVML_DEVICE_ARCH_TURING ? SIM_ADDRESSING_UNSUPPORTED
                                                           : NVML_DEVICE_ADDRESSING_MODE_HMM;
    FIELD("addressing_mode", get_named, addressing_modes, &d->addressing_mode);
    d->virt_mode = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    FIELD("virtualization.mode", get_named, virt_modes, &d->virt_mode);

    if ((n = yp_path_get(c, dn, "pci.bus_id"))) {
        if (yp_bdf(c, n, "pci.bus_id", &d->bdf) < 0)
            return -EINVAL;
    } else if (c->failed)
        return -EINVAL;
    else
        d->bdf = (struct sim_bdf){ 0, 0x10 + idx, 0, 0 };
    uint64_t v = 0x20B010DE;
    FIELD("pci.device_id", yp_u64, 0xffffffffULL, &v);
    d->pci_device_id = (uint32_t)v;
    v = 0;
    FIELD("pci.subsystem_id", yp_u64, 0xffffffffULL, &v);
    d->pci_subsystem_id = (uint32_t)v;

    d->minor = idx;
    if ((n = yp_map_get(c, dn, "minor_number", 12)) && yp_uint(c, n, "minor_number", 254, &d->minor) < 0)
        return -EINVAL;

    if (!(n = yp_dget(c, dn, defs, "compute_capability.major")))
        return c->failed ? -EINVAL : yp_fail(c, dn, "devices[%u]: missing compute_capability.major", idx);
    if (yp_int(c, n, "compute_capability.major", 0, 99, &d->cc_major) < 0)
        return -EINVAL;
    FIELD("compute_capability.minor", yp_int, 0, 99, &d->cc_minor);

    d->mem_total = 40ULL << 30;
    FIELD("memory.total_bytes", yp_u64, UINT64_MAX, &d->mem_total);
    FIELD("memory.reserved_bytes", yp_u64, d->mem_total, &d->mem_reserved);
    d->mem_free = d->mem_total - d->mem_reserved;
    FIELD("memory.free_bytes", yp_u64, d->mem_total - d->mem_reserved, &d->mem_free);
    d->mem_used = d->mem_total - d->mem_reserved - d->mem_free;
    FIELD("bar1_memory.total_bytes", yp_u64, UINT64_MAX, &d->bar1_total);
    d->bar1_free = d->bar1_total;
    FIELD("bar1_memory.free_bytes", yp_u64, d->bar1_total, &d->bar1_free);
    d->bar1_used = d->bar1_total - d->bar1_free;

    FIELD("pcie.max_link_gen", yp_uint, 16, &d->pcie_max_gen);
    FIELD("pcie.max_link_width", yp_uint, 64, &d->pcie_max_width);
    FIELD("power.default_limit_mw", yp_uint, 10000000, &d->power_limit_mw);
    FIELD("power.enforced_limit_mw", yp_uint, 10000000, &d->power_limit_mw);
    FIELD("thermal.temperature_gpu_c", yp_uint, 200, &d->temperature_c);
    FIELD("clocks.graphics_max", yp_uint, 100000, &d->clock_max[NVML_CLOCK_GRAPHICS]);
    FIELD("clocks.sm_max", yp_uint, 100000, &d->clock_max[NVML_CLOCK_SM]);
    FIELD("clocks.memory_max", yp_uint, 100000, &d->clock_max[NVML_CLOCK_MEM]);
    FIELD("clocks.video_max", yp_uint, 100000, &d->clock_max[NVML_CLOCK_VIDEO]);
    FIELD("clocks.graphics_current", yp_uint, 100000, &d->clock_cur[NVML_CLOCK_GRAPHICS]);
    FIELD("clocks.sm_current", yp_uint, 100000, &d->clock_cur[NVML_CLOCK_SM]);
    FIELD("clocks.memory_current", yp_uint, 100000, &d->clock_cur[NVML_CLOCK_MEM]);
    FIELD("clocks.video_current", yp_uint, 100000, &d->clock_cur[NVML_CLOCK_VIDEO]);

    FIELD("mig.mode_current", parse_mig_mode, &d->mig_mode);
    d->mig_pending = d->mig_mode;
    FIELD("mig.mode_pending", parse_mig_mode, &d->mig_pending);
    FIELD("board", yp_str, d->board, sizeof(d->board));
    FIELD("lost", yp_bool, &d->lost);
    FIELD("events_supported", yp_bool, &d->events_supported);
#undef FIELD
    d->mig_table = sim_mig_table_for(d->name);
    if (!d->mig_table && (d->mig_mode || d->mig_pending))
        return yp_fail(c, yp_dget(c, dn, defs, "mig"), "mig: '%s' is not MIG capable", d->name);
    return 0;
}

/* Deterministic MIG UUID from the GPU UUID and the GI/CI ids (FNV-1a). */
static void derive_mig_uuid(const char *gpu, unsigned gi, unsigned ci, char *out, size_t size)
{
    char key[128];
    snprintf(key, sizeof(key), "%s/%u/%u", gpu, gi, ci);
    uint64_t h1 = 0xcbf29ce484222325ULL, h2 = 0x84222325cbf29ce4ULL;
    for (const char *p = key; *p; p++) {
        h1 = (h1 ^ (unsigned char)*p) * 0x100000001b3ULL;
        h2 = (h2 ^ (unsigned char)*p) * 0x100000001b3ULL + 1;
    }
    snprintf(out, size, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned)(h1 >> 32),
             (unsigned)(h1 >> 16) & 0xffff, (unsigned)h1 & 0xffff, (unsigned)(h2 >> 48),
             (unsigned long long)(h2 & 0xffffffffffffULL));
}

static int parse_cis(struct yp_ctx *c, yaml_node_t *gin, struct sim_gi *gi)
{
    yaml_node_t *seq = yp_map_get(c, gin, "compute_instances", 17);
    if (!seq) {
        /* No CI list: one CI spanning the whole GI, id 0. */
        gi->cis = xcalloc(1, sizeof(*gi->cis));
        gi->n_cis = 1;
        gi->cis[0] = (struct sim_ci){ .id = 0, .gi = gi };
        sim_mig_ci_by_name(gi->prof, gi->prof->name, &gi->cis[0].prof);
        return 0;
    }
    if (seq->type != YAML_SEQUENCE_NODE)
        return yp_fail(c, seq, "compute_instances: expected a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0 || n > gi->prof->slices)
        return yp_fail(c, seq, "compute_instances: %zu compute instances do not fit GI %u (%s)", n,
                    gi->id, gi->prof->name);
    gi->cis = xcalloc(n, sizeof(*gi->cis));
    unsigned used = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *cn = yp_node(c, seq->data.sequence.items.start[i]);
        struct sim_ci *ci = &gi->cis[gi->n_cis];
        if (!yp_is_map(cn))
            return yp_fail(c, cn, "compute_instances[%zu]: expected a mapping", i);
        *ci = (struct sim_ci){ .gi = gi };
        gi->n_cis++;
        yaml_node_t *f = yp_map_get(c, cn, "id", 2);
        if (!f)
            return yp_fail(c, cn, "compute_instances[%zu]: missing id", i);
        if (yp_uint(c, f, "compute_instances.id", 7, &ci->id) < 0)
            return -EINVAL;
        for (unsigned j = 0; j + 1 < gi->n_cis; j++)
            if (gi->cis[j].id == ci->id)
                return yp_fail(c, f, "compute_instances.id: duplicate CI id %u in GI %u", ci->id, gi->id);
        if (!(f = yp_map_get(c, cn, "profile", 7)))
            return yp_fail(c, cn, "compute_instances[%zu]: missing profile", i);
        const char *pn = yp_scalar(c, f, "compute_instances.profile");
        if (!pn)
            return -EINVAL;
        if (!sim_mig_ci_by_name(gi->prof, pn, &ci->prof))
            return yp_fail(c, f, "compute_instances.profile: '%s' is not a compute profile of GI profile %s",
                        pn, gi->prof->name);
        ci->start = used;
        used += ci->prof.slices;
        if (used > gi->prof->slices)
            return yp_fail(c, f, "compute_instances: compute slices exceed the %u of GI %u", gi->prof->slices,
                        gi->id);
        if ((f = yp_map_get(c, cn, "uuid", 4))) {
            char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
            if (yp_str(c, f, "compute_instances.uuid", u, NVML_DEVICE_UUID_ASCII_LEN + 4) < 0)
                return -EINVAL;
            if (!startswith(u, "MIG-") || strpbrk(u, " /\t"))
                return yp_fail(c, f, "compute_instances.uuid: '%s' is not a MIG UUID (MIG-...)", u);
            /* build_mig_devices() copies it into the MIG device object. */
        }
    }
    return 0;
}

static int parse_mig(struct yp_ctx *c, yaml_node_t *dn, yaml_node_t *defs, struct sim_device *d)
{
    yaml_node_t *seq = yp_dget(c, dn, defs, "mig.gpu_instances");
    if (c->failed)
        return -EINVAL;
    if (!seq)
        return 0;
    if (d->mig_mode != NVML_DEVICE_MIG_ENABLE)
        return yp_fail(c, seq, "mig.gpu_instances: given but MIG mode is disabled");
    if (seq->type != YAML_SEQUENCE_NODE)
        return yp_fail(c, seq, "mig.gpu_instances: expected a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > d->mig_table->max_devices)
        return yp_fail(c, seq, "mig.gpu_instances: %zu GPU instances, at most %u fit", n,
                    d->mig_table->max_devices);
    d->gis = xcalloc(n ? n : 1, sizeof(*d->gis));
    unsigned slices = 0, mem_used = 0; /* bitmap of memory slices */
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *gn = yp_node(c, seq->data.sequence.items.start[i]);
        struct sim_gi *gi = &d->gis[d->n_gis];
        if (!yp_is_map(gn))
            return yp_fail(c, gn, "gpu_instances[%zu]: expected a mapping", i);
        *gi = (struct sim_gi){ .parent = d };
        d->n_gis++;
        yaml_node_t *f = yp_map_get(c, gn, "id", 2);
        if (!f)
            return yp_fail(c, gn, "gpu_instances[%zu]: missing id", i);
        if (yp_uint(c, f, "gpu_instances.id", 14, &gi->id) < 0)
            return -EINVAL;
        for (unsigned j = 0; j + 1 < d->n_gis; j++)
            if (d->gis[j].id == gi->id)
                return yp_fail(c, f, "gpu_instances.id: duplicate GI id %u", gi->id);
        if (!(f = yp_map_get(c, gn, "profile", 7)))
            return yp_fail(c, gn, "gpu_instances[%zu]: missing profile", i);
        const char *pn = yp_scalar(c, f, "gpu_instances.profile");
        if (!pn)
            return -EINVAL;
        if (!(gi->prof = sim_mig_gi_by_name(d->mig_table, pn)))
            return yp_fail(c, f, "gpu_instances.profile: '%s' is not a GPU instance profile of %s", pn,
                        d->mig_table->gpu);
        unsigned same = 0;
        for (unsigned j = 0; j < d->n_gis; j++)
            same += d->gis[j].prof == gi->prof;
        if (same > gi->prof->instances)
            return yp_fail(c, f, "gpu_instances.profile: more than %u instances of %s", gi->prof->instances,
                        gi->prof->name);
        slices += gi->prof->slices;
        if (slices > d->mig_table->max_devices)
            return yp_fail(c, f, "gpu_instances: compute slices exceed the %u of the GPU",
                        d->mig_table->max_devices);
        unsigned size = gi->prof->placement_size, mask = ((1u << size) - 1);
        if ((f = yp_map_get(c, gn, "placement_start", 15))) {
            if (yp_uint(c, f, "gpu_instances.placement_start", d->mig_table->memory_slices - 1,
                         &gi->start) < 0)
                return -EINVAL;
            if (gi->start % size || gi->start + size > d->mig_table->memory_slices)
                return yp_fail(c, f, "gpu_instances.placement_start: %u is not a valid start for %s", gi->start,
                            gi->prof->name);
            if (mem_used & (mask << gi->start))
                return yp_fail(c, f, "gpu_instances.placement_start: GI %u overlaps another GPU instance",
                            gi->id);
        } else {
            /* First free aligned start. */
            unsigned s = 0;
            while (s + size <= d->mig_table->memory_slices && (mem_used & (mask << s)))
                s += size;
            if (s + size > d->mig_table->memory_slices)
                return yp_fail(c, gn, "gpu_instances[%zu]: no free placement for %s", i, gi->prof->name);
            gi->start = s;
        }
        mem_used |= mask << gi->start;
        if (parse_cis(c, gn, gi) < 0)
            return -EINVAL;
    }
    return 0;
}

/* Build the MIG device objects (one per CI) and their UUIDs. */
static int build_mig_devices(struct yp_ctx *c, yaml_node_t *dn, yaml_node_t *defs, struct sim_device *d)
{
    unsigned total = 0;
    for (unsigned g = 0; g < d->n_gis; g++)
        total += d->gis[g].n_cis;
    if (!total)
        return 0;
    d->migs = xcalloc(total, sizeof(*d->migs));
    yaml_node_t *seq = yp_dget(c, dn, defs, "mig.gpu_instances");
    for (unsigned g = 0; g < d->n_gis; g++) {
        struct sim_gi *gi = &d->gis[g];
        yaml_node_t *gn = yp_node(c, seq->data.sequence.items.start[g]);
        yaml_node_t *cseq = yp_map_get(c, gn, "compute_instances", 17);
        for (unsigned k = 0; k < gi->n_cis; k++) {
            struct sim_ci *ci = &gi->cis[k];
            struct sim_device *m = xcalloc(1, sizeof(*m));
            *m = *d;
            m->is_mig = true;
            m->index = d->n_migs;
            m->parent = d;
            m->gi = gi;
            m->ci = ci;
            m->gis = NULL;
            m->n_gis = 0;
            m->migs = NULL;
            m->n_migs = 0;
            m->mem_total = (uint64_t)gi->prof->memory_mb << 20;
            m->mem_reserved = 0;
            m->mem_free = m->mem_total;
            m->mem_used = 0;
            char pname[80];
            if (ci->prof.slices == gi->prof->slices)
                snprintf(pname, sizeof(pname), "%s", gi->prof->name);
            else
                snprintf(pname, sizeof(pname), "%s", ci->prof.name);
            snprintf(m->name, sizeof(m->name), "%.60s MIG %.30s", d->name, pname);
            yaml_node_t *un = NULL;
            if (cseq)
                un = yp_map_get(c, yp_node(c, cseq->data.sequence.items.start[k]), "uuid", 4);
            if (un)
                snprintf(m->uuid, sizeof(m->uuid), "%s", (const char *)un->data.scalar.value);
            else
                derive_mig_uuid(d->uuid, gi->id, ci->id, m->uuid, sizeof(m->uuid));
            ci->mig = m;
            d->migs[d->n_migs++] = m;
        }
    }
    return 0;
}

static int check_unique(struct yp_ctx *c, yaml_node_t *devs, struct sim_node *nd)
{
    for (unsigned i = 0; i < nd->n_devs; i++) {
        struct sim_device *a = &nd->devs[i];
        yaml_node_t *dn = yp_node(c, devs->data.sequence.items.start[i]);
        for (unsigned j = 0; j < i; j++) {
            struct sim_device *b = &nd->devs[j];
            if (!strcasecmp(a->uuid, b->uuid))
                return yp_fail(c, yp_map_get(c, dn, "uuid", 4), "uuid: duplicate UUID %s (also device %u)", a->uuid, j);
            if (yp_bdf_eq(&a->bdf, &b->bdf))
                return yp_fail(c, dn, "pci.bus_id: device %u has the same bus id as device %u", i, j);
            if (a->minor == b->minor)
                return yp_fail(c, dn, "minor_number: device %u has the same minor number as device %u", i, j);
        }
        for (unsigned m = 0; m < a->n_migs; m++)
            for (unsigned j = 0; j <= i; j++)
                for (unsigned k = 0; k < nd->devs[j].n_migs; k++) {
                    if (j == i && k >= m)
                        break;
                    if (!strcasecmp(a->migs[m]->uuid, nd->devs[j].migs[k]->uuid))
                        return yp_fail(c, dn, "compute_instances.uuid: duplicate MIG UUID %s", a->migs[m]->uuid);
                }
    }
    return 0;
}

static int parse_root(struct yp_ctx *c, struct sim_node *nd)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc);
    if (!root)
        return yp_fail(c, NULL, "empty profile");
    if (!yp_is_map(root))
        return yp_fail(c, root, "top level: expected a mapping");
    if (parse_system(c, root, nd) < 0)
        return -EINVAL;
    yaml_node_t *defs = yp_map_get(c, root, "device_defaults", 15);
    if (defs && !yp_is_map(defs))
        return yp_fail(c, defs, "device_defaults: expected a mapping");
    yaml_node_t *devs = yp_map_get(c, root, "devices", 7);
    if (!devs)
        return yp_fail(c, root, "missing devices");
    if (devs->type != YAML_SEQUENCE_NODE)
        return yp_fail(c, devs, "devices: expected a sequence");
    size_t n = (size_t)(devs->data.sequence.items.top - devs->data.sequence.items.start);
    if (n > SIM_MAX_DEVICES)
        return yp_fail(c, devs, "devices: %zu devices, at most %d supported", n, SIM_MAX_DEVICES);
    nd->devs = xcalloc(n ? n : 1, sizeof(*nd->devs));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *dn = yp_node(c, devs->data.sequence.items.start[i]);
        nd->n_devs++;
        if (parse_device(c, dn, defs, (unsigned)i, &nd->devs[i]) < 0 ||
            (nd->devs[i].mig_mode == NVML_DEVICE_MIG_ENABLE && parse_mig(c, dn, defs, &nd->devs[i]) < 0) ||
            build_mig_devices(c, dn, defs, &nd->devs[i]) < 0)
            return -EINVAL;
    }
    if (check_unique(c, devs, nd) < 0 || sim_profile_parse_nvlink(c, root, devs, nd) < 0 || sim_profile_parse_pcie(c, root, nd) < 0)
        return -EINVAL;
    return 0;
}

struct sim_node *sim_profile_parse(const char *name, const unsigned char *buf, size_t len, char *err,
                                   size_t errlen)
{
    struct yp_ctx c = { .name = name, .err = err, .errlen = errlen };
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        oom();
    yaml_parser_set_input_string(&parser, buf, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        snprintf(err, errlen, "%s:%lu: YAML syntax error: %s%s%s", name,
                 (unsigned long)parser.problem_mark.line + 1, parser.problem ? parser.problem : "unknown",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        yp_one_line(err);
        yaml_parser_delete(&parser);
        return NULL;
    }
    yaml_parser_delete(&parser);
    struct sim_node *nd = xcalloc(1, sizeof(*nd));
    int r = parse_root(&c, nd);
    yaml_document_delete(&c.doc);
    if (r < 0) {
        sim_node_free(nd);
        return NULL;
    }
    return nd;
}

struct sim_node *sim_profile_load(const char *path, char *err, size_t errlen)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > SIM_MAX_PROFILE_BYTES) {
        snprintf(err, errlen, "%s:0: not a regular file of at most %u bytes", path, SIM_MAX_PROFILE_BYTES);
        return NULL;
    }
    size_t size = (size_t)st.st_size, got = 0;
    _cleanup_free_ unsigned char *buf = xmalloc(size + 1);
    while (got < size) {
        ssize_t k = RETRY_EINTR(read(fd, buf + got, size - got));
        if (k < 0) {
            snprintf(err, errlen, "%s:0: read: %s", path, strerror(errno));
            return NULL;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    return sim_profile_parse(path, buf, got, err, errlen);
}

void sim_node_free(struct sim_node *nd)
{
    if (!nd)
        return;
    for (unsigned i = 0; i < nd->n_devs; i++) {
        struct sim_device *d = &nd->devs[i];
        for (unsigned m = 0; m < d->n_migs; m++)
            free(d->migs[m]);
        free(d->migs);
        for (unsigned g = 0; g < d->n_gis; g++)
            free(d->gis[g].cis);
        free(d->gis);
    }
    free(nd->devs);
    free(nd->nvswitches);
    free(nd->rcs);
    free(nd->pcie_switches);
    free(nd);
}
