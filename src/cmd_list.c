/* `gpu-device-plugin list`: discover like serve mode would, print what would be
 * advertised, without any kubelet. Health here is a one-shot probe of each physical
 * device through NVML. */
#include <stdio.h>

#include "commands.h"
#include "core/log.h"
#include "node/discover.h"
#include "nvml/nvml.h"
#include "output/list.h"
#include "policy/resources-warn.h"

static void warn_resource(void *userdata, const char *msg) { log_warning("%s, ignoring", msg); }

static bool probe_health(void *userdata, const struct rs_device *d, const char **reason)
{
    static char why[600];
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
        .with_mig = cfg->mig_strategy != MIG_STRATEGY_NONE,
        .with_links = false,
    };
    if (discover_node(&opt, &inv, &err) < 0) {
        log_error("discovering GPUs: %s", err.msg);
        goto out;
    }
    if (resources_build_warn(&inv, cfg, warn_resource, NULL, &rs, &err) < 0) {
        log_error("%s", err.msg);
        goto out;
    }
    if (json)
        rc = list_print_json(stdout, &inv, &rs, probe_health, NULL) < 0;
    else
        rc = list_print_table(stdout, &inv, &rs, probe_health, NULL) < 0;
out:
    resources_clear(&rs);
    inventory_clear(&inv);
    nvml_close();
    return rc;
}
