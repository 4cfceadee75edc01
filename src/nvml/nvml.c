/* The NVML door: dlopen, a typed symbol table, error translation.
 *
 * Symbols are resolved once at open. Required ones (what discovery cannot do without)
 * fail the open with a message naming the symbol; optional ones leave a NULL slot and
 * their wrapper answers -ENOSYS, so an old driver degrades instead of killing the
 * process the way a lazily bound missing symbol does in the reference. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/log.h"
#include "nvml-internal.h"

struct nvml_syms nvml_sym;

static pthread_mutex_t nvml_lock = PTHREAD_MUTEX_INITIALIZER;
static void *nvml_handle;
static unsigned nvml_refs;
static char nvml_path[4096];

/* Map an NVML return code to our contract and describe it. */
int nvml_fail(struct error *err, const char *fn, nvmlReturn_t r)
{
    int code;
    switch (r) {
    case NVML_ERROR_NOT_SUPPORTED: code = -ENOTSUP; break;
    case NVML_ERROR_NOT_FOUND: code = -ENOENT; break;
    case NVML_ERROR_GPU_IS_LOST: code = -ENODEV; break;
    case NVML_ERROR_TIMEOUT: code = -ETIMEDOUT; break;
    case NVML_ERROR_INVALID_ARGUMENT: code = -EINVAL; break;
    case NVML_ERROR_FUNCTION_NOT_FOUND: code = -ENOSYS; break;
    case NVML_ERROR_LIBRARY_NOT_FOUND: code = -ELIBACC; break;
    case NVML_ERROR_INSUFFICIENT_SIZE: code = -ENOBUFS; break;
    default: code = -EIO; break;
    }
    const char *text = nvml_sym.nvmlErrorString ? nvml_sym.nvmlErrorString(r) : NULL;
    return error_set(err, code, "%s: %s (NVML error %d)", fn, text ? text : "unknown error",
                     (int)r);
}

int nvml_missing(struct error *err, const char *fn)
{
    return error_set(err, -ENOSYS, "%s: not provided by %s", fn, nvml_path);
}

static void resolve_library(const char *root, char *out, size_t len)
{
    static const char *const dirs[] = {
        "usr/lib64", "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu",
        "lib64",     "lib/x86_64-linux-gnu",     "lib/aarch64-linux-gnu",
    };
    snprintf(out, len, "libnvidia-ml.so.1");
    if (!root || !*root || streq(root, "/"))
        return;
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        char candidate[4096];
        struct stat st;
        int n = snprintf(candidate, sizeof(candidate), "%s/%s/libnvidia-ml.so.1", root, dirs[i]);
        if (n < 0 || (size_t)n >= sizeof(candidate))
            continue;
        if (stat(candidate, &st) == 0) {
            char *real = realpath(candidate, NULL);
            snprintf(out, len, "%s", real ? real : candidate);
            free(real);
            return;
        }
    }
}

static void *lookup(const char *name, const char *fallback)
{
    void *p = dlsym(nvml_handle, name);
    if (!p && fallback)
        p = dlsym(nvml_handle, fallback);
    return p;
}

