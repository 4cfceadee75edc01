/* The daemon behind `serve`: the process's health monitor and the served state (a node
 * state from node-state.c and one plugin per resource), swapped whole on reload with every
 * resource that comes out the same handed over (hitless), and the per-resource plugin
 * lifecycle: serve, register, retry, rebind after a kubelet restart. Loop-thread only. */
#include <stdio.h>
#include <time.h>

#include "cluster/cluster.h"
#include "core/backoff.h"
#include "core/log.h"
#include "config/config-load.h"
#include "core/loop.h"
#include "daemon/daemon-cluster.h"
#include "daemon/daemon-dra.h"
#include "daemon/daemon.h"
#include "daemon/daemon-metrics.h"
#include "state/node-state.h"
#include "kubelet/dp_service.h"
#include "core/sockwatch.h"
#include "kubelet/registration.h"
#include "health/monitor.h"
#include "grpc/grpc.h"
#include "nvml/nvml.h"

struct daemon;
struct serving;

struct plugin {
    const struct rs_resource *res;
    struct dp_plugin *dp;        /* NULL until it serves (MPS daemon, bind failure) */
    struct reg *reg;
    struct daemon *daemon;
    struct serving *state;
    struct loop_timer *start_retry;
    struct backoff start_backoff;
    struct log_repeat start_log; /* a bind failure that stays the same is said once */
    bool kept;                   /* handed over by a reload: already serving */
};

#define START_BACKOFF_MIN_MS 100u
#define START_BACKOFF_MAX_MS 10000u

/* A node state being served: built whole, swapped whole. */
struct serving {
    struct node_state node;
    struct plugin *plugins;   /* one per resource with devices */
    size_t n_plugins;
    char *socket_dir;
};

struct daemon {
    struct loop *loop;
    struct serving *state;
    struct health_monitor *health;   /* one per process, retargeted by every state */
    struct sockwatch *watch;
    char *watched_socket;
    struct daemon_metrics *metrics;  /* NULL: --metrics-address off or failed */
    struct cluster *cluster;         /* not owned; NULL: no cluster features */
    struct daemon_health_view hview; /* for Events on health transitions */
    char *nvml_root;                 /* --driver-root-ctr-path NVML was loaded from */
    /* DRA, from the start config (start-only: every later state keeps these settings, so a
     * reload can never hand a DRA GPU to the device plugin too); NULL with DRA off. */
    struct daemon_dra *dra;
    struct config_dra dra_cfg;
};

static void state_free(struct serving *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_plugins; i++) {
        struct plugin *p = &s->plugins[i];
        if (p->start_retry)
            loop_timer_cancel(p->daemon->loop, p->start_retry);
        reg_free(p->reg);
        dp_plugin_stop(p->dp);
    }
    free(s->plugins);
    free(s->socket_dir);
    node_state_clear(&s->node);
    free(s);
}

static bool device_healthy(void *userdata, const struct rs_device *d, const char **reason)
{
    struct daemon *m = userdata;
    if (!m->health)
        return true;
    return health_monitor_healthy(m->health, d->gpu, d->mig, reason);
}

/* userdata is the daemon: the monitor outlives every served state. */
static void on_health_changed(void *userdata)
{
    struct serving *s = ((struct daemon *)userdata)->state;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_plugins; i++)
        if (s->plugins[i].dp)
            dp_plugin_devices_changed(s->plugins[i].dp);
    struct daemon *m = userdata;
    if (m->cluster && m->health)
        daemon_health_view_update(&m->hview, m->cluster, m->health, &s->node);
    if (m->dra)
        daemon_dra_health_changed(m->dra);
}

/* The MPS control daemon (NVIDIA's mps-control-daemon) writes <root>/<resource>/.started
 * once it serves; the plugin's container sees the MPS root at /mps (Helm) or, outside a
 * container, at --mps-root itself. */
static bool mps_daemon_ready(const struct config *cfg, const struct rs_resource *res,
                             char *missing, size_t len)
{
    _cleanup_free_ char *in_container = xasprintf("/mps/%s/.started", res->name);
    _cleanup_free_ char *on_host = xasprintf("%s/%s/.started", cfg->mps_root ? cfg->mps_root : "",
                                             res->name);
    if (access(in_container, F_OK) == 0 || access(on_host, F_OK) == 0)
        return true;
    snprintf(missing, len, "%s", on_host);
    return false;
}

