/* DynamicMIG against the simulated NVML (MOCK_NVML_STATE: state shared as a host's):
 * what a carved GPU publishes (NVIDIA's names, counters, consumption, the split layout,
 * valid), MIG devices made and destroyed in random order with NVML's state checked after
 * every step, overlaps refused by the GPU, Hopper's MIG mode switched on by the first and
 * off after the last, and the start-up sweep (a killed run's device destroyed, someone
 * else's left). One case per process: the simulated library reads its profile once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra-checkpoint.h"
#include "dra/dra-devices.h"
#include "dra/dra-mig.h"
#include "dra/dra-slice.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "tests/common/cases.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"

int test_failures;
static const char *source_dir;
static struct inventory inv;
static struct dra_device_set set;

/* The node of sim/profiles/dynamic/<profile> with DynamicMIG on, its state in a new file. */
static int node(const char *profile)
{
    char path[4096], state[4096];
    struct error err = { 0 };
    snprintf(path, sizeof(path), "%s/sim/profiles/dynamic/%s", source_dir, profile);
    snprintf(state, sizeof(state), "%s/mig-state", scratch_dir("gdp-mig-"));
    setenv("MOCK_NVML_CONFIG", fixture_check(path), 1);
    setenv("MOCK_NVML_STATE", state, 1);
    memset(&inv, 0, sizeof(inv));
    struct discover_options opt = { .sysfs_root = "/nonexistent", .with_mig = true,
                                    .with_mig_profiles = true };
    if (nvml_open("/", &err) < 0 || discover_node(&opt, &inv, &err) < 0 ||
        dra_devices_build(&inv, NULL, &set, &err) < 0) {
        fprintf(stderr, "%s: %s\n", profile, err.msg);
        test_failures++;
        return -1;
    }
    return 0;
}

static const struct dra_device *device(const char *name)
{
    const struct dra_device *d = dra_devices_find(&set, name);
    if (!d)
        fprintf(stderr, "no device %s\n", name);
    CHECK(d != NULL);
    return d;
}

static unsigned live_count(size_t gpu)
{
    nvml_device dev;
    struct nvml_mig_live live[16];
    unsigned n = 0;
    struct error err = { 0 };
    CHECK(nvml_device_by_uuid(inv.gpus[gpu].uuid, &dev, &err) == 0);
    CHECK(nvml_device_mig_list(dev, live, 16, &n, &err) == 0);
    return n;
}

static bool mig_on(size_t gpu)
{
    nvml_device dev;
    bool cur = false, pend = false;
    struct error err = { 0 };
    CHECK(nvml_device_by_uuid(inv.gpus[gpu].uuid, &dev, &err) == 0);
    CHECK(nvml_device_mig_modes(dev, &cur, &pend, &err) == 0);
    return cur;
}

static json_t *counter(json_t *counters, const char *name)
{
    return json_object_get(json_object_get(counters, name), "value");
}

/* Ampere, MIG on: no full GPU, 25 placements (NVIDIA's worked example), the counter set,
 * the split layout, every slice valid. */
