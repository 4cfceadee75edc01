/* The Dynamic Resource Allocation options (struct config_dra): the setters of the table's
 * rows that need more than their kind (config-options.c), for every source (flags,
 * environment, defaults). */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/un.h>

#include "config/config-internal.h"
#include "core/log.h"
#include "core/quantity.h"
#include "core/suggest.h"

/* Each of the two directories gets a Unix socket, and a socket's whole path, NUL
 * included, must fit in sun_path (108 bytes on Linux). So each directory may be as long
 * as leaves room for "/" and the longest socket name put there: the registrar directory
 * gets "gpu.nvidia.com-reg.sock", the plugins directory "gpu.nvidia.com/dra.sock"; each
 * is bound first under a hidden temporary name beside it, ".<name>.tmp", and renamed into
 * place (grpc/grpc_server.c: a watcher never sees it before it listens), and that name is
 * the longest. Anything else there (the checkpoint) is a file, which PATH_MAX bounds. */
#define SUN_PATH_SIZE sizeof(((struct sockaddr_un *)0)->sun_path)
/* dra/dra-types.h's DRA_DRIVER_NAME, which config, below dra, cannot include (test-config
 * checks that the two agree) */
#define DRIVER_NAME "gpu.nvidia.com"
#define STAGED(name) "." name ".tmp"
#define REGISTRAR_SOCKET STAGED(DRIVER_NAME "-reg.sock")
#define PLUGINS_SOCKET DRIVER_NAME "/" STAGED("dra.sock")
/* sizeof("/" name) counts the "/", the name and the NUL */
#define DIR_MAX(name) (SUN_PATH_SIZE - sizeof("/" name))

static int set_dir(char **field, const char *flag, const char *value, size_t max,
                   const char *socket_name, struct error *err)
{
    if (value[0] != '/')
        return error_set(err, -EINVAL, "invalid --%s \"%s\": must be an absolute path", flag,
                         value);
    if (strlen(value) > max) {
        if (socket_name)
            return error_set(err, -EINVAL,
                             "invalid --%s \"%s\": %zu bytes, longer than %zu: the path of "
                             "the socket put there, \"<dir>/%s\", must fit in a Unix "
                             "socket address (%zu bytes with its NUL)",
                             flag, value, strlen(value), max, socket_name, SUN_PATH_SIZE);
        return error_set(err, -EINVAL, "invalid --%s \"%s\": longer than %zu bytes", flag,
                         value, max);
    }
    free(*field);
    *field = xstrdup(value);
    return 0;
}

/* A GPU is named by its NVML index or its UUID, as the config file's device lists name
 * them; whether it exists is known only after discovery (the daemon says so then). */
static int set_device_plugin_gpus(struct config *c, const char *value, struct error *err)
{
    char **v = config_split_list(value, NULL);
    for (char **p = v; *p; p++) {
        bool index = true;
        for (const char *s = *p; *s; s++)
            index = index && *s >= '0' && *s <= '9';
        if (!(index && strlen(*p) <= 4) && strncmp(*p, "GPU-", 4) != 0) {
            int r = error_set(err, -EINVAL,
                              "invalid --dra-device-plugin-gpus entry \"%s\": a GPU index or "
                              "a GPU UUID (GPU-...)",
                              *p);
            config_strv_free(v);
            return r;
        }
    }
    config_strv_free(c->dra.device_plugin_gpus);
    c->dra.device_plugin_gpus = v;
    return 0;
}

/* NVIDIA's DRA driver feature gates (its pkg/featuregates, and the two every Kubernetes
 * gate set has), parsed as Kubernetes' featuregate package parses --feature-gates:
 * "Name=bool" items, comma separated, trimmed, the last of a name winning; an unknown
 * name or a value that is not a boolean is an error. DynamicMIG is stored; the others
 * change nothing here: ours either always does what the gate turns on, or does not
 * implement it (docs/dra.md, "Feature gates"). */
enum gate_use { GATE_STORED, GATE_ALWAYS, GATE_NOT_IMPLEMENTED };

