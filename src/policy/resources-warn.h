/* resources_build() with its non-fatal findings handed to the caller instead of
 * logged (e.g. a MIG-enabled GPU with no MIG devices under the mixed strategy), so
 * tests and `config check`-like tools can see them. resources_build() itself is
 * resources_build_warn() with a callback that logs each message as a warning. */
#pragma once

#include "policy/resources.h"

/* Called once per finding, msg is one line without "ignoring"-style suffix. An
 * RS_WARN_ERROR finding left something out (a device whose NVML ID is unsafe), the
 * rest is still served. */
enum rs_warn_level { RS_WARN_WARNING, RS_WARN_ERROR };
typedef void (*rs_warn_fn)(void *userdata, enum rs_warn_level level, const char *msg);

int resources_build_warn(const struct inventory *inv, const struct config *cfg,
                         rs_warn_fn warn, void *userdata,
                         struct resource_set *out, struct error *err);

/* Anchored match where '*' matches any run of characters (also none) and every other
 * character is literal, as the reference's resources.gpus / resources.mig patterns. */
bool rs_pattern_match(const char *pattern, const char *s);

/* Parse <proc_root>/driver/nvidia-caps/mig-minors and return the minor of
 * gpu<gpu_minor>/gi<gi>/access (ci < 0) or gpu<gpu_minor>/gi<gi>/ci<ci>/access.
 * -ENOENT (err names the entry) when absent; other -errno when unreadable. */
int rs_mig_cap_minor(const char *proc_root, unsigned gpu_minor, unsigned gi, int ci,
                     struct error *err);
