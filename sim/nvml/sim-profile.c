/* Profile → struct sim_node. The profile format is NVIDIA's mock-NVML YAML (keys we do
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

#define SIM_MAX_DEVICES 64
#define SIM_MAX_PROFILE_BYTES (16u << 20)

struct pctx {
    yaml_document_t doc;
    const char *name;
    char *err;
    size_t errlen;
    bool failed;
};

/* Values quoted in messages may hold newlines or other control bytes: the message must
 * stay one printable line. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

static unsigned long line_of(const yaml_node_t *n) { return n ? (unsigned long)n->start_mark.line + 1 : 1; }

_printf_(3, 4) static int fail(struct pctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    if (c->failed)
        return -EINVAL;
    c->failed = true;
    int k = snprintf(c->err, c->errlen, "%s:%lu: ", c->name, line_of(n));
    if (k >= 0 && (size_t)k < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    one_line(c->err);
    return -EINVAL;
}

static yaml_node_t *node(struct pctx *c, int id) { return yaml_document_get_node(&c->doc, id); }

static bool is_map(const yaml_node_t *n) { return n && n->type == YAML_MAPPING_NODE; }

/* Scalar text of a node; NULL (after failing) if it is not a plain string. */
static const char *scalar(struct pctx *c, yaml_node_t *n, const char *what)
{
    if (!n || n->type != YAML_SCALAR_NODE) {
        fail(c, n, "%s: expected a scalar", what);
        return NULL;
    }
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) {
        fail(c, n, "%s: embedded NUL character", what);
        return NULL;
    }
    return s;
}

static yaml_node_t *map_get(struct pctx *c, yaml_node_t *map, const char *key, size_t keylen)
{
    if (!is_map(map))
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == keylen &&
            memcmp(k->data.scalar.value, key, keylen) == 0)
            return node(c, p->value);
    }
    return NULL;
}

/* Look up a dotted path ("memory.total_bytes"). An intermediate that exists but is not
 * a mapping is a type error. */
static yaml_node_t *path_get(struct pctx *c, yaml_node_t *map, const char *path)
{
    yaml_node_t *n = map;
    const char *p = path;
    while (n) {
        size_t len = strcspn(p, ".");
        if (!is_map(n)) {
            fail(c, n, "%.*s: expected a mapping", (int)(p - path - 1), path);
            return NULL;
        }
        n = map_get(c, n, p, len);
        if (!p[len])
            return n;
        p += len + 1;
    }
    return NULL;
}

/* device_defaults deep-merged under a device: the device's own value wins, path by
 * path. */
static yaml_node_t *dget(struct pctx *c, yaml_node_t *dev, yaml_node_t *defaults, const char *path)
{
    yaml_node_t *n = path_get(c, dev, path);
    if (!n && !c->failed && defaults)
        n = path_get(c, defaults, path);
    return n;
}

static int get_str(struct pctx *c, yaml_node_t *n, const char *what, char *buf, size_t size)
{
    const char *s = scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (strlen(s) >= size)
        return fail(c, n, "%s: too long (at most %zu characters)", what, size - 1);
    snprintf(buf, size, "%s", s);
    return 0;
}

static int get_u64(struct pctx *c, yaml_node_t *n, const char *what, uint64_t max, uint64_t *v)
{
    const char *s = scalar(c, n, what);
    if (!s)
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (!*s || *s == '-' || *s == '+' || *s == ' ' || errno || *end)
        return fail(c, n, "%s: expected a non-negative integer, got '%s'", what, s);
    if (x > max)
        return fail(c, n, "%s: %llu is out of range (at most %llu)", what, x, (unsigned long long)max);
    *v = x;
    return 0;
}

static int get_uint(struct pctx *c, yaml_node_t *n, const char *what, unsigned max, unsigned *v)
{
    uint64_t x;
    int r = get_u64(c, n, what, max, &x);
    if (r == 0)
        *v = (unsigned)x;
    return r;
}

static int get_int(struct pctx *c, yaml_node_t *n, const char *what, int min, int max, int *v)
{
    const char *s = scalar(c, n, what);
    if (!s)
        return -EINVAL;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || errno || *end)
        return fail(c, n, "%s: expected an integer, got '%s'", what, s);
    if (x < min || x > max)
        return fail(c, n, "%s: %ld is out of range (%d..%d)", what, x, min, max);
    *v = (int)x;
    return 0;
}

static int get_bool(struct pctx *c, yaml_node_t *n, const char *what, bool *v)
{
    const char *s = scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
        !strcasecmp(s, "enabled"))
        *v = true;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
             !strcasecmp(s, "disabled"))
        *v = false;
    else
        return fail(c, n, "%s: expected true or false, got '%s'", what, s);
    return 0;
}

