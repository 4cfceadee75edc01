/* System, enumeration, identity, PCI, memory and the small per-GPU queries. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sim-env.h"
#include "sim-state.h"

_public_ nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t r = sim_initialized();
    return r ? r : sim_put_str(version, length, sim_node->driver_version);
}

_public_ nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    nvmlReturn_t r = sim_initialized();
    return r ? r : sim_put_str(version, length, sim_node->nvml_version);
}

static nvmlReturn_t cuda_version(int *v)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    NONNULL(v);
    *v = sim_node->cuda_version;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) { return cuda_version(cudaDriverVersion); }
_public_ nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) { return cuda_version(cudaDriverVersion); }

static nvmlReturn_t count(unsigned *n)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    NONNULL(n);
    *n = sim_node->n_devs;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) { return count(deviceCount); }
_public_ nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) { return count(deviceCount); }

static nvmlReturn_t by_index(unsigned index, nvmlDevice_t *device)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    if (!device || index >= sim_node->n_devs)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_device *d = &sim_node->devs[index];
    if ((r = sim_dev_usable(d, SIM_ANY)))
        return r;
    *device = (nvmlDevice_t)(void *)d;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) { return by_index(index, device); }
_public_ nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) { return by_index(index, device); }

_public_ nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strncasecmp(uuid, "GPU-", 4) && strncasecmp(uuid, "MIG-", 4))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_device *d = sim_find_uuid(uuid);
    if (!d)
        return NVML_ERROR_NOT_FOUND;
    if ((r = sim_dev_usable(d, SIM_ANY)))
        return r;
    *device = (nvmlDevice_t)(void *)d;
    return NVML_SUCCESS;
}

static nvmlReturn_t by_pci(const char *bus_id, nvmlDevice_t *device, nvmlReturn_t lost)
{
    nvmlReturn_t r = sim_initialized();
    if (r)
        return r;
    struct sim_bdf b;
    if (!bus_id || !device || sim_parse_bdf(bus_id, &b) < 0) {
        /* NVML also accepts the 8-digit domain form, which sim_parse_bdf caps at 16 bits. */
        unsigned dom, bus, dv, fn;
        char tail;
        if (!bus_id || !device || sscanf(bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dv, &fn, &tail) != 4)
            return NVML_ERROR_INVALID_ARGUMENT;
        b = (struct sim_bdf){ dom, bus, dv, fn };
    }
    for (unsigned i = 0; i < sim_node->n_devs; i++) {
        struct sim_device *d = &sim_node->devs[i];
        if (d->bdf.domain == b.domain && d->bdf.bus == b.bus && d->bdf.device == b.device &&
            d->bdf.function == b.function) {
            if ((r = sim_dev_usable(d, SIM_ANY)))
                return r == NVML_ERROR_GPU_IS_LOST ? lost : r;
            *device = (nvmlDevice_t)(void *)d;
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    return by_pci(pciBusId, device, NVML_ERROR_GPU_IS_LOST);
}
_public_ nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return by_pci(pciBusId, device, NVML_ERROR_NOT_FOUND);
}

_public_ nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEV(device, SIM_QUERY);
    NONNULL(index);
    *index = d->index;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    DEV(device, SIM_QUERY);
    return sim_put_str(name, length, d->name);
}

_public_ nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    DEV(device, SIM_QUERY);
    return sim_put_str(uuid, length, d->uuid);
}

_public_ nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    DEV(device, SIM_QUERY);
    if (!d->serial[0])
        return NVML_ERROR_NOT_SUPPORTED;
    return sim_put_str(serial, length, d->serial);
}

_public_ nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber, unsigned int length)
{
    DEV(device, SIM_QUERY);
    if (!d->board_part[0])
        return NVML_ERROR_NOT_SUPPORTED;
    return sim_put_str(partNumber, length, d->board_part);
}

_public_ nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    DEV(device, SIM_QUERY);
    NONNULL(minorNumber);
    if (d->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *minorNumber = d->minor;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    DEV(device, SIM_QUERY);
    NONNULL(type);
    *type = (nvmlBrandType_t)d->brand;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    DEV(device, SIM_QUERY);
    NONNULL(arch);
    *arch = d->arch;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEV(device, SIM_QUERY);
    NONNULL(major);
    NONNULL(minor);
    *major = d->cc_major;
    *minor = d->cc_minor;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    DEV(device, SIM_QUERY);
    NONNULL(node);
    /* Documented simulator choice: report the PCIe-affinity node from pcie_topology. */
    if (d->numa_node < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = (unsigned)d->numa_node;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode)
{
    DEV(device, SIM_QUERY);
    NONNULL(mode);
    if (mode->version != nvmlDeviceAddressingMode_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const struct sim_device *g = d->is_mig ? d->parent : d;
    if (g->addressing_mode == SIM_ADDRESSING_UNSUPPORTED)
        return NVML_ERROR_NOT_SUPPORTED;
    mode->value = g->addressing_mode; /* a number from the profile passes through as is */
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device,
                                                      nvmlGpuVirtualizationMode_t *mode)
{
    DEV(device, SIM_QUERY);
    NONNULL(mode);
    const struct sim_device *g = d->is_mig ? d->parent : d;
    *mode = (nvmlGpuVirtualizationMode_t)g->virt_mode; /* a number from the profile passes as is */
    return NVML_SUCCESS;
}

static void fill_pci(const struct sim_device *d, nvmlPciInfo_t *pci)
{
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, d->bdf.domain,
             d->bdf.bus, d->bdf.device);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, d->bdf.domain, d->bdf.bus,
             d->bdf.device);
    pci->domain = d->bdf.domain;
    pci->bus = d->bdf.bus;
    pci->device = d->bdf.device;
    pci->pciDeviceId = d->pci_device_id;
    pci->pciSubSystemId = d->pci_subsystem_id;
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEV(device, SIM_QUERY);
    NONNULL(pci);
    fill_pci(d->is_mig ? d->parent : d, pci);
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }
_public_ nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }
_public_ nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }

