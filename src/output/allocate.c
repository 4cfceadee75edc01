/* Allocate responses (see allocate.h). */
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "output/allocate.h"

/* Optional control nodes, in the reference's order. */
static const char *const control_nodes[ALLOC_CONTROL_NODES_MAX] = {
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
};

char *alloc_join_root(const char *root, const char *path)
{
    if (!root || !*root)
        return xstrdup(path);
    size_t n = strlen(root);
    while (n > 0 && root[n - 1] == '/')
        n--;
    while (*path == '/')
        path++;
    return xasprintf("%.*s/%s", (int)n, root, path);
}

/* ---- validation ----------------------------------------------------------------- */

int alloc_validate(const struct rs_resource *r, const char *const *ids, size_t n_ids,
                   struct error *err)
{
    bool annotated = false;
    for (size_t i = 0; i < n_ids; i++) {
        if (!resources_find_device(r, ids[i]))
            return error_set(err, -ENOENT,
                             "invalid allocation request for \"%s\": invalid request: unknown device: %s",
                             r->name, ids[i]);
        if (strstr(ids[i], "::"))
            annotated = true;
    }
    if (r->sharing != SHARING_NONE && annotated && n_ids > 1 && r->fail_requests_greater_than_one)
        return error_set(err, -EINVAL,
                         "invalid allocation request for \"%s\": invalid request: maximum request "
                         "size for shared resources is 1; found %zu",
                         r->name, n_ids);
    return 0;
}

/* ---- response building ------------------------------------------------------------ */

static void env_set(V1beta1__ContainerAllocateResponse *resp, const char *key, const char *value)
{
    for (size_t i = 0; i < resp->n_envs; i++)
        if (streq(resp->envs[i]->key, key)) {
            free(resp->envs[i]->value);
            resp->envs[i]->value = xstrdup(value);
            return;
        }
    V1beta1__ContainerAllocateResponse__EnvsEntry *e = xmalloc(sizeof(*e));
    v1beta1__container_allocate_response__envs_entry__init(e);
    e->key = xstrdup(key);
    e->value = xstrdup(value);
    resp->envs = xreallocarray(resp->envs, resp->n_envs + 1, sizeof(*resp->envs));
    resp->envs[resp->n_envs++] = e;
}

static void annotation_add(V1beta1__ContainerAllocateResponse *resp, char *key, char *value)
{
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *e = xmalloc(sizeof(*e));
    v1beta1__container_allocate_response__annotations_entry__init(e);
    e->key = key;
    e->value = value;
    resp->annotations = xreallocarray(resp->annotations, resp->n_annotations + 1,
                                      sizeof(*resp->annotations));
    resp->annotations[resp->n_annotations++] = e;
}

/* Takes ownership of both paths. */
static void mount_add(V1beta1__ContainerAllocateResponse *resp, char *container, char *host)
{
    V1beta1__Mount *m = xmalloc(sizeof(*m));
    v1beta1__mount__init(m);
    m->container_path = container;
    m->host_path = host;
    m->read_only = false;
    resp->mounts = xreallocarray(resp->mounts, resp->n_mounts + 1, sizeof(*resp->mounts));
    resp->mounts[resp->n_mounts++] = m;
}

static void spec_add(V1beta1__ContainerAllocateResponse *resp, const struct config *cfg,
                     const char *path)
{
    V1beta1__DeviceSpec *s = xmalloc(sizeof(*s));
    v1beta1__device_spec__init(s);
    s->container_path = xstrdup(path);
    s->host_path = alloc_join_root(cfg->dev_root, path);
    s->permissions = xstrdup("rw");
    resp->devices = xreallocarray(resp->devices, resp->n_devices + 1, sizeof(*resp->devices));
    resp->devices[resp->n_devices++] = s;
}

static void cdi_add(V1beta1__ContainerAllocateResponse *resp, const char *name)
{
    V1beta1__CDIDevice *c = xmalloc(sizeof(*c));
    v1beta1__cdidevice__init(c);
    c->name = xstrdup(name);
    resp->cdi_devices = xreallocarray(resp->cdi_devices, resp->n_cdi_devices + 1,
                                      sizeof(*resp->cdi_devices));
    resp->cdi_devices[resp->n_cdi_devices++] = c;
}

/* Growable comma-joined list. */
struct joined {
    char *s;
    size_t len;
};

static void joined_add(struct joined *j, const char *item)
{
    size_t n = strlen(item);
    j->s = xrealloc(j->s, j->len + n + 2);
    if (j->len)
        j->s[j->len++] = ',';
    memcpy(j->s + j->len, item, n + 1);
    j->len += n;
}

