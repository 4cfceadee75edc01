/* inventory + config -> the resources each plugin socket advertises.
 * Order of work, as the reference's: one device per full GPU, then per MIG device, named
 * by the gpus / mig patterns; then the single strategy's layout checks; then sharing
 * (replicas, rename, device subsets). Within a resource, devices are in inventory order
 * (GPU, then its MIG devices, then replica k), which keeps every later tie-break
 * deterministic. Name patterns live in resources-pattern.c; MIG names and cap minors
 * come from the inventory (node/mig.c). */
#include <errno.h>
#include <stdio.h>

#include "core/log.h"
#include "policy/dra-split.h"
#include "policy/resources-warn.h"

#define DEV_PREFIX "/dev/nvidia"
#define CAP_PREFIX "/dev/nvidia-caps/nvidia-cap"

static const char *match_patterns(const struct config_pattern *pats, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (resources_pattern_match(pats[i].pattern, s))
            return pats[i].name;
    return NULL;
}

/* ---- builder -------------------------------------------------------------------- */

struct builder {
    struct resource_set *set;
    size_t res_alloc;
    size_t *dev_alloc; /* parallel to set->resources */
};

static char *socket_name_for(const char *name)
{
    const char *slash = strchr(name, '/');
    return xasprintf("nvidia-%s.sock", slash ? slash + 1 : name);
}

static size_t builder_resource(struct builder *b, const char *name)
{
    struct resource_set *s = b->set;
    for (size_t i = 0; i < s->n_resources; i++)
        if (streq(s->resources[i].name, name))
            return i;
    size_t old = b->res_alloc;
    s->resources = grow_array(s->resources, &b->res_alloc, s->n_resources + 1,
                              sizeof(*s->resources));
    if (b->res_alloc != old) {
        b->dev_alloc = xreallocarray(b->dev_alloc, b->res_alloc, sizeof(*b->dev_alloc));
        memset(b->dev_alloc + old, 0, (b->res_alloc - old) * sizeof(*b->dev_alloc));
    }
    struct rs_resource *r = &s->resources[s->n_resources];
    *r = (struct rs_resource){
        .name = xstrdup(name),
        .socket_name = socket_name_for(name),
        .sharing = SHARING_NONE,
    };
    return s->n_resources++;
}

/* Takes ownership of *d. */
static void builder_push(struct builder *b, size_t ri, struct rs_device *d)
{
    struct rs_resource *r = &b->set->resources[ri];
    r->devices = grow_array(r->devices, &b->dev_alloc[ri], r->n_devices + 1, sizeof(*r->devices));
    r->devices[r->n_devices++] = *d;
    memset(d, 0, sizeof(*d));
}

static char **strv_dup(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **r = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        r[i] = xstrdup(v[i]);
    return r;
}

static void device_clear(struct rs_device *d)
{
    free(d->id);
    free(d->base_id);
    free(d->uuid);
    free(d->index);
    for (char **p = d->paths; p && *p; p++)
        free(*p);
    free(d->paths);
    memset(d, 0, sizeof(*d));
}

/* The kubelet always sees UUIDs (§4.1 "ID (kubelet)"): they survive reboots and
 * re-enumeration, and are what the reference's plugin leaves in the kubelet's
 * checkpoint, so switching plugins keeps every allocation known. --device-id-strategy
 * only picks what the container runtime is told (base_id: NVIDIA_VISIBLE_DEVICES,
 * volume-mount paths, CDI device names; §5 "devIDs"). */
static void set_ids(const struct config *cfg, struct rs_device *d)
{
    d->id = xstrdup(d->uuid);
    d->base_id = xstrdup(cfg->device_id_strategy == DEVICE_ID_INDEX ? d->index : d->uuid);
}

