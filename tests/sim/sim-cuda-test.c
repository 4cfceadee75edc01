/* Helpers of the MPS and memory-limit tests (sim-cuda-test.h). */
#include <errno.h>
#include <sys/wait.h>

#include "sim-cuda-test.h"

void *cuda;

void *csym(const char *name)
{
    void *p = dlsym(cuda, name);
    if (!p)
        FAIL("dlsym %s: %s", name, dlerror());
    return p;
}

void host_setup(const char *driver)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "system: {driver_version: \"%s\", cuda_version: \"13.4\"}\n"
             "devices:\n"
             "  - {uuid: " GPU0 ", name: \"NVIDIA H100 80GB HBM3\", compute_capability: {major: 9},\n"
             "     memory: {total_bytes: 85899345920}, pci: {bus_id: \"0000:18:00.0\"}, minor_number: 0}\n"
             "  - {uuid: " GPU1 ", name: \"NVIDIA H100 80GB HBM3\", compute_capability: {major: 9},\n"
             "     memory: {total_bytes: 85899345920}, pci: {bus_id: \"0000:2a:00.0\"}, minor_number: 1}\n"
             "  - {uuid: " GPU2 ", name: \"NVIDIA H100 80GB HBM3\", compute_capability: {major: 9},\n"
             "     memory: {total_bytes: 85899345920}, pci: {bus_id: \"0000:3b:00.0\"}, minor_number: 2,\n"
             "     mig: {mode_current: enabled}}\n",
             driver);
    setenv("MOCK_NVML_CONFIG", write_tmp("host.yaml", text), 1);
    char dev[512];
    snprintf(dev, sizeof(dev), "%s/dev", tmpdir);
    CHECK(mkdir(dev, 0755) == 0);
    setenv("MOCK_DRIVER_DEV_ROOT", dev, 1);
    write_tmp("dev/nvidia0", "");
    write_tmp("dev/nvidia1", "");
    static const char *const vars[] = { "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES",
                                        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                                        "CUDA_MPS_PROTOCOL_VERSION", "MOCK_MPS_LOG", "MOCK_CUDA_MPS_DEBUG",
                                        "MOCK_NVML_CGROUP_ROOT", "MOCK_NVML_CGROUP_VERSION", "MOCK_CUDA_CGROUP",
                                        "MOCK_NVIDIA_SMI_LOG", "MOCK_NVML_SETTINGS_LOG", "MOCK_NVML_STATE" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    /* The tools the tests run load libnvidia-ml.so.1 by its SONAME. */
    setenv("LD_LIBRARY_PATH", path_of("GDP_BUILD_DIR", "sim/nvml"), 1);
}

void load_cuda(void)
{
    lib = dlopen(path_of("GDP_BUILD_DIR", "sim/nvml/libnvidia-ml.so.1"), RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        FAIL("dlopen NVML: %s", dlerror());
    cuda = dlopen(path_of("GDP_BUILD_DIR", "sim/cuda/libcuda.so.1"), RTLD_NOW);
    if (!cuda)
        FAIL("dlopen libcuda: %s", dlerror());
}

void cuda_ctx(int i)
{
    CU(C(cuInit)(0), CUDA_SUCCESS);
    CUdevice d;
    CUcontext ctx;
    CU(C(cuDeviceGet)(&d, i), CUDA_SUCCESS);
    CU(C(cuDevicePrimaryCtxRetain)(&ctx, d), CUDA_SUCCESS);
    CU(C(cuCtxSetCurrent)(ctx), CUDA_SUCCESS);
}

CUresult cu_alloc(unsigned long long bytes, CUdeviceptr *p)
{
    CUdeviceptr dummy;
    return C(cuMemAlloc_v2)(p ? p : &dummy, bytes);
}

int run_tool(const char *tool, const char *const *argv, const char *in, char *out, size_t outlen)
{
    char exe[1024];
    if (tool[0] == '/')
        snprintf(exe, sizeof(exe), "%s", tool);
    else
        snprintf(exe, sizeof(exe), "%s", path_of("GDP_BUILD_DIR", tool));
    int pin[2], pout[2];
    CHECK(pipe(pin) == 0 && pipe(pout) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        close(pin[1]);
        close(pout[0]);
        const char *args[32] = { exe };
        for (int i = 0; argv && argv[i] && i < 30; i++)
            args[i + 1] = argv[i];
        execv(exe, (char *const *)args);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    if (in && write(pin[1], in, strlen(in)) != (ssize_t)strlen(in))
        FAIL("write stdin");
    close(pin[1]);
    size_t got = 0;
    ssize_t r;
    while ((r = read(pout[0], out + got, outlen - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = 0;
    close(pout[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        CHECK(errno == EINTR);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return strdup("");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return buf;
}
