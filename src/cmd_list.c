/* `gpu-device-plugin list`: discover like serve mode would, print what would be
 * advertised, without any kubelet. Health comes from the running plugin when one serves
 * the resource's socket (its live health and the reason), else from a one-shot probe of
 * each physical device through NVML. */
#include <stdio.h>

#include "commands.h"
#include "core/log.h"
#include "kubelet/manager.h"
#include "kubelet/status_client.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "output/list.h"
#include "policy/resources.h"

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
    _cleanup_free_ char *dir = manager_socket_dir(cfg);
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

int cmd_list(const struct config *cfg, const struct config_command *cmd)
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
                return 1;
            }
        } else if (streq(a, "--output=json") || streq(a, "-ojson")) {
            json = true;
        } else if (streq(a, "--output=table")) {
            json = false;
        } else {
            log_error("list: unknown argument \"%s\" (allowed: --output table|json)", a);
            return 1;
        }
    }

    struct error err = { 0 };
    struct inventory inv = { 0 };
    struct resource_set rs = { 0 };
    int rc = 1;
    if (nvml_open(cfg->driver_root_ctr_path, &err) < 0) {
        log_error("failed to initialize NVML: %s", err.msg);
        return 1;
    }
    struct discover_options opt = {
        .sysfs_root = cfg->sysfs_root,
        .proc_root = cfg->proc_root,
        .with_mig = cfg->mig_strategy != MIG_STRATEGY_NONE,
        .with_links = false,
    };
    if (discover_node(&opt, &inv, &err) < 0) {
        log_error("discovering GPUs: %s", err.msg);
        goto out;
    }
    if (resources_build(&inv, cfg, &rs, &err) < 0) {
        log_error("%s", err.msg);
        goto out;
    }
    struct list_health lh = { .live = query_running(cfg, &rs) };
    if (json)
        rc = list_print_json(stdout, &inv, &rs, list_health, &lh) < 0;
    else
        rc = list_print_table(stdout, &inv, &rs, list_health, &lh) < 0;
    json_decref(lh.live);
out:
    resources_clear(&rs);
    inventory_clear(&inv);
    nvml_close();
    return rc;
}
