/* The node state: everything derived from one configuration, built whole before anything
 * is served: the NVML session, the inventory, the resources each socket advertises, the
 * topology model and the health configuration. `serve` (daemon.c) and `list` (cmd_list.c)
 * both build it here, so for the same node and config they see exactly the same
 * resources and device IDs. */
#pragma once

#include <stdbool.h>

#include "config/config.h"
#include "core/error.h"
#include "node/inventory.h"
#include "policy/health.h"
#include "policy/resources.h"
#include "policy/topo.h"

struct node_state {
    struct config *cfg;                 /* owned; IMEX channels narrowed by the build */
    bool nvml_open;
    struct inventory inv;
    struct resource_set rs;
    struct topo_model topo;
    const struct health_config *health_cfg; /* in cfg */
    /* Per GPU of inv (NULL: none): served by DRA although --dra-device-plugin-gpus names
     * it for the device plugin, because a prepared DRA claim holds it (options.dra_holds).
     * The device plugin never serves a GPU a claim holds; it moves at the next build after
     * its last claim is unprepared. */
    bool *dra_kept;
};

struct node_state_options {
    /* The inventory being replaced (a reload): a GPU of it that is lost now stays in. */
    const struct inventory *previous;
    /* --fail-on-init-error=false: an NVML that cannot be opened leaves an empty node
     * (logged, ending in "continuing without resources") instead of failing the build. */
    bool tolerate_nvml_failure;
    /* What only serving needs: the GPU pair links and the topology model (placement), and
     * the CDI specs when a CDI device-list strategy is on. `list` shows the resources
     * without them (the same resources: they come from the inventory alone). */
    bool serve;
    /* Also read the host facts the GPU node labels need (node/host.c: machine type, vGPU
     * capability), even when NVML cannot be opened: serve with --gfd, and `labels`. */
    bool host_facts;
    /* The `labels` command: stop after discovery. GFD labels a node the plugin refuses
     * to serve (mig-strategy=single with mixed MIG modes is labelled MIG-INVALID), so
     * the resources, which would refuse it, are not built. */
    bool labels_only;
    /* With DRA on: whether a prepared (or being prepared) DRA claim holds gpu. Such a GPU
     * stays with DRA whatever the split says (NULL: the split as configured, `list`). */
    bool (*dra_holds)(void *userdata, const struct inv_gpu *gpu);
    void *dra_holds_userdata;
};

/* Fill s (zeroed, with s->cfg set) from s->cfg. Returns 0 or -errno with err naming what
 * failed; s must be cleared with node_state_clear() either way. */
int node_state_build(struct node_state *s, const struct node_state_options *opt,
                     struct error *err);
/* Whether DRA serves GPU g of s->inv: the split of the config (dra-split.h), or a claim
 * holds it (dra_kept). */
bool node_state_dra_serves(const struct node_state *s, size_t g);
/* Free everything s holds, its config included, and close its NVML reference. */
void node_state_clear(struct node_state *s);

/* The directory of the plugin sockets: beside the kubelet's socket, or, with
 * registration off (empty --kubelet-socket), where the reference always puts them.
 * Returns malloc'd. */
char *node_state_socket_dir(const struct config *cfg);
