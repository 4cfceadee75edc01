/* resources_build() with its non-fatal findings handed to the caller instead of
 * logged (e.g. a MIG-enabled GPU with no MIG devices under the mixed strategy), so
 * tests and `config check`-like tools can see them. resources_build() itself is
 * resources_build_warn() with a callback that logs each message as a warning. */
#pragma once

#include "policy/resources.h"

/* Called once per finding, msg is one line without "ignoring"-style suffix. An
 * RESOURCES_WARN_ERROR finding left something out (a device whose NVML ID is unsafe), the
 * rest is still served. */
enum resources_warn_level { RESOURCES_WARN_WARNING, RESOURCES_WARN_ERROR };
typedef void (*resources_warn_fn)(void *userdata, enum resources_warn_level level, const char *msg);

int resources_build_warn(const struct inventory *inv, const struct config *cfg,
                         resources_warn_fn warn, void *userdata,
                         struct resource_set *out, struct error *err);

/* Anchored match where '*' matches any run of characters (also none) and every other
 * character is literal, as the reference's resources.gpus / resources.mig patterns. */
bool resources_pattern_match(const char *pattern, const char *s);
