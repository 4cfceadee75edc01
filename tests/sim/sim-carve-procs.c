/* test-sim-carve, continued: the state shared between processes (MOCK_NVML_STATE), the
 * tables of every model through NVML, and the cost of a Prepare's worth of calls. */
#include <signal.h>
#include <sys/wait.h>

#include "sim-test.h"

#define GI_1G 19

int carve_shared(void);
int carve_models(const char *profile);
int carve_speed(void);

static void set_profile(const char *name)
{
    char rel[128], p[700];
    snprintf(rel, sizeof(rel), "sim/profiles/dynamic/%s", name);
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", rel), 1);
    snprintf(p, sizeof(p), "%s/state", tmpdir);
    setenv("MOCK_NVML_STATE", p, 1);
}

/* In a child (no FAIL there: exit() would remove the scratch directory). */
#define CHILD_OK(expr)                                                                \
    do {                                                                              \
        nvmlReturn_t r_ = (expr);                                                     \
        if (r_ != NVML_SUCCESS) {                                                     \
            fprintf(stderr, "child: %s: %d\n", #expr, r_);                            \
            _exit(3);                                                                 \
        }                                                                             \
    } while (0)

static void child_create(int out)
{
    load();
    CHILD_OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu;
    CHILD_OK(N(nvmlDeviceGetHandleByIndex_v2)(0, &gpu));
    nvmlGpuInstancePlacement_t pl = { 0, 1 };
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlComputeInstanceInfo_t info;
    char uuid[96];
    CHILD_OK(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, GI_1G, &pl, &gi));
    CHILD_OK(N(nvmlGpuInstanceCreateComputeInstance)(gi, 0, &ci));
    CHILD_OK(N(nvmlComputeInstanceGetInfo_v2)(ci, &info));
    CHILD_OK(N(nvmlDeviceGetUUID)(info.device, uuid, sizeof(uuid)));
    if (write(out, uuid, strlen(uuid) + 1) < 0)
        _exit(4);
    _exit(0);
}

/* Create and destroy at placement `start` `rounds` times (0: until killed); after 10
 * rounds write a byte to `out` (when >= 0). Every call must succeed: another process
 * working beside it at other placements must never make it lose an update. */
static void child_churn(int out, unsigned start, unsigned long rounds)
{
    load();
    CHILD_OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu;
    CHILD_OK(N(nvmlDeviceGetHandleByIndex_v2)(0, &gpu));
    for (unsigned long i = 0; !rounds || i < rounds; i++) {
        nvmlGpuInstancePlacement_t pl = { start, 1 };
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        CHILD_OK(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, GI_1G, &pl, &gi));
        CHILD_OK(N(nvmlGpuInstanceCreateComputeInstance)(gi, 0, &ci));
        CHILD_OK(N(nvmlComputeInstanceDestroy)(ci));
        CHILD_OK(N(nvmlGpuInstanceDestroy)(gi));
        if (i == 10 && out >= 0 && write(out, "x", 1) != 1)
            _exit(4);
    }
    _exit(0);
}

static void wait_ok(pid_t pid)
{
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("child %d: status 0x%x", (int)pid, st);
}

