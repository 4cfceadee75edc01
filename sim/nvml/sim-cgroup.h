/* Hard device-memory limits per cgroup on the simulated host (docs/simulator.md, "Memory
 * limits per cgroup"): what nvmlDeviceSetMemoryLimits_v1 writes (api-memlimits.c) and what
 * the libcuda stand-in enforces (sim/cuda/libcuda.c). Plain libc, linked into both.
 *
 * A cgroup directory holds one record per GPU, "<GPU uuid> <soft> <hard>\n" (decimal
 * bytes, "max" for no hard limit), kept
 *   - in the extended attribute SIM_CG_XATTR of the directory when it is on a cgroup2
 *     file system (real cgroupfs accepts no new files; a container sees the attribute on
 *     its own /sys/fs/cgroup),
 *   - else in the file <dir>/SIM_CG_FILE (test trees).
 * A record with neither limit is removed; an empty set removes the file/attribute. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define SIM_CG_ROOT_ENV "MOCK_NVML_CGROUP_ROOT"       /* stands for /sys/fs/cgroup */
#define SIM_CG_VERSION_ENV "MOCK_NVML_CGROUP_VERSION" /* "1" or "2": override detection */
#define SIM_CG_PROCESS_ENV "MOCK_CUDA_CGROUP"         /* libcuda: the process's cgroup dir */
#define SIM_CG_REAL_ROOT "/sys/fs/cgroup"
#define SIM_CG_FILE "nvidia-sim.memory-limits"
#define SIM_CG_XATTR "user.nvidia-sim.memory-limits"
#define SIM_CG_NONE UINT64_MAX /* no hard limit */

/* The directory that stands for /sys/fs/cgroup (the env, else /sys/fs/cgroup). */
const char *sim_cg_root(void);
/* 2 when the root is a cgroup v2 hierarchy: the env says so, or the root is a cgroup2
 * file system, or it holds a cgroup.controllers file; else 1. */
int sim_cg_version(void);
/* The directory of cgroup path `ns` (a full path under /sys/fs/cgroup, or under the root
 * itself) on this host: malloc'd, or NULL with errno EINVAL (not under the root), ENOENT
 * (no such directory) or EPERM (the root cgroup itself). */
char *sim_cg_resolve(const char *ns);
/* The record of `uuid` in `dir`: 0 and the limits, -ENOENT (none) or -errno. */
int sim_cg_get(const char *dir, const char *uuid, uint64_t *soft, uint64_t *hard);
/* Replace the record of `uuid` in `dir` (soft 0 and hard SIM_CG_NONE: remove it). 0 or -errno. */
int sim_cg_set(const char *dir, const char *uuid, uint64_t soft, uint64_t hard);
/* The calling process's cgroup directory (SIM_CG_PROCESS_ENV, else the root joined with
 * the "0::" line of /proc/self/cgroup): malloc'd, or NULL. */
char *sim_cg_self(void);
/* The smallest hard limit of `uuid` on `dir` and its ancestors up to the root: what the
 * process may allocate on that GPU. SIM_CG_NONE: none. */
uint64_t sim_cg_hard_limit(const char *dir, const char *uuid);
