/* Greedy replica placement (distributed / packed, must-include, insufficient), the
 * first-fit fallback, and the GetPreferredAllocation policy choice (placement.c) with
 * its bounds on peer sizes. Ties the reference leaves random are pinned by device order. */
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include "core/macro.h"
#include "fixtures.h"
#include "policy/placement.h"
#include "policy/replicas.h"

static char *proc_root;

/* The tables below write replica IDs short, "<gpu>::<k>"; the kubelet sees the GPU's
 * UUID there (§4.1, whatever the ID strategy). full() spells them out; other strings
 * (junk IDs) pass unchanged. */
static const struct rs_resource *cur;

static const char *full(const char *id)
{
    static char buf[64][128];
    static unsigned next;
    unsigned g, k;
    int n = 0;
    if (sscanf(id, "%u::%u%n", &g, &k, &n) != 2 || id[n])
        return id;
    for (size_t i = 0; i < cur->n_devices; i++) {
        const struct rs_device *d = &cur->devices[i];
        if (d->gpu == (int)g && d->replica == (int)k) {
            char *b = buf[next++ % 64];
            snprintf(b, sizeof(buf[0]), "%s", d->id);
            return b;
        }
    }
    return id;
}

static const char **full_list(const char *const *ids, size_t n)
{
    const char **v = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        v[i] = full(ids[i]);
    return v;
}

/* Runs the policy and compares with want (NULL-terminated); want NULL = expect error. */
static void expect(const struct rs_resource *r, enum shared_alloc_policy pol,
                   const char *const *avail_short, size_t n_avail, const char *const *must_short,
                   size_t n_must, int size, const char *const *want, const char *line)
{
    cur = r;
    _cleanup_free_ const char **avail = full_list(avail_short, n_avail);
    _cleanup_free_ const char **must = full_list(must_short, n_must);
    const char **out = NULL;
    size_t n = 0;
    struct error err = { 0 };
    int rc = replicas_preferred(r, pol, avail, n_avail, must, n_must, size, &out, &n, &err);
    if (!want) {
        CHECK(rc < 0);
        if (rc < 0)
            CHECK_STR(err.msg, "not enough available devices to satisfy allocation");
        free(out);
        return;
    }
    CHECK(rc == 0);
    size_t nw = 0;
    while (want[nw])
        nw++;
    bool same = rc == 0 && n == nw;
    for (size_t i = 0; same && i < n; i++)
        same = streq(out[i], full(want[i]));
    if (!same) {
        fprintf(stderr, "%s: got", line);
        for (size_t i = 0; rc == 0 && i < n; i++)
            fprintf(stderr, " %s", out[i]);
        fprintf(stderr, "\n");
        test_failures++;
    }
    free(out);
}

#define L(...) ((const char *const[]){ __VA_ARGS__ })
#define N(...) ELEMENTSOF(((const char *const[]){ __VA_ARGS__ }))