static int load_symbols(struct error *err)
{
#define X(name, req, fb)                                                                      \
    nvml_sym.name = (__typeof__(nvml_sym.name))lookup(#name, fb);                                       \
    if (!nvml_sym.name && (req))                                                                   \
        return error_set(err, -ENOSYS, "%s: required symbol %s is missing", nvml_path, #name);
    NVML_SYMBOLS(X)
#undef X
    return 0;
}

int nvml_open(const char *driver_root, struct error *err)
{
    int r = 0;
    pthread_mutex_lock(&nvml_lock);
    if (nvml_refs > 0) {
        nvml_refs++;
        goto out;
    }
    resolve_library(driver_root, nvml_path, sizeof(nvml_path));
    nvml_handle = dlopen(nvml_path, RTLD_LAZY | RTLD_LOCAL);
    if (!nvml_handle) {
        const char *why = dlerror();
        r = error_set(err, -ELIBACC, "could not load NVML library %s: %s", nvml_path,
                      why ? why : "unknown error");
        goto out;
    }
    r = load_symbols(err);
    if (r == 0) {
        nvmlReturn_t nr = nvml_sym.nvmlInit_v2();
        if (nr != NVML_SUCCESS)
            r = nvml_fail(err, "nvmlInit_v2", nr);
    }
    if (r < 0) {
        memset(&nvml_sym, 0, sizeof(nvml_sym));
        dlclose(nvml_handle);
        nvml_handle = NULL;
        goto out;
    }
    nvml_refs = 1;
out:
    pthread_mutex_unlock(&nvml_lock);
    return r;
}

void nvml_close(void)
{
    pthread_mutex_lock(&nvml_lock);
    if (nvml_refs > 0 && --nvml_refs == 0) {
        nvml_sym.nvmlShutdown();
        memset(&nvml_sym, 0, sizeof(nvml_sym));
        dlclose(nvml_handle);
        nvml_handle = NULL;
    }
    pthread_mutex_unlock(&nvml_lock);
}

void nvml_ref(void)
{
    pthread_mutex_lock(&nvml_lock);
    if (nvml_refs > 0)
        nvml_refs++;
    pthread_mutex_unlock(&nvml_lock);
}

const char *nvml_library_path(void) { return nvml_path; }

int nvml_system_driver_version(char *buf, size_t len, struct error *err)
{
    return NVML_CALL(err, nvmlSystemGetDriverVersion, buf, (unsigned)len);
}

int nvml_system_cuda_version(int *version, struct error *err)
{
    return NVML_CALL(err, nvmlSystemGetCudaDriverVersion, version);
}

int nvml_device_count(unsigned *count, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetCount_v2, count);
}

int nvml_device_by_index(unsigned index, nvml_device *dev, struct error *err)
{
    nvmlDevice_t d = NULL;
    int r = NVML_CALL(err, nvmlDeviceGetHandleByIndex_v2, index, &d);
    *dev = from_nvml(d);
    return r;
}

int nvml_device_by_uuid(const char *uuid, nvml_device *dev, struct error *err)
{
    nvmlDevice_t d = NULL;
    int r = NVML_CALL(err, nvmlDeviceGetHandleByUUID, uuid, &d);
    *dev = from_nvml(d);
    return r;
}

int nvml_device_name(nvml_device dev, char *buf, size_t len, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetName, to_nvml(dev), buf, (unsigned)len);
}

int nvml_device_uuid(nvml_device dev, char *buf, size_t len, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetUUID, to_nvml(dev), buf, (unsigned)len);
}

int nvml_device_minor(nvml_device dev, unsigned *minor, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetMinorNumber, to_nvml(dev), minor);
}

int nvml_device_pci_bus_id(nvml_device dev, char *buf, size_t len, struct error *err)
{
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof(pci));
    int r = NVML_CALL(err, nvmlDeviceGetPciInfo_v3, to_nvml(dev), &pci);
    if (r < 0)
        return r;
    pci.busId[sizeof(pci.busId) - 1] = 0;
    if ((size_t)snprintf(buf, len, "%s", pci.busId) >= len)
        return error_set(err, -ENOBUFS, "PCI bus id %s too long", pci.busId);
    return 0;
}

int nvml_device_memory_total(nvml_device dev, uint64_t *bytes, struct error *err)
{
    nvmlMemory_t mem;
    memset(&mem, 0, sizeof(mem));
    int r = NVML_CALL(err, nvmlDeviceGetMemoryInfo, to_nvml(dev), &mem);
    *bytes = r < 0 ? 0 : mem.total;
    return r;
}

int nvml_device_compute_capability(nvml_device dev, int *major, int *minor, struct error *err)
{
    return NVML_CALL(err, nvmlDeviceGetCudaComputeCapability, to_nvml(dev), major, minor);
}

/* The names NVIDIA's go-nvlib gives (its GetBrandAsString / GetArchitectureAsString),
 * which DRA attributes and the selectors written for NVIDIA's driver compare with. */
int nvml_device_brand(nvml_device dev, char *buf, size_t len, struct error *err)
{
    static const char *const names[] = {
        [NVML_BRAND_UNKNOWN] = "Unknown", [NVML_BRAND_QUADRO] = "Quadro",
        [NVML_BRAND_TESLA] = "Tesla", [NVML_BRAND_NVS] = "NVS", [NVML_BRAND_GRID] = "Grid",
        [NVML_BRAND_GEFORCE] = "GeForce", [NVML_BRAND_TITAN] = "Titan",
        [NVML_BRAND_NVIDIA_VAPPS] = "NvidiaVApps", [NVML_BRAND_NVIDIA_VPC] = "NvidiaVPC",
        [NVML_BRAND_NVIDIA_VCS] = "NvidiaVCS", [NVML_BRAND_NVIDIA_VWS] = "NvidiaVWS",
        [NVML_BRAND_NVIDIA_CLOUD_GAMING] = "NvidiaCloudGaming",
        [NVML_BRAND_QUADRO_RTX] = "QuadroRTX", [NVML_BRAND_NVIDIA_RTX] = "NvidiaRTX",
        [NVML_BRAND_NVIDIA] = "Nvidia", [NVML_BRAND_GEFORCE_RTX] = "GeForceRTX",
        [NVML_BRAND_TITAN_RTX] = "TitanRTX",
    };
    nvmlBrandType_t b = NVML_BRAND_UNKNOWN;
    int r = NVML_CALL(err, nvmlDeviceGetBrand, to_nvml(dev), &b);
    if (r < 0)
        return r;
    if ((unsigned)b >= ELEMENTSOF(names) || !names[b])
        return error_set(err, -ENOENT, "nvmlDeviceGetBrand: unknown brand %u", (unsigned)b);
    int n = snprintf(buf, len, "%s", names[b]);
    return n < 0 || (size_t)n >= len ? error_set(err, -ENOBUFS, "brand name too long") : 0;
}