_public_ nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci)
{
    DEV(device, SIM_QUERY);
    NONNULL(pci);
    if (pci->version != nvmlPciInfoExt_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlPciInfo_t p;
    fill_pci(d->is_mig ? d->parent : d, &p);
    pci->domain = p.domain;
    pci->bus = p.bus;
    pci->device = p.device;
    pci->pciDeviceId = p.pciDeviceId;
    pci->pciSubSystemId = p.pciSubSystemId;
    pci->baseClass = 0x03; /* display controller, 3D */
    pci->subClass = 0x02;
    memcpy(pci->busId, p.busId, sizeof(pci->busId));
    return NVML_SUCCESS;
}

#define UINT_QUERY(fn, field)                                                         \
    _public_ nvmlReturn_t fn(nvmlDevice_t device, unsigned int *out)                  \
    {                                                                                 \
        DEV(device, SIM_QUERY | SIM_GPU_ONLY);                                        \
        NONNULL(out);                                                                 \
        if (!d->field)                                                                \
            return NVML_ERROR_NOT_SUPPORTED;                                          \
        *out = d->field;                                                              \
        return NVML_SUCCESS;                                                          \
    }
UINT_QUERY(nvmlDeviceGetMaxPcieLinkGeneration, pcie_max_gen)
UINT_QUERY(nvmlDeviceGetMaxPcieLinkWidth, pcie_max_width)
UINT_QUERY(nvmlDeviceGetPowerManagementLimit, power_limit_mw)

static nvmlReturn_t clock_query(nvmlDevice_t device, nvmlClockType_t type, unsigned *clk, bool max)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(clk);
    if ((unsigned)type >= NVML_CLOCK_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned v = max ? d->clock_max[type] : d->clock_cur[type];
    if (!v)
        return NVML_ERROR_NOT_SUPPORTED;
    *clk = v;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clk)
{
    return clock_query(device, type, clk, true);
}
_public_ nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clk)
{
    return clock_query(device, type, clk, false);
}

_public_ nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                               unsigned int *temp)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(temp);
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = d->temperature_c;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(temperature);
    if (temperature->version != nvmlTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    temperature->temperature = (int)d->temperature_c;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    DEV(device, SIM_QUERY);
    NONNULL(memory);
    /* v1 "used" includes what the driver reserves. */
    memory->total = d->mem_total;
    memory->free = d->mem_free;
    memory->used = d->mem_total - d->mem_free;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    DEV(device, SIM_QUERY);
    NONNULL(memory);
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = d->mem_total;
    memory->reserved = d->mem_reserved;
    memory->free = d->mem_free;
    memory->used = d->mem_used;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(bar1Memory);
    if (!d->bar1_total)
        return NVML_ERROR_NOT_SUPPORTED;
    bar1Memory->bar1Total = d->bar1_total;
    bar1Memory->bar1Free = d->bar1_free;
    bar1Memory->bar1Used = d->bar1_used;
    return NVML_SUCCESS;
}

/* No fabric manager is simulated: the GPUs are not fabric-attached. */
_public_ nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(info);
    return NVML_ERROR_NOT_SUPPORTED;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    NONNULL(info);
    if (info->version != nvmlGpuFabricInfo_v2 && info->version != nvmlGpuFabricInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* ---- settings: the compute mode, kept per GPU and logged for tests */

/* One line "<function> <GPU uuid> <value>" appended to MOCK_NVML_SETTINGS_LOG (when set)
 * for every setting that took effect: how a test of another process sees what was set. */
void sim_settings_log(const char *fn, const struct sim_device *d, unsigned value)
{
    const char *path = sim_env("MOCK_NVML_SETTINGS_LOG");
    if (!path || !*path)
        return;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    _cleanup_free_ char *line = xasprintf("%s %s %u\n", fn, d->uuid, value);
    if (fd < 0 || write(fd, line, strlen(line)) < 0)
        fprintf(stderr, "nvml-sim: settings log %s: %s\n", path, strerror(errno));
}

_public_ nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_dev(device, SIM_QUERY | SIM_GPU_ONLY, &d);
    if (r)
        return r;
    NONNULL(mode);
    pthread_mutex_lock(&sim_lock);
    *mode = d->compute_mode;
    pthread_mutex_unlock(&sim_lock);
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_dev(device, SIM_GPU_ONLY, &d);
    if (r)
        return r;
    /* EXCLUSIVE_THREAD: support removed by NVIDIA. */
    if (mode >= NVML_COMPUTEMODE_COUNT || mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&sim_lock);
    r = d->settings_error;
    if (r == NVML_SUCCESS)
        d->compute_mode = mode;
    pthread_mutex_unlock(&sim_lock);
    if (r == NVML_SUCCESS)
        sim_settings_log("nvmlDeviceSetComputeMode", d, mode);
    return r;
}
