/* The option table (reference §3.1, our extensions, the health settings): one row per
 * option, and one option per row: names, env vars, default, help text, where it is stored
 * (a field of struct config, or a setter of its own), where `config print` shows it and
 * whether only a restart applies it. The flags, the environment, the config file and the
 * defaults themselves (config_init_defaults) all set a value through its row
 * (config-set.c), so a value is checked the same way wherever it comes from, and each
 * default is written once. Here too: the setters and values of the rows that need more
 * than their kind (names of an enum, a checked format). */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/dns-name.h"

static const char G_CORE[] = "Plugin";
static const char G_DEV[] = "Device lists, IDs and CDI";
static const char G_SHARE[] = "MIG, sharing and IMEX";
static const char G_HEALTH[] = "Health checks (gpu-device-plugin extensions; file: health:)";
static const char G_EXT[] = "gpu-device-plugin extensions (not in NVIDIA's plugin)";
static const char G_LABELS[] = "GPU node labels (gpu-feature-discovery; see docs/labels.md)";
static const char G_KUBE[] = "Kubernetes API and per-node configuration (used only by the "
                             "features that need them)";
static const char G_DRA[] = "Dynamic Resource Allocation (NVIDIA's gpu-kubelet-plugin flags; "
                            "see docs/dra.md)";
static const char G_MISC[] = "Miscellaneous";

static void set_str(char **field, const char *value)
{
    free(*field);
    *field = xstrdup(value);
}

static inline void strv_freep(char ***p)
{
    config_strv_free(*p);
}

static int set_device_list_strategy(struct config *c, enum config_opt opt, const char *value,
                                    struct error *err)
{
    _cleanup_(strv_freep) char **v = config_split_list(value, NULL);
    unsigned bits = 0;
    for (char **p = v; *p; p++) {
        unsigned b = 0;
        for (unsigned bit = DEVICE_LIST_ENVVAR; bit <= DEVICE_LIST_CDI_CRI; bit <<= 1)
            if (streq(*p, config_device_list_strategy_name(bit)))
                b = bit;
        if (!b)
            return error_set(err, -EINVAL,
                             "invalid --device-list-strategy option: invalid strategy: %s "
                             "(allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)",
                             *p);
        bits |= b;
    }
    if (!bits)
        return error_set(err, -EINVAL,
                         "invalid --device-list-strategy option: no strategy given "
                         "(allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)");
    c->device_list_strategy = bits;
    return 0;
}

/* Annotation keys are "<prefix>nvidia-device-plugin_<uuid>": the prefix must be a
 * DNS subdomain followed by '/' for the key to be a valid Kubernetes annotation. */
static int set_cdi_annotation_prefix(struct config *c, enum config_opt opt, const char *value,
                                     struct error *err)
{
    size_t len = strlen(value);
    bool ok = len >= 2 && value[len - 1] == '/' && dns_subdomain_valid_n(value, len - 1);
    if (!ok)
        return error_set(err, -EINVAL,
                         "invalid --cdi-annotation-prefix option: \"%s\": must be a DNS "
                         "subdomain followed by '/' (e.g. cdi.k8s.io/)",
                         value);
    set_str(&c->cdi_annotation_prefix, value);
    return 0;
}

static int format_int_list(char *buf, size_t size, const int *v, size_t n)
{
    size_t off = 0;
    int r = snprintf(buf, size, "[");
    for (size_t i = 0; r >= 0 && (size_t)r < size - off && i < n; i++) {
        off += (size_t)r;
        r = snprintf(buf + off, size - off, i ? " %d" : "%d", v[i]);
    }
    if (r >= 0 && (size_t)r < size - off) {
        off += (size_t)r;
        r = snprintf(buf + off, size - off, "]");
    }
    return r < 0 || (size_t)r >= size - off ? -ENOBUFS : 0;
}

static int set_imex_channel_ids(struct config *c, enum config_opt opt, const char *value,
                                struct error *err)
{
    size_t n;
    _cleanup_(strv_freep) char **v = config_split_list(value, &n);
    _cleanup_free_ int *ids = xcalloc(n ? n : 1, sizeof(int));
    for (size_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long x = strtol(v[i], &end, 10);
        if (errno || *end || end == v[i] || x < INT_MIN || x > INT_MAX)
            return error_set(err, -EINVAL, "invalid IMEX channel ID \"%s\": not an integer",
                             v[i]);
        ids[i] = (int)x;
    }
    if (n > 1 || (n == 1 && ids[0] != 0)) {
        char found[128];
        if (format_int_list(found, sizeof(found), ids, n) < 0)
            snprintf(found, sizeof(found), "[...]");
        return error_set(err, -EINVAL,
                         "invalid IMEX channel IDs: invalid IMEX config: channelIDs must be "
                         "[] or [0]; found %s",
                         found);
    }
    free(c->imex_channel_ids);
    c->imex_channel_ids = n ? TAKE_PTR(ids) : NULL;
    c->n_imex_channel_ids = n;
    return 0;
}