/* Optional typed fields: absent leaves *v untouched. */
#define OPT(getter, c, n, what, ...) ((n) ? getter(c, n, what, __VA_ARGS__) : 0)

int sim_parse_bdf(const char *s, struct sim_bdf *bdf)
{
    unsigned long part[4];
    int n = 0;
    const char *p = s;
    char seps[4] = { 0 };
    while (n < 4) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return -EINVAL;
        char *end;
        errno = 0;
        part[n] = strtoul(p, &end, 16);
        if (errno || end - p > 8)
            return -EINVAL;
        seps[n] = *end;
        n++;
        if (!*end)
            break;
        if (*end != ':' && *end != '.')
            return -EINVAL;
        p = end + 1;
    }
    if (*p && n == 4 && seps[3])
        return -EINVAL;
    struct sim_bdf b = { 0 };
    if (n == 4 && seps[0] == ':' && seps[1] == ':' && seps[2] == '.' && !seps[3])
        b = (struct sim_bdf){ part[0], part[1], part[2], part[3] };
    else if (n == 3 && seps[0] == ':' && seps[1] == ':' && !seps[2])
        b = (struct sim_bdf){ part[0], part[1], part[2], 0 };
    else if (n == 3 && seps[0] == ':' && seps[1] == '.' && !seps[2])
        b = (struct sim_bdf){ 0, part[0], part[1], part[2] };
    else
        return -EINVAL;
    if (part[0] > 0xffffffffUL || b.domain > 0xffff || b.bus > 0xff || b.device > 0x1f || b.function > 7)
        return -EINVAL;
    *bdf = b;
    return 0;
}

static bool bdf_eq(const struct sim_bdf *a, const struct sim_bdf *b)
{
    return a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
           a->function == b->function;
}

static int get_bdf(struct pctx *c, yaml_node_t *n, const char *what, struct sim_bdf *bdf)
{
    const char *s = scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (sim_parse_bdf(s, bdf) < 0)
        return fail(c, n, "%s: bad PCI bus id '%s' (want DDDD:BB:DD.F)", what, s);
    return 0;
}

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
};

#define get_named(c, n, what, table, v) get_named_(c, n, what, table, ELEMENTSOF(table), v)
static int get_named_(struct pctx *c, yaml_node_t *n, const char *what,
                      const __typeof__(brands[0]) *table, size_t len, unsigned *v)
{
    const char *s = scalar(c, n, what);
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
    return fail(c, n, "%s: unknown value '%s'", what, s);
}

static int parse_system(struct pctx *c, yaml_node_t *root, struct sim_node *nd)
{
    snprintf(nd->driver_version, sizeof(nd->driver_version), "550.54.15");
    nd->cuda_version = 12040;
    yaml_node_t *sys = map_get(c, root, "system", 6);
    if (!sys) {
        snprintf(nd->nvml_version, sizeof(nd->nvml_version), "12.%.70s", nd->driver_version);
        return 0;
    }
    if (!is_map(sys))
        return fail(c, sys, "system: expected a mapping");
    yaml_node_t *n;
    if ((n = map_get(c, sys, "driver_version", 14)) &&
        get_str(c, n, "system.driver_version", nd->driver_version, sizeof(nd->driver_version)) < 0)
        return -EINVAL;
    if ((n = map_get(c, sys, "nvml_version", 12))) {
        if (get_str(c, n, "system.nvml_version", nd->nvml_version, sizeof(nd->nvml_version)) < 0)
            return -EINVAL;
    } else
        snprintf(nd->nvml_version, sizeof(nd->nvml_version), "12.%.70s", nd->driver_version);

    yaml_node_t *maj = map_get(c, sys, "cuda_version_major", 18);
    yaml_node_t *min = map_get(c, sys, "cuda_version_minor", 18);
    if (maj) {
        int a = 0, b = 0;
        if (get_int(c, maj, "system.cuda_version_major", 1, 99, &a) < 0 ||
            OPT(get_int, c, min, "system.cuda_version_minor", 0, 99, &b) < 0)
            return -EINVAL;
        nd->cuda_version = a * 1000 + b * 10;
    } else if ((n = map_get(c, sys, "cuda_version", 12))) {
        const char *s = scalar(c, n, "system.cuda_version");
        unsigned a, b;
        char tail;
        if (!s)
            return -EINVAL;
        if (sscanf(s, "%u.%u%c", &a, &b, &tail) != 2 || a < 1 || a > 99 || b > 99)
            return fail(c, n, "system.cuda_version: expected MAJOR.MINOR, got '%s'", s);
        nd->cuda_version = (int)(a * 1000 + b * 10);
    }
    if ((n = map_get(c, sys, "init_error", 10))) {
        const char *s = scalar(c, n, "system.init_error");
        if (!s)
            return -EINVAL;
        if (sim_parse_return(s, &nd->init_error) < 0)
            return fail(c, n, "system.init_error: unknown NVML return code '%s'", s);
    }
    return 0;
}

