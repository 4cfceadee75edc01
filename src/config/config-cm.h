/* The settings of the `config-manager` entrypoint: NVIDIA's config-manager
 * (k8s-device-plugin cmd/config-manager, v0.20.0) flags and environment variables, with
 * its defaults, so that NVIDIA's chart and the GPU Operator run ours unchanged. A program
 * of its own, so a table of its own: none of the plugin's flags apply to it. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

struct config_cm {
    bool oneshot;             /* --oneshot, ONESHOT: false */
    char *kubeconfig;         /* --kubeconfig, KUBECONFIG: "" (in-cluster) */
    char *node_name;          /* --node-name, NODE_NAME: required */
    char *node_label;         /* --node-label, NODE_LABEL: nvidia.com/device-plugin.config */
    char *srcdir;             /* --config-file-srcdir, CONFIG_FILE_SRCDIR: required */
    char *dst;                /* --config-file-dst, CONFIG_FILE_DST: required */
    char *default_config;     /* --default-config, DEFAULT_CONFIG: "" */
    char **fallbacks;         /* --fallback-strategies, FALLBACK_STRATEGIES: none */
    bool send_signal;         /* --send-signal, SEND_SIGNAL: true */
    int signal;               /* --signal, SIGNAL: 1 (SIGHUP) */
    char *process;            /* --process-to-signal, PROCESS_TO_SIGNAL: nvidia-device-plugin */
    int log_verbosity;        /* -v (ours, as the plugin's) */
};

#define CONFIG_CM_HELP 1
#define CONFIG_CM_VERSION 2

/* Flags over environment over defaults, then config-manager's own checks ("invalid
 * <node-name>: must not be empty string"). Returns 0, CONFIG_CM_HELP, CONFIG_CM_VERSION,
 * or -EINVAL with err naming the flag or variable at fault; out is then cleared. */
int config_cm_load(struct config_cm *out, int argc, char **argv, char **envp,
                   struct error *err);
void config_cm_free(struct config_cm *c);
void config_cm_print_help(FILE *f, const char *prog);
