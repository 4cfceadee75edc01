/* Topologies for the topology tests and benchmark, built as plain inventories
 * from the same link data as sim/profiles/topo-*.yaml (no NVML involved). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "node/inventory.h"

/* Where a GPU sits in the PCIe tree; -1 = absent. Pair level follows the
 * simulator's rule: same board INTERNAL, same leaf switch SINGLE, common upper
 * switch MULTIPLE, same root complex HOSTBRIDGE, same NUMA node NODE, else SYSTEM. */
struct fx_place {
    int numa, root, upper, leaf, board;
};

/* Names: "dgx1-v100", "dgx-a100", "hgx-h100", "t4-2numa", "16gpu-nvswitch". */
extern const char *const fx_names[];
extern const size_t fx_n_names;

/* Fill inv with the named topology; returns 0 or -ENOENT. */
int fx_build(const char *name, struct inventory *inv);
/* Random topology of n GPUs: random PCIe levels (some unknown), random NVLinks,
 * two NUMA nodes. */
void fx_random(struct inventory *inv, size_t n, uint64_t *rng);
void fx_free(struct inventory *inv);

uint64_t fx_rand(uint64_t *state);