static void case_publish_a100(void)
{
    if (node("a100-40gb-mig-empty.yaml") < 0)
        return;
    CHECK(set.n == 25);
    CHECK(dra_devices_find(&set, "gpu-0") == NULL);
    CHECK_STR(set.devices[0].name, "gpu-0-mig-1g10gb-15-0");
    CHECK_STR(set.devices[24].name, "gpu-0-mig-7g40gb-0-0");
    device("gpu-0-mig-1g5gb-19-6");
    device("gpu-0-mig-1g5gb-me-20-0");
    device("gpu-0-mig-3g20gb-9-4");
    CHECK(dra_devices_find(&set, "gpu-0-mig-3g20gb-9-2") == NULL);
    json_t *sets = dra_slice_counter_sets(&inv, &set);
    CHECK(json_array_size(sets) == 1);
    json_t *cs = json_array_get(sets, 0);
    CHECK_STR(json_string_value(json_object_get(cs, "name")), "gpu-0-counter-set");
    json_t *c = json_object_get(cs, "counters");
    CHECK(json_object_size(c) == 15);
    CHECK_STR(json_string_value(counter(c, "multiprocessors")), "98");
    CHECK_STR(json_string_value(counter(c, "encoders")), "0");
    CHECK_STR(json_string_value(counter(c, "memory-slice-7")), "1");
    json_t *devices = dra_slice_devices(&inv, &set);
    const struct dra_device *d3 = device("gpu-0-mig-3g20gb-9-4");
    json_t *e = json_array_get(devices, (size_t)(d3 - set.devices));
    json_t *use = json_array_get(json_object_get(e, "consumesCounters"), 0);
    CHECK_STR(json_string_value(json_object_get(use, "counterSet")), "gpu-0-counter-set");
    json_t *uc = json_object_get(use, "counters");
    CHECK(json_object_size(uc) == 11); /* 7 capacities + slices 4..7 */
    CHECK(counter(uc, "memory-slice-4") && !counter(uc, "memory-slice-3"));
    CHECK(json_object_get(json_object_get(e, "attributes"), "uuid") == NULL);
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(e, "attributes"),
                                                                "profile"), "string")), "3g.20gb");
    struct dra_slice_pool pool = { .driver = "gpu.nvidia.com", .node_name = "node-a",
                                   .generation = 1, .counter_sets = sets };
    json_t *slices = dra_slices_build(&pool, devices), *s;
    CHECK(json_array_size(slices) == 2);
    json_t *s0 = json_object_get(json_array_get(slices, 0), "spec");
    CHECK(json_array_size(json_object_get(s0, "sharedCounters")) == 1 && !json_object_get(s0, "devices"));
    CHECK(json_array_size(json_object_get(json_object_get(json_array_get(slices, 1), "spec"), "devices")) == 25);
    size_t i;
    json_array_foreach (slices, i, s) {
        char *msg = NULL;
        CHECK(json_integer_value(json_object_get(json_object_get(json_object_get(s, "spec"), "pool"),
                                                 "resourceSliceCount")) == 2);
        if (dra_slice_validate(s, "x", &msg) < 0) {
            fprintf(stderr, "slice %zu invalid: %s\n", i, msg);
            test_failures++;
        }
        free(msg);
    }
    /* before 1.35: one slice holding the set and its devices */
    pool.combined = true;
    json_t *old = dra_slices_build(&pool, devices);
    CHECK(json_array_size(old) == 1);
    json_t *o0 = json_object_get(json_array_get(old, 0), "spec");
    CHECK(json_array_size(json_object_get(o0, "sharedCounters")) == 1 &&
          json_array_size(json_object_get(o0, "devices")) == 25);
    json_decref(old);
    json_decref(slices);
    json_decref(devices);
    json_decref(sets);
}

/* Hopper, MIG off: the full GPU first, consuming every counter; 8 GPUs: 8 sets in one
 * counters slice, then a slice per GPU (9 slices). */
static void case_publish_h100(void)
{
    if (node("h100-8-mig-off.yaml") < 0)
        return;
    CHECK(set.n == 8 * 26);
    CHECK_STR(set.devices[0].name, "gpu-0");
    CHECK(set.devices[0].counters);
    json_t *devices = dra_slice_devices(&inv, &set), *sets = dra_slice_counter_sets(&inv, &set);
    json_t *full = json_array_get(devices, 0);
    json_t *uc = json_object_get(json_array_get(json_object_get(full, "consumesCounters"), 0), "counters");
    CHECK(json_object_size(uc) == 15);
    CHECK(json_equal(uc, json_object_get(json_array_get(sets, 0), "counters")));
    CHECK_STR(json_string_value(counter(json_object_get(full, "capacity"), "multiprocessors")), "132");
    struct dra_slice_pool pool = { .driver = "gpu.nvidia.com", .node_name = "node-a",
                                   .generation = 1, .counter_sets = sets };
    json_t *slices = dra_slices_build(&pool, devices), *s;
    CHECK(json_array_size(slices) == 9);
    size_t i;
    json_array_foreach (slices, i, s) {
        char *msg = NULL;
        if (dra_slice_validate(s, "x", &msg) < 0) {
            fprintf(stderr, "slice %zu invalid: %s\n", i, msg);
            test_failures++;
        }
        free(msg);
    }
    /* nine sets (a 9-GPU node NVIDIA cannot publish): two counters-only slices */
    json_array_append_new(sets, json_pack("{s:s, s:O}", "name", "gpu-8-counter-set", "counters",
                                          json_object_get(json_array_get(sets, 0), "counters")));
    json_t *more = dra_slices_build(&pool, devices);
    CHECK(json_array_size(json_object_get(json_object_get(json_array_get(more, 0), "spec"), "sharedCounters")) == 8);
    CHECK(json_array_size(json_object_get(json_object_get(json_array_get(more, 1), "spec"), "sharedCounters")) == 1);
    json_decref(more);
    json_decref(slices);
    json_decref(devices);
    json_decref(sets);
}

