/* GPU shares (consumable capacity): the shared GPU's slice entry (allowMultipleAllocations,
 * memory and compute with their request policies, valid), a share's record from its
 * allocation (shareID, consumedCapacity or the defaults, refused when it is no share the
 * device offers), never more shares than a device holds (memory and compute, across
 * claims), and the spec: one CDI device per share, the MPS client limits claim-wide, the
 * shared edits untouched. On the simulated 1 x H100 80GB (MIG off); static MIG devices on
 * four A100s (`mig`); every profile the simulator has (`sweep`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra-shares.h"
#include "dra/dra-slice.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "tests/common/cases.h"
#include "tests/common/fixture.h"

int test_failures;
static struct inventory inv;
static struct dra_device_set set;
static const struct dra_share_policy policy = { .memory_step = 1ULL << 30, .memory_default = 0,
                                                .compute_default = 10 };

/* profile's node (with DynamicMIG's placements where dynamic says so), shared by policy */
static int load_as(const char *profile, bool dynamic)
{
    char path[4096];
    struct error err = { 0 };
    snprintf(path, sizeof(path), "%s/sim/profiles/%s", getenv("GDP_SOURCE_DIR"), profile);
    setenv("MOCK_NVML_CONFIG", fixture_check(path), 1);
    dra_device_set_clear(&set);
    inventory_clear(&inv);
    struct discover_options opt = { .sysfs_root = "/nonexistent", .with_mig = true,
                                    .with_mig_profiles = dynamic };
    if (nvml_open("/", &err) < 0 || discover_node(&opt, &inv, &err) < 0 ||
        dra_devices_build(&inv, NULL, &set, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    dra_devices_offer_shares(&set, &inv, &policy);
    return 0;
}

static int load(const char *profile)
{
    return load_as(profile, false);
}

/* The slices of node n1 holding devices (and counter sets, or NULL), each checked against
 * the 1.36 rules as the API server checks them (a failure said on stderr, as what); *n: how
 * many there are. */
static bool slices_valid(json_t *devices, json_t *counters, const char *what, size_t *n)
{
    struct dra_slice_pool pool = { .driver = "gpu.nvidia.com", .node_name = "n1", .generation = 1,
                                   .counter_sets = counters };
    json_t *slices = dra_slices_build(&pool, devices), *sl;
    bool ok = true;
    size_t i;
    json_array_foreach (slices, i, sl) {
        char *msg = NULL;
        if (dra_slice_validate(sl, what, &msg) < 0) {
            fprintf(stderr, "%s: %s\n", what, msg);
            ok = false;
        }
        free(msg);
    }
    if (n)
        *n = json_array_size(slices);
    json_decref(slices);
    return ok;
}

static int node(void)
{
    return load("dynamic/h100-1-mig-off.yaml") == 0 && set.n == 1 && set.devices[0].shared ? 0 : -1;
}

static void case_publish(void)
{
    CHECK(node() == 0);
    json_t *e = dra_slice_device(&inv, &set.devices[0]);
    CHECK(json_is_true(json_object_get(e, "allowMultipleAllocations")));
    json_t *caps = json_object_get(e, "capacity");
    CHECK_STR(json_string_value(json_object_get(json_object_get(caps, "memory"), "value")), "80Gi");
    json_t *mp = json_object_get(json_object_get(caps, "memory"), "requestPolicy");
    CHECK_STR(json_string_value(json_object_get(mp, "default")), "80Gi");
    CHECK_STR(json_string_value(json_object_get(json_object_get(mp, "validRange"), "min")), "1Gi");
    CHECK_STR(json_string_value(json_object_get(json_object_get(mp, "validRange"), "max")), "80Gi");
    CHECK_STR(json_string_value(json_object_get(json_object_get(mp, "validRange"), "step")), "1Gi");
    json_t *cp = json_object_get(json_object_get(caps, "compute"), "requestPolicy");
    CHECK_STR(json_string_value(json_object_get(json_object_get(caps, "compute"), "value")), "100");
    CHECK_STR(json_string_value(json_object_get(cp, "default")), "10");
    json_t *devices = json_pack("[o]", e);
    CHECK(slices_valid(devices, NULL, "x", NULL));
    json_decref(devices);
    /* a grid the memory is not a multiple of: max and default on it */
    struct dra_share_grid q;
    struct dra_share_policy odd = { .memory_step = 3ULL << 30, .memory_default = 4ULL << 30 };
    dra_share_grid(inv.gpus[0].memory_bytes, &odd, &q);
    CHECK(q.min == 3ULL << 30 && q.max == 78ULL << 30 && q.def == 6ULL << 30 && q.capacity == 80ULL << 30);
}

static struct dra_alloc alloc(const char *share, int64_t mem, int64_t comp)
{
    return (struct dra_alloc){ .device = "gpu-0", .share_id = (char *)share, .memory = mem,
                               .compute = comp };
}

static void case_record(void)
{
    CHECK(node() == 0);
    struct error err = { 0 };
    struct dra_ckpt_device r = { 0 };
    struct dra_alloc a = alloc("6f1c2a9e-0b7d-4c3e-9a58-1d2e3f405162", 8LL << 30, 25);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == 0);
    CHECK_STR(r.share_id, a.share_id);
    CHECK(r.share_memory == 8ULL << 30 && r.share_compute == 25);
    free(r.share_id);
    r = (struct dra_ckpt_device){ 0 };
    a = alloc("s1", -1, -1); /* nothing accounted: the policy's defaults */
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == 0);
    CHECK(r.share_memory == 80ULL << 30 && r.share_compute == 10);
    free(r.share_id);
    r = (struct dra_ckpt_device){ 0 };
    a = alloc(NULL, -1, -1);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "carries no shareID");
    a = alloc("s1", (8LL << 30) + 1, 10);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    a = alloc("s1", 81LL << 30, 10);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    a = alloc("s1", 8LL << 30, 101);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    a = alloc("s1", 8LL << 30, 0);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    set.devices[0].shared = false;
    a = alloc("s1", 8LL << 30, 10);
    CHECK(dra_shares_record(&inv, &set.devices[0], &a, &r, &err) == -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "not offered as shares");
}

