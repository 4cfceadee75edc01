/* DRA in the daemon: the kubelet-facing DRA service, the claim engine and the
 * ResourceSlice publisher of src/dra/, fed from the daemon's served state (inventory,
 * device set, health). Started once, with the first state of a --dra config; every
 * later state (a reload) retargets it, as the health monitor is retargeted, so prepared
 * claims, the sockets and the kubelet's health streams survive reloads. Loop-thread
 * only. */
#pragma once
#include "core/error.h"
#include "state/node-state.h"

struct loop;
struct kube;
struct health_monitor;
struct daemon_dra;
struct daemon_dra_status;
struct daemon_dra_metrics;

/* The settings DRA cannot start without (the node name), checked before anything is
 * made. Returns 0 or -EINVAL with err set. */
int daemon_dra_check(const struct config *cfg, struct error *err);
/* Needs the node name (the pool) and an API client (k; NULL: none could be made, which
 * is an error here: DRA without the API server can prepare nothing). cfg is read for
 * the directories and the node name (copied). metrics: the series the kubelet's calls
 * update (daemon_metrics_dra; copied; NULL: none). Returns 0 or -errno with err set. */
int daemon_dra_start(struct loop *l, const struct config *cfg, struct kube *k,
                     const struct daemon_dra_metrics *metrics, struct daemon_dra **out,
                     struct error *err);
/* Whether a claim recorded by DRA holds gpu (a node_state_options.dra_holds). */
bool daemon_dra_holds(void *d, const struct inv_gpu *gpu);
/* fn(userdata) is called from the loop after claims were unprepared (or a prepare undone):
 * a GPU kept for DRA by them may move to the device plugin now. */
void daemon_dra_on_released(struct daemon_dra *d, void (*fn)(void *userdata), void *userdata);
/* What /readyz and the scrape-time metrics read: registration, the slices, the claims. */
void daemon_dra_status(const struct daemon_dra *d, struct daemon_dra_status *out);
/* Serve s from now on (borrowed until the next update or free; the old state may be
 * freed right after this returns). h may be NULL (health checks unavailable). */
void daemon_dra_update(struct daemon_dra *d, const struct node_state *s,
                       struct health_monitor *h);
/* Some device's health changed: the health streams and the slices follow. */
void daemon_dra_health_changed(struct daemon_dra *d);
/* The kubelet restarted: bind again the sockets it removed. */
void daemon_dra_kubelet_restarted(struct daemon_dra *d);
/* Stops serving (pending calls cancelled); the slices and the checkpoint stay. NULL ok. */
void daemon_dra_free(struct daemon_dra *d);
