/* nvmlDeviceSetMemoryLimits_v1 / GetMemoryLimits_v1 on the simulated host and the libcuda
 * stand-in failing an allocation over its cgroup's hard limit (docs/simulator.md, "Memory
 * limits per cgroup"). One process per case (`test-sim-memlimits <case>`). */
#include "sim-cuda-test.h"

static char root[512];

/* A cgroup v2 tree under tmpdir standing for /sys/fs/cgroup: kubepods/pod1/ctr1, ctr2. */
static void cgroups(bool v2)
{
    snprintf(root, sizeof(root), "%s/cg", tmpdir);
    char p[700];
    const char *dirs[] = { "", "/kubepods", "/kubepods/pod1", "/kubepods/pod1/ctr1", "/kubepods/pod1/ctr2" };
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
        CHECK(mkdir(p, 0755) == 0);
    }
    if (v2)
        write_tmp("cg/cgroup.controllers", "cpuset cpu io memory pids\n");
    setenv("MOCK_NVML_CGROUP_ROOT", root, 1);
}

static nvmlReturn_t set(unsigned gpu, const char *ns, unsigned long long soft, unsigned long long hard)
{
    nvmlSetMemoryLimits_v1_t l = { .nameSpace = ns, .softLimit = soft, .hardLimit = hard };
    return N(nvmlDeviceSetMemoryLimits_v1)(dev(gpu), &l);
}

static nvmlGetMemoryLimits_v1_t get(unsigned gpu, const char *ns)
{
    nvmlGetMemoryLimits_v1_t l = { .nameSpace = ns };
    OK(N(nvmlDeviceGetMemoryLimits_v1)(dev(gpu), &l));
    return l;
}

static char *record_of(const char *rel)
{
    char p[800];
    snprintf(p, sizeof(p), "%s/%s/nvidia-sim.memory-limits", root, rel);
    return slurp(p);
}

#define CTR1 "/sys/fs/cgroup/kubepods/pod1/ctr1"