static int random_uuid(char out[37])
{
    uint8_t b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    b[6] = (b[6] & 0x0f) | 0x40; /* version 4 */
    b[8] = (b[8] & 0x3f) | 0x80; /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return 0;
}

int alloc_mps_paths(const struct rs_resource *r, const struct config *cfg, struct alloc_mps *out,
                    struct error *err)
{
    if (!cfg->mps_root || !*cfg->mps_root)
        return error_set(err, -EINVAL, "using MPS requires --mps-root to be specified");
    _cleanup_free_ char *res_dir = alloc_join_root(cfg->mps_root, r->name);
    *out = (struct alloc_mps){
        .pipe_dir = xasprintf(ALLOC_MPS_CONTAINER_ROOT "/%s/pipe", r->name),
        .host_pipe_dir = xasprintf("%s/pipe", res_dir),
        .host_shm = alloc_join_root(cfg->mps_root, "shm"),
        .host_started = xasprintf("%s/.started", res_dir),
    };
    return 0;
}

void alloc_mps_clear(struct alloc_mps *m)
{
    free(m->pipe_dir);
    free(m->host_pipe_dir);
    free(m->host_shm);
    free(m->host_started);
    memset(m, 0, sizeof(*m));
}

/* Control nodes are looked for under the dev root first (where the host's nodes are
 * when the plugin sees the host tree there), then at the plain path, which is all the
 * reference checks (the runtime injected them into its container). */
size_t alloc_control_nodes(const struct config *cfg, const char *out[ALLOC_CONTROL_NODES_MAX])
{
    size_t n = 0;
    for (size_t i = 0; i < ELEMENTSOF(control_nodes); i++) {
        struct stat st;
        _cleanup_free_ char *under = alloc_join_root(cfg->dev_root, control_nodes[i]);
        if (stat(under, &st) == 0 || stat(control_nodes[i], &st) == 0)
            out[n++] = control_nodes[i];
    }
    return n;
}

void alloc_response_free(V1beta1__ContainerAllocateResponse *resp)
{
    if (resp)
        protobuf_c_message_free_unpacked(&resp->base, NULL);
}

V1beta1__ContainerAllocateResponse *alloc_container(const struct rs_resource *r,
                                                    const struct config *cfg,
                                                    const char *const *ids, size_t n_ids,
                                                    struct error *err)
{
    if (alloc_validate(r, ids, n_ids, err) < 0)
        return NULL;

    /* devIDs: physical IDs (base_id is the uuid or the index per strategy), first
     * occurrence wins, request order — also for index, where the reference's order
     * is map order. */
    _cleanup_free_ const char **dev_ids = xcalloc(n_ids + 1, sizeof(char *));
    size_t n_dev = 0;
    for (size_t i = 0; i < n_ids; i++) {
        const char *base = resources_find_device(r, ids[i])->base_id;
        bool seen = false;
        for (size_t k = 0; k < n_dev && !seen; k++)
            seen = streq(dev_ids[k], base);
        if (!seen)
            dev_ids[n_dev++] = base;
    }

    V1beta1__ContainerAllocateResponse *resp = xmalloc(sizeof(*resp));
    v1beta1__container_allocate_response__init(resp);

    const unsigned strat = cfg->device_list_strategy;
    const unsigned cdi_bits = DEVICE_LIST_CDI_ANNOTATIONS | DEVICE_LIST_CDI_CRI;

    /* 1. CDI device names */
    if (strat & cdi_bits) {
        _cleanup_free_ char **names = xcalloc(n_dev + cfg->n_imex_channel_ids + 4, sizeof(char *));
        size_t n_names = 0;
        for (size_t i = 0; i < n_dev; i++)
            names[n_names++] = xasprintf(ALLOC_CDI_VENDOR "/gpu=%s", dev_ids[i]);
        for (size_t i = 0; i < cfg->n_imex_channel_ids; i++)
            names[n_names++] = xasprintf(ALLOC_CDI_VENDOR "/imex-channel=%d", cfg->imex_channel_ids[i]);
        if (cfg->gdrcopy_enabled)
            names[n_names++] = xstrdup(ALLOC_CDI_VENDOR "/gdrcopy=all");
        if (cfg->gds_enabled)
            names[n_names++] = xstrdup(ALLOC_CDI_VENDOR "/gds=all");
        if (cfg->mofed_enabled)
            names[n_names++] = xstrdup(ALLOC_CDI_VENDOR "/mofed=all");

        if (n_names && (strat & DEVICE_LIST_CDI_ANNOTATIONS)) {
            char uuid[37];
            int rr = random_uuid(uuid);
            if (rr < 0) {
                for (size_t i = 0; i < n_names; i++)
                    free(names[i]);
                alloc_response_free(resp);
                error_set(err, rr, "generating CDI annotation key: %s", strerror(-rr));
                return NULL;
            }
            struct joined j = { 0 };
            for (size_t i = 0; i < n_names; i++)
                joined_add(&j, names[i]);
            const char *prefix = cfg->cdi_annotation_prefix ? cfg->cdi_annotation_prefix : "cdi.k8s.io/";
            annotation_add(resp, xasprintf("%snvidia-device-plugin_%s", prefix, uuid), j.s);
        }
        if (strat & DEVICE_LIST_CDI_CRI)
            for (size_t i = 0; i < n_names; i++)
                cdi_add(resp, names[i]);
        for (size_t i = 0; i < n_names; i++)
            free(names[i]);
    }

