/* The effective configuration: flags > environment > config file > defaults, per
 * field, filled into one struct and validated as a whole (config/config.c).
 * A reload parses into a new struct and swaps only if it is valid. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config-health.h"
#include "core/error.h"

enum mig_strategy { MIG_STRATEGY_NONE, MIG_STRATEGY_SINGLE, MIG_STRATEGY_MIXED };
enum device_id_strategy { DEVICE_ID_UUID, DEVICE_ID_INDEX };
enum device_list_strategy {
    DEVICE_LIST_ENVVAR = 1 << 0,
    DEVICE_LIST_VOLUME_MOUNTS = 1 << 1,
    DEVICE_LIST_CDI_ANNOTATIONS = 1 << 2,
    DEVICE_LIST_CDI_CRI = 1 << 3,
};
enum shared_alloc_policy { SHARED_ALLOC_DISTRIBUTED, SHARED_ALLOC_PACKED };
enum sharing_strategy { SHARING_NONE, SHARING_TIME_SLICING, SHARING_MPS };
#define CONFIG_SLEEP_INFINITE UINT64_MAX

/* `resources.gpus[]` / `resources.mig[]` entry. */
struct config_pattern {
    char *pattern;     /* '*' wildcard, anchored */
    char *name;        /* full resource name, "nvidia.com/..." */
};

/* One device reference in `sharing.*.resources[].devices`. */
struct config_device_ref {
    char *ref;         /* "0", "0:1", "GPU-...", "MIG-..." as written */
};

struct config_replicated {
    char *name;        /* full resource name */
    char *rename;      /* full resource name or NULL */
    int replicas;      /* >= 2 */
    enum { DEVICES_ALL, DEVICES_COUNT, DEVICES_LIST } devices_kind;
    int devices_count;
    struct config_device_ref *devices;
    size_t n_devices;
};

struct config_sharing {
    bool present;                      /* the key exists in the file */
    bool rename_by_default;
    int fail_requests_greater_than_one; /* -1 unset, 0, 1 */
    struct config_replicated *resources;
    size_t n_resources;
};

/* The Kubernetes API (used only by features that need it) and per-node configuration
 * selected by a node label (src/cluster/). */
struct config_cluster {
    char *kubeconfig;                  /* "": in-cluster credentials */
    char *node_name;                   /* "": features that need the Node are off */
    char *namespace;                   /* "default", like GFD */
    char *pod_name;                    /* "": no owner references */
    double kube_api_qps;               /* 5 */
    int kube_api_burst;                /* 10 */
    char *config_dir;                  /* "": per-node configuration off */
    char *config_node_label;           /* "nvidia.com/device-plugin.config" */
    char *config_default;              /* "": use the fallback strategies */
    char **config_fallback_strategies; /* NULL-terminated: "named", "single", "empty" */
    bool events;                       /* Events on the Node (with node_name) */
};

/* Dynamic Resource Allocation (src/dra/; docs/dra.md): NVIDIA's gpu-kubelet-plugin flags
 * and which GPUs stay with the device plugin. */
struct config_dra {
    bool enabled;                      /* --dra, or the gpu-kubelet-plugin program name */
    bool only;                         /* gpu-kubelet-plugin: no device plugin at all */
    char *registrar_dir;               /* "/var/lib/kubelet/plugins_registry" */
    char *plugins_dir;                 /* "/var/lib/kubelet/plugins" */
    char *cdi_root;                    /* "/etc/cdi", NVIDIA's flag default */
    char **device_plugin_gpus;         /* NULL-terminated index or UUID list */
    /* NVIDIA's driver feature gates (--feature-gates, FEATURE_GATES; docs/dra.md) */
    bool dynamic_mig;                  /* DynamicMIG, default false */
    char **feature_gates;              /* NULL-terminated "Name=true|false", each gate once */
    /* GPU shares (ours; docs/dra.md "GPU shares"): full GPUs offered with consumable
     * capacity (KEP-5075), each share enforced through MPS */
    bool consumable;                   /* --dra-consumable-capacity */
    uint64_t share_memory_step;        /* bytes, a whole number of MiB (1 GiB) */
    uint64_t share_memory_default;     /* bytes; 0: the GPU's whole memory */
    unsigned share_compute_default;    /* percent of the SMs, 1..100 (10) */
};

