/* The daemon's hooks into the cluster features (see daemon-cluster.h). */
#include <stdio.h>

#include "cluster/cluster.h"
#include "core/log.h"
#include "daemon/daemon-cluster.h"
#include "health/monitor.h"
#include "labels/labels.h"

void daemon_cluster_publish_labels(struct cluster *c, const struct node_state *s,
                                   uint64_t timestamp)
{
    if (!cluster_labels_enabled(c))
        return;
    struct labels_input in = {
        .cfg = s->cfg,
        .inv = &s->inv,
        .nvml_missing = !s->nvml_open,
        .timestamp = timestamp,
    };
    _cleanup_labels_ struct labels *l = NULL;
    struct error err = { 0 };
    if (labels_derive(&in, &l, &err) < 0) {
        log_error("Deriving node labels failed: %s; node labels not updated", err.msg);
        return;
    }
    cluster_labels_publish(c, l);
}

/* The first resource advertising the device (a shared GPU's replicas all name the
 * same one). */
static const char *resource_of(const struct node_state *s, size_t g, int mig)
{
    for (size_t r = 0; r < s->rs.n_resources; r++)
        for (size_t i = 0; i < s->rs.resources[r].n_devices; i++) {
            const struct rs_device *d = &s->rs.resources[r].devices[i];
            if (d->gpu == (int)g && d->mig == mig)
                return s->rs.resources[r].name;
        }
    return NULL;
}

static void add_unit(struct daemon_health_view *v, const struct node_state *s,
                     const struct health_monitor *h, size_t g, int mig)
{
    const struct inv_gpu *gpu = &s->inv.gpus[g];
    struct daemon_health_unit *u = &v->units[v->n++];
    snprintf(u->uuid, sizeof(u->uuid), "%s", mig < 0 ? gpu->uuid : gpu->migs[mig].uuid);
    u->gpu_index = gpu->index;
    u->mig = mig;
    u->resource = resource_of(s, g, mig);
    u->healthy = !h || health_monitor_healthy(h, (int)g, mig, NULL);
}

void daemon_health_view_reset(struct daemon_health_view *v, const struct node_state *s,
                              const struct health_monitor *h)
{
    daemon_health_view_clear(v);
    size_t n = 0;
    for (size_t g = 0; g < s->inv.n_gpus; g++)
        n += 1 + s->inv.gpus[g].n_migs;
    v->units = xcalloc(n ? n : 1, sizeof(*v->units));
    for (size_t g = 0; g < s->inv.n_gpus; g++) {
        add_unit(v, s, h, g, -1);
        for (size_t m = 0; m < s->inv.gpus[g].n_migs; m++)
            add_unit(v, s, h, g, (int)m);
    }
}

void daemon_health_view_update(struct daemon_health_view *v, struct cluster *c,
                               const struct health_monitor *h, const struct node_state *s)
{
    size_t k = 0;
    for (size_t g = 0; g < s->inv.n_gpus; g++) {
        for (int m = -1; m < (int)s->inv.gpus[g].n_migs; m++, k++) {
            if (k >= v->n)
                return; /* the view is rebuilt at every swap: cannot happen */
            struct daemon_health_unit *u = &v->units[k];
            const char *reason = NULL;
            bool healthy = health_monitor_healthy(h, (int)g, m, &reason);
            if (healthy == u->healthy)
                continue;
            u->healthy = healthy;
            char where[96];
            if (m < 0)
                snprintf(where, sizeof(where), "GPU %u", u->gpu_index);
            else
                snprintf(where, sizeof(where), "GPU %u MIG device %d", u->gpu_index, m);
            if (healthy)
                cluster_event(c, "Normal", "GPUHealthy", "%s (%s, resource %s) is Healthy again",
                              u->uuid, where, u->resource ? u->resource : "none");
            else
                cluster_event(c, "Warning", "GPUUnhealthy", "%s (%s, resource %s) is Unhealthy: %s",
                              u->uuid, where, u->resource ? u->resource : "none",
                              reason && *reason ? reason : "unknown reason");
        }
    }
}

void daemon_health_view_clear(struct daemon_health_view *v)
{
    free(v->units);
    *v = (struct daemon_health_view){ 0 };
}
