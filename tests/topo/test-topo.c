/* topo_preferred() against a brute force that enumerates partitions exactly like
 * go-gpuallocator's best-effort policy (padding included), on fixed topologies
 * (same link data as sim/profiles/topo-*.yaml) and random ones. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "policy/topo.h"
#include "topo-brute.h"
#include "topo-fixtures.h"

#define MAXN TOPO_BRUTE_MAXN

static unsigned failures, checks;

#define CHECK(cond, ...)                                                            \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            if (failures > 20)                                                        \
                exit(1);                                                              \
        }                                                                             \
    } while (0)

/* ---- one request ------------------------------------------------------------ */

static unsigned n_cases, n_better, n_ref_padded;

static void shuffle(int *v, size_t n, uint64_t *rng)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = fx_rand(rng) % i;
        int t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static bool expect_empty(const int *avail, size_t na, const int *must, size_t nm, size_t size)
{
    if (size == 0 || na < size || nm > size || nm > na)
        return true;
    for (size_t i = 0; i < nm; i++)
        if (!brute_contains(avail, na, must[i]))
            return true;
    return false;
}

static void check_request(const char *topo, const struct topo_model *m, const int *avail_in,
                          size_t na, const int *must_in, size_t nm, size_t size, uint64_t *rng)
{
    int avail[MAXN], must[MAXN] = { 0 }, out[MAXN], out2[MAXN];
    memcpy(avail, avail_in, na * sizeof(int));
    if (nm)
        memcpy(must, must_in, nm * sizeof(int));
    shuffle(avail, na, rng); /* the kubelet's order must not matter */
    shuffle(must, nm, rng);
    n_cases++;

    int r = topo_preferred(m, avail, na, must, nm, size, out);
    if (expect_empty(avail, na, must, nm, size)) {
        CHECK(r == 0, "%s: na=%zu nm=%zu size=%zu: expected empty, got %d", topo, na, nm, size, r);
        return;
    }
    CHECK(r == (int)size, "%s: na=%zu size=%zu: got %d", topo, na, size, r);
    if (r != (int)size)
        return;

    /* validity */
    for (size_t i = 0; i < size; i++) {
        CHECK(brute_contains(avail, na, out[i]), "%s: answer %d not available", topo, out[i]);
        CHECK(i == 0 || out[i - 1] < out[i], "%s: answer not sorted/unique", topo);
    }
    CHECK(brute_contains_all(out, size, must, nm), "%s: answer misses a must GPU", topo);

    /* determinism: same sets in another order, same answer */
    shuffle(avail, na, rng);
    shuffle(must, nm, rng);
    r = topo_preferred(m, avail, na, must, nm, size, out2);
    CHECK(r == (int)size && memcmp(out, out2, size * sizeof(int)) == 0, "%s: not deterministic", topo);

    /* the objective, against the brute force */
    struct brute b = { .m = m, .must = must, .n_must = nm, .size = size };
    brute_run(&b, avail, na);
    CHECK(b.any, "%s: brute force found no valid partition", topo);
    CHECK(memcmp(out, b.best, size * sizeof(int)) == 0,
          "%s: na=%zu nm=%zu size=%zu: answer differs from brute force (score %ld vs %ld)", topo, na,
          nm, size, topo_set_score(m, out, size), b.best_set);

    /* and against the reference's own first pick: same partition score, set at least as good */
    long mine = topo_set_score(m, out, size);
    CHECK(b.ref_opt == b.opt, "%s: reference partition not optimal?", topo);
    long ref_best = -1;
    bool ref_padded = false;
    for (size_t i = 0; i < b.ref_sets; i++) {
        if (!brute_contains_all(b.ref_part[i], size, must, nm))
            continue;
        long s = brute_set_score(m, b.ref_part[i], size);
        if (s > ref_best) {
            ref_best = s;
            ref_padded = brute_count_pad(b.ref_part[i], size) > 0;
        }
    }
    if (ref_padded) {
        n_ref_padded++; /* the reference would hand out a padding slot (nil device) */
    } else {
        CHECK(mine >= ref_best, "%s: worse set than the reference (%ld < %ld)", topo, mine, ref_best);
        n_better += mine > ref_best;
    }
}

