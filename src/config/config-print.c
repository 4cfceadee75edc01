/* `config print` and the "Running with config" log line: the effective
 * configuration as JSON in the reference's shape (api/config/v1 field names), with
 * our own settings under "extensions". */
#include <jansson.h>

#include "config/config-internal.h"
#include "config/config-load.h"

static json_t *patterns_json(const struct config_pattern *p, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s, s:s}", "pattern", p[i].pattern, "name",
                                           p[i].name));
    return a;
}

static json_t *sharing_json(const struct config_sharing *s)
{
    json_t *o = json_object();
    if (!s->present)
        return o;
    json_object_set_new(o, "renameByDefault", json_boolean(s->rename_by_default));
    if (s->fail_requests_greater_than_one >= 0)
        json_object_set_new(o, "failRequestsGreaterThanOne",
                            json_boolean(s->fail_requests_greater_than_one));
    json_t *res = json_array();
    for (size_t i = 0; i < s->n_resources; i++) {
        const struct config_replicated *r = &s->resources[i];
        json_t *e = json_pack("{s:s, s:i}", "name", r->name, "replicas", r->replicas);
        if (r->rename)
            json_object_set_new(e, "rename", json_string(r->rename));
        json_t *dev;
        if (r->devices_kind == DEVICES_COUNT) {
            dev = json_integer(r->devices_count);
        } else if (r->devices_kind == DEVICES_LIST) {
            dev = json_array();
            for (size_t j = 0; j < r->n_devices; j++)
                json_array_append_new(dev, json_string(r->devices[j].ref));
        } else {
            dev = json_string("all");
        }
        json_object_set_new(e, "devices", dev);
        json_array_append_new(res, e);
    }
    json_object_set_new(o, "resources", res);
    return o;
}

/* The reference's key order ("Running with config" prints api/config/v1's structs in
 * field order), and our extensions' as they were first printed. Only the order: each
 * value comes from its option's row (`print`), in place of the placeholder; a row whose
 * key is not here goes at the end of its object, so a new option needs only its row. */
static const char SHAPE[] =
    "{\"version\": \"v1\","
    " \"flags\": {\"migStrategy\": 0, \"failOnInitError\": 0, \"mpsRoot\": 0,"
    "  \"nvidiaDriverRoot\": 0, \"nvidiaDevRoot\": 0, \"gdrcopyEnabled\": 0, \"gdsEnabled\": 0,"
    "  \"mofedEnabled\": 0, \"useNodeFeatureAPI\": 0, \"deviceDiscoveryStrategy\": 0,"
    "  \"plugin\": {\"passDeviceSpecs\": 0, \"deviceListStrategy\": 0, \"deviceIDStrategy\": 0,"
    "   \"cdiAnnotationPrefix\": 0, \"nvidiaCTKPath\": 0, \"containerDriverRoot\": 0,"
    "   \"sharedDevicesAllocationPolicy\": 0},"
    "  \"gfd\": {\"oneshot\": false, \"noTimestamp\": 0, \"sleepInterval\": 0, \"outputFile\": 0,"
    "   \"machineTypeFile\": 0}},"
    " \"resources\": 0, \"sharing\": 0, \"imex\": {\"channelIDs\": 0, \"required\": 0},"
    " \"health\": 0,"
    " \"extensions\": {\"configFile\": 0, \"kubeletSocket\": 0, \"cdiFeatureFlags\": 0,"
    "  \"cdiDisableHooks\": 0, \"sysfsRoot\": 0, \"procRoot\": 0, \"cdiSpecDir\": 0,"
    "  \"logVerbosity\": 0, \"logFormat\": 0, \"healthChecksDisabled\": 0, \"gfd\": 0,"
    "  \"nodeLabelsPatch\": 0, \"metricsAddress\": 0, \"cluster\": {}, \"dra\": {}}}";

/* Put v at a dotted path of root, making the objects on the way. */
static void put(json_t *root, const char *path, json_t *v)
{
    json_t *o = root;
    for (const char *p = path, *dot; (dot = strchr(p, '.')); p = dot + 1) {
        _cleanup_free_ char *key = xstrndup(p, (size_t)(dot - p));
        json_t *next = json_object_get(o, key);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(o, key, next);
        }
        o = next;
    }
    json_object_set_new(o, strrchr(path, '.') ? strrchr(path, '.') + 1 : path, v);
}

