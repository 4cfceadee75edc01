/* DRA devices and ResourceSlices: names as NVIDIA's driver gives them (from a made-up
 * inventory and from discovery over the simulated NVML), one case per process because
 * the simulated library reads its profile once per process. */
#include <stdio.h>
#include <stdlib.h>

#include "dra/dra-devices.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"

int test_failures;

static struct inv_gpu gpu(unsigned minor, bool mig)
{
    struct inv_gpu g = { .minor = minor, .mig_enabled = mig, .mig_capable = mig };
    snprintf(g.uuid, sizeof(g.uuid), "GPU-%u", minor);
    return g;
}

static struct inv_mig mig(const char *profile, unsigned gi_profile, unsigned start, unsigned ci)
{
    struct inv_mig m = { .gi_profile_id = gi_profile, .placement_start = start, .ci_id = ci };
    snprintf(m.profile, sizeof(m.profile), "%s", profile);
    snprintf(m.uuid, sizeof(m.uuid), "MIG-%s-%u", profile, start);
    return m;
}

static void test_names(void)
{
    struct inv_mig migs[] = {
        mig("1g.5gb+me", 20, 6, 0),  mig("1c.2g.10gb", 14, 0, 0), mig("1c.2g.10gb", 14, 0, 1),
        mig("3g.20gb", 9, 4, 0),     mig("1g.10gb+me.all", 30, 2, 0), mig("1G.5GB/x_y", 19, 1, 0),
    };
    struct inv_gpu gpus[] = { gpu(3, false), gpu(0, true), gpu(12, false) };
    gpus[1].migs = migs;
    gpus[1].n_migs = ELEMENTSOF(migs);
    struct inventory inv = { .gpus = gpus, .n_gpus = ELEMENTSOF(gpus) };
    struct dra_device_set s = { 0 };
    struct error err = { 0 };

    CHECK(dra_devices_build(&inv, NULL, &s, &err) == 0);
    const char *want[] = { "gpu-3",
                           "gpu-0-mig-1g5gb-me-20-6",
                           "gpu-0-mig-1c2g10gb-14-0",
                           "gpu-0-mig-1c2g10gb-14-0-ci1", /* same GI: NVIDIA's name twice */
                           "gpu-0-mig-3g20gb-9-4",
                           "gpu-0-mig-1g10gb-meall-30-2",
                           "gpu-0-mig-1g5gb-x-y-19-1",
                           "gpu-12" };
    CHECK(s.n == ELEMENTSOF(want));
    for (size_t i = 0; i < s.n && i < ELEMENTSOF(want); i++)
        CHECK_STR(s.devices[i].name, want[i]);
    CHECK(s.n == 8 && s.devices[0].type == DRA_DEVICE_GPU && s.devices[0].gpu == 0);
    CHECK(s.n == 8 && s.devices[4].type == DRA_DEVICE_MIG && s.devices[4].gpu == 1 &&
          s.devices[4].mig == 3);
    CHECK(dra_devices_find(&s, "gpu-12") == &s.devices[7]);
    CHECK(dra_devices_find(&s, "gpu-1") == NULL);
    CHECK(dra_devices_find(&s, NULL) == NULL);
    dra_device_set_clear(&s);
    CHECK(s.n == 0 && s.devices == NULL);

    /* the device plugin keeps GPU index 0 and 2: DRA offers only the MIG devices */
    bool serve[] = { false, true, false };
    CHECK(dra_devices_build(&inv, serve, &s, &err) == 0);
    CHECK(s.n == ELEMENTSOF(migs));
    dra_device_set_clear(&s);

    /* two GPUs with one minor would be one name: refused, not published twice */
    gpus[2].minor = 3;
    CHECK(dra_devices_build(&inv, NULL, &s, &err) == -EEXIST);
    CHECK_STR_CONTAINS(err.msg, "\"gpu-3\" already used");
    CHECK(s.n == 0 && s.devices == NULL);
    gpus[2].minor = 12;

    /* a profile name that makes a name over 63 characters */
    snprintf(migs[0].profile, sizeof(migs[0].profile), "%s",
             "7g80gb-me-all-gfx-something-very-long-indeed-x");
    migs[0].gi_profile_id = 123456;
    CHECK(dra_devices_build(&inv, NULL, &s, &err) == -ENAMETOOLONG);
    CHECK_STR_CONTAINS(err.msg, "longer than 63 characters");
}

/* discover_node over a simulated profile (MIG on). */
static int discover(const char *profile, struct inventory *inv)
{
    struct error err = { 0 };
    setenv("MOCK_NVML_CONFIG", fixture_check(profile), 1);
    if (nvml_open("/", &err) < 0) {
        fprintf(stderr, "nvml_open: %s\n", err.msg);
        return -1;
    }
    struct discover_options opt = { .sysfs_root = "/nonexistent", .with_mig = true };
    int r = discover_node(&opt, inv, &err);
    if (r < 0)
        fprintf(stderr, "discover_node(%s): %s\n", profile, err.msg);
    nvml_close();
    return r;
}

/* a100-mig-mixed: GPUs 0 and 1 whole, GPU 2 with a 3g (placement 4), a 2g holding two
 * 1c.2g compute instances (placement 0) and a 1g+me (placement 2), GPU 3 a 4g and
 * three 1g. NVML's A100 GI profile ids: 1g.5gb 19, 1g.5gb+me 20, 2g.10gb 14,
 * 3g.20gb 9, 4g.20gb 5. */
static void test_mig(const char *src)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sim/profiles/a100-mig-mixed.yaml", src);
    struct inventory inv = { 0 };
    struct dra_device_set s = { 0 };
    struct error err = { 0 };
    if (discover(path, &inv) < 0) {
        test_failures++;
        return;
    }
    CHECK(dra_devices_build(&inv, NULL, &s, &err) == 0);
    const char *want[] = { "gpu-0", "gpu-1",
                           "gpu-2-mig-3g20gb-9-4", "gpu-2-mig-1c2g10gb-14-0",
                           "gpu-2-mig-1c2g10gb-14-0-ci1", "gpu-2-mig-1g5gb-me-20-2",
                           "gpu-3-mig-4g20gb-5-0", "gpu-3-mig-1g5gb-19-4",
                           "gpu-3-mig-1g5gb-19-5", "gpu-3-mig-1g5gb-19-6" };
    CHECK(s.n == ELEMENTSOF(want));
    for (size_t i = 0; i < s.n; i++) {
        bool found = false;
        for (size_t j = 0; j < ELEMENTSOF(want); j++)
            found |= streq(s.devices[i].name, want[j]);
        if (!found)
            fprintf(stderr, "unexpected device %s\n", s.devices[i].name);
        CHECK(found);
    }
    CHECK(inv.n_gpus == 4 && streq(inv.gpus[0].brand, "Nvidia") &&
          streq(inv.gpus[0].architecture, "Ampere"));
    dra_device_set_clear(&s);
    inventory_clear(&inv);
}

int main(int argc, char **argv)
{
    const char *src = getenv("GDP_SOURCE_DIR");
    const char *c = argc > 1 ? argv[1] : "";
    if (!src) {
        fprintf(stderr, "GDP_SOURCE_DIR not set (run it through meson test)\n");
        return 1;
    }
    if (streq(c, "names"))
        test_names();
    else if (streq(c, "mig"))
        test_mig(src);
    else {
        fprintf(stderr, "usage: test-dra-slices names|mig\n");
        return 1;
    }
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