static void case_set(void)
{
    host_setup("615.20.01");
    cgroups(true);
    char settings[600];
    snprintf(settings, sizeof(settings), "%s/settings.log", tmpdir);
    setenv("MOCK_NVML_SETTINGS_LOG", settings, 1);
    load_cuda();
    OK(N(nvmlInit_v2)());
    OK(set(0, CTR1, 0, 8 * GiB));
    OK(set(1, CTR1 "/", GiB, 2 * GiB));
    char *r = record_of("kubepods/pod1/ctr1");
    TEXT_EQ(r, GPU0 " 0 8589934592\n" GPU1 " 1073741824 2147483648\n");
    free(r);
    nvmlGetMemoryLimits_v1_t g = get(1, CTR1);
    CHECK(g.softLimit == GiB && g.hardLimit == 2 * GiB && g.currentUsed == 0);
    /* A cgroup without limits reads back as "no limit". */
    g = get(0, "/sys/fs/cgroup/kubepods/pod1/ctr2");
    CHECK(g.softLimit == 0 && g.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX);
    /* Setting again replaces; the path may also name the root's own directory. */
    char own[800];
    snprintf(own, sizeof(own), "%s/kubepods/pod1/ctr1", root);
    OK(set(0, own, 0, 4 * GiB));
    r = record_of("kubepods/pod1/ctr1");
    TEXT_EQ(r, GPU1 " 1073741824 2147483648\n" GPU0 " 0 4294967296\n");
    free(r);
    /* Refused: no such cgroup, outside the hierarchy, the root cgroup, no path, soft over
     * hard, a GPU in MIG mode; nothing changes. */
    RET(set(0, "/sys/fs/cgroup/kubepods/pod9", 0, GiB), NVML_ERROR_NOT_FOUND);
    RET(set(0, "/etc", 0, GiB), NVML_ERROR_INVALID_ARGUMENT);
    RET(set(0, "/sys/fs/cgroup/kubepods/../../etc", 0, GiB), NVML_ERROR_INVALID_ARGUMENT);
    RET(set(0, "/sys/fs/cgroup", 0, GiB), NVML_ERROR_NOT_SUPPORTED);
    RET(set(0, NULL, 0, GiB), NVML_ERROR_INVALID_ARGUMENT);
    RET(N(nvmlDeviceSetMemoryLimits_v1)(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    RET(set(0, CTR1, 2 * GiB, GiB), NVML_ERROR_INVALID_ARGUMENT);
    RET(set(2, CTR1, 0, GiB), NVML_ERROR_NOT_SUPPORTED);
    /* Reset (soft 0, hard max) removes the GPU's record, the last one the file. */
    OK(set(0, CTR1, 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
    r = record_of("kubepods/pod1/ctr1");
    TEXT_EQ(r, GPU1 " 1073741824 2147483648\n");
    free(r);
    OK(set(1, CTR1, 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
    char p[800];
    snprintf(p, sizeof(p), "%s/kubepods/pod1/ctr1/nvidia-sim.memory-limits", root);
    CHECK(access(p, F_OK) != 0);
    /* A soft limit alone is a record too (hard "max"). */
    OK(set(0, CTR1, GiB, NVML_DEVICE_MEMORY_LIMIT_MAX));
    r = record_of("kubepods/pod1/ctr1");
    TEXT_EQ(r, GPU0 " 1073741824 max\n");
    free(r);
    char want[2048];
    snprintf(want, sizeof(want),
             "nvmlDeviceSetMemoryLimits_v1 " GPU0 " " CTR1 " 0 8589934592\n"
             "nvmlDeviceSetMemoryLimits_v1 " GPU1 " " CTR1 "/ 1073741824 2147483648\n"
             "nvmlDeviceSetMemoryLimits_v1 " GPU0 " %s 0 4294967296\n"
             "nvmlDeviceSetMemoryLimits_v1 " GPU0 " " CTR1 " 0 max\n"
             "nvmlDeviceSetMemoryLimits_v1 " GPU1 " " CTR1 " 0 max\n"
             "nvmlDeviceSetMemoryLimits_v1 " GPU0 " " CTR1 " 1073741824 max\n",
             own);
    char *log = slurp(settings);
    TEXT_EQ(log, want);
    free(log);
}

/* Before r615, or without cgroup v2: NOT_SUPPORTED (the switches: the profile's driver
 * version; the root's cgroup.controllers, or MOCK_NVML_CGROUP_VERSION). */
static void case_unsupported(void)
{
    host_setup("580.65.06");
    cgroups(true);
    load_cuda();
    OK(N(nvmlInit_v2)());
    RET(set(0, CTR1, 0, GiB), NVML_ERROR_NOT_SUPPORTED);
    nvmlGetMemoryLimits_v1_t g = { .nameSpace = CTR1 };
    RET(N(nvmlDeviceGetMemoryLimits_v1)(dev(0), &g), NVML_ERROR_NOT_SUPPORTED);
}

static void case_cgroup_v1(void)
{
    host_setup("615.20.01");
    cgroups(false);
    load_cuda();
    OK(N(nvmlInit_v2)());
    RET(set(0, CTR1, 0, GiB), NVML_ERROR_NOT_SUPPORTED);
    setenv("MOCK_NVML_CGROUP_VERSION", "2", 1);
    OK(set(0, CTR1, 0, GiB));
    setenv("MOCK_NVML_CGROUP_VERSION", "1", 1);
    RET(set(0, CTR1, 0, GiB), NVML_ERROR_NOT_SUPPORTED);
}

/* libcuda: an allocation over the hard limit of the process's cgroup (or an ancestor's)
 * fails; limits set or cleared while the process runs count from the next allocation; a
 * GPU without a limit is unaffected; cumulative, and a free gives room back. */
static void case_alloc(void)
{
    host_setup("615.20.01");
    cgroups(true);
    char self[700];
    snprintf(self, sizeof(self), "%s/kubepods/pod1/ctr1", root);
    setenv("MOCK_CUDA_CGROUP", self, 1);
    load_cuda();
    OK(N(nvmlInit_v2)());
    OK(set(0, CTR1, 0, GiB));
    cuda_ctx(0);
    CUdeviceptr a, b;
    CU(cu_alloc(768 * MiB, &a), CUDA_SUCCESS);
    CU(cu_alloc(256 * MiB, &b), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    size_t fr, tot;
    CU(C(cuMemGetInfo_v2)(&fr, &tot), CUDA_SUCCESS);
    CHECK(fr == 0 && tot == GiB); /* a limit on its own cgroup is its total */
    CU(C(cuMemFree_v2)(a), CUDA_SUCCESS);
    CU(cu_alloc(512 * MiB, &a), CUDA_SUCCESS);
    CU(C(cuMemGetInfo_v2)(&fr, &tot), CUDA_SUCCESS);
    CHECK(fr == 256 * MiB && tot == GiB);
    /* The pod's limit bounds its containers (total stays the container's own). */
    OK(set(0, "/sys/fs/cgroup/kubepods/pod1", 0, 600 * MiB));
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CU(C(cuMemGetInfo_v2)(&fr, &tot), CUDA_SUCCESS);
    CHECK(fr == 0 && tot == GiB);
    CU(C(cuMemFree_v2)(a), CUDA_SUCCESS);
    CU(cu_alloc(300 * MiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(100 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* Another container's limit is not ours; GPU 1 has none. */
    OK(set(0, "/sys/fs/cgroup/kubepods/pod1/ctr2", 0, MiB));
    CU(cu_alloc(MiB, NULL), CUDA_SUCCESS);
    cuda_ctx(1);
    CU(cu_alloc(40 * GiB, NULL), CUDA_SUCCESS);
    /* Cleared: the GPU's memory is the bound again. */
    cuda_ctx(0);
    OK(set(0, CTR1, 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
    OK(set(0, "/sys/fs/cgroup/kubepods/pod1", 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
    CU(cu_alloc(40 * GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(40 * GiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* Without MOCK_CUDA_CGROUP the cgroup is /proc/self/cgroup's under the root. */
    unsetenv("MOCK_CUDA_CGROUP");
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
}

/* A driver root rendered with --sim-env: its NVML and libcuda, loaded with none of the
 * settings in the environment (as a runtime runs a hook), take them from the file beside
 * them; a variable in the environment still wins. */
static void case_driver_root(void)
{
    host_setup("615.20.01");
    cgroups(true);
    char drv[600], profile[600], settings[600], other[600], out[1024], a1[700], a2[700], a3[700];
    snprintf(drv, sizeof(drv), "%s/driver", tmpdir);
    snprintf(profile, sizeof(profile), "%s", getenv("MOCK_NVML_CONFIG"));
    snprintf(settings, sizeof(settings), "%s/settings.log", tmpdir);
    snprintf(other, sizeof(other), "%s/other.log", tmpdir);
    snprintf(a1, sizeof(a1), "MOCK_NVML_CONFIG=%s", profile);
    snprintf(a2, sizeof(a2), "MOCK_NVML_CGROUP_ROOT=%s", root);
    snprintf(a3, sizeof(a3), "MOCK_NVML_SETTINGS_LOG=%s", settings);
    const char *argv[] = { "--profile", profile, "--driver-root", drv, "--sim-env", a1, "--sim-env", a2,
                           "--sim-env", a3, NULL };
    CHECK(run_tool("sim/nvml/nvml-sim-render", argv, NULL, out, sizeof(out)) == 0);
    const char *bad[] = { "--profile", profile, "--driver-root", drv, "--sim-env", "PATH=/x", NULL };
    CHECK(run_tool("sim/nvml/nvml-sim-render", bad, NULL, out, sizeof(out)) == 1);
    CHECK(run_tool("sim/nvml/nvml-sim-render", argv, NULL, out, sizeof(out)) == 0);
    unsetenv("MOCK_NVML_CONFIG");
    unsetenv("MOCK_NVML_CGROUP_ROOT");
    unsetenv("MOCK_NVML_SETTINGS_LOG");
    char so[800];
    snprintf(so, sizeof(so), "%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", drv);
    lib = dlopen(so, RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        FAIL("dlopen %s: %s", so, dlerror());
    snprintf(so, sizeof(so), "%s/usr/lib/x86_64-linux-gnu/libcuda.so.1", drv);
    cuda = dlopen(so, RTLD_NOW);
    if (!cuda)
        FAIL("dlopen %s: %s", so, dlerror());
    OK(N(nvmlInit_v2)());
    char version[96];
    OK(N(nvmlSystemGetDriverVersion)(version, sizeof(version)));
    TEXT_EQ(version, "615.20.01"); /* the profile's, not the built-in node's 550 */
    OK(set(0, CTR1, 0, GiB));
    char *r = record_of("kubepods/pod1/ctr1"), *log = slurp(settings);
    TEXT_EQ(r, GPU0 " 0 1073741824\n");
    TEXT_EQ(log, "nvmlDeviceSetMemoryLimits_v1 " GPU0 " " CTR1 " 0 1073741824\n");
    free(r);
    free(log);
    /* the driver root's libcuda enforces it */
    snprintf(so, sizeof(so), "%s/kubepods/pod1/ctr1", root);
    setenv("MOCK_CUDA_CGROUP", so, 1);
    cuda_ctx(0);
    CU(cu_alloc(GiB, NULL), CUDA_SUCCESS);
    CU(cu_alloc(1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* the environment wins over the file (read at each call, as every setting) */
    setenv("MOCK_NVML_SETTINGS_LOG", other, 1);
    OK(set(0, CTR1, 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
    log = slurp(other);
    TEXT_EQ(log, "nvmlDeviceSetMemoryLimits_v1 " GPU0 " " CTR1 " 0 max\n");
    free(log);
}

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "memlimits-set", case_set },
        { "memlimits-unsupported", case_unsupported },
        { "memlimits-cgroup-v1", case_cgroup_v1 },
        { "memlimits-alloc", case_alloc },
        { "memlimits-driver-root", case_driver_root },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
