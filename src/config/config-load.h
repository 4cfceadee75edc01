/* Loading the configuration: command line, environment and config file into one
 * validated struct config (see docs/configuration.md for every key).
 *
 * config_load() has no global state: main calls it again on SIGHUP with a fresh
 * struct and swaps only on success, so a bad reload never touches the running
 * config. Unknown config-file keys are logged as warnings; everything else that is
 * wrong is returned in err (never logged). */
#pragma once

#include <stdio.h>

#include "config/config.h"

/* Positive returns of config_load(): main prints and exits 0. */
#define CONFIG_LOAD_HELP 1
#define CONFIG_LOAD_VERSION 2

/* The subcommand part of the command line: the first argument that is not a flag
 * (e.g. "list", "config") and every later argument that is not one of our flags
 * (e.g. {"--output", "json"} or {"print"}), in order. Everything after "--" is
 * also handed over. Strings point into argv; the array is owned. */
struct config_command {
    const char *name;  /* NULL: no subcommand */
    const char **args; /* NULL-terminated (never NULL after config_load) */
    size_t n_args;
};

/* Fill *out from argv (argv[0] is the program name), envp (NULL-terminated
 * "NAME=value" strings; NULL = empty environment, main passes environ) and the
 * config file named by --config-file / CONFIG_FILE. Precedence per field:
 * flag > env > file > default.
 * Returns 0, CONFIG_LOAD_HELP, CONFIG_LOAD_VERSION, or -errno with err set.
 * On every return *out is initialised (config_free() it). cmd may be NULL: a
 * positional argument is then an error. On success cmd must be freed with
 * config_command_free(). */
int config_load(struct config *out, int argc, char **argv, char **envp,
                struct config_command *cmd, struct error *err);
void config_command_free(struct config_command *cmd);
/* config_load() for the per-node configuration (src/cluster/; serve, and `list`, whose
 * command line has a subcommand: cmd as for config_load()): the config file is
 * `config_file` whatever --config-file / CONFIG_FILE say ("" = none: flags, environment
 * and defaults only, like NVIDIA's config-manager's empty config). */
int config_load_with_file(struct config *out, int argc, char **argv, char **envp,
                          struct config_command *cmd, const char *config_file,
                          struct error *err);

/* The flag name (without dashes) closest to name[0..len), for "did you mean": of a
 * subcommand's own options `extra` (NULL-terminated, may be NULL; ahead of a flag as
 * close), then the plugin's flags. NULL when none is close (core/suggest.h). */
const char *config_flag_closest(const char *name, size_t len, const char *const *extra);
/* The message for an argument of subcommand `cmd` that is neither one of its own options
 * (`extra`, `allowed` says how they are used) nor a flag: with the closest option when
 * one is close, and --help. For the subcommand to log; returns a string to free. */
char *config_unknown_argument(const char *cmd, const char *arg, const char *const *extra,
                              const char *allowed);

/* `--help` text: every flag with aliases, env vars and default, grouped. */
void config_print_help(FILE *f, const char *argv0);
/* The --help of the programs other than the plugin: each lists its own flags only, as
 * NVIDIA's gpu-feature-discovery and mps-control-daemon do (reference §8.1, §9), and the
 * few of ours it acts on. `root`: where mps-control-daemon's mount-shm mounts. */
void config_print_help_gfd(FILE *f, const char *argv0);
void config_print_help_mps(FILE *f, const char *argv0, const char *root);

/* The effective configuration as indented JSON ("Running with config" shape, our
 * extensions under "extensions"). Returns 0 or -errno. */
int config_print_json(const struct config *c, FILE *f);
/* Same, as a string to free(); never NULL. Compact (one line) for the log, where every
 * line must be one klog record. */
char *config_to_json_string(const struct config *c, bool indent);

/* The settings that take effect only when serve starts (config-restart.c lists them):
 * config_start_values_new() keeps their values at start; config_start_values_diff()
 * calls fn(userdata, "--flag", running value, value in c) for each that c sets otherwise
 * and returns how many did. */
struct config_start_values;
typedef void (*config_change_fn)(void *userdata, const char *flag, const char *running,
                                 const char *wanted);
struct config_start_values *config_start_values_new(const struct config *c);
void config_start_values_free(struct config_start_values *s);
size_t config_start_values_diff(const struct config_start_values *s, const struct config *c,
                                config_change_fn fn, void *userdata);

/* Name tables, for messages and JSON ("none", "uuid", "envvar", ...). */
const char *config_mig_strategy_name(enum mig_strategy s);
const char *config_device_id_strategy_name(enum device_id_strategy s);
const char *config_shared_alloc_policy_name(enum shared_alloc_policy p);
/* One DEVICE_LIST_* bit to its name; NULL for anything else. */
const char *config_device_list_strategy_name(unsigned bit);

/* klog -v N mapped to our levels: 0 -> LOG_INFO, >= 1 -> LOG_DEBUG. */
int config_log_level(const struct config *c);
