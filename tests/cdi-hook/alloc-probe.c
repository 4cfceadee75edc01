/* alloc-probe <bytes>: allocate that much on CUDA device 0 through the driver API (the
 * libcuda stand-in, which honours its cgroup's hard memory limit). Prints "total <bytes>"
 * (cuMemGetInfo) then "alloc ok" (exit 0) or "alloc failed <CUresult name>" (exit 3);
 * 1 when CUDA itself cannot be reached. Links glibc only. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/cuda/cuda-abi.h"

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "alloc-probe: dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: alloc-probe <bytes>\n");
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 10);
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "alloc-probe: dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    __typeof__(&cuGetErrorName) error_name = sym("cuGetErrorName");
    __typeof__(&cuInit) init = sym("cuInit");
    __typeof__(&cuDeviceGet) get = sym("cuDeviceGet");
    __typeof__(&cuDevicePrimaryCtxRetain) retain = sym("cuDevicePrimaryCtxRetain");
    __typeof__(&cuCtxSetCurrent) set_current = sym("cuCtxSetCurrent");
    __typeof__(&cuMemGetInfo_v2) mem_info = sym("cuMemGetInfo_v2");
    __typeof__(&cuMemAlloc_v2) mem_alloc = sym("cuMemAlloc_v2");
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    size_t free_b = 0, total = 0;
    if (init(0) || get(&dev, 0) || retain(&ctx, dev) || set_current(ctx) ||
        mem_info(&free_b, &total)) {
        fprintf(stderr, "alloc-probe: no CUDA device 0\n");
        return 1;
    }
    printf("total %zu\n", total);
    CUresult r = mem_alloc(&p, bytes);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        error_name(r, &name);
        printf("alloc failed %s\n", name ? name : "?");
        return 3;
    }
    printf("alloc ok\n");
    return 0;
}
