/* CDI spec generation and atomic writing (see cdi.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "output/allocate.h"
#include "output/cdi-edits.h"
#include "output/cdi.h"

#define CDI_KIND_PREFIX ALLOC_CDI_VENDOR "/"

static json_t *new_spec(const char *cls)
{
    json_t *spec = json_object();
    _cleanup_free_ char *kind = xasprintf(CDI_KIND_PREFIX "%s", cls);
    json_object_set_new(spec, "cdiVersion", json_string(CDI_VERSION));
    json_object_set_new(spec, "kind", json_string(kind));
    json_object_set_new(spec, "devices", json_array());
    return spec;
}

/* Appends {"name": name, "containerEdits": {"deviceNodes": nodes}}; takes nodes. */
static void add_device(json_t *spec, const char *name, json_t *edits)
{
    json_t *d = json_object();
    json_object_set_new(d, "name", json_string(name));
    json_object_set_new(d, "containerEdits", edits);
    json_array_append_new(json_object_get(spec, "devices"), d);
}

/* Appends to a what b does not hold yet (equal JSON): device "all" merges every device's
 * nodes and hooks as nvcdi's merge and de-duplication do. */
static void merge_unique(json_t *a, json_t *b)
{
    size_t i, k;
    json_t *v, *w;
    json_array_foreach(b, i, v) {
        bool have = false;
        json_array_foreach(a, k, w)
            if ((have = json_equal(v, w)))
                break;
        if (!have)
            json_array_append(a, v);
    }
}

json_t *cdi_gpu_spec(const struct resource_set *rs, const struct config *cfg,
                     const struct inventory *inv)
{
    json_t *spec = new_spec("gpu");
    json_t *all_nodes = json_array(), *all_hooks = json_array();
    json_t *seen = json_object(); /* base IDs already described */

    for (size_t i = 0; i < rs->n_resources; i++) {
        const struct rs_resource *r = &rs->resources[i];
        for (size_t j = 0; j < r->n_devices; j++) {
            const struct rs_device *d = &r->devices[j];
            if (json_object_get(seen, d->base_id))
                continue;
            json_object_set_new(seen, d->base_id, json_true());
            json_t *edits = cdi_device_edits(cfg, d->paths);
            /* A full GPU's DRM nodes; a MIG device has none (nvcdi adds them only for a
             * profile with graphics, which no MIG profile we serve has). */
            if (d->mig < 0 && d->gpu >= 0 && (size_t)d->gpu < inv->n_gpus) {
                cdi_add_drm(cfg, inv, &inv->gpus[d->gpu], edits);
                cdi_edits_finish(cfg, edits);
            }
            merge_unique(all_nodes, json_object_get(edits, "deviceNodes"));
            merge_unique(all_hooks, json_object_get(edits, "hooks"));
            add_device(spec, d->base_id, edits);
        }
    }
    json_decref(seen);

    json_t *edits = json_object();
    json_object_set_new(edits, "deviceNodes", all_nodes);
    if (json_array_size(all_hooks))
        json_object_set_new(edits, "hooks", all_hooks);
    else
        json_decref(all_hooks);
    cdi_edits_finish(cfg, edits);
    add_device(spec, "all", edits);
    json_object_set_new(spec, "containerEdits", cdi_common_edits(cfg, inv));
    return spec;
}

json_t *cdi_device_edits(const struct config *cfg, char *const *paths)
{
    json_t *nodes = json_array();
    for (char *const *p = paths; p && *p; p++)
        json_array_append_new(nodes, cdi_device_node(cfg, *p));
    json_t *edits = json_object();
    json_object_set_new(edits, "deviceNodes", nodes);
    cdi_edits_finish(cfg, edits);
    return edits;
}

json_t *cdi_common_edits(const struct config *cfg, const struct inventory *inv)
{
    json_t *driver = cdi_driver_edits(cfg, inv);
    json_t *common = json_object();
    json_object_set(common, "env", json_object_get(driver, "env"));
    /* The control nodes every GPU user needs, as nvcdi puts there. */
    json_t *ctl = json_array();
    const char *present[ALLOC_CONTROL_NODES_MAX];
    size_t n_present = alloc_control_nodes(cfg, present);
    for (size_t i = 0; i < n_present; i++)
        json_array_append_new(ctl, cdi_device_node(cfg, present[i]));
    json_object_set_new(common, "deviceNodes", ctl);
    static const char *const rest[] = { "hooks", "mounts" };
    for (size_t i = 0; i < ELEMENTSOF(rest); i++)
        if (json_object_get(driver, rest[i]))
            json_object_set(common, rest[i], json_object_get(driver, rest[i]));
    json_decref(driver);
    cdi_edits_finish(cfg, common);
    return common;
}

