/* PCIe common ancestors, NVLinks and P2P status. Levels and link rules are described
 * in docs/simulator.md. */
#include <stdio.h>
#include <string.h>

#include "sim-state.h"

static struct sim_device *gpu_of(struct sim_device *d) { return d->is_mig ? d->parent : d; }

static bool switch_is_ancestor(int anc, int sw)
{
    for (size_t steps = 0; sw >= 0 && steps <= sim_node->n_pcie_switches; steps++) {
        if (sw == anc)
            return true;
        sw = sim_node->pcie_switches[sw].parent;
    }
    return false;
}

static nvmlGpuTopologyLevel_t level(const struct sim_device *a, const struct sim_device *b)
{
    if (a == b || (a->board[0] && streq(a->board, b->board)))
        return NVML_TOPOLOGY_INTERNAL;
    if (a->root_complex < 0 || b->root_complex < 0)
        return NVML_TOPOLOGY_SYSTEM;
    if (a->root_complex == b->root_complex) {
        if (a->pcie_switch >= 0 && a->pcie_switch == b->pcie_switch)
            return NVML_TOPOLOGY_SINGLE;
        for (int s = a->pcie_switch; s >= 0; s = sim_node->pcie_switches[s].parent)
            if (b->pcie_switch >= 0 && switch_is_ancestor(s, b->pcie_switch))
                return NVML_TOPOLOGY_MULTIPLE;
        return NVML_TOPOLOGY_HOSTBRIDGE;
    }
    int na = sim_node->rcs[a->root_complex].numa_node, nb = sim_node->rcs[b->root_complex].numa_node;
    if (na >= 0 && na == nb)
        return NVML_TOPOLOGY_NODE;
    return NVML_TOPOLOGY_SYSTEM;
}

_public_ nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                          nvmlGpuTopologyLevel_t *pathInfo)
{
    struct sim_device *a, *b;
    nvmlReturn_t r = sim_dev(device1, SIM_QUERY, &a);
    if (r || (r = sim_dev(device2, SIM_QUERY, &b)))
        return r;
    if (!pathInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = level(gpu_of(a), gpu_of(b));
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                             nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus)
{
    struct sim_device *a, *b;
    nvmlReturn_t r = sim_dev(device1, SIM_QUERY | SIM_GPU_ONLY, &a);
    if (r || (r = sim_dev(device2, SIM_QUERY | SIM_GPU_ONLY, &b)))
        return r;
    if (!p2pStatus || (unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK) {
        bool linked = false;
        for (unsigned l = 0; l < a->n_links; l++)
            linked |= a->links[l].kind == SIM_LINK_SWITCH ||
                      (a->links[l].kind == SIM_LINK_GPU && a->links[l].target == b->index);
        *p2pStatus = linked && b->n_links ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
    } else
        *p2pStatus = level(a, b) <= NVML_TOPOLOGY_HOSTBRIDGE ? NVML_P2P_STATUS_OK
                                                             : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* Link checks: NOT_SUPPORTED without NVLink, INVALID_ARGUMENT past the link count. */
static nvmlReturn_t link_of(nvmlDevice_t device, unsigned link, struct sim_device **out)
{
    DEV(device, SIM_QUERY | SIM_GPU_ONLY);
    if (!d->link_capacity)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= d->link_capacity || link >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = d;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    struct sim_device *d;
    nvmlReturn_t r = link_of(device, link, &d);
    if (r)
        return r;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = link < d->n_links ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                                    nvmlNvLinkCapability_t capability, unsigned int *capResult)
{
    struct sim_device *d;
    nvmlReturn_t r = link_of(device, link, &d);
    if (r)
        return r;
    if (!capResult || (unsigned)capability >= NVML_NVLINK_CAP_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *capResult = link < d->n_links && capability != NVML_NVLINK_CAP_SLI_BRIDGE;
    return NVML_SUCCESS;
}

static nvmlReturn_t remote_pci(nvmlDevice_t device, unsigned link, nvmlPciInfo_t *pci)
{
    struct sim_device *d;
    nvmlReturn_t r = link_of(device, link, &d);
    if (r)
        return r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (link >= d->n_links)
        return NVML_ERROR_NOT_SUPPORTED;
    const struct sim_link *l = &d->links[link];
    struct sim_bdf b;
    uint32_t devid = 0;
    if (l->kind == SIM_LINK_GPU) {
        b = sim_node->devs[l->target].bdf;
        devid = sim_node->devs[l->target].pci_device_id;
    } else {
        b = sim_node->nvswitches[l->target];
        devid = 0x1af110de; /* an NVSwitch's PCI id */
    }
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, b.domain, b.bus, b.device);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, b.domain, b.bus, b.device);
    pci->domain = b.domain;
    pci->bus = b.bus;
    pci->device = b.device;
    pci->pciDeviceId = devid;
    return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    return remote_pci(device, link, pci);
}
_public_ nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    return remote_pci(device, link, pci);
}
