/* Per-claim CDI specs (see dra-cdi.h). */
#include <errno.h>
#include <stdio.h>

#include "dra/dra-cdi.h"
#include "dra/dra-types.h"
#include "output/cdi.h"
#include "policy/resources.h"

#define DRA_CDI_KIND DRA_CDI_VENDOR "/" DRA_CDI_CLASS

char *dra_cdi_device_id(const char *uid, const char *device)
{
    return xasprintf(DRA_CDI_KIND "=%s-%s", uid, device);
}

char *dra_cdi_file_name(const char *uid)
{
    /* The CDI library's transient spec name: "<vendor>-<class>_<id>.yaml". */
    return xasprintf(DRA_CDI_VENDOR "-" DRA_CDI_CLASS "_%s.yaml", uid);
}

json_t *dra_cdi_spec(const struct config *cfg, const struct inventory *inv, const char *uid,
                     const struct dra_device *const *devs, size_t n, struct error *err)
{
    json_t *spec = json_object();
    json_object_set_new(spec, "cdiVersion", json_string(CDI_VERSION));
    json_object_set_new(spec, "kind", json_string(DRA_CDI_KIND));
    json_t *devices = json_array();
    json_object_set_new(spec, "devices", devices);
    for (size_t i = 0; i < n; i++) {
        const struct inv_gpu *gpu = &inv->gpus[devs[i]->gpu];
        const struct inv_mig *mig = devs[i]->type == DRA_DEVICE_MIG ? &gpu->migs[devs[i]->mig] : NULL;
        char **paths = resources_device_paths(gpu, mig, err);
        if (!paths) {
            json_decref(spec);
            error_prefix(err, "device %s", devs[i]->name);
            return NULL;
        }
        json_t *d = json_object();
        json_object_set_new(d, "name", json_sprintf("%s-%s", uid, devs[i]->name));
        json_object_set_new(d, "containerEdits", cdi_device_edits(cfg, paths));
        json_array_append_new(devices, d);
        for (char **p = paths; *p; p++)
            free(*p);
        free(paths);
    }
    json_object_set_new(spec, "containerEdits", cdi_common_edits(cfg));
    return spec;
}

int dra_cdi_write(const char *cdi_root, const char *uid, json_t *spec, struct error *err)
{
    _cleanup_free_ char *file = dra_cdi_file_name(uid);
    int r = cdi_validate(spec, err);
    if (r >= 0)
        /* No fsync (as the checkpoint, dra-checkpoint.c): the runtime reads the page
         * cache, and after an OS crash the kubelet prepares the claim again on the new
         * boot, which rewrites the spec. An fsync here was 1-14 ms of every Prepare. */
        r = cdi_write_spec_file(cdi_root, file, spec, false, err);
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