char **resources_device_paths(const struct inv_gpu *gpu, const struct inv_mig *mig,
                              struct error *err)
{
    if (!mig) {
        char **paths = xcalloc(2, sizeof(char *));
        paths[0] = xasprintf(DEV_PREFIX "%u", gpu->minor);
        return paths;
    }
    /* Discovery resolved the caps (node/mig.c) or kept why it could not. */
    int gi_minor = mig->gi_cap_minor, ci_minor = mig->ci_cap_minor;
    if (gi_minor < 0 || ci_minor < 0) {
        const char *why = mig->cap_error[0] ? mig->cap_error : "capability minor unknown";
        int code = mig->cap_error_code < 0 ? mig->cap_error_code : -ENOENT;
        if (gi_minor < 0)
            error_set(err, code, "MIG device %s (GPU %u GI %u): %s", mig->uuid, gpu->index,
                      mig->gi_id, why);
        else
            error_set(err, code, "MIG device %s (GPU %u GI %u CI %u): %s", mig->uuid,
                      gpu->index, mig->gi_id, mig->ci_id, why);
        return NULL;
    }
    char **paths = xcalloc(4, sizeof(char *));
    paths[0] = xasprintf(DEV_PREFIX "%u", gpu->minor);
    paths[1] = xasprintf(CAP_PREFIX "%d", gi_minor);
    paths[2] = xasprintf(CAP_PREFIX "%d", ci_minor);
    return paths;
}

static void gpu_device(const struct inventory *inv, const struct config *cfg, size_t g,
                       struct rs_device *d)
{
    const struct inv_gpu *gpu = &inv->gpus[g];
    *d = (struct rs_device){
        .uuid = xstrdup(gpu->uuid),
        .index = xasprintf("%u", gpu->index),
        .gpu = (int)g,
        .mig = -1,
        .replica = -1,
        .replicas = 1,
        .numa_node = gpu->numa_node < 0 ? -1 : gpu->numa_node,
        .memory_bytes = gpu->memory_bytes,
    };
    set_ids(cfg, d);
    d->paths = resources_device_paths(gpu, NULL, NULL);
}

static int mig_device(const struct inventory *inv, const struct config *cfg, size_t g, size_t m,
                      struct rs_device *d, struct error *err)
{
    const struct inv_gpu *gpu = &inv->gpus[g];
    const struct inv_mig *mig = &gpu->migs[m];
    char **paths = resources_device_paths(gpu, mig, err);
    if (!paths)
        return err->code;

    *d = (struct rs_device){
        .uuid = xstrdup(mig->uuid),
        .index = xasprintf("%u:%u", gpu->index, mig->mig_index),
        .gpu = (int)g,
        .mig = (int)m,
        .replica = -1,
        .replicas = 1,
        .numa_node = gpu->numa_node < 0 ? -1 : gpu->numa_node,
        .memory_bytes = mig->memory_bytes,
    };
    set_ids(cfg, d);
    d->paths = paths;
    return 0;
}

/* ---- MIG strategy ---------------------------------------------------------------- */

static bool same_mig_type(const struct inv_mig *a, const struct inv_mig *b)
{
    return streq(a->profile, b->profile) && a->memory_bytes == b->memory_bytes &&
           a->gi_profile_id == b->gi_profile_id && a->ci_profile_id == b->ci_profile_id &&
           a->multiprocessors == b->multiprocessors && a->gi_slices == b->gi_slices &&
           a->ci_slices == b->ci_slices && a->copy_engines == b->copy_engines &&
           a->decoders == b->decoders && a->encoders == b->encoders && a->jpegs == b->jpegs &&
           a->ofas == b->ofas;
}

/* The single strategy's layout checks, in the reference's order (§4.3; its device map
 * builder asserts them after both device maps are built, so pattern and capability
 * errors come first): a MIG-enabled GPU without MIG devices, then more than one MIG
 * device type, then full GPUs beside MIG devices. */
static int check_single(const struct inventory *inv, struct error *err)
{
    size_t enabled = 0;
    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *gpu = &inv->gpus[g];
        if (!gpu->mig_enabled)
            continue;
        enabled++;
        if (gpu->n_migs == 0)
            return error_set(err, -EINVAL, "device %u has no MIG devices configured", gpu->index);
    }
    const struct inv_mig *first = NULL;
    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *gpu = &inv->gpus[g];
        for (size_t m = 0; gpu->mig_enabled && m < gpu->n_migs; m++) {
            if (!first)
                first = &gpu->migs[m];
            else if (!same_mig_type(first, &gpu->migs[m]))
                return error_set(err, -EINVAL, "more than one MIG device type present on node");
        }
    }
    if (enabled > 0 && enabled != inv->n_gpus)
        return error_set(err, -EINVAL,
                         "all devices on the node must be configured with the same migEnabled value");
    return 0;
}

