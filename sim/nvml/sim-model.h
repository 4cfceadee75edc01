/* The simulated node: what a profile describes, as plain structs. Built once by
 * sim-profile.c and then only read, except for the fault flags (`lost`, `probe_fail`)
 * which the control thread flips under sim_lock (sim-state.h), and the run-time MIG
 * state (mig_mode/mig_pending and the objects of `mv`, sim-migstate.h), under sim_lock.
 *
 * Handles given to NVML callers are pointers to these objects: nvmlDevice_t → struct
 * sim_device (a GPU of `devs`, or a MIG device of a GPU's `mv` pool), nvmlGpuInstance_t →
 * struct sim_gi and nvmlComputeInstance_t → struct sim_ci (of the `mv` pools; the
 * profile's own gis/cis arrays are only the initial state). They stay valid pointers for
 * the life of the process (the node is never freed once published), like real NVML
 * handles across init/shutdown cycles. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "nvml/nvml-abi.h"
#include "sim-mig.h"

#define SIM_MAX_LINKS NVML_NVLINK_MAX_LINKS
/* addressing_mode: the call answers NOT_SUPPORTED (pre-Turing GPUs, as NVML documents) */
#define SIM_ADDRESSING_UNSUPPORTED 0xffffffffu

enum sim_link_kind { SIM_LINK_GPU, SIM_LINK_SWITCH };

struct sim_link {
    enum sim_link_kind kind;
    unsigned target; /* GPU index or NVSwitch index */
};

struct sim_bdf {
    unsigned domain, bus, device, function;
};

struct sim_gi;
struct sim_ci;
struct sim_mig_view; /* sim-migstate.h */

struct sim_device {
    unsigned index; /* NVML index (GPU) or MIG slot index (MIG device) */
    bool is_mig;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
    char board_part[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE];
    struct sim_bdf bdf;
    uint32_t pci_device_id, pci_subsystem_id;
    unsigned minor;
    uint64_t mem_total, mem_reserved, mem_free, mem_used;
    uint64_t bar1_total, bar1_free, bar1_used;
    int cc_major, cc_minor;
    unsigned arch, brand;
    unsigned pcie_max_gen, pcie_max_width;
    unsigned power_limit_mw, temperature_c;
    unsigned clock_max[NVML_CLOCK_COUNT], clock_cur[NVML_CLOCK_COUNT];

    /* MIG (GPU side). gis/migs: the profile's instances (what nvml-sim-render writes and
     * the initial run-time state); the library answers from `mv` (sim-migstate.h), which
     * also keeps mig_mode/mig_pending current. */
    const struct sim_mig_table *mig_table; /* NULL: not MIG capable */
    unsigned mig_mode, mig_pending;
    struct sim_gi *gis;
    unsigned n_gis;
    struct sim_device **migs; /* MIG devices in slot order */
    unsigned n_migs;
    struct sim_mig_view *mv; /* NULL: not MIG capable (or not in the library) */

    /* MIG device side */
    struct sim_device *parent;
    struct sim_gi *gi;
    struct sim_ci *ci;

    /* topology */
    int numa_node;    /* -1: unknown */
    int root_complex; /* index into node->rcs, -1: absent from pcie_topology */
    int pcie_switch;  /* index into node->pcie_switches, -1: none */
    char board[64];   /* "" : own board */
    unsigned n_links, link_capacity;
    struct sim_link links[SIM_MAX_LINKS];

    bool events_supported;
    /* nvmlDeviceGetAddressingMode's answer (GPU only; a MIG device answers its parent's):
     * an nvmlDeviceAddressingModeType_t value, or SIM_ADDRESSING_UNSUPPORTED */
    unsigned addressing_mode;
    /* nvmlDeviceGetVirtualizationMode's answer (GPU only; a MIG device answers its
     * parent's): an nvmlGpuVirtualizationMode_t value, NONE unless the profile says */
    unsigned virt_mode;
    /* fault flags, under sim_lock */
    bool lost, probe_fail;
    /* settings (GPU only), under sim_lock: the compute mode last set, and the code that
     * setters fail with (control `settings-error`; NVML_SUCCESS: they work) */
    nvmlComputeMode_t compute_mode;
    nvmlReturn_t settings_error;
};

struct sim_ci {
    unsigned id;
    struct sim_ci_profile prof;
    unsigned start;
    struct sim_gi *gi;
    struct sim_device *mig;
    /* run-time view (sim-migstate.c) */
    uint64_t serial;
    bool live;
};

struct sim_gi {
    unsigned id;
    const struct sim_gi_profile *prof;
    unsigned start;
    struct sim_device *parent;
    struct sim_ci *cis; /* the profile's (parser) */
    unsigned n_cis;
    /* run-time view (sim-migstate.c) */
    uint64_t serial;
    bool live;
    struct sim_ci *live_cis[8];
    unsigned n_live_cis;
};

struct sim_root_complex {
    int numa_node;
};

struct sim_pcie_switch {
    char id[64];
    int parent; /* index or -1 */
    int rc;
};

struct sim_node {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    int cuda_version;
    nvmlReturn_t init_error; /* NVML_SUCCESS: none */
    struct sim_device *devs;
    unsigned n_devs;
    struct sim_bdf *nvswitches;
    unsigned n_nvswitches;
    struct sim_root_complex *rcs;
    unsigned n_rcs;
    struct sim_pcie_switch *pcie_switches;
    unsigned n_pcie_switches;
};

/* Parse a profile. On failure returns NULL and writes exactly one line
 * "<name>:<line>: <what is wrong>" (no newline) into err. */
struct sim_node *sim_profile_parse(const char *name, const unsigned char *buf, size_t len,
                                   char *err, size_t errlen);
/* Same, reading `path` (which is also the name in messages). */
struct sim_node *sim_profile_load(const char *path, char *err, size_t errlen);
/* The built-in node (DGX A100, equal to the shared a100 profile). */
struct sim_node *sim_profile_default(char *err, size_t errlen);
void sim_node_free(struct sim_node *node);

/* Parse "DDDD:BB:DD.F", "DDDDDDDD:BB:DD.F", "BB:DD.F" or "DDDD:BB:DD" (hex). */
int sim_parse_bdf(const char *s, struct sim_bdf *bdf);