static struct dp_context plugin_context(const struct plugin *p)
{
    const struct serving *s = p->state;
    return (struct dp_context){
        .resource = p->res,
        .config = s->node.cfg,
        .inventory = &s->node.inv,
        .topo = &s->node.topo,
        .callbacks = { .device_healthy = device_healthy },
        .userdata = p->daemon,
        .metrics = daemon_metrics_resource(p->daemon->metrics, p->res->name),
    };
}

static int plugin_serve(struct plugin *p, struct error *err)
{
    struct dp_context ctx = plugin_context(p);
    log_full(p->start_backoff.failures ? LOG_DEBUG : LOG_INFO, "Starting GRPC server for '%s'",
             p->res->name);
    int r = dp_plugin_start(p->daemon->loop, p->state->socket_dir, &ctx, &p->dp, err);
    if (r < 0)
        return r;
    log_info("Starting to serve '%s' on %s", p->res->name, dp_plugin_socket_path(p->dp));
    return 0;
}

static void plugin_register(struct plugin *p)
{
    const struct config *cfg = p->state->node.cfg;
    if (!cfg->kubelet_socket || !*cfg->kubelet_socket) {
        log_info("No kubelet socket configured, not registering '%s'", p->res->name);
        return;
    }
    p->reg = reg_new(p->daemon->loop, cfg->kubelet_socket, p->res->socket_name, p->res->name);
    daemon_metrics_registration(p->daemon->metrics, p->res->name, p->reg);
    reg_restart(p->reg);
}

static void on_start_retry(struct loop *l, struct loop_timer *t, void *userdata);

/* Serve (and then register) one resource, or arm a retry with capped backoff: while its
 * MPS daemon has not started (like the reference, which retries everything every 30 s),
 * or when its socket cannot be bound. Other resources are not held back. */
static void plugin_try_start(struct plugin *p)
{
    char missing[4096];
    struct error err = { 0 };
    bool first = p->start_backoff.failures == 0;

    if (p->res->sharing == SHARING_MPS &&
        !mps_daemon_ready(p->state->node.cfg, p->res, missing, sizeof(missing))) {
        if (first)
            log_warning("error waiting for MPS daemon for '%s': %s does not exist; retrying",
                        p->res->name, missing);
        else
            log_debug("MPS daemon for '%s' still not ready (%s missing)", p->res->name, missing);
    } else if (plugin_serve(p, &err) < 0) {
        /* Once, with what to check, and again only when the failure changes: a socket
         * directory that is not there is watched (sockwatch.c), so the retries need
         * not be said every 10 s. */
        int level = log_repeat_level(&p->start_log, LOG_ERROR, err.msg);
        log_full(level, "%s; retrying%s", err.msg,
                 p->start_log.repeats ? " (the same failure again)" : "");
        if (level == LOG_ERROR && (err.code == -ENOENT || err.code == -ENOTDIR ||
                                   err.code == -EACCES || err.code == -EROFS))
            log_hints(reg_kubelet_path_hints);
    } else {
        if (!first) /* at start, registration waits until every socket serves */
            plugin_register(p);
        backoff_reset(&p->start_backoff);
        log_repeat_reset(&p->start_log);
        return;
    }
    p->start_retry = loop_timer_add(p->daemon->loop, backoff_next(&p->start_backoff),
                                    on_start_retry, p);
}

static void on_start_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct plugin *p = userdata;
    p->start_retry = NULL;
    plugin_try_start(p);
}

static bool same_ids(const struct rs_resource *a, const struct rs_resource *b)
{
    if (a->n_devices != b->n_devices)
        return false;
    for (size_t i = 0; i < a->n_devices; i++)
        if (!streq(a->devices[i].id, b->devices[i].id))
            return false;
    return true;
}

/* The running plugin a reload can keep for `res`: it serves the same resource on the
 * same socket and registered with the same kubelet. Keeping it keeps its connections,
 * ListAndWatch streams and registration: the kubelet sees nothing but a new list. */
static struct plugin *keepable_plugin(struct serving *old, const struct serving *s,
                                      const struct rs_resource *res)
{
    if (!old || !streq(old->socket_dir, s->socket_dir) ||
        !streq_ptr(old->node.cfg->kubelet_socket, s->node.cfg->kubelet_socket))
        return NULL;
    for (size_t i = 0; i < old->n_plugins; i++) {
        struct plugin *o = &old->plugins[i];
        if (o->dp && streq(o->res->name, res->name) && streq(o->res->socket_name, res->socket_name))
            return o;
    }
    return NULL;
}

