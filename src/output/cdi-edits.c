/* The container edits of our CDI specs (see cdi-edits.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/fs.h"
#include "output/allocate.h"
#include "output/cdi-edits.h"

#define HOOK_DEFAULT "/usr/bin/nvidia-ctk"

static bool has_flag(char *const *v, const char *name)
{
    for (; v && *v; v++)
        if (streq(*v, name))
            return true;
    return false;
}

static json_t *string_take(char *s)
{
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* Where this process sees the node: under the container driver root when that holds a
 * dev/ (nvcdi's dev root), under --dev-root, then at the plain path (the runtime gave it
 * to our own container). The path found (malloc'd) with *st from lstat, or NULL. */
static char *find_node(const struct config *cfg, const char *path, struct stat *st)
{
    const char *ctr = cfg->driver_root_ctr_path;
    if (ctr && *ctr && !streq(ctr, "/")) {
        _cleanup_free_ char *dev = alloc_join_root(ctr, "/dev");
        struct stat dst;
        if (stat(dev, &dst) == 0 && S_ISDIR(dst.st_mode)) {
            char *p = alloc_join_root(ctr, path);
            if (lstat(p, st) == 0)
                return p;
            free(p);
        }
    }
    char *under = alloc_join_root(cfg->dev_root, path);
    if (lstat(under, st) == 0)
        return under;
    free(under);
    return lstat(path, st) == 0 ? xstrdup(path) : NULL;
}

/* The node's path on the host, as nvcdi writes it: under --dev-root when that was given
 * apart from the driver root; else under the driver root when the driver root (as we see
 * it) has a dev/, which is then nvcdi's dev root; else the plain path. */
static char *node_host_path(const struct config *cfg, const char *path)
{
    if (!streq_ptr(cfg->dev_root, cfg->driver_root))
        return alloc_join_root(cfg->dev_root, path);
    const char *ctr = cfg->driver_root_ctr_path;
    struct stat st;
    if (!ctr || !*ctr || stat(ctr, &st) < 0 || !S_ISDIR(st.st_mode))
        ctr = cfg->driver_root; /* not mounted here: the plugin runs on the host */
    _cleanup_free_ char *dev = alloc_join_root(ctr, "/dev");
    if (stat(dev, &st) == 0 && S_ISDIR(st.st_mode))
        return alloc_join_root(cfg->driver_root, path);
    return xstrdup(path);
}

static bool stat_node(const struct config *cfg, const char *path, struct stat *st)
{
    _cleanup_free_ char *found = find_node(cfg, path, st);
    return found != NULL;
}

json_t *cdi_device_node(const struct config *cfg, const char *path)
{
    json_t *n = json_object();
    json_object_set_new(n, "path", json_string(path));
    json_object_set_new(n, "hostPath", string_take(node_host_path(cfg, path)));
    struct stat st;
    if (stat_node(cfg, path, &st)) {
        /* Zero values are left out, as the CDI library's YAML/JSON omits them. */
        if (major(st.st_rdev))
            json_object_set_new(n, "major", json_integer(major(st.st_rdev)));
        if (minor(st.st_rdev))
            json_object_set_new(n, "minor", json_integer(minor(st.st_rdev)));
        if (st.st_mode & 07777)
            json_object_set_new(n, "fileMode", json_integer(st.st_mode & 07777));
        json_object_set_new(n, "permissions", json_string("rwm"));
        if (st.st_gid)
            json_object_set_new(n, "gid", json_integer(st.st_gid));
    }
    /* Not found: path and hostPath only, as nvcdi writes it; the runtime names the node
     * it cannot find when it applies the spec. */
    return n;
}

/* The major of "nvidia-caps" in <proc>/devices' character devices; 0 unknown. */
static unsigned caps_major(const struct config *cfg)
{
    _cleanup_free_ char *path = xasprintf("%s/devices", cfg->proc_root && *cfg->proc_root ? cfg->proc_root : "/proc");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (read_file_bounded(path, 64 * 1024, &text, &len, NULL) < 0)
        return 0;
    bool chr = false;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (startswith(l, "Character devices:") || startswith(l, "Block devices:")) {
            chr = startswith(l, "Character");
            continue;
        }
        unsigned maj;
        char name[64];
        if (chr && sscanf(l, " %u %63s", &maj, name) == 2 && streq(name, "nvidia-caps"))
            return maj;
    }
    return 0;
}

