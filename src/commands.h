/* Subcommands; each returns the process exit code. */
#pragma once

#include "config/config-load.h"

int cmd_labels(struct config *cfg, const struct config_command *cmd);
int cmd_list(struct config *cfg, const struct config_command *cmd, int argc, char **argv);
int cmd_serve(struct config *cfg, int argc, char **argv);
