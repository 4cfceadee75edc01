#include "topo-brute.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define PAD TOPO_BRUTE_PAD

long brute_set_score(const struct topo_model *m, const int *set, size_t k)
{
    long s = 0;
    for (size_t i = 0; i < k; i++)
        for (size_t j = i + 1; j < k; j++)
            if (set[i] != PAD && set[j] != PAD)
                s += m->score[set[i] * (int)m->n + set[j]];
    return s;
}

bool brute_contains(const int *set, size_t k, int x)
{
    for (size_t i = 0; i < k; i++)
        if (set[i] == x)
            return true;
    return false;
}

bool brute_contains_all(const int *set, size_t k, const int *sub, size_t n_sub)
{
    for (size_t i = 0; i < n_sub; i++)
        if (!brute_contains(set, k, sub[i]))
            return false;
    return true;
}

size_t brute_count_pad(const int *set, size_t k)
{
    size_t c = 0;
    for (size_t i = 0; i < k; i++)
        c += set[i] == PAD;
    return c;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static unsigned span_of(const struct topo_model *m, const int *set, size_t k)
{
    unsigned span = 0;
    for (size_t i = 0; i < k; i++) {
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen |= m->numa[set[j]] == m->numa[set[i]];
        span += !seen;
    }
    return span;
}

/* Our tie-breaks, written independently: fewer NUMA nodes, then lexicographic. */
static void brute_offer(struct brute *b, const int *set)
{
    int s[TOPO_BRUTE_MAXN];
    memcpy(s, set, b->size * sizeof(int));
    qsort(s, b->size, sizeof(int), cmp_int);
    long score = brute_set_score(b->m, s, b->size);
    unsigned span = span_of(b->m, s, b->size);
    bool better = score > b->best_set;
    if (score == b->best_set) {
        if (span != b->best_span) {
            better = span < b->best_span;
        } else {
            int c = 0;
            for (size_t i = 0; i < b->size && !c; i++)
                c = (s[i] > b->best[i]) - (s[i] < b->best[i]);
            better = c < 0;
        }
    }
    if (better) {
        b->best_set = score;
        b->best_span = span;
        memcpy(b->best, s, b->size * sizeof(int));
    }
}

static void brute_partition(struct brute *b, int part[][TOPO_BRUTE_MAXN], size_t n_sets)
{
    size_t k = b->size;
    b->partitions++;
    bool valid = false;
    for (size_t i = 0; i < n_sets && !valid; i++)
        valid = brute_contains_all(part[i], k, b->must, b->n_must) && brute_count_pad(part[i], k) == 0;
    if (!valid)
        return;
    long score = 0;
    for (size_t i = 0; i < n_sets; i++)
        score += brute_set_score(b->m, part[i], k);

    /* reference: first partition with the (strictly) highest score */
    if (!b->ref_any || score > b->ref_opt) {
        b->ref_any = true;
        b->ref_opt = score;
        memcpy(b->ref_part, part, n_sets * sizeof(part[0]));
        b->ref_sets = n_sets;
    }

    /* objective: every optimal partition, every full must-set in it */
    if (!b->any || score > b->opt) {
        b->any = true;
        b->opt = score;
        b->best_set = -1;
        b->best_span = ~0u;
    }
    if (score < b->opt)
        return;
    for (size_t i = 0; i < n_sets; i++)
        if (brute_count_pad(part[i], k) == 0 && brute_contains_all(part[i], k, b->must, b->n_must))
            brute_offer(b, part[i]);
}

/* iterateGPUPartitions' recursion: devs[0] plus every (size-1)-combination of the
 * rest, skipping sets with some but not all padding. */
static void brute_iterate(struct brute *b, const int *devs, size_t n, int part[][TOPO_BRUTE_MAXN],
                          size_t n_sets)
{
    size_t k = b->size;
    if (n == k) {
        memcpy(part[n_sets], devs, k * sizeof(int));
        brute_partition(b, part, n_sets + 1);
        return;
    }
    size_t idx[TOPO_BRUTE_MAXN];
    size_t need = k - 1;
    for (size_t i = 0; i < need; i++)
        idx[i] = i + 1;
    for (;;) {
        int *set = part[n_sets];
        set[0] = devs[0];
        for (size_t i = 0; i < need; i++)
            set[i + 1] = devs[idx[i]];
        size_t p = brute_count_pad(set, k);
        if (p == 0 || (int)p == b->padding) {
            int rest[TOPO_BRUTE_MAXN * 2];
            size_t nr = 0;
            for (size_t i = 1; i < n; i++) {
                bool taken = false;
                for (size_t j = 0; j < need; j++)
                    taken |= idx[j] == i;
                if (!taken)
                    rest[nr++] = devs[i];
            }
            brute_iterate(b, rest, nr, part, n_sets + 1);
        }
        /* next combination of `need` indices out of 1..n-1 */
        ssize_t i = (ssize_t)need - 1;
        while (i >= 0 && idx[i] == n - need + (size_t)i)
            i--;
        if (i < 0)
            break;
        idx[i]++;
        for (size_t j = (size_t)i + 1; j < need; j++)
            idx[j] = idx[j - 1] + 1;
    }
}

void brute_run(struct brute *b, const int *avail, size_t na)
{
    int devs[TOPO_BRUTE_MAXN * 2];
    size_t n = na;
    memcpy(devs, avail, na * sizeof(int));
    while (n % b->size)
        devs[n++] = PAD;
    b->padding = (int)(n - na);
    int part[TOPO_BRUTE_MAXN * 2][TOPO_BRUTE_MAXN];
    brute_iterate(b, devs, n, part, 0);
}