static const struct {
    const char *name;
    enum gate_use use;
    const char *why; /* the warning's reason */
} gates[] = {
    { "DynamicMIG", GATE_STORED, NULL },
    { "TimeSlicingSettings", GATE_ALWAYS, "claims asking for TimeSlicing are always served" },
    { "NVMLDeviceHealthCheck", GATE_ALWAYS,
      "the device plugin's recovering health monitor always drives DRA health" },
    { "MPSSupport", GATE_ALWAYS,
      "claims asking for MPS get a control daemon from the mps-control-daemon DaemonSet (--dra)" },
    { "PassthroughSupport", GATE_NOT_IMPLEMENTED, "no VFIO devices are served" },
    { "ConsumableShares", GATE_NOT_IMPLEMENTED, "devices are not published as shareable" },
    { "FabricManagerPartitioning", GATE_NOT_IMPLEMENTED,
      "no Fabric Manager partition attributes are published" },
    { "DRAListTypeAttributes", GATE_NOT_IMPLEMENTED, "attributes keep their scalar types" },
    { "IMEXDaemonsWithDNSNames", GATE_NOT_IMPLEMENTED,
      "IMEX daemons are the compute-domain driver's, which this is not" },
    { "AllAlpha", GATE_NOT_IMPLEMENTED, "set each gate by name" },
    { "AllBeta", GATE_NOT_IMPLEMENTED, "set each gate by name" },
};

/* NVIDIA refuses these beside DynamicMIG at start. It refuses NVMLDeviceHealthCheck
 * too, because its health checks need an NVML session of their own; ours share one with
 * everything else, so health stays on with DynamicMIG. */
static const char *const excluded_by_dynamic_mig[] = { "PassthroughSupport", "MPSSupport" };

static int gate_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(gates); i++)
        if (streq(name, gates[i].name))
            return (int)i;
    return -1;
}

static int gate_unknown(const char *name, struct error *err)
{
    struct suggest sg;
    suggest_init(&sg, name, strlen(name));
    for (size_t i = 0; i < ELEMENTSOF(gates); i++)
        suggest_offer(&sg, gates[i].name);
    const char *best = suggest_best(&sg);
    if (best)
        return error_set(err, -EINVAL, "unrecognized feature gate: %s; did you mean %s?", name,
                         best);
    return error_set(err, -EINVAL, "unrecognized feature gate: %s (see docs/dra.md)", name);
}

/* Whether item is "<name>=...". */
static bool gate_is(const char *item, const char *name)
{
    size_t len = strlen(name);
    return !strncmp(item, name, len) && item[len] == '=';
}

/* Whether v ("Name=true|false" items) names the gate; *on its value then. */
static bool gate_value(char *const *v, const char *name, bool *on)
{
    for (; v && *v; v++)
        if (gate_is(*v, name)) {
            *on = streq(strchr(*v, '=') + 1, "true");
            return true;
        }
    return false;
}

