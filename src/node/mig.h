/* MIG naming, all of it: the go-nvlib profile name of a MIG device ("1g.5gb",
 * "1c.2g.10gb", "1g.10gb+me", ...) and its /dev/nvidia-caps capability minors from
 * <proc_root>/driver/nvidia-caps/mig-minors (§4.7). Discovery (node/discover.c) fills
 * the inventory with both; policy only reads the inventory. */
#pragma once

#include <stdint.h>

#include "core/error.h"
#include "node/inventory.h"
#include "nvml/nvml.h"

/* go-nvlib's profile name: "<G>g.<GB>gb" or "<C>c.<G>g.<GB>gb" plus the variant's
 * suffix ("", "+me", "+me.all", "+gfx", "-me"). */
void mig_profile_name(unsigned gi_slices, unsigned ci_slices, uint64_t mig_memory,
                      uint64_t gpu_memory, enum nvml_gi_variant variant, char *out, size_t len);

/* Parse <proc_root>/driver/nvidia-caps/mig-minors and return the minor of
 * gpu<gpu_minor>/gi<gi>/access (ci < 0) or gpu<gpu_minor>/gi<gi>/ci<ci>/access.
 * -ENOENT (err names the entry) when absent; other -errno when unreadable. */
int mig_cap_minor(const char *proc_root, unsigned gpu_minor, unsigned gi, int ci,
                  struct error *err);

/* Fill m->gi_cap_minor and m->ci_cap_minor for a MIG device of the GPU with this minor.
 * A lookup that fails leaves that minor -1 and records the first failure in
 * m->cap_error / m->cap_error_code: discovery does not fail on it, resources refuse
 * the device where the reference does (after its own checks, in its order). */
void mig_resolve_caps(const char *proc_root, unsigned gpu_minor, struct inv_mig *m);
