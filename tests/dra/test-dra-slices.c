/* DRA devices and ResourceSlices: names as NVIDIA's driver gives them (from a made-up
 * inventory and from discovery over the simulated NVML), one case per process because
 * the simulated library reads its profile once per process. */
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

static void test_versions(void)
{
    char out[80];
    struct {
        const char *in, *want;
    } ok[] = {
        { "12.4", "12.4.0" },          { "9.0", "9.0.0" },
        { "570.133.20", "570.133.20" }, { "550.163.01", "550.163.1" }, /* no leading zeros */
        { "550.54", "550.54.0" },      { "v1.2.3", "1.2.3" },
        { "13", "13.0.0" },            { "1.2.3-rc.1+b5", "1.2.3-rc.1+b5" },
    };
    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        CHECK(dra_semver_normalize(ok[i].in, out, sizeof(out)) == 0);
        CHECK_STR(out, ok[i].want);
    }
    const char *bad[] = { "", "x", "550.54 beta", "1.2.3.4", "1.2.3-", "1.2.3-01", ".1" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        CHECK(dra_semver_normalize(bad[i], out, sizeof(out)) == -EINVAL);
    CHECK(dra_semver_valid("0.0.0") && dra_semver_valid("1.2.3-0a.1+001"));
    CHECK(!dra_semver_valid("570.133") && !dra_semver_valid("v570.133.20") &&
          !dra_semver_valid("1.02.3") && !dra_semver_valid("1.2.3+") &&
          !dra_semver_valid("99999999999999999999.0.0"));

    struct {
        unsigned long long v;
        const char *want;
    } q[] = { { 0, "0" }, { 1000, "1000" }, { 1024, "1Ki" }, { 85899345920ULL, "80Gi" },
              { 81559ULL << 20, "81559Mi" }, { 1ULL << 62, "4Ei" }, { 3ULL << 61, "6Ei" } };
    for (size_t i = 0; i < ELEMENTSOF(q); i++) {
        dra_quantity_binary(q[i].v, out, sizeof(out));
        CHECK_STR(out, q[i].want);
    }
}

/* discover_node over a simulated profile (MIG on). */
static int discover_in(const char *profile, const char *sysfs, struct inventory *inv);
static int discover(const char *profile, struct inventory *inv)
{
    return discover_in(profile, "/nonexistent", inv);
}

static int discover_in(const char *profile, const char *sysfs, struct inventory *inv)
{
    struct error err = { 0 };
    setenv("MOCK_NVML_CONFIG", fixture_check(profile), 1);
    if (nvml_open("/", &err) < 0) {
        fprintf(stderr, "nvml_open: %s\n", err.msg);
        return -1;
    }
    struct discover_options opt = { .sysfs_root = sysfs, .with_mig = true };
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

    /* a MIG device's entry: its own uuid, the parent's, the profile, NVIDIA's capacities
     * and one memorySlice<i> per memory slice of its placement */
    const struct dra_device *d = dra_devices_find(&s, "gpu-3-mig-4g20gb-5-0");
    CHECK(d != NULL);
    if (d) {
        json_t *e = dra_slice_device(&inv, d);
        json_t *a = json_object_get(e, "attributes"), *c = json_object_get(e, "capacity");
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "type"), "string")), "mig");
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "profile"), "string")), "4g.20gb");
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "parentUUID"), "string")),
                  inv.gpus[3].uuid);
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "uuid"), "string")),
                  inv.gpus[3].migs[d->mig].uuid);
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "productName"), "string")),
                  "NVIDIA A100-SXM4-40GB");
        CHECK_STR(json_string_value(json_object_get(json_object_get(a, "addressingMode"), "string")),
                  "HMM"); /* the parent's (the simulator's Ampere default) */
        static const char *const caps[] = { "multiprocessors", "copyEngines", "decoders", "encoders",
                                            "jpegEngines", "ofaEngines", "memory", "memorySlice0",
                                            "memorySlice1", "memorySlice2", "memorySlice3" };
        for (size_t i = 0; i < ELEMENTSOF(caps); i++)
            CHECK(json_is_string(json_object_get(json_object_get(c, caps[i]), "value")));
        CHECK(json_object_size(c) == ELEMENTSOF(caps));
        json_decref(e);
    }
    json_t *devices = dra_slice_devices(&inv, &s);
    struct dra_slice_pool pool = { .driver = DRA_DRIVER_NAME, .node_name = "node-a", .node_uid = "u1" };
    json_t *slices = dra_slices_build(&pool, devices);
    char *msg = NULL;
    CHECK(dra_slice_validate(json_array_get(slices, 0), "x", &msg) == 0);
    if (msg)
        fprintf(stderr, "%s\n", msg);
    free(msg);
    json_decref(slices);
    json_decref(devices);
    dra_device_set_clear(&s);
    inventory_clear(&inv);
}

