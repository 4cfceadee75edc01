/* Discovery: pure helpers (MIG profile names, PCI bus ids, sysfs NUMA files) and the
 * whole discover_node() through the real NVML module against the simulated
 * libnvidia-ml.so.1 (LD_LIBRARY_PATH and MOCK_NVML_CONFIG come from meson). */
#include <stdio.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "node/discover.h"
#include "node/mig.h"
#include "nvml/nvml.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"
#include "tests/common/cases.h"

int test_failures;

static void test_profile_names(void)
{
    const uint64_t a100 = 40ULL << 30, h100 = 80ULL << 30, mib = 1ULL << 20;
    char buf[64];
    struct {
        unsigned g, c;
        uint64_t mem, total;
        enum nvml_gi_variant variant;
        const char *want;
    } cases[] = {
        { 1, 1, 4864 * mib, a100, NVML_GI_VARIANT_PLAIN, "1g.5gb" },
        { 1, 1, 4864 * mib, a100, NVML_GI_VARIANT_ME, "1g.5gb+me" },
        { 1, 1, 9856 * mib, a100, NVML_GI_VARIANT_PLAIN, "1g.10gb" },
        { 2, 2, 9856 * mib, a100, NVML_GI_VARIANT_PLAIN, "2g.10gb" },
        { 3, 3, 19968 * mib, a100, NVML_GI_VARIANT_PLAIN, "3g.20gb" },
        { 4, 4, 19968 * mib, a100, NVML_GI_VARIANT_PLAIN, "4g.20gb" },
        { 7, 7, 40192 * mib, a100, NVML_GI_VARIANT_PLAIN, "7g.40gb" },
        { 2, 1, 9856 * mib, a100, NVML_GI_VARIANT_PLAIN, "1c.2g.10gb" },
        { 1, 1, 9856 * mib, h100, NVML_GI_VARIANT_PLAIN, "1g.10gb" },
        { 1, 1, 9856 * mib, h100, NVML_GI_VARIANT_NO_ME, "1g.10gb-me" },
        { 7, 7, 80896 * mib, h100, NVML_GI_VARIANT_PLAIN, "7g.80gb" },
        { 3, 3, 40192 * mib, h100, NVML_GI_VARIANT_PLAIN, "3g.40gb" },
        { 1, 1, 1 * mib, 0, NVML_GI_VARIANT_PLAIN, "1g.0gb" }, /* unknown GPU memory never divides by 0 */
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        mig_profile_name(cases[i].g, cases[i].c, cases[i].mem, cases[i].total, cases[i].variant,
                         buf, sizeof(buf));
        CHECK_STR(buf, cases[i].want);
    }
}

static void test_bus_ids(void)
{
    char out[32];
    struct {
        const char *in, *want;
    } ok[] = {
        { "00000000:3B:00.0", "0000:3b:00.0" },
        { "0000:3b:00.0", "0000:3b:00.0" },
        { "3B:00.0", "0000:3b:00.0" },
        { "00000001:AF:1F.7", "0001:af:1f.7" },
    };
    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        CHECK(nvml_bus_id_normalize(ok[i].in, out, sizeof(out)) == 0);
        CHECK_STR(out, ok[i].want);
    }
    const char *bad[] = { "", "garbage", "0000:3b:00", "0000:3b:00.0x", "0000:3b:20.0",
                          "0000:3b:00.8", "0000:100:00.0", "100000:3b:00.0" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        CHECK(nvml_bus_id_normalize(bad[i], out, sizeof(out)) == -EINVAL);
    CHECK(nvml_bus_id_normalize("0000:3b:00.0", out, 5) == -ENOBUFS);
}

static void write_numa(const char *root, const char *bdf, const char *content)
{
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s/bus/pci/devices/%s", root, bdf);
    CHECK(mkdir_p(dir, 0755) == 0);
    snprintf(path, sizeof(path), "%s/numa_node", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(content, f);
        fclose(f);
    }
}

static void test_numa(void)
{
    const char *root = scratch_dir("gdp-numa-");
    write_numa(root, "0000:01:00.0", "1\n");
    write_numa(root, "0000:02:00.0", "-1\n");
    write_numa(root, "0000:03:00.0", "banana\n");
    write_numa(root, "0000:04:00.0", "0");
    bool bad;
    CHECK(discover_numa_node(root, "0000:01:00.0", &bad) == 1 && !bad);
    CHECK(discover_numa_node(root, "0000:02:00.0", &bad) == -1 && !bad);
    CHECK(discover_numa_node(root, "0000:03:00.0", &bad) == -1 && bad);
    CHECK(discover_numa_node(root, "0000:04:00.0", &bad) == 0 && !bad);
    CHECK(discover_numa_node(root, "0000:05:00.0", &bad) == -1 && !bad);
    CHECK(scratch_remove(root) == 0);
}

/* discover_node over a simulated profile: returns the inventory (caller clears). */
static int discover_profile(const char *profile, bool mig, struct inventory *inv)
{
    struct error err = { 0 };
    fixture_check(profile);
    setenv("MOCK_NVML_CONFIG", profile, 1);
    if (nvml_open("/", &err) < 0) {
        fprintf(stderr, "nvml_open: %s\n", err.msg);
        return -1;
    }
    struct discover_options opt = { .sysfs_root = "/nonexistent", .with_mig = mig,
                                    .with_links = true };
    int r = discover_node(&opt, inv, &err);
    if (r < 0)
        fprintf(stderr, "discover_node(%s): %s\n", profile, err.msg);
    nvml_close();
    return r;
}

