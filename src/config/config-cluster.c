/* The Kubernetes API and per-node configuration options (struct config_cluster): the
 * fallback strategies' setter (the table's other cluster rows are plain strings, numbers
 * and booleans, set by their kind) and the node name's rule. */
#include <stdio.h>
#include <stdlib.h>

#include "config/config-internal.h"
#include "core/dns-name.h"

/* NVIDIA's config-manager knows the same three; it fails on an unknown one only when it
 * reaches it, we fail at load so a typo never waits for a missing label. */
int config_cluster_fallback_set(struct config *c, enum config_opt opt, const char *value,
                                struct error *err)
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
