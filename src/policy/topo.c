/* Topology-aware placement: go-gpuallocator's best-effort objective, solved exactly.
 *
 * The reference enumerates every partition of the available GPUs into sets of
 * `size` (the last one padded), keeps the best, and answers its best set holding
 * the must GPUs. Here: a DP over subsets gives the best partition score V[R] of
 * every subset R reachable by "place the lowest GPU first" (each partition is
 * generated once), then a walk along the transitions that achieve V collects
 * exactly the sets lying on some best partition; the answer is the best of them by
 * set score, fewer NUMA nodes, lowest indices. docs/topology.md has the argument. */
#include "policy/topo.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/macro.h"

static int pcie_level_score(int level)
{
    switch (level) {
    case 0:  return 60; /* INTERNAL: same board */
    case 10: return 50; /* SINGLE: one PCIe switch */
    case 20: return 40; /* MULTIPLE: several switches, no host bridge */
    case 30: return 30; /* HOSTBRIDGE */
    case 40: return 20; /* NODE: same CPU / NUMA node */
    case 50: return 10; /* SYSTEM: across CPUs */
    default: return 0;  /* unknown: the reference fails the call, we only lose this pair */
    }
}

static bool pcie_level_known(int level)
{
    return pcie_level_score(level) > 0;
}

int topo_pair_score(const struct inv_link *ab, const struct inv_link *ba)
{
    int level = ab ? ab->pcie_level : -1;
    unsigned nvlinks = ab ? ab->nvlinks : 0;

    /* NVML answers both directions; if one side failed, the other still tells. */
    if (ba) {
        if (!pcie_level_known(level))
            level = ba->pcie_level;
        if (ba->nvlinks > nvlinks)
            nvlinks = ba->nvlinks;
    }
    if (nvlinks > TOPO_NVLINK_MAX)
        nvlinks = TOPO_NVLINK_MAX;
    return pcie_level_score(level) + 100 * (int)nvlinks;
}

int topo_model_build(const struct inventory *inv, struct topo_model *out)
{
    if (!inv || !out)
        return -EINVAL;

    size_t n = inv->n_gpus;
    if (n && n > SIZE_MAX / n)
        oom();
    int *score = xcalloc(n ? n * n : 1, sizeof(int));
    int *numa = xcalloc(n ? n : 1, sizeof(int));

    for (size_t a = 0; a < n; a++) {
        numa[a] = inv->gpus ? inv->gpus[a].numa_node : -1;
        if (!inv->links)
            continue;
        for (size_t b = a + 1; b < n; b++) {
            int s = topo_pair_score(inventory_link(inv, a, b), inventory_link(inv, b, a));
            score[a * n + b] = s;
            score[b * n + a] = s;
        }
    }

    *out = (struct topo_model){ .n = n, .score = score, .numa = numa };
    return 0;
}

void topo_model_clear(struct topo_model *m)
{
    if (!m)
        return;
    free(m->score);
    free(m->numa);
    *m = (struct topo_model){ 0 };
}

long topo_set_score(const struct topo_model *m, const int *set, size_t k)
{
    long s = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < k; j++)
            s += m->score[(size_t)set[i] * m->n + (size_t)set[j]];
    return s;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sort a copy of `list` and reject out-of-range or repeated indices. */
static int sorted_copy(const struct topo_model *m, const int *list, size_t n, int **ret)
{
    _cleanup_free_ int *v = xreallocarray(NULL, n ? n : 1, sizeof(int));
    if (n)
        memcpy(v, list, n * sizeof(int));
    qsort(v, n, sizeof(int), cmp_int);
    for (size_t i = 0; i < n; i++) {
        if (v[i] < 0 || (size_t)v[i] >= m->n)
            return -EINVAL;
        if (i > 0 && v[i] == v[i - 1])
            return -EINVAL;
    }
    *ret = TAKE_PTR(v);
    return 0;
}

/* The problem restated over positions 0..n-1 of the sorted available list. */
struct topo_problem {
    unsigned n, k, r;       /* GPUs, set size, leftover set size (n mod k) */
    const int *w;           /* n*n pair scores by position */
    const int *numa;        /* n NUMA nodes by position */
    const bool *must;       /* n flags */
    unsigned n_must;
};

/* Ranking of candidate answers (all on a best partition), best first: set score,
 * fewer NUMA nodes; callers break the last ties by the lexicographically smallest
 * position list. */
struct topo_rank {
    long set;
    unsigned numa_span;
};

static int rank_cmp(const struct topo_rank *a, const struct topo_rank *b)
{
    if (a->set != b->set)
        return a->set > b->set ? 1 : -1;
    if (a->numa_span != b->numa_span)
        return a->numa_span < b->numa_span ? 1 : -1;
    return 0;
}