/* discover_profile expecting n GPUs; anything else is one failure and ends the case
 * (its checks index gpus[]). */
static bool discover_gpus(const char *profile, bool mig, size_t n, struct inventory *inv)
{
    if (discover_profile(profile, mig, inv) == 0 && inv->n_gpus == n)
        return true;
    fprintf(stderr, "%s: %zu GPUs, want %zu\n", profile, inv->n_gpus, n);
    test_failures++;
    inventory_clear(inv);
    return false;
}

static void test_links_nvswitch(const char *data)
{
    char path[512];
    struct inventory inv = { 0 };
    snprintf(path, sizeof(path), "%s/nvml-mock-profiles/a100.yaml", data);
    if (!discover_gpus(path, false, 8, &inv))
        return;
    CHECK_STR(inv.driver_version, "550.163.01");
    CHECK_STR(inv.cuda_driver_version, "12.4");
    for (size_t a = 0; a < inv.n_gpus; a++)
        for (size_t b = 0; b < inv.n_gpus; b++)
            if (a != b) /* six NVSwitches, two links each: NV12 all-to-all */
                CHECK(inventory_link(&inv, a, b)->nvlinks == 12);
    CHECK(inv.gpus[0].numa_node == -1); /* no sysfs file: no topology */
    CHECK_STR(inv.gpus[1].bus_id, "0000:0f:00.0");
    CHECK(inv.gpus[7].minor == 7 && inv.gpus[7].cc_major == 8 && inv.gpus[7].cc_minor == 0);
    inventory_clear(&inv);
}

static void test_links_cube_mesh(const char *src)
{
    char path[512];
    struct inventory inv = { 0 };
    snprintf(path, sizeof(path), "%s/sim/profiles/topo-dgx1-v100.yaml", src);
    if (!discover_gpus(path, false, 8, &inv))
        return;
    /* the profile's explicit, uneven link counts, mirrored */
    CHECK(inventory_link(&inv, 0, 3)->nvlinks == 2 && inventory_link(&inv, 3, 0)->nvlinks == 2);
    CHECK(inventory_link(&inv, 0, 1)->nvlinks == 1);
    CHECK(inventory_link(&inv, 1, 2)->nvlinks == 2);
    CHECK(inventory_link(&inv, 3, 7)->nvlinks == 1);
    CHECK(inventory_link(&inv, 0, 5)->nvlinks == 0);
    for (size_t a = 0; a < inv.n_gpus; a++)
        for (size_t b = 0; b < inv.n_gpus; b++)
            if (a != b)
                CHECK(inventory_link(&inv, a, b)->nvlinks == inventory_link(&inv, b, a)->nvlinks &&
                      inventory_link(&inv, a, b)->pcie_level >= 0);
    inventory_clear(&inv);
}

static void test_mig(const char *src)
{
    char path[512];
    struct inventory inv = { 0 };
    snprintf(path, sizeof(path), "%s/sim/profiles/compat-a100-mixed.yaml", src);
    if (!discover_gpus(path, true, 4, &inv))
        return;
    CHECK(!inv.gpus[0].mig_enabled && inv.gpus[0].n_migs == 0);
    /* a GI listed without compute instances gets one whole-GI CI (docs/simulator.md) */
    CHECK(inv.gpus[1].mig_enabled && inv.gpus[1].n_migs == 3);
    CHECK(inv.gpus[2].mig_enabled && inv.gpus[2].n_migs == 4);
    CHECK(inv.gpus[3].mig_enabled && inv.gpus[3].n_migs == 0);
    unsigned one_g = 0;
    for (size_t m = 0; m < inv.gpus[2].n_migs; m++)
        one_g += streq(inv.gpus[2].migs[m].profile, "1g.5gb");
    CHECK(one_g == 3);
    bool me = false;
    for (size_t m = 0; m < inv.gpus[1].n_migs; m++)
        me |= streq(inv.gpus[1].migs[m].profile, "1g.5gb+me");
    CHECK(me);
    inventory_clear(&inv);
}

static void test_lost(const char *src)
{
    char path[512];
    struct inventory inv = { 0 };
    snprintf(path, sizeof(path), "%s/tests/unit/profiles/lost-gpu.yaml", src);
    CHECK(discover_profile(path, false, &inv) == 0);
    CHECK(inv.n_gpus == 1);
    if (inv.n_gpus == 1) {
        CHECK_STR(inv.gpus[0].uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
        CHECK(inv.gpus[0].index == 0);
    }
    inventory_clear(&inv);
}

/* One case per process: the simulated library parses its profile once per process. */
static const char *source_dir, *data_dir;

static void case_pure(void)
{
    test_profile_names();
    test_bus_ids();
    test_numa();
}

static void case_nvswitch(void) { test_links_nvswitch(data_dir); }
static void case_cube_mesh(void) { test_links_cube_mesh(source_dir); }
static void case_mig(void) { test_mig(source_dir); }
static void case_lost(void) { test_lost(source_dir); }

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "pure", case_pure },
        { "nvswitch", case_nvswitch },
        { "cube-mesh", case_cube_mesh },
        { "mig", case_mig },
        { "lost", case_lost },
    };
    source_dir = getenv("GDP_SOURCE_DIR");
    data_dir = getenv("GDP_TEST_DATA");
    if (!source_dir || !data_dir) {
        fprintf(stderr, "GDP_SOURCE_DIR / GDP_TEST_DATA not set\n");
        return 1;
    }
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