static json_t *config_json(const struct config *c)
{
    json_t *root = json_loads(SHAPE, 0, NULL);
    if (!root)
        oom(); /* the shape is a constant: only allocation fails */
    for (int i = 0; i < _OPT_MAX; i++) {
        const char *path = config_options[i].print;
        /* the health rows are in config_health_json's section, put whole below */
        if (path && !startswith(path, "health."))
            put(root, path, config_option_json(c, i));
    }

    json_t *resources = json_object();
    if (c->n_gpu_patterns)
        json_object_set_new(resources, "gpus", patterns_json(c->gpu_patterns, c->n_gpu_patterns));
    if (c->n_mig_patterns)
        json_object_set_new(resources, "mig", patterns_json(c->mig_patterns, c->n_mig_patterns));
    json_object_set_new(root, "resources", resources);

    json_t *sharing = json_pack("{s:o}", "timeSlicing", sharing_json(&c->time_slicing));
    if (c->mps.present)
        json_object_set_new(sharing, "mps", sharing_json(&c->mps));
    json_object_set_new(root, "sharing", sharing);
    json_object_set_new(root, "health", config_health_json(&c->health));
    return root;
}

char *config_to_json_string(const struct config *c, bool indent)
{
    json_t *j = config_json(c);
    char *s = j ? json_dumps(j, (indent ? JSON_INDENT(2) : JSON_COMPACT) | JSON_PRESERVE_ORDER)
                : NULL;
    json_decref(j);
    if (!s)
        oom(); /* json_pack only fails on allocation (the format strings are fixed) */
    return s;
}

int config_print_json(const struct config *c, FILE *f)
{
    _cleanup_free_ char *s = config_to_json_string(c, true);
    if (fprintf(f, "%s\n", s) < 0 || fflush(f) != 0)
        return -EIO;
    return 0;
}

/* One option's --help entry: its names (plus `aliases`, as written), its usage (or
 * `usage`), default and environment variables (`envs` first, then the option's own). */
static void print_option(FILE *f, const struct config_option_def *o, const char *aliases,
                         const char *usage, const char *const *envs)
{
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
    if (!o->names[0])
        snprintf(names, sizeof(names), "(environment only)");
    fprintf(f, "  %s%s%s\n        %s", names, aliases ? aliases : "",
            o->names[0] && o->kind != KIND_BOOL && o->kind != KIND_ACTION ? " value" : "",
            usage ? usage : o->usage);
    if (o->defnote || o->defval)
        fprintf(f, " (default: \"%s\")", o->defnote ? o->defnote : o->defval);
    size_t shown = 0;
    for (size_t k = 0; envs && envs[k]; k++)
        fprintf(f, "%s$%s", shown++ ? ", " : " [", envs[k]);
    for (size_t k = 0; k < ELEMENTSOF(o->envs) && o->envs[k]; k++)
        fprintf(f, "%s$%s", shown++ ? ", " : " [", o->envs[k]);
    fprintf(f, "%s\n", shown ? "]" : "");
}

void config_print_help(FILE *f, const char *argv0)
{
        fprintf(f,
            "Usage: %s [flags] [list|labels|config] [args]\n\n"
            "Kubernetes device plugin for NVIDIA GPUs (drop-in for NVIDIA's "
            "k8s-device-plugin).\nPrecedence per setting: flag > environment > "
            "--config-file > default.\n\n"
            "Commands: (none) serve; list [--output table|json]: what this node advertises, "
            "with the config serve would use (per-node config: the node label read once); "
            "labels: its GPU node labels (gpu-feature-discovery's); config print.\n",
            argv0 ? argv0 : "gpu-device-plugin");
    for (size_t g = 0; config_option_groups[g]; g++) {
        fprintf(f, "\n%s:\n", config_option_groups[g]);
        for (int i = 0; i < _OPT_MAX; i++) {
            const struct config_option_def *o = &config_options[i];
            if (o->group == config_option_groups[g])
                print_option(f, o, NULL, NULL, NULL);
        }
    }
}

/* A program's own flags, as its --help shows them: the option, what that program calls
 * it besides (aliases), its usage there (NULL: the table's) and the variables it reads
 * ahead of the option's own. Its section is a heading, or NULL to stay in the last. */
struct help_row {
    const char *section;
    enum config_opt opt;
    const char *aliases;
    const char *usage;
    const char *envs[2];
};

static void print_rows(FILE *f, const struct help_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rows[i].section)
            fprintf(f, "\n%s:\n", rows[i].section);
        print_option(f, &config_options[rows[i].opt], rows[i].aliases, rows[i].usage,
                     rows[i].envs);
    }
}