/* Every available subset (or a sample), every size, a few must-include sets. */
static void check_matrix(const char *topo, const struct topo_model *m, size_t max_subsets,
                         size_t max_avail, uint64_t *rng)
{
    size_t n = m->n;
    size_t total = (size_t)1 << n;
    for (size_t t = 0; t < (max_subsets < total ? max_subsets : total); t++) {
        size_t mask = max_subsets < total ? (size_t)fx_rand(rng) & (total - 1) : t;
        int avail[MAXN];
        size_t na = 0;
        for (size_t i = 0; i < n; i++)
            if (mask & ((size_t)1 << i))
                avail[na++] = (int)i;
        if (na == 0 || na > max_avail)
            continue;
        for (size_t size = 1; size <= na + 1; size++) {
            check_request(topo, m, avail, na, NULL, 0, size, rng);
            /* one must GPU, available */
            int must[MAXN];
            must[0] = avail[fx_rand(rng) % na];
            check_request(topo, m, avail, na, must, 1, size, rng);
            /* a random must set of up to size GPUs */
            size_t nm = size > 1 ? 1 + fx_rand(rng) % size : 1;
            if (nm > na)
                nm = na;
            int pick[MAXN];
            memcpy(pick, avail, na * sizeof(int));
            shuffle(pick, na, rng);
            check_request(topo, m, avail, na, pick, nm, size, rng);
            /* a must GPU that is busy (not available): empty answer */
            if (na < n) {
                for (size_t i = 0; i < n; i++)
                    if (!brute_contains(avail, na, (int)i)) {
                        must[1] = (int)i;
                        break;
                    }
                check_request(topo, m, avail, na, must, 2, size, rng);
            }
        }
    }
}

/* ---- known answers from go-gpuallocator's own DGX-1V tests ------------------ */

static void expect(const struct topo_model *m, const int *avail, size_t na, const int *must,
                   size_t nm, size_t size, const int *want, size_t n_want)
{
    int out[MAXN];
    int r = topo_preferred(m, avail, na, must, nm, size, out);
    CHECK(r == (int)n_want, "known answer: got %d GPUs, want %zu", r, n_want);
    if (r == (int)n_want && n_want)
        CHECK(memcmp(out, want, n_want * sizeof(int)) == 0, "known answer: wrong GPUs (first %d)",
              out[0]);
}

#define L(...) ((const int[]){ __VA_ARGS__ }), ELEMENTSOF(((const int[]){ __VA_ARGS__ }))
#define NONE NULL, 0

