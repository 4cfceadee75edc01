/* Shared between the files of the config module only. The files and their one-way
 * order: config-values.c (value parsers: a leaf) <- config.c (teardown, names),
 * config-health.c, config-cluster.c and config-dra.c (their rows' own setters) <-
 * config-options.c (the option table: one row per option, with its storage) <-
 * config-set.c (each kind's setter and value, through a row's storage; defaults) <-
 * config-args.c (flags, environment), config-file.c + config-file-sections.c (YAML/JSON)
 * and config-health.c (health settings) <- config-load.c (config_load: sources in
 * precedence order, then config-check.c) ; config-print.c prints and config-restart.c
 * compares, both walking the table. */
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
    OPT_METRICS_ADDRESS,
    OPT_HEALTH_QUIET_PERIOD,
    OPT_HEALTH_MAX_QUIET_PERIOD,
    OPT_HEALTH_FLAP_WINDOW,
    OPT_HEALTH_UNATTRIBUTED_PROBE_DELAY,
    OPT_HEALTH_WAIT_TIMEOUT,
    OPT_HEALTH_WAIT_ERROR_THRESHOLD,
    OPT_HEALTH_XIDS_DEFAULT,
    OPT_HEALTH_XIDS_IGNORE,    /* the four lists in this order: a conflict names the later */
    OPT_HEALTH_XIDS_RECOVER,
    OPT_HEALTH_XIDS_LOST,
    OPT_HEALTH_XIDS_NEVER,
    OPT_DP_DISABLE_HEALTHCHECKS,
    OPT_DP_ENABLE_HEALTHCHECKS,
    OPT_GFD,
    OPT_USE_NODE_FEATURE_API,
    OPT_GFD_OUTPUT_FILE,
    OPT_NODE_LABELS_PATCH,
    OPT_GFD_NO_TIMESTAMP,
    OPT_MACHINE_TYPE_FILE,
    OPT_GFD_SLEEP_INTERVAL,
    /* Kubernetes API and per-node configuration (struct config_cluster) */
    OPT_KUBECONFIG,
    OPT_NODE_NAME,
    OPT_NAMESPACE,
    OPT_POD_NAME,
    OPT_KUBE_API_QPS,
    OPT_KUBE_API_BURST,
    OPT_CONFIG_DIR,
    OPT_CONFIG_NODE_LABEL,
    OPT_CONFIG_DEFAULT,
    OPT_CONFIG_FALLBACK_STRATEGIES,
    OPT_EVENTS,
    OPT_DRA,
    OPT_KUBELET_REGISTRAR_DIR,
    OPT_KUBELET_PLUGINS_DIR,
    OPT_CDI_ROOT,
    OPT_DRA_DEVICE_PLUGIN_GPUS,
    OPT_FEATURE_GATES,
    OPT_DRA_CONSUMABLE_CAPACITY,
    OPT_DRA_SHARE_MEMORY_STEP,
    OPT_DRA_SHARE_MEMORY_DEFAULT,
    OPT_DRA_SHARE_COMPUTE_DEFAULT,
    OPT_HELP,
    OPT_VERSION,
    _OPT_MAX,
};

/* What an option's value is: how the command line reads it (a bool takes no next
 * argument, a slice appends when repeated), and what the kind's own setter and value
 * (config-set.c) do with the row's storage when the row has no setter of its own. */
enum config_opt_kind {
    KIND_STRING,   /* char *, the value as given */
    KIND_BOOL,     /* bool, Go's strconv.ParseBool */
    KIND_INT,      /* int, decimal, in [min, max] */
    KIND_NUMBER,   /* double, in (min, max] */
    KIND_DURATION, /* uint64_t milliseconds: 500ms, 30s, 5m, 1h or bare seconds */
    KIND_SLICE,    /* char ** (NULL-terminated): a comma-separated list */
    KIND_ACTION,   /* --help, --version: no value, nothing stored */
};

struct json_t; /* jansson's */

/* A row's own parser, for values with names or rules of their own (an enum, a checked
 * path, an Xid list): called for every source (flags, environment, the file's value as
 * text, the default); an error is the bare message, the origin is prefixed by
 * config_option_set(). */
typedef int config_option_setter(struct config *c, enum config_opt opt, const char *value,
                                 struct error *err);
/* A row's own value as `config print` shows it (a new reference); restart checks compare
 * the same value as text (config_option_text). */
typedef struct json_t *config_option_value(const struct config *c, enum config_opt opt);

/* One row of the option table (config-options.c) is one option: its names, its
 * default (written nowhere else), its storage in struct config (offset, or a setter),
 * where `config print` shows it and whether it takes effect only at start. Adding an
 * option is adding a row: the flags, the environment, the defaults, --help, `config
 * print` and the reload's start-only warnings all walk the table (test-config-options
 * checks every row for each). */