static void test_greedy(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_T4, 3);
    fx_config(&cfg, proc_root);
    cfg.device_id_strategy = DEVICE_ID_INDEX;
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", NULL, 4);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *r = &rs.resources[0];

    const char *const all[] = { "0::0", "0::1", "0::2", "0::3", "1::0", "1::1",
                                "1::2", "1::3", "2::0", "2::1", "2::2", "2::3" };
    /* distributed spreads over GPUs in device order */
    expect(r, SHARED_ALLOC_DISTRIBUTED, all, 12, NULL, 0, 3, L("0::0", "1::0", "2::0", NULL), "dist3");
    expect(r, SHARED_ALLOC_DISTRIBUTED, all, 12, NULL, 0, 4, L("0::0", "1::0", "2::0", "0::1", NULL), "dist4");
    /* packed fills one GPU first */
    expect(r, SHARED_ALLOC_PACKED, all, 12, NULL, 0, 3, L("0::0", "0::1", "0::2", NULL), "packed3");
    expect(r, SHARED_ALLOC_PACKED, all, 12, NULL, 0, 5, L("0::0", "0::1", "0::2", "0::3", "1::0", NULL), "packed5");

    /* GPU 0 has 2 replicas in use elsewhere: distributed avoids it, packed prefers it */
    const char *const busy0[] = { "1::0", "1::1", "1::2", "1::3", "0::2", "0::3",
                                  "2::0", "2::1", "2::2", "2::3" };
    expect(r, SHARED_ALLOC_DISTRIBUTED, busy0, 10, NULL, 0, 2, L("1::0", "2::0", NULL), "dist-busy");
    expect(r, SHARED_ALLOC_PACKED, busy0, 10, NULL, 0, 2, L("0::2", "0::3", NULL), "packed-busy");

    /* must-include first; it counts as allocated on its GPU */
    expect(r, SHARED_ALLOC_DISTRIBUTED, all, 12, L("1::2"), 1, 3, L("1::2", "0::0", "2::0", NULL), "must");
    expect(r, SHARED_ALLOC_PACKED, all, 12, L("2::3"), 1, 2, L("2::3", "2::0", NULL), "must-packed");
    /* unknown IDs and duplicates in available are ignored */
    expect(r, SHARED_ALLOC_DISTRIBUTED, L("x", "1::1", "1::1"), 3, NULL, 0, 1, L("1::1", NULL), "junk");

    /* not enough */
    expect(r, SHARED_ALLOC_DISTRIBUTED, L("0::0", "0::1"), 2, NULL, 0, 3, NULL, "short");
    expect(r, SHARED_ALLOC_DISTRIBUTED, L("0::0", "0::1"), 2, L("0::0"), 1, 3, NULL, "short-must");
    expect(r, SHARED_ALLOC_DISTRIBUTED, L("0::0", "0::1"), 2, L("0::0"), 1, 1, L("0::0", NULL), "only-must");

    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

static void test_first_fit(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_A100, 4);
    fx_config(&cfg, proc_root);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *r = &rs.resources[0];
    const char *g[4];
    for (size_t i = 0; i < 4; i++)
        g[i] = inv.gpus[i].uuid;

    const char **out = NULL;
    size_t n = 0;
    const char *const avail[] = { g[3], g[1], g[2], g[0] };
    CHECK(replicas_first_fit(r, avail, 4, L(g[3]), 1, 3, &out, &n, &err) == 0);
    CHECK(n == 3);
    if (n == 3) {
        CHECK_STR(out[0], g[3]);
        CHECK_STR(out[1], g[0]); /* device order, not request order */
        CHECK_STR(out[2], g[1]);
    }
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, NULL, 0, 5, &out, &n, &err) == 0 && n == 0);
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, NULL, 0, 0, &out, &n, &err) == 0 && n == 0);
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, L(g[1], g[0]), 2, 1, &out, &n, &err) == 0 && n == 0);
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, NULL, 0, INT32_MAX, &out, &n, &err) == 0 && n == 0);
    free(out);

    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

/* One placement_preferred call; want NULL = expect an error containing want_err. */
static void expect_place(const struct rs_resource *r, const struct config *cfg,
                         const char *const *avail, size_t n_avail, const char *const *must,
                         size_t n_must, int size, size_t want_n, const char *want_err,
                         const char *line)
{
    struct placement_request req = {
        .available = avail, .n_available = n_avail,
        .must_include = must, .n_must_include = n_must, .size = size,
    };
    const char **out = NULL;
    size_t n = 0;
    struct error err = { 0 };
    int rc = placement_preferred(r, cfg, NULL, &req, &out, &n, &err);
    if (want_err) {
        if (rc >= 0 || !strstr(err.msg, want_err)) {
            fprintf(stderr, "%s: rc %d, error \"%s\", want \"%s\"\n", line, rc, err.msg, want_err);
            test_failures++;
        }
    } else if (rc < 0 || n != want_n) {
        fprintf(stderr, "%s: rc %d (%s), %zu IDs, want %zu\n", line, rc, err.msg, n, want_n);
        test_failures++;
    }
    free(out);
}

/* The peer's allocation_size must never size an allocation: with a 1 GiB address-space
 * ceiling an INT32_MAX-sized array (16 GiB of pointers) aborts the test. ASan reserves
 * terabytes of shadow, so there the sizes are only checked by the answers. */
static void limit_address_space(void)
{
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit rl = { .rlim_cur = 1ull << 30, .rlim_max = RLIM_INFINITY };
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = 1ull << 30;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
        rl.rlim_cur = rl.rlim_max;
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
#endif
}

/* GetPreferredAllocation policy choice and its answers to impossible requests (§2.6):
 * greedy (MIG, replicas) fails "not enough available devices", aligned (full GPUs)
 * answers empty; unknown must-include IDs are refused by name. */