static int parse_mig_mode(struct pctx *c, yaml_node_t *n, const char *what, unsigned *mode)
{
    bool on;
    if (get_bool(c, n, what, &on) < 0)
        return -EINVAL;
    *mode = on ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return 0;
}

static int parse_device(struct pctx *c, yaml_node_t *dn, yaml_node_t *defs, unsigned idx,
                        struct sim_device *d)
{
    yaml_node_t *n;
    if (!is_map(dn))
        return fail(c, dn, "devices[%u]: expected a mapping", idx);
    d->index = idx;
    d->numa_node = -1;
    d->root_complex = -1;
    d->pcie_switch = -1;
    d->events_supported = true;
    d->brand = NVML_BRAND_NVIDIA;
    d->arch = NVML_DEVICE_ARCH_UNKNOWN;

    if ((n = map_get(c, dn, "index", 5))) {
        unsigned i = 0;
        if (get_uint(c, n, "index", SIM_MAX_DEVICES, &i) < 0)
            return -EINVAL;
        if (i != idx)
            return fail(c, n, "index: %u does not match the device's position %u in devices", i, idx);
    }
    if (!(n = map_get(c, dn, "uuid", 4)))
        return fail(c, dn, "devices[%u]: missing uuid", idx);
    if (get_str(c, n, "uuid", d->uuid, NVML_DEVICE_UUID_ASCII_LEN) < 0)
        return -EINVAL;
    if (!startswith(d->uuid, "GPU-") || strlen(d->uuid) < 5 || strpbrk(d->uuid, " /\t"))
        return fail(c, n, "uuid: '%s' is not a GPU UUID (GPU-...)", d->uuid);

    if (!(n = dget(c, dn, defs, "name")))
        return c->failed ? -EINVAL : fail(c, dn, "devices[%u]: missing name", idx);
    if (get_str(c, n, "name", d->name, NVML_DEVICE_NAME_V2_BUFFER_SIZE) < 0)
        return -EINVAL;
#define FIELD(path, getter, ...)                                                      \
    do {                                                                              \
        yaml_node_t *f_ = dget(c, dn, defs, path);                                    \
        if (c->failed || OPT(getter, c, f_, path, __VA_ARGS__) < 0)                   \
            return -EINVAL;                                                           \
    } while (0)
    FIELD("serial", get_str, d->serial, sizeof(d->serial));
    FIELD("board_part_number", get_str, d->board_part, sizeof(d->board_part));
    FIELD("brand", get_named, brands, &d->brand);
    FIELD("architecture", get_named, archs, &d->arch);

    if ((n = path_get(c, dn, "pci.bus_id"))) {
        if (get_bdf(c, n, "pci.bus_id", &d->bdf) < 0)
            return -EINVAL;
    } else if (c->failed)
        return -EINVAL;
    else
        d->bdf = (struct sim_bdf){ 0, 0x10 + idx, 0, 0 };
    uint64_t v = 0x20B010DE;
    FIELD("pci.device_id", get_u64, 0xffffffffULL, &v);
    d->pci_device_id = (uint32_t)v;
    v = 0;
    FIELD("pci.subsystem_id", get_u64, 0xffffffffULL, &v);
    d->pci_subsystem_id = (uint32_t)v;

    d->minor = idx;
    if ((n = map_get(c, dn, "minor_number", 12)) && get_uint(c, n, "minor_number", 254, &d->minor) < 0)
        return -EINVAL;

    if (!(n = dget(c, dn, defs, "compute_capability.major")))
        return c->failed ? -EINVAL : fail(c, dn, "devices[%u]: missing compute_capability.major", idx);
    if (get_int(c, n, "compute_capability.major", 0, 99, &d->cc_major) < 0)
        return -EINVAL;
    FIELD("compute_capability.minor", get_int, 0, 99, &d->cc_minor);

    d->mem_total = 40ULL << 30;
    FIELD("memory.total_bytes", get_u64, UINT64_MAX, &d->mem_total);
    FIELD("memory.reserved_bytes", get_u64, d->mem_total, &d->mem_reserved);
    d->mem_free = d->mem_total - d->mem_reserved;
    FIELD("memory.free_bytes", get_u64, d->mem_total - d->mem_reserved, &d->mem_free);
    d->mem_used = d->mem_total - d->mem_reserved - d->mem_free;
    FIELD("bar1_memory.total_bytes", get_u64, UINT64_MAX, &d->bar1_total);
    d->bar1_free = d->bar1_total;
    FIELD("bar1_memory.free_bytes", get_u64, d->bar1_total, &d->bar1_free);
    d->bar1_used = d->bar1_total - d->bar1_free;