static unsigned numa_span(const int *numa, const unsigned *pos, size_t k)
{
    unsigned span = 0;
    for (size_t i = 0; i < k; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = numa[pos[j]] == numa[pos[i]];
        span += !seen;
    }
    return span;
}

/* ---- exact search (n <= TOPO_EXACT_MAX) ---------------------------------- */

/* V[R]: best score of a valid partition of the positions R into full sets plus,
 * when |R| mod k == r > 0, one leftover set of r. Every partition is generated
 * once by always placing the lowest member of R first, and only from U (all
 * positions) down, so only reachable subsets are ever evaluated. "Valid" folds in
 * the must constraint: a set that touches a must GPU holds all of them and is full. */
#define DP_UNKNOWN (-1)        /* memset 0xff */
#define DP_NONE INT32_MIN      /* no valid partition of R */

struct topo_exact {
    const struct topo_problem *p;
    uint32_t must;
    int32_t *W;             /* set score of every subset */
    int32_t *V;             /* memo, DP_UNKNOWN until computed */
    uint8_t *seen;          /* bitmap: states already walked by exact_walk */
    struct topo_best *best;
};

struct topo_best {
    struct topo_rank rank;
    uint32_t set;
    bool found;
};

static bool exact_allowed(const struct topo_exact *e, uint32_t T, bool full)
{
    return !(T & e->must) || (full && (T & e->must) == e->must);
}

static int32_t exact_value(struct topo_exact *e, uint32_t R, unsigned n_R);

/* Sets T = chosen + `need` of the `pool_n` members of pool. With walk == false,
 * fold the best W[T] + V[R \ T] into *best; with walk == true, follow the
 * transitions that reach V[R] (those lie on an optimal partition). */
static void exact_choose(struct topo_exact *e, uint32_t R, unsigned n_R, uint32_t pool,
                         unsigned pool_n, unsigned need, uint32_t chosen, unsigned size,
                         bool walk, int32_t *best);

static void exact_walk(struct topo_exact *e, uint32_t R, unsigned n_R);
static void exact_consider(struct topo_exact *e, uint32_t S);

static void exact_transitions(struct topo_exact *e, uint32_t R, unsigned n_R, bool walk,
                              int32_t *best)
{
    const struct topo_problem *p = e->p;
    uint32_t x = R & -R;
    bool leftover = p->r && n_R % p->k == p->r;
    if (n_R >= p->k)
        exact_choose(e, R, n_R, R ^ x, n_R - 1, p->k - 1, x, p->k, walk, best);
    if (leftover)
        exact_choose(e, R, n_R, R ^ x, n_R - 1, p->r - 1, x, p->r, walk, best);
}

static void exact_choose(struct topo_exact *e, uint32_t R, unsigned n_R, uint32_t pool,
                         unsigned pool_n, unsigned need, uint32_t chosen, unsigned size,
                         bool walk, int32_t *best)
{
    if (need == 0) {
        if (!exact_allowed(e, chosen, size == e->p->k))
            return;
        int32_t rest = exact_value(e, R & ~chosen, n_R - size);
        if (rest == DP_NONE)
            return;
        int32_t v = e->W[chosen] + rest;
        if (!walk) {
            if (v > *best)
                *best = v;
        } else if (v == *best) {
            if (size == e->p->k && (!e->must || (chosen & e->must) == e->must))
                exact_consider(e, chosen);
            exact_walk(e, R & ~chosen, n_R - size);
        }
        return;
    }
    if (need == 1) {
        /* The hot loop (most transitions end here): no recursion, memo read inline. */
        bool full = size == e->p->k;
        uint32_t rest_base = R & ~chosen;
        for (uint32_t q = pool; q; q &= q - 1) {
            uint32_t b = q & -q, T = chosen | b, rest = rest_base ^ b;
            if (e->must && !exact_allowed(e, T, full))
                continue;
            int32_t rv = rest ? e->V[rest] : 0;
            if (rv == DP_UNKNOWN)
                rv = exact_value(e, rest, n_R - size);
            if (rv == DP_NONE)
                continue;
            int32_t v = e->W[T] + rv;
            if (!walk) {
                if (v > *best)
                    *best = v;
            } else if (v == *best) {
                if (full && (T & e->must) == e->must)
                    exact_consider(e, T);
                exact_walk(e, rest, n_R - size);
            }
        }
        return;
    }
    while (pool_n >= need) {
        uint32_t b = pool & -pool;
        pool ^= b;
        pool_n--;
        exact_choose(e, R, n_R, pool, pool_n, need - 1, chosen | b, size, walk, best);
    }
}

