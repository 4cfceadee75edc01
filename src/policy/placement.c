/* GetPreferredAllocation policy choice (see placement.h). */
#include "placement.h"
#include "replicas.h"
#include "topo.h"

static bool has_replica_ids(const struct placement_request *req)
{
    for (size_t i = 0; i < req->n_available; i++)
        if (strstr(req->available[i], "::"))
            return true;
    return false;
}

/* The reference's "aligned" policy applies when no device of the resource is a MIG
 * device and no available ID is a replica (§2.6); everything else is greedy. */
static bool aligned_applies(const struct rs_resource *r, const struct placement_request *req)
{
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].mig >= 0)
            return false;
    return !has_replica_ids(req);
}

/* Topology placement works on full GPUs only (no replica in the resource either). */
static bool topology_applies(const struct rs_resource *r, const struct topo_model *topo)
{
    if (!topo || topo->n == 0)
        return false;
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].mig >= 0 || r->devices[i].replica >= 0)
            return false;
    return true;
}

static int map_ids(const struct rs_resource *r, const char *const *ids, size_t n, int *gpus,
                   struct error *err)
{
    for (size_t i = 0; i < n; i++) {
        const struct rs_device *d = resources_find_device(r, ids[i]);
        if (!d)
            return error_set(err, -ENOENT, "no device with uuid: %s", ids[i]);
        gpus[i] = d->gpu;
    }
    return 0;
}

static const char *id_of_gpu(const struct rs_resource *r, int gpu)
{
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].gpu == gpu)
            return r->devices[i].id;
    return NULL;
}

static int topology_preferred(const struct rs_resource *r, const struct topo_model *topo,
                              const struct placement_request *req, const char ***out,
                              size_t *n_out, struct error *err)
{
    _cleanup_free_ int *avail = xcalloc(req->n_available + 1, sizeof(int));
    _cleanup_free_ int *must = xcalloc(req->n_must_include + 1, sizeof(int));
    int rc;
    *out = NULL;
    *n_out = 0;
    if ((rc = map_ids(r, req->available, req->n_available, avail, err)) < 0 ||
        (rc = map_ids(r, req->must_include, req->n_must_include, must, err)) < 0)
        return rc;
    /* 0 < size <= n_available: placement_preferred answered every other size */
    _cleanup_free_ int *picked = xcalloc((size_t)req->size, sizeof(int));
    rc = topo_preferred(topo, avail, req->n_available, must, req->n_must_include,
                        (size_t)req->size, picked);
    if (rc < 0)
        return error_set(err, rc, "topology placement failed: %s", strerror(-rc));
    const char **ids = xcalloc((size_t)rc + 1, sizeof(char *));
    for (int i = 0; i < rc; i++)
        ids[i] = id_of_gpu(r, picked[i]);
    *out = ids;
    *n_out = (size_t)rc;
    return 0;
}

int placement_preferred(const struct rs_resource *r, const struct config *cfg,
                        const struct topo_model *topo, const struct placement_request *req,
                        const char ***out, size_t *n_out, struct error *err)
{
    *out = NULL;
    *n_out = 0;
    /* The reference echoes must-include IDs it does not know (greedy policy); the
     * kubelet then hands the container a device this plugin never advertised. An
     * unknown one is the caller's mistake: say which. */
    for (size_t i = 0; i < req->n_must_include; i++)
        if (!resources_find_device(r, req->must_include[i]))
            return error_set(err, -ENOENT, "unknown must-include device: %s", req->must_include[i]);

    if (!aligned_applies(r, req))
        return replicas_preferred(r, cfg->shared_alloc_policy, req->available, req->n_available,
                                  req->must_include, req->n_must_include, req->size, out, n_out,
                                  err);

    /* The reference maps every available ID first: an unknown one is an error even
     * where the answer would be empty. */
    for (size_t i = 0; i < req->n_available; i++)
        if (!resources_find_device(r, req->available[i]))
            return error_set(err, -ENOENT, "no device with uuid: %s", req->available[i]);
    /* The aligned policy's empty answers, checked before anything is sized by the
     * peer's allocation_size (an INT32_MAX size must not become a huge allocation). */
    if (req->size <= 0 || req->n_available < (size_t)req->size ||
        req->n_must_include > (size_t)req->size || (size_t)req->size > r->n_devices) {
        *out = xcalloc(1, sizeof(char *));
        return 0;
    }
    if (topology_applies(r, topo))
        return topology_preferred(r, topo, req, out, n_out, err);
    return replicas_first_fit(r, req->available, req->n_available, req->must_include,
                              req->n_must_include, req->size, out, n_out, err);
}
