/* The addressingMode attribute from NVML's answer to its publication, as NVIDIA's driver
 * (go-nvlib's GetAddressingModeAsString) has it: HMM, ATS and None are published; NOT_SUPPORTED
 * and a driver without nvmlDeviceGetAddressingMode publish none; MIG devices copy their
 * GPU's. Where NVIDIA's driver refuses to start (a mode NVML added after it) we publish
 * the GPU without the attribute (docs/compatibility.md). One case per process: the
 * simulated library reads its profile once per process. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "dra/dra-devices.h"
#include "dra/dra-slice.h"
#include "dra/dra-types.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"
#include "tests/common/cases.h"

int test_failures;

/* The attribute's value in a device entry, or NULL when it has none. */
static const char *attr_of(json_t *entry, const char *name)
{
    return json_string_value(json_object_get(json_object_get(json_object_get(entry, "attributes"), name),
                                             "string"));
}

/* Discovery of `profile` (MIG on) through the library under `driver_root`, then the
 * DRA devices and the one slice they make, which must pass the API server's rules. */
static int discover_and_build(const char *driver_root, struct inventory *inv, struct dra_device_set *set,
                              json_t **slice)
{
    struct error err = { 0 };
    char *profile = fixture_path("GDP_SOURCE_DIR", "tests/sim/profiles/addressing-modes.yaml");
    setenv("MOCK_NVML_CONFIG", profile, 1);
    free(profile);
    if (nvml_open(driver_root, &err) < 0) {
        fprintf(stderr, "nvml_open: %s\n", err.msg);
        return -1;
    }
    struct discover_options opt = { .sysfs_root = "/nonexistent", .with_mig = true };
    int r = discover_node(&opt, inv, &err);
    if (r == 0)
        r = dra_devices_build(inv, NULL, set, &err);
    if (r < 0) {
        fprintf(stderr, "discovery: %s\n", err.msg);
        nvml_close();
        return -1;
    }
    json_t *devices = dra_slice_devices(inv, set);
    struct dra_slice_pool pool = { .driver = DRA_DRIVER_NAME, .node_name = "node-a", .node_uid = "u1" };
    json_t *slices = dra_slices_build(&pool, devices);
    json_decref(devices);
    *slice = json_incref(json_array_get(slices, 0));
    json_decref(slices);
    char *msg = NULL;
    CHECK(dra_slice_validate(*slice, "x", &msg) == 0);
    if (msg)
        fprintf(stderr, "%s\n", msg);
    free(msg);
    return 0;
}

static json_t *entry_named(json_t *slice, const char *name)
{
    json_t *devices = json_object_get(json_object_get(slice, "spec"), "devices"), *d;
    size_t i;
    json_array_foreach(devices, i, d) {
        if (streq(json_string_value(json_object_get(d, "name")), name))
            return d;
    }
    fprintf(stderr, "no device %s in the slice\n", name);
    test_failures++;
    return NULL;
}

/* tests/sim/profiles/addressing-modes.yaml: GPU i answers HMM (the Hopper default), ATS,
 * NONE, NOT_SUPPORTED, 7 (unknown), NOT_SUPPORTED (the Volta default); GPU 6, MIG on,
 * NONE for itself and its MIG device. */
static void test_modes(void)
{
    struct inventory inv = { 0 };
    struct dra_device_set set = { 0 };
    json_t *slice = NULL;
    if (discover_and_build("/", &inv, &set, &slice) < 0) {
        test_failures++;
        return;
    }
    /* the wrapper's contract, on the library still open */
    nvml_device dev;
    char buf[8];
    struct error err = { 0 };
    CHECK(nvml_device_by_index(1, &dev, &err) == 0 && nvml_device_addressing_mode(dev, buf, sizeof(buf), &err) == 0);
    CHECK_STR(buf, "ATS");
    CHECK(nvml_device_by_index(3, &dev, &err) == 0);
    CHECK(nvml_device_addressing_mode(dev, buf, sizeof(buf), &err) == -ENOTSUP);
    CHECK_STR_CONTAINS(err.msg, "nvmlDeviceGetAddressingMode: Not Supported");
    CHECK(nvml_device_by_index(4, &dev, &err) == 0);
    CHECK(nvml_device_addressing_mode(dev, buf, sizeof(buf), &err) == -ENOENT);
    CHECK_STR(err.msg, "nvmlDeviceGetAddressingMode: unknown mode 7");
    nvml_close();

    static const char *const want[] = { "HMM", "ATS", "None", NULL, NULL, NULL };
    CHECK(inv.n_gpus == 7 && set.n == 7);
    for (size_t i = 0; i < ELEMENTSOF(want) && i < inv.n_gpus; i++) {
        char name[16];
        snprintf(name, sizeof(name), "gpu-%zu", i);
        CHECK_STR(inv.gpus[i].addressing_mode, want[i] ? want[i] : "");
        json_t *e = entry_named(slice, name);
        if (!e)
            continue;
        if (want[i])
            CHECK_STR(attr_of(e, "addressingMode"), want[i]);
        else if (json_object_get(json_object_get(e, "attributes"), "addressingMode")) {
            fprintf(stderr, "%s: addressingMode published although NVML gave no mode\n", name);
            test_failures++;
        }
    }
    /* the MIG device copies its GPU's, which NVML answered for the GPU's handle */
    CHECK(inv.n_gpus == 7 && inv.gpus[6].n_migs == 1 && streq(inv.gpus[6].addressing_mode, "None"));
    for (size_t i = 0; i < set.n; i++)
        if (set.devices[i].type == DRA_DEVICE_MIG) {
            json_t *e = entry_named(slice, set.devices[i].name);
            CHECK(e && streq(attr_of(e, "type"), "mig"));
            CHECK_STR(attr_of(e, "addressingMode"), "None");
        }
    json_decref(slice);
    dra_device_set_clear(&set);
    inventory_clear(&inv);
}

