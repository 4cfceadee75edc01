/* nvmlDeviceSetMemoryLimits_v1 / nvmlDeviceGetMemoryLimits_v1: a hard (and soft)
 * device-memory limit per cgroup v2 directory and GPU, as NVIDIA's r615+ drivers offer
 * (../shared/reference/dra/mps-v3-memory-partitioning.md §2). The limits are kept on the
 * simulated host (sim-cgroup.h) where the libcuda stand-in enforces them. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim-cgroup.h"
#include "sim-env.h"
#include "sim-state.h"

/* First driver branch with the calls (NVML "between v610 and v615"). */
#define MEMLIMITS_MIN_DRIVER 615

/* The checks both calls share: a full GPU not in MIG mode, on an r615+ driver, a cgroup v2
 * host, a cgroup directory that exists and is not the root. */
static nvmlReturn_t target(nvmlDevice_t device, const char *ns, struct sim_device **out, char **dir)
{
    struct sim_device *d;
    nvmlReturn_t r = sim_dev(device, SIM_ANY, &d);
    if (r != NVML_SUCCESS)
        return r;
    if (atoi(sim_node->driver_version) < MEMLIMITS_MIN_DRIVER || sim_cg_version() != 2)
        return NVML_ERROR_NOT_SUPPORTED;
    /* MIG is not supported: MIG handles are rejected, and so is a GPU in MIG mode. */
    unsigned cur = 0, pending = 0;
    if (d->is_mig || (d->mig_table && nvmlDeviceGetMigMode(device, &cur, &pending) == NVML_SUCCESS && cur))
        return NVML_ERROR_NOT_SUPPORTED;
    if (!ns)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dir = sim_cg_resolve(ns);
    if (!*dir)
        return errno == ENOENT ? NVML_ERROR_NOT_FOUND : errno == EPERM ? NVML_ERROR_NOT_SUPPORTED
                                                                       : NVML_ERROR_INVALID_ARGUMENT;
    *out = d;
    return NVML_SUCCESS;
}

/* "<function> <GPU uuid> <cgroup path> <soft> <hard|max>" to MOCK_NVML_SETTINGS_LOG. */
static void log_limits(const struct sim_device *d, const char *ns, uint64_t soft, uint64_t hard)
{
    const char *path = sim_env("MOCK_NVML_SETTINGS_LOG");
    if (!path || !*path)
        return;
    char line[4400], h[32];
    if (hard == SIM_CG_NONE)
        snprintf(h, sizeof(h), "max");
    else
        snprintf(h, sizeof(h), "%" PRIu64, hard);
    int n = snprintf(line, sizeof(line), "nvmlDeviceSetMemoryLimits_v1 %s %s %" PRIu64 " %s\n", d->uuid, ns,
                     soft, h);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || n <= 0 || write(fd, line, (size_t)n) < 0)
        fprintf(stderr, "nvml-sim: settings log %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

_public_ nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t *limits)
{
    struct sim_device *d = NULL;
    char *dir = NULL;
    NONNULL(limits);
    nvmlReturn_t r = target(device, limits->nameSpace, &d, &dir);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t soft = limits->softLimit, hard = limits->hardLimit;
    if (hard != SIM_CG_NONE && soft > hard) {
        free(dir);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&sim_lock);
    r = d->settings_error; /* control `settings-error`: e.g. NO_PERMISSION (not root) */
    pthread_mutex_unlock(&sim_lock);
    if (r == NVML_SUCCESS) {
        int e = sim_cg_set(dir, d->uuid, soft, hard);
        if (e < 0) {
            fprintf(stderr, "nvml-sim: nvmlDeviceSetMemoryLimits_v1: %s: %s\n", dir, strerror(-e));
            r = e == -EACCES || e == -EPERM ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_UNKNOWN;
        }
    }
    if (r == NVML_SUCCESS)
        log_limits(d, limits->nameSpace, soft, hard);
    free(dir);
    return r;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device, nvmlGetMemoryLimits_v1_t *limits)
{
    struct sim_device *d = NULL;
    char *dir = NULL;
    NONNULL(limits);
    nvmlReturn_t r = target(device, limits->nameSpace, &d, &dir);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t soft = 0, hard = SIM_CG_NONE;
    int e = sim_cg_get(dir, d->uuid, &soft, &hard);
    free(dir);
    if (e < 0 && e != -ENOENT)
        return NVML_ERROR_UNKNOWN;
    if (e == -ENOENT) {
        soft = 0;
        hard = SIM_CG_NONE;
    }
    limits->softLimit = soft;
    limits->hardLimit = hard;
    limits->currentUsed = 0; /* usage is counted in each process's libcuda, not here */
    return NVML_SUCCESS;
}
