/* Tests of the simulated libnvidia-ml.so.1, continued: MIG (single, mixed, H100) and
 * topology (NVLink, peers, the common PCIe ancestor). sim-test.h has the helpers. */
#include "sim-test.h"

/* ---- MIG */
static bool streq_tail(const char *s, const char *tail);

static void check_mig_device(nvmlDevice_t gpu, nvmlDevice_t m, unsigned gi_id, unsigned ci_id, unsigned gi_slices,
                             unsigned ci_slices, unsigned long long mem_mb, const char *name_suffix)
{
    unsigned v;
    nvmlDevice_t parent;
    OK(N(nvmlDeviceIsMigDeviceHandle)(m, &v));
    CHECK(v == 1);
    OK(N(nvmlDeviceIsMigDeviceHandle)(gpu, &v));
    CHECK(v == 0);
    OK(N(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(m, &parent));
    CHECK(parent == gpu);
    OK(N(nvmlDeviceGetGpuInstanceId)(m, &v));
    CHECK(v == gi_id);
    OK(N(nvmlDeviceGetComputeInstanceId)(m, &v));
    CHECK(v == ci_id);
    nvmlDeviceAttributes_t a;
    OK(N(nvmlDeviceGetAttributes_v2)(m, &a));
    CHECK(a.gpuInstanceSliceCount == gi_slices && a.computeInstanceSliceCount == ci_slices);
    CHECK(a.memorySizeMB == mem_mb && a.multiprocessorCount > 0);
    nvmlMemory_t mem;
    OK(N(nvmlDeviceGetMemoryInfo)(m, &mem));
    CHECK(mem.total == mem_mb << 20);
    char name[96], uuid[96];
    OK(N(nvmlDeviceGetName)(m, name, sizeof(name)));
    CHECK(strlen(name) > strlen(name_suffix) && streq_tail(name, name_suffix));
    OK(N(nvmlDeviceGetUUID)(m, uuid, sizeof(uuid)));
    CHECK(strncmp(uuid, "MIG-", 4) == 0 && strlen(uuid) == 40);
    nvmlDevice_t back;
    OK(N(nvmlDeviceGetHandleByUUID)(uuid, &back));
    CHECK(back == m);
    /* The GI/CI objects behind it, as the device plugin walks them. */
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlGpuInstanceInfo_t gii;
    nvmlComputeInstanceInfo_t cii;
    OK(N(nvmlDeviceGetGpuInstanceById)(gpu, gi_id, &gi));
    OK(N(nvmlGpuInstanceGetInfo)(gi, &gii));
    CHECK(gii.device == gpu && gii.id == gi_id);
    OK(N(nvmlGpuInstanceGetComputeInstanceById)(gi, ci_id, &ci));
    OK(N(nvmlComputeInstanceGetInfo_v2)(ci, &cii));
    /* .device is the MIG device (NVML: the handle nvmlDeviceGetUUID gives the MIG UUID of) */
    CHECK(cii.device == m && cii.gpuInstance == gi && cii.id == ci_id && cii.placement.size == ci_slices);
    /* Profile ids resolve back through the profile tables (go-nvlib's walk). */
    bool gi_found = false, ci_found = false;
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t r = N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, p, &info);
        CHECK(r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED);
        if (r == NVML_SUCCESS && info.id == gii.profileId) {
            gi_found = true;
            CHECK(info.sliceCount == gi_slices && info.memorySizeMB == mem_mb);
        }
    }
    for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
        nvmlComputeInstanceProfileInfo_t info;
        nvmlReturn_t r = N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(gi, p, 0, &info);
        CHECK(r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED);
        if (r == NVML_SUCCESS && info.id == cii.profileId) {
            ci_found = true;
            CHECK(info.sliceCount == ci_slices);
        }
    }
    CHECK(gi_found && ci_found);
}

