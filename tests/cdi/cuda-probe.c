/* cuda-probe: does this process get a working CUDA driver? The check a container built
 * from our CDI spec runs, on the simulated node (the libcuda stand-in) and on a real GPU
 * node alike, so it uses the driver API only as NVIDIA documents it:
 *
 *   dlopen("libcuda.so.1") by SONAME (as the CUDA runtime does), cuInit(0), then
 *   "count N" and "gpu <i> <name> <uuid>" per device (the UUID as nvidia-smi prints it,
 *   GPU-... or MIG-...), then per device: retain the primary context, make it current,
 *   cuMemAlloc 1 MiB, free it, release; "memalloc ok".
 *
 * cuda-probe MIB...: then, on device 0 with its primary context current, one cuMemAlloc of
 * each MIB MiB, freed before the next: "alloc <MIB> MiB ok" or "alloc <MIB> MiB failed:
 * <CUresult name> (<number>)"; a refused allocation is a result, not an error (gpu-smoke's
 * shares: within a share allocated, beyond it refused).
 *
 * Exit 0, or 1 with one line on stderr naming the failing call and dlerror() or the CUDA
 * error's name and text. Links glibc only. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cuda/cuda-abi.h"

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "cuda-probe: dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

static __typeof__(&cuGetErrorName) get_error_name;
static __typeof__(&cuGetErrorString) get_error_string;

static void check(CUresult r, const char *call)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL, *text = NULL;
    get_error_name(r, &name);
    get_error_string(r, &text);
    fprintf(stderr, "cuda-probe: %s: %s (%d): %s\n", call, name ? name : "unknown CUresult", r,
            text ? text : "no description");
    exit(1);
}

/* CUDA reports 16 bytes; whether they name a MIG device shows in the device's name, which
 * CUDA gives as "<GPU name> MIG <profile>" for one. */
static void format_uuid(const CUuuid *u, const char *name, char *out, size_t len)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(out, len,
             "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             strstr(name, " MIG ") ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8],
             b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int main(int argc, char **argv)
{
    for (int a = 1; a < argc; a++) {
        char *end;
        unsigned long long mib = strtoull(argv[a], &end, 10);
        if (!*argv[a] || *end || mib == 0 || mib > (1ull << 30)) {
            fprintf(stderr, "cuda-probe: %s: not a size in MiB (usage: cuda-probe [MIB...])\n", argv[a]);
            return 1;
        }
    }
    lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "cuda-probe: dlopen libcuda.so.1: %s\n", dlerror());
        return 1;
    }
    get_error_name = sym("cuGetErrorName");
    get_error_string = sym("cuGetErrorString");
    __typeof__(&cuInit) init = sym("cuInit");
    __typeof__(&cuDeviceGetCount) get_count = sym("cuDeviceGetCount");
    __typeof__(&cuDeviceGet) get = sym("cuDeviceGet");
    __typeof__(&cuDeviceGetName) get_name = sym("cuDeviceGetName");
    __typeof__(&cuDeviceGetUuid_v2) get_uuid = sym("cuDeviceGetUuid_v2");
    __typeof__(&cuDevicePrimaryCtxRetain) retain = sym("cuDevicePrimaryCtxRetain");
    __typeof__(&cuDevicePrimaryCtxRelease_v2) release = sym("cuDevicePrimaryCtxRelease_v2");
    __typeof__(&cuCtxSetCurrent) set_current = sym("cuCtxSetCurrent");
    __typeof__(&cuMemAlloc_v2) mem_alloc = sym("cuMemAlloc_v2");
    __typeof__(&cuMemFree_v2) mem_free = sym("cuMemFree_v2");

    check(init(0), "cuInit");
    int n = 0;
    check(get_count(&n), "cuDeviceGetCount");
    printf("count %d\n", n);
    for (int i = 0; i < n; i++) {
        CUdevice dev;
        char name[256], uuid[64];
        CUuuid u;
        check(get(&dev, i), "cuDeviceGet");
        check(get_name(name, sizeof(name), dev), "cuDeviceGetName");
        check(get_uuid(&u, dev), "cuDeviceGetUuid_v2");
        format_uuid(&u, name, uuid, sizeof(uuid));
        printf("gpu %d %s %s\n", i, name, uuid);
    }
    fflush(stdout);
    for (int i = 0; i < n; i++) {
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        check(get(&dev, i), "cuDeviceGet");
        check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
        check(set_current(ctx), "cuCtxSetCurrent");
        check(mem_alloc(&p, 1 << 20), "cuMemAlloc_v2");
        check(mem_free(p), "cuMemFree_v2");
        check(set_current(NULL), "cuCtxSetCurrent");
        check(release(dev), "cuDevicePrimaryCtxRelease_v2");
    }
    printf("memalloc ok\n");
    if (argc > 1) {
        CUdevice dev;
        CUcontext ctx;
        check(n > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE, "allocating: no device");
        check(get(&dev, 0), "cuDeviceGet");
        check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
        check(set_current(ctx), "cuCtxSetCurrent");
        for (int a = 1; a < argc; a++) {
            unsigned long long mib = strtoull(argv[a], NULL, 10);
            CUdeviceptr p;
            CUresult r = mem_alloc(&p, (size_t)mib << 20);
            if (r == CUDA_SUCCESS) {
                printf("alloc %llu MiB ok\n", mib);
                check(mem_free(p), "cuMemFree_v2");
            } else {
                const char *name = NULL;
                get_error_name(r, &name);
                printf("alloc %llu MiB failed: %s (%d)\n", mib, name ? name : "unknown CUresult", r);
            }
            fflush(stdout);
        }
        check(set_current(NULL), "cuCtxSetCurrent");
        check(release(dev), "cuDevicePrimaryCtxRelease_v2");
    }
    return 0;
}
