/* GetPreferredAllocation for one container request: picks the policy that fits the
 * resource and maps kubelet IDs to it, as the reference does (§2.6):
 *   - a MIG resource, or any available ID with a "::" replica suffix → greedy replica
 *     policy (policy/replicas.c, distributed or packed), which fails with "not enough
 *     available devices to satisfy allocation" when it cannot fill the request;
 *   - otherwise (full GPUs, the reference's aligned policy) → an empty answer when
 *     size <= 0, fewer than size are available, more than size are required (or size
 *     exceeds the resource), else exact topology-aware placement (policy/topo.c), or
 *     first fit without a topology model.
 * A must-include ID that is not a device of the resource is an error naming it (the
 * reference echoes it back). Peer-given sizes are bounded by the resource before they
 * size any allocation.
 * The answer's strings point into the resource or the request (valid while both live);
 * the array is malloc'd (NULL or empty when n_out == 0). */
#pragma once

#include "config/config.h"
#include "core/error.h"
#include "policy/resources.h"

struct topo_model;

struct placement_request {
    const char *const *available;
    size_t n_available;
    const char *const *must_include;
    size_t n_must_include;
    int size;
};

int placement_preferred(const struct rs_resource *r, const struct config *cfg,
                        const struct topo_model *topo, const struct placement_request *req,
                        const char ***out, size_t *n_out, struct error *err);