static bool streq_tail(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static void case_mig_single(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "sim/profiles/a100-mig-single.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    unsigned n;
    OK(N(nvmlDeviceGetCount_v2)(&n));
    CHECK(n == 8);
    for (unsigned g = 0; g < n; g++) {
        nvmlDevice_t gpu = dev(g);
        unsigned cur, pend;
        OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
        CHECK(cur == NVML_DEVICE_MIG_ENABLE);
        for (unsigned i = 0; i < 7; i++)
            check_mig_device(gpu, mig(gpu, i), 7 + i, 0, 1, 1, 4864, "MIG 1g.5gb");
        nvmlDevice_t m;
        RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, 7, &m), NVML_ERROR_INVALID_ARGUMENT);
    }
    /* profile table checks: index vs id, unsupported profiles, v2/v3 structs */
    nvmlDevice_t gpu = dev(0);
    nvmlGpuInstanceProfileInfo_t info;
    OK(N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info));
    CHECK(info.id == 19 && info.instanceCount == 7 && info.sliceCount == 1 && info.multiprocessorCount == 14);
    OK(N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, &info));
    CHECK(info.id == 20 && info.decoderCount == 1 && info.ofaCount == 1);
    OK(N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_7_SLICE, &info));
    CHECK(info.id == 0 && info.memorySizeMB == 40320);
    RET(N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_8_SLICE, &info), NVML_ERROR_NOT_SUPPORTED);
    RET(N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, NVML_GPU_INSTANCE_PROFILE_COUNT, &info), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstanceProfileInfo_v2_t v2 = { .version = nvmlGpuInstanceProfileInfo_v2 };
    OK(N(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, NVML_GPU_INSTANCE_PROFILE_2_SLICE, &v2));
    CHECK(v2.id == 14);
    STREQ(v2.name, "MIG 2g.10gb");
    nvmlGpuInstanceProfileInfo_v3_t v3 = { .version = nvmlGpuInstanceProfileInfo_v3 };
    OK(N(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, NVML_GPU_INSTANCE_PROFILE_3_SLICE, (void *)&v3));
    CHECK(v3.id == 9 && v3.sliceCount == 3);
    STREQ(v3.name, "MIG 3g.20gb");
    v2.version = 7;
    RET(N(nvmlDeviceGetGpuInstanceProfileInfoV)(gpu, 0, &v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    OK(N(nvmlShutdown)());
}

static void case_mig_mixed(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "sim/profiles/a100-mig-mixed.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t g0 = dev(0), g2 = dev(2), g3 = dev(3), m;
    unsigned cur, pend;
    OK(N(nvmlDeviceGetMigMode)(g0, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_DISABLE);
    RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(g0, 0, &m), NVML_ERROR_NOT_FOUND);
    check_mig_device(g2, mig(g2, 0), 1, 0, 3, 3, 20096, "MIG 3g.20gb");
    check_mig_device(g2, mig(g2, 1), 5, 0, 2, 1, 9856, "MIG 1c.2g.10gb");
    check_mig_device(g2, mig(g2, 2), 5, 1, 2, 1, 9856, "MIG 1c.2g.10gb");
    check_mig_device(g2, mig(g2, 3), 13, 0, 1, 1, 4864, "MIG 1g.5gb+me");
    RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(g2, 4, &m), NVML_ERROR_NOT_FOUND);
    char uuid[96];
    OK(N(nvmlDeviceGetUUID)(mig(g2, 0), uuid, sizeof(uuid)));
    STREQ(uuid, "MIG-3a3a3a3a-0000-0000-0000-000000000001");
    /* legacy MIG naming resolves too */
    OK(N(nvmlDeviceGetHandleByUUID)("MIG-GPU-a100a100-0000-0000-0000-000000000002/5/1", &m));
    CHECK(m == mig(g2, 2));
    check_mig_device(g3, mig(g3, 0), 2, 0, 4, 4, 20096, "MIG 4g.20gb");
    check_mig_device(g3, mig(g3, 3), 9, 0, 1, 1, 4864, "MIG 1g.5gb");
    /* +me GI: attributes carry the media engines */
    nvmlDeviceAttributes_t a;
    OK(N(nvmlDeviceGetAttributes_v2)(mig(g2, 3), &a));
    CHECK(a.sharedDecoderCount == 1 && a.sharedJpegCount == 1 && a.sharedOfaCount == 1);
    RET(N(nvmlDeviceGetAttributes_v2)(g2, &a), NVML_ERROR_NOT_SUPPORTED);
    /* GI listing and CI profile info V */
    nvmlGpuInstance_t gis[4];
    unsigned count = 4;
    OK(N(nvmlDeviceGetGpuInstances)(g2, 14, gis, &count));
    CHECK(count == 1);
    nvmlComputeInstanceProfileInfo_v2_t cv = { .version = nvmlComputeInstanceProfileInfo_v2 };
    OK(N(nvmlGpuInstanceGetComputeInstanceProfileInfoV)(gis[0], NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 0, &cv));
    STREQ(cv.name, "MIG 1c.2g.10gb");
    CHECK(cv.instanceCount == 2);
    nvmlComputeInstanceProfileInfo_t ci;
    RET(N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(gis[0], NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 0, &ci),
        NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuInstance_t gi;
    RET(N(nvmlDeviceGetGpuInstanceById)(g2, 2, &gi), NVML_ERROR_NOT_FOUND);
    RET(N(nvmlDeviceGetGpuInstanceById)(g0, 1, &gi), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlShutdown)());
}