static int32_t exact_value(struct topo_exact *e, uint32_t R, unsigned n_R)
{
    if (R == 0)
        return 0;
    if (e->V[R] != DP_UNKNOWN)
        return e->V[R];
    int32_t best = DP_NONE;
    exact_transitions(e, R, n_R, false, &best);
    e->V[R] = best;
    return best;
}

static void exact_walk(struct topo_exact *e, uint32_t R, unsigned n_R)
{
    if (R == 0 || (e->seen[R >> 3] & (1u << (R & 7))))
        return;
    e->seen[R >> 3] |= (uint8_t)(1u << (R & 7));
    int32_t target = exact_value(e, R, n_R);
    exact_transitions(e, R, n_R, true, &target);
}

static void exact_consider(struct topo_exact *e, uint32_t S)
{
    const struct topo_problem *p = e->p;
    struct topo_best *best = e->best;
    /* every S offered lies on an optimal partition: only the set itself ranks */
    struct topo_rank rank = { .set = e->W[S] };

    for (uint32_t s = S; s; s &= s - 1) {
        int node = p->numa[__builtin_ctz(s)];
        bool seen = false;
        for (uint32_t t = S & ((s & -s) - 1); t && !seen; t &= t - 1)
            seen = p->numa[__builtin_ctz(t)] == node;
        rank.numa_span += !seen;
    }

    int c = best->found ? rank_cmp(&rank, &best->rank) : 1;
    if (c == 0) {
        /* Lexicographically smaller position list: owns the lowest differing member. */
        uint32_t d = S ^ best->set;
        c = (d & -d & S) ? 1 : -1;
    }
    if (c > 0)
        *best = (struct topo_best){ .rank = rank, .set = S, .found = true };
}

static void solve_exact(const struct topo_problem *p, unsigned *answer)
{
    size_t states = (size_t)1 << p->n;
    _cleanup_free_ int32_t *W = xreallocarray(NULL, states, sizeof(int32_t));
    _cleanup_free_ int32_t *V = xreallocarray(NULL, states, sizeof(int32_t));
    _cleanup_free_ uint8_t *seen = xcalloc(states / 8 + 1, 1);

    /* W[mask] = W[mask minus its lowest member] + that member's links to the rest. */
    W[0] = 0;
    for (uint32_t mask = 1; mask < states; mask++) {
        unsigned low = (unsigned)__builtin_ctz(mask);
        uint32_t rest = mask & (mask - 1);
        int32_t s = W[rest];
        for (uint32_t t = rest; t; t &= t - 1)
            s += p->w[low * p->n + (unsigned)__builtin_ctz(t)];
        W[mask] = s;
    }
    memset(V, 0xff, states * sizeof(int32_t));

    struct topo_best best = { .found = false };
    struct topo_exact e = { .p = p, .W = W, .V = V, .seen = seen, .best = &best };
    for (unsigned i = 0; i < p->n; i++)
        if (p->must[i])
            e.must |= 1u << i;

    uint32_t all = (uint32_t)(states - 1);
    exact_value(&e, all, p->n);
    exact_walk(&e, all, p->n);

    unsigned k = 0;
    for (uint32_t s = best.set; s; s &= s - 1)
        answer[k++] = (unsigned)__builtin_ctz(s);
}

/* ---- heuristic (n > TOPO_EXACT_MAX) -------------------------------------- */

/* Greedy partition, then pairwise swaps between sets while the partition score
 * strictly improves; must GPUs sit in set 0 and never move. Deterministic. */