json_t *cdi_imex_spec(const struct config *cfg)
{
    if (!cfg->n_imex_channel_ids)
        return NULL;
    json_t *spec = new_spec("imex-channel");
    for (size_t i = 0; i < cfg->n_imex_channel_ids; i++) {
        char name[16], path[64];
        snprintf(name, sizeof(name), "%d", cfg->imex_channel_ids[i]);
        snprintf(path, sizeof(path), ALLOC_IMEX_CHANNEL_DIR "/channel%d", cfg->imex_channel_ids[i]);
        json_t *nodes = json_array();
        json_array_append_new(nodes, cdi_device_node(cfg, path));
        json_t *edits = json_object();
        json_object_set_new(edits, "deviceNodes", nodes);
        cdi_edits_finish(cfg, edits);
        add_device(spec, name, edits);
    }
    return spec;
}

/* Device nodes of dir (relative to /dev) whose names start with prefix, sorted. */
static void add_matching_nodes(const struct config *cfg, json_t *nodes, const char *dir,
                               const char *prefix)
{
    _cleanup_free_ char *ctr_dir = xasprintf("/dev%s%s", *dir ? "/" : "", dir);
    _cleanup_free_ char *host_dir = alloc_join_root(cfg->dev_root, ctr_dir);
    struct dirent **list = NULL;
    int n = scandir(host_dir, &list, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        if (list[i]->d_name[0] != '.' && startswith(list[i]->d_name, prefix)) {
            _cleanup_free_ char *p = xasprintf("%s/%s", ctr_dir, list[i]->d_name);
            json_array_append_new(nodes, cdi_device_node(cfg, p));
        }
        free(list[i]);
    }
    free(list);
}

json_t *cdi_mode_spec(const struct config *cfg, const char *mode)
{
    json_t *spec = new_spec(mode);
    json_t *nodes = json_array();
    const char *env = NULL;
    if (streq(mode, "gdrcopy")) {
        add_matching_nodes(cfg, nodes, "", "gdrdrv");
        env = "NVIDIA_GDRCOPY=enabled";
    } else if (streq(mode, "gds")) {
        add_matching_nodes(cfg, nodes, "", "nvidia-fs");
        env = "NVIDIA_GDS=enabled";
    } else {
        add_matching_nodes(cfg, nodes, "infiniband", "");
        env = "NVIDIA_MOFED=enabled";
    }
    /* Always a device "all", even without nodes, so that the name Allocate returns
     * for an enabled mode always resolves. */
    json_t *edits = json_object();
    json_object_set_new(edits, "deviceNodes", nodes);
    json_t *envs = json_array();
    json_array_append_new(envs, json_string(env));
    json_object_set_new(edits, "env", envs);
    cdi_edits_finish(cfg, edits);
    add_device(spec, "all", edits);
    return spec;
}

/* ---- validation ------------------------------------------------------------------ */

static int check_strings(json_t *a, const char *what, struct error *err)
{
    if (!a)
        return 0;
    if (!json_is_array(a))
        return error_set(err, -EINVAL, "%s: not an array", what);
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
        if (!json_is_string(v))
            return error_set(err, -EINVAL, "%s[%zu]: not a string", what, i);
    return 0;
}

static int check_objects(json_t *a, const char *what, const char *const *required, size_t n_req,
                         struct error *err)
{
    if (!a)
        return 0;
    if (!json_is_array(a))
        return error_set(err, -EINVAL, "%s: not an array", what);
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_object(v))
            return error_set(err, -EINVAL, "%s[%zu]: not an object", what, i);
        for (size_t k = 0; k < n_req; k++)
            if (!json_is_string(json_object_get(v, required[k])))
                return error_set(err, -EINVAL, "%s[%zu]: missing string '%s'", what, i, required[k]);
    }
    return 0;
}

static int check_edits(json_t *e, const char *what, struct error *err)
{
    static const char *const node_req[] = { "path" };
    static const char *const mount_req[] = { "hostPath", "containerPath" };
    static const char *const hook_req[] = { "hookName", "path" };
    char w[128];
    int r;

    if (!json_is_object(e))
        return error_set(err, -EINVAL, "%s: not an object", what);
    snprintf(w, sizeof(w), "%s.env", what);
    if ((r = check_strings(json_object_get(e, "env"), w, err)) < 0)
        return r;
    snprintf(w, sizeof(w), "%s.deviceNodes", what);
    if ((r = check_objects(json_object_get(e, "deviceNodes"), w, node_req, 1, err)) < 0)
        return r;
    snprintf(w, sizeof(w), "%s.mounts", what);
    if ((r = check_objects(json_object_get(e, "mounts"), w, mount_req, 2, err)) < 0)
        return r;
    snprintf(w, sizeof(w), "%s.hooks", what);
    return check_objects(json_object_get(e, "hooks"), w, hook_req, 2, err);
}

