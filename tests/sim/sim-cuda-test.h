/* Shared by the MPS and memory-limit tests (test-sim-mps.c, test-sim-memlimits.c): a
 * simulated host with three GPUs on an r615 driver, the libcuda stand-in loaded in this
 * process as a CUDA program loads it, and the stand-in tools run as children. */
#pragma once

#include "sim-test.h"
#include "sim/cuda/cuda-abi.h"
#include "tests/common/scratch.h"

#define GPU0 "GPU-aaaaaaaa-0000-4000-8000-000000000000"
#define GPU1 "GPU-aaaaaaaa-0000-4000-8000-000000000001"
#define GPU2 "GPU-aaaaaaaa-0000-4000-8000-000000000002" /* MIG mode on */
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

extern void *cuda;
void *csym(const char *name);
#define C(name) ((__typeof__(&name))csym(#name))
#define CU(expr, want)                                                                \
    do {                                                                              \
        CUresult r_ = (expr);                                                         \
        if (r_ != (want))                                                             \
            FAIL("%s returned %d, want %d", #expr, r_, (want));                       \
    } while (0)

/* Write the profile (driver `driver`), point MOCK_NVML_CONFIG at it, make /dev/nvidia0
 * and 1 (MOCK_DRIVER_DEV_ROOT) and clear the MPS/cgroup variables of the caller's env. */
void host_setup(const char *driver);
/* dlopen the NVML simulator (into `lib`, RTLD_GLOBAL: libcuda's dlopen of the SONAME finds
 * it) and the libcuda stand-in (into `cuda`). */
void load_cuda(void);
/* cuInit, and retain + make current device i's primary context. */
void cuda_ctx(int i);
/* Allocate on the current context: the result code; *p the address. */
CUresult cu_alloc(unsigned long long bytes, CUdeviceptr *p);

/* Run build/sim/cuda/<tool> (or an absolute path) with argv (NULL-terminated) and `in`
 * on stdin; stdout into out (NUL-terminated). The exit status. */
int run_tool(const char *tool, const char *const *argv, const char *in, char *out, size_t outlen);
/* The whole file (malloc'd), or "" when absent. */
char *slurp(const char *path);
/* Compare, printing both on a mismatch. */
#define TEXT_EQ(got, want)                                                            \
    do {                                                                              \
        if (strcmp((got), (want)))                                                    \
            FAIL("got:\n%s\nwant:\n%s", (got), (want));                               \
    } while (0)