/* A vGPU guest's GPU (virtualization mode VGPU) is left out as NVIDIA leaves it: no
 * profiles read, its full GPU plain (no counters), no placement, no counter set; the
 * other H100 carved as usual. */
static void case_publish_vgpu_guest(void)
{
    if (node("h100-vgpu-guest.yaml") < 0)
        return;
    CHECK(inv.n_gpus == 2);
    CHECK(inv.gpus[1].mig_capable && inv.gpus[1].n_mig_profiles == 0);
    CHECK(dra_mig_gpu_dynamic(&inv.gpus[0]) && !dra_mig_gpu_dynamic(&inv.gpus[1]));
    CHECK(set.n == 26 + 1);
    const struct dra_device *g1 = device("gpu-1");
    CHECK(g1 && g1->type == DRA_DEVICE_GPU && !g1->counters);
    CHECK(device("gpu-0") && device("gpu-0")->counters);
    for (size_t i = 0; i < set.n; i++)
        CHECK(set.devices[i].type != DRA_DEVICE_MIG_PLACEMENT || set.devices[i].gpu == 0);
    json_t *sets = dra_slice_counter_sets(&inv, &set);
    CHECK(json_array_size(sets) == 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(sets, 0), "name")), "gpu-0-counter-set");
    json_t *devices = dra_slice_devices(&inv, &set);
    json_t *e = json_array_get(devices, (size_t)(g1 - set.devices));
    CHECK(json_object_get(e, "consumesCounters") == NULL);
    json_t *caps = json_object_get(e, "capacity");
    CHECK(json_object_size(caps) == 1 && json_object_get(caps, "memory"));
    json_decref(devices);
    json_decref(sets);
}

/* All seven 1g placements of an A100 made and destroyed in random order; the GPU's state
 * checked after every step; an overlapping placement refused by the GPU. */
