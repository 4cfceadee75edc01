/* Brute force of go-gpuallocator's best-effort policy: enumerates every partition
 * of the available GPUs exactly like its iterateGPUPartitions (padding included).
 * Shared by the topology test (ground truth) and bench-topo (optimality ratio and
 * the reference's own cost). Exponential: only for small cases. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "policy/topo.h"

#define TOPO_BRUTE_MAXN 16
#define TOPO_BRUTE_PAD (-1)

/* Fill m, must, n_must, size; brute_run() fills the rest. */
struct brute {
    const struct topo_model *m;
    const int *must;
    size_t n_must, size;
    int padding;
    /* objective over every partition */
    bool any;
    long opt;               /* best partition score among valid partitions */
    long best_set;          /* best full must-set score among optimal partitions */
    unsigned best_span;
    int best[TOPO_BRUTE_MAXN];         /* sorted */
    /* the reference's literal pick: first best partition, first best set in it */
    bool ref_any;
    long ref_opt;
    int ref_part[TOPO_BRUTE_MAXN][TOPO_BRUTE_MAXN];
    size_t ref_sets;
    unsigned partitions;
};

void brute_run(struct brute *b, const int *avail, size_t na);

/* Helpers over sets that may hold TOPO_BRUTE_PAD slots. */
long brute_set_score(const struct topo_model *m, const int *set, size_t k);
bool brute_contains(const int *set, size_t k, int x);
bool brute_contains_all(const int *set, size_t k, const int *sub, size_t n_sub);
size_t brute_count_pad(const int *set, size_t k);
