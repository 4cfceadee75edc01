#include <libgen.h>
#include <stdio.h>

#include "core/log.h"
#include "core/loop.h"
#include "dp_service.h"
#include "kubelet_watch.h"
#include "manager.h"
#include "node/discover.h"
#include "node/events.h"
#include "nvml/nvml.h"
#include "output/cdi.h"
#include "policy/health.h"
#include "policy/resources-warn.h"
#include "policy/topo.h"
#include "registration.h"

struct plugin {
    const struct rs_resource *res;
    struct dp_plugin *dp;
    struct reg *reg;
};

/* Everything derived from one config: built whole, swapped whole. */
struct node_state {
    struct config *cfg;
    bool nvml_open;
    struct inventory inv;
    struct resource_set rs;
    struct topo_model topo;
    struct health_config *health_cfg;
    struct health_monitor *health;
    struct plugin *plugins;   /* one per resource with devices */
    size_t n_plugins;
};

struct manager {
    struct loop *loop;
    struct node_state *state;
    struct kwatch *watch;
    char *watched_socket;
};

static void warn_resource(void *userdata, const char *msg)
{
    log_warning("%s, ignoring", msg);
}

static void state_free(struct node_state *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_plugins; i++) {
        reg_free(s->plugins[i].reg);
        dp_plugin_stop(s->plugins[i].dp);
    }
    free(s->plugins);
    health_monitor_stop(s->health);
    health_config_free(s->health_cfg);
    topo_model_clear(&s->topo);
    resources_clear(&s->rs);
    inventory_clear(&s->inv);
    if (s->nvml_open)
        nvml_close();
    if (s->cfg) {
        config_free(s->cfg);
        free(s->cfg);
    }
    free(s);
}

/* Discover and decide; nothing is served yet. */
static int state_build(struct node_state *s, struct error *err)
{
    const struct config *cfg = s->cfg;
    int r = health_config_load(&s->health_cfg, cfg->health_json, cfg->health_line,
                               cfg->config_file, environ, err);
    if (r < 0)
        return r;

    r = nvml_open(cfg->driver_root_ctr_path, err);
    if (r < 0) {
        if (cfg->fail_on_init_error)
            return error_prefix(err, "failed to initialize NVML");
        log_warning("Failed to initialize NVML: %s; --fail-on-init-error=false, continuing "
                    "without resources", err->msg);
        memset(err, 0, sizeof(*err));
        return 0;
    }
    s->nvml_open = true;
    log_info("Loaded NVML from %s", nvml_library_path());

    struct discover_options opt = {
        .sysfs_root = cfg->sysfs_root,
        .with_mig = cfg->mig_strategy != MIG_STRATEGY_NONE,
        .with_links = true,
    };
    if ((r = discover_node(&opt, &s->inv, err)) < 0)
        return error_prefix(err, "discovering GPUs");
    if ((r = resources_build_warn(&s->inv, cfg, warn_resource, NULL, &s->rs, err)) < 0)
        return r;
    if ((r = topo_model_build(&s->inv, &s->topo)) < 0)
        return error_set(err, r, "building the topology model: %s", strerror(-r));
    if (cfg->device_list_strategy & (DEVICE_LIST_CDI_ANNOTATIONS | DEVICE_LIST_CDI_CRI)) {
        if ((r = cdi_write_specs(&s->rs, cfg, err)) < 0)
            return error_prefix(err, "writing CDI specs");
    }
    return 0;
}

static bool device_healthy(void *userdata, const struct rs_device *d)
{
    struct node_state *s = userdata;
    if (!s->health)
        return true;
    return health_monitor_healthy(s->health, d->gpu, d->mig, NULL);
}

static void on_health_changed(void *userdata)
{
    struct node_state *s = userdata;
    for (size_t i = 0; i < s->n_plugins; i++)
        dp_plugin_devices_changed(s->plugins[i].dp);
}