/* ten 8Gi shares of 10% fill an 80 GiB GPU; the eleventh is refused, whichever claim it is in */
static void case_fit(void)
{
    CHECK(node() == 0);
    struct error err = { 0 };
    struct dra_ckpt_device devs[11];
    struct dra_ckpt_claim claims[11];
    char uids[11][8], shares[11][8];
    for (int i = 0; i < 11; i++) {
        snprintf(uids[i], sizeof(uids[i]), "u%d", i);
        snprintf(shares[i], sizeof(shares[i]), "s%d", i);
        devs[i] = (struct dra_ckpt_device){ .device = "gpu-0", .share_id = shares[i],
                                            .share_memory = 8ULL << 30, .share_compute = 10 };
        claims[i] = (struct dra_ckpt_claim){ .uid = uids[i], .devices = &devs[i], .n_devices = 1 };
    }
    struct dra_checkpoint ckpt = { .claims = claims, .n_claims = 9 };
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &claims[9], &err) == 0);
    ckpt.n_claims = 10;
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &claims[9], &err) == 0); /* its own record */
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &claims[10], &err) == -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "90112 MiB");
    CHECK_STR_CONTAINS(err.msg, "of its 81920 MiB");
    /* compute alone: 9 shares of 1Gi at 10% and one at 20% */
    for (int i = 0; i < 11; i++)
        devs[i].share_memory = 1ULL << 30;
    devs[10].share_compute = 20;
    ckpt.n_claims = 9;
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &claims[10], &err) == -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "110%");
    /* two shares of one device in one claim count together */
    struct dra_ckpt_device two[2] = {
        { .device = "gpu-0", .share_id = "a", .share_memory = 40ULL << 30, .share_compute = 50 },
        { .device = "gpu-0", .share_id = "b", .share_memory = 41ULL << 30, .share_compute = 50 },
    };
    struct dra_ckpt_claim c2 = { .uid = "u2x", .devices = two, .n_devices = 2 };
    ckpt.n_claims = 0;
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &c2, &err) == -ENOSPC);
    two[1].share_memory = 40ULL << 30;
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &c2, &err) == 0);
}