/* The type key of an attribute value ("string", "version", "int", "bool"). */
static const char *value_kind(json_t *v)
{
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) return k;
    return "";
}

/* Every key of `a` (but `except`) is in `b`, with the same value kind. */
static void same_kinds(json_t *a, json_t *b, const char *except, const char *what)
{
    const char *k;
    json_t *v;
    json_object_foreach(a, k, v) {
        if (except && streq(k, except))
            continue;
        json_t *o = json_object_get(b, k);
        if (!o || !streq(value_kind(v), value_kind(o))) {
            fprintf(stderr, "%s: %s (%s) missing or of another kind\n", what, k, value_kind(v));
            test_failures++;
        }
    }
}

/* A sysfs where GPU `bdf` sits under root complex `root_complex` (and, numa >= 0, on
 * that NUMA node), linked from bus/pci/devices as the kernel does. */
static void sysfs_gpu(const char *root, const char *root_complex, const char *bdf, int numa)
{
    char dir[1024], link[1024], target[1024];
    snprintf(dir, sizeof(dir), "%s/devices/%s/0000:%.2s:01.0/%s", root, root_complex, bdf + 5, bdf);
    CHECK(mkdir_p(dir, 0755) == 0);
    snprintf(link, sizeof(link), "%s/bus/pci/devices", root);
    CHECK(mkdir_p(link, 0755) == 0);
    snprintf(link, sizeof(link), "%s/bus/pci/devices/%s", root, bdf);
    snprintf(target, sizeof(target), "../../../devices/%s/0000:%.2s:01.0/%s", root_complex, bdf + 5, bdf);
    CHECK(symlink(target, link) == 0);
    if (numa >= 0) {
        char path[1100], buf[16];
        snprintf(path, sizeof(path), "%s/numa_node", dir);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        if (f) {
            snprintf(buf, sizeof(buf), "%d\n", numa);
            fputs(buf, f);
            fclose(f);
        }
    }
}

/* The 8-GPU H100 profile's slice against the one a real 1.34.9 API server stored
 * (tests/data/dra/objects/resourceslice-8gpu.json): the same attribute names and kinds
 * per device (plus numaNode, which that capture's host did not have), the same capacity,
 * pool and owner fields; values where they do not depend on that host (addressingMode
 * included: the profile answers HMM, as that host did). */