    FIELD("pcie.max_link_gen", get_uint, 16, &d->pcie_max_gen);
    FIELD("pcie.max_link_width", get_uint, 64, &d->pcie_max_width);
    FIELD("power.default_limit_mw", get_uint, 10000000, &d->power_limit_mw);
    FIELD("power.enforced_limit_mw", get_uint, 10000000, &d->power_limit_mw);
    FIELD("thermal.temperature_gpu_c", get_uint, 200, &d->temperature_c);
    FIELD("clocks.graphics_max", get_uint, 100000, &d->clock_max[NVML_CLOCK_GRAPHICS]);
    FIELD("clocks.sm_max", get_uint, 100000, &d->clock_max[NVML_CLOCK_SM]);
    FIELD("clocks.memory_max", get_uint, 100000, &d->clock_max[NVML_CLOCK_MEM]);
    FIELD("clocks.video_max", get_uint, 100000, &d->clock_max[NVML_CLOCK_VIDEO]);
    FIELD("clocks.graphics_current", get_uint, 100000, &d->clock_cur[NVML_CLOCK_GRAPHICS]);
    FIELD("clocks.sm_current", get_uint, 100000, &d->clock_cur[NVML_CLOCK_SM]);
    FIELD("clocks.memory_current", get_uint, 100000, &d->clock_cur[NVML_CLOCK_MEM]);
    FIELD("clocks.video_current", get_uint, 100000, &d->clock_cur[NVML_CLOCK_VIDEO]);

