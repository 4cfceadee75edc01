/* The plugin manager: owns the node state (config, NVML session, inventory, resources,
 * topology model, health monitor) and one served + registered plugin per resource.
 *
 * State changes are transactions: a reload builds the complete new state first and
 * only then replaces the running one; if building fails the old state keeps serving.
 * A kubelet restart keeps the state (and device health) and only rebinds the sockets
 * the kubelet deleted and registers again. Loop-thread only. */
#pragma once

#include "config/config.h"
#include "core/error.h"

struct loop;
struct manager;

struct manager *manager_new(struct loop *l);
/* Build the state from cfg (ownership of cfg passes to the manager on success), serve
 * and register. With fail_on_init_error=false an NVML failure is logged and the plugin
 * keeps running with no resources. Returns 0 or -errno (err set; cfg still the
 * caller's). */
int manager_start(struct manager *m, struct config *cfg, struct error *err);
/* Same as start, replacing the running state only if the new one builds. */
int manager_reload(struct manager *m, struct config *cfg, struct error *err);
/* The kubelet socket was created again: rebind every plugin socket, re-register. */
void manager_kubelet_restarted(struct manager *m);
void manager_free(struct manager *m);

/* The directory of the plugin sockets: beside the kubelet's socket, or, with
 * registration off (empty --kubelet-socket), where the reference always puts them.
 * Returns malloc'd. `list` uses it to find running plugins. */
char *manager_socket_dir(const struct config *cfg);

/* Testing/bench hooks. */
unsigned manager_registrations(const struct manager *m);
