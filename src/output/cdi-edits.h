/* The container edits of our CDI specs, field for field as NVIDIA's nvcdi writes them
 * (docs/allocate.md "CDI", docs/compatibility.md says where we differ):
 *   - device nodes with the host node's major, minor, fileMode and gid (lstat), and
 *     permissions "rwm"; the edits' additionalGids for group-only nodes;
 *   - the driver's files (node/driver-files.h, found once per node state) as read-only
 *     bind mounts, the persistenced/fabricmanager sockets writable and noexec;
 *   - nvidia-cdi-hook createContainer hooks through --nvidia-cdi-hook-path, with NVIDIA's
 *     arguments and order: graphics links, driver links, enable-cuda-compat,
 *     update-ldcache, disable-device-node-modification (--cdi-disable-hooks removes them
 *     by name, "all" every one);
 *   - env NVIDIA_CTK_LIBCUDA_DIR and NVIDIA_VISIBLE_DEVICES=void.
 * Device nodes and mounts are sorted as nvcdi sorts them (by depth, then bytewise); env and
 * hooks keep their order.
 *
 * When the hook binary is missing on the host (driver_files.hook_missing), the specs carry
 * no hooks, and each library whose SONAME differs from its file name is also mounted at
 * <its directory>/<SONAME>: the same read-only file under the name the loader asks for,
 * so dlopen("libcuda.so.1") finds it in the directory the host's layout put it in, without
 * ldconfig; a file of the image at that path is hidden in the container only.
 *
 * Loop-only; every function returns a new reference. */
#pragma once

#include <jansson.h>

#include "config/config.h"
#include "node/inventory.h"

/* One device node of path ("/dev/nvidia0"), as the host has it. */
json_t *cdi_device_node(const struct config *cfg, const char *path);
/* A MIG capability node as NVIDIA's DRA driver writes it: type "c", major (the host
 * node's, else "nvidia-caps" in <proc root>/devices), minor, fileMode (the node's, else
 * 0444); no hostPath, so the runtime makes the node whether or not the host has one. */
json_t *cdi_cap_node(const struct config *cfg, const char *path, unsigned minor);
/* The driver's part of the common edits (env, hooks, mounts) for inv->driver (inv NULL:
 * none found yet); the caller adds the control nodes. */
json_t *cdi_driver_edits(const struct config *cfg, const struct inventory *inv);
/* A full GPU's DRM nodes, as nvcdi adds them: /dev/dri/<name> for every card* and
 * renderD* in <sysfs>/bus/pci/devices/<bus id>/drm/ that is a character device here, and a
 * create-symlinks hook for the /dev/dri/by-path links of the GPU that lead to them (none
 * when the hook binary is missing). Appended to edits' deviceNodes and hooks. */
void cdi_add_drm(const struct config *cfg, const struct inventory *inv, const struct inv_gpu *gpu,
                 json_t *edits);
/* Sorts edits' deviceNodes and mounts and sets its additionalGids (nvcdi's order). */
void cdi_edits_finish(const struct config *cfg, json_t *edits);
/* "0.7.0" when any edits of spec have additionalGids, else "0.5.0": the lowest version
 * that holds what the spec uses (hostPath needs 0.5.0), as nvcdi chooses it. */
const char *cdi_spec_version(json_t *spec);
