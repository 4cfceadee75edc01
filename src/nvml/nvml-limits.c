/* Per-cgroup device-memory limits (driver r615+, cgroup v2): nvmlDeviceSetMemoryLimits_v1
 * and its read-back. A GPU share's hard limit is put on its container's own cgroup by the
 * CDI hook (cmd_cdi_hook.c, docs/cdi-hook.md). The setter is a setting symbol: gpu-smoke's
 * read-only build (GDP_NVML_READ_ONLY) names it nowhere and answers -ENOSYS. */
#include <stdio.h>
#include <string.h>

#include "nvml-internal.h"

/* Our "no limit" is NVML's: a share's reset is soft 0 / hard NVML_MEMORY_LIMIT_NONE. */
_Static_assert(NVML_MEMORY_LIMIT_NONE == NVML_DEVICE_MEMORY_LIMIT_MAX, "NVML_MEMORY_LIMIT_NONE");

#ifndef GDP_NVML_READ_ONLY
int nvml_device_set_memory_limits(nvml_device dev, const char *cgroup_path, uint64_t soft,
                                  uint64_t hard, struct error *err)
{
    if (!cgroup_path || cgroup_path[0] != '/')
        return error_set(err, -EINVAL, "memory limits: the cgroup must be an absolute path");
    nvmlSetMemoryLimits_v1_t l = {
        .nameSpace = cgroup_path,
        .softLimit = soft,
        .hardLimit = hard,
    };
    return NVML_CALL(err, nvmlDeviceSetMemoryLimits_v1, to_nvml(dev), &l);
}
#else
int nvml_device_set_memory_limits(nvml_device dev, const char *cgroup_path, uint64_t soft,
                                  uint64_t hard, struct error *err)
{
    (void)dev;
    (void)cgroup_path;
    (void)soft;
    (void)hard;
    /* Not naming the NVML call: the point of this build is that its bytes name none. */
    return error_set(err, -ENOSYS, "this binary changes no GPU setting (gpu-smoke's read-only "
                     "build): it cannot set a memory limit");
}
#endif

int nvml_device_reset_memory_limits(nvml_device dev, const char *cgroup_path, struct error *err)
{
    return nvml_device_set_memory_limits(dev, cgroup_path, 0, NVML_MEMORY_LIMIT_NONE, err);
}

int nvml_device_memory_limits(nvml_device dev, const char *cgroup_path, uint64_t *soft,
                              uint64_t *hard, struct error *err)
{
    if (!cgroup_path || cgroup_path[0] != '/')
        return error_set(err, -EINVAL, "memory limits: the cgroup must be an absolute path");
    nvmlGetMemoryLimits_v1_t l = { .nameSpace = cgroup_path };
    int r = NVML_CALL(err, nvmlDeviceGetMemoryLimits_v1, to_nvml(dev), &l);
    if (r == 0) {
        *soft = l.softLimit;
        *hard = l.hardLimit;
    }
    return r;
}