json_t *cdi_cap_node(const struct config *cfg, const char *path, unsigned minor_nr)
{
    json_t *n = json_object();
    json_object_set_new(n, "path", json_string(path));
    json_object_set_new(n, "type", json_string("c"));
    struct stat st;
    bool found = stat_node(cfg, path, &st) && S_ISCHR(st.st_mode);
    unsigned maj = found ? major(st.st_rdev) : caps_major(cfg);
    if (maj)
        json_object_set_new(n, "major", json_integer(maj));
    if (minor_nr)
        json_object_set_new(n, "minor", json_integer(minor_nr));
    /* The driver makes a capability's access file 0444 unless told otherwise. */
    json_object_set_new(n, "fileMode", json_integer(found ? (st.st_mode & 07777) : 0444));
    return n;
}

/* ---- the driver's edits ------------------------------------------------------------------ */

struct hooks {
    json_t *list;
    const char *path;     /* as the runtime finds it */
    const char *argv0;    /* its base name */
    bool ctk;             /* nvidia-ctk: "nvidia-ctk hook <name>" */
    char *const *disabled;
};

static json_t *hook_start(struct hooks *h, const char *name)
{
    if (has_flag(h->disabled, "all") || has_flag(h->disabled, name))
        return NULL;
    json_t *args = json_array();
    json_array_append_new(args, json_string(h->argv0));
    if (h->ctk)
        json_array_append_new(args, json_string("hook"));
    json_array_append_new(args, json_string(name));
    return args;
}

static void hook_add(struct hooks *h, json_t *args)
{
    json_t *o = json_object();
    json_object_set_new(o, "hookName", json_string("createContainer"));
    json_object_set_new(o, "path", json_string(h->path));
    json_object_set_new(o, "args", args);
    json_t *env = json_array();
    json_array_append_new(env, json_string("NVIDIA_CTK_DEBUG=false"));
    json_object_set_new(o, "env", env);
    json_array_append_new(h->list, o);
}

static void links_hook(struct hooks *h, char *const *links, size_t n)
{
    json_t *args = n ? hook_start(h, "create-symlinks") : NULL;
    if (!args)
        return;
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(args, json_string("--link"));
        json_array_append_new(args, json_string(links[i]));
    }
    hook_add(h, args);
}

/* The hook path as the runtime on the host runs it: under the host driver root when we
 * were given it under the container's view of that root. */
static char *host_hook_path(const struct config *cfg)
{
    const char *p = cfg->nvidia_cdi_hook_path && *cfg->nvidia_cdi_hook_path
                        ? cfg->nvidia_cdi_hook_path : HOOK_DEFAULT;
    const char *ctr = cfg->driver_root_ctr_path;
    size_t cl = ctr ? strlen(ctr) : 0;
    if (cl > 1 && strncmp(p, ctr, cl) == 0 && p[cl] == '/')
        return alloc_join_root(cfg->driver_root, p + cl);
    return xstrdup(p);
}

static void hooks_init(struct hooks *h, const struct config *cfg, char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    *h = (struct hooks){
        .list = json_array(), .path = path, .argv0 = base, .ctk = streq(base, "nvidia-ctk"),
        .disabled = cfg->cdi_disable_hooks,
    };
}

static json_t *driver_hooks(const struct config *cfg, const struct driver_files *d)
{
    _cleanup_free_ char *path = host_hook_path(cfg);
    struct hooks h;
    hooks_init(&h, cfg, path);
    links_hook(&h, d->graphics_links, d->n_graphics_links);
    links_hook(&h, d->links, d->n_links);
    json_t *args = hook_start(&h, "enable-cuda-compat");
    if (args) {
        if (!strchr(d->version, '*'))
            json_array_append_new(args, json_sprintf("--host-driver-version=%s", d->version));
        hook_add(&h, args);
    }
    if ((args = hook_start(&h, "update-ldcache"))) {
        for (size_t i = 0; i < d->n_folders; i++) {
            json_array_append_new(args, json_string("--folder"));
            json_array_append_new(args, json_string(d->folders[i]));
        }
        hook_add(&h, args);
    }
    if ((args = hook_start(&h, "disable-device-node-modification")))
        hook_add(&h, args);
    return h.list;
}

