/* The option table (reference §3.1 plus our extensions) and the command line /
 * environment half of config_load(). One row per option: names, env vars,
 * default, help text and the setter that parses its string form; the config file
 * (config-file.c) goes through the same setters, so a value is checked the same
 * way wherever it comes from. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/log.h"

enum opt_kind { KIND_STRING, KIND_BOOL, KIND_SLICE, KIND_ACTION };

struct option_def {
    const char *names[3];  /* without dashes; first is canonical */
    const char *envs[3];
    enum opt_kind kind;
    const char *group;
    const char *defval;    /* as shown by --help */
    const char *usage;
};

static const char G_CORE[] = "Plugin";
static const char G_DEV[] = "Device lists, IDs and CDI";
static const char G_SHARE[] = "MIG, sharing and IMEX";
static const char G_EXT[] = "gpu-device-plugin extensions (not in NVIDIA's plugin)";
static const char G_MISC[] = "Miscellaneous";

static const struct option_def options[_OPT_MAX] = {
    [OPT_MIG_STRATEGY] = { { "mig-strategy" }, { "MIG_STRATEGY" }, KIND_STRING, G_SHARE,
        "none", "how MIG devices are exposed: none, single or mixed" },
    [OPT_FAIL_ON_INIT_ERROR] = { { "fail-on-init-error" }, { "FAIL_ON_INIT_ERROR" }, KIND_BOOL,
        G_CORE, "true", "exit on NVML initialisation failure instead of waiting without devices" },
    [OPT_DRIVER_ROOT] = { { "driver-root", "nvidia-driver-root" }, { "NVIDIA_DRIVER_ROOT" },
        KIND_STRING, G_CORE, "/", "root of the NVIDIA driver installation on the host" },
    [OPT_DEV_ROOT] = { { "dev-root", "nvidia-dev-root" }, { "NVIDIA_DEV_ROOT" }, KIND_STRING,
        G_CORE, "(driver root)", "root of the NVIDIA device nodes on the host" },
    [OPT_PASS_DEVICE_SPECS] = { { "pass-device-specs" }, { "PASS_DEVICE_SPECS" }, KIND_BOOL,
        G_DEV, "false", "pass device nodes to the kubelet in Allocate (CPU manager compat)" },
    [OPT_DEVICE_LIST_STRATEGY] = { { "device-list-strategy" }, { "DEVICE_LIST_STRATEGY" },
        KIND_SLICE, G_DEV, "envvar",
        "how devices are passed to the runtime, comma separated: envvar, volume-mounts, "
        "cdi-annotations, cdi-cri" },
    [OPT_DEVICE_ID_STRATEGY] = { { "device-id-strategy" }, { "DEVICE_ID_STRATEGY" },
        KIND_STRING, G_DEV, "uuid", "how devices are named to the runtime: uuid or index" },
    [OPT_GDRCOPY_ENABLED] = { { "gdrcopy-enabled" }, { "GDRCOPY_ENABLED" }, KIND_BOOL, G_DEV,
        "false", "request GDRCopy in containers" },
    [OPT_GDS_ENABLED] = { { "gds-enabled" }, { "GDS_ENABLED" }, KIND_BOOL, G_DEV, "false",
        "request GPUDirect Storage in containers" },
    [OPT_MOFED_ENABLED] = { { "mofed-enabled" }, { "MOFED_ENABLED" }, KIND_BOOL, G_DEV,
        "false", "request MOFED in containers" },
    [OPT_CDI_ANNOTATION_PREFIX] = { { "cdi-annotation-prefix" }, { "CDI_ANNOTATION_PREFIX" },
        KIND_STRING, G_DEV, "cdi.k8s.io/", "prefix of the CDI annotation keys" },
    [OPT_NVIDIA_CDI_HOOK_PATH] = { { "nvidia-cdi-hook-path", "nvidia-ctk-path" },
        { "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH" }, KIND_STRING, G_DEV,
        "/usr/bin/nvidia-ctk", "path of the CDI hook binary written into CDI specs" },
    [OPT_DRIVER_ROOT_CTR_PATH] = { { "driver-root-ctr-path", "container-driver-root" },
        { "DRIVER_ROOT_CTR_PATH", "CONTAINER_DRIVER_ROOT" }, KIND_STRING, G_DEV,
        "/driver-root", "where the host driver root is mounted in this container" },
    [OPT_MPS_ROOT] = { { "mps-root" }, { "MPS_ROOT" }, KIND_STRING, G_SHARE, "",
        "MPS root directory on the host (required for MPS sharing)" },
    [OPT_SHARED_ALLOC_POLICY] = { { "shared-devices-allocation-policy" },
        { "SHARED_DEVICES_ALLOCATION_POLICY" }, KIND_STRING, G_SHARE, "distributed",
        "how shared replicas are picked: distributed or packed" },
    [OPT_DEVICE_DISCOVERY_STRATEGY] = { { "device-discovery-strategy" },
        { "DEVICE_DISCOVERY_STRATEGY" }, KIND_STRING, G_CORE, "auto",
        "how devices are discovered: auto, nvml or tegra" },
    [OPT_IMEX_CHANNEL_IDS] = { { "imex-channel-ids" }, { "IMEX_CHANNEL_IDS" }, KIND_SLICE,
        G_SHARE, "", "IMEX channels to inject, comma separated ([] or [0])" },
    [OPT_IMEX_REQUIRED] = { { "imex-required" }, { "IMEX_REQUIRED" }, KIND_BOOL, G_SHARE,
        "false", "fail when a requested IMEX channel is missing" },
    [OPT_KUBELET_SOCKET] = { { "kubelet-socket" }, { "KUBELET_SOCKET" }, KIND_STRING, G_CORE,
        "/var/lib/kubelet/device-plugins/kubelet.sock",
        "kubelet registration socket (empty: do not register)" },
    [OPT_CONFIG_FILE] = { { "config-file" }, { "CONFIG_FILE" }, KIND_STRING, G_CORE, "",
        "YAML or JSON config file" },
    [OPT_CDI_FEATURE_FLAGS] = { { "cdi-feature-flags" }, { "CDI_FEATURE_FLAGS" }, KIND_SLICE,
        G_DEV, "", "feature flags for CDI spec generation, comma separated" },
    [OPT_CDI_DISABLE_HOOKS] = { { "cdi-disable-hooks" }, { "CDI_DISABLE_HOOKS" }, KIND_SLICE,
        G_DEV, "", "CDI hooks to leave out of specs, comma separated (all: no hooks)" },
    [OPT_SYSFS_ROOT] = { { "sysfs-root" }, { "GDP_SYSFS_ROOT" }, KIND_STRING, G_EXT, "/sys",
        "sysfs mount (NUMA nodes of PCI devices)" },
    [OPT_PROC_ROOT] = { { "proc-root" }, { "GDP_PROC_ROOT" }, KIND_STRING, G_EXT, "/proc",
        "procfs mount (nvidia-caps MIG minors)" },
    [OPT_CDI_SPEC_DIR] = { { "cdi-spec-dir" }, { "GDP_CDI_SPEC_DIR" }, KIND_STRING, G_EXT,
        "/var/run/cdi", "where CDI spec files are written" },
    [OPT_LOG_VERBOSITY] = { { "v" }, { "GDP_LOG_VERBOSITY" }, KIND_STRING, G_EXT, "0",
        "klog verbosity: 0 info, >= 1 debug" },
    [OPT_LOG_FORMAT] = { { "log-format" }, { "GDP_LOG_FORMAT" }, KIND_STRING, G_EXT, "text",
        "log format: text (klog) or json" },
    [OPT_HELP] = { { "help", "h" }, { NULL }, KIND_ACTION, G_MISC, NULL, "show help" },
    [OPT_VERSION] = { { "version" }, { NULL }, KIND_ACTION, G_MISC, NULL,
        "print the version (-v is klog verbosity here, not --version)" },
};