/* Name of a MIG device when the config has no resources.mig: the reference's defaults. */
static char *default_mig_name(enum mig_strategy s, const char *profile)
{
    if (s == MIG_STRATEGY_SINGLE)
        return xstrdup("nvidia.com/gpu");
    /* mixed: one pattern per C == G profile; "<C>c.<G>g..." profiles match nothing. */
    unsigned c;
    int n = 0;
    if (sscanf(profile, "%uc.%n", &c, &n) == 1 && n > 0)
        return NULL;
    char *name = xasprintf("nvidia.com/mig-%s", profile);
    for (char *p = name; *p; p++)
        if (*p == '+')
            *p = '.';
    return name;
}

static const struct config_pattern default_gpu_pattern = {
    .pattern = (char *)"*",
    .name = (char *)"nvidia.com/gpu",
};

/* Device IDs from NVML end up in comma-separated env values, mount paths and CDI
 * names: "GPU-x,all" would widen a container to every GPU. Real UUIDs are
 * "GPU-<hex>-..." / "MIG-<hex>-..."; the legacy "MIG-GPU-<uuid>/<gi>/<ci>" form also
 * has '/'. Nothing else is accepted. */
#define RESOURCES_ID_MAX 95

static bool valid_device_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > RESOURCES_ID_MAX)
        return false;
    bool legacy_mig = startswith(id, "MIG-GPU-");
    for (const char *p = id; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || (c == '/' && legacy_mig)))
            return false;
    }
    return true;
}

static bool id_acceptable(const char *what, const char *id, resources_warn_fn warn, void *userdata)
{
    if (valid_device_id(id))
        return true;
    if (warn) {
        char msg[320];
        snprintf(msg, sizeof(msg),
                 "%s: device ID '%.*s' is not made of [A-Za-z0-9-] (at most %d characters); "
                 "device left out",
                 what, RESOURCES_ID_MAX + 1, id, RESOURCES_ID_MAX);
        warn(userdata, RESOURCES_WARN_ERROR, msg);
    }
    return false;
}

/* Full GPUs first, then MIG devices, as the reference builds its two device maps; the
 * single strategy's layout checks come after both (check_single). */
static int build_base(const struct inventory *inv, const struct config *cfg, resources_warn_fn warn,
                      void *userdata, struct builder *b, struct error *err)
{
    bool use_migs = cfg->mig_strategy != MIG_STRATEGY_NONE;
    const struct config_pattern *gpats = cfg->n_gpu_patterns ? cfg->gpu_patterns : &default_gpu_pattern;
    size_t n_gpats = cfg->n_gpu_patterns ? cfg->n_gpu_patterns : 1;

    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *gpu = &inv->gpus[g];
        if ((use_migs && gpu->mig_enabled) || dra_split_serves(cfg, gpu))
            continue;
        const char *name = match_patterns(gpats, n_gpats, gpu->name);
        if (!name)
            return error_set(err, -EINVAL, "GPU name '%s' does not match any resource patterns",
                             gpu->name);
        char what[32];
        snprintf(what, sizeof(what), "GPU %u", gpu->index);
        if (!id_acceptable(what, gpu->uuid, warn, userdata))
            continue;
        struct rs_device d;
        gpu_device(inv, cfg, g, &d);
        builder_push(b, builder_resource(b, name), &d);
    }
    if (!use_migs)
        return 0;

    for (size_t g = 0; g < inv->n_gpus; g++) {
        const struct inv_gpu *gpu = &inv->gpus[g];
        if (!gpu->mig_enabled || dra_split_serves(cfg, gpu))
            continue;
        if (gpu->n_migs == 0 && warn && cfg->mig_strategy == MIG_STRATEGY_MIXED) {
            char msg[160];
            snprintf(msg, sizeof(msg), "GPU %u (%s) has MIG enabled but no MIG devices configured",
                     gpu->index, gpu->uuid);
            warn(userdata, RESOURCES_WARN_WARNING, msg);
        }
        for (size_t m = 0; m < gpu->n_migs; m++) {
            const char *profile = gpu->migs[m].profile;
            _cleanup_free_ char *name = NULL;
            if (cfg->n_mig_patterns) {
                const char *n = match_patterns(cfg->mig_patterns, cfg->n_mig_patterns, profile);
                name = n ? xstrdup(n) : NULL;
            } else {
                name = default_mig_name(cfg->mig_strategy, profile);
            }
            if (!name)
                return error_set(err, -EINVAL, "MIG profile '%s' does not match any resource patterns",
                                 profile);
            char what[48];
            snprintf(what, sizeof(what), "MIG device %u:%u", gpu->index, gpu->migs[m].mig_index);
            if (!id_acceptable(what, gpu->migs[m].uuid, warn, userdata))
                continue;
            struct rs_device d;
            int r = mig_device(inv, cfg, g, m, &d, err);
            if (r < 0)
                return r;
            builder_push(b, builder_resource(b, name), &d);
        }
    }
    return cfg->mig_strategy == MIG_STRATEGY_SINGLE ? check_single(inv, err) : 0;
}

