/* The settings serve reads once, when it starts, and which a reload therefore cannot
 * change: the log format (main), the metrics listener (daemon_start), and everything the
 * cluster features read in cluster_new (how labels are published and where, the API
 * client, per-node configuration, Events). A reload that sets one differently keeps the
 * running value; serve names each such setting in a warning (cmd_serve.c). Applying them
 * would mean restarting those parts, which the restart the warning asks for does better.
 * The NVML library's location (--driver-root-ctr-path) is the daemon's: it knows whether
 * NVML is loaded (daemon.c). */
#include <stdio.h>

#include "config/config-internal.h"
#include "config/config-load.h"

static const enum config_opt start_only[] = {
    OPT_LOG_FORMAT,
    OPT_METRICS_ADDRESS,
    OPT_GFD,
    OPT_USE_NODE_FEATURE_API,
    OPT_GFD_OUTPUT_FILE,
    OPT_NODE_LABELS_PATCH,
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
};

struct config_start_values {
    char *value[ELEMENTSOF(start_only)];
};

static char *strv_join(char *const *v)
{
    char *s = xstrdup("");
    for (size_t i = 0; v && v[i]; i++) {
        char *n = xasprintf("%s%s%s", s, i ? "," : "", v[i]);
        free(s);
        s = n;
    }
    return s;
}

static char *str_or_empty(const char *s) { return xstrdup(s ? s : ""); }
static char *bool_str(bool b) { return xstrdup(b ? "true" : "false"); }

/* The value of a start-only option as --help and a flag would spell it. */
static char *value_of(const struct config *c, enum config_opt opt)
{
    const struct config_cluster *k = &c->cluster;
    switch (opt) {
    case OPT_LOG_FORMAT: return xstrdup(c->log_json ? "json" : "text");
    case OPT_METRICS_ADDRESS: return str_or_empty(c->metrics_address);
    case OPT_GFD: return bool_str(c->gfd);
    case OPT_USE_NODE_FEATURE_API: return bool_str(c->use_node_feature_api);
    case OPT_GFD_OUTPUT_FILE: return str_or_empty(c->gfd_output_file);
    case OPT_NODE_LABELS_PATCH: return bool_str(c->node_labels_patch);
    case OPT_KUBECONFIG: return str_or_empty(k->kubeconfig);
    case OPT_NODE_NAME: return str_or_empty(k->node_name);
    case OPT_NAMESPACE: return str_or_empty(k->namespace);
    case OPT_POD_NAME: return str_or_empty(k->pod_name);
    case OPT_KUBE_API_QPS: return xasprintf("%g", k->kube_api_qps);
    case OPT_KUBE_API_BURST: return xasprintf("%d", k->kube_api_burst);
    case OPT_CONFIG_DIR: return str_or_empty(k->config_dir);
    case OPT_CONFIG_NODE_LABEL: return str_or_empty(k->config_node_label);
    case OPT_CONFIG_DEFAULT: return str_or_empty(k->config_default);
    case OPT_CONFIG_FALLBACK_STRATEGIES: return strv_join(k->config_fallback_strategies);
    case OPT_EVENTS: return bool_str(k->events);
    case OPT_DRA: return bool_str(c->dra.enabled);
    case OPT_KUBELET_REGISTRAR_DIR: return str_or_empty(c->dra.registrar_dir);
    case OPT_KUBELET_PLUGINS_DIR: return str_or_empty(c->dra.plugins_dir);
    case OPT_CDI_ROOT: return str_or_empty(c->dra.cdi_root);
    case OPT_DRA_DEVICE_PLUGIN_GPUS: return strv_join(c->dra.device_plugin_gpus);
    default: abort(); /* not in start_only[] */
    }
}

struct config_start_values *config_start_values_new(const struct config *c)
{
    struct config_start_values *s = xcalloc(1, sizeof(*s));
    for (size_t i = 0; i < ELEMENTSOF(start_only); i++)
        s->value[i] = value_of(c, start_only[i]);
    return s;
}

void config_start_values_free(struct config_start_values *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < ELEMENTSOF(start_only); i++)
        free(s->value[i]);
    free(s);
}

size_t config_start_values_diff(const struct config_start_values *s, const struct config *c,
                                config_change_fn fn, void *userdata)
{
    size_t n = 0;
    for (size_t i = 0; i < ELEMENTSOF(start_only); i++) {
        _cleanup_free_ char *now = value_of(c, start_only[i]);
        if (streq(now, s->value[i]))
            continue;
        _cleanup_free_ char *flag = xasprintf("--%s", config_options[start_only[i]].names[0]);
        fn(userdata, flag, s->value[i], now);
        n++;
    }
    return n;
}
