/* bench-topo: GetPreferredAllocation answer time per topology and request size
 * (p50/p99 over many calls, clock_gettime), and the answer's quality against the
 * reference's brute-force enumeration where that is feasible (also timed: it is
 * what NVIDIA's plugin spends per call). Prints figures; asserts nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/macro.h"
#include "policy/topo.h"
#include "topo-brute.h"
#include "topo-fixtures.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Enumerations the reference runs before its first partition completes, roughly:
 * keep the brute force to cases that finish in about a second. */
static bool brute_feasible(size_t n, size_t size)
{
    if (n <= 12)
        return true;
    size_t padded = (n + size - 1) / size * size;
    return padded == n ? size >= 8 || size == n : padded - n <= 4 && size >= 8;
}

static void bench_one(const char *name, const struct topo_model *m, size_t size, bool with_must)
{
    size_t n = m->n;
    int avail[64], out[64], must[1] = { (int)n - 1 };
    size_t n_must = with_must ? 1 : 0;
    for (size_t i = 0; i < n; i++)
        avail[i] = (int)(n - 1 - i); /* the kubelet's order is arbitrary */

    size_t iters = n <= 8 ? 20000 : 200;
    _cleanup_free_ double *t = xreallocarray(NULL, iters, sizeof(double));
    for (size_t i = 0; i < iters; i++) {
        double t0 = now_us();
        int r = topo_preferred(m, avail, n, must, n_must, size, out);
        t[i] = now_us() - t0;
        if (r != (int)size) {
            printf("%-16s size %2zu: unexpected result %d\n", name, size, r);
            return;
        }
    }
    qsort(t, iters, sizeof(double), cmp_double);
    double p50 = t[iters / 2], p99 = t[iters * 99 / 100];

    char quality[96] = "brute force infeasible";
    if (n <= TOPO_BRUTE_MAXN && brute_feasible(n, size)) {
        struct brute b = { .m = m, .must = must, .n_must = n_must, .size = size };
        double t0 = now_us();
        brute_run(&b, avail, n);
        double bt = now_us() - t0;
        long mine = topo_set_score(m, out, size);
        snprintf(quality, sizeof(quality), "set %ld/%ld (%s), reference %.0f us, %u partitions",
                 mine, b.best_set, mine == b.best_set && !memcmp(out, b.best, size * sizeof(int))
                     ? "optimal" : "NOT OPTIMAL", bt, b.partitions);
    }
    printf("%-16s n=%2zu size %2zu%s: p50 %8.2f us  p99 %8.2f us  %s\n", name, n, size,
           with_must ? " +must" : "      ", p50, p99, quality);
}

/* Optional arguments: a topology name and a request size, to time one case. */
int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    size_t only_size = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;
    uint64_t rng = 12345;
    for (size_t t = 0; t <= fx_n_names; t++) {
        struct inventory inv;
        struct topo_model m;
        const char *name = t < fx_n_names ? fx_names[t] : "random-12";
        if (t < fx_n_names)
            fx_build(name, &inv);
        else
            fx_random(&inv, 12, &rng);
        topo_model_build(&inv, &m);
        for (size_t size = 1; size <= m.n; size++) {
            if ((only && !streq(only, name)) || (only_size && size != only_size))
                continue;
            bench_one(name, &m, size, false);
            bench_one(name, &m, size, true);
        }
        topo_model_clear(&m);
        fx_free(&inv);
    }

    if (only)
        return 0;
    /* beyond TOPO_EXACT_MAX: the heuristic */
    struct inventory inv;
    struct topo_model m;
    fx_random(&inv, 32, &rng);
    topo_model_build(&inv, &m);
    static const size_t sizes[] = { 2, 4, 8, 16 };
    for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
        bench_one("random-32(heur)", &m, sizes[i], false);
    topo_model_clear(&m);
    fx_free(&inv);
    return 0;
}
