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
#include "daemon/daemon-metrics.h"

struct loop;
struct daemon;
struct cluster;

struct daemon *daemon_new(struct loop *l);
/* Build the state from cfg (ownership of cfg passes to the daemon on success), serve
 * and register. With fail_on_init_error=false an NVML failure is logged and the plugin
 * keeps running with no resources. Returns 0 or -errno (err set; cfg still the
 * caller's). */
int daemon_start(struct daemon *m, struct config *cfg, struct error *err);
/* Same as start, replacing the running state only if the new one builds. Returns 0, 1
 * when nothing changed (same config, resources and device IDs), or -errno. */
int daemon_reload(struct daemon *m, struct config *cfg, struct error *err);
/* Count a reload's outcome in the metrics (cmd_serve.c knows all three). */
void daemon_count_reload(struct daemon *m, enum daemon_reload_outcome o);
/* Report every served resource and its devices, and DRA when on, as they are now
 * (metrics, /readyz). */
void daemon_visit(const struct daemon *m, const struct daemon_visitor *v, void *userdata);
/* The kubelet socket was created again: rebind every plugin socket, re-register. */
void daemon_kubelet_restarted(struct daemon *m);
void daemon_free(struct daemon *m);
/* Hand every later state's labels and every health transition to c (not owned; it must
 * outlive the daemon or be unset with NULL). Set before daemon_start. */
void daemon_set_cluster(struct daemon *m, struct cluster *c);