static void test_slice_8gpu(const char *src, const char *data)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sim/profiles/topo-hgx-h100.yaml", src);
    const char *sysfs = scratch_dir("dra-sysfs-");
    static const char *const bdfs[][2] = {
        { "0000:18:00.0", "pci0000:15" }, { "0000:2a:00.0", "pci0000:27" }, { "0000:3a:00.0", "pci0000:37" },
        { "0000:5d:00.0", "pci0000:5a" }, { "0000:9a:00.0", "pci0000:97" }, { "0000:ab:00.0", "pci0000:a8" },
        { "0000:ba:00.0", "pci0000:b7" }, { "0000:db:00.0", "pci0000:d8" },
    };
    for (size_t i = 0; i < ELEMENTSOF(bdfs); i++)
        sysfs_gpu(sysfs, bdfs[i][1], bdfs[i][0], i == 7 ? -1 : (int)i / 4);
    char *want_path = fixture_path("GDP_TEST_DATA", "dra/objects/resourceslice-8gpu.json");
    json_error_t jerr;
    json_t *want = json_load_file(want_path, 0, &jerr);
    free(want_path);
    struct inventory inv = { 0 };
    struct dra_device_set set = { 0 };
    struct error err = { 0 };
    if (!want || discover_in(path, sysfs, &inv) < 0 || dra_devices_build(&inv, NULL, &set, &err) < 0) {
        test_failures++;
        goto out;
    }
    json_t *devices = dra_slice_devices(&inv, &set);
    struct dra_slice_pool pool = { .driver = DRA_DRIVER_NAME, .node_name = "gpu-node-1",
                                   .node_uid = "99619144-9270-4b83-9ad7-50a84a7ba715", .generation = 1 };
    json_t *slices = dra_slices_build(&pool, devices);
    CHECK(json_array_size(slices) == 1);
    json_t *got = json_array_get(slices, 0);
    json_t *wd = json_object_get(json_object_get(want, "spec"), "devices");
    json_t *gd = json_object_get(json_object_get(got, "spec"), "devices");
    CHECK(json_array_size(gd) == 8 && json_array_size(wd) == 8);
    for (size_t i = 0; i < json_array_size(gd) && i < json_array_size(wd); i++) {
        json_t *g = json_array_get(gd, i), *w = json_array_get(wd, i);
        CHECK_STR(json_string_value(json_object_get(g, "name")), json_string_value(json_object_get(w, "name")));
        json_t *ga = json_object_get(g, "attributes"), *wa = json_object_get(w, "attributes");
        same_kinds(wa, ga, NULL, "fixture attribute");
        same_kinds(ga, wa, "resource.kubernetes.io/numaNode", "our attribute");
        same_kinds(json_object_get(w, "capacity"), json_object_get(g, "capacity"), NULL, "capacity");
        same_kinds(json_object_get(g, "capacity"), json_object_get(w, "capacity"), NULL, "capacity");
        /* host-independent values, and ours from the simulated host */
        static const char *const same[] = { "type", "productName", "brand", "architecture",
                                            "cudaComputeCapability", "addressingMode",
                                            "resource.kubernetes.io/pciBusID",
                                            "resource.kubernetes.io/pcieRoot" };
        for (size_t k = 0; k < ELEMENTSOF(same); k++)
            CHECK(json_equal(json_object_get(ga, same[k]), json_object_get(wa, same[k])));
        CHECK_STR(json_string_value(json_object_get(json_object_get(ga, "driverVersion"), "version")),
                  "550.163.1"); /* the simulator's 550.163.01, without its leading zero */
        CHECK_STR(json_string_value(json_object_get(json_object_get(ga, "cudaDriverVersion"), "version")),
                  "12.4.0");
        CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(g, "capacity"), "memory"), "value")),
                  "80Gi");
        json_t *numa = json_object_get(json_object_get(ga, "resource.kubernetes.io/numaNode"), "int");
        if (i == 7)
            CHECK(numa == NULL); /* unknown: left out, never -1 */
        else
            CHECK(json_integer_value(numa) == (json_int_t)i / 4);
    }
    /* the slice's own fields, as the API server stored them */
    json_t *ws = json_object_get(want, "spec"), *gs = json_object_get(got, "spec");
    CHECK(json_equal(json_object_get(ws, "pool"), json_object_get(gs, "pool")));
    CHECK(json_equal(json_object_get(ws, "driver"), json_object_get(gs, "driver")));
    CHECK(json_equal(json_object_get(ws, "nodeName"), json_object_get(gs, "nodeName")));
    CHECK(json_equal(json_object_get(json_object_get(want, "metadata"), "ownerReferences"),
                     json_object_get(json_object_get(got, "metadata"), "ownerReferences")));
    CHECK_STR(json_string_value(json_object_get(got, "apiVersion")), "resource.k8s.io/v1");
    CHECK_STR(json_string_value(json_object_get(got, "kind")), "ResourceSlice");
    char *msg = NULL;
    CHECK(dra_slice_validate(got, "x", &msg) == 0);
    CHECK(dra_slice_validate(want, NULL, &msg) == 0); /* the stored object passes too */
    json_decref(slices);
    json_decref(devices);
