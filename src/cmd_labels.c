/* `gpu-device-plugin labels`: the GPU node labels gpu-feature-discovery would give this
 * node (docs/labels.md), from the same node state serve and list build, honouring the
 * same flags, environment and config file. Prints them sorted, one key=value a line;
 * writes the NFD feature file instead (atomically, once) when --output-file is given
 * or --use-node-feature-api=false (GFD's file mode). */
#include <stdio.h>
#include <time.h>

#include "commands.h"
#include "core/log.h"
#include "state/node-state.h"
#include "labels/labels.h"

int cmd_labels(struct config *cfg, const struct config_command *cmd)
{
    if (cmd->n_args) {
        _cleanup_free_ char *m = config_unknown_argument(
            "labels", cmd->args[0], NULL, "labels takes only the plugin's flags");
        log_error("%s", m);
        return GDP_EXIT_FAILURE;
    }
    struct error err = { 0 };
    /* borrowed: main frees it */
    struct node_state node = { .cfg = cfg };
    struct node_state_options opt = {
        .tolerate_nvml_failure = !cfg->fail_on_init_error,
        .host_facts = true,
        .labels_only = true,
    };
    _cleanup_labels_ struct labels *labels = NULL;
    int rc = GDP_EXIT_FAILURE;
    if (node_state_build(&node, &opt, &err) < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
        goto out;
    }
    struct labels_input in = {
        .cfg = cfg,
        .inv = &node.inv,
        .nvml_missing = !node.nvml_open,
        .timestamp = cfg->gfd_no_timestamp ? 0 : (uint64_t)time(NULL),
    };
    if (labels_derive(&in, &labels, &err) < 0) {
        log_error("labelling the node: %s", err.msg);
        goto out;
    }
    bool to_file = cfg->gfd_output_file_given || !cfg->use_node_feature_api;
    if (labels_write_feature_file(labels, to_file ? cfg->gfd_output_file : NULL, &err) < 0) {
        log_error("%s", err.msg);
        goto out;
    }
    rc = GDP_EXIT_OK;
out:
    node.cfg = NULL;
    node_state_clear(&node);
    return rc;
}