/* ---- sharing -------------------------------------------------------------------- */

static int select_devices(const struct rs_resource *r, const struct config_replicated *rc,
                          const char *section, size_t entry, bool *sel, struct error *err)
{
    switch (rc->devices_kind) {
    case DEVICES_ALL:
        for (size_t i = 0; i < r->n_devices; i++)
            sel[i] = true;
        return 0;
    case DEVICES_COUNT:
        if (rc->devices_count < 0 || (size_t)rc->devices_count > r->n_devices)
            return error_set(err, -EINVAL,
                             "sharing.%s.resources[%zu] (%s): requested %d devices to be replicated, "
                             "but only %zu devices available",
                             section, entry, rc->name, rc->devices_count, r->n_devices);
        for (size_t i = 0; i < (size_t)rc->devices_count; i++)
            sel[i] = true;
        return 0;
    case DEVICES_LIST:
        for (size_t k = 0; k < rc->n_devices; k++) {
            const char *ref = rc->devices[k].ref;
            bool found = false;
            for (size_t i = 0; i < r->n_devices; i++) {
                const struct rs_device *d = &r->devices[i];
                if (streq(d->index, ref) || strcasecmp(d->uuid, ref) == 0) {
                    sel[i] = found = true;
                    break;
                }
            }
            if (!found)
                return error_set(err, -ENOENT,
                                 "sharing.%s.resources[%zu].devices: device '%s' is not a device of "
                                 "resource %s on this node",
                                 section, entry, ref, rc->name);
        }
        return 0;
    }
    return error_set(err, -EINVAL, "sharing.%s.resources[%zu]: bad devices kind", section, entry);
}

static void replica_of(const struct rs_device *src, int k, int replicas, struct rs_device *d)
{
    *d = *src;
    d->id = xasprintf("%s::%d", src->uuid, k);
    d->base_id = xstrdup(src->base_id);
    d->uuid = xstrdup(src->uuid);
    d->index = xstrdup(src->index);
    d->paths = strv_dup(src->paths);
    d->replica = k;
    d->replicas = replicas;
}

static int apply_sharing(const struct config *cfg, struct builder *b, struct error *err)
{
    enum sharing_strategy strategy = config_sharing_strategy(cfg);
    if (strategy == SHARING_NONE)
        return 0;

    const struct config_sharing *sh = config_sharing_section(cfg);
    const char *section = cfg->mps.present ? "mps" : "timeSlicing";
    bool fail_gt1 = sh->fail_requests_greater_than_one < 0 ? strategy == SHARING_MPS
                                                           : sh->fail_requests_greater_than_one > 0;

    if (strategy == SHARING_MPS) {
        if (cfg->mig_strategy == MIG_STRATEGY_MIXED)
            return error_set(err, -EINVAL, "using --mig-strategy=mixed is not supported with MPS");
        if (!cfg->mps_root || !*cfg->mps_root)
            return error_set(err, -EINVAL, "using MPS requires --mps-root to be specified");
    }

    for (size_t e = 0; e < sh->n_resources; e++) {
        const struct config_replicated *rc = &sh->resources[e];
        if (rc->replicas < 2)
            continue;

        size_t ri = SIZE_MAX;
        for (size_t i = 0; i < b->set->n_resources; i++)
            if (streq(b->set->resources[i].name, rc->name))
                ri = i;
        if (ri == SIZE_MAX)
            continue; /* not on this node: nothing to share, as the reference */

        _cleanup_free_ bool *sel = xcalloc(b->set->resources[ri].n_devices, sizeof(bool));
        int r = select_devices(&b->set->resources[ri], rc, section, e, sel, err);
        if (r < 0)
            return r;

        if (strategy == SHARING_MPS)
            for (size_t i = 0; i < b->set->resources[ri].n_devices; i++)
                if (sel[i] && b->set->resources[ri].devices[i].mig >= 0)
                    return error_set(err, -EINVAL, "sharing using MPS is not supported for MIG devices");

        _cleanup_free_ char *shared_name = NULL;
        const char *target = rc->name;
        if (rc->rename && *rc->rename)
            target = rc->rename;
        else if (sh->rename_by_default)
            target = shared_name = xasprintf("%s.shared", rc->name);

        /* Detach the old device list, then refill: unselected devices stay, selected
         * ones become replicas in the target (which may be this same resource). */
        struct rs_resource *src = &b->set->resources[ri];
        struct rs_device *old = TAKE_PTR(src->devices);
        size_t n_old = src->n_devices;
        src->n_devices = 0;
        b->dev_alloc[ri] = 0;
        size_t ti = builder_resource(b, target); /* may move resources[] */

        for (size_t i = 0; i < n_old; i++) {
            if (!sel[i] || old[i].replica >= 0) {
                builder_push(b, ri, &old[i]);
                continue;
            }
            for (int k = 0; k < rc->replicas; k++) {
                struct rs_device d;
                replica_of(&old[i], k, rc->replicas, &d);
                builder_push(b, ti, &d);
            }
            device_clear(&old[i]);
        }
        free(old);
        b->set->resources[ti].sharing = strategy;
        b->set->resources[ti].fail_requests_greater_than_one = fail_gt1;
    }
    return 0;
}

