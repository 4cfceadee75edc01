/* Carving MIG devices through the simulated NVML's public ABI (dlopen, one case per
 * process): create/destroy GPU and compute instances on an A100-40GB, checking the state
 * after every step (instances, placements, remaining capacity, capability files), the
 * error codes, MIG mode on Ampere (pending until reset) and Hopper (immediate), the state
 * shared between processes through MOCK_NVML_STATE (a killed writer included), every
 * model's table through NVML, and the cost of a Prepare's worth of calls. */
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "sim-test.h"
#include "sim/nvml/sim-caps.h"

#define GI_1G 19 /* A100-40GB 1g.5gb profile id */
static const char *profiles_dir = "sim/profiles/dynamic/";
static char fifo[600], ackf[600];
static unsigned acked;

static void use_profile(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "%s%s", profiles_dir, name);
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", rel), 1);
}

static void send_acked(const char *cmd)
{
    int fd = open(fifo, O_WRONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    char line[256];
    int n = snprintf(line, sizeof(line), "%s\n", cmd);
    CHECK(write(fd, line, (size_t)n) == n);
    close(fd);
    for (int tries = 0; tries < 2000; tries++) {
        FILE *f = fopen(ackf, "re");
        unsigned lines = 0;
        for (int c; f && (c = fgetc(f)) != EOF;)
            lines += c == '\n';
        if (f)
            fclose(f);
        if (lines > acked) {
            acked = lines;
            return;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    FAIL("control command '%s' not acknowledged", cmd);
}

__attribute__((format(printf, 1, 2))) static bool exists(const char *fmt, ...)
{
    char p[700], rel[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
    return access(p, F_OK) == 0;
}

/* GI at start s (1g.5gb, id 7+s) with its CI 0: files present iff `present`. */
static void check_caps(unsigned s, bool present)
{
    unsigned gi = 7 + s;
    CHECK(exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/access", 0, gi) == present);
    CHECK(exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", 0, gi, 0) == present);
    CHECK(exists("dev/nvidia-caps/nvidia-cap%u", sim_cap_gi_minor(0, gi)) == present);
    CHECK(exists("dev/nvidia-caps/nvidia-cap%u", sim_cap_ci_minor(0, gi, 0)) == present);
    if (present) {
        char p[700], buf[200] = "";
        snprintf(p, sizeof(p), "%s/proc/driver/nvidia/capabilities/gpu0/mig/gi%u/access", tmpdir, gi);
        FILE *f = fopen(p, "re");
        CHECK(f && fread(buf, 1, sizeof(buf) - 1, f) > 0);
        fclose(f);
        char want[100];
        snprintf(want, sizeof(want), "DeviceFileMinor: %u\nDeviceFileMode: 292\n", sim_cap_gi_minor(0, gi));
        CHECK(strncmp(buf, want, strlen(want)) == 0);
    }
}

/* The GPU holds exactly the 1g.5gb GIs whose starts are in `mask`, each with one CI. */
static void check_state(nvmlDevice_t gpu, unsigned mask)
{
    nvmlGpuInstance_t gis[8];
    unsigned n = 8, want = (unsigned)__builtin_popcount(mask), got = 0;
    OK(N(nvmlDeviceGetGpuInstances)(gpu, GI_1G, gis, &n));
    CHECK(n == want);
    for (unsigned i = 0; i < n; i++) {
        nvmlGpuInstanceInfo_t info;
        OK(N(nvmlGpuInstanceGetInfo)(gis[i], &info));
        CHECK(info.device == gpu && info.profileId == GI_1G && info.placement.size == 1);
        CHECK(info.id == 7 + info.placement.start && (mask & (1u << info.placement.start)));
        got |= 1u << info.placement.start;
    }
    CHECK(got == mask);
    unsigned rem;
    OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, GI_1G, &rem));
    CHECK(rem == 7 - want);
    for (unsigned s = 0; s < 7; s++)
        check_caps(s, mask & (1u << s));
    for (unsigned i = 0; i < 7; i++) {
        nvmlDevice_t m;
        nvmlReturn_t r = N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, i, &m);
        CHECK(r == (i < want ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND));
        unsigned id;
        if (r == NVML_SUCCESS) {
            OK(N(nvmlDeviceGetGpuInstanceId)(m, &id));
            CHECK(id >= 7 && (mask & (1u << (id - 7))));
            OK(N(nvmlDeviceGetComputeInstanceId)(m, &id));
            CHECK(id == 0);
        }
    }
}

struct made {
    nvmlGpuInstance_t gi;
    nvmlComputeInstance_t ci;
    nvmlDevice_t mig;
    char uuid[96];
};

static void make_1g(nvmlDevice_t gpu, unsigned s, struct made *m)
{
    nvmlGpuInstancePlacement_t pl = { s, 1 };
    OK(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, GI_1G, &pl, &m->gi));
    nvmlGpuInstanceInfo_t gii;
    OK(N(nvmlGpuInstanceGetInfo)(m->gi, &gii));
    CHECK(gii.id == 7 + s && gii.placement.start == s);
    nvmlComputeInstanceProfileInfo_t cp;
    OK(N(nvmlGpuInstanceGetComputeInstanceProfileInfo)(m->gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 0, &cp));
    OK(N(nvmlGpuInstanceCreateComputeInstance)(m->gi, cp.id, &m->ci));
    nvmlComputeInstanceInfo_t cii;
    OK(N(nvmlComputeInstanceGetInfo_v2)(m->ci, &cii));
    CHECK(cii.gpuInstance == m->gi && cii.id == 0 && cii.placement.start == 0 && cii.placement.size == 1);
    m->mig = cii.device;
    unsigned is;
    OK(N(nvmlDeviceIsMigDeviceHandle)(m->mig, &is));
    CHECK(is == 1);
    OK(N(nvmlDeviceGetUUID)(m->mig, m->uuid, sizeof(m->uuid)));
    CHECK(strncmp(m->uuid, "MIG-", 4) == 0 && strlen(m->uuid) == 40);
    nvmlDevice_t back;
    OK(N(nvmlDeviceGetHandleByUUID)(m->uuid, &back));
    CHECK(back == m->mig);
    char name[96];
    OK(N(nvmlDeviceGetName)(m->mig, name, sizeof(name)));
    STREQ(name, "NVIDIA A100-SXM4-40GB MIG 1g.5gb");
}

static void unmake(struct made *m)
{
    OK(N(nvmlComputeInstanceDestroy)(m->ci));
    nvmlComputeInstanceInfo_t cii;
    RET(N(nvmlComputeInstanceGetInfo_v2)(m->ci, &cii), NVML_ERROR_NOT_FOUND);
    char uuid[96];
    RET(N(nvmlDeviceGetUUID)(m->mig, uuid, sizeof(uuid)), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlGpuInstanceDestroy)(m->gi));
    nvmlGpuInstanceInfo_t gii;
    RET(N(nvmlGpuInstanceGetInfo)(m->gi, &gii), NVML_ERROR_NOT_FOUND);
    RET(N(nvmlGpuInstanceDestroy)(m->gi), NVML_ERROR_NOT_FOUND);
}

static void setup_env(void)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/state", tmpdir);
    setenv("MOCK_NVML_STATE", p, 1);
    snprintf(p, sizeof(p), "%s/proc", tmpdir);
    setenv("MOCK_NVML_PROC_ROOT", p, 1);
    snprintf(p, sizeof(p), "%s/dev", tmpdir);
    setenv("MOCK_NVML_DEV_ROOT", p, 1);
    snprintf(fifo, sizeof(fifo), "%s/ctl", tmpdir);
    snprintf(ackf, sizeof(ackf), "%s/ack", tmpdir);
    setenv("MOCK_NVML_CONTROL", fifo, 1);
    setenv("MOCK_NVML_CONTROL_ACK", ackf, 1);
}