static void known_answers(void)
{
    struct inventory inv;
    struct topo_model m;
    fx_build("dgx1-v100", &inv);
    topo_model_build(&inv, &m);

    expect(&m, L(0, 2, 4, 5), NONE, 2, L(4, 5));
    expect(&m, L(0, 4, 5, 6), NONE, 2, L(5, 6));
    expect(&m, L(0, 3, 1), NONE, 2, L(0, 3));
    expect(&m, L(0, 1, 4), NONE, 2, L(0, 4));
    expect(&m, L(0, 1, 2, 3, 4, 5, 6, 7), L(4), 1, L(4));
    expect(&m, L(0, 1, 2, 3, 4, 5, 6, 7), L(4), 2, L(4, 7));
    expect(&m, L(0, 1, 2, 3, 4, 5, 6, 7), L(4), 4, L(4, 5, 6, 7));
    expect(&m, L(1, 2, 3, 4, 5, 6, 7), L(0, 1, 2, 3), 4, NULL, 0);
    expect(&m, L(0, 1, 2, 3, 4, 5, 6, 7), L(0, 2, 4, 6), 4, L(0, 2, 4, 6));
    expect(&m, L(0, 1, 2, 3, 4, 5, 6, 7), L(1, 2, 3, 4, 5, 6), 4, NULL, 0);
    expect(&m, L(1, 2, 3, 4, 5), L(1, 2, 3, 4, 5, 6), 1, NULL, 0);
    /* size 1 without must: every set scores 0, lowest index wins */
    expect(&m, L(6, 3, 5), NONE, 1, L(3));
    /* 7 of 8 (the reference's 16-30 s case): leave out the GPU whose links matter least */
    int out[8];
    CHECK(topo_preferred(&m, L(0, 1, 2, 3, 4, 5, 6, 7), NULL, 0, 7, out) == 7, "7 of 8");

    /* errors: index outside the model, duplicates */
    CHECK(topo_preferred(&m, L(0, 8), NONE, 1, out) == -EINVAL, "out of range");
    CHECK(topo_preferred(&m, L(0, -1), NONE, 1, out) == -EINVAL, "negative");
    CHECK(topo_preferred(&m, L(0, 1, 1), NONE, 2, out) == -EINVAL, "duplicate available");
    CHECK(topo_preferred(&m, L(0, 1, 2), L(1, 1), 2, out) == -EINVAL, "duplicate must");
    CHECK(topo_preferred(&m, L(0, 1, 2), L(9), 2, out) == -EINVAL, "must out of range");
    /* empty answers */
    CHECK(topo_preferred(&m, L(0, 1, 2), NONE, 0, out) == 0, "size 0");
    CHECK(topo_preferred(&m, L(0, 1, 2), NONE, 4, out) == 0, "size > available");
    CHECK(topo_preferred(&m, NULL, 0, NONE, 1, out) == 0, "nothing available");

    topo_model_clear(&m);
    fx_free(&inv);
}

/* ---- pair scores: go-gpuallocator adds the PCIe and NVLink links of a pair ---- */

static void pair_scores(void)
{
    static const struct { int level; unsigned nv; int want; } t[] = {
        { 0, 0, 60 }, { 10, 0, 50 }, { 20, 0, 40 }, { 30, 0, 30 }, { 40, 0, 20 }, { 50, 0, 10 },
        { -1, 0, 0 }, { 7, 0, 0 }, { 50, 1, 110 }, { 10, 2, 250 }, { -1, 12, 1200 },
        { 40, 18, 1820 }, { 40, 30, 1820 },
    };
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        struct inv_link l = { .pcie_level = t[i].level, .nvlinks = t[i].nv };
        CHECK(topo_pair_score(&l, NULL) == t[i].want, "pair %zu: %d", i, topo_pair_score(&l, NULL));
    }
    /* one direction unknown: the other one counts */
    struct inv_link ab = { .pcie_level = -1, .nvlinks = 0 }, ba = { .pcie_level = 10, .nvlinks = 2 };
    CHECK(topo_pair_score(&ab, &ba) == 250, "asymmetric");

    /* an inventory without links still builds (all pairs score 0) */
    struct inventory inv;
    struct topo_model m;
    fx_build("t4-2numa", &inv);
    free(inv.links);
    inv.links = NULL;
    CHECK(topo_model_build(&inv, &m) == 0, "build without links");
    CHECK(m.score[1] == 0 && m.numa[3] == 1, "no-link model");
    int out[2];
    CHECK(topo_preferred(&m, L(3, 2, 1), NONE, 2, out) == 2 && out[0] == 2 && out[1] == 3,
          "no links: one NUMA node beats two");
    topo_model_clear(&m);
    fx_free(&inv);
}

/* ---- beyond the exact limit: the heuristic stays valid and finds islands ---- */

