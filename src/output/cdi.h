/* CDI specs (Container Device Interface, cdiVersion 0.5.0) for the devices we
 * advertise, so that a CDI-aware runtime can resolve the names Allocate returns
 * ("k8s.device-plugin.nvidia.com/gpu=<id>", ".../imex-channel=<n>", ".../gds=all", ...).
 * Each carries the device nodes and, in its common edits, the driver's files and hooks as
 * nvcdi writes them (output/cdi-edits.h, docs/allocate.md "CDI"). Loop-only (not
 * thread-safe). */
#pragma once

#include <jansson.h>

#include "config/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "node/inventory.h"
#include "policy/resources.h"

/* The version a spec starts with; cdi_commit_spec_file sets the one it needs
 * (cdi_spec_version). */
#define CDI_VERSION "0.5.0"

/* Spec documents (new references; the caller json_decref()s them).
 * cdi_gpu_spec: one device per physical device of rs (name = base ID: UUID or index,
 * MIG included) plus "all"; common edits: the control nodes that exist. */
json_t *cdi_gpu_spec(const struct resource_set *rs, const struct config *cfg,
                     const struct inventory *inv);
json_t *cdi_imex_spec(const struct config *cfg);            /* NULL: no channels configured */
/* mode: "gdrcopy", "gds" or "mofed"; one device "all". */
json_t *cdi_mode_spec(const struct config *cfg, const char *mode);

/* The edits one physical device brings, in every spec that names it (the device
 * plugin's and DRA's per-claim specs alike): {"deviceNodes": paths}, paths as
 * resources_device_paths() gives them (NULL-terminated). New reference. */
json_t *cdi_device_edits(const struct config *cfg, char *const *paths);
/* The common edits of a spec of GPUs: the control nodes that exist, the driver's files
 * and hooks (inv->driver), NVIDIA_CTK_LIBCUDA_DIR and NVIDIA_VISIBLE_DEVICES=void. New
 * reference. */
json_t *cdi_common_edits(const struct config *cfg, const struct inventory *inv);

/* Write spec as <dir>/<file> atomically (temp file in dir, fsync if sync, rename);
 * creates dir. */
int cdi_write_spec_file(const char *dir, const char *file, json_t *spec, bool sync,
                        struct error *err);
/* The same in two steps (core/fs.h, fs_stage): the file made first, the spec written
 * into it later. Stage: creates dir when missing; 0 or -errno, err naming it. Commit:
 * the stage is closed either way; 0 or -errno, err naming the file. */
int cdi_stage_spec_file(const char *dir, const char *file, struct fs_stage *st, struct error *err);
int cdi_commit_spec_file(struct fs_stage *st, json_t *spec, bool sync, struct error *err);

/* When a cdi-* device list strategy is on: write every spec that applies to
 * cfg->cdi_spec_dir and remove ours that no longer apply. No-op otherwise. */
int cdi_write_specs(const struct resource_set *rs, const struct inventory *inv,
                    const struct config *cfg, struct error *err);

/* Structural check of a spec against the CDI schema's required keys and types
 * (cdiVersion/kind strings, devices[] of {name, containerEdits}, deviceNodes[].path,
 * mounts[].hostPath/containerPath, hooks[].hookName/path, env[] strings). */
int cdi_validate(json_t *spec, struct error *err);
