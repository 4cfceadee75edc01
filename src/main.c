/* Wiring only: configuration, logging, then the subcommand. */
#include <stdio.h>

#include "commands.h"
#include "core/log.h"
#include "core/mem.h"
#include "version.h"

static int cmd_config(const struct config *cfg, const struct config_command *cmd)
{
    if (cmd->n_args == 1 && streq(cmd->args[0], "print"))
        return config_print_json(cfg, stdout) < 0;
    log_error("config: unknown arguments (usage: gpu-device-plugin [flags] config print)");
    return 1;
}

int main(int argc, char **argv)
{
    struct config_command cmd = { 0 };
    struct error err = { 0 };
    int rc;

    mem_single_arena(); /* before NVML or the health monitor start a thread */
    struct config *cfg = xcalloc(1, sizeof(*cfg));

    int r = config_load(cfg, argc, argv, environ, &cmd, &err);
    if (r == CONFIG_LOAD_HELP) {
        config_print_help(stdout, argv[0]);
        rc = 0;
        goto out;
    }
    if (r == CONFIG_LOAD_VERSION) {
        printf("gpu-device-plugin version %s\ncommit: %s\n", GDP_VERSION, GDP_REVISION);
        rc = 0;
        goto out;
    }
    if (r < 0) {
        log_error("%s", err.msg);
        rc = 1;
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
        log_error("unknown command \"%s\" (commands: list, labels, config print; no command: serve)",
                  cmd.name);
        rc = 1;
    }
out:
    config_command_free(&cmd);
    config_free(cfg);
    free(cfg);
    return rc;
}
