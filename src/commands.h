/* Subcommands; each returns the process exit code. */
#pragma once

#include <stdio.h>

#include "config/config-load.h"

/* The process's exit codes, one row each: name, value, what it means. --help lists them
 * from this table (cmd_help.c), so the two cannot drift; every exit path returns one. A
 * serve killed by a signal it does not handle ends the way the kernel ends it (a shell
 * reports 128 + the signal number). */
#define GDP_EXIT_CODES(X)                                                             \
    X(GDP_EXIT_OK, 0,                                                                 \
      "success: serve stopped by SIGTERM, SIGINT or SIGQUIT; list, labels, config "    \
      "print, --help and --version done")                                             \
    X(GDP_EXIT_FAILURE, 1,                                                            \
      "failure, said in the last error line: a bad flag, environment variable or "    \
      "config file; NVML not initialised (with --fail-on-init-error, the default); "  \
      "discovery, CDI specs or the event loop failed at start; list or labels failed")

enum gdp_exit {
#define GDP_EXIT_ENUM(name, value, text) name = value,
    GDP_EXIT_CODES(GDP_EXIT_ENUM)
#undef GDP_EXIT_ENUM
};

int cmd_labels(struct config *cfg, const struct config_command *cmd);
int cmd_list(struct config *cfg, const struct config_command *cmd, int argc, char **argv);
int cmd_serve(struct config *cfg, int argc, char **argv);

/* The entrypoints of NVIDIA's image other than the plugin, chosen by the name the binary
 * is run as (main.c): programs with flags of their own. */
int cmd_config_manager(int argc, char **argv);
int cmd_gfd(int argc, char **argv);
int cmd_mps_control_daemon(int argc, char **argv);
/* The OCI hooks of a GPU share's CDI spec (cmd_cdi_hook.c, docs/cdi-hook.md): argv[0] the
 * program or "cdi-hook", argv[1] the hook ("share-memory-limit"). Also built alone as
 * gpu-device-plugin-cdi-hook. Exit 0, 1 (failure) or 2 (usage), its own codes. */
int cmd_cdi_hook(int argc, char **argv);

/* The end of --help, after the flags: the exit codes (GDP_EXIT_CODES) and the signals
 * serve handles (cmd_serve.c). */
void cmd_print_help_epilogue(FILE *f);