int nvml_device_architecture(nvml_device dev, char *buf, size_t len, struct error *err)
{
    static const struct {
        unsigned v;
        const char *name;
    } names[] = {
        { NVML_DEVICE_ARCH_KEPLER, "Kepler" },   { NVML_DEVICE_ARCH_MAXWELL, "Maxwell" },
        { NVML_DEVICE_ARCH_PASCAL, "Pascal" },   { NVML_DEVICE_ARCH_VOLTA, "Volta" },
        { NVML_DEVICE_ARCH_TURING, "Turing" },   { NVML_DEVICE_ARCH_AMPERE, "Ampere" },
        { NVML_DEVICE_ARCH_ADA, "Ada Lovelace" }, { NVML_DEVICE_ARCH_HOPPER, "Hopper" },
        { NVML_DEVICE_ARCH_BLACKWELL, "Blackwell" }, { NVML_DEVICE_ARCH_RUBIN, "Rubin" },
        { NVML_DEVICE_ARCH_UNKNOWN, "Unknown" },
    };
    nvmlDeviceArchitecture_t a = NVML_DEVICE_ARCH_UNKNOWN;
    int r = NVML_CALL(err, nvmlDeviceGetArchitecture, to_nvml(dev), &a);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        if (names[i].v != a)
            continue;
        int n = snprintf(buf, len, "%s", names[i].name);
        return n < 0 || (size_t)n >= len ? error_set(err, -ENOBUFS, "architecture name too long") : 0;
    }
    return error_set(err, -ENOENT, "nvmlDeviceGetArchitecture: unknown architecture %u", a);
}

int nvml_device_addressing_mode(nvml_device dev, char *buf, size_t len, struct error *err)
{
    static const char *const names[] = {
        [NVML_DEVICE_ADDRESSING_MODE_NONE] = "None",
        [NVML_DEVICE_ADDRESSING_MODE_HMM] = "HMM",
        [NVML_DEVICE_ADDRESSING_MODE_ATS] = "ATS",
    };
    nvmlDeviceAddressingMode_t m = { .version = nvmlDeviceAddressingMode_v1 };
    int r = NVML_CALL(err, nvmlDeviceGetAddressingMode, to_nvml(dev), &m);
    if (r < 0)
        return r;
    if (m.value >= ELEMENTSOF(names))
        return error_set(err, -ENOENT, "nvmlDeviceGetAddressingMode: unknown mode %u", m.value);
    int n = snprintf(buf, len, "%s", names[m.value]);
    return n < 0 || (size_t)n >= len ? error_set(err, -ENOBUFS, "addressing mode too long") : 0;
}

int nvml_device_vgpu_guest(nvml_device dev, bool *guest, struct error *err)
{
    nvmlGpuVirtualizationMode_t m = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    int r = NVML_CALL(err, nvmlDeviceGetVirtualizationMode, to_nvml(dev), &m);
    *guest = r == 0 && m == NVML_GPU_VIRTUALIZATION_MODE_VGPU;
    return r;
}

int nvml_device_mig_mode(nvml_device dev, bool *enabled, struct error *err)
{
    unsigned current = 0, pending = 0;
    int r = NVML_CALL(err, nvmlDeviceGetMigMode, to_nvml(dev), &current, &pending);
    *enabled = r == 0 && current == NVML_DEVICE_MIG_ENABLE;
    return r;
}

_Static_assert((int)NVML_COMPUTE_MODE_DEFAULT == NVML_COMPUTEMODE_DEFAULT &&
                   (int)NVML_COMPUTE_MODE_PROHIBITED == NVML_COMPUTEMODE_PROHIBITED &&
                   (int)NVML_COMPUTE_MODE_EXCLUSIVE_PROCESS == NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
               "nvml_compute_mode mirrors nvmlComputeMode_t");

