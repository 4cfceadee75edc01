/* Per-claim CDI specs (see dra-cdi.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>

#include "dra/dra-cdi.h"
#include "dra/dra-claim.h"
#include "dra/dra-types.h"
#include "output/cdi-edits.h"
#include "output/cdi.h"
#include "policy/resources.h"

#define DRA_CDI_KIND DRA_CDI_VENDOR "/" DRA_CDI_CLASS

char *dra_cdi_device_id(const char *uid, const char *device)
{
    return xasprintf(DRA_CDI_KIND "=%s-%s", uid, device);
}

char *dra_cdi_share_device_id(const char *uid, const char *device, const char *share)
{
    return share ? xasprintf(DRA_CDI_KIND "=%s-%s-%s", uid, device, share)
                 : dra_cdi_device_id(uid, device);
}

char *dra_cdi_file_name(const char *uid)
{
    /* The CDI library's transient spec name: "<vendor>-<class>_<id>.yaml". */
    return xasprintf(DRA_CDI_VENDOR "-" DRA_CDI_CLASS "_%s.yaml", uid);
}

/* A GPU's edits are the device plugin's with its DRM nodes; a MIG device's are its parent
 * GPU's (NVIDIA's DRA driver writes the parent's full-GPU edits for a MIG device) and its
 * two capability nodes in NVIDIA's DRA form (cdi_cap_node), which needs no host node. */
static json_t *device_edits(const struct config *cfg, const struct inventory *inv,
                            const struct inv_gpu *gpu, const struct inv_mig *mig, char **paths)
{
    char *parent[] = { paths[0], NULL };
    json_t *edits = cdi_device_edits(cfg, mig ? parent : paths);
    cdi_add_drm(cfg, inv, gpu, edits);
    if (mig) {
        json_t *nodes = json_object_get(edits, "deviceNodes");
        json_array_append_new(nodes, cdi_cap_node(cfg, paths[1], (unsigned)mig->gi_cap_minor));
        json_array_append_new(nodes, cdi_cap_node(cfg, paths[2], (unsigned)mig->ci_cap_minor));
    }
    cdi_edits_finish(cfg, edits);
    return edits;
}

json_t *dra_cdi_spec(const struct config *cfg, const struct inventory *inv, const char *uid,
                     const struct dra_device *const *devs, const struct inv_mig *made, size_t n,
                     json_t *common, struct error *err)
{
    json_t *spec = json_object();
    json_object_set_new(spec, "cdiVersion", json_string(CDI_VERSION));
    json_object_set_new(spec, "kind", json_string(DRA_CDI_KIND));
    json_t *devices = json_array();
    json_object_set_new(spec, "devices", devices);
    for (size_t i = 0; i < n; i++) {
        const struct inv_gpu *gpu = &inv->gpus[devs[i]->gpu];
        const struct inv_mig *mig = devs[i]->type == DRA_DEVICE_MIG ? &gpu->migs[devs[i]->mig] : NULL;
        if (devs[i]->type == DRA_DEVICE_MIG_PLACEMENT) {
            if (!made || !made[i].uuid[0]) {
                json_decref(spec);
                error_set(err, -EINVAL, "device %s: no MIG device made for it", devs[i]->name);
                return NULL;
            }
            mig = &made[i];
        }
        char **paths = resources_device_paths(gpu, mig, err);
        if (!paths) {
            json_decref(spec);
            error_prefix(err, "device %s", devs[i]->name);
            return NULL;
        }
        json_t *d = json_object();
        json_object_set_new(d, "name", json_sprintf("%s-%s", uid, devs[i]->name));
        json_object_set_new(d, "containerEdits", device_edits(cfg, inv, gpu, mig, paths));
        json_array_append_new(devices, d);
        for (char **p = paths; *p; p++)
            free(*p);
        free(paths);
    }
    json_object_set_new(spec, "containerEdits", common ? json_incref(common) : cdi_common_edits(cfg, inv));
    return spec;
}

int dra_cdi_stage(const char *cdi_root, const char *uid, struct fs_stage *st, struct error *err)
{
    _cleanup_free_ char *file = dra_cdi_file_name(uid);
    int r = cdi_stage_spec_file(cdi_root, file, st, err);
    return r < 0 ? error_prefix(err, "CDI spec %s", file) : 0;
}

int dra_cdi_write(const char *cdi_root, const char *uid, json_t *spec, struct fs_stage *st,
                  struct error *err)
{
    _cleanup_free_ char *file = dra_cdi_file_name(uid);
    _cleanup_free_ char *path = xasprintf("%s/%s", cdi_root, file);
    int r = cdi_validate(spec, err);
    /* Staged for this claim's file, or made now. */
    if (r >= 0 && (!st->tmp || !streq(st->path, path)))
        r = cdi_stage_spec_file(cdi_root, file, st, err);
    /* No fsync (as the checkpoint, dra-checkpoint.c): the runtime reads the page cache,
     * and after an OS crash the kubelet prepares the claim again on the new boot, which
     * rewrites the spec. An fsync here was 1-14 ms of every Prepare. */
    if (r >= 0)
        r = cdi_commit_spec_file(st, spec, false, err);
    fs_stage_abort(st);
    return r < 0 ? error_prefix(err, "CDI spec %s", file) : 0;
}

int dra_cdi_remove(const char *cdi_root, const char *uid, struct error *err)
{
    _cleanup_free_ char *file = dra_cdi_file_name(uid);
    _cleanup_free_ char *path = xasprintf("%s/%s", cdi_root, file);
    /* ENOTDIR: a component of the root is no directory, so no spec can be there; failing
     * would keep the kubelet's unprepare (and the pod's termination) retrying forever for a
     * claim whose prepare never wrote one. */
    if (unlink(path) < 0 && errno != ENOENT && errno != ENOTDIR)
        return error_set(err, -errno, "removing CDI spec %s: %s", path, strerror(errno));
    return 0;
}

/* ".<file of a claim>.XXXXXX": the temporary name fs_stage_open gives a spec's file. */
static bool staged_name(const char *name)
{
    static const char prefix[] = "." DRA_CDI_VENDOR "-" DRA_CDI_CLASS "_", suffix[] = ".yaml.";
    size_t n = strlen(name), pre = sizeof(prefix) - 1, suf = sizeof(suffix) - 1;
    if (n <= pre + suf + 6 || strncmp(name, prefix, pre) != 0 ||
        strncmp(name + n - 6 - suf, suffix, suf) != 0 || n - pre - suf - 6 > DRA_CLAIM_UID_MAX)
        return false;
    char uid[DRA_CLAIM_UID_MAX + 1];
    memcpy(uid, name + pre, n - pre - suf - 6);
    uid[n - pre - suf - 6] = 0;
    for (const char *p = name + n - 6; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return false;
    return dra_claim_uid_valid(uid);
}

int dra_cdi_sweep(const char *cdi_root)
{
    _cleanup_close_ int dfd = open(cdi_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d)
        return 0;
    dfd = -1; /* the DIR owns it now */
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (staged_name(e->d_name) && unlinkat(dirfd(d), e->d_name, 0) == 0)
            n++;
    closedir(d);
    return n;
}