/* Set up the plugins of s: a resource the old state already serves the same way is
 * handed over (re-registered only if its device IDs changed); any other starts. The
 * old state must be freed (releasing the sockets it does not hand over) before
 * state_start_plugins binds the new ones. Returns whether every plugin was handed over
 * with the same device IDs and none was dropped (a reload that changed nothing). */
static bool state_adopt_plugins(struct daemon *m, struct serving *s, struct serving *old)
{
    size_t same = 0;
    s->socket_dir = node_state_socket_dir(s->node.cfg);
    s->plugins = xcalloc(s->node.rs.n_resources ? s->node.rs.n_resources : 1, sizeof(*s->plugins));
    for (size_t i = 0; i < s->node.rs.n_resources; i++) {
        const struct rs_resource *res = &s->node.rs.resources[i];
        if (res->n_devices == 0)
            continue;
        struct plugin *p = &s->plugins[s->n_plugins++];
        p->res = res;
        p->daemon = m;
        p->state = s;
        p->start_backoff = BACKOFF_INIT(START_BACKOFF_MIN_MS, START_BACKOFF_MAX_MS, 0, false);
        struct plugin *o = keepable_plugin(old, s, res);
        if (!o)
            continue;
        bool ids_changed = !same_ids(o->res, res);
        same += !ids_changed;
        p->dp = TAKE_PTR(o->dp);
        p->reg = TAKE_PTR(o->reg);
        p->kept = true;
        struct dp_context ctx = plugin_context(p);
        /* IDs changed: the list goes to the stream the new registration opens, so the
         * kubelet never sees the new IDs on a stream it is about to drop. */
        dp_plugin_retarget(p->dp, &ctx, !(ids_changed && p->reg));
        if (ids_changed && p->reg) {
            log_info("Devices of '%s' changed, registering it again", res->name);
            reg_restart(p->reg);
        } else {
            log_info("Keeping '%s' serving unchanged on %s", res->name,
                     dp_plugin_socket_path(p->dp));
        }
    }
    return old && same == s->n_plugins && same == old->n_plugins;
}

static void state_start_plugins(struct daemon *m, struct serving *s)
{
    for (size_t i = 0; i < s->n_plugins; i++)
        if (!s->plugins[i].kept)
            plugin_try_start(&s->plugins[i]);
    if (s->n_plugins == 0) {
        if (s->node.cfg->dra.enabled && s->node.inv.n_gpus > 0)
            log_info("Every GPU is served through DRA; no device-plugin resource to register");
        else
            log_info("No devices found. Waiting indefinitely.");
        return;
    }
    /* Register only once every socket serves: the kubelet dials back at once. */
    for (size_t i = 0; i < s->n_plugins; i++)
        if (!s->plugins[i].kept && s->plugins[i].dp)
            plugin_register(&s->plugins[i]);
}

/* One monitor for the process (its thread and fds live until exit): started with the
 * first state that has GPUs, retargeted by every later one, so device health survives
 * reloads. */
static void state_start_health(struct daemon *m, struct serving *s)
{
    struct error err = { 0 };
    int r = 0;
    if (m->health)
        r = health_monitor_retarget(m->health, &s->node.inv, s->node.health_cfg, &err);
    else if (s->node.nvml_open && s->node.inv.n_gpus > 0)
        r = health_monitor_start(m->loop, &s->node.inv, s->node.health_cfg, on_health_changed, m,
                                 &m->health, &err);
    if (m->health)
        health_monitor_count_xids(m->health, daemon_metrics_xids(m->metrics));
    if (r < 0)
        log_warning("Health checks unavailable: %s; continuing with health checks disabled",
                    err.msg);
}

/* The same configuration: the same effective settings, whatever their source. */
static bool config_same(const struct config *a, const struct config *b)
{
    _cleanup_free_ char *ja = config_to_json_string(a, false);
    _cleanup_free_ char *jb = config_to_json_string(b, false);
    return streq(ja, jb);
}

static void on_kubelet_restart(void *userdata) { daemon_kubelet_restarted(userdata); }

static void visit(const void *m, const struct daemon_visitor *v, void *userdata)
{
    daemon_visit(m, v, userdata);
}

static int ensure_watch(struct daemon *m, const struct config *cfg, struct error *err)
{
    if (!cfg->kubelet_socket || !*cfg->kubelet_socket)
        return 0;
    if (m->watch && m->watched_socket && streq(m->watched_socket, cfg->kubelet_socket))
        return 0;
    struct sockwatch *w = NULL;
    int r = sockwatch_new(m->loop, cfg->kubelet_socket, on_kubelet_restart, m, &w, err);
    if (r < 0)
        return r;
    sockwatch_free(m->watch);
    free(m->watched_socket);
    m->watch = w;
    m->watched_socket = xstrdup(cfg->kubelet_socket);
    return 0;
}

