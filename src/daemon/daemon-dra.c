/* DRA in the daemon (daemon-dra.h): the glue between the served state and src/dra/. */
#include <time.h>

#include "core/log.h"
#include "daemon/daemon-dra.h"
#include "daemon/daemon-metrics.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claims.h"
#include "dra/dra-devices.h"
#include "dra/dra-publish.h"
#include "dra/dra-service.h"
#include "dra/dra-share-hook.h"
#include "dra/dra-sharing.h"
#include "dra/dra-slice.h"
#include "health/monitor.h"
#include "metrics/metrics.h"
#include "policy/health.h"

struct daemon_dra {
    struct loop *loop;
    char *node_name;
    const struct node_state *node;        /* the state served now */
    struct health_monitor *health;        /* the daemon's (DynamicMIG tells it its devices) */
    struct dra_device_set set;            /* of node */
    int64_t health_time;                  /* when health was last evaluated (Unix s) */
    struct dra_service *svc;
    struct dra_claims *claims;
    struct dra_sharing_ctx *sharing; /* TimeSlicing applied and reset (the claims' hooks) */
    struct dra_publish *pub;
    struct daemon_dra_metrics metrics;    /* all NULL: metrics off */
    void (*released)(void *userdata);     /* daemon_dra_on_released */
    void *released_userdata;
};

/* ---- the kubelet's calls: handed to the claim engine, answered when it is done ---- */

/* DynamicMIG: the health monitor watches the MIG devices prepared claims made (an Xid NVML
 * attributes to one taints exactly its placement), as they are after every call. */
static void sync_migs(struct daemon_dra *d)
{
    if (!d->health || !d->node)
        return;
    for (size_t g = 0; g < d->node->inv.n_gpus; g++) {
        const struct inv_gpu *gpu = &d->node->inv.gpus[g];
        if (!gpu->n_mig_profiles || !dra_mig_gpu_dynamic(gpu))
            continue;
        struct inv_mig migs[INV_MIG_PLACEMENTS_MAX * 4];
        size_t n = dra_claims_gpu_migs(d->claims, gpu->uuid, migs, ELEMENTSOF(migs));
        health_monitor_set_migs(d->health, (int)g, migs, n);
    }
}

static void on_claims_done(void *userdata, const struct dra_claim_result *r, size_t n)
{
    dra_call_done(userdata, r, n);
}

static void op_prepare(void *ud, struct dra_call *c, const struct dra_claim_ref *claims, size_t n)
{
    struct daemon_dra *d = ud;
    struct dra_claims_call *call = dra_claims_prepare(d->claims, claims, n, on_claims_done, c);
    /* The claims' GETs wait in the API client's rate limit until just before the kubelet's
     * deadline, not its own longer bound: a claim fails naming the wait, while the kubelet
     * still listens. */
    dra_claims_set_deadline(call, dra_call_deadline_ms(c));
    dra_call_set_context(c, call);
}

static void op_unprepare(void *ud, struct dra_call *c, const struct dra_claim_ref *claims,
                         size_t n)
{
    struct daemon_dra *d = ud;
    dra_call_set_context(c, dra_claims_unprepare(d->claims, claims, n, on_claims_done, c));
}

static void op_cancelled(void *ud, struct dra_call *c)
{
    dra_claims_cancel(dra_call_context(c));
}

/* On the Prepare path: adds on series made at start, no allocation (metrics.h). */
static void op_call_ended(void *ud, bool prepare, size_t n, size_t failed, uint64_t elapsed_us)
{
    const struct daemon_dra_metrics *m = &((struct daemon_dra *)ud)->metrics;
    sync_migs(ud);
    metrics_add(prepare ? m->prepare : m->unprepare, (double)n);
    metrics_add(prepare ? m->prepare_errors : m->unprepare_errors, (double)failed);
    metrics_observe(prepare ? m->prepare_seconds : m->unprepare_seconds,
                    (double)elapsed_us / 1e6);
}

/* ---- health: the monitor's view of each DRA device ---- */

/* The monitor's unit of dev: its GPU (-1), its MIG device, or for a DynamicMIG placement
 * the MIG device a claim made for it (none made: its GPU stands for it). */
static int health_unit(const struct daemon_dra *d, const struct dra_device *dev)
{
    if (dev->type == DRA_DEVICE_MIG)
        return (int)dev->mig;
    if (dev->type != DRA_DEVICE_MIG_PLACEMENT)
        return -1;
    const struct dra_ckpt_mig *m = dra_claims_placement_mig(d->claims, dev->name);
    return m ? health_monitor_mig_index(d->health, (int)dev->gpu, m->uuid) : -1;
}

static bool device_healthy(const struct daemon_dra *d, const struct dra_device *dev)
{
    if (!d->health)
        return true;
    int mig = health_unit(d, dev);
    /* a placement's MIG device lives on its GPU: a lost GPU takes it out too */
    return health_monitor_healthy(d->health, (int)dev->gpu, mig, NULL) &&
           (dev->type != DRA_DEVICE_MIG_PLACEMENT || mig < 0 ||
            health_monitor_healthy(d->health, (int)dev->gpu, -1, NULL));
}