static int set_mig_strategy(struct config *c, enum config_opt opt, const char *value,
                            struct error *err)
{
    if (streq(value, "none"))
        c->mig_strategy = MIG_STRATEGY_NONE;
    else if (streq(value, "single"))
        c->mig_strategy = MIG_STRATEGY_SINGLE;
    else if (streq(value, "mixed"))
        c->mig_strategy = MIG_STRATEGY_MIXED;
    else
        return error_set(err, -EINVAL, "unknown MIG strategy: %s (allowed: none, single, mixed)",
                         value);
    return 0;
}

static int set_device_id_strategy(struct config *c, enum config_opt opt, const char *value,
                                  struct error *err)
{
    if (streq(value, "uuid"))
        c->device_id_strategy = DEVICE_ID_UUID;
    else if (streq(value, "index"))
        c->device_id_strategy = DEVICE_ID_INDEX;
    else
        return error_set(err, -EINVAL,
                         "invalid --device-id-strategy option: %s (allowed: uuid, index)", value);
    return 0;
}

static int set_shared_alloc_policy(struct config *c, enum config_opt opt, const char *value,
                                   struct error *err)
{
    if (streq(value, "distributed"))
        c->shared_alloc_policy = SHARED_ALLOC_DISTRIBUTED;
    else if (streq(value, "packed"))
        c->shared_alloc_policy = SHARED_ALLOC_PACKED;
    else
        return error_set(err, -EINVAL,
                         "invalid --shared-devices-allocation-policy option: %s "
                         "(allowed: distributed, packed)",
                         value);
    return 0;
}

static int set_device_discovery_strategy(struct config *c, enum config_opt opt,
                                         const char *value, struct error *err)
{
    if (!streq(value, "auto") && !streq(value, "nvml") && !streq(value, "tegra"))
        return error_set(err, -EINVAL,
                         "invalid --device-discovery-strategy option %s "
                         "(allowed: auto, nvml, tegra)",
                         value);
    set_str(&c->device_discovery_strategy, value);
    return 0;
}

static int set_log_format(struct config *c, enum config_opt opt, const char *value,
                          struct error *err)
{
    if (streq(value, "text"))
        c->log_json = false;
    else if (streq(value, "json"))
        c->log_json = true;
    else
        return error_set(err, -EINVAL, "invalid --log-format option: %s (allowed: text, json)",
                         value);
    return 0;
}

static int set_sleep_interval(struct config *c, enum config_opt opt, const char *value,
                              struct error *err)
{
    if (config_parse_sleep_interval(value, &c->gfd_sleep_interval_ms) < 0)
        return error_set(err, -EINVAL, "invalid --sleep-interval \"%s\": a Go duration "
                         "(60s, 1m30s, 1.5h) or infinite", value);
    return 0;
}

/* ---- the values of the rows above, as `config print` shows them */

static json_t *mig_strategy_value(const struct config *c, enum config_opt opt)
{
    return json_string(config_mig_strategy_name(c->mig_strategy));
}

static json_t *device_list_strategy_value(const struct config *c, enum config_opt opt)
{
    json_t *a = json_array();
    for (unsigned bit = DEVICE_LIST_ENVVAR; bit <= DEVICE_LIST_CDI_CRI; bit <<= 1)
        if (c->device_list_strategy & bit)
            json_array_append_new(a, json_string(config_device_list_strategy_name(bit)));
    return a;
}

static json_t *device_id_strategy_value(const struct config *c, enum config_opt opt)
{
    return json_string(config_device_id_strategy_name(c->device_id_strategy));
}

static json_t *shared_alloc_policy_value(const struct config *c, enum config_opt opt)
{
    return json_string(config_shared_alloc_policy_name(c->shared_alloc_policy));
}

static json_t *imex_channel_ids_value(const struct config *c, enum config_opt opt)
{
    json_t *a = json_array();
    for (size_t i = 0; i < c->n_imex_channel_ids; i++)
        json_array_append_new(a, json_integer(c->imex_channel_ids[i]));
    return a;
}

static json_t *log_format_value(const struct config *c, enum config_opt opt)
{
    return json_string(c->log_json ? "json" : "text");
}

/* Milliseconds ("60000ms"), or "infinite". */
static json_t *sleep_interval_value(const struct config *c, enum config_opt opt)
{
    if (c->gfd_sleep_interval_ms == CONFIG_SLEEP_INFINITE)
        return json_string("infinite");
    return json_sprintf("%llums", (unsigned long long)c->gfd_sleep_interval_ms);
}

