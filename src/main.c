/* Wiring only: configuration, logging, then the subcommand. */
#include <stdio.h>

#include "commands.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/suggest.h"
#include "version.h"

static int cmd_config(const struct config *cfg, const struct config_command *cmd)
{
    if (cmd->n_args == 1 && streq(cmd->args[0], "print"))
        return config_print_json(cfg, stdout) < 0;
    log_error("config: unknown arguments (usage: gpu-device-plugin [flags] config print; "
              "see --help)");
    return GDP_EXIT_FAILURE;
}

static int unknown_command(const char *name)
{
    static const char *const commands[] = { "list", "labels", "config" };
    struct suggest sg;
    suggest_init(&sg, name, strlen(name));
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        suggest_offer(&sg, commands[i]);
    const char *best = suggest_best(&sg);
    log_error("unknown command \"%s\"%s%s%s (commands: list, labels, config print; no command: "
              "serve; see --help)", name, best ? "; did you mean " : "", best ? best : "",
              best ? "?" : "");
    return GDP_EXIT_FAILURE;
}

int main(int argc, char **argv)
{
    struct config_command cmd = { 0 };
    struct error err = { 0 };
    int rc;

    /* NVIDIA's image runs each of its programs by name; ours are links to this binary.
     * "nvidia-device-plugin" (and any other name) is the plugin; "gpu-kubelet-plugin" is the
     * plugin serving only DRA (config_load knows that name). */
    mem_single_arena(); /* before NVML or the health monitor start a thread */
    if (streq(program_name(argv[0]), "config-manager"))
        return cmd_config_manager(argc, argv);
    if (streq(program_name(argv[0]), "gpu-feature-discovery"))
        return cmd_gfd(argc, argv);
    if (streq(program_name(argv[0]), "mps-control-daemon"))
        return cmd_mps_control_daemon(argc, argv);
    /* the OCI hooks of a share's CDI spec: their own flags, no configuration */
    if (streq(program_name(argv[0]), "gpu-device-plugin-cdi-hook"))
        return cmd_cdi_hook(argc, argv);
    if (argc > 1 && streq(argv[1], "cdi-hook"))
        return cmd_cdi_hook(argc - 1, argv + 1);
    struct config *cfg = xcalloc(1, sizeof(*cfg));

    int r = config_load(cfg, argc, argv, environ, &cmd, &err);
    if (r == CONFIG_LOAD_HELP) {
        config_print_help(stdout, argv[0]);
        cmd_print_help_epilogue(stdout);
        rc = GDP_EXIT_OK;
        goto out;
    }
    if (r == CONFIG_LOAD_VERSION) {
        printf("gpu-device-plugin version %s\ncommit: %s\n", GDP_VERSION, GDP_REVISION);
        rc = GDP_EXIT_OK;
        goto out;
    }
    if (r < 0) {
        log_error("%s", err.msg);
        rc = GDP_EXIT_FAILURE;
        goto out;
    }
    log_set_level(config_log_level(cfg));
    if (cfg->log_json)
        log_set_format(LOG_FORMAT_JSON);

    if (!cmd.name) {
        config_command_free(&cmd);
        return cmd_serve(cfg, argc, argv); /* takes cfg */
    }
    if (streq(cmd.name, "list"))
        rc = cmd_list(cfg, &cmd, argc, argv);
    else if (streq(cmd.name, "labels"))
        rc = cmd_labels(cfg, &cmd);
    else if (streq(cmd.name, "config"))
        rc = cmd_config(cfg, &cmd);
    else {
        rc = unknown_command(cmd.name);
    }
out:
    config_command_free(&cmd);
    config_free(cfg);
    free(cfg);
    return rc;
}