static void case_carve_a100(void)
{
    if (node("a100-40gb-mig-empty.yaml") < 0)
        return;
    unsigned order[7] = { 0, 1, 2, 3, 4, 5, 6 };
    struct inv_mig made[7];
    struct error err = { 0 };
    srand(getpid());
    for (unsigned i = 6; i > 0; i--) {
        unsigned j = (unsigned)rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (unsigned k = 0; k < 7; k++) {
        char name[64];
        snprintf(name, sizeof(name), "gpu-0-mig-1g5gb-19-%u", order[k]);
        const struct dra_device *d = device(name);
        if (!d)
            return;
        CHECK(dra_mig_create(&inv, d, "/nonexistent", &made[order[k]], &err) == 0);
        CHECK(strncmp(made[order[k]].uuid, "MIG-", 4) == 0);
        CHECK(made[order[k]].placement_start == order[k]);
        CHECK(live_count(0) == k + 1);
        /* the 2-slice profile over the slice just taken: the GPU refuses it */
        char over[64];
        snprintf(over, sizeof(over), "gpu-0-mig-1g10gb-15-%u", order[k] & ~1u);
        struct inv_mig x;
        struct error e2 = { 0 };
        CHECK(dra_mig_create(&inv, device(over), "/nonexistent", &x, &e2) == -EBUSY);
        CHECK(live_count(0) == k + 1);
    }
    for (unsigned i = 6; i > 0; i--) {
        unsigned j = (unsigned)rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (unsigned k = 0; k < 7; k++) {
        struct inv_mig *m = &made[order[k]];
        CHECK(dra_mig_destroy(&inv.gpus[0], m->gi_id, m->uuid, &err) == 0);
        CHECK(live_count(0) == 6 - k);
        /* destroyed already: nothing to do */
        CHECK(dra_mig_destroy(&inv.gpus[0], m->gi_id, m->uuid, &err) == 0);
    }
    CHECK(mig_on(0)); /* Ampere: never switched */
}

/* Hopper: the first MIG device switches MIG mode on, the last one's end switches it off;
 * a device someone else made in place of ours is not destroyed. */
static void case_hopper_mode(void)
{
    if (node("h100-1-mig-off.yaml") < 0)
        return;
    struct error err = { 0 };
    struct inv_mig a, b;
    CHECK(!mig_on(0));
    CHECK(dra_mig_create(&inv, device("gpu-0-mig-3g40gb-9-4"), "/nonexistent", &a, &err) == 0);
    CHECK(mig_on(0));
    CHECK(dra_mig_create(&inv, device("gpu-0-mig-2g20gb-14-0"), "/nonexistent", &b, &err) == 0);
    CHECK(live_count(0) == 2);
    /* ours destroyed by someone, another made at its GPU instance id: not ours */
    nvml_device dev;
    CHECK(nvml_device_by_uuid(inv.gpus[0].uuid, &dev, &err) == 0);
    CHECK(nvml_mig_destroy(dev, b.gi_id, NULL, &err) == 0);
    struct nvml_mig_live other;
    CHECK(nvml_mig_create(dev, inv.gpus[0].mig_profiles[0].index, (struct nvml_placement){ 0, 1 },
                          &other, &err) == 0);
    if (other.gi_id == b.gi_id) {
        CHECK(dra_mig_destroy(&inv.gpus[0], b.gi_id, b.uuid, &err) == 0);
        CHECK(live_count(0) == 2); /* left alone */
    }
    CHECK(nvml_mig_destroy(dev, other.gi_id, NULL, &err) == 0);
    CHECK(dra_mig_destroy(&inv.gpus[0], a.gi_id, a.uuid, &err) == 0);
    CHECK(live_count(0) == 0);
    CHECK(!mig_on(0));
}

/* At start: the device of a PrepareStarted record goes, a completed claim's stays, one
 * nothing names stays (someone else's). */
static void case_sweep(void)
{
    if (node("a100-40gb-mig-empty.yaml") < 0)
        return;
    struct error err = { 0 };
    struct inv_mig started, done, foreign;
    CHECK(dra_mig_create(&inv, device("gpu-0-mig-1g5gb-19-0"), "/nonexistent", &started, &err) == 0);
    CHECK(dra_mig_create(&inv, device("gpu-0-mig-1g5gb-19-1"), "/nonexistent", &done, &err) == 0);
    CHECK(dra_mig_create(&inv, device("gpu-0-mig-1g5gb-19-2"), "/nonexistent", &foreign, &err) == 0);
    struct dra_ckpt_device d1 = { .device = "gpu-0-mig-1g5gb-19-0" };
    struct dra_ckpt_device d2 = { .device = "gpu-0-mig-1g5gb-19-1",
                                  .mig = { .parent_uuid = inv.gpus[0].uuid, .uuid = done.uuid,
                                           .gi_id = done.gi_id, .ci_id = done.ci_id } };
    struct dra_ckpt_claim claims[2] = {
        { .uid = "u1", .state = DRA_CKPT_PREPARE_STARTED, .devices = &d1, .n_devices = 1 },
        { .uid = "u2", .state = DRA_CKPT_PREPARE_COMPLETED, .devices = &d2, .n_devices = 1 },
    };
    struct dra_checkpoint ckpt = { .claims = claims, .n_claims = 2 };
    dra_mig_sweep(&inv, &set, &ckpt);
    CHECK(live_count(0) == 2);
    nvml_device dev;
    CHECK(nvml_device_by_uuid(inv.gpus[0].uuid, &dev, &err) == 0);
    struct nvml_mig_live live[8];
    unsigned n = 0;
    CHECK(nvml_device_mig_list(dev, live, 8, &n, &err) == 0);
    for (unsigned i = 0; i < n; i++)
        CHECK(streq(live[i].uuid, done.uuid) || streq(live[i].uuid, foreign.uuid));
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "publish-a100", case_publish_a100 }, { "publish-h100", case_publish_h100 },
        { "carve-a100", case_carve_a100 },     { "hopper-mode", case_hopper_mode },
        { "sweep", case_sweep },               { "publish-vgpu-guest", case_publish_vgpu_guest },
    };
    if (!(source_dir = getenv("GDP_SOURCE_DIR"))) {
        fprintf(stderr, "GDP_SOURCE_DIR is not set\n");
        return 2;
    }
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
