/* GetPreferredAllocation for one container request: picks the policy that fits the
 * resource and maps kubelet IDs to it.
 *   - any requested ID with a "::" replica suffix → greedy replica policy
 *     (policy/replicas.c, distributed or packed);
 *   - full GPUs with a topology model → exact topology-aware placement (policy/topo.c);
 *   - otherwise (MIG devices) → must-include first, then device order.
 * The answer's strings point into the resource (valid while it lives); the array is
 * malloc'd. An empty answer (n_out == 0) is what the reference returns for requests it
 * cannot satisfy without an error. */
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