static void case_carve_a100(void)
{
    use_profile("a100-40gb-mig-empty.yaml");
    setup_env();
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(0);
    unsigned cur, pend;
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_ENABLE);
    check_state(gpu, 0);
    /* invalid placements and profiles */
    nvmlGpuInstance_t gi;
    nvmlGpuInstancePlacement_t bad[] = { { 7, 1 }, { 1, 2 }, { 8, 1 } };
    for (unsigned i = 0; i < 3; i++)
        RET(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, GI_1G, &bad[i], &gi), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstancePlacement_t pl2 = { 6, 2 };
    RET(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 14, &pl2, &gi), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, 99, &gi), NVML_ERROR_INVALID_ARGUMENT);
    /* all seven 1g.5gb placements */
    struct made made[7];
    unsigned mask = 0;
    for (unsigned s = 0; s < 7; s++) {
        make_1g(gpu, s, &made[s]);
        mask |= 1u << s;
        check_state(gpu, mask);
        for (unsigned k = 0; k < s; k++)
            CHECK(strcmp(made[k].uuid, made[s].uuid) != 0);
    }
    /* occupied, overlapping, budget */
    nvmlGpuInstancePlacement_t again = { 3, 1 }, over = { 2, 2 };
    RET(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, GI_1G, &again, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    RET(N(nvmlDeviceCreateGpuInstanceWithPlacement)(gpu, 14, &over, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, GI_1G, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    nvmlComputeInstance_t ci;
    RET(N(nvmlGpuInstanceCreateComputeInstance)(made[0].gi, 0, &ci), NVML_ERROR_INSUFFICIENT_RESOURCES);
    unsigned rem;
    OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, 14, &rem));
    CHECK(rem == 0);
    OK(N(nvmlGpuInstanceGetComputeInstanceRemainingCapacity)(made[0].gi, 0, &rem));
    CHECK(rem == 0);
    /* in use: a GI with a CI, a busy MIG device, SetMigMode with GIs */
    RET(N(nvmlGpuInstanceDestroy)(made[2].gi), NVML_ERROR_IN_USE);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "busy %s 1", made[2].uuid);
    send_acked(cmd);
    RET(N(nvmlComputeInstanceDestroy)(made[2].ci), NVML_ERROR_IN_USE);
    snprintf(cmd, sizeof(cmd), "busy %s 0", made[2].uuid);
    send_acked(cmd);
    nvmlReturn_t act;
    RET(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act), NVML_ERROR_IN_USE);
    /* destroy in random order */
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid(), order[7];
    fprintf(stderr, "seed %u\n", seed);
    srand(seed);
    for (unsigned i = 0; i < 7; i++)
        order[i] = i;
    for (unsigned i = 6; i > 0; i--) {
        unsigned j = (unsigned)rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (unsigned i = 0; i < 7; i++) {
        unmake(&made[order[i]]);
        mask &= ~(1u << order[i]);
        check_state(gpu, mask);
        if (i == 3) {
            /* ids come back with the placement; the MIG UUID is fresh */
            struct made re;
            make_1g(gpu, order[i], &re);
            CHECK(strcmp(re.uuid, made[order[i]].uuid) != 0);
            check_state(gpu, mask | 1u << order[i]);
            unmake(&re);
            check_state(gpu, mask);
        }
    }
    /* default placements: two 3g.20gb at 0 and 4 (GI ids 1, 2), three 1-slice CIs each */
    nvmlGpuInstance_t g3[2];
    for (unsigned k = 0; k < 2; k++) {
        OK(N(nvmlDeviceCreateGpuInstance)(gpu, 9, &g3[k]));
        nvmlGpuInstanceInfo_t info;
        OK(N(nvmlGpuInstanceGetInfo)(g3[k], &info));
        CHECK(info.id == 1 + k && info.placement.start == 4 * k && info.placement.size == 4);
        CHECK(exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/access", 0, 1 + k));
    }
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, 9, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(N(nvmlDeviceGetGpuInstanceRemainingCapacity)(gpu, GI_1G, &rem));
    CHECK(rem == 0);
    nvmlComputeInstance_t cis[3];
    for (unsigned k = 0; k < 3; k++) {
        OK(N(nvmlGpuInstanceCreateComputeInstance)(g3[1], 0, &cis[k]));
        nvmlComputeInstanceInfo_t cii;
        OK(N(nvmlComputeInstanceGetInfo_v2)(cis[k], &cii));
        CHECK(cii.id == k && cii.placement.start == k);
        CHECK(exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", 0, 2, k));
    }
    RET(N(nvmlGpuInstanceCreateComputeInstance)(g3[1], 0, &ci), NVML_ERROR_INSUFFICIENT_RESOURCES);
    nvmlComputeInstancePlacement_t cpl = { 0, 1 };
    RET(N(nvmlGpuInstanceCreateComputeInstanceWithPlacement)(g3[1], 0, &cpl, &ci), NVML_ERROR_INSUFFICIENT_RESOURCES);
    OK(N(nvmlComputeInstanceDestroy)(cis[1]));
    CHECK(!exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", 0, 2, 1));
    cpl.start = 1;
    OK(N(nvmlGpuInstanceCreateComputeInstanceWithPlacement)(g3[1], 0, &cpl, &cis[1]));
    nvmlComputeInstanceInfo_t cii;
    OK(N(nvmlComputeInstanceGetInfo_v2)(cis[1], &cii));
    CHECK(cii.id == 1); /* reused */
    for (unsigned k = 0; k < 3; k++)
        OK(N(nvmlComputeInstanceDestroy)(cis[k]));
    for (unsigned k = 0; k < 2; k++)
        OK(N(nvmlGpuInstanceDestroy)(g3[k]));
    CHECK(!exists("proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/access", 0, 2));
    OK(N(nvmlShutdown)());
}

/* Ampere: enabling is pending until a reset; GI calls NOT_SUPPORTED until then. */
static void case_carve_ampere_mode(void)
{
    unsetenv("MOCK_NVML_CONFIG"); /* the built-in DGX A100, MIG off */
    setup_env();
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(1);
    unsigned cur, pend;
    nvmlReturn_t act = NVML_SUCCESS;
    nvmlGpuInstance_t gi;
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, GI_1G, &gi), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_ENABLE, &act));
    CHECK(act == NVML_ERROR_RESET_REQUIRED);
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_DISABLE && pend == NVML_DEVICE_MIG_ENABLE);
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, GI_1G, &gi), NVML_ERROR_NOT_SUPPORTED);
    unsigned n;
    RET(N(nvmlDeviceGetGpuInstances)(gpu, GI_1G, &gi, &n), NVML_ERROR_NOT_SUPPORTED);
    send_acked("reset GPU-12345678-1234-1234-1234-123456780001");
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_ENABLE);
    OK(N(nvmlDeviceCreateGpuInstance)(gpu, GI_1G, &gi));
    nvmlGpuInstanceInfo_t info;
    OK(N(nvmlGpuInstanceGetInfo)(gi, &info));
    CHECK(info.id == 7 && info.placement.start == 0);
    /* other GPUs untouched */
    OK(N(nvmlDeviceGetMigMode)(dev(0), &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_DISABLE && pend == NVML_DEVICE_MIG_DISABLE);
    RET(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act), NVML_ERROR_IN_USE);
    OK(N(nvmlGpuInstanceDestroy)(gi));
    OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act));
    CHECK(act == NVML_ERROR_RESET_REQUIRED);
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_DISABLE);
    RET(N(nvmlDeviceSetMigMode)(gpu, 2, &act), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

/* Hopper: immediate; a GPU without MIG: NOT_SUPPORTED. */
static void case_carve_hopper_mode(void)
{
    const char *prof = write_tmp("h100-t4.yaml",
        "devices:\n"
        "  - {uuid: GPU-h100, name: NVIDIA H100 80GB HBM3, architecture: hopper,\n"
        "     compute_capability: {major: 9}, memory: {total_bytes: 85899345920}}\n"
        "  - {uuid: GPU-t4, name: Tesla T4, architecture: turing, compute_capability: {major: 7, minor: 5}}\n");
    setenv("MOCK_NVML_CONFIG", prof, 1);
    setup_env();
    load();
    OK(N(nvmlInit_v2)());
    nvmlDevice_t gpu = dev(0), t4 = dev(1);
    unsigned cur, pend;
    nvmlReturn_t act = NVML_ERROR_UNKNOWN;
    RET(N(nvmlDeviceGetMigMode)(t4, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    RET(N(nvmlDeviceSetMigMode)(t4, NVML_DEVICE_MIG_ENABLE, &act), NVML_ERROR_NOT_SUPPORTED);
    OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_ENABLE, &act));
    CHECK(act == NVML_SUCCESS);
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_ENABLE);
    nvmlGpuInstance_t gi;
    OK(N(nvmlDeviceCreateGpuInstance)(gpu, 0, &gi)); /* 7g.80gb */
    nvmlGpuInstanceInfo_t info;
    OK(N(nvmlGpuInstanceGetInfo)(gi, &info));
    CHECK(info.id == 0 && info.placement.start == 0 && info.placement.size == 8);
    RET(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act), NVML_ERROR_IN_USE);
    OK(N(nvmlGpuInstanceDestroy)(gi));
    send_acked("busy GPU-h100 1");
    RET(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act), NVML_ERROR_IN_USE);
    send_acked("busy GPU-h100 0");
    OK(N(nvmlDeviceSetMigMode)(gpu, NVML_DEVICE_MIG_DISABLE, &act));
    OK(N(nvmlDeviceGetMigMode)(gpu, &cur, &pend));
    CHECK(cur == NVML_DEVICE_MIG_DISABLE && pend == NVML_DEVICE_MIG_DISABLE && act == NVML_SUCCESS);
    RET(N(nvmlDeviceCreateGpuInstance)(gpu, 0, &gi), NVML_ERROR_NOT_SUPPORTED);
    STREQ(N(nvmlErrorString)(NVML_ERROR_INSUFFICIENT_RESOURCES), "Insufficient Resources");
    STREQ(N(nvmlErrorString)(NVML_ERROR_IN_USE), "In use by another client");
    STREQ(N(nvmlErrorString)(NVML_ERROR_NOT_FOUND), "Not Found");
    OK(N(nvmlShutdown)());
}

int carve_shared(void);
int carve_models(const char *profile);
int carve_speed(void);
static void case_carve_shared(void) { CHECK(carve_shared() == 0); }
static void case_carve_speed(void) { CHECK(carve_speed() == 0); }
static void case_carve_h100(void) { CHECK(carve_models("h100-1-mig-off.yaml") == 0); }
static void case_carve_h200(void) { CHECK(carve_models("h200.yaml") == 0); }
static void case_carve_b200(void) { CHECK(carve_models("b200.yaml") == 0); }
static void case_carve_a30(void) { CHECK(carve_models("a30.yaml") == 0); }
static void case_carve_a100_80gb(void) { CHECK(carve_models("a100-80gb.yaml") == 0); }

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "carve-a100", case_carve_a100 },
        { "carve-ampere-mode", case_carve_ampere_mode },
        { "carve-hopper-mode", case_carve_hopper_mode },
        { "carve-shared", case_carve_shared },
        { "carve-speed", case_carve_speed },
        { "carve-h100", case_carve_h100 },
        { "carve-h200", case_carve_h200 },
        { "carve-b200", case_carve_b200 },
        { "carve-a30", case_carve_a30 },
        { "carve-a100-80gb", case_carve_a100_80gb },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
