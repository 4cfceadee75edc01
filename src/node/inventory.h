/* What the hardware is: plain structs filled once by discovery (node/discover.c) and
 * read by every policy. No NVML types here; nothing in it changes after discovery
 * except health, which lives elsewhere (policy/health). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/driver-files.h"

#define INV_UUID_MAX 96
#define INV_NAME_MAX 96
#define INV_BUSID_MAX 32
#define INV_PROFILE_MAX 48
#define INV_CAP_ERROR_MAX 512   /* struct error msg: the message kept whole */

struct inv_mig {
    unsigned mig_index;               /* slot for nvmlDeviceGetMigDeviceHandleByIndex */
    char uuid[INV_UUID_MAX];          /* "MIG-..." */
    unsigned gi_id, ci_id;            /* GPU / compute instance ids */
    unsigned gi_profile_id, ci_profile_id;
    unsigned placement_start, placement_size; /* GPU instance's memory slices (DRA names) */
    char profile[INV_PROFILE_MAX];    /* "1g.5gb", "1c.2g.10gb", "1g.10gb+me" ... */
    uint64_t memory_bytes;
    unsigned multiprocessors, gi_slices, ci_slices;
    unsigned copy_engines, decoders, encoders, jpegs, ofas;
    int gi_cap_minor, ci_cap_minor;   /* /dev/nvidia-caps/nvidia-cap<N>; -1 unknown */
    /* Why a cap minor is -1 (node/mig.c: mig-minors unreadable or without the entry),
     * "" if both are known. Kept, not fatal to discovery: resources refuse the device
     * at the point where the reference does. */
    int cap_error_code;
    char cap_error[INV_CAP_ERROR_MAX];
};

/* A MIG device DynamicMIG may create on a GPU: one GPU-instance profile with the compute
 * instance that spans it whole, and the placements it may take (node/discover.c, only
 * with discover_options.with_mig_profiles). */
#define INV_MIG_PLACEMENTS_MAX 8
struct inv_mig_profile {
    unsigned index, id;               /* NVML_GPU_INSTANCE_PROFILE_* and its info.id */
    char name[INV_PROFILE_MAX];       /* "1g.10gb", "1g.10gb+me" */
    unsigned slices;
    uint64_t memory_bytes;
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    unsigned n_placements;
    struct inv_placement {
        unsigned start, size;         /* memory slices */
    } placements[INV_MIG_PLACEMENTS_MAX];
};

struct inv_gpu {
    unsigned index;                   /* NVML enumeration index */
    char uuid[INV_UUID_MAX];          /* "GPU-..." */
    char name[INV_NAME_MAX];
    char brand[24];                   /* "Nvidia", "Tesla"; "" if NVML could not tell */
    char architecture[24];            /* "Hopper", "Ada Lovelace"; "" if unknown */
    /* How the GPU addresses system memory ("HMM", "ATS", "None"; DRA's addressingMode, which
     * its MIG devices copy); "" when NVML reports no mode or lacks the call */
    char addressing_mode[8];
    char bus_id[INV_BUSID_MAX];       /* sysfs form, lower case: "0000:3b:00.0" */
    unsigned minor;                   /* /dev/nvidia<minor> */
    uint64_t memory_bytes;            /* 0 if NVML could not tell */
    int cc_major, cc_minor;
    int numa_node;                    /* -1: unknown (no topology sent) */
    char pcie_root[24];               /* "pci0000:15" from sysfs (DRA's pcieRoot); "" unknown */
    /* PCI class code from <sysfs>/bus/pci/devices/<bus id>/class (0x030200 3D controller
     * = compute mode, 0x030000 VGA = graphics mode); 0 if unreadable. Labels only. */
    uint32_t pci_class;
    bool mig_capable, mig_enabled;
    unsigned arch_id;                 /* NVML's architecture number (9 Hopper); 0 unknown */
    struct inv_mig_profile *mig_profiles; /* with_mig_profiles and MIG capable, else NULL */
    size_t n_mig_profiles;
    /* Known from the previous discovery but not answering NVML now (GPU_IS_LOST during a
     * reload): kept with its old record so its IDs stay advertised (Unhealthy) and come
     * back when NVML sees it again; the health monitor treats it as lost from the start. */
    bool lost;
    struct inv_mig *migs;
    size_t n_migs;
};

/* Link between two GPUs, as the topology model needs it. */
struct inv_link {
    int pcie_level;                   /* NVML_TOPOLOGY_* value (0..50); -1 if unknown */
    unsigned nvlinks;                 /* number of NVLinks joining the pair */
};

/* Facts about the host rather than its GPUs, read from files by node/host.c (not from
 * NVML, so they are known even when NVML is not): what the GPU node labels need. */
enum inv_vgpu {
    INV_VGPU_UNKNOWN,                 /* PCI devices or their config space unreadable */
    INV_VGPU_ABSENT,
    INV_VGPU_PRESENT,                 /* an NVIDIA PCI device carries the vGPU capability */
};

struct inv_host {
    bool read;                        /* node/host.c filled this */
    char machine_type[256];           /* DMI product name, trimmed; "unknown" if unreadable */
    enum inv_vgpu vgpu;
    /* With INV_VGPU_PRESENT: the host driver record of the capability (the last vGPU
     * device's, as GFD), or record_missing naming the device whose record is absent. */
    char vgpu_host_driver_version[16], vgpu_host_driver_branch[16];
    char vgpu_record_missing[32];
};

struct inventory {
    char driver_version[80];          /* nvmlSystemGetDriverVersion, "" if it failed */
    char cuda_driver_version[16];     /* "12.4", empty if unknown */
    int cuda_version;                 /* nvmlSystemGetCudaDriverVersion: 12040; 0 unknown */
    struct inv_host host;
    struct inv_gpu *gpus;
    size_t n_gpus;
    struct inv_link *links;           /* n_gpus * n_gpus, row-major; diagonal unused */
    /* The driver's user-space files under the driver root, for the CDI specs: found by
     * node_state_build when something writes specs (node/driver-files.h). */
    struct driver_files driver;
};

static inline struct inv_link *inventory_link(const struct inventory *inv, size_t a, size_t b)
{
    return &inv->links[a * inv->n_gpus + b];
}

void inventory_clear(struct inventory *inv);
