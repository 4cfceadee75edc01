/* Tests of the simulated libnvidia-ml.so.1: the shared mock profiles, init and
 * shutdown, buffer sizes, events and the control channel, profile faults, init errors,
 * malformed profiles, the exported symbols and nvml-sim-render (sim-test.h has the
 * helpers; MIG and topology are in test-sim-topo.c). */
#include <pthread.h>

#include "sim-test.h"
#include "tests/common/fixture.h"

/* ---- shared profiles */
struct expect {
    const char *profile; /* relative to GDP_TEST_DATA, NULL: built-in default */
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
        setenv("MOCK_NVML_CONFIG", fixture_check(path_of("GDP_TEST_DATA", e->profile)), 1);
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
    setenv("MOCK_NVML_CONFIG", fixture_check(path_of("GDP_TEST_DATA", "nvml-mock-profiles/t4.yaml")), 1);
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
    setenv("MOCK_NVML_CONFIG", fixture_check(path_of("GDP_TEST_DATA", "nvml-mock-profiles/a100.yaml")), 1);
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

struct bg_wait {
    nvmlEventSet_t set;
    unsigned timeout_ms;
    nvmlReturn_t r;
    nvmlEventData_t e;
};

static void *bg_wait_run(void *arg)
{
    struct bg_wait *w = arg;
    w->r = N(nvmlEventSetWait_v2)(w->set, &w->e, w->timeout_ms);
    return NULL;
}

/* A registration made while a wait is in progress on the set is not seen by that wait
 * (the conservative reading of NVML): an Xid on the new GPU does not end it, and is
 * not delivered later either; the next wait sees the GPU. */
static void pending_registration(nvmlEventSet_t set, nvmlDevice_t g)
{
    struct bg_wait w = { .set = set, .timeout_ms = 1500 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, bg_wait_run, &w) == 0);
    struct timespec ts = { 0, 300000000 };
    nanosleep(&ts, NULL); /* the wait is in progress */
    OK(N(nvmlDeviceRegisterEvents)(g, nvmlEventTypeXidCriticalError, set));
    send_acked("xid GPU-a100a100-0000-0000-0000-000000000001 43");
    CHECK(pthread_join(t, NULL) == 0);
    RET(w.r, NVML_ERROR_TIMEOUT);
    nvmlEventData_t e;
    RET(N(nvmlEventSetWait_v2)(set, &e, 0), NVML_ERROR_TIMEOUT);
    /* now live: the next wait gets it */
    send("xid GPU-a100a100-0000-0000-0000-000000000001 45");
    e = wait_event(set);
    CHECK(e.device == g && e.eventData == 45);
    wait_acks(acked + 1);
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
    pending_registration(set, g1);
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
    { "devices:\n  - {uuid: GPU-1, name: T4, compute_capability: {major: 7},\n     addressing_mode: sometimes}\n",
      "addressing_mode: unknown value 'sometimes'", 3 },
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
    /* every nvml* name NVIDIA's plugin v0.20.0 can call (docs/simulator.md) */
    FILE *f = fopen(fixture_check(path_of("GDP_SOURCE_DIR", "sim/nvml/symbols-v0.20.txt")), "re");
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
static void case_profile_a100(void) { check_profile(&a100); }
static void case_profile_h100(void) { check_profile(&h100); }
static void case_profile_t4(void) { check_profile(&t4); }
static void case_profile_default(void)
{
    struct expect d = a100;
    d.profile = NULL;
    check_profile(&d);
}

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "profile-a100", case_profile_a100 },
        { "profile-h100", case_profile_h100 },
        { "profile-t4", case_profile_t4 },
        { "profile-default", case_profile_default },
        { "init", case_init },
        { "buffers", case_buffers },
        { "events", case_events },
        { "profile-faults", case_profile_faults },
        { "init-error", case_init_error },
        { "malformed", case_malformed },
        { "symbols", case_symbols },
        { "render", case_render },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