int carve_shared(void)
{
    set_profile("a100-40gb-mig-empty.yaml");
    int p[2];
    CHECK(pipe(p) == 0);
    /* 1. a process creates a MIG device and exits */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        child_create(p[1]);
    wait_ok(pid);
    char uuid[96] = "";
    CHECK(read(p[0], uuid, sizeof(uuid)) > 4 && strncmp(uuid, "MIG-", 4) == 0);
    /* 2. two processes carving side by side lose no update */
    pid_t two[2];
    for (unsigned k = 0; k < 2; k++) {
        two[k] = fork();
        CHECK(two[k] >= 0);
        if (two[k] == 0)
            child_churn(-1, 2 + k, 2000);
    }
    for (unsigned k = 0; k < 2; k++)
        wait_ok(two[k]);
    /* 3. a process killed in the middle of creating and destroying */
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        child_churn(p[1], 1, 0);
    char x;
    CHECK(read(p[0], &x, 1) == 1);
    struct timespec ts = { 0, 20000000 };
    nanosleep(&ts, NULL);
    CHECK(kill(pid, SIGKILL) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st));
    /* the file is whole: header, then the records */
    char path[700], magic[8];
    snprintf(path, sizeof(path), "%s/state", tmpdir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0 && read(fd, magic, 8) == 8 && memcmp(magic, "NVSIMMG1", 8) == 0);
    close(fd);
    /* 4. this process sees what they left */
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(0), m;
    OK(N(nvmlDeviceGetHandleByUUID)(uuid, &m));
    unsigned id, n = 8;
    OK(N(nvmlDeviceGetGpuInstanceId)(m, &id));
    CHECK(id == 7);
    nvmlGpuInstance_t gis[8];
    OK(N(nvmlDeviceGetGpuInstances)(gpu, GI_1G, gis, &n));
    CHECK(n == 1 || n == 2);
    for (unsigned i = 0; i < n; i++) {
        nvmlGpuInstanceInfo_t info;
        OK(N(nvmlGpuInstanceGetInfo)(gis[i], &info));
        CHECK(info.id == 7 + info.placement.start && info.placement.start <= 1);
        if (info.id == 8) { /* the killed process's: 0 or 1 CI */
            nvmlComputeInstance_t cis[8];
            unsigned k = 8;
            OK(N(nvmlGpuInstanceGetComputeInstances)(gis[i], 0, cis, &k));
            CHECK(k <= 1);
            if (k)
                OK(N(nvmlComputeInstanceDestroy)(cis[0]));
            OK(N(nvmlGpuInstanceDestroy)(gis[i]));
        }
    }
    unsigned rem;
    OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, GI_1G, &rem));
    CHECK(rem == 6);
    /* 5. another process destroys what this one holds handles to */
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    OK(N(nvmlDeviceGetGpuInstanceById)(gpu, 7, &gi));
    OK(N(nvmlGpuInstanceGetComputeInstanceById)(gi, 0, &ci));
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        CHILD_OK(N(nvmlComputeInstanceDestroy)(ci));
        CHILD_OK(N(nvmlGpuInstanceDestroy)(gi));
        _exit(0);
    }
    wait_ok(pid);
    nvmlGpuInstanceInfo_t gii;
    nvmlComputeInstanceInfo_t cii;
    char u[96];
    RET(N(nvmlGpuInstanceGetInfo)(gi, &gii), NVML_ERROR_NOT_FOUND);
    RET(N(nvmlComputeInstanceGetInfo_v2)(ci, &cii), NVML_ERROR_NOT_FOUND);
    RET(N(nvmlDeviceGetUUID)(m, u, sizeof(u)), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, 0, &m), NVML_ERROR_NOT_FOUND);
    CHECK(N(nvmlDeviceGetHandleByUUID)(uuid, &m) != NVML_SUCCESS);
    RET(N(nvmlDeviceGetGpuInstanceById)(gpu, 7, &gi), NVML_ERROR_NOT_FOUND);
    OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, GI_1G, &rem));
    CHECK(rem == 7);
    OK(N(nvmlShutdown)());
    return 0;
}