static void case_mig_h100(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "sim/profiles/h100-mig.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t g0 = dev(0), g1 = dev(1);
    check_mig_device(g0, mig(g0, 0), 1, 0, 3, 3, 40448, "MIG 3g.40gb");
    check_mig_device(g0, mig(g0, 1), 3, 0, 2, 2, 20096, "MIG 2g.20gb");
    check_mig_device(g0, mig(g0, 2), 9, 0, 1, 1, 9984, "MIG 1g.10gb+me");
    check_mig_device(g0, mig(g0, 3), 10, 0, 1, 1, 9984, "MIG 1g.10gb");
    check_mig_device(g1, mig(g1, 0), 0, 0, 7, 7, 81152, "MIG 7g.80gb");
    nvmlGpuInstanceProfileInfo_t info;
    OK(N(nvmlDeviceGetGpuInstanceProfileInfo)(g1, NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, &info));
    CHECK(info.id == 15 && info.memorySizeMB == 20096);
    OK(N(nvmlShutdown)());
}

/* ---- NVLink */
static unsigned links_to(nvmlDevice_t a, const char *bus)
{
    unsigned n = 0;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
        nvmlEnableState_t st;
        nvmlReturn_t r = N(nvmlDeviceGetNvLinkState)(a, l, &st);
        if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_SUPPORTED)
            continue;
        OK(r);
        if (st != NVML_FEATURE_ENABLED)
            continue;
        nvmlPciInfo_t pci;
        OK(N(nvmlDeviceGetNvLinkRemotePciInfo_v2)(a, l, &pci));
        n += strcmp(pci.busId, bus) == 0;
    }
    return n;
}

static void case_nvlink_a100(void)
{
    unsetenv("MOCK_NVML_CONFIG"); /* built-in default = DGX A100 */
    load();
    OK(N(nvmlInit_v2)());
    for (unsigned g = 0; g < 8; g++) {
        nvmlDevice_t d = dev(g);
        unsigned enabled = 0;
        for (unsigned l = 0; l < 12; l++) {
            nvmlEnableState_t st;
            OK(N(nvmlDeviceGetNvLinkState)(d, l, &st));
            enabled += st == NVML_FEATURE_ENABLED;
        }
        CHECK(enabled == 12);
        nvmlEnableState_t st;
        RET(N(nvmlDeviceGetNvLinkState)(d, 12, &st), NVML_ERROR_INVALID_ARGUMENT);
        /* NV12 through six NVSwitches: two links to each switch */
        static const char *sw[] = { "00000000:01:00.0", "00000000:02:00.0", "00000000:03:00.0",
                                    "00000000:04:00.0", "00000000:05:00.0", "00000000:06:00.0" };
        for (unsigned s = 0; s < 6; s++)
            CHECK(links_to(d, sw[s]) == 2);
        nvmlGpuP2PStatus_t p2p;
        OK(N(nvmlDeviceGetP2PStatus)(d, dev((g + 1) % 8), NVML_P2P_CAPS_INDEX_NVLINK, &p2p));
        CHECK(p2p == NVML_P2P_STATUS_OK);
    }
    /* default node: levels between NUMA halves */
    nvmlGpuTopologyLevel_t lvl;
    OK(N(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(1), &lvl));
    CHECK(lvl == NVML_TOPOLOGY_HOSTBRIDGE);
    OK(N(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(4), &lvl));
    CHECK(lvl == NVML_TOPOLOGY_SYSTEM);
    OK(N(nvmlShutdown)());
}

