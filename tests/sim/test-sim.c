/* Tests of the simulated libnvidia-ml.so.1, loaded with dlopen exactly like a client
 * would. One case per process (`test-sim <case>`): the library keeps its node for the
 * life of the process, so each profile needs a fresh one. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvml/nvml-abi.h"

static void *lib;
static char tmpdir[256];

#define FAIL(...)                                                                     \
    do {                                                                              \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                               \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
        exit(1);                                                                      \
    } while (0)
#define CHECK(c)                                                                      \
    do {                                                                              \
        if (!(c))                                                                     \
            FAIL("check failed: %s", #c);                                             \
    } while (0)
#define RET(expr, want)                                                               \
    do {                                                                              \
        nvmlReturn_t r_ = (expr);                                                     \
        if (r_ != (want))                                                             \
            FAIL("%s returned %d, want %d", #expr, r_, (want));                       \
    } while (0)
#define OK(expr) RET(expr, NVML_SUCCESS)
#define STREQ(a, b)                                                                   \
    do {                                                                              \
        if (strcmp((a), (b)))                                                         \
            FAIL("'%s' != '%s'", (a), (b));                                           \
    } while (0)

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        FAIL("missing symbol %s", name);
    return p;
}
/* Typed call through dlsym: N(nvmlInit_v2)(). */
#define N(name) ((__typeof__(&name))sym(#name))

static const char *env(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        FAIL("%s not set (run through meson test)", name);
    return v;
}

static char *path_of(const char *base, const char *rel)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", env(base), rel);
    return p;
}

static void load(void)
{
    lib = dlopen(path_of("GDP_BUILD_DIR", "sim/nvml/libnvidia-ml.so.1"), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        FAIL("dlopen: %s", dlerror());
}

static const char *write_tmp(const char *name, const char *text)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "we");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d;
    OK(N(nvmlDeviceGetHandleByIndex_v2)(i, &d));
    return d;
}

/* ---- shared profiles */
struct expect {
    const char *profile; /* relative to GDP_SHARED_REFERENCE, NULL: built-in default */
    unsigned n;
    const char *uuid_prefix; /* + index digit */
    const char *bus[8];
    const char *name;
    unsigned long long mem;
    int cc_major, cc_minor;
    int numa[8];
    const char *driver;
    int cuda;
};

static const struct expect a100 = {
    "nvml-mock-profiles/a100.yaml", 8, "GPU-12345678-1234-1234-1234-12345678000",
    { "00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0", "00000000:87:00.0",
      "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0" },
    "NVIDIA A100-SXM4-40GB", 42949672960ULL, 8, 0, { 0, 0, 0, 0, 1, 1, 1, 1 }, "550.163.01", 12040,
};
static const struct expect h100 = {
    "nvml-mock-profiles/h100.yaml", 8, "GPU-01000100-0000-0000-0000-00000000000",
    { "00000000:1A:00.0", "00000000:1B:00.0", "00000000:4A:00.0", "00000000:4B:00.0", "00000000:8A:00.0",
      "00000000:8B:00.0", "00000000:CA:00.0", "00000000:CB:00.0" },
    "NVIDIA H100 80GB HBM3", 85899345920ULL, 9, 0, { 0, 0, 0, 0, 1, 1, 1, 1 }, NULL, 0,
};
static const struct expect t4 = {
    "nvml-mock-profiles/t4.yaml", 4, "GPU-00000074-0000-0000-0000-00000000000",
    { "00000000:3B:00.0", "00000000:86:00.0", "00000000:AF:00.0", "00000000:D8:00.0" },
    "NVIDIA T4", 0, 7, 5, { 0, 0, 0, 0 }, NULL, 0,
};