struct config_option_def {
    const char *names[3];  /* without dashes; first is canonical; none: env only */
    const char *envs[3];
    enum config_opt_kind kind;
    const char *group;
    const char *defval;    /* applied by config_init_defaults(); NULL: none */
    const char *usage;
    const char *defnote;   /* shown by --help instead of defval, when set */
    /* storage: the field the kind's setter writes and the kind's value reads */
    bool stored;
    size_t offset, size;   /* in struct config; size checked against the kind at start */
    config_option_setter *set;  /* NULL: the kind's setter, at offset */
    double min, max;       /* KIND_INT, KIND_NUMBER bounds */
    /* output */
    const char *print;     /* `config print` path ("flags.plugin.deviceIDStrategy");
                            * "health.*" is config_health_json's section */
    config_option_value *value; /* NULL: the kind's, read at offset */
    bool start_only;       /* read once at start: a reload that changes it is warned about */
};
/* The row's storage: `.stored`, its offset and size (a nested field works: health.quiet_ms). */
#define CONFIG_AT(field)                                                                  \
    .stored = true, .offset = offsetof(struct config, field),                             \
    .size = sizeof(((struct config *)0)->field)
extern const struct config_option_def config_options[_OPT_MAX];
/* --help groups, in order; NULL-terminated. */
extern const char *const config_option_groups[];

/* Set option `opt` from its string form (flag / env / file value converted to
 * text; slices comma-separated). origin ("--mig-strategy", "env MIG_STRATEGY",
 * "config.yaml:3:16: flags.migStrategy") prefixes any error. */
int config_option_set(struct config *c, enum config_opt opt, const char *value,
                      const char *origin, struct error *err);

/* Where cross-field checks point when they fail (lines 1-based; 0 = not from the
 * file). origin[]: how a flag or env var set the option ("--health-quiet-period",
 * "env GDP_HEALTH_QUIET_PERIOD"), owned; NULL when the file or the default did. */
struct config_marks {
    int mps_line, mps_col;
    const char *health_file;
    int health_line;
    bool health_in_file[_OPT_MAX];
    char *origin[_OPT_MAX];
};

/* Parse the config file into c; fields whose option is already set[] by flag or
 * env are type-checked but not applied. */
int config_file_load(struct config *c, const char *path, const bool *set,
                     struct config_marks *marks, struct error *err);
/* Same, from memory (the fuzz target); `name` is used in messages. */
int config_file_parse(struct config *c, const char *name, const unsigned char *data,
                      size_t size, const bool *set, struct config_marks *marks,
                      struct error *err);

/* Go time.ParseDuration ("60s", "1m30s", "1.5h", "500ms", "0"), or "infinite" →
 * CONFIG_SLEEP_INFINITE; in milliseconds, sub-millisecond parts rounded down.
 * Returns 0 or -EINVAL / -ERANGE. */
int config_parse_sleep_interval(const char *s, uint64_t *out_ms);


/* Resource name: prepend "nvidia.com/" when absent, check length and DNS rules.
 * Returns the full name (to free) or NULL with err set (no origin prefix). */
char *config_resource_name(const char *name, struct error *err);
/* A sharing device reference ("0", "0:1", "GPU-<uuid>", "MIG-<uuid>",
 * "MIG-GPU-<uuid>/<gi>/<ci>"): 0 or -EINVAL with err set. */
int config_check_device_ref(const char *ref, struct error *err);
/* The cross-field rules that need only the configuration (MPS, IMEX). */
int config_validate(struct config *c, const struct config_marks *marks,
                    struct error *err);

/* Split a comma-separated value; items are trimmed, empty items dropped. The array
 * is NULL-terminated; free with config_strv_free(). */
char **config_split_list(const char *value, size_t *n_out);
DEFINE_CLEANUP_FUNC(char *, config_strv_free)

/* Flags and environment (config-args.c): fills the options they name and records
 * them in set[] and marks->origin[]. Returns 0, CONFIG_LOAD_HELP/VERSION or -errno. */
struct config_command;
int config_args_apply(struct config *c, int argc, char **argv, char **envp,
                      struct config_command *cmd, bool *set, struct config_marks *marks,
                      struct error *err);

/* The rows' own setters and values of other files: DRA (config-dra.c), the Kubernetes
 * API and per-node configuration (config-cluster.c), health (config-health.c). */
config_option_setter config_dra_option_set;
config_option_value config_dra_feature_gates_value;
config_option_value config_dra_share_value;
/* One warning line per feature gate that is accepted but always honoured or not
 * implemented (with DRA on), or one saying they are ignored without DRA. */
void config_dra_feature_gates_warn(const struct config *c);
config_option_setter config_cluster_fallback_set;
config_option_setter config_health_option_set;

/* An option's value as `config print` shows it (new reference), and as text the way a
 * flag spells it ("true", "a,b", "k=v,k=v", "" for none): config-set.c. */
struct json_t *config_option_json(const struct config *c, enum config_opt opt);
char *config_option_text(const struct config *c, enum config_opt opt);

/* Go-free durations of the health settings: "250ms", "30s", "5m", "1h", or bare seconds
 * (config-values.c). Returns 0, -EINVAL or -ERANGE. */
int config_parse_duration_ms(const char *s, uint64_t *out_ms);
/* The file's `health:` section (a json_t *), line `line` of `file`. */
int config_health_file(struct config *c, void *health_json, const char *file, int line,
                       const bool *set, struct config_marks *marks, struct error *err);
int config_health_check(struct config *c, const struct config_marks *m, struct error *err);
/* The effective section as a json_t * (new reference), in the file's keys. */
void *config_health_json(const struct health_config *hc);