/* A driver older than nvmlDeviceGetAddressingMode: the library under a driver root, the
 * same simulator without that export. Discovery and the slice go on, without the attribute. */
static void test_old_driver(void)
{
    char *lib = fixture_path("GDP_BUILD_DIR", "sim/nvml/libnvidia-ml-no-addressing-mode.so");
    const char *root = scratch_dir("dra-old-driver-");
    char dir[4096], link[4200];
    snprintf(dir, sizeof(dir), "%s/usr/lib64", root);
    snprintf(link, sizeof(link), "%s/libnvidia-ml.so.1", dir);
    CHECK(mkdir_p(dir, 0755) == 0 && symlink(lib, link) == 0);
    free(lib);

    struct inventory inv = { 0 };
    struct dra_device_set set = { 0 };
    json_t *slice = NULL;
    if (discover_and_build(root, &inv, &set, &slice) < 0) {
        test_failures++;
        goto out;
    }
    CHECK_STR_CONTAINS(nvml_library_path(), "libnvidia-ml-no-addressing-mode.so");
    nvml_device dev;
    char buf[8];
    struct error err = { 0 };
    CHECK(nvml_device_by_index(0, &dev, &err) == 0);
    CHECK(nvml_device_addressing_mode(dev, buf, sizeof(buf), &err) == -ENOSYS);
    CHECK_STR_CONTAINS(err.msg, "nvmlDeviceGetAddressingMode: not provided by");
    nvml_close();
    CHECK(inv.n_gpus == 7 && set.n == 7);
    json_t *devices = json_object_get(json_object_get(slice, "spec"), "devices"), *d;
    size_t i;
    json_array_foreach(devices, i, d) {
        CHECK(json_object_get(json_object_get(d, "attributes"), "addressingMode") == NULL);
        CHECK(attr_of(d, "productName") != NULL); /* the rest is there */
    }
    for (i = 0; i < inv.n_gpus; i++)
        CHECK_STR(inv.gpus[i].addressing_mode, "");
    json_decref(slice);
out:
    dra_device_set_clear(&set);
    inventory_clear(&inv);
    CHECK(scratch_remove(root) == 0);
}

/* The device with the most attributes and capacities NVIDIA's driver publishes without
 * DynamicMIG: a MIG device whose placement spans all 8 memory slices, with every optional
 * attribute known (addressingMode, pcieRoot, numaNode). It stays within the API server's
 * 32. */
static void test_fits(void)
{
    struct inv_mig m = { .placement_start = 0, .placement_size = 8, .memory_bytes = 40ULL << 30,
                         .multiprocessors = 98, .copy_engines = 7, .decoders = 5, .jpegs = 1, .ofas = 1 };
    snprintf(m.uuid, sizeof(m.uuid), "MIG-00000000-0000-0000-0000-000000000000");
    snprintf(m.profile, sizeof(m.profile), "7g.40gb");
    struct inv_gpu g = { .minor = 0, .mig_capable = true, .mig_enabled = true, .migs = &m, .n_migs = 1,
                         .numa_node = 1, .cc_major = 8, .cc_minor = 0 };
    snprintf(g.uuid, sizeof(g.uuid), "GPU-00000000-0000-0000-0000-000000000000");
    snprintf(g.name, sizeof(g.name), "NVIDIA A100-SXM4-40GB");
    snprintf(g.brand, sizeof(g.brand), "Nvidia");
    snprintf(g.architecture, sizeof(g.architecture), "Ampere");
    snprintf(g.addressing_mode, sizeof(g.addressing_mode), "HMM");
    snprintf(g.bus_id, sizeof(g.bus_id), "0000:07:00.0");
    snprintf(g.pcie_root, sizeof(g.pcie_root), "pci0000:00");
    struct inventory inv = { .gpus = &g, .n_gpus = 1 };
    snprintf(inv.driver_version, sizeof(inv.driver_version), "580.159.04");
    snprintf(inv.cuda_driver_version, sizeof(inv.cuda_driver_version), "13.0");
    struct dra_device d = { .type = DRA_DEVICE_MIG, .gpu = 0, .mig = 0 };
    snprintf(d.name, sizeof(d.name), "gpu-0-mig-7g40gb-0-0");
    json_t *e = dra_slice_device(&inv, &d);
    size_t attrs = json_object_size(json_object_get(e, "attributes"));
    size_t caps = json_object_size(json_object_get(e, "capacity"));
    CHECK(attrs == 14 && caps == 15);
    CHECK(attrs + caps <= DRA_DEVICE_MAX_ATTRS);
    CHECK_STR(attr_of(e, "addressingMode"), "HMM");
    json_t *slice = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:i, s:i}, s:[o]}}", "apiVersion",
                              "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name", "s", "spec",
                              "driver", DRA_DRIVER_NAME, "nodeName", "node-a", "pool", "name", "node-a",
                              "generation", 1, "resourceSliceCount", 1, "devices", e);
    char *msg = NULL;
    CHECK(dra_slice_validate(slice, NULL, &msg) == 0);
    if (msg)
        fprintf(stderr, "%s\n", msg);
    free(msg);
    json_decref(slice);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "modes", test_modes },
        { "old-driver", test_old_driver },
        { "fits", test_fits },
    };
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