static void solve_heuristic(const struct topo_problem *p, unsigned *answer)
{
    unsigned n = p->n, k = p->k;
    unsigned n_groups = (n + k - 1) / k;
    _cleanup_free_ unsigned *grp = xreallocarray(NULL, n, sizeof(unsigned));
    _cleanup_free_ long *gain = xcalloc(n, sizeof(long));
    /* gs[e * n_groups + g]: sum of e's scores to the members of group g */
    _cleanup_free_ long *gs = xcalloc((size_t)n * n_groups, sizeof(long));

    for (unsigned e = 0; e < n; e++)
        grp[e] = UINT_MAX;

    for (unsigned g = 0; g < n_groups; g++) {
        unsigned target = (g == n_groups - 1 && p->r) ? p->r : k, have = 0;
        memset(gain, 0, n * sizeof(long));
        while (have < target) {
            unsigned pick = UINT_MAX;
            for (unsigned e = 0; e < n; e++) {
                if (grp[e] != UINT_MAX)
                    continue;
                if (g == 0 && have < p->n_must) {
                    if (p->must[e]) {
                        pick = e;
                        break;
                    }
                    continue;
                }
                if (pick == UINT_MAX || gain[e] > gain[pick])
                    pick = e;
            }
            grp[pick] = g;
            have++;
            for (unsigned e = 0; e < n; e++)
                gain[e] += p->w[e * n + pick];
        }
    }
    for (unsigned e = 0; e < n; e++)
        for (unsigned f = 0; f < n; f++)
            gs[e * n_groups + grp[f]] += p->w[e * n + f];

    bool improved = true;
    for (unsigned pass = 0; improved && pass < 64u * n; pass++) {
        improved = false;
        for (unsigned e = 0; e < n; e++) {
            for (unsigned f = e + 1; f < n; f++) {
                unsigned a = grp[e], b = grp[f];
                if (a == b || p->must[e] || p->must[f])
                    continue;
                long wef = p->w[e * n + f];
                long delta = (gs[e * n_groups + b] - wef) + (gs[f * n_groups + a] - wef) -
                             gs[e * n_groups + a] - gs[f * n_groups + b];
                if (delta <= 0)
                    continue;
                for (unsigned x = 0; x < n; x++) {
                    long d = p->w[x * n + f] - p->w[x * n + e];
                    gs[x * n_groups + a] += d;
                    gs[x * n_groups + b] -= d;
                }
                grp[e] = b;
                grp[f] = a;
                improved = true;
            }
        }
    }

    /* Best full set: set 0 when there are must GPUs (only it holds them all). */
    unsigned last_full = p->r ? n_groups - 1 : n_groups;
    struct topo_rank best_rank = { 0 };
    bool found = false;
    _cleanup_free_ unsigned *pos = xreallocarray(NULL, k, sizeof(unsigned));
    for (unsigned g = 0; g < (p->n_must ? 1 : last_full); g++) {
        unsigned m = 0;
        for (unsigned e = 0; e < n; e++)
            if (grp[e] == g)
                pos[m++] = e;
        struct topo_rank rank = { .numa_span = numa_span(p->numa, pos, m) };
        for (unsigned i = 0; i < m; i++)
            rank.set += gs[pos[i] * n_groups + g];
        rank.set /= 2;
        int c = found ? rank_cmp(&rank, &best_rank) : 1;
        if (c == 0) {
            for (unsigned i = 0; i < k && c == 0; i++)
                c = pos[i] < answer[i] ? 1 : pos[i] > answer[i] ? -1 : 0;
        }
        if (c > 0) {
            best_rank = rank;
            memcpy(answer, pos, k * sizeof(unsigned));
            found = true;
        }
    }
}

int topo_preferred(const struct topo_model *m, const int *available, size_t n_available,
                   const int *must, size_t n_must, size_t size, int *out)
{
    if (!m || (n_available && !available) || (n_must && !must) || (size && !out))
        return -EINVAL;

    _cleanup_free_ int *avail = NULL, *req = NULL;
    int r = sorted_copy(m, available, n_available, &avail);
    if (r < 0)
        return r;
    r = sorted_copy(m, must, n_must, &req);
    if (r < 0)
        return r;

    /* The reference's empty answers, in its order. */
    if (size == 0 || n_available < size || n_must > size || n_must > n_available)
        return 0;
    if (size > INT_MAX || n_available > UINT_MAX / 2)
        return -E2BIG;

    unsigned n = (unsigned)n_available;
    _cleanup_free_ bool *must_pos = xcalloc(n, sizeof(bool));
    for (size_t i = 0; i < n_must; i++) {
        int *hit = bsearch(&req[i], avail, n, sizeof(int), cmp_int);
        if (!hit)
            return 0; /* no partition has a set holding it: reference answers empty */
        must_pos[hit - avail] = true;
    }

    _cleanup_free_ int *w = xreallocarray(NULL, (size_t)n * n, sizeof(int));
    _cleanup_free_ int *numa = xreallocarray(NULL, n, sizeof(int));
    for (unsigned i = 0; i < n; i++) {
        numa[i] = m->numa[avail[i]];
        for (unsigned j = 0; j < n; j++)
            w[i * n + j] = m->score[(size_t)avail[i] * m->n + (size_t)avail[j]];
    }

    struct topo_problem p = {
        .n = n, .k = (unsigned)size, .r = n % (unsigned)size,
        .w = w, .numa = numa, .must = must_pos, .n_must = (unsigned)n_must,
    };
    _cleanup_free_ unsigned *answer = xreallocarray(NULL, size, sizeof(unsigned));
    if (n <= TOPO_EXACT_MAX)
        solve_exact(&p, answer);
    else
        solve_heuristic(&p, answer);

    /* Positions ascend and avail is sorted, so out is sorted too. */
    for (size_t i = 0; i < size; i++)
        out[i] = avail[answer[i]];
    return (int)size;
}