/* The snapshot's strings are the device set's and the node name: borrowed, valid while
 * the service encodes it (at once). */
static size_t op_health(void *ud, struct dra_health_entry **out)
{
    struct daemon_dra *d = ud;
    struct dra_health_entry *h = xcalloc(d->set.n ? d->set.n : 1, sizeof(*h));
    for (size_t i = 0; i < d->set.n; i++)
        h[i] = (struct dra_health_entry){
            .pool = d->node_name,
            .device = d->set.devices[i].name,
            .health = device_healthy(d, &d->set.devices[i]) ? 1 : 2,
            .last_updated = d->health_time,
        };
    *out = h;
    return d->set.n;
}

static const struct dra_service_ops service_ops = {
    .prepare = op_prepare,
    .unprepare = op_unprepare,
    .call_cancelled = op_cancelled,
    .health = op_health,
    .call_ended = op_call_ended,
};

/* ---- the slices: every device, the unhealthy ones named with why ---- */

static void publish(struct daemon_dra *d)
{
    if (!d->pub || !d->node)
        return;
    json_t *devices = dra_slice_devices(&d->node->inv, &d->set);
    struct dra_unhealthy_device *bad = xcalloc(d->set.n ? d->set.n : 1, sizeof(*bad));
    size_t n_bad = 0;
    for (size_t i = 0; i < d->set.n; i++) {
        const struct dra_device *dev = &d->set.devices[i];
        if (device_healthy(d, dev))
            continue;
        int mig = health_unit(d, dev);
        if (mig >= 0 && dev->type == DRA_DEVICE_MIG_PLACEMENT &&
            !health_monitor_healthy(d->health, (int)dev->gpu, -1, NULL))
            mig = -1; /* its GPU's fault */
        uint64_t xid = health_monitor_last_xid(d->health, (int)dev->gpu, mig);
        /* An Xid of the "lost" class, a GPU gone from the bus or no Xid at all (an NVML
         * error while waiting for events) all mean the GPU cannot be trusted to be there. */
        bool lost = !xid || d->node->inv.gpus[dev->gpu].lost ||
                    health_classify(d->node->health_cfg, xid) == HEALTH_LOST;
        bad[n_bad++] = (struct dra_unhealthy_device){
            .device = dev->name, .lost = lost, .xid = lost ? 0 : (unsigned)xid };
    }
    json_t *counters = dra_slice_counter_sets(&d->node->inv, &d->set);
    dra_publish_set_pool(d->pub, devices, counters, bad, n_bad);
    json_decref(counters);
    json_decref(devices);
    free(bad);
}

/* The publisher let go of the devices after writing them and needs them again. */
static void publish_again(void *userdata)
{
    publish(userdata);
}

/* ---- the split: a GPU a claim holds stays with DRA ---- */

bool daemon_dra_holds(void *ud, const struct inv_gpu *gpu)
{
    const struct daemon_dra *d = ud;
    return dra_claims_holds_gpu(d->claims, gpu->minor);
}

static void on_released(void *ud)
{
    struct daemon_dra *d = ud;
    if (d->released)
        d->released(d->released_userdata);
}

void daemon_dra_on_released(struct daemon_dra *d, void (*fn)(void *userdata), void *userdata)
{
    d->released = fn;
    d->released_userdata = userdata;
}

/* ---- lifecycle ---- */

int daemon_dra_check(const struct config *cfg, struct error *err)
{
    const char *node = cfg->cluster.node_name;
    if (!node || !*node || !config_node_name_valid(node))
        return error_set(err, -EINVAL, "DRA (--dra, gpu-kubelet-plugin) needs this node's name "
                         "(--node-name, NODE_NAME from the downward API): it names the "
                         "ResourceSlice pool and the Node that owns it");
    return 0;
}