/* Every GI profile of GPU 0: as many instances as the table says, disjoint, then none. */
int carve_models(const char *profile)
{
    set_profile(profile);
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(0);
    unsigned cur, pend, max;
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    if (cur != NVML_DEVICE_MIG_ENABLE) {
        nvmlReturn_t act;
        OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_ENABLE, &act));
        CHECK(act == NVML_SUCCESS); /* Hopper/Blackwell profiles */
    }
    OK(N(nvmlDeviceGetMaxMigDeviceCount)(gpu, &max));
    unsigned profiles = 0;
    for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
        nvmlGpuInstanceProfileInfo_t info;
        nvmlReturn_t r = N(nvmlDeviceGetGpuInstanceProfileInfo)(gpu, p, &info);
        if (r == NVML_ERROR_NOT_SUPPORTED)
            continue;
        OK(r);
        profiles++;
        nvmlGpuInstancePlacement_t pl[8];
        unsigned np = 8, rem, made = 0, mask = 0;
        OK(N(nvmlDeviceGetGpuInstancePossiblePlacements_v2)(gpu, info.id, pl, &np));
        CHECK(np >= info.instanceCount);
        OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, info.id, &rem));
        CHECK(rem == info.instanceCount);
        nvmlGpuInstance_t gis[8];
        while (made < 8 && (r = N(nvmlDeviceCreateGpuInstance)(gpu, info.id, &gis[made])) == NVML_SUCCESS) {
            nvmlGpuInstanceInfo_t gii;
            OK(N(nvmlGpuInstanceGetInfo)(gis[made], &gii));
            unsigned bits = ((1u << gii.placement.size) - 1) << gii.placement.start;
            CHECK(!(mask & bits) && gii.id < 15);
            mask |= bits;
            /* one CI spanning the GI: the MIG device has the GI's size */
            nvmlComputeInstanceProfileInfo_t cp = { 0 };
            for (unsigned c = 0; c < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; c++)
                if (N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(gis[made], c, 0, &cp) == NVML_SUCCESS &&
                    cp.sliceCount == info.sliceCount)
                    break;
            CHECK(cp.sliceCount == info.sliceCount);
            nvmlComputeInstance_t ci;
            nvmlComputeInstanceInfo_t cii;
            nvmlDeviceAttributes_t a;
            OK(N(nvmlGpuInstanceCreateComputeInstance)(gis[made], cp.id, &ci));
            OK(N(nvmlComputeInstanceGetInfo_v2)(ci, &cii));
            OK(N(nvmlDeviceGetAttributes_v2)(cii.device, &a));
            CHECK(a.gpuInstanceSliceCount == info.sliceCount && a.memorySizeMB == info.memorySizeMB);
            made++;
        }
        CHECK(r == NVML_ERROR_INSUFFICIENT_RESOURCES);
        if (made != info.instanceCount)
            FAIL("%s profile %u: %u instances, table says %u", profile, info.id, made, info.instanceCount);
        OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, info.id, &rem));
        CHECK(rem == 0);
        nvmlDevice_t m;
        OK(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, made - 1, &m));
        RET(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, made, &m), made < max ? NVML_ERROR_NOT_FOUND
                                                                              : NVML_ERROR_INVALID_ARGUMENT);
        for (unsigned k = 0; k < made; k++) {
            nvmlComputeInstance_t cis[8];
            for (unsigned c = 0, nc = 8; c < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; c++, nc = 8)
                if (N(nvmlGpuInstanceGetComputeInstances)(gis[k], c, cis, &nc) == NVML_SUCCESS && nc) {
                    OK(N(nvmlComputeInstanceDestroy)(cis[0]));
                    break;
                }
            OK(N(nvmlGpuInstanceDestroy)(gis[k]));
        }
    }
    CHECK(profiles >= 5);
    OK(N(nvmlShutdown)());
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* What a DynamicMIG Prepare and Unprepare call, timed with the state shared in a file. */
int carve_speed(void)
{
    set_profile("h100-1-mig-off.yaml");
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(0);
    nvmlReturn_t act;
    OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_ENABLE, &act));
    char gpu_uuid[96];
    OK(N(nvmlDeviceGetUUID)(gpu, gpu_uuid, sizeof(gpu_uuid)));
    __typeof__(&nvmlDeviceGetHandleByUUID) by_uuid = N(nvmlDeviceGetHandleByUUID);
    __typeof__(&nvmlDeviceGetMigMode) mig_mode = N(nvmlDeviceGetMigMode);
    __typeof__(&nvmlDeviceGetGpuInstanceProfileInfo) gi_prof = N(nvmlDeviceGetGpuInstanceProfileInfo);
    __typeof__(&nvmlDeviceCreateGpuInstanceWithPlacement) mk_gi = N(nvmlDeviceCreateGpuInstanceWithPlacement);
    __typeof__(&nvmlGpuInstanceGetInfo) gi_info = N(nvmlGpuInstanceGetInfo);
    __typeof__(&nvmlGpuInstanceGetComputeInstanceProfileInfo) ci_prof = N(nvmlGpuInstanceGetComputeInstanceProfileInfo);
    __typeof__(&nvmlGpuInstanceCreateComputeInstance) mk_ci = N(nvmlGpuInstanceCreateComputeInstance);
    __typeof__(&nvmlComputeInstanceGetInfo_v2) ci_info = N(nvmlComputeInstanceGetInfo_v2);
    __typeof__(&nvmlDeviceGetUUID) get_uuid = N(nvmlDeviceGetUUID);
    __typeof__(&nvmlDeviceGetGpuInstanceById) gi_by_id = N(nvmlDeviceGetGpuInstanceById);
    __typeof__(&nvmlGpuInstanceGetComputeInstanceById) ci_by_id = N(nvmlGpuInstanceGetComputeInstanceById);
    __typeof__(&nvmlComputeInstanceDestroy) rm_ci = N(nvmlComputeInstanceDestroy);
    __typeof__(&nvmlGpuInstanceDestroy) rm_gi = N(nvmlGpuInstanceDestroy);
    enum { ROUNDS = 2000 };
    double prep = 0, unprep = 0;
    for (unsigned i = 0; i < ROUNDS; i++) {
        double t0 = now_us();
        nvmlDevice_t d;
        unsigned cur, pend;
        nvmlGpuInstanceProfileInfo_t gp;
        nvmlGpuInstancePlacement_t pl = { i % 7, 1 };
        nvmlGpuInstance_t gi;
        nvmlGpuInstanceInfo_t gii;
        nvmlComputeInstanceProfileInfo_t cp;
        nvmlComputeInstance_t ci;
        nvmlComputeInstanceInfo_t cii;
        char uuid[96];
        OK(by_uuid(gpu_uuid, &d));
        OK(mig_mode(d, &cur, &pend));
        OK(gi_prof(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &gp));
        OK(mk_gi(d, gp.id, &pl, &gi));
        OK(gi_info(gi, &gii));
        OK(ci_prof(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 0, &cp));
        OK(mk_ci(gi, cp.id, &ci));
        OK(ci_info(ci, &cii));
        OK(get_uuid(cii.device, uuid, sizeof(uuid)));
        double t1 = now_us();
        OK(by_uuid(gpu_uuid, &d));
        OK(gi_by_id(d, gii.id, &gi));
        OK(ci_by_id(gi, cii.id, &ci));
        OK(rm_ci(ci));
        OK(rm_gi(gi));
        double t2 = now_us();
        prep += t1 - t0;
        unprep += t2 - t1;
    }
    fprintf(stderr, "MIG create sequence (9 calls): %.2f us; destroy sequence (5 calls): %.2f us (mean of %d)\n",
            prep / ROUNDS, unprep / ROUNDS, ROUNDS);
    /* Generous bound (sanitizer builds, loaded machines); the goal is microseconds. */
    CHECK(prep / ROUNDS < 1000 && unprep / ROUNDS < 1000);
    OK(N(nvmlShutdown)());
    return 0;
}