static void case_spec(void)
{
    CHECK(node() == 0);
    json_t *common = json_pack("{s:[s]}", "env", "NVIDIA_VISIBLE_DEVICES=void");
    json_t *spec = json_pack("{s:[{s:s, s:{s:[s]}}], s:O}", "devices", "name", "u1-gpu-0",
                             "containerEdits", "env", "X=1", "containerEdits", common);
    struct dra_ckpt_device two[2] = {
        { .device = "gpu-0", .share_id = "a", .share_memory = 8ULL << 30, .share_compute = 25 },
        { .device = "gpu-0", .share_id = "b", .share_memory = 4ULL << 30, .share_compute = 10 },
    };
    struct dra_ckpt_claim rec = { .uid = "u1", .devices = two, .n_devices = 2 };
    dra_shares_spec(spec, NULL, &inv, &set, &rec);
    json_t *devices = json_object_get(spec, "devices");
    CHECK(json_array_size(devices) == 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(devices, 0), "name")), "u1-gpu-0-a");
    CHECK_STR(json_string_value(json_object_get(json_array_get(devices, 1), "name")), "u1-gpu-0-b");
    _cleanup_free_ char *env = json_dumps(json_object_get(json_object_get(spec, "containerEdits"), "env"), 0);
    CHECK_STR_CONTAINS(env, "\"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12288M\"");
    CHECK_STR_CONTAINS(env, "\"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=10\"");
    CHECK_STR_CONTAINS(env, "\"CUDA_DEVICE_ORDER=PCI_BUS_ID\"");
    CHECK_STR_CONTAINS(env, "\"NVIDIA_VISIBLE_DEVICES=void\"");
    CHECK(json_array_size(json_object_get(common, "env")) == 1); /* the shared edits untouched */
    json_decref(spec);
    json_decref(common);
}

static const struct dra_device *device(const char *prefix)
{
    for (size_t i = 0; i < set.n; i++)
        if (strncmp(set.devices[i].name, prefix, strlen(prefix)) == 0)
            return &set.devices[i];
    return NULL;
}

/* Static MIG devices (four A100 40GB, two with MIG devices): each offered as shares of its
 * own memory, as a full GPU is, except a compute instance narrower than its GPU instance;
 * the share's MPS daemon is the MIG device's; the limits keyed per device. */