out:
    json_decref(want);
    dra_device_set_clear(&set);
    inventory_clear(&inv);
    CHECK(scratch_remove(sysfs) == 0);
}

/* A slice of `n` devices "gpu-<i>" with type/uuid attributes and a memory capacity
 * (validation.md's base object), for one case named `name`. */
static json_t *base_slice(const char *name, size_t n)
{
    json_t *devices = json_array();
    for (size_t i = 0; i < n; i++) {
        char dn[32], uuid[48];
        snprintf(dn, sizeof(dn), "gpu-%zu", i);
        snprintf(uuid, sizeof(uuid), "GPU-%zu", i);
        json_array_append_new(devices, json_pack("{s:s, s:{s:{s:s}, s:{s:s}}, s:{s:{s:s}}}", "name", dn,
                                                 "attributes", "type", "string", "gpu", "uuid", "string",
                                                 uuid, "capacity", "memory", "value", "80Gi"));
    }
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:i, s:i}, s:o}}", "apiVersion",
                     "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name", name, "spec",
                     "driver", "gpu.nvidia.com", "nodeName", "gpu-node-1", "pool", "name", "gpu-node-1",
                     "generation", 1, "resourceSliceCount", 1, "devices", devices);
}

static json_t *dev0(json_t *slice)
{
    return json_array_get(json_object_get(json_object_get(slice, "spec"), "devices"), 0);
}

static json_t *attrs0(json_t *slice)
{
    return json_object_get(dev0(slice), "attributes");
}

/* want: the API server's whole message (validation.md), or NULL: accepted. */
static void expect(json_t *slice, const char *want)
{
    char *msg = NULL;
    int r = dra_slice_validate(slice, NULL, &msg);
    if (!want) {
        if (r != 0)
            fprintf(stderr, "refused: %s\n", msg);
        CHECK(r == 0);
    } else {
        CHECK(r == -EINVAL);
        CHECK_STR(msg, want);
    }
    free(msg);
    json_decref(slice);
}

#define INVALID(name) "ResourceSlice.resource.k8s.io \"" name "\" is invalid: "

static void add_attrs(json_t *slice, unsigned n, const char *cap)
{
    for (unsigned i = 0; i < n; i++) {
        char k[16];
        snprintf(k, sizeof(k), "a%u", i);
        json_object_set_new(attrs0(slice), k, json_pack("{s:i}", "int", i));
    }
    if (cap)
        json_object_set_new(json_object_get(dev0(slice), "capacity"), cap, json_pack("{s:s}", "value", "1"));
}

static json_t *with_taints(json_t *slice, unsigned n, const char *effect)
{
    json_t *t = json_array();
    for (unsigned i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof(k), "gpu.nvidia.com/t%u", i);
        json_array_append_new(t, json_pack("{s:s, s:s, s:s}", "key", k, "value", "79", "effect", effect));
    }
    json_object_set_new(dev0(slice), "taints", t);
    return slice;
}

static json_t *with_attr(json_t *slice, const char *key, json_t *val)
{
    json_object_set_new(attrs0(slice), key, val);
    return slice;
}