static int set_feature_gates(struct config *c, const char *value, struct error *err)
{
    _cleanup_(config_strv_freep) char **items = config_split_list(value, NULL);
    _cleanup_(config_strv_freep) char **set = xcalloc(ELEMENTSOF(gates) + 1, sizeof(char *));
    size_t n = 0;
    for (char **it = items; *it; it++) {
        char *eq = strchr(*it, '=');
        _cleanup_free_ char *name = xstrndup(*it, eq ? (size_t)(eq - *it) : strlen(*it));
        char *end = name + strlen(name);
        while (end > name && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = 0;
        if (!eq)
            return error_set(err, -EINVAL, "missing bool value for %s", name);
        const char *val = eq + 1 + strspn(eq + 1, " \t");
        int g = gate_find(name);
        if (g < 0)
            return gate_unknown(name, err);
        int b = config_parse_bool(val);
        if (b < 0)
            return error_set(err, -EINVAL,
                             "invalid value of %s=%s (allowed: true, false, 1, 0, t, f)", name,
                             val);
        size_t k = 0;
        while (k < n && !gate_is(set[k], name))
            k++;
        free(set[k]);
        set[k] = xasprintf("%s=%s", name, b ? "true" : "false");
        n += k == n;
    }
    bool dynamic_mig = false, on;
    if (gate_value(set, "DynamicMIG", &on))
        dynamic_mig = on;
    for (size_t i = 0; dynamic_mig && i < ELEMENTSOF(excluded_by_dynamic_mig); i++)
        if (gate_value(set, excluded_by_dynamic_mig[i], &on) && on)
            return error_set(err, -EINVAL,
                             "feature gate DynamicMIG is currently mutually exclusive with %s",
                             excluded_by_dynamic_mig[i]);
    c->dra.dynamic_mig = dynamic_mig;
    config_strv_free(c->dra.feature_gates);
    c->dra.feature_gates = TAKE_PTR(set);
    return 0;
}

/* {"DynamicMIG": bool, then each other gate named, as given}. */
json_t *config_dra_feature_gates_value(const struct config *c, enum config_opt opt)
{
    json_t *o = json_pack("{s:b}", "DynamicMIG", c->dra.dynamic_mig);
    for (char **v = c->dra.feature_gates; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        _cleanup_free_ char *name = xstrndup(*v, (size_t)(eq - *v));
        if (!streq(name, "DynamicMIG"))
            json_object_set_new(o, name, json_boolean(streq(eq + 1, "true")));
    }
    return o;
}

void config_dra_feature_gates_warn(const struct config *c)
{
    char *const *v = c->dra.feature_gates;
    if (!v || !*v)
        return;
    if (!c->dra.enabled) {
        log_warning("--feature-gates: NVIDIA's DRA driver gates act only with --dra (or as "
                    "gpu-kubelet-plugin), ignoring");
        return;
    }
    for (; *v; v++) {
        const char *eq = strchr(*v, '=');
        _cleanup_free_ char *name = xstrndup(*v, (size_t)(eq - *v));
        int g = gate_find(name);
        if (g < 0 || gates[g].use == GATE_STORED)
            continue;
        log_warning("Feature gate %s: %s in gpu-device-plugin (%s), ignoring", *v,
                    gates[g].use == GATE_ALWAYS ? "always on" : "not implemented",
                    gates[g].why);
    }
}

/* GPU shares' request policy: memory in whole MiB (MPS takes its limits in MiB), compute
 * in whole percent (MPS's active thread percentage). */
static int set_share(struct config *c, enum config_opt opt, const char *value, struct error *err)
{
    int64_t v = 0;
    const char *flag = opt == OPT_DRA_SHARE_MEMORY_STEP      ? "dra-share-memory-step"
                       : opt == OPT_DRA_SHARE_MEMORY_DEFAULT ? "dra-share-memory-default"
                                                             : "dra-share-compute-default";
    if (quantity_parse(value, &v) < 0 || v < 0)
        return error_set(err, -EINVAL, "invalid --%s \"%s\": not a Kubernetes quantity", flag, value);
    if (opt == OPT_DRA_SHARE_COMPUTE_DEFAULT) {
        if (v < 1 || v > 100)
            return error_set(err, -EINVAL, "invalid --%s \"%s\": a percent of the SMs, 1 to 100",
                             flag, value);
        c->dra.share_compute_default = (unsigned)v;
        return 0;
    }
    if (v % (1 << 20) || (opt == OPT_DRA_SHARE_MEMORY_STEP && v == 0))
        return error_set(err, -EINVAL, "invalid --%s \"%s\": a whole number of MiB%s", flag, value,
                         opt == OPT_DRA_SHARE_MEMORY_STEP ? ", at least 1Mi" : "");
    if (opt == OPT_DRA_SHARE_MEMORY_STEP)
        c->dra.share_memory_step = (uint64_t)v;
    else
        c->dra.share_memory_default = (uint64_t)v;
    return 0;
}

json_t *config_dra_share_value(const struct config *c, enum config_opt opt)
{
    char buf[32];
    if (opt == OPT_DRA_SHARE_COMPUTE_DEFAULT)
        return json_integer(c->dra.share_compute_default);
    uint64_t v = opt == OPT_DRA_SHARE_MEMORY_STEP ? c->dra.share_memory_step : c->dra.share_memory_default;
    snprintf(buf, sizeof(buf), "%lluMi", (unsigned long long)(v >> 20));
    return json_string(v ? buf : "0");
}

int config_dra_option_set(struct config *c, enum config_opt opt, const char *value,
                          struct error *err)
{
    switch (opt) {
    case OPT_KUBELET_REGISTRAR_DIR:
        return set_dir(&c->dra.registrar_dir, "kubelet-registrar-directory-path", value,
                       DIR_MAX(REGISTRAR_SOCKET), REGISTRAR_SOCKET, err);
    case OPT_KUBELET_PLUGINS_DIR:
        return set_dir(&c->dra.plugins_dir, "kubelet-plugins-directory-path", value,
                       DIR_MAX(PLUGINS_SOCKET), PLUGINS_SOCKET, err);
    case OPT_CDI_ROOT:
        return set_dir(&c->dra.cdi_root, "cdi-root", value, PATH_MAX / 2, NULL, err);
    case OPT_DRA_DEVICE_PLUGIN_GPUS: return set_device_plugin_gpus(c, value, err);
    case OPT_FEATURE_GATES: return set_feature_gates(c, value, err);
    case OPT_DRA_SHARE_MEMORY_STEP:
    case OPT_DRA_SHARE_MEMORY_DEFAULT:
    case OPT_DRA_SHARE_COMPUTE_DEFAULT: return set_share(c, opt, value, err);
    default: abort(); /* only the rows above name this setter */
    }
}
