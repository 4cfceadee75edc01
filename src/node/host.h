/* Host facts the GPU node labels need that do not come from NVML (docs/labels.md): the
 * machine type (DMI product name), each GPU's PCI class, and whether the node is a vGPU
 * guest (the NVIDIA vendor capability in PCI config space), all read from files with
 * bounded reads. Nothing here fails: what cannot be read is recorded as unknown, with
 * one warning line naming the file. */
#pragma once

#include <stdint.h>

#include "inventory.h"

struct host_options {
    const char *sysfs_root;          /* "/sys" */
    const char *machine_type_file;   /* --machine-type-file; NULL/"" → "unknown" */
};

/* Fill *out (overwritten). */
void host_discover(const struct host_options *opt, struct inv_host *out);

/* PCI class of the device at sysfs bus id `bus_id` ("0000:3b:00.0"): 0 and *class set
 * (0x030200), or -errno when <sysfs>/bus/pci/devices/<bus id>/class is missing or not a
 * hex number. */
int host_pci_class(const char *sysfs_root, const char *bus_id, uint32_t *class);

/* The vGPU part of host_discover on one device's config space (exposed for tests):
 * INV_VGPU_UNKNOWN if it is shorter than 256 bytes (an unprivileged read), else
 * PRESENT (with the host driver record copied into *out, or its absence noted under
 * `addr`) or ABSENT. */
enum inv_vgpu host_vgpu_from_config(const uint8_t *config, size_t len, const char *addr,
                                    struct inv_host *out);