struct config {
    /* where things came from, for messages and `config print` */
    char *config_file;                 /* NULL: none */

    /* flags (reference §3.1) */
    enum mig_strategy mig_strategy;
    bool fail_on_init_error;
    char *driver_root;                 /* "/" */
    char *dev_root;                    /* defaults to driver_root */
    bool pass_device_specs;
    unsigned device_list_strategy;     /* DEVICE_LIST_* bits */
    enum device_id_strategy device_id_strategy;
    bool gdrcopy_enabled, gds_enabled, mofed_enabled;
    char *cdi_annotation_prefix;       /* "cdi.k8s.io/" */
    char *nvidia_cdi_hook_path;        /* "/usr/bin/nvidia-ctk" */
    char *driver_root_ctr_path;        /* "/driver-root" */
    char *mps_root;                    /* NULL/empty: none */
    enum shared_alloc_policy shared_alloc_policy;
    char *device_discovery_strategy;   /* "auto" | "nvml" | "tegra" */
    int *imex_channel_ids;
    size_t n_imex_channel_ids;
    bool imex_required;
    char *kubelet_socket;              /* "/var/lib/kubelet/device-plugins/kubelet.sock" */
    char **cdi_feature_flags;          /* NULL-terminated */
    char **cdi_disable_hooks;          /* NULL-terminated */

    /* GPU node labels: gpu-feature-discovery's settings (docs/labels.md) */
    bool gfd;                          /* serve also publishes the labels (ours) */
    bool use_node_feature_api;         /* deliver as an NFD NodeFeature object */
    char *gfd_output_file;             /* NFD feature file; "" = stdout */
    bool gfd_output_file_given;        /* by flag or env (`labels` then writes it) */
    bool node_labels_patch;            /* patch the Node's labels directly (ours) */
    bool gfd_no_timestamp;
    char *machine_type_file;
    uint64_t gfd_sleep_interval_ms;    /* CONFIG_SLEEP_INFINITE: "infinite" */

    /* ours (documented in docs/configuration.md) */
    char *sysfs_root;                  /* "/sys": NUMA from <root>/bus/pci/devices/... */
    char *proc_root;                   /* "/proc": nvidia-caps mig-minors */
    char *cdi_spec_dir;                /* "/var/run/cdi" */
    int log_verbosity;                 /* klog -v */
    bool log_json;
    char *metrics_address;             /* "": no metrics listener */

    /* config file sections */
    struct config_pattern *gpu_patterns;
    size_t n_gpu_patterns;
    struct config_pattern *mig_patterns;
    size_t n_mig_patterns;
    struct config_sharing time_slicing;
    struct config_sharing mps;

    /* health checks: flags, GDP_HEALTH_* / DP_*_HEALTHCHECKS and `health:` */
    struct health_config health;

    struct config_cluster cluster;
    struct config_dra dra;
};

void config_init_defaults(struct config *c);
/* Go strconv.ParseBool ("1", "t", "TRUE", "false", ...). Returns 0/1, or -EINVAL. The
 * entrypoints with flags of their own (gpu-feature-discovery's --oneshot) read booleans
 * the same way. */
int config_parse_bool(const char *s);
/* Free a NULL-terminated array of malloc'd strings and the array (NULL ok): the lists the
 * config holds, and the argument and environment copies of the entrypoints. */
void config_strv_free(char **v);
void config_free(struct config *c);
/* Replace dst's DRA settings with a copy of src's (DRA's settings are read at start: a
 * reload keeps the running ones). */
void config_dra_assign(struct config_dra *dst, const struct config_dra *src);
void config_dra_clear(struct config_dra *d);

/* The sharing in force, as the reference reads `sharing:`: MPS when that section is
 * present and replicates something, else time-slicing when it does, else none. */
enum sharing_strategy config_sharing_strategy(const struct config *c);
/* Whether name is a DNS-1123 subdomain, as a Node's name must be: lowercase alphanumerics,
 * '-' and '.', at most 253 bytes, each dot-separated label starting and ending with an
 * alphanumeric. It goes into request paths and field selectors as is. */
bool config_node_name_valid(const char *name);
/* The section whose resources are replicated: `mps` whenever it is present. */
const struct config_sharing *config_sharing_section(const struct config *c);
