/* Teardown and name tables of struct config. Defaults are the option table's
 * (config-options.c); loading is config-load.c. */
#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/log.h"

static void patterns_free(struct config_pattern *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].pattern);
        free(p[i].name);
    }
    free(p);
}

static void sharing_free(struct config_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++) {
        struct config_replicated *r = &s->resources[i];
        free(r->name);
        free(r->rename);
        for (size_t j = 0; j < r->n_devices; j++)
            free(r->devices[j].ref);
        free(r->devices);
    }
    free(s->resources);
}

void config_free(struct config *c)
{
    if (!c)
        return;
    free(c->config_file);
    free(c->driver_root);
    free(c->dev_root);
    free(c->cdi_annotation_prefix);
    free(c->nvidia_cdi_hook_path);
    free(c->driver_root_ctr_path);
    free(c->mps_root);
    free(c->device_discovery_strategy);
    free(c->imex_channel_ids);
    free(c->kubelet_socket);
    config_strv_free(c->cdi_feature_flags);
    config_strv_free(c->cdi_disable_hooks);
    free(c->gfd_output_file);
    free(c->machine_type_file);
    free(c->sysfs_root);
    free(c->proc_root);
    free(c->cdi_spec_dir);
    free(c->metrics_address);
    patterns_free(c->gpu_patterns, c->n_gpu_patterns);
    patterns_free(c->mig_patterns, c->n_mig_patterns);
    sharing_free(&c->time_slicing);
    sharing_free(&c->mps);
    free(c->health.rules);
    free(c->cluster.kubeconfig);
    free(c->cluster.node_name);
    free(c->cluster.namespace);
    free(c->cluster.pod_name);
    free(c->cluster.config_dir);
    free(c->cluster.config_node_label);
    free(c->cluster.config_default);
    config_strv_free(c->cluster.config_fallback_strategies);
    config_dra_clear(&c->dra);
    /* leave a struct that is safe to free again */
    *c = (struct config){ 0 };
}

const char *config_mig_strategy_name(enum mig_strategy s)
{
    switch (s) {
    case MIG_STRATEGY_NONE: return "none";
    case MIG_STRATEGY_SINGLE: return "single";
    case MIG_STRATEGY_MIXED: return "mixed";
    }
    return "?";
}

const char *config_device_id_strategy_name(enum device_id_strategy s)
{
    return s == DEVICE_ID_INDEX ? "index" : "uuid";
}

const char *config_shared_alloc_policy_name(enum shared_alloc_policy p)
{
    return p == SHARED_ALLOC_PACKED ? "packed" : "distributed";
}

const char *config_device_list_strategy_name(unsigned bit)
{
    switch (bit) {
    case DEVICE_LIST_ENVVAR: return "envvar";
    case DEVICE_LIST_VOLUME_MOUNTS: return "volume-mounts";
    case DEVICE_LIST_CDI_ANNOTATIONS: return "cdi-annotations";
    case DEVICE_LIST_CDI_CRI: return "cdi-cri";
    }
    return NULL;
}

static bool any_replicated(const struct config_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++)
        if (s->resources[i].replicas > 1)
            return true;
    return false;
}

enum sharing_strategy config_sharing_strategy(const struct config *c)
{
    if (c->mps.present && any_replicated(&c->mps))
        return SHARING_MPS;
    return any_replicated(&c->time_slicing) ? SHARING_TIME_SLICING : SHARING_NONE;
}

const struct config_sharing *config_sharing_section(const struct config *c)
{
    return c->mps.present ? &c->mps : &c->time_slicing;
}

int config_log_level(const struct config *c)
{
    return c->log_verbosity >= 1 ? LOG_DEBUG : LOG_INFO;
}

void config_dra_clear(struct config_dra *d)
{
    free(d->registrar_dir);
    free(d->plugins_dir);
    free(d->cdi_root);
    config_strv_free(d->device_plugin_gpus);
    config_strv_free(d->feature_gates);
    *d = (struct config_dra){ 0 };
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

/* A copy of a NULL-terminated list; NULL gives an empty one. */
static char **strv_dup(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    char **copy = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        copy[i] = xstrdup(v[i]);
    return copy;
}

void config_dra_assign(struct config_dra *dst, const struct config_dra *src)
{
    struct config_dra copy = {
        .enabled = src->enabled,
        .only = src->only,
        .registrar_dir = dup_or_null(src->registrar_dir),
        .plugins_dir = dup_or_null(src->plugins_dir),
        .cdi_root = dup_or_null(src->cdi_root),
        .dynamic_mig = src->dynamic_mig,
        .device_plugin_gpus = strv_dup(src->device_plugin_gpus),
        .feature_gates = strv_dup(src->feature_gates),
        .consumable = src->consumable,
        .share_memory_step = src->share_memory_step,
        .share_memory_default = src->share_memory_default,
        .share_compute_default = src->share_compute_default,
    };
    config_dra_clear(dst);
    *dst = copy;
}