    FIELD("mig.mode_current", parse_mig_mode, &d->mig_mode);
    d->mig_pending = d->mig_mode;
    FIELD("mig.mode_pending", parse_mig_mode, &d->mig_pending);
    FIELD("board", get_str, d->board, sizeof(d->board));
    FIELD("lost", get_bool, &d->lost);
    FIELD("events_supported", get_bool, &d->events_supported);
#undef FIELD
    d->mig_table = sim_mig_table_for(d->name);
    if (!d->mig_table && (d->mig_mode || d->mig_pending))
        return fail(c, dget(c, dn, defs, "mig"), "mig: '%s' is not MIG capable", d->name);
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

static int parse_cis(struct pctx *c, yaml_node_t *gin, struct sim_gi *gi)
{
    yaml_node_t *seq = map_get(c, gin, "compute_instances", 17);
    if (!seq) {
        /* No CI list: one CI spanning the whole GI, id 0. */
        gi->cis = xcalloc(1, sizeof(*gi->cis));
        gi->n_cis = 1;
        gi->cis[0] = (struct sim_ci){ .id = 0, .gi = gi };
        sim_mig_ci_by_name(gi->prof, gi->prof->name, &gi->cis[0].prof);
        return 0;
    }
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(c, seq, "compute_instances: expected a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n == 0 || n > gi->prof->slices)
        return fail(c, seq, "compute_instances: %zu compute instances do not fit GI %u (%s)", n,
                    gi->id, gi->prof->name);
    gi->cis = xcalloc(n, sizeof(*gi->cis));
    unsigned used = 0;
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *cn = node(c, seq->data.sequence.items.start[i]);
        struct sim_ci *ci = &gi->cis[gi->n_cis];
        if (!is_map(cn))
            return fail(c, cn, "compute_instances[%zu]: expected a mapping", i);
        *ci = (struct sim_ci){ .gi = gi };
        gi->n_cis++;
        yaml_node_t *f = map_get(c, cn, "id", 2);
        if (!f)
            return fail(c, cn, "compute_instances[%zu]: missing id", i);
        if (get_uint(c, f, "compute_instances.id", 7, &ci->id) < 0)
            return -EINVAL;
        for (unsigned j = 0; j + 1 < gi->n_cis; j++)
            if (gi->cis[j].id == ci->id)
                return fail(c, f, "compute_instances.id: duplicate CI id %u in GI %u", ci->id, gi->id);
        if (!(f = map_get(c, cn, "profile", 7)))
            return fail(c, cn, "compute_instances[%zu]: missing profile", i);
        const char *pn = scalar(c, f, "compute_instances.profile");
        if (!pn)
            return -EINVAL;
        if (!sim_mig_ci_by_name(gi->prof, pn, &ci->prof))
            return fail(c, f, "compute_instances.profile: '%s' is not a compute profile of GI profile %s",
                        pn, gi->prof->name);
        ci->start = used;
        used += ci->prof.slices;
        if (used > gi->prof->slices)
            return fail(c, f, "compute_instances: compute slices exceed the %u of GI %u", gi->prof->slices,
                        gi->id);
        if ((f = map_get(c, cn, "uuid", 4))) {
            char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
            if (get_str(c, f, "compute_instances.uuid", u, NVML_DEVICE_UUID_ASCII_LEN + 4) < 0)
                return -EINVAL;
            if (!startswith(u, "MIG-") || strpbrk(u, " /\t"))
                return fail(c, f, "compute_instances.uuid: '%s' is not a MIG UUID (MIG-...)", u);
            /* build_mig_devices() copies it into the MIG device object. */
        }
    }
    return 0;
}

static int parse_mig(struct pctx *c, yaml_node_t *dn, yaml_node_t *defs, struct sim_device *d)
{
    yaml_node_t *seq = dget(c, dn, defs, "mig.gpu_instances");
    if (c->failed)
        return -EINVAL;
    if (!seq)
        return 0;
    if (d->mig_mode != NVML_DEVICE_MIG_ENABLE)
        return fail(c, seq, "mig.gpu_instances: given but MIG mode is disabled");
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(c, seq, "mig.gpu_instances: expected a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n > d->mig_table->max_devices)
        return fail(c, seq, "mig.gpu_instances: %zu GPU instances, at most %u fit", n,
                    d->mig_table->max_devices);
    d->gis = xcalloc(n ? n : 1, sizeof(*d->gis));
    unsigned slices = 0, mem_used = 0; /* bitmap of memory slices */
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *gn = node(c, seq->data.sequence.items.start[i]);
        struct sim_gi *gi = &d->gis[d->n_gis];
        if (!is_map(gn))
            return fail(c, gn, "gpu_instances[%zu]: expected a mapping", i);
        *gi = (struct sim_gi){ .parent = d };
        d->n_gis++;
        yaml_node_t *f = map_get(c, gn, "id", 2);
        if (!f)
            return fail(c, gn, "gpu_instances[%zu]: missing id", i);
        if (get_uint(c, f, "gpu_instances.id", 14, &gi->id) < 0)
            return -EINVAL;
        for (unsigned j = 0; j + 1 < d->n_gis; j++)
            if (d->gis[j].id == gi->id)
                return fail(c, f, "gpu_instances.id: duplicate GI id %u", gi->id);
        if (!(f = map_get(c, gn, "profile", 7)))
            return fail(c, gn, "gpu_instances[%zu]: missing profile", i);
        const char *pn = scalar(c, f, "gpu_instances.profile");
        if (!pn)
            return -EINVAL;
        if (!(gi->prof = sim_mig_gi_by_name(d->mig_table, pn)))
            return fail(c, f, "gpu_instances.profile: '%s' is not a GPU instance profile of %s", pn,
                        d->mig_table->gpu);
        unsigned same = 0;
        for (unsigned j = 0; j < d->n_gis; j++)
            same += d->gis[j].prof == gi->prof;
        if (same > gi->prof->instances)
            return fail(c, f, "gpu_instances.profile: more than %u instances of %s", gi->prof->instances,
                        gi->prof->name);
        slices += gi->prof->slices;
        if (slices > d->mig_table->max_devices)
            return fail(c, f, "gpu_instances: compute slices exceed the %u of the GPU",
                        d->mig_table->max_devices);
        unsigned size = gi->prof->placement_size, mask = ((1u << size) - 1);
        if ((f = map_get(c, gn, "placement_start", 15))) {
            if (get_uint(c, f, "gpu_instances.placement_start", d->mig_table->memory_slices - 1,
                         &gi->start) < 0)
                return -EINVAL;
            if (gi->start % size || gi->start + size > d->mig_table->memory_slices)
                return fail(c, f, "gpu_instances.placement_start: %u is not a valid start for %s", gi->start,
                            gi->prof->name);
            if (mem_used & (mask << gi->start))
                return fail(c, f, "gpu_instances.placement_start: GI %u overlaps another GPU instance",
                            gi->id);
        } else {
            /* First free aligned start. */
            unsigned s = 0;
            while (s + size <= d->mig_table->memory_slices && (mem_used & (mask << s)))
                s += size;
            if (s + size > d->mig_table->memory_slices)
                return fail(c, gn, "gpu_instances[%zu]: no free placement for %s", i, gi->prof->name);
            gi->start = s;
        }
        mem_used |= mask << gi->start;
        if (parse_cis(c, gn, gi) < 0)
            return -EINVAL;
    }
    return 0;
}

/* Build the MIG device objects (one per CI) and their UUIDs. */
static int build_mig_devices(struct pctx *c, yaml_node_t *dn, yaml_node_t *defs, struct sim_device *d)
{
    unsigned total = 0;
    for (unsigned g = 0; g < d->n_gis; g++)
        total += d->gis[g].n_cis;
    if (!total)
        return 0;
    d->migs = xcalloc(total, sizeof(*d->migs));
    yaml_node_t *seq = dget(c, dn, defs, "mig.gpu_instances");
    for (unsigned g = 0; g < d->n_gis; g++) {
        struct sim_gi *gi = &d->gis[g];
        yaml_node_t *gn = node(c, seq->data.sequence.items.start[g]);
        yaml_node_t *cseq = map_get(c, gn, "compute_instances", 17);
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
                un = map_get(c, node(c, cseq->data.sequence.items.start[k]), "uuid", 4);
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

static int parse_nvlink(struct pctx *c, yaml_node_t *root, yaml_node_t *devs, struct sim_node *nd)
{
    yaml_node_t *nv = map_get(c, root, "nvlink", 6);
    unsigned per_gpu = 0;
    if (nv) {
        if (!is_map(nv))
            return fail(c, nv, "nvlink: expected a mapping");
        yaml_node_t *n = map_get(c, nv, "links_per_gpu", 13);
        if (OPT(get_uint, c, n, "nvlink.links_per_gpu", SIM_MAX_LINKS, &per_gpu) < 0)
            return -EINVAL;
        yaml_node_t *sw = map_get(c, nv, "switches", 8);
        if (sw) {
            if (sw->type != YAML_SEQUENCE_NODE)
                return fail(c, sw, "nvlink.switches: expected a sequence");
            size_t k = (size_t)(sw->data.sequence.items.top - sw->data.sequence.items.start);
            if (k > 64)
                return fail(c, sw, "nvlink.switches: too many switches");
            nd->nvswitches = xcalloc(k ? k : 1, sizeof(*nd->nvswitches));
            for (size_t i = 0; i < k; i++) {
                yaml_node_t *s = node(c, sw->data.sequence.items.start[i]);
                if (!is_map(s))
                    return fail(c, s, "nvlink.switches[%zu]: expected a mapping", i);
                yaml_node_t *b = map_get(c, s, "bdf", 3);
                if (!b)
                    return fail(c, s, "nvlink.switches[%zu]: missing bdf", i);
                if (get_bdf(c, b, "nvlink.switches.bdf", &nd->nvswitches[i]) < 0)
                    return -EINVAL;
                nd->n_nvswitches++;
            }
        }
    }

    /* Explicit peers. */
    unsigned n = nd->n_devs;
    _cleanup_free_ unsigned *cnt = xcalloc((size_t)n * n + 1, sizeof(*cnt));
    _cleanup_free_ bool *given = xcalloc((size_t)n * n + 1, sizeof(*given));
    bool explicit = false;
    for (unsigned i = 0; i < n; i++) {
        yaml_node_t *dn = node(c, devs->data.sequence.items.start[i]);
        yaml_node_t *peers = map_get(c, dn, "nvlink_peers", 12);
        if (!peers)
            continue;
        explicit = true;
        if (peers->type != YAML_SEQUENCE_NODE)
            return fail(c, peers, "nvlink_peers: expected a sequence");
        for (yaml_node_item_t *it = peers->data.sequence.items.start; it < peers->data.sequence.items.top; it++) {
            yaml_node_t *p = node(c, *it);
            if (!is_map(p))
                return fail(c, p, "nvlink_peers: expected a mapping {index, links}");
            yaml_node_t *pi = map_get(c, p, "index", 5), *pl = map_get(c, p, "links", 5);
            unsigned j = 0, l = 0;
            if (!pi || !pl)
                return fail(c, p, "nvlink_peers: needs index and links");
            if (get_uint(c, pi, "nvlink_peers.index", SIM_MAX_DEVICES, &j) < 0 ||
                get_uint(c, pl, "nvlink_peers.links", SIM_MAX_LINKS, &l) < 0)
                return -EINVAL;
            if (j >= n || j == i)
                return fail(c, pi, "nvlink_peers.index: %u is not another device's index", j);
            size_t a = (size_t)i * n + j, b = (size_t)j * n + i;
            if ((given[a] && cnt[a] != l) || (given[b] && cnt[b] != l))
                return fail(c, pl, "nvlink_peers: devices %u and %u disagree on their link count", i, j);
            given[a] = given[b] = true;
            cnt[a] = cnt[b] = l;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        struct sim_device *d = &nd->devs[i];
        if (explicit) {
            for (unsigned j = 0; j < n; j++)
                for (unsigned l = 0; l < cnt[(size_t)i * n + j]; l++) {
                    if (d->n_links == SIM_MAX_LINKS)
                        return fail(c, node(c, devs->data.sequence.items.start[i]),
                                    "nvlink_peers: device %u has more than %d links", i, SIM_MAX_LINKS);
                    d->links[d->n_links++] = (struct sim_link){ SIM_LINK_GPU, j };
                }
        } else if (nd->n_nvswitches) {
            for (unsigned l = 0; l < per_gpu; l++)
                d->links[d->n_links++] = (struct sim_link){ SIM_LINK_SWITCH, l % nd->n_nvswitches };
        }
        d->link_capacity = d->n_links > per_gpu ? d->n_links : per_gpu;
    }
    return 0;
}

static struct sim_device *dev_by_bdf(struct sim_node *nd, const struct sim_bdf *b)
{
    for (unsigned i = 0; i < nd->n_devs; i++)
        if (bdf_eq(&nd->devs[i].bdf, b))
            return &nd->devs[i];
    return NULL;
}

/* Attach the GPUs listed in `seq` (bus ids) to root complex `rc` (and switch `sw`). */
static int attach_gpus(struct pctx *c, struct sim_node *nd, yaml_node_t *seq, const char *what, int rc, int sw)
{
    if (!seq)
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return fail(c, seq, "%s: expected a sequence", what);
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *b = node(c, *it);
        struct sim_bdf bdf;
        if (get_bdf(c, b, what, &bdf) < 0)
            return -EINVAL;
        struct sim_device *d = dev_by_bdf(nd, &bdf);
        if (!d)
            continue; /* NICs and other non-GPU endpoints */
        if ((d->root_complex >= 0 && d->root_complex != rc) || (sw >= 0 && d->pcie_switch >= 0 && d->pcie_switch != sw))
            return fail(c, b, "%s: GPU %s is placed twice in pcie_topology", what, (const char *)b->data.scalar.value);
        d->root_complex = rc;
        d->numa_node = nd->rcs[rc].numa_node;
        if (sw >= 0)
            d->pcie_switch = sw;
    }
    return 0;
}

static int parse_pcie(struct pctx *c, yaml_node_t *root, struct sim_node *nd)
{
    yaml_node_t *pt = map_get(c, root, "pcie_topology", 13);
    if (!pt)
        return 0;
    if (!is_map(pt))
        return fail(c, pt, "pcie_topology: expected a mapping");
    yaml_node_t *rcs = map_get(c, pt, "root_complexes", 14);
    if (!rcs)
        return 0;
    if (rcs->type != YAML_SEQUENCE_NODE)
        return fail(c, rcs, "pcie_topology.root_complexes: expected a sequence");
    size_t n = (size_t)(rcs->data.sequence.items.top - rcs->data.sequence.items.start);
    if (n > 64)
        return fail(c, rcs, "pcie_topology.root_complexes: too many root complexes");
    nd->rcs = xcalloc(n ? n : 1, sizeof(*nd->rcs));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *r = node(c, rcs->data.sequence.items.start[i]);
        if (!is_map(r))
            return fail(c, r, "root_complexes[%zu]: expected a mapping", i);
        nd->rcs[i].numa_node = -1;
        nd->n_rcs++;
        yaml_node_t *f = map_get(c, r, "numa_node", 9);
        if (OPT(get_int, c, f, "root_complexes.numa_node", -1, 1023, &nd->rcs[i].numa_node) < 0)
            return -EINVAL;
        yaml_node_t *sws = map_get(c, r, "switches", 8);
        size_t first = nd->n_pcie_switches;
        if (sws) {
            if (sws->type != YAML_SEQUENCE_NODE)
                return fail(c, sws, "root_complexes.switches: expected a sequence");
            size_t k = (size_t)(sws->data.sequence.items.top - sws->data.sequence.items.start);
            if (nd->n_pcie_switches + k > 256)
                return fail(c, sws, "root_complexes.switches: too many switches");
            nd->pcie_switches = xreallocarray(nd->pcie_switches, nd->n_pcie_switches + k + 1,
                                              sizeof(*nd->pcie_switches));
            for (size_t s = 0; s < k; s++) {
                yaml_node_t *sn = node(c, sws->data.sequence.items.start[s]);
                if (!is_map(sn))
                    return fail(c, sn, "switches[%zu]: expected a mapping", s);
                struct sim_pcie_switch *ps = &nd->pcie_switches[nd->n_pcie_switches];
                *ps = (struct sim_pcie_switch){ .parent = -1, .rc = (int)i };
                yaml_node_t *idn = map_get(c, sn, "id", 2);
                if (!idn)
                    return fail(c, sn, "switches[%zu]: missing id", s);
                if (get_str(c, idn, "switches.id", ps->id, sizeof(ps->id)) < 0)
                    return -EINVAL;
                for (size_t o = 0; o < nd->n_pcie_switches; o++)
                    if (streq(nd->pcie_switches[o].id, ps->id))
                        return fail(c, idn, "switches.id: duplicate switch id '%s'", ps->id);
                nd->n_pcie_switches++;
            }
            /* Second pass: parents (may name a later switch) and devices. */
            for (size_t s = 0; s < k; s++) {
                yaml_node_t *sn = node(c, sws->data.sequence.items.start[s]);
                struct sim_pcie_switch *ps = &nd->pcie_switches[first + s];
                yaml_node_t *pn = map_get(c, sn, "parent", 6);
                if (pn) {
                    const char *p = scalar(c, pn, "switches.parent");
                    if (!p)
                        return -EINVAL;
                    for (size_t o = first; o < nd->n_pcie_switches; o++)
                        if (streq(nd->pcie_switches[o].id, p))
                            ps->parent = (int)o;
                    if (ps->parent < 0)
                        return fail(c, pn, "switches.parent: no switch '%s' under this root complex", p);
                }
                if (attach_gpus(c, nd, map_get(c, sn, "devices", 7), "switches.devices", (int)i,
                                (int)(first + s)) < 0)
                    return -EINVAL;
            }
            for (size_t s = first; s < nd->n_pcie_switches; s++) {
                int p = nd->pcie_switches[s].parent;
                for (size_t steps = 0; p >= 0; steps++, p = nd->pcie_switches[p].parent)
                    if (steps > nd->n_pcie_switches)
                        return fail(c, sws, "switches: parent chain of '%s' loops", nd->pcie_switches[s].id);
            }
        }
        if (attach_gpus(c, nd, map_get(c, r, "devices", 7), "root_complexes.devices", (int)i, -1) < 0)
            return -EINVAL;
    }
    return 0;
}

static int check_unique(struct pctx *c, yaml_node_t *devs, struct sim_node *nd)
{
    for (unsigned i = 0; i < nd->n_devs; i++) {
        struct sim_device *a = &nd->devs[i];
        yaml_node_t *dn = node(c, devs->data.sequence.items.start[i]);
        for (unsigned j = 0; j < i; j++) {
            struct sim_device *b = &nd->devs[j];
            if (!strcasecmp(a->uuid, b->uuid))
                return fail(c, map_get(c, dn, "uuid", 4), "uuid: duplicate UUID %s (also device %u)", a->uuid, j);
            if (bdf_eq(&a->bdf, &b->bdf))
                return fail(c, dn, "pci.bus_id: device %u has the same bus id as device %u", i, j);
            if (a->minor == b->minor)
                return fail(c, dn, "minor_number: device %u has the same minor number as device %u", i, j);
        }
        for (unsigned m = 0; m < a->n_migs; m++)
            for (unsigned j = 0; j <= i; j++)
                for (unsigned k = 0; k < nd->devs[j].n_migs; k++) {
                    if (j == i && k >= m)
                        break;
                    if (!strcasecmp(a->migs[m]->uuid, nd->devs[j].migs[k]->uuid))
                        return fail(c, dn, "compute_instances.uuid: duplicate MIG UUID %s", a->migs[m]->uuid);
                }
    }
    return 0;
}

static int parse_root(struct pctx *c, struct sim_node *nd)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc);
    if (!root)
        return fail(c, NULL, "empty profile");
    if (!is_map(root))
        return fail(c, root, "top level: expected a mapping");
    if (parse_system(c, root, nd) < 0)
        return -EINVAL;
    yaml_node_t *defs = map_get(c, root, "device_defaults", 15);
    if (defs && !is_map(defs))
        return fail(c, defs, "device_defaults: expected a mapping");
    yaml_node_t *devs = map_get(c, root, "devices", 7);
    if (!devs)
        return fail(c, root, "missing devices");
    if (devs->type != YAML_SEQUENCE_NODE)
        return fail(c, devs, "devices: expected a sequence");
    size_t n = (size_t)(devs->data.sequence.items.top - devs->data.sequence.items.start);
    if (n > SIM_MAX_DEVICES)
        return fail(c, devs, "devices: %zu devices, at most %d supported", n, SIM_MAX_DEVICES);
    nd->devs = xcalloc(n ? n : 1, sizeof(*nd->devs));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *dn = node(c, devs->data.sequence.items.start[i]);
        nd->n_devs++;
        if (parse_device(c, dn, defs, (unsigned)i, &nd->devs[i]) < 0 ||
            (nd->devs[i].mig_mode == NVML_DEVICE_MIG_ENABLE && parse_mig(c, dn, defs, &nd->devs[i]) < 0) ||
            build_mig_devices(c, dn, defs, &nd->devs[i]) < 0)
            return -EINVAL;
    }
    if (check_unique(c, devs, nd) < 0 || parse_nvlink(c, root, devs, nd) < 0 || parse_pcie(c, root, nd) < 0)
        return -EINVAL;
    return 0;
}

struct sim_node *sim_profile_parse(const char *name, const unsigned char *buf, size_t len, char *err,
                                   size_t errlen)
{
    struct pctx c = { .name = name, .err = err, .errlen = errlen };
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        oom();
    yaml_parser_set_input_string(&parser, buf, len);
    if (!yaml_parser_load(&parser, &c.doc)) {
        snprintf(err, errlen, "%s:%lu: YAML syntax error: %s%s%s", name,
                 (unsigned long)parser.problem_mark.line + 1, parser.problem ? parser.problem : "unknown",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        one_line(err);
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
