/* Topology-aware placement: which `size` GPUs to prefer for a multi-GPU request
 * (GetPreferredAllocation). Pure functions over the inventory; no NVML, no sockets.
 *
 * The objective is go-gpuallocator's best-effort policy, solved exactly (up to
 * TOPO_EXACT_MAX available GPUs) instead of by enumerating every partition. See
 * docs/topology.md for the model, the objective and the proof sketch.
 *
 * Threading: a built model is read-only; topo_preferred() may be called from any
 * thread on the same model concurrently (it keeps its scratch on the stack / heap
 * of the call). */
#pragma once

#include <stddef.h>

#include "node/inventory.h"

/* Above this many available GPUs topo_preferred() switches from the exact search
 * to the documented local-search heuristic (the exact search keeps tables of
 * 2^n entries). */
#define TOPO_EXACT_MAX 16

/* go-gpuallocator counts at most 18 NVLinks between a pair. */
#define TOPO_NVLINK_MAX 18

struct topo_model {
    size_t n;     /* number of GPUs (inventory.n_gpus) */
    int *score;   /* n*n symmetric pair scores, diagonal 0 */
    int *numa;    /* n NUMA nodes, -1 unknown */
};

/* Score of one pair from its link as seen from either side (`ba` may be NULL):
 * PCIe level score (INTERNAL 60, SINGLE 50, MULTIPLE 40, HOSTBRIDGE 30, NODE 20,
 * SYSTEM 10, unknown 0) plus 100 per NVLink (capped at 18); the two add up, as in
 * go-gpuallocator where both are links of the pair. */
int topo_pair_score(const struct inv_link *ab, const struct inv_link *ba);

/* Build the model once at discovery. Never fails on link data: an unknown pair
 * scores only what is known of it. Returns 0, or -EINVAL on a NULL argument.
 * `out` is overwritten; release it with topo_model_clear(). */
int topo_model_build(const struct inventory *inv, struct topo_model *out);
void topo_model_clear(struct topo_model *m);

/* Sum of the pair scores of a set of GPU indices (no bounds check beyond n). */
long topo_set_score(const struct topo_model *m, const int *set, size_t k);

/* Preferred `size` GPUs among `available` that include every `must` GPU.
 * available/must: GPU indices into the inventory, in any order.
 * Writes `size` indices into `out`, sorted ascending, and returns `size`.
 * Returns 0 (the reference's empty answer, not an error) when size == 0,
 * n_available < size, n_must > size, n_must > n_available, or a must GPU is not
 * among the available ones.
 * Returns -EINVAL for an index outside the model or a duplicate index in either
 * list (the kubelet never sends those; the caller maps IDs to indices first and
 * reports unknown IDs itself), -E2BIG if size does not fit an int.
 * The answer depends only on the sets, never on the order of the lists. */
int topo_preferred(const struct topo_model *m, const int *available, size_t n_available,
                   const int *must, size_t n_must, size_t size, int *out);