static void case_mig(void)
{
    CHECK(load("a100-mig-mixed.yaml") == 0);
    const struct dra_device *g0 = device("gpu-0"), *big = device("gpu-2-mig-3g20gb-"),
                            *ci = device("gpu-2-mig-1c2g10gb-"), *small = device("gpu-3-mig-1g5gb-");
    CHECK(g0 && big && ci && small);
    if (!g0 || !big || !ci || !small)
        return;
    CHECK(g0->shared && big->shared && small->shared && !ci->shared);
    json_t *e = dra_slice_device(&inv, big);
    CHECK(json_is_true(json_object_get(e, "allowMultipleAllocations")));
    json_t *caps = json_object_get(e, "capacity"), *attrs = json_object_get(e, "attributes");
    CHECK(json_object_size(caps) == 2); /* no engines, SMs or memory slices: each share would take them whole */
    CHECK_STR(json_string_value(json_object_get(json_object_get(caps, "memory"), "value")), "20096Mi");
    json_t *vr = json_object_get(json_object_get(json_object_get(caps, "memory"), "requestPolicy"), "validRange");
    CHECK_STR(json_string_value(json_object_get(vr, "max")), "19Gi");
    CHECK_STR(json_string_value(json_object_get(json_object_get(caps, "compute"), "value")), "100");
    CHECK_STR(json_string_value(json_object_get(json_object_get(attrs, "type"), "string")), "mig");
    CHECK_STR(json_string_value(json_object_get(json_object_get(attrs, "uuid"), "string")),
              "MIG-3a3a3a3a-0000-0000-0000-000000000001");
    json_t *devices = json_pack("[o, o]", e, dra_slice_device(&inv, ci));
    CHECK(!json_object_get(json_array_get(devices, 1), "allowMultipleAllocations"));
    CHECK(slices_valid(devices, NULL, "x", NULL));
    json_decref(devices);

    /* record and fit against the MIG device's 20096 MiB */
    struct error err = { 0 };
    struct dra_ckpt_device r = { 0 };
    struct dra_alloc a = { .device = (char *)big->name, .share_id = "s1", .memory = 20LL << 30, .compute = 10 };
    CHECK(dra_shares_record(&inv, big, &a, &r, &err) == -EINVAL); /* past its 19Gi */
    a.memory = -1;
    CHECK(dra_shares_record(&inv, big, &a, &r, &err) == 0 && r.share_memory == 19ULL << 30);
    free(r.share_id);
    struct dra_ckpt_device two[2] = {
        { .device = (char *)big->name, .share_id = "a", .share_memory = 10ULL << 30, .share_compute = 50 },
        { .device = (char *)big->name, .share_id = "b", .share_memory = 10ULL << 30, .share_compute = 50 },
    };
    struct dra_ckpt_claim c2 = { .uid = "u2", .devices = two, .n_devices = 2 };
    struct dra_checkpoint ckpt = { 0 };
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &c2, &err) == -ENOSPC);
    CHECK_STR_CONTAINS(err.msg, "20480 MiB of its 20096 MiB");
    two[1].share_memory = 9ULL << 30;
    CHECK(dra_shares_fit(&inv, &set, &ckpt, &c2, &err) == 0);

    /* its daemon: the MIG device's, a MigDeviceConfig */
    struct dra_config cfg;
    dra_shares_mps(&inv, big, dra_device_uuid(&inv, big), "u2", &two[0], &cfg);
    CHECK(cfg.kind == DRA_CONFIG_MIG && cfg.sharing == DRA_SHARING_MPS && cfg.mps.n_group == 1);
    CHECK_STR(cfg.mps.group[0], "MIG-3a3a3a3a-0000-0000-0000-000000000001");
    CHECK(dra_shares_mps_id_valid(cfg.mps.id) && !cfg.mps.ns[0]); /* driver 550: no v3 */
    struct dra_config gcfg;
    dra_shares_mps(&inv, g0, dra_device_uuid(&inv, g0), "u2", &two[0], &gcfg);
    CHECK(gcfg.kind == DRA_CONFIG_GPU && !streq(gcfg.mps.id, cfg.mps.id));

    /* a claim with a share of a MIG device of gpu-3 (bus 4E), gpu-2 (bus 47) and gpu-0:
     * one limit per device, in PCI bus order */
    _cleanup_free_ char *n0 = xasprintf("u3-%s", g0->name), *n1 = xasprintf("u3-%s", big->name),
                        *n2 = xasprintf("u3-%s", small->name);
    json_t *spec = json_pack("{s:[{s:s, s:{}}, {s:s, s:{}}, {s:s, s:{}}]}", "devices", "name", n2,
                             "containerEdits", "name", n1, "containerEdits", "name", n0, "containerEdits");
    struct dra_ckpt_device three[3] = {
        { .device = (char *)small->name, .share_id = "c", .share_memory = 1ULL << 30, .share_compute = 10 },
        { .device = (char *)big->name, .share_id = "b", .share_memory = 2ULL << 30, .share_compute = 10 },
        { .device = (char *)g0->name, .share_id = "a", .share_memory = 3ULL << 30, .share_compute = 10 },
    };
    struct dra_ckpt_claim rec = { .uid = "u3", .devices = three, .n_devices = 3 };
    dra_shares_spec(spec, NULL, &inv, &set, &rec);
    CHECK(json_array_size(json_object_get(spec, "devices")) == 3);
    _cleanup_free_ char *env = json_dumps(json_object_get(json_object_get(spec, "containerEdits"), "env"), 0);
    CHECK_STR_CONTAINS(env, "\"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=3072M,1=2048M,2=1024M\"");
    json_decref(spec);
}