int nvml_device_compute_mode(nvml_device dev, enum nvml_compute_mode *mode, struct error *err)
{
    nvmlComputeMode_t m = NVML_COMPUTEMODE_DEFAULT;
    int r = NVML_CALL(err, nvmlDeviceGetComputeMode, to_nvml(dev), &m);
    if (r == 0)
        *mode = (enum nvml_compute_mode)m;
    return r;
}

int nvml_device_set_compute_mode(nvml_device dev, enum nvml_compute_mode mode, struct error *err)
{
#ifndef GDP_NVML_READ_ONLY
    return NVML_CALL(err, nvmlDeviceSetComputeMode, to_nvml(dev), (nvmlComputeMode_t)mode);
#else
    (void)dev;
    (void)mode;
    /* Not naming the NVML call: the point of this build is that its bytes name none. */
    return error_set(err, -ENOSYS, "this binary changes no GPU setting (gpu-smoke's read-only "
                     "build): it cannot set a compute mode");
#endif
}

int nvml_device_common_ancestor(nvml_device a, nvml_device b, int *level, struct error *err)
{
    nvmlGpuTopologyLevel_t l = NVML_TOPOLOGY_SYSTEM;
    int r = NVML_CALL(err, nvmlDeviceGetTopologyCommonAncestor, to_nvml(a), to_nvml(b), &l);
    *level = r < 0 ? -1 : (int)l;
    return r;
}

int nvml_device_nvlink_remotes(nvml_device dev, char (*remotes)[32], unsigned max, unsigned *n,
                               struct error *err)
{
    *n = 0;
    if (!nvml_sym.nvmlDeviceGetNvLinkState || !nvml_sym.nvmlDeviceGetNvLinkRemotePciInfo_v2)
        return 0; /* no NVLink API: no links */
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS && *n < max; link++) {
        nvmlEnableState_t state = NVML_FEATURE_DISABLED;
        nvmlReturn_t r = nvml_sym.nvmlDeviceGetNvLinkState(to_nvml(dev), link, &state);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (r != NVML_SUCCESS)
            return nvml_fail(err, "nvmlDeviceGetNvLinkState", r);
        if (state != NVML_FEATURE_ENABLED)
            continue;
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof(pci));
        r = nvml_sym.nvmlDeviceGetNvLinkRemotePciInfo_v2(to_nvml(dev), link, &pci);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT)
            continue;
        if (r != NVML_SUCCESS)
            return nvml_fail(err, "nvmlDeviceGetNvLinkRemotePciInfo_v2", r);
        pci.busId[sizeof(pci.busId) - 1] = 0;
        if (nvml_bus_id_normalize(pci.busId, remotes[*n], sizeof(remotes[*n])) < 0)
            continue;
        (*n)++;
    }
    return 0;
}

int nvml_event_set_create(nvml_event_set *set, struct error *err)
{
    nvmlEventSet_t s = NULL;
    int r = NVML_CALL(err, nvmlEventSetCreate, &s);
    *set = (nvml_event_set)(void *)s;
    return r;
}

void nvml_event_set_free(nvml_event_set set)
{
    if (set && nvml_sym.nvmlEventSetFree)
        nvml_sym.nvmlEventSetFree((nvmlEventSet_t)(void *)set);
}

int nvml_device_supported_events(nvml_device dev, uint64_t *mask, struct error *err)
{
    unsigned long long m = 0;
    int r = NVML_CALL(err, nvmlDeviceGetSupportedEventTypes, to_nvml(dev), &m);
    *mask = m;
    return r;
}

int nvml_device_register_events(nvml_device dev, uint64_t mask, nvml_event_set set,
                                struct error *err)
{
    return NVML_CALL(err, nvmlDeviceRegisterEvents, to_nvml(dev), (unsigned long long)mask,
                     (nvmlEventSet_t)(void *)set);
}

int nvml_event_wait(nvml_event_set set, unsigned timeout_ms, struct nvml_event *ev,
                    struct error *err)
{
    nvmlEventData_t data;
    memset(&data, 0, sizeof(data));
    memset(ev, 0, sizeof(*ev));
    int r = NVML_CALL(err, nvmlEventSetWait_v2, (nvmlEventSet_t)(void *)set, &data, timeout_ms);
    if (r < 0)
        return r;
    ev->device = from_nvml(data.device);
    ev->type = data.eventType;
    ev->data = data.eventData;
    ev->gi_id = data.gpuInstanceId;
    ev->ci_id = data.computeInstanceId;
    if (data.device && nvml_sym.nvmlDeviceGetUUID(data.device, ev->uuid, sizeof(ev->uuid)) != NVML_SUCCESS)
        ev->uuid[0] = 0;
    return 0;
}
