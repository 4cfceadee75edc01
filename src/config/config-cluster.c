/* The Kubernetes API and per-node configuration options (struct config_cluster): their
 * setters, called by config-options.c for every source (flags, environment, defaults). */
#include <stdio.h>
#include <stdlib.h>

#include "config/config-internal.h"
#include "core/dns-name.h"

static void set_str(char **field, const char *value)
{
    free(*field);
    *field = xstrdup(value);
}

static int set_qps(struct config *c, const char *value, struct error *err)
{
    char *end;
    errno = 0;
    double x = strtod(value, &end);
    if (errno || *end || end == value || !(x > 0 && x <= 1e6))
        return error_set(err, -EINVAL,
                         "invalid --kube-api-qps value \"%s\": must be a number > 0", value);
    c->cluster.kube_api_qps = x;
    return 0;
}

static int set_burst(struct config *c, const char *value, struct error *err)
{
    char *end;
    errno = 0;
    long x = strtol(value, &end, 10);
    if (errno || *end || end == value || x < 1 || x > 100000)
        return error_set(err, -EINVAL,
                         "invalid --kube-api-burst value \"%s\": must be an integer >= 1",
                         value);
    c->cluster.kube_api_burst = (int)x;
    return 0;
}

/* NVIDIA's config-manager knows the same three; it fails on an unknown one only when it
 * reaches it, we fail at load so a typo never waits for a missing label. */
static int set_fallback_strategies(struct config *c, const char *value, struct error *err)
{
    char **v = config_split_list(value, NULL);
    for (char **p = v; *p; p++)
        if (!streq(*p, "named") && !streq(*p, "single") && !streq(*p, "empty")) {
            int r = error_set(err, -EINVAL,
                              "unknown fallback strategy: %s (allowed: named, single, empty)",
                              *p);
            config_strv_free(v);
            return r;
        }
    config_strv_free(c->cluster.config_fallback_strategies);
    c->cluster.config_fallback_strategies = v;
    return 0;
}

bool config_node_name_valid(const char *name)
{
    return dns_subdomain_valid(name);
}

int config_cluster_option_set(struct config *c, enum config_opt opt, const char *value,
                              struct error *err)
{
    struct config_cluster *k = &c->cluster;
    switch (opt) {
    case OPT_KUBECONFIG: set_str(&k->kubeconfig, value); return 0;
    case OPT_NODE_NAME: set_str(&k->node_name, value); return 0;
    case OPT_NAMESPACE: set_str(&k->namespace, value); return 0;
    case OPT_POD_NAME: set_str(&k->pod_name, value); return 0;
    case OPT_KUBE_API_QPS: return set_qps(c, value, err);
    case OPT_KUBE_API_BURST: return set_burst(c, value, err);
    case OPT_CONFIG_DIR: set_str(&k->config_dir, value); return 0;
    case OPT_CONFIG_NODE_LABEL: set_str(&k->config_node_label, value); return 0;
    case OPT_CONFIG_DEFAULT: set_str(&k->config_default, value); return 0;
    case OPT_CONFIG_FALLBACK_STRATEGIES: return set_fallback_strategies(c, value, err);
    case OPT_EVENTS: {
        int b = config_parse_bool(value);
        if (b < 0)
            return error_set(err, -EINVAL,
                             "invalid boolean value \"%s\" (allowed: true, false, 1, 0, t, f)",
                             value);
        k->events = b;
        return 0;
    }
    default:
        return error_set(err, -EINVAL, "option cannot be set");
    }
}