/* `sweep <profile>`: every profile the simulator has, under policies whose step divides no
 * device's memory, exceeds some or all of them, and whose default is off the grid or past
 * the device: every shared device's policy on its grid within its memory, no device smaller
 * than a step shared, and the node's slices valid under the 1.36 rules as the API server
 * checks them (dra_slice_validate). */
static const char *sweep_profile;
static void sweep(bool dynamic);

static void case_sweep(void)
{
    for (int dynamic = 0; dynamic < 2; dynamic++)
        sweep(dynamic);
}

static void sweep(bool dynamic)
{
    CHECK(sweep_profile && load_as(sweep_profile, dynamic) == 0);
    static const struct dra_share_policy policies[] = {
        { .memory_step = 1ULL << 30, .compute_default = 10 },
        { .memory_step = 3ULL << 30, .memory_default = 5ULL << 30, .compute_default = 100 },
        { .memory_step = 768ULL << 20, .memory_default = 1ULL << 40, .compute_default = 1 },
        { .memory_step = 20ULL << 30, .memory_default = 1ULL << 20, .compute_default = 50 },
        { .memory_step = 1ULL << 40 },
    };
    for (size_t k = 0; k < ELEMENTSOF(policies); k++) {
        const struct dra_share_policy *p = &policies[k];
        dra_devices_offer_shares(&set, &inv, p);
        size_t shared = 0, placements = 0;
        for (size_t i = 0; i < set.n; i++) {
            const struct dra_device *d = &set.devices[i];
            uint64_t mem = dra_device_memory(&inv, d);
            if (!d->shared)
                continue;
            shared++;
            struct dra_share_grid q;
            dra_share_grid(mem, p, &q);
            CHECK(mem >= p->memory_step && q.capacity <= mem);
            CHECK(q.min == p->memory_step && q.min <= q.def && q.def <= q.max && q.max <= q.capacity);
            CHECK((q.def - q.min) % q.step == 0 && (q.max - q.min) % q.step == 0);
            CHECK(d->type != DRA_DEVICE_MIG || inv.gpus[d->gpu].migs[d->mig].ci_slices ==
                                                   inv.gpus[d->gpu].migs[d->mig].gi_slices);
            placements += d->type == DRA_DEVICE_MIG_PLACEMENT;
        }
        /* DynamicMIG: every placement at least one step large is shared */
        for (size_t i = 0; i < set.n; i++)
            if (set.devices[i].type == DRA_DEVICE_MIG_PLACEMENT)
                CHECK(set.devices[i].shared == (dra_device_memory(&inv, &set.devices[i]) >= p->memory_step));
        json_t *devices = dra_slice_devices(&inv, &set);
        json_t *counters = dra_slice_counter_sets(&inv, &set);
        char what[300];
        size_t n_slices = 0;
        snprintf(what, sizeof(what), "%s%s, policy %zu", sweep_profile,
                 dynamic ? " (DynamicMIG)" : "", k);
        CHECK(slices_valid(devices, counters, what, &n_slices));
        printf("%s: %zu of %zu devices shared (%zu placements), %zu slice(s) valid\n", what,
               shared, set.n, placements, n_slices);
        if (p->memory_step >= 1ULL << 40)
            CHECK(shared == 0);
        json_decref(counters);
        json_decref(devices);
    }
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "publish", case_publish }, { "record", case_record }, { "fit", case_fit }, { "spec", case_spec },
        { "mig", case_mig }, { "sweep", case_sweep },
    };
    sweep_profile = argc > 2 ? argv[2] : NULL;
    return test_cases_run(argc > 2 ? 2 : argc, argv, cases, ELEMENTSOF(cases));
}