static int state_serve(struct manager *m, struct node_state *s, struct error *err)
{
    const struct config *cfg = s->cfg;
    _cleanup_free_ char *dir_copy = xstrdup(cfg->kubelet_socket);
    const char *socket_dir = dirname(dir_copy);
    int r;

    s->plugins = xcalloc(s->rs.n_resources ? s->rs.n_resources : 1, sizeof(*s->plugins));
    for (size_t i = 0; i < s->rs.n_resources; i++) {
        const struct rs_resource *res = &s->rs.resources[i];
        if (res->n_devices == 0)
            continue;
        struct dp_context ctx = {
            .resource = res,
            .config = cfg,
            .inventory = &s->inv,
            .topo = &s->topo,
            .callbacks = { .device_healthy = device_healthy },
            .userdata = s,
        };
        struct plugin *p = &s->plugins[s->n_plugins];
        log_info("Starting GRPC server for '%s'", res->name);
        p->res = res;
        if ((r = dp_plugin_start(m->loop, socket_dir, &ctx, &p->dp, err)) < 0)
            return r;
        s->n_plugins++;
        log_info("Starting to serve '%s' on %s", res->name, dp_plugin_socket_path(p->dp));
    }
    if (s->n_plugins == 0) {
        log_info("No devices found. Waiting indefinitely.");
        return 0;
    }
    if (s->nvml_open) {
        r = health_monitor_start(m->loop, &s->inv, s->health_cfg, on_health_changed, s,
                                 &s->health, err);
        if (r < 0) {
            log_warning("Health checks unavailable: %s; continuing with health checks disabled",
                        err->msg);
            memset(err, 0, sizeof(*err));
        }
    }
    /* Register only once every socket serves: the kubelet dials back at once. */
    for (size_t i = 0; i < s->n_plugins; i++) {
        struct plugin *p = &s->plugins[i];
        if (!cfg->kubelet_socket || !*cfg->kubelet_socket) {
            log_info("No kubelet socket configured, not registering '%s'", p->res->name);
            continue;
        }
        p->reg = reg_new(m->loop, cfg->kubelet_socket, p->res->socket_name, p->res->name);
        reg_restart(p->reg);
    }
    return 0;
}

static void on_kubelet_restart(void *userdata) { manager_kubelet_restarted(userdata); }

static int ensure_watch(struct manager *m, const struct config *cfg, struct error *err)
{
    if (!cfg->kubelet_socket || !*cfg->kubelet_socket)
        return 0;
    if (m->watch && m->watched_socket && streq(m->watched_socket, cfg->kubelet_socket))
        return 0;
    struct kwatch *w = NULL;
    int r = kwatch_new(m->loop, cfg->kubelet_socket, on_kubelet_restart, m, &w, err);
    if (r < 0)
        return r;
    kwatch_free(m->watch);
    free(m->watched_socket);
    m->watch = w;
    m->watched_socket = xstrdup(cfg->kubelet_socket);
    return 0;
}

struct manager *manager_new(struct loop *l)
{
    struct manager *m = xcalloc(1, sizeof(*m));
    m->loop = l;
    return m;
}

/* Build a complete new state from cfg and swap it in. On failure nothing changes and
 * cfg is still the caller's. */
static int swap_state(struct manager *m, struct config *cfg, struct error *err)
{
    int r = ensure_watch(m, cfg, err);
    if (r < 0)
        return r;
    struct node_state *s = xcalloc(1, sizeof(*s));
    s->cfg = cfg;
    r = state_build(s, err);
    if (r < 0) {
        s->cfg = NULL;
        state_free(s);
        return r;
    }
    /* The old plugins must let go of the socket paths before the new ones bind. */
    state_free(m->state);
    m->state = NULL;
    r = state_serve(m, s, err);
    if (r < 0) {
        s->cfg = NULL;
        state_free(s);
        return r;
    }
    m->state = s;
    return 0;
}

int manager_start(struct manager *m, struct config *cfg, struct error *err)
{
    return swap_state(m, cfg, err);
}

int manager_reload(struct manager *m, struct config *cfg, struct error *err)
{
    return swap_state(m, cfg, err);
}

void manager_kubelet_restarted(struct manager *m)
{
    struct node_state *s = m->state;
    if (!s)
        return;
    for (size_t i = 0; i < s->n_plugins; i++) {
        struct error err = { 0 };
        if (dp_plugin_rebind(s->plugins[i].dp, &err) < 0) {
            log_error("%s", err.msg);
            continue;
        }
        if (s->plugins[i].reg)
            reg_restart(s->plugins[i].reg);
    }
}

unsigned manager_registrations(const struct manager *m)
{
    unsigned n = 0;
    if (m->state)
        for (size_t i = 0; i < m->state->n_plugins; i++)
            n += m->state->plugins[i].reg ? reg_count(m->state->plugins[i].reg) : 0;
    return n;
}

void manager_free(struct manager *m)
{
    if (!m)
        return;
    state_free(m->state);
    kwatch_free(m->watch);
    free(m->watched_socket);
    free(m);
}