/* ---- a GPU's DRM nodes ------------------------------------------------------------------ */

#define DRM_NODES_MAX 8

void cdi_add_drm(const struct config *cfg, const struct inventory *inv, const struct inv_gpu *gpu,
                 json_t *edits)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices/%s/drm",
                                         cfg->sysfs_root && *cfg->sysfs_root ? cfg->sysfs_root : "/sys",
                                         gpu->bus_id);
    struct dirent **list = NULL;
    int n = scandir(dir, &list, NULL, alphasort);
    json_t *nodes = json_object_get(edits, "deviceNodes");
    char *added[DRM_NODES_MAX];
    size_t n_added = 0;
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name;
        if (n_added < DRM_NODES_MAX && (startswith(name, "card") || startswith(name, "renderD"))) {
            _cleanup_free_ char *path = xasprintf("/dev/dri/%s", name);
            struct stat st;
            if (stat_node(cfg, path, &st) && S_ISCHR(st.st_mode)) {
                json_array_append_new(nodes, cdi_device_node(cfg, path));
                added[n_added++] = xstrdup(name);
            }
        }
        free(list[i]);
    }
    free(list);
    /* /dev/dri/by-path/pci-<bus>-card and -render, made in the container where the host has
     * them and they lead to a node given above (nvcdi's by-path hook). */
    json_t *links = json_array();
    static const char *const kinds[] = { "card", "render" };
    for (size_t k = 0; k < ELEMENTSOF(kinds) && n_added; k++) {
        _cleanup_free_ char *path = xasprintf("/dev/dri/by-path/pci-%s-%s", gpu->bus_id, kinds[k]);
        struct stat st;
        _cleanup_free_ char *found = find_node(cfg, path, &st);
        char target[256];
        ssize_t tl = found && S_ISLNK(st.st_mode) ? readlink(found, target, sizeof(target) - 1) : -1;
        if (tl <= 0)
            continue;
        target[tl] = 0;
        const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
        for (size_t a = 0; a < n_added; a++)
            if (streq(added[a], base)) {
                json_array_append_new(links, json_sprintf("%s::%s", target, path));
                break;
            }
    }
    for (size_t a = 0; a < n_added; a++)
        free(added[a]);
    if (json_array_size(links) && !inv->driver.hook_missing) {
        _cleanup_free_ char *hook = host_hook_path(cfg);
        struct hooks h;
        hooks_init(&h, cfg, hook);
        json_t *args = hook_start(&h, "create-symlinks");
        if (args) {
            size_t i;
            json_t *l;
            json_array_foreach(links, i, l) {
                json_array_append_new(args, json_string("--link"));
                json_array_append_new(args, json_incref(l));
            }
            hook_add(&h, args);
            json_object_set_new(edits, "hooks", h.list);
        } else {
            json_decref(h.list);
        }
    }
    json_decref(links);
}

static json_t *mount(const struct config *cfg, const char *src, const char *dst, bool ipc)
{
    json_t *m = json_object();
    json_object_set_new(m, "hostPath", string_take(alloc_join_root(cfg->driver_root, src)));
    json_object_set_new(m, "containerPath", json_string(dst));
    json_t *opts = json_array();
    static const char *const file_opts[] = { "ro", "nosuid", "nodev", "rbind", "rprivate" };
    static const char *const ipc_opts[] = { "nosuid", "nodev", "rbind", "rprivate", "noexec" };
    for (size_t i = 0; i < 5; i++)
        json_array_append_new(opts, json_string(ipc ? ipc_opts[i] : file_opts[i]));
    json_object_set_new(m, "options", opts);
    return m;
}

