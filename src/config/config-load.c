/* config_load(): the sources in precedence order into one struct config (flags
 * and environment, then the config file for what they left unset, then the
 * defaults that depend on other fields), then the checks (config-check.c). */
#include "config/config-internal.h"
#include "config/config-load.h"

static void post_defaults(struct config *c)
{
    if (!c->dev_root || !*c->dev_root) {
        free(c->dev_root);
        c->dev_root = xstrdup(c->driver_root);
    }
    if (c->mps.present && c->mps.fail_requests_greater_than_one < 0)
        c->mps.fail_requests_greater_than_one = 1;
    if (c->time_slicing.fail_requests_greater_than_one < 0)
        c->time_slicing.fail_requests_greater_than_one = 0;
}

/* Started as NVIDIA's DRA kubelet plugin: DRA on and the device-plugin side off, on every
 * load (a reload reads the same argv). Flags that say otherwise are refused, not ignored. */
static int dra_only_program(struct config *c, const char *argv0, const bool *set,
                            struct error *err)
{
    if (!streq(program_name(argv0), "gpu-kubelet-plugin"))
        return 0;
    if (set[OPT_DRA] && !c->dra.enabled)
        return error_set(err, -EINVAL, "--dra=false: gpu-kubelet-plugin serves only DRA "
                         "(run the binary as nvidia-device-plugin for the device plugin)");
    if (c->dra.device_plugin_gpus && c->dra.device_plugin_gpus[0])
        return error_set(err, -EINVAL, "--dra-device-plugin-gpus: gpu-kubelet-plugin serves "
                         "only DRA, no GPU is left to a device plugin (run the binary with "
                         "serve --dra to split a node)");
    c->dra.enabled = true;
    c->dra.only = true;
    /* No device-plugin registration and no watch of its directory, which NVIDIA's DRA
     * deployment does not mount. */
    free(c->kubelet_socket);
    c->kubelet_socket = xstrdup("");
    return 0;
}

static void marks_clear(struct config_marks *m)
{
    for (int i = 0; i < _OPT_MAX; i++)
        free(m->origin[i]);
}

static int load(struct config *out, int argc, char **argv, char **envp,
                struct config_command *cmd, const char *file_override, struct error *err)
{
    _cleanup_(marks_clear) struct config_marks marks = { 0 };
    bool set[_OPT_MAX] = { 0 };
    int r;

    r = config_args_apply(out, argc, argv, envp, cmd, set, &marks, err);
    if (r != 0)
        return r;
    out->gfd_output_file_given = set[OPT_GFD_OUTPUT_FILE];
    if (file_override) {
        free(out->config_file);
        out->config_file = xstrdup(file_override);
    }

    if (out->config_file && *out->config_file) {
        r = config_file_load(out, out->config_file, set, &marks, err);
        if (r < 0)
            return r;
    } else if (out->config_file) {
        free(out->config_file);
        out->config_file = NULL;
    }

    if (argc > 0 && (r = dra_only_program(out, argv[0], set, err)) < 0)
        return r;
    post_defaults(out);
    if ((r = config_health_check(out, &marks, err)) < 0)
        return r;
    if ((r = config_validate(out, &marks, err)) < 0)
        return r;
    config_dra_feature_gates_warn(out);
    return 0;
}

int config_load(struct config *out, int argc, char **argv, char **envp,
                struct config_command *cmd, struct error *err)
{
    config_init_defaults(out);
    if (cmd) {
        *cmd = (struct config_command){ 0 };
        cmd->args = xcalloc(1, sizeof(char *));
    }
    int r = load(out, argc, argv, envp, cmd, NULL, err);
    if (r < 0)
        config_command_free(cmd);
    return r;
}

int config_load_with_file(struct config *out, int argc, char **argv, char **envp,
                          struct config_command *cmd, const char *config_file,
                          struct error *err)
{
    config_init_defaults(out);
    if (cmd) {
        *cmd = (struct config_command){ 0 };
        cmd->args = xcalloc(1, sizeof(char *));
    }
    int r = load(out, argc, argv, envp, cmd, config_file, err);
    if (r < 0)
        config_command_free(cmd);
    return r;
}