struct daemon *daemon_new(struct loop *l)
{
    struct daemon *m = xcalloc(1, sizeof(*m));
    m->loop = l;
    return m;
}

/* Build a complete new state from cfg and swap it in. On failure nothing changes and
 * cfg is still the caller's. Returns 1 when the new state is the old one again: same
 * config, every resource kept with the same device IDs. */
static int swap_state(struct daemon *m, struct config *cfg, struct error *err)
{
    int r = ensure_watch(m, cfg, err);
    if (r < 0)
        return r;
    config_dra_assign(&cfg->dra, &m->dra_cfg);
    struct serving *s = xcalloc(1, sizeof(*s));
    s->node.cfg = cfg;
    struct node_state_options opt = {
        .previous = m->state ? &m->state->node.inv : NULL,
        .tolerate_nvml_failure = !cfg->fail_on_init_error,
        .serve = true,
        /* The machine type, PCI class and vGPU facts only the labels read. */
        .host_facts = cfg->gfd || cfg->node_labels_patch,
        /* A GPU a prepared claim holds is never also the device plugin's. */
        .dra_holds = m->dra ? daemon_dra_holds : NULL,
        .dra_holds_userdata = m->dra,
    };
    r = node_state_build(&s->node, &opt, err);
    if (r < 0) {
        s->node.cfg = NULL;
        state_free(s);
        return r;
    }
    const char *ctr_root = cfg->driver_root_ctr_path ? cfg->driver_root_ctr_path : "";
    if (s->node.nvml_open)
        log_info("Loaded NVML from %s", nvml_library_path());
    if (s->node.nvml_open && !m->nvml_root) {
        m->nvml_root = xstrdup(ctr_root);
    } else if (s->node.nvml_open && !streq(m->nvml_root, ctr_root)) {
        /* NVML stays loaded across reloads (the running state and the health monitor hold
         * it), so the library it came from cannot change until the process restarts. */
        log_warning("Reload: --driver-root-ctr-path changed from \"%s\" to \"%s\"; it takes "
                    "effect at restart (NVML stays loaded from %s until then)", m->nvml_root,
                    ctr_root, nvml_library_path());
    }
    struct serving *old = TAKE_PTR(m->state);
    bool same = old && config_same(old->node.cfg, cfg);
    /* Health first: the plugins handed over stream their lists from it at once. */
    state_start_health(m, s);
    same &= state_adopt_plugins(m, s, old);
    /* Before the old state goes: DRA borrows the served inventory. */
    if (m->dra)
        daemon_dra_update(m->dra, &s->node, m->health);
    /* The old plugins that were not handed over must let go of their socket paths
     * before the new ones bind. A resource whose socket cannot be bound retries on its
     * own (plugin_try_start). A rebuild from the running config (on_dra_released) hands
     * that config over. */
    if (old && old->node.cfg == cfg)
        old->node.cfg = NULL;
    state_free(old);
    m->state = s;
    state_start_plugins(m, s);
    if (m->cluster) {
        /* GFD computes its timestamp once per (re)start: here, once per state. */
        daemon_health_view_reset(&m->hview, &s->node, m->health);
        daemon_cluster_publish_labels(m->cluster, &s->node,
                                      cfg->gfd_no_timestamp ? 0 : (uint64_t)time(NULL));
    }
    return same ? 1 : 0;
}

/* Claims were unprepared: a GPU the running state kept with DRA for them (the split gives
 * it to the device plugin) moves once none holds it, through the state rebuilt from the
 * running config as a reload would (the device plugin's resources and registration, the
 * slices, the health monitor's targets). */
static void on_dra_released(void *userdata)
{
    struct daemon *m = userdata;
    struct serving *s = m->state;
    bool moves = false;
    for (size_t g = 0; s && s->node.dra_kept && g < s->node.inv.n_gpus; g++) {
        const struct inv_gpu *gpu = &s->node.inv.gpus[g];
        if (!s->node.dra_kept[g] || daemon_dra_holds(m->dra, gpu))
            continue;
        log_info("GPU %u (%s) moves to the device plugin: its last DRA claim is unprepared "
                 "(--dra-device-plugin-gpus names it)", gpu->index, gpu->uuid);
        moves = true;
    }
    if (!moves)
        return;
    struct error err = { 0 };
    if (swap_state(m, s->node.cfg, &err) < 0)
        log_error("Moving GPUs to the device plugin failed, they stay with DRA until the "
                  "next reload: %s", err.msg);
}

