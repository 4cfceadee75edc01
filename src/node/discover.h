/* Hardware discovery: NVML (through nvml/nvml.h) and sysfs into a plain inventory.
 * The caller has nvml_open()ed the library. */
#pragma once

#include <stdbool.h>

#include "core/error.h"
#include "inventory.h"

struct discover_options {
    const char *sysfs_root;   /* NUMA from <root>/bus/pci/devices/<bdf>/numa_node */
    const char *proc_root;    /* MIG cap minors from <root>/driver/nvidia-caps/mig-minors */
    bool with_mig;            /* enumerate MIG devices of MIG-enabled GPUs */
    /* the MIG profiles and placements every MIG-capable GPU offers (DynamicMIG) */
    bool with_mig_profiles;
    bool with_links;          /* query PCIe/NVLink topology for every GPU pair */
    /* The inventory being replaced (a reload), or NULL. A GPU of it that NVML now reports
     * lost (GPU_IS_LOST) at the same index is kept from it with `lost` set, so that its
     * IDs stay advertised (Unhealthy) instead of vanishing until the next restart. */
    const struct inventory *previous;
};

/* Fill *out (which must be zeroed). Per-GPU failures of required facts (UUID, minor,
 * PCI, compute capability) fail discovery naming the GPU, like the reference; facts
 * the reference tolerates (memory, topology) degrade. A GPU that is lost (GPU_IS_LOST)
 * is left out with an error line, or carried over from opt->previous. Returns 0 or
 * -errno. */
int discover_node(const struct discover_options *opt, struct inventory *out, struct error *err);

/* Read the NUMA node of a PCI device from sysfs: >= 0, or -1 when unknown. A file with
 * garbage yields -1 and *bad = true so the caller can warn. */
int discover_numa_node(const char *sysfs_root, const char *bus_id, bool *bad);
/* The PCIe root complex of a PCI device ("pci0000:15"), as Kubernetes' standard
 * resource.kubernetes.io/pcieRoot attribute names it: the first component under
 * <root>/devices of where <root>/bus/pci/devices/<bus id> leads. Returns 0, or -errno
 * when sysfs does not tell (out is then ""). */
int discover_pcie_root(const char *sysfs_root, const char *bus_id, char *out, size_t len);