int config_parse_bool(const char *s)
{
    static const char *const t[] = { "1", "t", "T", "TRUE", "true", "True" };
    static const char *const f[] = { "0", "f", "F", "FALSE", "false", "False" };
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        if (streq(s, t[i]))
            return 1;
        if (streq(s, f[i]))
            return 0;
    }
    return -EINVAL;
}

static void set_str(char **field, const char *value)
{
    free(*field);
    *field = xstrdup(value);
}

/* Split a comma-separated value; items are trimmed, empty items dropped. */
static char **split_list(const char *value, size_t *n_out)
{
    char **v = xcalloc(1, sizeof(char *));
    size_t n = 0;
    const char *p = value;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (len && isspace((unsigned char)*s))
            s++, len--;
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
        if (len) {
            v = xreallocarray(v, n + 2, sizeof(char *));
            v[n++] = xstrndup(s, len);
            v[n] = NULL;
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (n_out)
        *n_out = n;
    return v;
}

static void strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}
DEFINE_CLEANUP_FUNC(char *, strv_free)

static int set_device_list_strategy(struct config *c, const char *value, struct error *err)
{
    _cleanup_(strv_freep) char **v = split_list(value, NULL);
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
static int set_cdi_annotation_prefix(struct config *c, const char *value, struct error *err)
{
    size_t len = strlen(value);
    bool ok = len >= 2 && value[len - 1] == '/' && config_is_dns_subdomain(value, len - 1);
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

static int set_imex_channel_ids(struct config *c, const char *value, struct error *err)
{
    size_t n;
    _cleanup_(strv_freep) char **v = split_list(value, &n);
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

static int set_bool(bool *field, const char *value, struct error *err)
{
    int b = config_parse_bool(value);
    if (b < 0)
        return error_set(err, -EINVAL,
                         "invalid boolean value \"%s\" (allowed: true, false, 1, 0, t, f)",
                         value);
    *field = b;
    return 0;
}

static int set_verbosity(struct config *c, const char *value, struct error *err)
{
    char *end;
    errno = 0;
    long x = strtol(value, &end, 10);
    if (errno || *end || end == value || x < 0 || x > INT_MAX)
        return error_set(err, -EINVAL, "invalid -v value \"%s\": must be an integer >= 0",
                         value);
    c->log_verbosity = (int)x;
    return 0;
}

static int set_option(struct config *c, enum config_opt opt, const char *value,
                      struct error *err)
{
    switch (opt) {
    case OPT_MIG_STRATEGY:
        if (streq(value, "none"))
            c->mig_strategy = MIG_STRATEGY_NONE;
        else if (streq(value, "single"))
            c->mig_strategy = MIG_STRATEGY_SINGLE;
        else if (streq(value, "mixed"))
            c->mig_strategy = MIG_STRATEGY_MIXED;
        else
            return error_set(err, -EINVAL,
                             "unknown MIG strategy: %s (allowed: none, single, mixed)", value);
        return 0;
    case OPT_FAIL_ON_INIT_ERROR: return set_bool(&c->fail_on_init_error, value, err);
    case OPT_DRIVER_ROOT: set_str(&c->driver_root, value); return 0;
    case OPT_DEV_ROOT: set_str(&c->dev_root, value); return 0;
    case OPT_PASS_DEVICE_SPECS: return set_bool(&c->pass_device_specs, value, err);
    case OPT_DEVICE_LIST_STRATEGY: return set_device_list_strategy(c, value, err);
    case OPT_DEVICE_ID_STRATEGY:
        if (streq(value, "uuid"))
            c->device_id_strategy = DEVICE_ID_UUID;
        else if (streq(value, "index"))
            c->device_id_strategy = DEVICE_ID_INDEX;
        else
            return error_set(err, -EINVAL,
                             "invalid --device-id-strategy option: %s (allowed: uuid, index)",
                             value);
        return 0;
    case OPT_GDRCOPY_ENABLED: return set_bool(&c->gdrcopy_enabled, value, err);
    case OPT_GDS_ENABLED: return set_bool(&c->gds_enabled, value, err);
    case OPT_MOFED_ENABLED: return set_bool(&c->mofed_enabled, value, err);
    case OPT_CDI_ANNOTATION_PREFIX: return set_cdi_annotation_prefix(c, value, err);
    case OPT_NVIDIA_CDI_HOOK_PATH: set_str(&c->nvidia_cdi_hook_path, value); return 0;
    case OPT_DRIVER_ROOT_CTR_PATH: set_str(&c->driver_root_ctr_path, value); return 0;
    case OPT_MPS_ROOT: set_str(&c->mps_root, value); return 0;
    case OPT_SHARED_ALLOC_POLICY:
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
    case OPT_DEVICE_DISCOVERY_STRATEGY:
        if (!streq(value, "auto") && !streq(value, "nvml") && !streq(value, "tegra"))
            return error_set(err, -EINVAL,
                             "invalid --device-discovery-strategy option %s "
                             "(allowed: auto, nvml, tegra)",
                             value);
        set_str(&c->device_discovery_strategy, value);
        return 0;
    case OPT_IMEX_CHANNEL_IDS: return set_imex_channel_ids(c, value, err);
    case OPT_IMEX_REQUIRED: return set_bool(&c->imex_required, value, err);
    case OPT_KUBELET_SOCKET: set_str(&c->kubelet_socket, value); return 0;
    case OPT_CONFIG_FILE: set_str(&c->config_file, value); return 0;
    case OPT_CDI_FEATURE_FLAGS:
        strv_free(c->cdi_feature_flags);
        c->cdi_feature_flags = split_list(value, NULL);
        return 0;
    case OPT_CDI_DISABLE_HOOKS:
        strv_free(c->cdi_disable_hooks);
        c->cdi_disable_hooks = split_list(value, NULL);
        return 0;
    case OPT_SYSFS_ROOT: set_str(&c->sysfs_root, value); return 0;
    case OPT_PROC_ROOT: set_str(&c->proc_root, value); return 0;
    case OPT_CDI_SPEC_DIR: set_str(&c->cdi_spec_dir, value); return 0;
    case OPT_LOG_VERBOSITY: return set_verbosity(c, value, err);
    case OPT_LOG_FORMAT:
        if (streq(value, "text"))
            c->log_json = false;
        else if (streq(value, "json"))
            c->log_json = true;
        else
            return error_set(err, -EINVAL,
                             "invalid --log-format option: %s (allowed: text, json)", value);
        return 0;
    case OPT_HELP:
    case OPT_VERSION:
    case _OPT_MAX:
        break;
    }
    return error_set(err, -EINVAL, "option cannot be set");
}

/* Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF). */
static bool utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned char c = *s++;
        int more = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        if (more < 0)
            return false;
        unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        for (int i = 0; i < more; i++, s++) {
            if (*s < (i == 0 ? lo : 0x80) || *s > (i == 0 ? hi : 0xbf))
                return false;
        }
    }
    return true;
}

int config_option_set(struct config *c, enum config_opt opt, const char *value,
                      const char *origin, struct error *err)
{
    /* Flags and the environment are bytes; everything downstream (the JSON print at
     * start-up, CDI specs, the kubelet's protobuf strings) needs text. The file's
     * values are text already (libyaml checks). The value is not echoed: it is not
     * printable. */
    int r = utf8_valid(value) ? set_option(c, opt, value, err)
                              : error_set(err, -EINVAL, "value is not valid UTF-8");
    if (r < 0)
        return error_prefix(err, "%s", origin);
    return 0;
}

static int find_option(const char *name, size_t len)
{
    for (int i = 0; i < _OPT_MAX; i++)
        for (size_t k = 0; k < ELEMENTSOF(options[i].names) && options[i].names[k]; k++)
            if (strlen(options[i].names[k]) == len && !strncmp(options[i].names[k], name, len))
                return i;
    return -1;
}

static const char *env_lookup(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

static void cmd_push(struct config_command *cmd, const char *arg)
{
    cmd->args = xreallocarray(cmd->args, cmd->n_args + 2, sizeof(char *));
    cmd->args[cmd->n_args++] = arg;
    cmd->args[cmd->n_args] = NULL;
}

void config_command_free(struct config_command *cmd)
{
    if (!cmd)
        return;
    free(cmd->args);
    *cmd = (struct config_command){ 0 };
}

struct cli_values {
    char *value[_OPT_MAX];  /* slices: every occurrence joined with ',' */
    char *origin[_OPT_MAX]; /* the flag as typed, e.g. "--nvidia-driver-root" */
};

static void cli_values_clear(struct cli_values *v)
{
    for (int i = 0; i < _OPT_MAX; i++) {
        free(v->value[i]);
        free(v->origin[i]);
    }
}

static int positional(struct config_command *cmd, const char *arg, struct error *err)
{
    if (!cmd)
        return error_set(err, -EINVAL, "unexpected argument: %s", arg);
    if (!cmd->name)
        cmd->name = arg;
    else
        cmd_push(cmd, arg);
    return 0;
}

/* Go's flag package (under urfave/cli) accepts -name and --name alike, with the
 * value as "=value" or the next argument; booleans never take the next argument. */
static int parse_argv(int argc, char **argv, struct cli_values *v, struct config_command *cmd,
                      struct error *err)
{
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == 0) {
            int r = positional(cmd, arg, err);
            if (r < 0)
                return r;
            continue;
        }
        if (streq(arg, "--")) {
            only_positional = true;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int opt = find_option(name, len);
        if (opt < 0) {
            if (cmd && cmd->name) {
                cmd_push(cmd, arg); /* the subcommand's own flag */
                continue;
            }
            return error_set(err, -EINVAL, "unknown flag: --%.*s", (int)len, name);
        }
        const struct option_def *o = &options[opt];
        if (o->kind == KIND_ACTION)
            return opt == OPT_HELP ? CONFIG_LOAD_HELP : CONFIG_LOAD_VERSION;
        const char *value;
        if (eq)
            value = eq + 1;
        else if (o->kind == KIND_BOOL)
            value = "true";
        else if (i + 1 < argc)
            value = argv[++i];
        else
            return error_set(err, -EINVAL, "flag needs an argument: -%.*s", (int)len, name);

        if (o->kind == KIND_SLICE && v->value[opt]) {
            char *joined = xasprintf("%s,%s", v->value[opt], value);
            free(v->value[opt]);
            v->value[opt] = joined;
        } else {
            free(v->value[opt]);
            v->value[opt] = xstrdup(value);
        }
        free(v->origin[opt]);
        v->origin[opt] = xstrndup(arg, (size_t)(name - arg) + len); /* as typed */
    }
    return 0;
}

static void post_defaults(struct config *c)
{
    if (!c->dev_root || !*c->dev_root)
        set_str(&c->dev_root, c->driver_root);
    if (c->mps.present && c->mps.fail_requests_greater_than_one < 0)
        c->mps.fail_requests_greater_than_one = 1;
    if (c->time_slicing.fail_requests_greater_than_one < 0)
        c->time_slicing.fail_requests_greater_than_one = 0;
}

static int load(struct config *out, int argc, char **argv, char **envp,
                struct config_command *cmd, struct error *err)
{
    _cleanup_(cli_values_clear) struct cli_values v = { 0 };
    bool set[_OPT_MAX] = { 0 };
    struct config_file_marks marks = { 0 };
    int r;

    r = parse_argv(argc, argv, &v, cmd, err);
    if (r != 0)
        return r;

    for (int i = 0; i < _OPT_MAX; i++) {
        if (v.value[i]) {
            r = config_option_set(out, i, v.value[i], v.origin[i], err);
            if (r < 0)
                return r;
            set[i] = true;
            continue;
        }
        /* An empty variable counts as unset: Helm and manifests often render
         * `VAR: ""` for "not configured". */
        for (size_t k = 0; k < ELEMENTSOF(options[i].envs) && options[i].envs[k]; k++) {
            const char *e = env_lookup(envp, options[i].envs[k]);
            if (!e || !*e)
                continue;
            _cleanup_free_ char *origin = xasprintf("env %s", options[i].envs[k]);
            r = config_option_set(out, i, e, origin, err);
            if (r < 0)
                return r;
            set[i] = true;
            break;
        }
    }

    if (out->config_file && *out->config_file) {
        r = config_file_load(out, out->config_file, set, &marks, err);
        if (r < 0)
            return r;
    } else if (out->config_file) {
        free(out->config_file);
        out->config_file = NULL;
    }

    post_defaults(out);
    return config_validate(out, &marks, err);
}

int config_load(struct config *out, int argc, char **argv, char **envp,
                struct config_command *cmd, struct error *err)
{
    config_init_defaults(out);
    if (cmd) {
        *cmd = (struct config_command){ 0 };
        cmd->args = xcalloc(1, sizeof(char *));
    }
    int r = load(out, argc, argv, envp, cmd, err);
    if (r < 0)
        config_command_free(cmd);
    return r;
}

void config_print_help(FILE *f, const char *argv0)
{
    static const char *const groups[] = { G_CORE, G_DEV, G_SHARE, G_EXT, G_MISC };
    fprintf(f,
            "Usage: %s [flags] [list|config] [args]\n\n"
            "Kubernetes device plugin for NVIDIA GPUs (drop-in for NVIDIA's "
            "k8s-device-plugin).\nPrecedence per setting: flag > environment > "
            "--config-file > default.\n",
            argv0 ? argv0 : "gpu-device-plugin");
    for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
        fprintf(f, "\n%s:\n", groups[g]);
        for (int i = 0; i < _OPT_MAX; i++) {
            const struct option_def *o = &options[i];
            if (o->group != groups[g])
                continue;
            char names[160] = "";
            size_t off = 0;
            for (size_t k = 0; k < ELEMENTSOF(o->names) && o->names[k]; k++) {
                bool shrt = strlen(o->names[k]) == 1;
                int n = snprintf(names + off, sizeof(names) - off, "%s%s%s", k ? ", " : "",
                                 shrt ? "-" : "--", o->names[k]);
                if (n < 0 || (size_t)n >= sizeof(names) - off)
                    break;
                off += (size_t)n;
            }
            fprintf(f, "  %s%s\n        %s", names,
                    o->kind == KIND_STRING || o->kind == KIND_SLICE ? " value" : "", o->usage);
            if (o->defval)
                fprintf(f, " (default: \"%s\")", o->defval);
            for (size_t k = 0; k < ELEMENTSOF(o->envs) && o->envs[k]; k++)
                fprintf(f, "%s$%s", k ? ", " : " [", o->envs[k]);
            fprintf(f, "%s\n", o->envs[0] ? "]" : "");
        }
    }
}