int daemon_start(struct daemon *m, struct config *cfg, struct error *err)
{
    /* Metrics are for watching the plugin, not part of serving: a bad address or a port
     * in use is one error line and the plugin serves the kubelet without them (failing
     * here would crash-loop every pod of the DaemonSet over a monitoring setting). The
     * address comes from a flag or the environment only, so no reload can change it. */
    if (cfg->metrics_address && *cfg->metrics_address) {
        struct error merr = { 0 };
        if (daemon_metrics_new(m->loop, visit, m, cfg->metrics_address, &m->metrics, &merr) < 0)
            log_error("%s; serving without metrics", merr.msg);
        else
            log_info("Serving metrics and probes on %s (port %u)", cfg->metrics_address,
                     daemon_metrics_port(m->metrics));
    }
    config_dra_assign(&m->dra_cfg, &cfg->dra);
    if (cfg->dra.enabled) {
        int r = daemon_dra_check(cfg, err);
        if (r < 0)
            return r;
        struct daemon_dra_metrics dm = daemon_metrics_dra(m->metrics);
        r = daemon_dra_start(m->loop, cfg, m->cluster ? cluster_kube(m->cluster) : NULL, &dm,
                             &m->dra, err);
        if (r < 0)
            return r;
        daemon_dra_on_released(m->dra, on_dra_released, m);
    }
    int r = swap_state(m, cfg, err);
    return r < 0 ? r : 0;
}

int daemon_reload(struct daemon *m, struct config *cfg, struct error *err)
{
    return swap_state(m, cfg, err);
}

void daemon_set_cluster(struct daemon *m, struct cluster *c)
{
    m->cluster = c;
}

void daemon_kubelet_restarted(struct daemon *m)
{
    if (m->dra)
        daemon_dra_kubelet_restarted(m->dra);
    struct serving *s = m->state;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_plugins; i++) {
        struct error err = { 0 };
        struct plugin *p = &s->plugins[i];
        if (!p->dp) {
            /* Not serving yet (its socket could not be bound, or its MPS daemon is not
             * up): the directory that came back may be what it waited for, so it tries
             * now instead of at the end of its backoff. */
            if (p->start_retry) {
                loop_timer_cancel(m->loop, p->start_retry);
                p->start_retry = NULL;
                plugin_try_start(p);
            }
            continue;
        }
        if (dp_plugin_rebind(s->plugins[i].dp, &err) < 0) {
            log_error("%s", err.msg);
            continue;
        }
        if (s->plugins[i].reg)
            reg_restart(s->plugins[i].reg);
    }
}

void daemon_count_reload(struct daemon *m, enum daemon_reload_outcome o)
{
    daemon_metrics_reload(m->metrics, o);
}

void daemon_visit(const struct daemon *m, const struct daemon_visitor *v, void *userdata)
{
    const struct serving *s = m->state;
    for (size_t i = 0; s && i < s->n_plugins; i++) {
        const struct plugin *p = &s->plugins[i];
        const struct rs_resource *res = p->res;
        if (v->resource)
            v->resource(userdata, res->name, p->dp, p->reg, p->reg && reg_registered(p->reg),
                        p->dp ? grpc_server_connections(dp_plugin_server(p->dp)) : 0);
        for (size_t j = 0; v->device && j < res->n_devices; j++) {
            const struct rs_device *d = &res->devices[j];
            uint64_t xid = health_monitor_last_xid(m->health, d->gpu, d->mig);
            const char *cls =
                xid ? config_health_class_name(health_classify(s->node.health_cfg, xid)) : "none";
            v->device(userdata, res->name, d->id, s->node.inv.gpus[d->gpu].uuid,
                      device_healthy((void *)m, d, NULL), xid, cls);
        }
    }
    if (v->dra && m->dra) {
        struct daemon_dra_status st;
        daemon_dra_status(m->dra, &st);
        v->dra(userdata, &st);
    }
}

void daemon_free(struct daemon *m)
{
    if (!m)
        return;
    daemon_dra_free(TAKE_PTR(m->dra)); /* it borrows the served state */
    config_dra_clear(&m->dra_cfg);
    state_free(m->state);
    daemon_metrics_free(TAKE_PTR(m->metrics));
    health_monitor_stop(m->health);
    sockwatch_free(m->watch);
    free(m->watched_socket);
    free(m->nvml_root);
    daemon_health_view_clear(&m->hview);
    free(m);
}
