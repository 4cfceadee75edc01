/* GetPreferredAllocation for resources the topology optimiser does not handle:
 * replicated and MIG devices (the reference's greedy replica policy, §2.6) and a plain
 * first fit for full GPUs without a topology model. Pure functions over a struct
 * rs_resource.
 *
 * Results are arrays of `const char *` borrowed from the inputs: must-include IDs point
 * at the caller's strings, picked IDs at r->devices[].id. The caller frees only the
 * array (free()), and must not use it after the resource set or the request is gone. */
#pragma once

#include <stddef.h>

#include "config/config.h"
#include "core/error.h"
#include "policy/resources.h"

/* Greedy replica policy: must-include first (as given), then `size - n_must` IDs
 * picked one at a time from (available ∩ r) − must: the physical device with the
 * fewest (distributed) / most (packed) replicas already allocated, then the fewest
 * picked in this call, then the first in device order. Ties the reference leaves to
 * map order are broken by device order, so the answer is deterministic.
 * Fails with "not enough available devices to satisfy allocation". */
int replicas_preferred(const struct rs_resource *r, enum shared_alloc_policy policy,
                       const char *const *available, size_t n_available,
                       const char *const *must, size_t n_must, int size,
                       const char ***out, size_t *n_out, struct error *err);

/* First fit: must-include first, then available devices of r in device order. Like the
 * reference's aligned policy it answers an empty list (not an error) when size <= 0,
 * fewer than size are available or more than size are required; also when size is
 * more than r has devices (nothing is allocated by size then). */
int replicas_first_fit(const struct rs_resource *r,
                       const char *const *available, size_t n_available,
                       const char *const *must, size_t n_must, int size,
                       const char ***out, size_t *n_out, struct error *err);