static void check_profile(const struct expect *e)
{
    if (e->profile)
        setenv("MOCK_NVML_CONFIG", path_of("GDP_SHARED_REFERENCE", e->profile), 1);
    else
        unsetenv("MOCK_NVML_CONFIG");
    load();
    OK(N(nvmlInit_v2)());
    unsigned n;
    OK(N(nvmlDeviceGetCount_v2)(&n));
    CHECK(n == e->n);
    char buf[128], want[128];
    if (e->driver) {
        OK(N(nvmlSystemGetDriverVersion)(buf, sizeof(buf)));
        STREQ(buf, e->driver);
        int cuda;
        OK(N(nvmlSystemGetCudaDriverVersion)(&cuda));
        CHECK(cuda == e->cuda);
    }
    for (unsigned i = 0; i < n; i++) {
        nvmlDevice_t d = dev(i);
        OK(N(nvmlDeviceGetUUID)(d, buf, sizeof(buf)));
        snprintf(want, sizeof(want), "%s%u", e->uuid_prefix, i);
        STREQ(buf, want);
        nvmlPciInfo_t pci;
        OK(N(nvmlDeviceGetPciInfo_v3)(d, &pci));
        STREQ(pci.busId, e->bus[i]);
        CHECK(pci.domain == 0 && pci.device == 0);
        CHECK((pci.pciDeviceId & 0xffff) == 0x10de);
        STREQ(pci.busIdLegacy, e->bus[i] + 4);
        OK(N(nvmlDeviceGetName)(d, buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE));
        STREQ(buf, e->name);
        nvmlMemory_t mem;
        OK(N(nvmlDeviceGetMemoryInfo)(d, &mem));
        if (e->mem)
            CHECK(mem.total == e->mem);
        CHECK(mem.total == mem.free + mem.used);
        int ma, mi;
        OK(N(nvmlDeviceGetCudaComputeCapability)(d, &ma, &mi));
        CHECK(ma == e->cc_major && mi == e->cc_minor);
        unsigned node, minor, idx;
        OK(N(nvmlDeviceGetNumaNodeId)(d, &node));
        CHECK((int)node == e->numa[i]);
        OK(N(nvmlDeviceGetMinorNumber)(d, &minor));
        CHECK(minor == i);
        OK(N(nvmlDeviceGetIndex)(d, &idx));
        CHECK(idx == i);
        nvmlDevice_t same;
        OK(N(nvmlDeviceGetHandleByUUID)(want, &same));
        CHECK(same == d);
        OK(N(nvmlDeviceGetHandleByPciBusId_v2)(e->bus[i], &same));
        CHECK(same == d);
        unsigned cur, pend, max;
        nvmlReturn_t r = N(nvmlDeviceGetMigMode)(d, &cur, &pend);
        OK(N(nvmlDeviceGetMaxMigDeviceCount)(d, &max));
        if (e->cc_major >= 8) {
            CHECK(r == NVML_SUCCESS && cur == NVML_DEVICE_MIG_DISABLE && max == 7);
            nvmlDevice_t mig;
            RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(d, 0, &mig), NVML_ERROR_NOT_FOUND);
        } else
            CHECK(r == NVML_ERROR_NOT_SUPPORTED && max == 0);
    }
    nvmlDevice_t none;
    RET(N(nvmlDeviceGetHandleByUUID)("GPU-ffffffff-0000-0000-0000-000000000000", &none), NVML_ERROR_NOT_FOUND);
    RET(N(nvmlDeviceGetHandleByIndex_v2)(n, &none), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

/* ---- init / shutdown */
static void case_init(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SHARED_REFERENCE", "nvml-mock-profiles/t4.yaml"), 1);
    load();
    unsigned n;
    CHECK(N(nvmlErrorString)(NVML_ERROR_GPU_IS_LOST) != NULL);
    CHECK(strlen(N(nvmlErrorString)(NVML_ERROR_UNINITIALIZED)) > 0);
    RET(N(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
    nvmlEventSet_t set;
    RET(N(nvmlEventSetCreate)(&set), NVML_ERROR_UNINITIALIZED);
    OK(N(nvmlInit_v2)());
    OK(N(nvmlInit)());
    OK(N(nvmlInitWithFlags)(0));
    OK(N(nvmlShutdown)());
    OK(N(nvmlShutdown)());
    OK(N(nvmlDeviceGetCount_v2)(&n));
    CHECK(n == 4);
    nvmlDevice_t d0 = dev(0);
    OK(N(nvmlShutdown)());
    RET(N(nvmlDeviceGetCount)(&n), NVML_ERROR_UNINITIALIZED);
    char name[64];
    RET(N(nvmlDeviceGetName)(d0, name, sizeof(name)), NVML_ERROR_UNINITIALIZED);
    OK(N(nvmlShutdown)()); /* extra shutdowns are tolerated */
    OK(N(nvmlInit_v2)());
    CHECK(dev(0) == d0); /* handles survive a full cycle */
    OK(N(nvmlShutdown)());
}

/* ---- buffer and argument errors */
static void case_buffers(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SHARED_REFERENCE", "nvml-mock-profiles/a100.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t d = dev(0);
    char buf[128];
    const char *name = "NVIDIA A100-SXM4-40GB";
    unsigned len = (unsigned)strlen(name);
    RET(N(nvmlDeviceGetName)(d, buf, len), NVML_ERROR_INSUFFICIENT_SIZE);
    OK(N(nvmlDeviceGetName)(d, buf, len + 1));
    STREQ(buf, name);
    RET(N(nvmlDeviceGetName)(d, NULL, 64), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceGetUUID)(d, buf, 40), NVML_ERROR_INSUFFICIENT_SIZE);
    OK(N(nvmlDeviceGetUUID)(d, buf, NVML_DEVICE_UUID_ASCII_LEN));
    RET(N(nvmlSystemGetDriverVersion)(buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
    OK(N(nvmlDeviceGetSerial)(d, buf, NVML_DEVICE_SERIAL_BUFFER_SIZE));
    STREQ(buf, "1324821083800");
    /* handles are validated */
    int bogus;
    RET(N(nvmlDeviceGetName)((nvmlDevice_t)(void *)&bogus, buf, 64), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceGetName)(NULL, buf, 64), NVML_ERROR_INVALID_ARGUMENT);
    /* versioned structs */
    nvmlMemory_v2_t m2 = { .version = 1 };
    RET(N(nvmlDeviceGetMemoryInfo_v2)(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    m2.version = nvmlMemory_v2;
    OK(N(nvmlDeviceGetMemoryInfo_v2)(d, &m2));
    CHECK(m2.total == 42949672960ULL && m2.reserved == 611319808ULL);
    CHECK(m2.total == m2.free + m2.used + m2.reserved);
    nvmlDeviceAddressingMode_t am = { .version = 0 };
    RET(N(nvmlDeviceGetAddressingMode)(d, &am), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlDevice_t h;
    OK(N(nvmlDeviceGetHandleByPciBusId_v2)("0000:0f:00.0", &h));
    CHECK(h == dev(1));
    RET(N(nvmlDeviceGetHandleByPciBusId_v2)("zz", &h), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceGetHandleByUUID)("nonsense", &h), NVML_ERROR_INVALID_ARGUMENT);
    /* a stubbed entry point */
    unsigned long long v;
    RET(((nvmlReturn_t(*)(nvmlDevice_t, unsigned long long *))sym("nvmlDeviceGetTotalEnergyConsumption"))(d, &v),
        NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlShutdown)());
}

/* ---- MIG */
static bool streq_tail(const char *s, const char *tail);

static nvmlDevice_t mig(nvmlDevice_t gpu, unsigned i)
{
    nvmlDevice_t m;
    OK(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, i, &m));
    return m;
}

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
    CHECK(cii.device == gpu && cii.gpuInstance == gi && cii.id == ci_id && cii.placement.size == ci_slices);
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

/* ---- events and the control FIFO */
static char fifo[600], ackf[600];
static unsigned acked;

static void send(const char *cmd)
{
    int fd = open(fifo, O_WRONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    char line[256];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    CHECK(write(fd, line, (size_t)n) == n);
    close(fd);
}

/* Wait until the library acknowledged `count` commands in total (bounded poll of the
 * ack file; the bound only guards against a hang). */
static void wait_acks(unsigned count)
{
    for (int tries = 0; tries < 2000; tries++) {
        FILE *f = fopen(ackf, "re");
        unsigned lines = 0;
        if (f) {
            int c;
            while ((c = fgetc(f)) != EOF)
                lines += c == '\n';
            fclose(f);
        }
        if (lines >= count) {
            acked = count;
            return;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    FAIL("control command not acknowledged");
}

static void send_acked(const char *cmd)
{
    send(cmd);
    wait_acks(acked + 1);
}

static nvmlEventData_t wait_event(nvmlEventSet_t set)
{
    nvmlEventData_t e;
    OK(N(nvmlEventSetWait_v2)(set, &e, 20000));
    return e;
}

static void case_events(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "sim/profiles/a100-mig-mixed.yaml"), 1);
    snprintf(fifo, sizeof(fifo), "%s/control", tmpdir);
    snprintf(ackf, sizeof(ackf), "%s/ack", tmpdir);
    setenv("MOCK_NVML_CONTROL", fifo, 1);
    setenv("MOCK_NVML_CONTROL_ACK", ackf, 1);
    load();
    OK(N(nvmlInit_v2)());
    struct stat st;
    CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    nvmlDevice_t g0 = dev(0), g1 = dev(1), g2 = dev(2);
    nvmlEventSet_t set;
    OK(N(nvmlEventSetCreate)(&set));
    unsigned long long types;
    OK(N(nvmlDeviceGetSupportedEventTypes)(g0, &types));
    CHECK(types & nvmlEventTypeXidCriticalError);
    CHECK((types & (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)) ==
          (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError));
    unsigned long long mask = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError |
                              nvmlEventTypeSingleBitEccError;
    OK(N(nvmlDeviceRegisterEvents)(g0, mask, set));
    OK(N(nvmlDeviceRegisterEvents)(g2, mask, set));

    /* Timeout honoured: nothing queued, the call blocks at least the timeout. */
    struct timespec t0, t1;
    nvmlEventData_t e;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    RET(N(nvmlEventSetWait_v2)(set, &e, 300), NVML_ERROR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    CHECK(ms >= 300);
    RET(N(nvmlEventSetWait_v2)(set, &e, 0), NVML_ERROR_TIMEOUT);

    /* Xid on a GPU, not attributed */
    send("xid GPU-a100a100-0000-0000-0000-000000000000 48");
    e = wait_event(set);
    CHECK(e.device == g0 && e.eventType == nvmlEventTypeXidCriticalError && e.eventData == 48);
    CHECK(e.gpuInstanceId == 0xFFFFFFFFu && e.computeInstanceId == 0xFFFFFFFFu);
    /* unregistered GPU: nothing arrives; then an event on a registered one does */
    send("xid GPU-a100a100-0000-0000-0000-000000000001 48");
    send("ecc GPU-a100a100-0000-0000-0000-000000000000 double");
    e = wait_event(set);
    CHECK(e.device == g0 && e.eventType == nvmlEventTypeDoubleBitEccError);
    /* MIG UUID: attributed to its GI/CI, reported on the parent */
    char uuid[96];
    OK(N(nvmlDeviceGetUUID)(mig(g2, 2), uuid, sizeof(uuid)));
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "xid %s 31", uuid);
    send(cmd);
    e = wait_event(set);
    CHECK(e.device == g2 && e.eventData == 31 && e.gpuInstanceId == 5 && e.computeInstanceId == 1);
    send("xid GPU-a100a100-0000-0000-0000-000000000002 94 13 0");
    e = wait_event(set);
    CHECK(e.device == g2 && e.eventData == 94 && e.gpuInstanceId == 13 && e.computeInstanceId == 0);
    /* the legacy entry point writes the 24-byte layout only */
    send("xid GPU-a100a100-0000-0000-0000-000000000000 63");
    nvmlEventData_t legacy;
    memset(&legacy, 0xab, sizeof(legacy));
    OK(N(nvmlEventSetWait)(set, &legacy, 20000));
    CHECK(legacy.eventData == 63 && legacy.gpuInstanceId == 0xababababu);
    wait_acks(6);

    /* malformed commands are ignored (not acknowledged) */
    send("frobnicate");
    send("xid GPU-ffffffff-0000-0000-0000-000000000000 1");
    /* wait-error: the next two waits fail, then normal again */
    send_acked("wait-error GPU_IS_LOST 2");
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_GPU_IS_LOST);
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_GPU_IS_LOST);
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_TIMEOUT);
    send_acked("wait-error 999 forever");
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_UNKNOWN);
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_UNKNOWN);
    send_acked("wait-error clear");
    RET(N(nvmlEventSetWait_v2)(set, &e, 10), NVML_ERROR_TIMEOUT);

    /* probe-fail: queries fail with UNKNOWN, the GPU is not lost */
    char name[96];
    send_acked("probe-fail GPU-a100a100-0000-0000-0000-000000000001");
    RET(N(nvmlDeviceGetName)(g1, name, sizeof(name)), NVML_ERROR_UNKNOWN);
    RET(N(nvmlDeviceGetUUID)(g1, name, sizeof(name)), NVML_ERROR_UNKNOWN);
    send_acked("probe-ok GPU-a100a100-0000-0000-0000-000000000001");
    OK(N(nvmlDeviceGetName)(g1, name, sizeof(name)));

    /* lose: Xid 79 queued, every call on the GPU (and its MIG devices) fails */
    nvmlDevice_t m = mig(g2, 0);
    send("lose GPU-a100a100-0000-0000-0000-000000000002");
    e = wait_event(set);
    CHECK(e.device == g2 && e.eventData == 79);
    RET(N(nvmlDeviceGetName)(g2, name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
    RET(N(nvmlDeviceGetUUID)(m, name, sizeof(name)), NVML_ERROR_GPU_IS_LOST);
    nvmlDevice_t h;
    RET(N(nvmlDeviceGetHandleByIndex_v2)(2, &h), NVML_ERROR_GPU_IS_LOST);
    wait_acks(acked + 1);
    send_acked("restore GPU-a100a100-0000-0000-0000-000000000002");
    OK(N(nvmlDeviceGetName)(g2, name, sizeof(name)));
    OK(N(nvmlEventSetFree)(set));
    RET(N(nvmlEventSetWait_v2)(set, &e, 0), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

static void case_profile_faults(void)
{
    const char *p = write_tmp("faults.yaml",
        "device_defaults: {name: Tesla T4, compute_capability: {major: 7, minor: 5}}\n"
        "devices:\n"
        "  - {uuid: GPU-f0000000-0000-0000-0000-000000000000, pci: {bus_id: '0000:01:00.0'}}\n"
        "  - {uuid: GPU-f0000000-0000-0000-0000-000000000001, pci: {bus_id: '0000:02:00.0'}, lost: true}\n"
        "  - {uuid: GPU-f0000000-0000-0000-0000-000000000002, pci: {bus_id: '0000:03:00.0'}, events_supported: false}\n");
    setenv("MOCK_NVML_CONFIG", p, 1);
    load();
    OK(N(nvmlInit_v2)());
    unsigned n;
    OK(N(nvmlDeviceGetCount_v2)(&n));
    CHECK(n == 3);
    nvmlDevice_t h;
    RET(N(nvmlDeviceGetHandleByIndex_v2)(1, &h), NVML_ERROR_GPU_IS_LOST);
    RET(N(nvmlDeviceGetHandleByUUID)("GPU-f0000000-0000-0000-0000-000000000001", &h), NVML_ERROR_GPU_IS_LOST);
    nvmlEventSet_t set;
    OK(N(nvmlEventSetCreate)(&set));
    OK(N(nvmlDeviceRegisterEvents)(dev(0), nvmlEventTypeXidCriticalError, set));
    RET(N(nvmlDeviceRegisterEvents)(dev(2), nvmlEventTypeXidCriticalError, set), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlEventSetFree)(set));
    OK(N(nvmlShutdown)());
}

static void case_init_error(void)
{
    load();
    setenv("MOCK_NVML_INIT_ERROR", "DRIVER_NOT_LOADED", 1);
    RET(N(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
    unsigned n;
    RET(N(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
    setenv("MOCK_NVML_INIT_ERROR", "12", 1);
    RET(N(nvmlInit)(), NVML_ERROR_LIBRARY_NOT_FOUND);
    setenv("MOCK_NVML_INIT_ERROR", "NVML_ERROR_NO_PERMISSION", 1);
    RET(N(nvmlInit_v2)(), NVML_ERROR_NO_PERMISSION);
    unsetenv("MOCK_NVML_INIT_ERROR");
    setenv("MOCK_NVML_CONFIG",
           write_tmp("init-error.yaml", "system: {init_error: DRIVER_NOT_LOADED}\ndevices: []\n"), 1);
    RET(N(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
    RET(N(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
    RET(N(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
}

/* ---- malformed profiles */
static const struct {
    const char *text;
    const char *msg; /* expected after "<file>:<line>: " */
    unsigned line;
} bad[] = {
    { "devices: [\n  {uuid: x\n", "YAML syntax error", 0 },
    { "- 1\n- 2\n", "top level: expected a mapping", 1 },
    { "system: {}\n", "missing devices", 1 },
    { "devices: {a: 1}\n", "devices: expected a sequence", 1 },
    { "devices:\n  - {name: T4, compute_capability: {major: 7}}\n", "devices[0]: missing uuid", 2 },
    { "devices:\n  - {uuid: GPU-1, compute_capability: {major: 7}}\n", "missing name", 2 },
    { "devices:\n  - {uuid: GPU-1, name: T4}\n", "missing compute_capability.major", 2 },
    { "devices:\n  - {uuid: nope, name: T4, compute_capability: {major: 7}}\n", "is not a GPU UUID", 2 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, pci: {bus_id: '0000:01:00.0'}}\n  - {uuid: GPU-1, pci: {bus_id: '0000:02:00.0'}}\n",
      "duplicate UUID", 4 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n  - uuid: GPU-1\n    pci:\n"
      "      bus_id: '0000:zz:00.0'\n", "bad PCI bus id", 5 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, pci: {bus_id: '0000:01:00.0'}}\n  - {uuid: GPU-2, pci: {bus_id: '0000:01:00.0'}}\n",
      "same bus id", 4 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, memory: {total_bytes: lots}}\n", "memory.total_bytes: expected a non-negative integer", 3 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}, memory: 5}\ndevices:\n  - {uuid: GPU-1}\n",
      "expected a mapping", 1 },
    { "device_defaults: {name: T4, compute_capability: {major: seven}}\ndevices:\n  - {uuid: GPU-1}\n",
      "compute_capability.major: expected an integer", 1 },
    { "system: {init_error: BOGUS}\ndevices: []\n", "unknown NVML return code 'BOGUS'", 1 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, mig: {mode_current: enabled}}\n", "is not MIG capable", 3 },
    { "device_defaults: {name: NVIDIA A100-SXM4-40GB, compute_capability: {major: 8}}\ndevices:\n"
      "  - uuid: GPU-1\n    mig:\n      mode_current: enabled\n      gpu_instances:\n"
      "        - {id: 1, profile: 5g.25gb}\n", "is not a GPU instance profile", 7 },
    { "device_defaults: {name: NVIDIA A100-SXM4-40GB, compute_capability: {major: 8}}\ndevices:\n"
      "  - uuid: GPU-1\n    mig:\n      mode_current: enabled\n      gpu_instances:\n"
      "        - {id: 1, profile: 4g.20gb, placement_start: 0}\n"
      "        - {id: 2, profile: 3g.20gb, placement_start: 0}\n", "overlaps", 8 },
    { "device_defaults: {name: NVIDIA A100-SXM4-40GB, compute_capability: {major: 8}}\ndevices:\n"
      "  - uuid: GPU-1\n    mig:\n      mode_current: enabled\n      gpu_instances:\n"
      "        - id: 1\n          profile: 2g.10gb\n          compute_instances:\n"
      "            - {id: 0, profile: 3c.2g.10gb}\n", "is not a compute profile", 10 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, pci: {bus_id: '0000:01:00.0'}, nvlink_peers: [{index: 1, links: 2}]}\n"
      "  - {uuid: GPU-2, pci: {bus_id: '0000:02:00.0'}, nvlink_peers: [{index: 0, links: 3}]}\n",
      "disagree on their link count", 4 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n"
      "  - {uuid: GPU-1, nvlink_peers: [{index: 5, links: 2}]}\n", "is not another device's index", 3 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n  - {uuid: GPU-1}\n"
      "pcie_topology:\n  root_complexes:\n    - switches:\n        - {id: a, parent: b}\n",
      "no switch 'b'", 7 },
    { "device_defaults: {name: T4, compute_capability: {major: 7}}\ndevices:\n  - {uuid: GPU-1}\n"
      "nvlink: {links_per_gpu: 99}\n", "out of range", 4 },
    { "devices:\n  - &a {uuid: GPU-1, name: *b}\n", "YAML syntax error", 2 },
    { "", "empty profile", 1 },
};

static void case_malformed(void)
{
    load();
    char out[600];
    snprintf(out, sizeof(out), "%s/stderr", tmpdir);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char name[32];
        snprintf(name, sizeof(name), "bad%zu.yaml", i);
        const char *p = write_tmp(name, bad[i].text);
        setenv("MOCK_NVML_CONFIG", p, 1);
        fflush(stderr);
        int saved = dup(2);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(saved >= 0 && fd >= 0);
        dup2(fd, 2);
        nvmlReturn_t r = N(nvmlInit_v2)();
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        if (r != NVML_ERROR_UNKNOWN)
            FAIL("bad profile %zu: init returned %d", i, r);
        char msg[1024] = "";
        FILE *f = fopen(out, "re");
        CHECK(f);
        size_t len = fread(msg, 1, sizeof(msg) - 1, f);
        fclose(f);
        msg[len] = 0;
        /* exactly one line: "<file>:<line>: <what>" */
        if (len == 0 || msg[len - 1] != '\n' || strchr(msg, '\n') != msg + len - 1)
            FAIL("bad profile %zu: not exactly one line: '%s'", i, msg);
        char prefix[600];
        int k = bad[i].line ? snprintf(prefix, sizeof(prefix), "%s:%u: ", p, bad[i].line)
                            : snprintf(prefix, sizeof(prefix), "%s:", p);
        if (strncmp(msg, prefix, (size_t)k) || !strstr(msg, bad[i].msg))
            FAIL("bad profile %zu: got '%s', want prefix '%s' and '%s'", i, msg, prefix, bad[i].msg);
    }
    unsetenv("MOCK_NVML_CONFIG");
    OK(N(nvmlInit_v2)()); /* a failed load is not cached */
    OK(N(nvmlShutdown)());
}

/* ---- exports */
static void case_symbols(void)
{
    load();
    FILE *f = fopen(path_of("GDP_SHARED_REFERENCE", "nvml-abi/referenced-symbols-v0.20.txt"), "re");
    CHECK(f);
    char line[256];
    unsigned n = 0;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0])
            continue;
        if (!dlsym(lib, line))
            FAIL("symbol %s not exported", line);
        n++;
    }
    fclose(f);
    CHECK(n == 413);
    /* both names of versioned pairs, plus the hand-written non-nvmlReturn_t one */
    static const char *pairs[] = { "nvmlInit", "nvmlInit_v2", "nvmlDeviceGetCount", "nvmlDeviceGetPciInfo",
                                   "nvmlDeviceGetPciInfo_v2", "nvmlEventSetWait", "nvmlComputeInstanceGetInfo",
                                   "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetGpuInstancePossiblePlacements" };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        CHECK(dlsym(lib, pairs[i]));
    /* internal helpers stay hidden */
    CHECK(!dlsym(lib, "sim_profile_parse") && !dlsym(lib, "xmalloc"));
}

/* ---- nvml-sim-render */
static bool file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

static void case_render(void)
{
    char cmd[2048], p[700];
    snprintf(cmd, sizeof(cmd), "'%s' --profile '%s' --sysfs-root '%s/sys' --proc-root '%s/proc' --dev-root '%s/dev'",
             path_of("GDP_BUILD_DIR", "sim/nvml/nvml-sim-render"),
             path_of("GDP_SOURCE_DIR", "sim/profiles/a100-mig-mixed.yaml"), tmpdir, tmpdir, tmpdir);
    CHECK(system(cmd) == 0);
    snprintf(p, sizeof(p), "%s/sys/bus/pci/devices/0000:4e:00.0/numa_node", tmpdir);
    CHECK(file_has(p, "1\n"));
    snprintf(p, sizeof(p), "%s/sys/bus/pci/devices/0000:07:00.0/numa_node", tmpdir);
    CHECK(file_has(p, "0\n"));
    snprintf(p, sizeof(p), "%s/proc/driver/nvidia-caps/mig-minors", tmpdir);
    CHECK(file_has(p, "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"));
    CHECK(file_has(p, "gpu2/gi5/ci1/access "));
    snprintf(p, sizeof(p), "%s/proc/driver/nvidia/capabilities/gpu2/mig/gi5/ci1/access", tmpdir);
    CHECK(file_has(p, "DeviceFileMinor: "));
    snprintf(p, sizeof(p), "%s/dev/nvidia3", tmpdir);
    CHECK(access(p, F_OK) == 0);
    snprintf(p, sizeof(p), "%s/dev/nvidiactl", tmpdir);
    CHECK(access(p, F_OK) == 0);
    /* a bad profile: non-zero exit */
    snprintf(cmd, sizeof(cmd), "'%s' --profile /nonexistent 2>/dev/null",
             path_of("GDP_BUILD_DIR", "sim/nvml/nvml-sim-render"));
    CHECK(system(cmd) != 0);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        { "init", case_init },           { "buffers", case_buffers },       { "mig-single", case_mig_single },
        { "mig-mixed", case_mig_mixed }, { "mig-h100", case_mig_h100 },     { "nvlink-a100", case_nvlink_a100 },
        { "nvlink-peers", case_nvlink_peers }, { "ancestor", case_ancestor }, { "events", case_events },
        { "profile-faults", case_profile_faults }, { "init-error", case_init_error },
        { "malformed", case_malformed }, { "symbols", case_symbols },       { "render", case_render },
    };
    if (argc != 2)
        FAIL("usage: test-sim <case>");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-sim-XXXXXX");
    CHECK(mkdtemp(tmpdir));
    unsetenv("MOCK_NVML_CONTROL");
    unsetenv("MOCK_NVML_INIT_ERROR");
    if (!strcmp(argv[1], "profile-a100"))
        check_profile(&a100);
    else if (!strcmp(argv[1], "profile-h100"))
        check_profile(&h100);
    else if (!strcmp(argv[1], "profile-t4"))
        check_profile(&t4);
    else if (!strcmp(argv[1], "profile-default")) {
        struct expect d = a100;
        d.profile = NULL;
        check_profile(&d);
    } else {
        size_t i;
        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            if (!strcmp(argv[1], cases[i].name))
                break;
        if (i == sizeof(cases) / sizeof(cases[0]))
            FAIL("unknown case %s", argv[1]);
        cases[i].fn();
    }
    char rm[400];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", tmpdir);
    if (system(rm) != 0)
        FAIL("cleanup failed");
    return 0;
}
