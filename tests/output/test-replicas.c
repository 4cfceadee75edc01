/* Greedy replica placement (distributed / packed, must-include, insufficient) and
 * the first-fit fallback. Ties the reference leaves random are pinned by device order. */
#include <string.h>

#include "core/macro.h"
#include "fixtures.h"
#include "policy/replicas.h"

static char *proc_root;

/* Runs the policy and compares with want (NULL-terminated); want NULL = expect error. */
static void expect(const struct rs_resource *r, enum shared_alloc_policy pol,
                   const char *const *avail, size_t n_avail, const char *const *must,
                   size_t n_must, int size, const char *const *want, const char *line)
{
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
        same = streq(out[i], want[i]);
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
    static const char *const profiles[] = { "1g.5gb", "1g.5gb", "1g.5gb" };
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, profiles, 3);
    fx_enable_mig(&inv, 1, profiles, 3);
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    cfg.device_id_strategy = DEVICE_ID_INDEX;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *r = &rs.resources[0];

    const char **out = NULL;
    size_t n = 0;
    const char *const avail[] = { "1:2", "0:1", "1:0", "0:2" };
    CHECK(replicas_first_fit(r, avail, 4, L("1:2"), 1, 3, &out, &n, &err) == 0);
    CHECK(n == 3);
    if (n == 3) {
        CHECK_STR(out[0], "1:2");
        CHECK_STR(out[1], "0:1"); /* device order, not request order */
        CHECK_STR(out[2], "0:2");
    }
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, NULL, 0, 5, &out, &n, &err) == 0 && n == 0);
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, NULL, 0, 0, &out, &n, &err) == 0 && n == 0);
    free(out);
    CHECK(replicas_first_fit(r, avail, 4, L("0:1", "1:0"), 2, 1, &out, &n, &err) == 0 && n == 0);
    free(out);

    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

int main(void)
{
    proc_root = fx_proc_root();
    test_greedy();
    test_first_fit();
    fx_rmtree(proc_root);
    free(proc_root);
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
