/* Shared between the files of the config module only. */
#pragma once

#include <stdbool.h>

#include "config/config.h"

enum config_opt {
    OPT_MIG_STRATEGY,
    OPT_FAIL_ON_INIT_ERROR,
    OPT_DRIVER_ROOT,
    OPT_DEV_ROOT,
    OPT_PASS_DEVICE_SPECS,
    OPT_DEVICE_LIST_STRATEGY,
    OPT_DEVICE_ID_STRATEGY,
    OPT_GDRCOPY_ENABLED,
    OPT_GDS_ENABLED,
    OPT_MOFED_ENABLED,
    OPT_CDI_ANNOTATION_PREFIX,
    OPT_NVIDIA_CDI_HOOK_PATH,
    OPT_DRIVER_ROOT_CTR_PATH,
    OPT_MPS_ROOT,
    OPT_SHARED_ALLOC_POLICY,
    OPT_DEVICE_DISCOVERY_STRATEGY,
    OPT_IMEX_CHANNEL_IDS,
    OPT_IMEX_REQUIRED,
    OPT_KUBELET_SOCKET,
    OPT_CONFIG_FILE,
    OPT_CDI_FEATURE_FLAGS,
    OPT_CDI_DISABLE_HOOKS,
    OPT_SYSFS_ROOT,
    OPT_PROC_ROOT,
    OPT_CDI_SPEC_DIR,
    OPT_LOG_VERBOSITY,
    OPT_LOG_FORMAT,
    OPT_HELP,
    OPT_VERSION,
    _OPT_MAX,
};

/* Set option `opt` from its string form (flag / env / file value converted to
 * text; slices comma-separated). origin ("--mig-strategy", "env MIG_STRATEGY",
 * "config.yaml:3:16: flags.migStrategy") prefixes any error. */
int config_option_set(struct config *c, enum config_opt opt, const char *value,
                      const char *origin, struct error *err);

/* Where cross-field checks point when they fail (1-based; 0 = not from the file). */
struct config_file_marks {
    int mps_line, mps_col;
};

/* Parse the config file into c; fields whose option is already set[] by flag or
 * env are type-checked but not applied. */
int config_file_load(struct config *c, const char *path, const bool *set,
                     struct config_file_marks *marks, struct error *err);
/* Same, from memory (the fuzz target); `name` is used in messages. */
int config_file_parse(struct config *c, const char *name, const unsigned char *data,
                      size_t size, const bool *set, struct config_file_marks *marks,
                      struct error *err);

/* Go strconv.ParseBool. Returns 0/1, or -EINVAL. */
int config_parse_bool(const char *s);

/* Resource name: prepend "nvidia.com/" when absent, check length and DNS rules.
 * Returns the full name (to free) or NULL with err set (no origin prefix). */
char *config_resource_name(const char *name, struct error *err);
/* A sharing device reference ("0", "0:1", "GPU-<uuid>", "MIG-<uuid>",
 * "MIG-GPU-<uuid>/<gi>/<ci>"): 0 or -EINVAL with err set. */
int config_check_device_ref(const char *ref, struct error *err);
/* The cross-field rules that need only the configuration (MPS, IMEX). */
int config_validate(struct config *c, const struct config_file_marks *marks,
                    struct error *err);
/* Kubernetes DNS-1123 subdomain: <= 253 chars, dot-separated labels of [a-z0-9-]
 * that start and end with [a-z0-9]. */
bool config_is_dns_subdomain(const char *s, size_t len);
