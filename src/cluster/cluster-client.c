/* The API client of the cluster features, made on first use (cluster_kube: the features
 * that need it call it; none running means no connection at all) and by the one function
 * serve and `list` share (cluster_kube_new). A leaf of the cluster module: label delivery,
 * Events and per-node configuration point down to it, it to none of them. */
#include "cluster/cluster-internal.h"
#include "core/log.h"
#include "kube/kube.h"

int cluster_kube_new(struct loop *l, const struct config_cluster *k, struct kube **out,
                     struct error *err)
{
    const struct kube_options o = {
        .kubeconfig = k->kubeconfig && *k->kubeconfig ? k->kubeconfig : NULL,
        .qps = k->kube_api_qps,
        .burst = k->kube_api_burst > 0 ? (uint32_t)k->kube_api_burst : 0,
    };
    return kube_new(l, &o, out, err);
}

struct kube *cluster_kube(struct cluster *c)
{
    if (c->kube)
        return c->kube;
    struct error err = { 0 };
    if (c->kube_failed)
        return NULL;
    if (cluster_kube_new(c->loop, &c->kube_cfg, &c->kube, &err) < 0) {
        /* One line for the process: every API feature is off from here on. */
        log_error("Kubernetes API client unavailable: %s; node labels via the API, per-node "
                  "configuration, Events and DRA are off",
                  err.msg);
        c->kube_failed = true;
        c->kube = NULL;
    }
    return c->kube;
}
