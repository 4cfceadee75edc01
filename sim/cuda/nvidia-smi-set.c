/* nvidia-smi stand-in, the settings an MPS or time-slicing setup uses (docs/simulator.md,
 * "nvidia-smi"): `[-i <id>] -c <mode>` through NVML's nvmlDeviceSetComputeMode, as the real
 * tool does (so the NVML simulator's settings log shows it), and, in recording mode only,
 * `compute-policy [-i <id>] --set-timeslice <0..3>` (accepted and recorded, nothing kept).
 * These act on NVML's GPUs directly, without the open rule: a host tool run as root. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nvidia-smi.h"
#include "nvml/nvml-abi.h"

struct fns {
    __typeof__(&nvmlInit_v2) init;
    __typeof__(&nvmlShutdown) shutdown;
    __typeof__(&nvmlErrorString) error_string;
    __typeof__(&nvmlDeviceGetCount_v2) count;
    __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index;
    __typeof__(&nvmlDeviceGetHandleByUUID) by_uuid;
    __typeof__(&nvmlDeviceGetHandleByPciBusId_v2) by_bus;
    __typeof__(&nvmlDeviceGetPciInfo_v3) pci;
    __typeof__(&nvmlDeviceSetComputeMode) set_mode;
};

/* The real tool's exit codes for NVML errors. */
static int exit_code(nvmlReturn_t r)
{
    switch (r) {
    case NVML_ERROR_INVALID_ARGUMENT: return 2;
    case NVML_ERROR_NOT_SUPPORTED: return 3;
    case NVML_ERROR_NO_PERMISSION: return 4;
    case NVML_ERROR_NOT_FOUND: return 6;
    case NVML_ERROR_DRIVER_NOT_LOADED: return 9;
    case NVML_ERROR_GPU_IS_LOST: return 15;
    default: return 255;
    }
}

static int load(struct fns *f)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "nvidia-smi (simulated): cannot use the NVML library: %s\n", dlerror());
        return 12;
    }
#define SYM(field, name)                                                              \
    do {                                                                              \
        void *p_ = dlsym(lib, #name);                                                 \
        if (!p_) {                                                                    \
            fprintf(stderr, "nvidia-smi (simulated): %s missing\n", #name);          \
            return 12;                                                                \
        }                                                                             \
        memcpy(&f->field, &p_, sizeof(p_));                                           \
    } while (0)
    SYM(init, nvmlInit_v2);
    SYM(shutdown, nvmlShutdown);
    SYM(error_string, nvmlErrorString);
    SYM(count, nvmlDeviceGetCount_v2);
    SYM(by_index, nvmlDeviceGetHandleByIndex_v2);
    SYM(by_uuid, nvmlDeviceGetHandleByUUID);
    SYM(by_bus, nvmlDeviceGetHandleByPciBusId_v2);
    SYM(pci, nvmlDeviceGetPciInfo_v3);
    SYM(set_mode, nvmlDeviceSetComputeMode);
#undef SYM
    nvmlReturn_t r = f->init();
    if (r != NVML_SUCCESS) {
        fprintf(stderr, "nvidia-smi (simulated): cannot talk to the driver: %s\n", f->error_string(r));
        return exit_code(r);
    }
    return 0;
}

/* The GPUs `ids` names (comma-separated indexes, UUIDs or PCI bus ids; NULL: all). */
static int resolve(struct fns *f, const char *ids, nvmlDevice_t *out, unsigned *n, unsigned max)
{
    *n = 0;
    if (!ids) {
        unsigned count = 0;
        nvmlReturn_t r = f->count(&count);
        for (unsigned i = 0; r == NVML_SUCCESS && i < count && *n < max; i++)
            r = f->by_index(i, &out[(*n)++]);
        return r == NVML_SUCCESS ? 0 : exit_code(r);
    }
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", ids);
    for (char *save = NULL, *id = strtok_r(buf, ",", &save); id && *n < max; id = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long i = strtoul(id, &end, 10);
        nvmlReturn_t r = *end == 0 && end != id ? f->by_index((unsigned)i, &out[*n])
                         : strncasecmp(id, "GPU-", 4) == 0 || strncasecmp(id, "MIG-", 4) == 0
                             ? f->by_uuid(id, &out[*n])
                             : f->by_bus(id, &out[*n]);
        if (r != NVML_SUCCESS) {
            fprintf(stderr, "No devices were found matching %s\n", id);
            return 6;
        }
        (*n)++;
    }
    return 0;
}

static const char *const modes[] = { "DEFAULT", "EXCLUSIVE_THREAD", "PROHIBITED", "EXCLUSIVE_PROCESS" };

int smi_compute_mode(const char *ids, const char *mode)
{
    int m = -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(mode, modes[i]) == 0 || (mode[0] == '0' + i && !mode[1]))
            m = i;
    if (m < 0) {
        fprintf(stderr, "Invalid compute mode: %s\n", mode);
        return 2;
    }
    struct fns f;
    int r = load(&f);
    if (r)
        return r;
    nvmlDevice_t devs[64];
    unsigned n;
    r = resolve(&f, ids, devs, &n, 64);
    for (unsigned i = 0; !r && i < n; i++) {
        nvmlPciInfo_t pci = { 0 };
        f.pci(devs[i], &pci);
        nvmlReturn_t e = f.set_mode(devs[i], (nvmlComputeMode_t)m);
        if (e != NVML_SUCCESS) {
            fprintf(stderr, "Unable to set the compute mode for GPU %s: %s\n", pci.busId, f.error_string(e));
            r = exit_code(e);
            break;
        }
        printf("Set compute mode to %s for GPU %s.\n", modes[m], pci.busId);
    }
    if (!r)
        printf("All done.\n");
    f.shutdown();
    return r;
}

int smi_timeslice(const char *ids, const char *value)
{
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || end == value || v < 0 || v > 3) {
        fprintf(stderr, "Invalid timeslice value: %s (want 0..3)\n", value);
        return 2;
    }
    struct fns f;
    int r = load(&f);
    if (r)
        return r;
    nvmlDevice_t devs[64];
    unsigned n;
    r = resolve(&f, ids, devs, &n, 64);
    for (unsigned i = 0; !r && i < n; i++) {
        nvmlPciInfo_t pci = { 0 };
        f.pci(devs[i], &pci);
        printf("Set timeslice to %ld for GPU %s.\n", v, pci.busId);
    }
    f.shutdown();
    return r;
}
