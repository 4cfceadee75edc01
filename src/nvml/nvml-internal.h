/* What the NVML door's files share (nvml.c: loading and the device queries; nvml-mig.c:
 * MIG devices, existing and on demand; nvml-limits.c: per-cgroup memory limits): the typed
 * symbol table, the error translation and the handle conversions. Nothing outside
 * src/nvml includes this. */
#pragma once

#include "nvml-abi.h"
#include "nvml.h"

/* The calls that change a GPU setting (DRA's TimeSlicing sets the compute mode, the CDI
 * hook a share's memory limit). The plugin gpu-smoke runs (src/meson.build:
 * gpu-device-plugin-readonly, this file compiled with GDP_NVML_READ_ONLY) names none of
 * them at all, so that scripts/gpu-smoke.sh can prove from the binary's bytes that it
 * only reads NVML (check-nvml). */
#ifndef GDP_NVML_READ_ONLY
#define NVML_SETTING_SYMBOLS(X)                                                               \
    X(nvmlDeviceSetComputeMode, 0, NULL)                                                      \
    X(nvmlDeviceSetMigMode, 0, NULL)                                                          \
    X(nvmlDeviceCreateGpuInstanceWithPlacement, 0, NULL)                                      \
    X(nvmlGpuInstanceCreateComputeInstance, 0, NULL)                                          \
    X(nvmlComputeInstanceDestroy, 0, NULL)                                                    \
    X(nvmlGpuInstanceDestroy, 0, NULL)                                                        \
    X(nvmlDeviceSetMemoryLimits_v1, 0, NULL)
#else
#define NVML_SETTING_SYMBOLS(X)
#endif

/* name, required, fallback name (legacy unversioned export, or NULL) */
#define NVML_SYMBOLS(X)                                                                       \
    NVML_SETTING_SYMBOLS(X)                                                                   \
    X(nvmlInit_v2, 1, "nvmlInit")                                                             \
    X(nvmlShutdown, 1, NULL)                                                                  \
    X(nvmlErrorString, 1, NULL)                                                               \
    X(nvmlSystemGetDriverVersion, 0, NULL)                                                    \
    X(nvmlSystemGetCudaDriverVersion, 0, NULL)                                                \
    X(nvmlDeviceGetCount_v2, 1, "nvmlDeviceGetCount")                                         \
    X(nvmlDeviceGetHandleByIndex_v2, 1, "nvmlDeviceGetHandleByIndex")                         \
    X(nvmlDeviceGetHandleByUUID, 0, NULL)                                                     \
    X(nvmlDeviceGetName, 1, NULL)                                                             \
    X(nvmlDeviceGetUUID, 1, NULL)                                                             \
    X(nvmlDeviceGetMinorNumber, 1, NULL)                                                      \
    X(nvmlDeviceGetPciInfo_v3, 1, "nvmlDeviceGetPciInfo_v2")                                  \
    X(nvmlDeviceGetMemoryInfo, 0, NULL)                                                       \
    X(nvmlDeviceGetCudaComputeCapability, 0, NULL)                                            \
    X(nvmlDeviceGetBrand, 0, NULL)                                                            \
    X(nvmlDeviceGetArchitecture, 0, NULL)                                                     \
    X(nvmlDeviceGetAddressingMode, 0, NULL)                                                   \
    X(nvmlDeviceGetVirtualizationMode, 0, NULL)                                               \
    X(nvmlDeviceGetMigMode, 0, NULL)                                                          \
    X(nvmlDeviceGetComputeMode, 0, NULL)                                                      \
    X(nvmlDeviceGetMemoryLimits_v1, 0, NULL)                                                  \
    X(nvmlDeviceGetMaxMigDeviceCount, 0, NULL)                                                \
    X(nvmlDeviceGetMigDeviceHandleByIndex, 0, NULL)                                           \
    X(nvmlDeviceGetGpuInstanceId, 0, NULL)                                                    \
    X(nvmlDeviceGetComputeInstanceId, 0, NULL)                                                \
    X(nvmlDeviceGetAttributes_v2, 0, "nvmlDeviceGetAttributes")                               \
    X(nvmlDeviceGetGpuInstanceById, 0, NULL)                                                  \
    X(nvmlGpuInstanceGetComputeInstanceById, 0, NULL)                                         \
    X(nvmlGpuInstanceGetInfo, 0, NULL)                                                        \
    X(nvmlComputeInstanceGetInfo_v2, 0, NULL)                                                 \
    X(nvmlDeviceGetGpuInstanceProfileInfo, 0, NULL)                                           \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfo, 0, NULL)                                  \
    X(nvmlDeviceGetGpuInstancePossiblePlacements_v2, 0, "nvmlDeviceGetGpuInstancePossiblePlacements") \
    X(nvmlDeviceGetGpuInstances, 0, NULL)                                                     \
    X(nvmlGpuInstanceGetComputeInstances, 0, NULL)                                            \
    X(nvmlDeviceGetTopologyCommonAncestor, 0, NULL)                                           \
    X(nvmlDeviceGetNvLinkState, 0, NULL)                                                      \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2, 0, "nvmlDeviceGetNvLinkRemotePciInfo")             \
    X(nvmlEventSetCreate, 0, NULL)                                                            \
    X(nvmlEventSetFree, 0, NULL)                                                              \
    X(nvmlDeviceGetSupportedEventTypes, 0, NULL)                                              \
    X(nvmlDeviceRegisterEvents, 0, NULL)                                                      \
    X(nvmlEventSetWait_v2, 0, "nvmlEventSetWait")

/* The pointer types come from our ABI declarations, so a wrong call does not compile. */
struct nvml_syms {
#define X(name, req, fb) __typeof__(&name) name;
    NVML_SYMBOLS(X)
#undef X
};
/* Resolved at nvml_open (nvml.c), read by every wrapper. */
extern struct nvml_syms nvml_sym;

/* Map an NVML return code to our contract and describe it: "<fn>: <text> (NVML error N)". */
int nvml_fail(struct error *err, const char *fn, nvmlReturn_t r);
/* -ENOSYS naming a symbol the loaded library lacks. */
int nvml_missing(struct error *err, const char *fn);

/* Call an optional or required symbol, translating failure. */
#define NVML_CALL(err, name, ...)                                                             \
    ({                                                                                        \
        int _rc = 0;                                                                          \
        if (!nvml_sym.name)                                                                        \
            _rc = nvml_missing(err, #name);                                                   \
        else {                                                                                \
            nvmlReturn_t _r = nvml_sym.name(__VA_ARGS__);                                          \
            if (_r != NVML_SUCCESS)                                                           \
                _rc = nvml_fail(err, #name, _r);                                              \
        }                                                                                     \
        _rc;                                                                                  \
    })


static inline nvmlDevice_t to_nvml(nvml_device d) { return (nvmlDevice_t)(void *)d; }
static inline nvml_device from_nvml(nvmlDevice_t d) { return (nvml_device)(void *)d; }