static void heuristic(uint64_t *rng)
{
    /* 24 GPUs: three NVLink islands of 8 (NV4 inside), PCIe SYSTEM across. */
    struct inventory inv;
    struct topo_model m;
    fx_random(&inv, 24, rng);
    for (size_t a = 0; a < 24; a++)
        for (size_t b = 0; b < 24; b++) {
            inventory_link(&inv, a, b)->nvlinks = (a / 8 == b / 8) ? 4 : 0;
            inventory_link(&inv, a, b)->pcie_level = 50;
        }
    topo_model_build(&inv, &m);

    int avail[24], out[24];
    for (int i = 0; i < 24; i++)
        avail[i] = 23 - i;
    CHECK(topo_preferred(&m, avail, 24, NULL, 0, 8, out) == 8, "heuristic size");
    CHECK(out[0] % 8 == 0 && out[7] == out[0] + 7, "heuristic finds an island (got %d..%d)", out[0],
          out[7]);
    int must[] = { 13 };
    CHECK(topo_preferred(&m, avail, 24, must, 1, 8, out) == 8 && out[0] == 8 && out[7] == 15,
          "heuristic island with must");
    /* validity on random large topologies */
    topo_model_clear(&m);
    fx_free(&inv);
    for (int round = 0; round < 20; round++) {
        fx_random(&inv, 20 + (size_t)round % 12, rng);
        topo_model_build(&inv, &m);
        size_t n = m.n, size = 1 + fx_rand(rng) % n;
        int all[32];
        for (size_t i = 0; i < n; i++)
            all[i] = (int)i;
        shuffle(all, n, rng);
        size_t nm = fx_rand(rng) % (size + 1);
        int r = topo_preferred(&m, all, n, all, nm, size, out);
        CHECK(r == (int)size, "heuristic answer size");
        CHECK(brute_contains_all(out, size, all, nm), "heuristic keeps must");
        for (size_t i = 1; i < size; i++)
            CHECK(out[i - 1] < out[i], "heuristic sorted");
        topo_model_clear(&m);
        fx_free(&inv);
    }
}

int main(void)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;

    pair_scores();
    known_answers();

    for (size_t t = 0; t < fx_n_names; t++) {
        struct inventory inv;
        struct topo_model m;
        CHECK(fx_build(fx_names[t], &inv) == 0, "fixture %s", fx_names[t]);
        CHECK(topo_model_build(&inv, &m) == 0, "model %s", fx_names[t]);
        if (m.n <= 8)
            check_matrix(fx_names[t], &m, SIZE_MAX, MAXN, &rng);
        else
            check_matrix(fx_names[t], &m, 80, 12, &rng);
        topo_model_clear(&m);
        fx_free(&inv);
    }

    for (int round = 0; round < 40; round++) {
        struct inventory inv;
        struct topo_model m;
        char name[32];
        size_t n = 3 + (size_t)round % 10;
        snprintf(name, sizeof(name), "random-%d(n=%zu)", round, n);
        fx_random(&inv, n, &rng);
        topo_model_build(&inv, &m);
        check_matrix(name, &m, n <= 8 ? SIZE_MAX : 40, MAXN, &rng);
        topo_model_clear(&m);
        fx_free(&inv);
    }

    /* full 16-GPU node for the sizes whose partitions are few enough to enumerate */
    {
        struct inventory inv;
        struct topo_model m;
        fx_build("16gpu-nvswitch", &inv);
        topo_model_build(&inv, &m);
        int all[16];
        for (int i = 0; i < 16; i++)
            all[i] = i;
        /* (15 or 14 would take the reference tens of millions of padded combinations) */
        static const size_t sizes[] = { 16, 10, 9, 8 };
        for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
            check_request("16gpu-nvswitch(all)", &m, all, 16, NULL, 0, sizes[s], &rng);
            check_request("16gpu-nvswitch(all)", &m, all, 16, (const int[]){ 5 }, 1, sizes[s], &rng);
        }
        topo_model_clear(&m);
        fx_free(&inv);
        fx_random(&inv, 16, &rng);
        topo_model_build(&inv, &m);
        for (size_t s = 0; s < ELEMENTSOF(sizes); s++)
            check_request("random16(all)", &m, all, 16, (const int[]){ 3, 9 }, 2, sizes[s], &rng);
        topo_model_clear(&m);
        fx_free(&inv);
    }

    heuristic(&rng);

    printf("%u requests, %u checks, %u failures; answer strictly better than the reference's "
           "first pick in %u, reference would return a padding slot in %u\n",
           n_cases, checks, failures, n_better, n_ref_padded);
    return failures ? 1 : 0;
}