json_t *cdi_driver_edits(const struct config *cfg, const struct inventory *inv)
{
    static const struct driver_files none;
    const struct driver_files *d = inv ? &inv->driver : &none;
    json_t *edits = json_object();
    json_t *env = json_array();
    if (d->libcuda_dir)
        json_array_append_new(env, json_sprintf("NVIDIA_CTK_LIBCUDA_DIR=%s", d->libcuda_dir));
    /* Keeps a legacy-mode nvidia runtime from injecting GPUs on top of CDI. */
    json_array_append_new(env, json_string("NVIDIA_VISIBLE_DEVICES=void"));
    json_object_set_new(edits, "env", env);
    if (!d->libcuda_dir)
        return edits;
    if (!d->hook_missing)
        json_object_set_new(edits, "hooks", driver_hooks(cfg, d));
    json_t *mounts = json_array();
    for (size_t i = 0; i < d->n_mounts; i++) {
        const struct driver_mount *m = &d->mounts[i];
        json_array_append_new(mounts, mount(cfg, m->src, m->dst, m->ipc));
        if (d->hook_missing && m->library && m->soname && !strchr(m->soname, '/')) {
            _cleanup_free_ char *dir = xstrndup(m->dst, (size_t)(strrchr(m->dst, '/') - m->dst));
            _cleanup_free_ char *at = xasprintf("%s/%s", dir, m->soname);
            json_array_append_new(mounts, mount(cfg, m->src, at, false));
        }
    }
    json_object_set_new(edits, "mounts", mounts);
    return edits;
}

/* ---- order and groups --------------------------------------------------------------------- */

static size_t depth(const char *p)
{
    size_t n = 0;
    for (; p && *p; p++)
        n += *p == '/';
    return n;
}

struct keyed {
    const char *key;
    json_t *item;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    size_t dx = depth(x->key), dy = depth(y->key);
    if (dx != dy)
        return dx < dy ? -1 : 1;
    return strcmp(x->key ? x->key : "", y->key ? y->key : "");
}

/* nvcdi's sorter: by the number of "/" in the container path, then bytewise. */
static void sort_by_path(json_t *edits, const char *field, const char *key)
{
    json_t *a = json_object_get(edits, field);
    size_t n = json_array_size(a);
    if (n < 2)
        return;
    struct keyed *v = xcalloc(n, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        v[i].item = json_incref(json_array_get(a, i));
        v[i].key = json_string_value(json_object_get(v[i].item, key));
    }
    qsort(v, n, sizeof(*v), cmp_keyed);
    json_array_clear(a);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, v[i].item);
    free(v);
}

static int cmp_int(const void *a, const void *b)
{
    json_int_t x = *(const json_int_t *)a, y = *(const json_int_t *)b;
    return x < y ? -1 : x > y;
}

void cdi_edits_finish(const struct config *cfg, json_t *edits)
{
    sort_by_path(edits, "deviceNodes", "path");
    sort_by_path(edits, "mounts", "containerPath");
    if (has_flag(cfg->cdi_feature_flags, "no-additional-gids-for-device-nodes"))
        return;
    /* A node only its group may use: the container's process joins that group. */
    json_t *nodes = json_object_get(edits, "deviceNodes");
    size_t n = json_array_size(nodes), k = 0;
    json_int_t *gids = xcalloc(n ? n : 1, sizeof(*gids));
    for (size_t i = 0; i < n; i++) {
        json_t *node = json_array_get(nodes, i);
        json_int_t gid = json_integer_value(json_object_get(node, "gid"));
        json_int_t mode = json_integer_value(json_object_get(node, "fileMode"));
        if (gid > 0 && (mode & 0006) != 0006)
            gids[k++] = gid;
    }
    qsort(gids, k, sizeof(*gids), cmp_int);
    json_t *out = NULL;
    for (size_t i = 0; i < k; i++) {
        if (i && gids[i] == gids[i - 1])
            continue;
        if (!out)
            out = json_array();
        json_array_append_new(out, json_integer(gids[i]));
    }
    free(gids);
    if (out)
        json_object_set_new(edits, "additionalGids", out);
}

const char *cdi_spec_version(json_t *spec)
{
    if (json_object_get(json_object_get(spec, "containerEdits"), "additionalGids"))
        return "0.7.0";
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
        if (json_object_get(json_object_get(d, "containerEdits"), "additionalGids"))
            return "0.7.0";
    return "0.5.0";
}
