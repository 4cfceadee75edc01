/* The OCI hook that puts a GPU share's hard device-memory limit on its container's cgroup
 * (docs/cdi-hook.md): where it lives on the host, putting it there, and the CDI hook
 * entries a share's spec carries.
 *
 * The runtime runs a hook by a host path. The plugin runs in a container whose kubelet
 * plugins directory is the host's, mounted at the same path, so
 * <plugins dir>/gpu.nvidia.com/bin/gpu-device-plugin-cdi-hook is a path valid on both
 * sides. What is copied there is gpu-device-plugin-cdi-hook, the small hook executable
 * installed beside the plugin in the image (glibc only; the plugin itself may need
 * libraries the host lacks). Loop thread only; no state. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "core/error.h"

#define DRA_SHARE_HOOK_NAME "gpu-device-plugin-cdi-hook"
/* The CDI hooks' timeout (seconds); the hook gives up by itself a little earlier. */
#define DRA_SHARE_HOOK_TIMEOUT_S 30

/* The hook's host path: <plugins dir>/gpu.nvidia.com/bin/gpu-device-plugin-cdi-hook.
 * 0, or -ENAMETOOLONG when it does not fit len. */
int dra_share_hook_path(const struct config *cfg, char *buf, size_t len);

/* Put the hook at its host path: gpu-device-plugin-cdi-hook from the directory of this
 * process's executable (/proc/self/exe), copied atomically (mode 0755) only when the bytes
 * there differ. 1: copied, 0: already there, -errno (err) otherwise (-ENOENT: the image has
 * no hook beside the plugin). Call at start, before any share is prepared, in DRA mode
 * with --dra-consumable-capacity. */
int dra_share_hook_install(const struct config *cfg, struct error *err);
/* The same from an explicit source to an explicit destination (tests). */
int dra_share_hook_install_from(const char *src, const char *dst, struct error *err);

/* The CDI containerEdits.hooks entries for one share of gpu_uuid holding `bytes` of device
 * memory: a createRuntime hook setting the hard limit, a poststop hook (--reset) removing
 * it. A new JSON array (caller owns), to be appended to the share's containerEdits.hooks;
 * NULL when the path does not fit. */
json_t *dra_share_hook_edits(const struct config *cfg, const char *gpu_uuid, uint64_t bytes);