    /* 2. MPS */
    if (r->sharing == SHARING_MPS) {
        struct alloc_mps m;
        if (alloc_mps_paths(r, cfg, &m, err) < 0) {
            alloc_response_free(resp);
            return NULL;
        }
        env_set(resp, "CUDA_MPS_PIPE_DIRECTORY", m.pipe_dir);
        mount_add(resp, xstrdup(m.pipe_dir), TAKE_PTR(m.host_pipe_dir));
        mount_add(resp, xstrdup("/dev/shm"), TAKE_PTR(m.host_shm));
        alloc_mps_clear(&m);
    }

    /* 3. extras */
    if (cfg->gdrcopy_enabled)
        env_set(resp, "NVIDIA_GDRCOPY", "enabled");
    if (cfg->gds_enabled)
        env_set(resp, "NVIDIA_GDS", "enabled");
    if (cfg->mofed_enabled)
        env_set(resp, "NVIDIA_MOFED", "enabled");

    /* 4. CDI only: the runtime does the rest */
    if (strat && (strat & ~cdi_bits) == 0)
        return resp;

    /* 5. envvar */
    if (strat & DEVICE_LIST_ENVVAR) {
        struct joined j = { 0 };
        for (size_t i = 0; i < n_dev; i++)
            joined_add(&j, dev_ids[i]);
        env_set(resp, "NVIDIA_VISIBLE_DEVICES", j.s ? j.s : "");
        free(j.s);
        if (cfg->n_imex_channel_ids) {
            struct joined c = { 0 };
            for (size_t i = 0; i < cfg->n_imex_channel_ids; i++) {
                char buf[16];
                snprintf(buf, sizeof(buf), "%d", cfg->imex_channel_ids[i]);
                joined_add(&c, buf);
            }
            env_set(resp, "NVIDIA_IMEX_CHANNELS", c.s);
            free(c.s);
        }
    }

    /* 6. volume-mounts */
    if (strat & DEVICE_LIST_VOLUME_MOUNTS) {
        env_set(resp, "NVIDIA_VISIBLE_DEVICES", ALLOC_VOLUME_MOUNTS_ROOT);
        for (size_t i = 0; i < n_dev; i++)
            mount_add(resp, xasprintf(ALLOC_VOLUME_MOUNTS_ROOT "/%s", dev_ids[i]), xstrdup("/dev/null"));
        for (size_t i = 0; i < cfg->n_imex_channel_ids; i++)
            mount_add(resp, xasprintf(ALLOC_VOLUME_MOUNTS_ROOT "/imex/%d", cfg->imex_channel_ids[i]),
                      xstrdup("/dev/null"));
    }

    /* 7. device specs: every requested ID (replicas repeat their GPU's nodes) */
    if (cfg->pass_device_specs) {
        const char *ctl[ALLOC_CONTROL_NODES_MAX];
        size_t n_ctl = alloc_control_nodes(cfg, ctl);
        for (size_t i = 0; i < n_ctl; i++)
            spec_add(resp, cfg, ctl[i]);
        for (size_t i = 0; i < n_ids; i++) {
            const struct rs_device *d = resources_find_device(r, ids[i]);
            for (char **p = d->paths; p && *p; p++)
                spec_add(resp, cfg, *p);
        }
        for (size_t i = 0; i < cfg->n_imex_channel_ids; i++) {
            char path[64];
            snprintf(path, sizeof(path), ALLOC_IMEX_CHANNEL_DIR "/channel%d", cfg->imex_channel_ids[i]);
            spec_add(resp, cfg, path);
        }
    }
    return resp;
}