static void case_nvlink_peers(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "tests/sim/profiles/nvlink-peers.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    static const char *bus[] = { "00000000:06:00.0", "00000000:07:00.0", "00000000:0A:00.0", "00000000:0B:00.0" };
    static const unsigned want[4][4] = { { 0, 2, 1, 1 }, { 2, 0, 1, 0 }, { 1, 1, 0, 2 }, { 1, 0, 2, 0 } };
    for (unsigned a = 0; a < 4; a++)
        for (unsigned b = 0; b < 4; b++)
            if (links_to(dev(a), bus[b]) != want[a][b])
                FAIL("links %u->%u: %u, want %u", a, b, links_to(dev(a), bus[b]), want[a][b]);
    /* GPU 3 has 3 of its 6 link slots in use: 3..5 disabled, 6 invalid */
    nvmlEnableState_t st;
    OK(N(nvmlDeviceGetNvLinkState)(dev(3), 5, &st));
    CHECK(st == NVML_FEATURE_DISABLED);
    RET(N(nvmlDeviceGetNvLinkState)(dev(3), 6, &st), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

static void case_ancestor(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "tests/sim/profiles/pcie-tree.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    static const struct {
        unsigned a, b;
        nvmlGpuTopologyLevel_t lvl;
    } cases[] = {
        { 0, 7, NVML_TOPOLOGY_INTERNAL }, { 0, 1, NVML_TOPOLOGY_SINGLE },   { 1, 7, NVML_TOPOLOGY_SINGLE },
        { 0, 2, NVML_TOPOLOGY_MULTIPLE }, { 0, 3, NVML_TOPOLOGY_HOSTBRIDGE }, { 2, 3, NVML_TOPOLOGY_HOSTBRIDGE },
        { 0, 4, NVML_TOPOLOGY_NODE },     { 0, 5, NVML_TOPOLOGY_SYSTEM },   { 4, 5, NVML_TOPOLOGY_SYSTEM },
        { 0, 6, NVML_TOPOLOGY_SYSTEM },   { 3, 3, NVML_TOPOLOGY_INTERNAL },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        nvmlGpuTopologyLevel_t l1, l2;
        OK(N(nvmlDeviceGetTopologyCommonAncestor)(dev(cases[i].a), dev(cases[i].b), &l1));
        OK(N(nvmlDeviceGetTopologyCommonAncestor)(dev(cases[i].b), dev(cases[i].a), &l2));
        if (l1 != cases[i].lvl || l2 != cases[i].lvl)
            FAIL("level %u-%u: %d/%d, want %d", cases[i].a, cases[i].b, l1, l2, cases[i].lvl);
    }
    unsigned node;
    RET(N(nvmlDeviceGetNumaNodeId)(dev(6), &node), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlDeviceGetNumaNodeId)(dev(5), &node));
    CHECK(node == 1);
    nvmlEnableState_t st;
    RET(N(nvmlDeviceGetNvLinkState)(dev(0), 0, &st), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlShutdown)());
}

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "mig-single", case_mig_single },
        { "mig-mixed", case_mig_mixed },
        { "mig-h100", case_mig_h100 },
        { "nvlink-a100", case_nvlink_a100 },
        { "nvlink-peers", case_nvlink_peers },
        { "ancestor", case_ancestor },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
