/* The metrics and probes of `serve` (--metrics-address; docs/metrics.md): the registry
 * with every family the plugin exports, the series each instrumented place updates, and
 * the HTTP listener answering /metrics, /healthz and /readyz from the loop.
 *
 * With metrics off there is no struct daemon_metrics: every function here takes NULL and
 * hands out NULL series, which the updates ignore. Loop-thread only. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kubelet/dp_service.h"

struct daemon_metrics;
struct error;
struct loop;
struct metrics_family;
struct metrics_series;
struct reg;

/* DRA as daemon_visit() reports it (daemon-dra.c fills it; strings borrowed for the
 * visit). */
struct daemon_dra_status {
    const char *driver;          /* gpu.nvidia.com */
    const char *registrar_path;  /* the registration socket the kubelet finds */
    bool registered;             /* the kubelet's last NotifyRegistrationStatus said so */
    bool slices_converged;       /* the API server holds the slices of the devices now */
    bool slices_restoring;       /* ... not now: someone else deleted or changed one, and
                                  * its restore is under way or waits for its turn */
    const char *slices_error;    /* why the last slice request failed; NULL: none */
    unsigned slice_writes;       /* slice creates, updates and deletes sent */
    unsigned slice_write_failures;
    size_t claims_prepared;      /* claims in the checkpoint */
};

/* What daemon_visit() reports to the collectors and /readyz. */
struct daemon_visitor {
    /* serving: its socket is up; registering: a registration exists (kubelet socket
     * set); registered: the kubelet accepted it. */
    void (*resource)(void *userdata, const char *resource, bool serving, bool registering,
                     bool registered, unsigned connections);
    void (*device)(void *userdata, const char *resource, const char *device,
                   const char *gpu_uuid, bool healthy, uint64_t last_xid,
                   const char *xid_class);
    /* Only with DRA on (--dra, gpu-kubelet-plugin); once per visit. */
    void (*dra)(void *userdata, const struct daemon_dra_status *st);
};

/* How the collectors and /readyz read the served state: the daemon hands in its visit
 * function (daemon_visit) and itself as source, so that the arrow points one way, from
 * the daemon to its metrics. */
typedef void (*daemon_metrics_visit_fn)(const void *source, const struct daemon_visitor *v,
                                        void *userdata);

/* Make the registry and listen on address. Returns 0 or -errno with err naming the flag
 * and the address. */
int daemon_metrics_new(struct loop *l, daemon_metrics_visit_fn visit, const void *source,
                       const char *address, struct daemon_metrics **out, struct error *err);
void daemon_metrics_free(struct daemon_metrics *dm);
/* The port the listener bound (":0" picks one). */
unsigned daemon_metrics_port(const struct daemon_metrics *dm);

/* The series of one resource's RPCs (all NULL when dm is NULL). */
struct dp_metrics daemon_metrics_resource(struct daemon_metrics *dm, const char *resource);
/* The series DRA's calls update (daemon-dra.c, told by the service as each call ends);
 * all NULL while metrics are off, which makes every update a no-op. Made once, when DRA
 * starts, so that counting a call is a few adds: no lookup, no allocation. The counters
 * count claims, the histograms calls (docs/metrics.md). */
struct daemon_dra_metrics {
    struct metrics_series *prepare, *prepare_errors, *prepare_seconds;
    struct metrics_series *unprepare, *unprepare_errors, *unprepare_seconds;
};
struct daemon_dra_metrics daemon_metrics_dra(struct daemon_metrics *dm);
/* Count r's Register outcomes under resource. */
void daemon_metrics_registration(struct daemon_metrics *dm, const char *resource,
                                 struct reg *r);
/* The Xid counter family for the health monitor (NULL when dm is NULL). */
struct metrics_family *daemon_metrics_xids(struct daemon_metrics *dm);

enum daemon_reload_outcome {
    DAEMON_RELOAD_APPLIED,   /* something changed and the new state serves */
    DAEMON_RELOAD_UNCHANGED, /* same config, same resources and device IDs */
    DAEMON_RELOAD_REJECTED,  /* bad config or state: the running one keeps serving */
};
void daemon_metrics_reload(struct daemon_metrics *dm, enum daemon_reload_outcome o);