static void test_placement(void)
{
    static const char *const profiles[] = { "1g.5gb", "1g.5gb", "1g.5gb" };
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    const char *not_enough = "not enough available devices to satisfy allocation";

    /* MIG (mixed), index strategy: kubelet IDs are still MIG UUIDs */
    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, profiles, 3);
    fx_enable_mig(&inv, 1, profiles, 3);
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    cfg.device_id_strategy = DEVICE_ID_INDEX;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *r = &rs.resources[0];
    const char *m01 = inv.gpus[0].migs[1].uuid, *m12 = inv.gpus[1].migs[2].uuid;
    const char *m10 = inv.gpus[1].migs[0].uuid;
    const char *const avail[] = { m12, m01, m10 };
    expect_place(r, &cfg, avail, 3, L(m12), 1, 2, 2, NULL, "mig ok");
    {
        struct placement_request req = { .available = avail, .n_available = 3,
                                         .must_include = L(m12), .n_must_include = 1, .size = 3 };
        const char **out = NULL;
        size_t n = 0;
        CHECK(placement_preferred(r, &cfg, NULL, &req, &out, &n, &err) == 0 && n == 3);
        if (n == 3) {
            CHECK_STR(out[0], m12);
            CHECK_STR(out[1], m01); /* then device order */
            CHECK_STR(out[2], m10);
        }
        free(out);
    }
    expect_place(r, &cfg, avail, 3, NULL, 0, 4, 0, not_enough, "mig short");
    expect_place(r, &cfg, avail, 3, NULL, 0, INT32_MAX, 0, not_enough, "mig INT32_MAX");
    expect_place(r, &cfg, L("0:1", "1:2"), 2, NULL, 0, 1, 0, not_enough, "mig index IDs");
    expect_place(r, &cfg, avail, 3, L("0:1"), 1, 2, 0, "unknown must-include device: 0:1",
                 "mig unknown must");
    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);

    /* full GPUs (aligned policy): empty answers, bounded by the resource */
    fx_inventory(&inv, FX_T4, 4);
    fx_config(&cfg, proc_root);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    r = &rs.resources[0];
    const char *const gpus[] = { inv.gpus[0].uuid, inv.gpus[1].uuid, inv.gpus[2].uuid };
    expect_place(r, &cfg, gpus, 3, NULL, 0, 2, 2, NULL, "gpu ok");
    expect_place(r, &cfg, gpus, 3, NULL, 0, 4, 0, NULL, "gpu short");
    expect_place(r, &cfg, gpus, 3, NULL, 0, INT32_MAX, 0, NULL, "gpu INT32_MAX");
    expect_place(r, &cfg, gpus, 3, NULL, 0, -1, 0, NULL, "gpu negative");
    expect_place(r, &cfg, gpus, 3, L("GPU-x"), 1, 2, 0, "unknown must-include device: GPU-x",
                 "gpu unknown must");
    /* the reference maps every ID before its empty answers: unknown is an error first */
    expect_place(r, &cfg, L(inv.gpus[0].uuid, "GPU-y"), 2, NULL, 0, 4, 0,
                 "no device with uuid: GPU-y", "gpu unknown available, size too big");
    resources_clear(&rs);
    config_free(&cfg);

    /* replicas: greedy, INT32_MAX is "not enough", not an allocation */
    fx_config(&cfg, proc_root);
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", NULL, 2);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    r = &rs.resources[0];
    const char *const reps[] = { r->devices[0].id, r->devices[3].id };
    expect_place(r, &cfg, reps, 2, NULL, 0, INT32_MAX, 0, not_enough, "replicas INT32_MAX");
    expect_place(r, &cfg, reps, 2, L(r->devices[0].id), 1, 2, 2, NULL, "replicas ok");
    char bogus[128];
    snprintf(bogus, sizeof(bogus), "%s::9", inv.gpus[0].uuid);
    expect_place(r, &cfg, reps, 2, L(bogus), 1, 2, 0, "unknown must-include device", "replicas bogus must");
    resources_clear(&rs);
    config_free(&cfg);
    fx_inventory_free(&inv);
}

int main(void)
{
    proc_root = fx_proc_root();
    test_greedy();
    test_first_fit();
    limit_address_space();
    test_placement();
    fx_rmtree(proc_root);
    free(proc_root);
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