/* The flags our programs other than the plugin read and act on, beside NVIDIA's of the
 * same program (reference §8.1, §9): the log settings and the roots a test or a host
 * without a container moves. */
#define EXTENSION_ROWS(first_section)                                                    \
    { first_section, OPT_LOG_VERBOSITY, NULL, NULL, { NULL } },                         \
    { NULL, OPT_LOG_FORMAT, NULL, NULL, { NULL } },                                      \
    { NULL, OPT_SYSFS_ROOT, NULL, NULL, { NULL } },                                      \
    { NULL, OPT_PROC_ROOT, NULL, NULL, { NULL } },                                       \
    { NULL, OPT_DEV_ROOT, NULL, NULL, { NULL } }

static const char EXT_SECTION[] = "gpu-device-plugin extensions (not in NVIDIA's program)";

void config_print_help_gfd(FILE *f, const char *argv0)
{
    static const struct help_row rows[] = {
        { NULL, OPT_MIG_STRATEGY, NULL, NULL, { "GFD_MIG_STRATEGY" } }, /* under --oneshot */
        { NULL, OPT_FAIL_ON_INIT_ERROR, NULL, NULL, { "GFD_FAIL_ON_INIT_ERROR" } },
        { NULL, OPT_GFD_NO_TIMESTAMP, NULL, NULL, { NULL } },
        { NULL, OPT_GFD_SLEEP_INTERVAL, NULL,
          "time to sleep between labelling (a Go duration, or infinite: label once and "
          "stay up)", { NULL } },
        { NULL, OPT_GFD_OUTPUT_FILE, ", --output, -o", NULL, { NULL } },
        { NULL, OPT_MACHINE_TYPE_FILE, NULL, NULL, { NULL } },
        { NULL, OPT_CONFIG_FILE, NULL, NULL, { "GFD_CONFIG_FILE" } },
        { NULL, OPT_USE_NODE_FEATURE_API, NULL, NULL, { NULL } },
        { NULL, OPT_DEVICE_DISCOVERY_STRATEGY, NULL, NULL, { NULL } },
        { NULL, OPT_DRIVER_ROOT_CTR_PATH, NULL, NULL, { NULL } },
        { NULL, OPT_NAMESPACE, NULL, NULL, { NULL } },
        { NULL, OPT_NODE_NAME, NULL, NULL, { NULL } },
        { NULL, OPT_POD_NAME, NULL, NULL, { NULL } },
        { NULL, OPT_KUBECONFIG, NULL, NULL, { NULL } },
        { NULL, OPT_KUBE_API_QPS, NULL, NULL, { NULL } },
        { NULL, OPT_KUBE_API_BURST, NULL, NULL, { NULL } },
        EXTENSION_ROWS(EXT_SECTION),
        { "Miscellaneous", OPT_HELP, NULL, NULL, { NULL } },
        { NULL, OPT_VERSION, NULL, NULL, { NULL } },
    };
    fprintf(f,
            "Usage: %s [flags]\n\n"
            "gpu-feature-discovery: label the node's GPUs (NVIDIA's gpu-feature-discovery, "
            "from gpu-device-plugin's binary; see docs/labels.md).\nPrecedence per "
            "setting: flag > environment > --config-file > default.\n\n"
            "Flags:\n"
            "  --oneshot\n        label once and exit (default: \"false\") [$GFD_ONESHOT]\n",
            argv0 ? argv0 : "gpu-feature-discovery");
    print_rows(f, rows, ELEMENTSOF(rows));
}

void config_print_help_mps(FILE *f, const char *argv0, const char *root)
{
    static const struct help_row rows[] = {
        { "Flags", OPT_CONFIG_FILE, NULL, NULL, { NULL } },
        { NULL, OPT_MIG_STRATEGY, NULL, NULL, { NULL } },
        EXTENSION_ROWS(EXT_SECTION),
        { "Miscellaneous", OPT_HELP, NULL, NULL, { NULL } },
        { NULL, OPT_VERSION, NULL, NULL, { NULL } },
    };
    fprintf(f,
            "Usage: %s [flags] [mount-shm]\n\n"
            "mps-control-daemon: start an MPS control daemon for each resource the config "
            "shares with MPS (NVIDIA's mps-control-daemon, from gpu-device-plugin's "
            "binary).\n\n"
            "Commands: (none) run the daemons; mount-shm: mount a tmpfs at %s/shm for MPS.\n",
            argv0 ? argv0 : "mps-control-daemon", root);
    print_rows(f, rows, ELEMENTSOF(rows));
}
