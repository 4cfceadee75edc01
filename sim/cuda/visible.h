/* What a process on the simulated node can use: the GPUs and MIG devices NVML reports,
 * filtered by the device nodes the process can open, as the real driver stack filters
 * them (NVML and CUDA in a container see only the GPUs whose nodes the runtime gave it).
 * Shared by the libcuda and nvidia-smi stand-ins (docs/simulator.md, "Driver root").
 *
 * The open rule: a node counts when open(O_RDWR) succeeds, or fails with ENXIO/ENODEV (a
 * character device with no driver behind it, as the tests' 195:<minor> nodes are on a
 * machine without NVIDIA's modules, that the device cgroup lets through). ENOENT (not
 * given to the container), EPERM (device cgroup), EACCES and the rest do not. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* MOCK_DRIVER_DEV_ROOT=<dir>: the directory that stands for /dev in the open rule (as
 * nvml-sim-render --dev-root writes it), for tests that run without a container. */
#define VIS_DEV_ROOT_ENV "MOCK_DRIVER_DEV_ROOT"

#define VIS_NAME_LEN 96
#define VIS_UUID_LEN 96

struct vis_mig {
    char name[VIS_NAME_LEN]; /* NVML's: "<GPU name> MIG <profile>" */
    char uuid[VIS_UUID_LEN]; /* MIG-... */
    const char *profile;     /* points into name: the part after " MIG " */
    unsigned long long mem_total;
    unsigned gi, ci;
};

struct vis_gpu {
    char name[VIS_NAME_LEN];
    char uuid[VIS_UUID_LEN];
    unsigned minor;
    unsigned long long mem_total;
    bool mig_enabled;
    struct vis_mig *migs; /* the MIG devices whose GI and CI capability nodes open */
    unsigned n_migs;
};

struct vis_node {
    char driver_version[80];
    int cuda_version; /* 1000·major + 10·minor, 0: unknown */
    struct vis_gpu *gpus; /* the GPUs whose /dev/nvidia<minor> opens, in NVML order */
    unsigned n_gpus;
    int nvml_error; /* VIS_ERR_INIT: what nvmlInit_v2 returned */
};

enum {
    VIS_ERR_LIBRARY = -1, /* libnvidia-ml.so.1 not loadable, or a function missing */
    VIS_ERR_INIT = -2,    /* nvmlInit_v2 failed (nvml_error) */
    VIS_ERR_QUERY = -3,   /* the driver version or the device count failed */
};

/* dlopen libnvidia-ml.so.1 by its SONAME (the loader finds it as it finds any library),
 * read the node and shut NVML down again. Returns 0 or a VIS_ERR_* with one line in err. */
int vis_load(struct vis_node *node, char *err, size_t errlen);
void vis_free(struct vis_node *node);

/* The open rule for a node under /dev: `rel` is e.g. "nvidia0". */
bool vis_can_open(const char *rel);