/* Each rule of objects/validation.md once, with the API server's message. */
static void test_validate(void)
{
    expect(base_slice("val-128", 128), NULL);
    expect(base_slice("val-129", 129), INVALID("val-129") "spec.devices: Too many: 129: must have at most 128 items");
    json_t *s = base_slice("val-attrs-32", 1);
    add_attrs(s, 29, NULL); /* type, uuid + 29 + memory = 32 */
    expect(s, NULL);
    s = base_slice("val-attrs-33", 1);
    json_object_del(json_object_get(dev0(s), "capacity"), "memory");
    add_attrs(s, 31, NULL);
    expect(s, INVALID("val-attrs-33") "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32");
    s = base_slice("val-attrs-31c2", 1);
    add_attrs(s, 29, "other");
    expect(s, INVALID("val-attrs-31c2") "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32");
    s = base_slice("val-upper", 1);
    json_object_set_new(dev0(s), "name", json_string("GPU-0"));
    expect(s, INVALID("val-upper") "spec.devices[0].name: Invalid value: \"GPU-0\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
    expect(with_attr(base_slice("val-2types", 1), "uuid", json_pack("{s:s, s:i}", "string", "GPU-0", "int", 1)),
           INVALID("val-2types") "spec.devices[0].attributes[uuid]: Invalid value: {\"IntValue\":1,\"BoolValue\":null,\"StringValue\":\"GPU-0\",\"VersionValue\":null}: exactly one value must be specified");
    expect(with_taints(base_slice("val-taints4", 1), 4, "NoSchedule"), NULL);
    expect(with_taints(base_slice("val-taints5", 1), 5, "NoSchedule"),
           INVALID("val-taints5") "spec.devices[0].taints: Too many: 5: must have at most 4 items");
    expect(with_taints(base_slice("val-taintnone", 1), 1, "None"),
           INVALID("val-taintnone") "spec.devices[0].taints[0].effect: Unsupported value: \"None\": supported values: \"NoExecute\", \"NoSchedule\"");
    s = base_slice("val-underscore", 1);
    json_object_set_new(dev0(s), "name", json_string("gpu_0"));
    expect(s, INVALID("val-underscore") "spec.devices[0].name: Invalid value: \"gpu_0\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
    s = base_slice("val-64", 1);
    json_object_set_new(dev0(s), "name", json_string("gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg"));
    expect(s, INVALID("val-64") "spec.devices[0].name: Invalid value: \"gggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggggg\": must be no more than 63 characters");
    expect(with_attr(base_slice("val-novalue", 1), "uuid", json_object()),
           INVALID("val-novalue") "spec.devices[0].attributes[uuid]: Required value: exactly one value must be specified");
    expect(with_attr(base_slice("val-name33", 1), "cudaComputeCapabilityMajorMinorXY", json_pack("{s:s}", "string", "x")),
           INVALID("val-name33") "spec.devices[0].attributes[cudaComputeCapabilityMajorMinorXY]: Too long: may not be more than 32 bytes");
    expect(with_attr(base_slice("val-name32", 1), "cudaComputeCapabilityMajorMinorX", json_pack("{s:s}", "string", "x")), NULL);
    expect(with_attr(base_slice("val-domain72", 1), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com/x", json_pack("{s:s}", "string", "x")),
           INVALID("val-domain72") "spec.devices[0].attributes[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com/x]: Too long: may not be more than 63 bytes");
    expect(with_attr(base_slice("val-str65", 1), "productName", json_pack("{s:s}", "string", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")),
           INVALID("val-str65") "spec.devices[0].attributes[productName].string: Too long: may not be more than 64 bytes");
    expect(with_attr(base_slice("val-ver2", 1), "driverVersion", json_pack("{s:s}", "version", "570.133")),
           INVALID("val-ver2") "spec.devices[0].attributes[driverVersion].version: Invalid value: \"570.133\": must be a string compatible with semver.org spec 2.0.0");
    expect(with_attr(base_slice("val-verv", 1), "driverVersion", json_pack("{s:s}", "version", "v570.133.20")),
           INVALID("val-verv") "spec.devices[0].attributes[driverVersion].version: Invalid value: \"v570.133.20\": must be a string compatible with semver.org spec 2.0.0");
    s = base_slice("val-dup", 2);
    json_object_set_new(json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 1), "name", json_string("gpu-0"));
    expect(s, INVALID("val-dup") "spec.devices[1].name: Duplicate value: \"gpu-0\"");
    s = base_slice("val-pool", 1);
    json_object_set_new(json_object_get(json_object_get(s, "spec"), "pool"), "name", json_string("Node-A"));
    expect(s, INVALID("val-pool") "spec.pool.name: Invalid value: \"Node-A\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
    s = base_slice("val-both", 1);
    json_object_set_new(json_object_get(s, "spec"), "allNodes", json_true());
    expect(s, INVALID("val-both") "spec: Invalid value: \"{`nodeName`, `allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set");
    s = base_slice("val-none", 1);
    json_object_del(json_object_get(s, "spec"), "nodeName");
    expect(s, INVALID("val-none") "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required");
    s = base_slice("val-count0", 1);
    json_object_set_new(json_object_get(json_object_get(s, "spec"), "pool"), "resourceSliceCount", json_integer(0));
    expect(s, INVALID("val-count0") "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero");
    /* accepted by the API server as well */
    expect(with_attr(base_slice("val-own-domain", 1), "gpu.nvidia.com/productName", json_pack("{s:s}", "string", "x")), NULL);

    /* partitionable devices and shares (1.36's rules) */
    s = base_slice("val-sets", 0);
    json_t *sets = json_array();
    for (int i = 0; i < 9; i++) {
        char sn[16];
        snprintf(sn, sizeof(sn), "gpu-%d", i);
        json_array_append_new(sets, json_pack("{s:s, s:{s:{s:s}}}", "name", sn, "counters",
                                              "memory", "value", "1"));
    }
    json_object_set_new(json_object_get(s, "spec"), "sharedCounters", sets);
    expect(s, INVALID("val-sets") "spec.sharedCounters: Too many: 9: must have at most 8 items");
    s = base_slice("val-set-empty", 0);
    json_object_set_new(json_object_get(s, "spec"), "sharedCounters",
                        json_pack("[{s:s, s:{}}, {s:s, s:{s:{s:s}}}]", "name", "a", "counters", "name",
                                  "a", "counters", "memory", "value", "1"));
    expect(s, INVALID("val-set-empty") "[spec.sharedCounters[0].counters: Required value, "
              "spec.sharedCounters[1].name: Duplicate value: \"a\"]");
    s = base_slice("val-consumes", 1);
    json_object_set_new(json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 0),
                        "consumesCounters",
                        json_pack("[{s:s, s:{s:{s:s}}}, {s:s, s:{s:{s:s}}}, {s:s, s:{}}]", "counterSet",
                                  "a", "counters", "memory", "value", "1", "counterSet", "a", "counters",
                                  "memory", "value", "1", "counterSet", "b", "counters"));
    expect(s, INVALID("val-consumes") "[spec.devices[0].consumesCounters: Too many: 3: must have at most 2 items, "
              "spec.devices[0].consumesCounters[1].counterSet: Duplicate value: \"a\", "
              "spec.devices[0].consumesCounters[2].counters: Required value]");
    s = base_slice("val-65", 65);
    json_object_set_new(json_array_get(json_object_get(json_object_get(s, "spec"), "devices"), 64),
                        "consumesCounters", json_pack("[{s:s, s:{s:{s:s}}}]", "counterSet", "a", "counters",
                                                      "memory", "value", "1"));
    expect(s, INVALID("val-65") "spec.devices: Too many: 65: must have at most 64 items");
    s = base_slice("val-policy", 1);
    json_object_set_new(json_object_get(json_object_get(json_array_get(json_object_get(json_object_get(s, "spec"),
                        "devices"), 0), "capacity"), "memory"), "requestPolicy", json_pack("{s:s}", "default", "1Gi"));
    expect(s, INVALID("val-policy") "spec.devices[0].capacity[memory].requestPolicy: Forbidden: allowMultipleAllocations must be true");
    expect(with_attr(base_slice("val-upper-domain", 1), "GPU.nvidia.com/productName", json_pack("{s:s}", "string", "x")), NULL);
    s = base_slice("val-negative", 1);
    json_object_set_new(json_object_get(json_object_get(dev0(s), "capacity"), "memory"), "value", json_string("-1"));
    expect(s, NULL);
    s = base_slice("val-driver-upper", 1);
    json_object_set_new(json_object_get(s, "spec"), "driver", json_string("GPU.nvidia.com"));
    expect(s, NULL);
    /* two causes: in brackets, as the API server joins them */
    s = base_slice("val-two", 1);
    json_object_set_new(dev0(s), "name", json_string("gpu_0"));
    json_object_set_new(json_object_get(json_object_get(s, "spec"), "pool"), "resourceSliceCount", json_integer(0));
    char *msg = NULL;
    CHECK(dra_slice_validate(s, NULL, &msg) == -EINVAL);
    CHECK(msg && strncmp(msg, INVALID("val-two") "[spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero, spec.devices[0].name: ", 140) == 0);
    CHECK(msg && msg[strlen(msg) - 1] == ']');
    free(msg);
    json_decref(s);
}

/* More than 128 devices: two slices, both counting two, devices in order. */
static void test_split(void)
{
    json_t *s = base_slice("x", 300);
    json_t *devices = json_object_get(json_object_get(s, "spec"), "devices");
    struct dra_slice_pool pool = { .driver = DRA_DRIVER_NAME, .node_name = "n1", .generation = 3 };
    json_t *slices = dra_slices_build(&pool, devices);
    CHECK(json_array_size(slices) == 3);
    size_t total = 0;
    for (size_t i = 0; i < json_array_size(slices); i++) {
        json_t *one = json_array_get(slices, i), *spec = json_object_get(one, "spec");
        CHECK(json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")) == 3);
        CHECK(json_integer_value(json_object_get(json_object_get(spec, "pool"), "generation")) == 3);
        CHECK(json_object_get(json_object_get(one, "metadata"), "ownerReferences") == NULL);
        CHECK_STR(json_string_value(json_object_get(json_object_get(one, "metadata"), "generateName")),
                  "n1-gpu.nvidia.com-");
        json_t *d = json_object_get(spec, "devices");
        CHECK(json_equal(json_array_get(d, 0), json_array_get(devices, total)));
        total += json_array_size(d);
        char *msg = NULL;
        CHECK(dra_slice_validate(one, "x", &msg) == 0);
    }
    CHECK(total == 300);
    json_decref(slices);
    /* no devices: still one slice, so the pool exists */
    json_t *empty = json_array();
    slices = dra_slices_build(&pool, empty);
    CHECK(json_array_size(slices) == 1 &&
          json_array_size(json_object_get(json_object_get(json_array_get(slices, 0), "spec"), "devices")) == 0);
    json_decref(slices);
    json_decref(empty);
    json_decref(s);
}

static const char *source_dir;

static void case_names(void)
{
    test_names();
    test_versions();
}

static void case_mig(void) { test_mig(source_dir); }
static void case_slice_8gpu(void) { test_slice_8gpu(source_dir, getenv("GDP_TEST_DATA")); }

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "names", case_names },
        { "mig", case_mig },
        { "slice-8gpu", case_slice_8gpu },
        { "validate", test_validate },
        { "split", test_split },
    };
    if (!(source_dir = getenv("GDP_SOURCE_DIR"))) {
        fprintf(stderr, "GDP_SOURCE_DIR not set (run it through meson test)\n");
        return 1;
    }
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