int daemon_dra_start(struct loop *l, const struct config *cfg, struct kube *k,
                     const struct daemon_dra_metrics *metrics, struct daemon_dra **out,
                     struct error *err)
{
    const char *node = cfg->cluster.node_name;
    int r = daemon_dra_check(cfg, err);
    if (r < 0)
        return r;
    if (!k)
        return error_set(err, -ENOTCONN, "DRA (--dra, gpu-kubelet-plugin) needs the Kubernetes "
                         "API (in-cluster credentials or --kubeconfig): the client could not "
                         "be made (see the error above)");
    struct daemon_dra *d = xcalloc(1, sizeof(*d));
    d->loop = l;
    if (metrics)
        d->metrics = *metrics;
    d->node_name = xstrdup(node);
    d->health_time = (int64_t)time(NULL);
    _cleanup_free_ char *plugin_dir = xasprintf("%s/%s", cfg->dra.plugins_dir, DRA_DRIVER_NAME);
    /* NVML's root as the daemon loaded it (a reload cannot change that either). */
    d->sharing = dra_sharing_new(&(struct dra_sharing_options){
        .loop = l, .driver_root = cfg->driver_root_ctr_path, .plugin_dir = plugin_dir });
    struct dra_claims_options co = {
        .node_name = node,
        .cdi_root = cfg->dra.cdi_root,
        .plugin_dir = plugin_dir,
        .cfg = cfg,
        .apply_config = dra_sharing_apply,
        .reset_config = dra_sharing_reset,
        .apply_cancel = dra_sharing_cancel,
        .apply_userdata = d->sharing,
        .released = on_released,
        .released_userdata = d,
    };
    r = dra_claims_new(l, k, &co, &d->claims, err);
    if (r < 0)
        goto fail;
    struct dra_service_options so = {
        .driver_name = DRA_DRIVER_NAME,
        .registrar_dir = cfg->dra.registrar_dir,
        .plugins_dir = cfg->dra.plugins_dir,
    };
    r = dra_service_start(l, &so, &service_ops, d, &d->svc, err);
    if (r < 0)
        goto fail;
    d->pub = dra_publish_new(l, k, node, DRA_DRIVER_NAME, err);
    if (!d->pub) {
        r = error_prefix(err, "DRA");
        goto fail;
    }
    dra_publish_set_source(d->pub, publish_again, d);
    if (cfg->dra.consumable) {
        /* the hook that puts a share's memory as a hard limit on its container's cgroup,
         * where the runtime can run it: without it shares have MPS's client limits only */
        struct error herr = { 0 };
        int h = dra_share_hook_install(cfg, &herr);
        if (h < 0)
            log_warning("DRA: GPU shares get no hard memory limit on their containers' cgroups: "
                        "%s", herr.msg);
    }
    log_info("DRA: serving driver %s on %s (registration %s), CDI specs in %s",
             DRA_DRIVER_NAME, dra_service_socket_path(d->svc),
             dra_service_registrar_path(d->svc), cfg->dra.cdi_root);
    /* The connection opened and the TLS hello sent now: the server's side of the
     * handshake runs while NVML loads and the devices are built (daemon_dra_update). */
    dra_publish_send_now(d->pub);
    *out = d;
    return 0;
fail:
    daemon_dra_free(d);
    return r;
}

void daemon_dra_update(struct daemon_dra *d, const struct node_state *s,
                       struct health_monitor *h)
{
    const struct inventory *inv = &s->inv;
    _cleanup_free_ bool *serve = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(bool));
    for (size_t g = 0; g < inv->n_gpus; g++)
        serve[g] = node_state_dra_serves(s, g);
    struct dra_device_set set = { 0 };
    struct error err = { 0 };
    dra_publish_send_now(d->pub); /* the handshake's next flight, or the first requests */
    if (dra_devices_build(inv, serve, &set, &err) < 0) {
        /* Naming collisions are the only failure; serve none rather than wrong ones. */
        log_error("DRA: %s; offering no devices until the next reload", err.msg);
        set = (struct dra_device_set){ 0 };
    }
    if (s->cfg->dra.consumable)
        dra_devices_offer_shares(&set, inv, &(struct dra_share_policy){
            .memory_step = s->cfg->dra.share_memory_step,
            .memory_default = s->cfg->dra.share_memory_default,
            .compute_default = s->cfg->dra.share_compute_default });
    dra_device_set_clear(&d->set);
    d->set = set;
    d->node = s;
    d->health = h;
    d->health_time = (int64_t)time(NULL);
    dra_claims_set_devices(d->claims, s->cfg, inv, &d->set);
    sync_migs(d);
    log_info("DRA: %zu device%s offered", d->set.n, d->set.n == 1 ? "" : "s");
    publish(d);
    dra_service_health_changed(d->svc);
}

void daemon_dra_health_changed(struct daemon_dra *d)
{
    d->health_time = (int64_t)time(NULL);
    publish(d);
    dra_service_health_changed(d->svc);
}

void daemon_dra_kubelet_restarted(struct daemon_dra *d)
{
    struct error err = { 0 };
    if (dra_service_kubelet_restarted(d->svc, &err) < 0)
        log_error("DRA: %s", err.msg);
}

void daemon_dra_status(const struct daemon_dra *d, struct daemon_dra_status *out)
{
    struct dra_publish_stats ps;
    dra_publish_get_stats(d->pub, &ps);
    *out = (struct daemon_dra_status){
        .driver = DRA_DRIVER_NAME,
        .registrar_path = dra_service_registrar_path(d->svc),
        .registered = dra_service_registered(d->svc),
        /* The round's end is not enough: a slice deleted since (the kubelet's wipe, a
         * peer) may wait seconds for its paced restore, and is not claimable meanwhile. */
        .slices_converged = dra_publish_converged(d->pub),
        .slices_restoring = ps.converged && !dra_publish_converged(d->pub),
        .slices_error = ps.error,
        .slice_writes = ps.creates + ps.updates + ps.deletes,
        .slice_write_failures = ps.write_failures,
        .claims_prepared = dra_claims_prepared_count(d->claims),
    };
}

void daemon_dra_free(struct daemon_dra *d)
{
    if (!d)
        return;
    dra_service_free(d->svc); /* cancels pending calls through the claim engine first */
    dra_claims_free(d->claims);
    dra_sharing_free(d->sharing);
    dra_publish_free(d->pub);
    dra_device_set_clear(&d->set);
    free(d->node_name);
    free(d);
}