int cdi_validate(json_t *spec, struct error *err)
{
    if (!json_is_object(spec))
        return error_set(err, -EINVAL, "spec: not an object");
    if (!json_is_string(json_object_get(spec, "cdiVersion")))
        return error_set(err, -EINVAL, "spec: missing string 'cdiVersion'");
    if (!json_is_string(json_object_get(spec, "kind")))
        return error_set(err, -EINVAL, "spec: missing string 'kind'");
    json_t *devices = json_object_get(spec, "devices");
    if (!json_is_array(devices))
        return error_set(err, -EINVAL, "spec: missing array 'devices'");
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d) {
        char w[64];
        if (!json_is_object(d) || !json_is_string(json_object_get(d, "name")))
            return error_set(err, -EINVAL, "devices[%zu]: missing string 'name'", i);
        if (!json_object_get(d, "containerEdits"))
            return error_set(err, -EINVAL, "devices[%zu]: missing 'containerEdits'", i);
        snprintf(w, sizeof(w), "devices[%zu].containerEdits", i);
        int r = check_edits(json_object_get(d, "containerEdits"), w, err);
        if (r < 0)
            return r;
    }
    json_t *common = json_object_get(spec, "containerEdits");
    return common ? check_edits(common, "containerEdits", err) : 0;
}

/* ---- writing ---------------------------------------------------------------------- */


int cdi_stage_spec_file(const char *dir, const char *file, struct fs_stage *st, struct error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
    /* The directory nearly always exists: made only when the file cannot be. */
    int r = fs_stage_open(st, path);
    if (r == -ENOENT) {
        if ((r = mkdir_p(dir, 0755)) < 0)
            return error_set(err, r, "creating %s: %s", dir, strerror(-r));
        r = fs_stage_open(st, path);
    }
    if (r < 0)
        return error_set(err, r, "creating temporary file in %s: %s", dir, strerror(-r));
    return 0;
}

int cdi_commit_spec_file(struct fs_stage *st, json_t *spec, bool sync, struct error *err)
{
    _cleanup_free_ char *path = xstrdup(st->path ? st->path : "(no file)");
    /* The lowest version that holds what the spec uses, decided once it is whole. */
    json_object_set_new(spec, "cdiVersion", json_string(cdi_spec_version(spec)));
    /* One buffer, written whole: json_dumpfd makes one write() per token (~130 for a
     * one-GPU spec), on DRA's Prepare path. */
    _cleanup_free_ char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    int r = -ENOMEM;
    if (text) {
        size_t len = strlen(text);
        text[len] = '\n'; /* over the terminator: written by length */
        /* 0644: readable by the container runtime, whatever our umask is. */
        r = fs_stage_commit(st, text, len + 1, 0644, sync);
    }
    fs_stage_abort(st);
    return r < 0 ? error_set(err, r, "writing %s: %s", path, strerror(-r)) : 0;
}

int cdi_write_spec_file(const char *dir, const char *file, json_t *spec, bool sync,
                        struct error *err)
{
    struct fs_stage st = { 0 };
    int r = cdi_stage_spec_file(dir, file, &st, err);
    return r < 0 ? r : cdi_commit_spec_file(&st, spec, sync, err);
}

static int write_or_remove(const char *dir, const char *cls, json_t *spec, struct error *err)
{
    _cleanup_free_ char *file = xasprintf(ALLOC_CDI_VENDOR "-%s.json", cls);
    if (!spec) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        if (unlink(path) < 0 && errno != ENOENT)
            return error_set(err, -errno, "removing stale %s: %s", path, strerror(errno));
        return 0;
    }
    int r = cdi_validate(spec, err);
    if (r >= 0)
        r = cdi_write_spec_file(dir, file, spec, true, err);
    json_decref(spec);
    if (r < 0)
        return error_prefix(err, "CDI spec %s", file);
    return 0;
}

int cdi_write_specs(const struct resource_set *rs, const struct inventory *inv,
                    const struct config *cfg, struct error *err)
{
    if (!(cfg->device_list_strategy & (DEVICE_LIST_CDI_ANNOTATIONS | DEVICE_LIST_CDI_CRI)))
        return 0;
    const char *dir = cfg->cdi_spec_dir && *cfg->cdi_spec_dir ? cfg->cdi_spec_dir : "/var/run/cdi";
    int r;
    if ((r = write_or_remove(dir, "gpu", cdi_gpu_spec(rs, cfg, inv), err)) < 0)
        return r;
    if ((r = write_or_remove(dir, "imex-channel", cdi_imex_spec(cfg), err)) < 0)
        return r;
    if ((r = write_or_remove(dir, "gdrcopy", cfg->gdrcopy_enabled ? cdi_mode_spec(cfg, "gdrcopy") : NULL, err)) < 0)
        return r;
    if ((r = write_or_remove(dir, "gds", cfg->gds_enabled ? cdi_mode_spec(cfg, "gds") : NULL, err)) < 0)
        return r;
    return write_or_remove(dir, "mofed", cfg->mofed_enabled ? cdi_mode_spec(cfg, "mofed") : NULL, err);
}