/* ---- lookup index ----------------------------------------------------------------
 * Allocate may name 10,000 IDs; each is found by binary search over positions sorted by
 * ID, built once per resource. */

static int cmp_pos(const void *a, const void *b, void *devices)
{
    const struct rs_device *dv = devices;
    return strcmp(dv[*(const size_t *)a].id, dv[*(const size_t *)b].id);
}

static void index_add(struct rs_resource *r)
{
    if (!r->n_devices)
        return;
    size_t *order = xreallocarray(NULL, r->n_devices, sizeof(size_t));
    for (size_t i = 0; i < r->n_devices; i++)
        order[i] = i;
    qsort_r(order, r->n_devices, sizeof(size_t), cmp_pos, r->devices);
    free(r->by_id);
    r->by_id = order;
}

static void index_remove(struct rs_resource *r)
{
    free(r->by_id);
    r->by_id = NULL;
}

const struct rs_device *resources_find_device(const struct rs_resource *r, const char *id)
{
    if (!r || !id)
        return NULL;
    if (!r->by_id) {
        for (size_t i = 0; i < r->n_devices; i++)
            if (streq(r->devices[i].id, id))
                return &r->devices[i];
        return NULL;
    }
    size_t lo = 0, hi = r->n_devices;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->devices[r->by_id[mid]].id, id);
        if (c == 0)
            return &r->devices[r->by_id[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- entry points ---------------------------------------------------------------- */

static void log_warn(void *userdata, enum resources_warn_level level, const char *msg)
{
    if (level == RESOURCES_WARN_ERROR)
        log_error("%s", msg);
    else
        log_warning("%s, ignoring", msg);
}

int resources_build_warn(const struct inventory *inv, const struct config *cfg, resources_warn_fn warn,
                         void *userdata, struct resource_set *out, struct error *err)
{
    struct resource_set set = { 0 };
    struct builder b = { .set = &set };

    int r = build_base(inv, cfg, warn, userdata, &b, err);
    if (r >= 0)
        r = apply_sharing(cfg, &b, err);
    free(b.dev_alloc);
    if (r < 0) {
        resources_clear(&set);
        return r;
    }

    /* Drop resources whose devices all moved to a renamed shared resource. */
    size_t w = 0;
    for (size_t i = 0; i < set.n_resources; i++) {
        if (set.resources[i].n_devices == 0) {
            free(set.resources[i].name);
            free(set.resources[i].socket_name);
            free(set.resources[i].devices);
            continue;
        }
        set.resources[w++] = set.resources[i];
    }
    set.n_resources = w;

    for (size_t i = 0; i < set.n_resources; i++)
        index_add(&set.resources[i]);
    *out = set;
    return 0;
}

int resources_build(const struct inventory *inv, const struct config *cfg,
                    struct resource_set *out, struct error *err)
{
    return resources_build_warn(inv, cfg, log_warn, NULL, out, err);
}

void resources_clear(struct resource_set *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n_resources; i++) {
        struct rs_resource *r = &rs->resources[i];
        index_remove(r);
        for (size_t j = 0; j < r->n_devices; j++)
            device_clear(&r->devices[j]);
        free(r->devices);
        free(r->name);
        free(r->socket_name);
    }
    free(rs->resources);
    rs->resources = NULL;
    rs->n_resources = 0;
}
