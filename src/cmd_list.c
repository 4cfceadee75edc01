/* `gpu-device-plugin list`: build the node state exactly as serve mode does
 * (state/node-state.c: same discovery, IMEX selection, resources), print what is
 * advertised, without any kubelet. With per-node configuration on, the configuration is
 * the one serve would select now (cluster_config_select_now: the Node's label read once),
 * and the listing says which. Health comes from the running plugin when one serves
 * the resource's socket (its live health and the reason), else from a one-shot probe of
 * each physical device through NVML. */
#include <stdio.h>

#include "cluster/cluster-select.h"
#include "cluster/cluster.h"
#include "commands.h"
#include "core/log.h"
#include "state/node-state.h"
#include "kubelet/status_client.h"
#include "nvml/nvml.h"
#include "output/list.h"

/* id -> {"health", "reason"} from running plugins; NULL entries: probe. */
struct list_health {
    json_t *live;
};

static bool list_health(void *userdata, const struct rs_device *d, const char **reason)
{
    static char why[600];
    struct list_health *lh = userdata;
    json_t *entry = lh->live ? json_object_get(lh->live, d->id) : NULL;
    if (entry) {
        const char *h = json_string_value(json_object_get(entry, "health"));
        const char *r = json_string_value(json_object_get(entry, "reason"));
        snprintf(why, sizeof(why), "%s", r ? r : "");
        *reason = why;
        return h && streq(h, "Healthy");
    }
    nvml_device dev;
    char name[96];
    struct error err = { 0 };
    if (nvml_device_by_uuid(d->uuid, &dev, &err) < 0 || nvml_device_name(dev, name, sizeof(name), &err) < 0) {
        snprintf(why, sizeof(why), "probe failed: %s", err.msg);
        *reason = why;
        return false;
    }
    return true;
}

/* Ask the plugins serving these resources (if any) for their live health. */
static json_t *query_running(const struct config *cfg, const struct resource_set *rs)
{
    _cleanup_free_ char *dir = node_state_socket_dir(cfg);
    json_t *live = json_object();
    for (size_t i = 0; i < rs->n_resources; i++) {
        _cleanup_free_ char *sock = xasprintf("%s/%s", dir, rs->resources[i].socket_name);
        json_t *st = NULL;
        struct error err = { 0 };
        if (status_query(sock, 1000, &st, &err) < 0) {
            if (err.code != -ENOENT)
                log_warning("asking the running plugin: %s, probing instead", err.msg);
            continue;
        }
        size_t k;
        json_t *dev;
        json_array_foreach(json_object_get(st, "devices"), k, dev) {
            const char *id = json_string_value(json_object_get(dev, "id"));
            if (id)
                json_object_set(live, id, dev);
        }
        json_decref(st);
    }
    return live;
}

static void config_freep(struct config **c)
{
    if (*c) {
        config_free(*c);
        free(*c);
    }
}

/* What to list: the per-node selection's config when per-node configuration is on and a
 * config is selected and loads (then *out is it, to free), else cfg, as serve at start.
 * lc's strings point into s, *why or cfg. */
static void pick_config(struct config *cfg, int argc, char **argv, struct cluster_selection *s,
                        char **why, struct config **out, struct list_config *lc)
{
    const struct config_cluster *k = &cfg->cluster;
    struct error err = { 0 };
    *lc = (struct list_config){ .how = "flags and --config-file", .file = cfg->config_file };
    if (!cluster_config_on(k)) {
        if (k->config_dir && *k->config_dir)
            lc->note = *why = xasprintf("per-node config (--config-dir %s) off: %s node name "
                                        "(--node-name, NODE_NAME)",
                                        k->config_dir,
                                        k->node_name && *k->node_name ? "invalid" : "no");
        return;
    }
    if (cluster_config_select_now(k, s, &err) < 0) {
        log_warning("Per-node configuration: %s; listing the configuration of the flags, "
                    "environment and --config-file",
                    err.msg);
        lc->note = *why = xasprintf("per-node config: %s", err.msg);
        return;
    }
    struct config *c = xcalloc(1, sizeof(*c));
    struct config_command cmd = { 0 };
    int r = config_load_with_file(c, argc, argv, environ, &cmd, s->path ? s->path : "", &err);
    config_command_free(&cmd); /* list's own arguments: main parsed them already */
    if (r != 0) {
        if (r > 0) /* --help / --version: main has handled those already */
            error_set(&err, -EINVAL, "unexpected --help/--version");
        _cleanup_free_ char *desc = cluster_selection_describe(s, k->config_node_label, false);
        log_warning("Config %s rejected: %s; listing the configuration of the flags, "
                    "environment and --config-file",
                    desc, err.msg);
        lc->note = *why = xasprintf("per-node config %s rejected: %s", desc, err.msg);
        config_freep(&c);
        return;
    }
    *out = c;
    *lc = (struct list_config){
        .name = s->name ? s->name : "",
        .how = s->how,
        .note = s->note,
        .file = c->config_file,
    };
    lc->source = *why = cluster_selection_source(s, k->config_node_label);
}

int cmd_list(struct config *cfg, const struct config_command *cmd, int argc, char **argv)
{
    bool json = false;
    for (size_t i = 0; i < cmd->n_args; i++) {
        const char *a = cmd->args[i];
        if (streq(a, "--output") || streq(a, "-o")) {
            const char *v = i + 1 < cmd->n_args ? cmd->args[++i] : "";
            if (streq(v, "json"))
                json = true;
            else if (!streq(v, "table")) {
                log_error("list: --output: unknown format \"%s\" (allowed: table, json)", v);
                return GDP_EXIT_FAILURE;
            }
        } else if (streq(a, "--output=json") || streq(a, "-ojson")) {
            json = true;
        } else if (streq(a, "--output=table")) {
            json = false;
        } else {
            static const char *const own[] = { "output", NULL };
            _cleanup_free_ char *m =
                config_unknown_argument("list", a, own, "allowed: --output table|json");
            log_error("%s", m);
            return GDP_EXIT_FAILURE;
        }
    }

    struct cluster_selection sel = { 0 };
    _cleanup_free_ char *why = NULL;
    _cleanup_(config_freep) struct config *picked = NULL;
    struct list_config lc;
    pick_config(cfg, argc, argv, &sel, &why, &picked, &lc);
    _cleanup_free_ char *desc =
        picked ? cluster_selection_describe(&sel, cfg->cluster.config_node_label, true)
               : xasprintf("%s%s%s%s", lc.how, lc.note ? " (" : "", lc.note ? lc.note : "",
                           lc.note ? ")" : "");
    lc.description = desc;

    struct error err = { 0 };
    /* borrowed: main (or picked) frees it (the build narrows its IMEX channels like
     * serve's) */
    struct node_state node = { .cfg = picked ? picked : cfg };
    struct node_state_options opt = { 0 };
    int rc = GDP_EXIT_FAILURE;
    if (node_state_build(&node, &opt, &err) < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
        goto out;
    }
    struct list_health lh = { .live = query_running(node.cfg, &node.rs) };
    int pr = json ? list_print_json(stdout, &lc, &node.inv, &node.rs, list_health, &lh)
                  : list_print_table(stdout, &lc, &node.inv, &node.rs, list_health, &lh);
    rc = pr < 0 ? GDP_EXIT_FAILURE : GDP_EXIT_OK;
    json_decref(lh.live);
out:
    node.cfg = NULL;
    node_state_clear(&node);
    cluster_selection_clear(&sel);
    return rc;
}
