/* The daemon behind `serve`: owns the served state (the node state of node-state.h, the
 * health monitor) and one served + registered plugin per resource.
 *
 * State changes are transactions: a reload builds the complete new state first and
 * only then replaces the running one; if building fails the old state keeps serving.
 * A kubelet restart keeps the state (and device health) and only rebinds the sockets
 * the kubelet deleted and registers again. Loop-thread only. */
#pragma once

#include "config/config.h"
#include "core/error.h"

struct loop;
struct daemon;
struct cluster;

struct daemon *daemon_new(struct loop *l);
/* Build the state from cfg (ownership of cfg passes to the daemon on success), serve
 * and register. With fail_on_init_error=false an NVML failure is logged and the plugin
 * keeps running with no resources. Returns 0 or -errno (err set; cfg still the
 * caller's). */
int daemon_start(struct daemon *m, struct config *cfg, struct error *err);
/* Same as start, replacing the running state only if the new one builds. */
int daemon_reload(struct daemon *m, struct config *cfg, struct error *err);
/* The kubelet socket was created again: rebind every plugin socket, re-register. */
void daemon_kubelet_restarted(struct daemon *m);
void daemon_free(struct daemon *m);
/* Hand every later state's labels and every health transition to c (not owned; it must
 * outlive the daemon or be unset with NULL). Set before daemon_start. */
void daemon_set_cluster(struct daemon *m, struct cluster *c);

/* Testing/bench hooks. */
unsigned daemon_registrations(const struct daemon *m);