/* Both of the reference's switches decide this one value. */
static json_t *health_disabled_value(const struct config *c, enum config_opt opt)
{
    return json_boolean(c->health.disabled);
}

const struct config_option_def config_options[_OPT_MAX] = {
    [OPT_MIG_STRATEGY] = { { "mig-strategy" }, { "MIG_STRATEGY" }, KIND_STRING, G_SHARE,
        "none", "how MIG devices are exposed: none, single or mixed", NULL,
        .set = set_mig_strategy, .value = mig_strategy_value, .print = "flags.migStrategy" },
    [OPT_FAIL_ON_INIT_ERROR] = { { "fail-on-init-error" }, { "FAIL_ON_INIT_ERROR" }, KIND_BOOL,
        G_CORE, "true", "exit on NVML initialisation failure instead of waiting without devices",
        NULL,
        CONFIG_AT(fail_on_init_error), .print = "flags.failOnInitError" },
    [OPT_DRIVER_ROOT] = { { "driver-root", "nvidia-driver-root" }, { "NVIDIA_DRIVER_ROOT" },
        KIND_STRING, G_CORE, "/", "root of the NVIDIA driver installation on the host", NULL,
        CONFIG_AT(driver_root), .print = "flags.nvidiaDriverRoot" },
    [OPT_DEV_ROOT] = { { "dev-root", "nvidia-dev-root" }, { "NVIDIA_DEV_ROOT" }, KIND_STRING,
        G_CORE, "", "root of the NVIDIA device nodes on the host", "(driver root)",
        CONFIG_AT(dev_root), .print = "flags.nvidiaDevRoot" },
    [OPT_PASS_DEVICE_SPECS] = { { "pass-device-specs" }, { "PASS_DEVICE_SPECS" }, KIND_BOOL,
        G_DEV, "false", "pass device nodes to the kubelet in Allocate (CPU manager compat)", NULL,
        CONFIG_AT(pass_device_specs), .print = "flags.plugin.passDeviceSpecs" },
    [OPT_DEVICE_LIST_STRATEGY] = { { "device-list-strategy" }, { "DEVICE_LIST_STRATEGY" },
        KIND_SLICE, G_DEV, "envvar",
        "how devices are passed to the runtime, comma separated: envvar, volume-mounts, "
        "cdi-annotations, cdi-cri", NULL,
        .set = set_device_list_strategy, .value = device_list_strategy_value,
        .print = "flags.plugin.deviceListStrategy" },
    [OPT_DEVICE_ID_STRATEGY] = { { "device-id-strategy" }, { "DEVICE_ID_STRATEGY" },
        KIND_STRING, G_DEV, "uuid", "how devices are named to the runtime: uuid or index", NULL,
        .set = set_device_id_strategy, .value = device_id_strategy_value,
        .print = "flags.plugin.deviceIDStrategy" },
    [OPT_GDRCOPY_ENABLED] = { { "gdrcopy-enabled" }, { "GDRCOPY_ENABLED" }, KIND_BOOL, G_DEV,
        "false", "request GDRCopy in containers", NULL,
        CONFIG_AT(gdrcopy_enabled), .print = "flags.gdrcopyEnabled" },
    [OPT_GDS_ENABLED] = { { "gds-enabled" }, { "GDS_ENABLED" }, KIND_BOOL, G_DEV, "false",
        "request GPUDirect Storage in containers", NULL,
        CONFIG_AT(gds_enabled), .print = "flags.gdsEnabled" },
    [OPT_MOFED_ENABLED] = { { "mofed-enabled" }, { "MOFED_ENABLED" }, KIND_BOOL, G_DEV,
        "false", "request MOFED in containers", NULL,
        CONFIG_AT(mofed_enabled), .print = "flags.mofedEnabled" },
    [OPT_CDI_ANNOTATION_PREFIX] = { { "cdi-annotation-prefix" }, { "CDI_ANNOTATION_PREFIX" },
        KIND_STRING, G_DEV, "cdi.k8s.io/", "prefix of the CDI annotation keys", NULL,
        CONFIG_AT(cdi_annotation_prefix), .set = set_cdi_annotation_prefix,
        .print = "flags.plugin.cdiAnnotationPrefix" },
    [OPT_NVIDIA_CDI_HOOK_PATH] = { { "nvidia-cdi-hook-path", "nvidia-ctk-path" },
        { "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH" }, KIND_STRING, G_DEV,
        "/usr/bin/nvidia-ctk", "path of the CDI hook binary written into CDI specs", NULL,
        CONFIG_AT(nvidia_cdi_hook_path), .print = "flags.plugin.nvidiaCTKPath" },
    [OPT_DRIVER_ROOT_CTR_PATH] = { { "driver-root-ctr-path", "container-driver-root" },
        { "DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT" }, KIND_STRING, G_DEV,
        "/driver-root", "where the host driver root is mounted in this container", NULL,
        CONFIG_AT(driver_root_ctr_path), .print = "flags.plugin.containerDriverRoot" },
    [OPT_MPS_ROOT] = { { "mps-root" }, { "MPS_ROOT" }, KIND_STRING, G_SHARE, "",
        "MPS root directory on the host (required for MPS sharing)", NULL,
        CONFIG_AT(mps_root), .print = "flags.mpsRoot" },
    [OPT_SHARED_ALLOC_POLICY] = { { "shared-devices-allocation-policy" },
        { "SHARED_DEVICES_ALLOCATION_POLICY" }, KIND_STRING, G_SHARE, "distributed",
        "how shared replicas are picked: distributed or packed", NULL,
        .set = set_shared_alloc_policy, .value = shared_alloc_policy_value,
        .print = "flags.plugin.sharedDevicesAllocationPolicy" },
    [OPT_DEVICE_DISCOVERY_STRATEGY] = { { "device-discovery-strategy" },
        { "DEVICE_DISCOVERY_STRATEGY" }, KIND_STRING, G_CORE, "auto",
        "how devices are discovered: auto, nvml or tegra", NULL,
        CONFIG_AT(device_discovery_strategy), .set = set_device_discovery_strategy,
        .print = "flags.deviceDiscoveryStrategy" },
    [OPT_IMEX_CHANNEL_IDS] = { { "imex-channel-ids" }, { "IMEX_CHANNEL_IDS" }, KIND_SLICE,
        G_SHARE, "", "IMEX channels to inject, comma separated ([] or [0])", NULL,
        .set = set_imex_channel_ids, .value = imex_channel_ids_value,
        .print = "imex.channelIDs" },
    [OPT_IMEX_REQUIRED] = { { "imex-required" }, { "IMEX_REQUIRED" }, KIND_BOOL, G_SHARE,
        "false", "fail when a requested IMEX channel is missing", NULL,
        CONFIG_AT(imex_required), .print = "imex.required" },
    [OPT_KUBELET_SOCKET] = { { "kubelet-socket" }, { "KUBELET_SOCKET" }, KIND_STRING, G_CORE,
        "/var/lib/kubelet/device-plugins/kubelet.sock",
        "kubelet registration socket (empty: do not register)", NULL,
        CONFIG_AT(kubelet_socket), .print = "extensions.kubeletSocket" },
    [OPT_CONFIG_FILE] = { { "config-file" }, { "CONFIG_FILE" }, KIND_STRING, G_CORE, NULL,
        "YAML or JSON config file", "",
        CONFIG_AT(config_file), .print = "extensions.configFile" },
    [OPT_CDI_FEATURE_FLAGS] = { { "cdi-feature-flags" }, { "CDI_FEATURE_FLAGS" }, KIND_SLICE,
        G_DEV, "", "feature flags for CDI spec generation, comma separated", NULL,
        CONFIG_AT(cdi_feature_flags), .print = "extensions.cdiFeatureFlags" },
    [OPT_CDI_DISABLE_HOOKS] = { { "cdi-disable-hooks" }, { "CDI_DISABLE_HOOKS" }, KIND_SLICE,
        G_DEV, "", "CDI hooks to leave out of specs, comma separated (all: no hooks)", NULL,
        CONFIG_AT(cdi_disable_hooks), .print = "extensions.cdiDisableHooks" },
    [OPT_SYSFS_ROOT] = { { "sysfs-root" }, { "GDP_SYSFS_ROOT" }, KIND_STRING, G_EXT, "/sys",
        "sysfs mount (NUMA nodes of PCI devices)", NULL,
        CONFIG_AT(sysfs_root), .print = "extensions.sysfsRoot" },
    [OPT_PROC_ROOT] = { { "proc-root" }, { "GDP_PROC_ROOT" }, KIND_STRING, G_EXT, "/proc",
        "procfs mount (nvidia-caps MIG minors)", NULL,
        CONFIG_AT(proc_root), .print = "extensions.procRoot" },
    [OPT_CDI_SPEC_DIR] = { { "cdi-spec-dir" }, { "GDP_CDI_SPEC_DIR" }, KIND_STRING, G_EXT,
        "/var/run/cdi", "where CDI spec files are written", NULL,
        CONFIG_AT(cdi_spec_dir), .print = "extensions.cdiSpecDir" },
    [OPT_LOG_VERBOSITY] = { { "v" }, { "GDP_LOG_VERBOSITY" }, KIND_INT, G_EXT, "0",
        "klog verbosity: 0 info, >= 1 debug", NULL,
        CONFIG_AT(log_verbosity), .min = 0, .max = INT_MAX, .print = "extensions.logVerbosity" },
    [OPT_LOG_FORMAT] = { { "log-format" }, { "GDP_LOG_FORMAT" }, KIND_STRING, G_EXT, "text",
        "log format: text (klog) or json", NULL,
        .set = set_log_format, .value = log_format_value, .print = "extensions.logFormat",
        .start_only = true },
    [OPT_METRICS_ADDRESS] = { { "metrics-address" }, { "GDP_METRICS_ADDRESS" }, KIND_STRING,
        G_EXT, "", "serve /metrics, /healthz and /readyz over HTTP on host:port or :port "
        "(empty: off)", NULL,
        CONFIG_AT(metrics_address), .print = "extensions.metricsAddress", .start_only = true },
    [OPT_HEALTH_QUIET_PERIOD] = { { "health-quiet-period" }, { "GDP_HEALTH_QUIET_PERIOD" },
        KIND_DURATION, G_HEALTH, "1m",
        "how long a device must stay quiet before a probe may bring it back (health.quietPeriod)",
        NULL,
        CONFIG_AT(health.quiet_ms), .print = "health.quietPeriod" },
    [OPT_HEALTH_MAX_QUIET_PERIOD] = { { "health-max-quiet-period" },
        { "GDP_HEALTH_MAX_QUIET_PERIOD" }, KIND_DURATION, G_HEALTH, "1h",
        "cap of the quiet period's doubling (health.maxQuietPeriod; follows a longer quiet "
        "period when unset)", NULL,
        CONFIG_AT(health.max_quiet_ms), .print = "health.maxQuietPeriod" },
    [OPT_HEALTH_FLAP_WINDOW] = { { "health-flap-window" }, { "GDP_HEALTH_FLAP_WINDOW" },
        KIND_DURATION, G_HEALTH, "10m",
        "failing again this soon after a recovery doubles the quiet period (health.flapWindow)",
        NULL,
        CONFIG_AT(health.flap_window_ms), .print = "health.flapWindow" },
    [OPT_HEALTH_UNATTRIBUTED_PROBE_DELAY] = { { "health-unattributed-probe-delay" },
        { "GDP_HEALTH_UNATTRIBUTED_PROBE_DELAY" }, KIND_DURATION, G_HEALTH, "2s",
        "probe delay after an event no device can be blamed for "
        "(health.unattributedProbeDelay)", NULL,
        CONFIG_AT(health.unattributed_probe_ms),
        .print = "health.unattributedProbeDelay" },
    [OPT_HEALTH_WAIT_TIMEOUT] = { { "health-wait-timeout" }, { "GDP_HEALTH_WAIT_TIMEOUT" },
        KIND_DURATION, G_HEALTH, "1h", "NVML event wait timeout, 10ms..24h (health.waitTimeout)",
        NULL,
        CONFIG_AT(health.wait_timeout_ms), .print = "health.waitTimeout" },
    [OPT_HEALTH_WAIT_ERROR_THRESHOLD] = { { "health-wait-error-threshold" },
        { "GDP_HEALTH_WAIT_ERROR_THRESHOLD" }, KIND_STRING, G_HEALTH, "5",
        "failed event waits in a row before every device is Unhealthy "
        "(health.waitErrorThreshold)", NULL,
        .set = config_health_option_set, .print = "health.waitErrorThreshold" },
    [OPT_HEALTH_XIDS_DEFAULT] = { { "health-xids-default" }, { "GDP_HEALTH_XIDS_DEFAULT" },
        KIND_STRING, G_HEALTH, "recover",
        "class of Xids without a rule: ignore, recover, lost or never (health.xids.default)",
        NULL,
        .set = config_health_option_set, .print = "health.xids.default" },
    [OPT_HEALTH_XIDS_IGNORE] = { { "health-xids-ignore" }, { "GDP_HEALTH_XIDS_IGNORE" },
        KIND_SLICE, G_HEALTH, "", "Xids to ignore, comma separated (health.xids.ignore)", NULL,
        .set = config_health_option_set, .print = "health.xids.ignore" },
    [OPT_HEALTH_XIDS_RECOVER] = { { "health-xids-recover" }, { "GDP_HEALTH_XIDS_RECOVER" },
        KIND_SLICE, G_HEALTH, "",
        "Xids that make a device Unhealthy until a probe after the quiet period "
        "(health.xids.recover)", NULL,
        .set = config_health_option_set, .print = "health.xids.recover" },
    [OPT_HEALTH_XIDS_LOST] = { { "health-xids-lost" }, { "GDP_HEALTH_XIDS_LOST" }, KIND_SLICE,
        G_HEALTH, "", "Xids treated as a GPU lost from the bus (health.xids.lost)", NULL,
        .set = config_health_option_set, .print = "health.xids.lost" },
    [OPT_HEALTH_XIDS_NEVER] = { { "health-xids-never" }, { "GDP_HEALTH_XIDS_NEVER" },
        KIND_SLICE, G_HEALTH, "",
        "Xids after which a device stays Unhealthy until restart (health.xids.never)", NULL,
        .set = config_health_option_set, .print = "health.xids.never" },
    [OPT_DP_DISABLE_HEALTHCHECKS] = { { NULL }, { "DP_DISABLE_HEALTHCHECKS" }, KIND_SLICE,
        G_HEALTH, "", "NVIDIA's switch: all (or xids) turns health checks off; numbers are "
        "ignored Xids", NULL,
        .set = config_health_option_set, .value = health_disabled_value,
        .print = "extensions.healthChecksDisabled" },
    [OPT_DP_ENABLE_HEALTHCHECKS] = { { NULL }, { "DP_ENABLE_HEALTHCHECKS" }, KIND_SLICE,
        G_HEALTH, "", "NVIDIA's switch: all acts on every Xid; numbers act although ignored",
        NULL,
        .set = config_health_option_set, .value = health_disabled_value,
        .print = "extensions.healthChecksDisabled" },
    [OPT_GFD] = { { "gfd" }, { "GDP_GFD" }, KIND_BOOL, G_LABELS, "false",
        "serve also publishes gpu-feature-discovery's node labels (ours)", NULL,
        CONFIG_AT(gfd), .print = "extensions.gfd", .start_only = true },
    [OPT_USE_NODE_FEATURE_API] = { { "use-node-feature-api" },
        { "GFD_USE_NODE_FEATURE_API", "USE_NODE_FEATURE_API" }, KIND_BOOL, G_LABELS, "true",
        "publish labels as an NFD NodeFeature object (false: the feature file)", NULL,
        CONFIG_AT(use_node_feature_api), .print = "flags.useNodeFeatureAPI",
        .start_only = true },
    [OPT_GFD_OUTPUT_FILE] = { { "output-file" }, { "GFD_OUTPUT_FILE" },
        KIND_STRING, G_LABELS, "/etc/kubernetes/node-feature-discovery/features.d/gfd",
        "NFD feature file the labels are written to (empty: stdout)", NULL,
        CONFIG_AT(gfd_output_file), .print = "flags.gfd.outputFile", .start_only = true },
    [OPT_NODE_LABELS_PATCH] = { { "node-labels-patch" }, { "GDP_NODE_LABELS_PATCH" }, KIND_BOOL,
        G_LABELS, "false", "patch the labels onto the Node directly, for clusters without NFD "
        "(ours)", NULL,
        CONFIG_AT(node_labels_patch), .print = "extensions.nodeLabelsPatch",
        .start_only = true },
    [OPT_GFD_NO_TIMESTAMP] = { { "no-timestamp" }, { "GFD_NO_TIMESTAMP" }, KIND_BOOL, G_LABELS,
        "false", "leave out the nvidia.com/gfd.timestamp label", NULL,
        CONFIG_AT(gfd_no_timestamp), .print = "flags.gfd.noTimestamp" },
    [OPT_MACHINE_TYPE_FILE] = { { "machine-type-file" }, { "GFD_MACHINE_TYPE_FILE" },
        KIND_STRING, G_LABELS, "/sys/class/dmi/id/product_name",
        "file holding the machine type (nvidia.com/gpu.machine)", NULL,
        CONFIG_AT(machine_type_file), .print = "flags.gfd.machineTypeFile" },
    [OPT_GFD_SLEEP_INTERVAL] = { { "sleep-interval" }, { "GFD_SLEEP_INTERVAL" }, KIND_DURATION,
        G_LABELS, "60s", "GFD's relabel period (Go duration or infinite): accepted, not used; "
        "labels are republished on start, reload and inventory change", NULL,
        .set = set_sleep_interval, .value = sleep_interval_value,
        .print = "flags.gfd.sleepInterval" },
    [OPT_KUBECONFIG] = { { "kubeconfig" }, { "KUBECONFIG" }, KIND_STRING, G_KUBE, "",
        "kubeconfig file for running outside a pod (empty: in-cluster service account)", NULL,
        CONFIG_AT(cluster.kubeconfig), .print = "extensions.cluster.kubeconfig",
        .start_only = true },
    [OPT_NODE_NAME] = { { "node-name" }, { "NODE_NAME" }, KIND_STRING, G_KUBE, "",
        "this node's name (downward API spec.nodeName); needed by labels via the API, "
        "per-node configuration and events", NULL,
        CONFIG_AT(cluster.node_name), .print = "extensions.cluster.nodeName",
        .start_only = true },
    [OPT_NAMESPACE] = { { "namespace" }, { "NAMESPACE" }, KIND_STRING, G_KUBE, "default",
        "namespace of the NodeFeature object", NULL,
        CONFIG_AT(cluster.namespace), .print = "extensions.cluster.namespace",
        .start_only = true },
    [OPT_POD_NAME] = { { "pod-name" }, { "POD_NAME" }, KIND_STRING, G_KUBE, "",
        "this pod's name: the NodeFeature object is owned by its DaemonSet", NULL,
        CONFIG_AT(cluster.pod_name), .print = "extensions.cluster.podName",
        .start_only = true },
    [OPT_KUBE_API_QPS] = { { "kube-api-qps" }, { "KUBE_API_QPS" }, KIND_NUMBER, G_KUBE, "5",
        "sustained requests per second to the API server", NULL,
        CONFIG_AT(cluster.kube_api_qps), .min = 0, .max = 1e6,
        .print = "extensions.cluster.kubeApiQps", .start_only = true },
    [OPT_KUBE_API_BURST] = { { "kube-api-burst" }, { "KUBE_API_BURST" }, KIND_INT, G_KUBE,
        "10", "requests allowed at once above --kube-api-qps", NULL,
        CONFIG_AT(cluster.kube_api_burst), .min = 1, .max = 100000,
        .print = "extensions.cluster.kubeApiBurst", .start_only = true },
    [OPT_CONFIG_DIR] = { { "config-dir" }, { "CONFIG_FILE_SRCDIR" }, KIND_STRING, G_KUBE, "",
        "directory of named config files (the mounted ConfigMap); the node label picks one "
        "(empty: off)", NULL,
        CONFIG_AT(cluster.config_dir), .print = "extensions.cluster.configDir",
        .start_only = true },
    [OPT_CONFIG_NODE_LABEL] = { { "config-node-label" }, { "NODE_LABEL" }, KIND_STRING, G_KUBE,
        "nvidia.com/device-plugin.config", "node label whose value names the config to apply",
        NULL,
        CONFIG_AT(cluster.config_node_label),
        .print = "extensions.cluster.configNodeLabel", .start_only = true },
    [OPT_CONFIG_DEFAULT] = { { "config-default" }, { "DEFAULT_CONFIG" }, KIND_STRING, G_KUBE,
        "", "config applied when the node label is absent or names no file", NULL,
        CONFIG_AT(cluster.config_default), .print = "extensions.cluster.configDefault",
        .start_only = true },
    [OPT_CONFIG_FALLBACK_STRATEGIES] = { { "config-fallback-strategies" },
        { "FALLBACK_STRATEGIES" }, KIND_SLICE, G_KUBE, "named,single",
        "without label or default: named (the config called \"default\"), single (the only "
        "config), empty (no config file), tried in order", NULL,
        CONFIG_AT(cluster.config_fallback_strategies),
        .set = config_cluster_fallback_set, .print = "extensions.cluster.configFallbackStrategies",
        .start_only = true },
    [OPT_EVENTS] = { { "events" }, { "GDP_EVENTS" }, KIND_BOOL, G_KUBE, "true",
        "post Kubernetes Events on the Node for health transitions and rejected configs "
        "(only with --node-name)", NULL,
        CONFIG_AT(cluster.events), .print = "extensions.cluster.events", .start_only = true },
    [OPT_DRA] = { { "dra" }, { "GDP_DRA" }, KIND_BOOL, G_DRA, "false",
        "serve GPUs through DRA (driver gpu.nvidia.com); gpu-kubelet-plugin implies it (ours)",
        NULL,
        CONFIG_AT(dra.enabled), .print = "extensions.dra.enabled", .start_only = true },
    [OPT_KUBELET_REGISTRAR_DIR] = { { "kubelet-registrar-directory-path" },
        { "KUBELET_REGISTRAR_DIRECTORY_PATH" }, KIND_STRING, G_DRA,
        "/var/lib/kubelet/plugins_registry",
        "directory the kubelet watches for plugin registration sockets", NULL,
        CONFIG_AT(dra.registrar_dir), .set = config_dra_option_set,
        .print = "extensions.dra.registrarDir", .start_only = true },
    [OPT_KUBELET_PLUGINS_DIR] = { { "kubelet-plugins-directory-path" },
        { "KUBELET_PLUGINS_DIRECTORY_PATH" }, KIND_STRING, G_DRA, "/var/lib/kubelet/plugins",
        "directory of the DRA socket and checkpoint (<dir>/gpu.nvidia.com/)", NULL,
        CONFIG_AT(dra.plugins_dir), .set = config_dra_option_set,
        .print = "extensions.dra.pluginsDir", .start_only = true },
    [OPT_CDI_ROOT] = { { "cdi-root" }, { "CDI_ROOT" }, KIND_STRING, G_DRA, "/etc/cdi",
        "where the per-claim CDI specs are written", NULL,
        CONFIG_AT(dra.cdi_root), .set = config_dra_option_set, .print = "extensions.dra.cdiRoot",
        .start_only = true },
    [OPT_DRA_DEVICE_PLUGIN_GPUS] = { { "dra-device-plugin-gpus" },
        { "GDP_DRA_DEVICE_PLUGIN_GPUS" }, KIND_SLICE, G_DRA, "",
        "with --dra: GPUs (index or UUID, comma separated) left to the device plugin instead "
        "of DRA, for moving a node one GPU at a time (ours)", NULL,
        CONFIG_AT(dra.device_plugin_gpus), .set = config_dra_option_set,
        .print = "extensions.dra.devicePluginGpus", .start_only = true },
    [OPT_FEATURE_GATES] = { { "feature-gates" }, { "FEATURE_GATES" }, KIND_SLICE, G_DRA, "",
        "NVIDIA's DRA driver feature gates, Name=bool comma separated: DynamicMIG (default "
        "false); its other gates are accepted, each with a warning (see docs/dra.md)", NULL,
        .set = config_dra_option_set, .value = config_dra_feature_gates_value,
        .print = "extensions.dra.featureGates", .start_only = true },
    [OPT_DRA_CONSUMABLE_CAPACITY] = { { "dra-consumable-capacity" },
        { "GDP_DRA_CONSUMABLE_CAPACITY" }, KIND_BOOL, G_DRA, "false",
        "with --dra: offer full GPUs and MIG devices as shares the scheduler accounts "
        "(consumable capacity: memory and compute), each enforced through MPS (ours; file: "
        "dra.consumableCapacity)",
        NULL, CONFIG_AT(dra.consumable), .print = "extensions.dra.consumableCapacity",
        .start_only = true },
    [OPT_DRA_SHARE_MEMORY_STEP] = { { "dra-share-memory-step" },
        { "GDP_DRA_SHARE_MEMORY_STEP" }, KIND_STRING, G_DRA, "1Gi",
        "GPU shares: the memory a share is rounded up to a multiple of (a quantity, whole "
        "MiB; file: dra.shareMemoryStep)", NULL,
        .set = config_dra_option_set, .value = config_dra_share_value,
        .print = "extensions.dra.shareMemoryStep", .start_only = true },
    [OPT_DRA_SHARE_MEMORY_DEFAULT] = { { "dra-share-memory-default" },
        { "GDP_DRA_SHARE_MEMORY_DEFAULT" }, KIND_STRING, G_DRA, "0",
        "GPU shares: the memory of a claim that asks for none (a quantity; 0: the whole "
        "GPU's; file: dra.shareMemoryDefault)", NULL,
        .set = config_dra_option_set, .value = config_dra_share_value,
        .print = "extensions.dra.shareMemoryDefault", .start_only = true },
    [OPT_DRA_SHARE_COMPUTE_DEFAULT] = { { "dra-share-compute-default" },
        { "GDP_DRA_SHARE_COMPUTE_DEFAULT" }, KIND_STRING, G_DRA, "10",
        "GPU shares: the compute (percent of the SMs, 1-100) of a claim that asks for none "
        "(file: dra.shareComputeDefault)", NULL,
        .set = config_dra_option_set, .value = config_dra_share_value,
        .print = "extensions.dra.shareComputeDefault", .start_only = true },
    /* no storage: actions, named so that clang's -Wmissing-field-initializers sees the
     * rest left zero on purpose */
    [OPT_HELP] = { { "help", "h" }, { NULL }, KIND_ACTION, G_MISC, NULL, "show help", NULL,
        .stored = false },
    [OPT_VERSION] = { { "version" }, { NULL }, KIND_ACTION, G_MISC, NULL,
        "print the version (-v is klog verbosity here, not --version)", NULL, .stored = false },
};

const char *const config_option_groups[] = { G_CORE, G_DEV, G_SHARE, G_HEALTH, G_LABELS, G_EXT,
                                             G_KUBE, G_DRA, G_MISC, NULL };

