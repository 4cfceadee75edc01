/* The metrics and probes of `serve`: which families exist and what they mean
 * (docs/metrics.md is the user-facing list), the collectors that read gauges from the
 * daemon at scrape time, and the three HTTP handlers. The contract is in
 * daemon-metrics.h. */
#include "daemon/daemon-metrics.h"

#include <stdarg.h>
#include <stdio.h>

#include "core/error.h"
#include "grpc/grpc.h"
#include "http/http.h"
#include "kubelet/registration.h"
#include "metrics/metrics.h"
#include "version.h"

#define P "gpu_device_plugin_"
/* Advertised devices, replicas included, of every resource: far above any real node. */
#define DEVICE_SERIES_MAX 65536u

/* Allocate takes ~20 us of CPU, GetPreferredAllocation from a few us to a few ms on
 * large NVLink topologies: buckets from 5 us to 100 ms. */
static const double latency_bounds[] = { 5e-6,   1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                         1e-3, 2.5e-3, 5e-3,   1e-2, 2.5e-2, 0.1 };
/* A DRA call GETs its claims from the API server and writes and syncs a spec file per
 * claim (milliseconds); a sharing config runs nvidia-smi, killed at 10 s: buckets from
 * 1 ms to 30 s. */
static const double dra_bounds[] = { 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
                                     0.25, 0.5,    1,    2.5,  5,      10,   30 };

struct daemon_metrics {
    daemon_metrics_visit_fn visit;
    const void *source;
    struct metrics *reg;
    struct http_server *http;
    struct metrics_family *allocate, *allocate_errors, *allocate_seconds;
    struct metrics_family *preferred, *preferred_errors, *preferred_seconds;
    struct metrics_family *registrations, *reloads, *xids;
    /* set at scrape time from the daemon (collect_state) */
    struct metrics_family *registered, *connections, *healthy, *last_xid;
    struct metrics_series *reload[3];
    /* DRA: counted by the service (daemon_metrics_dra); read at scrape time (collect_dra) */
    struct metrics_family *dra_prepare, *dra_prepare_errors, *dra_prepare_seconds;
    struct metrics_family *dra_unprepare, *dra_unprepare_errors, *dra_unprepare_seconds;
    struct metrics_family *dra_slice_writes, *dra_slice_failures, *dra_prepared;
};

static const char *const L_RESOURCE[] = { "resource", NULL };

static struct metrics_family *family(struct daemon_metrics *dm, enum metrics_type t,
                                     const char *name, const char *help,
                                     const char *const *labels)
{
    const double *b = t == METRICS_HISTOGRAM ? latency_bounds : NULL;
    size_t n = t == METRICS_HISTOGRAM ? ELEMENTSOF(latency_bounds) : 0;
    return metrics_family_new(dm->reg, t, name, help, labels, b, n);
}

static void visit_resource(void *userdata, const char *resource, bool serving,
                           bool registering, bool registered, unsigned connections)
{
    struct daemon_metrics *dm = userdata;
    const char *v[] = { resource };
    metrics_set(metrics_series(dm->registered, v), registered);
    metrics_set(metrics_series(dm->connections, v), connections);
}

static void visit_device(void *userdata, const char *resource, const char *device,
                         const char *gpu_uuid, bool healthy, uint64_t last_xid,
                         const char *xid_class)
{
    struct daemon_metrics *dm = userdata;
    const char *v[] = { resource, device, gpu_uuid, xid_class };
    metrics_set(metrics_series(dm->healthy, v), healthy);
    metrics_set(metrics_series(dm->last_xid, v), (double)last_xid);
}

/* Runs before `registered`, the first of the four families it fills: resources and
 * devices that a reload removed disappear from them. */
static void collect_state(struct metrics_family *f, void *userdata)
{
    struct daemon_metrics *dm = userdata;
    static const struct daemon_visitor v = { .resource = visit_resource,
                                             .device = visit_device };
    metrics_family_clear(dm->registered);
    metrics_family_clear(dm->connections);
    metrics_family_clear(dm->healthy);
    metrics_family_clear(dm->last_xid);
    dm->visit(dm->source, &v, dm);
}

static void visit_dra(void *userdata, const struct daemon_dra_status *st)
{
    struct daemon_metrics *dm = userdata;
    metrics_set(metrics_series(dm->dra_slice_writes, NULL), st->slice_writes);
    metrics_set(metrics_series(dm->dra_slice_failures, NULL), st->slice_write_failures);
    metrics_set(metrics_series(dm->dra_prepared, NULL), (double)st->claims_prepared);
}

/* Runs before the first of the three families it fills; with DRA off they stay empty. */
static void collect_dra(struct metrics_family *f, void *userdata)
{
    struct daemon_metrics *dm = userdata;
    static const struct daemon_visitor v = { .dra = visit_dra };
    dm->visit(dm->source, &v, dm);
}

static void collect_buffered(struct metrics_family *f, void *userdata)
{
    metrics_set(metrics_series(f, NULL), (double)grpc_server_buffered_bytes());
}

/* DRA's (docs/metrics.md): the same prefix as the rest, "dra_" after it; no labels, as
 * the process serves one driver. */
static void make_dra_families(struct daemon_metrics *dm)
{
    struct metrics *r = dm->reg;
    dm->dra_prepare = family(dm, METRICS_COUNTER, P "dra_prepare_total",
                             "Claims of NodePrepareResources calls answered or given up on "
                             "by the kubelet (DRA).", NULL);
    dm->dra_prepare_errors = family(dm, METRICS_COUNTER, P "dra_prepare_errors_total",
                                    "Claims of NodePrepareResources answered with an error, "
                                    "or whose call the kubelet gave up on.", NULL);
    dm->dra_prepare_seconds = metrics_family_new(
        r, METRICS_HISTOGRAM, P "dra_prepare_duration_seconds",
        "Time from a NodePrepareResources call's arrival to its answer (calls with claims).",
        NULL, dra_bounds, ELEMENTSOF(dra_bounds));
    dm->dra_unprepare = family(dm, METRICS_COUNTER, P "dra_unprepare_total",
                               "Claims of NodeUnprepareResources calls answered or given up on "
                               "by the kubelet (DRA).", NULL);
    dm->dra_unprepare_errors = family(dm, METRICS_COUNTER, P "dra_unprepare_errors_total",
                                      "Claims of NodeUnprepareResources answered with an "
                                      "error, or whose call the kubelet gave up on.", NULL);
    dm->dra_unprepare_seconds = metrics_family_new(
        r, METRICS_HISTOGRAM, P "dra_unprepare_duration_seconds",
        "Time from a NodeUnprepareResources call's arrival to its answer (calls with claims).",
        NULL, dra_bounds, ELEMENTSOF(dra_bounds));
    dm->dra_slice_writes = family(dm, METRICS_COUNTER, P "dra_slice_writes_total",
                                  "ResourceSlice creates, updates and deletes sent to the API "
                                  "server.", NULL);
    metrics_family_set_collect(dm->dra_slice_writes, collect_dra, dm);
    dm->dra_slice_failures = family(dm, METRICS_COUNTER, P "dra_slice_write_failures_total",
                                    "ResourceSlice writes the API server refused or never "
                                    "answered (each retried with backoff).", NULL);
    dm->dra_prepared = family(dm, METRICS_GAUGE, P "dra_claims_prepared",
                              "Claims prepared on this node now (its DRA checkpoint).", NULL);
}

static void make_families(struct daemon_metrics *dm)
{
    static const char *const build[] = { "version", "revision", NULL };
    static const char *const reg[] = { "resource", "outcome", NULL };
    static const char *const outcome[] = { "outcome", NULL };
    static const char *const code[] = { "code", NULL };
    static const char *const dev[] = { "resource", "device", "gpu_uuid", NULL };
    static const char *const xid[] = { "resource", "device", "gpu_uuid", "class", NULL };

    struct metrics_family *f = family(dm, METRICS_GAUGE, P "build_info",
                                      "Always 1; the labels say which build runs.", build);
    metrics_set(metrics_series(f, (const char *const[]){ GDP_VERSION, GDP_REVISION }), 1);
    dm->allocate = family(dm, METRICS_COUNTER, P "allocate_requests_total",
                          "Allocate calls answered, by resource.", L_RESOURCE);
    dm->allocate_errors = family(dm, METRICS_COUNTER, P "allocate_errors_total",
                                 "Allocate calls answered with an error.", L_RESOURCE);
    dm->allocate_seconds =
        family(dm, METRICS_HISTOGRAM, P "allocate_duration_seconds",
               "Time the plugin spent on one Allocate call (decode, decide, encode).",
               L_RESOURCE);
    dm->preferred = family(dm, METRICS_COUNTER, P "preferred_allocation_requests_total",
                           "GetPreferredAllocation calls answered, by resource.", L_RESOURCE);
    dm->preferred_errors =
        family(dm, METRICS_COUNTER, P "preferred_allocation_errors_total",
               "GetPreferredAllocation calls answered with an error.", L_RESOURCE);
    dm->preferred_seconds = family(
        dm, METRICS_HISTOGRAM, P "preferred_allocation_duration_seconds",
        "Time the plugin spent on one GetPreferredAllocation call (decode, place, encode).",
        L_RESOURCE);
    dm->registrations = family(dm, METRICS_COUNTER, P "registrations_total",
                               "Register calls to the kubelet by outcome (ok, failed; every "
                               "retry counts).", reg);
    dm->reloads = family(dm, METRICS_COUNTER, P "reloads_total",
                         "Reloads (SIGHUP) by outcome: applied, unchanged, rejected.", outcome);
    static const char *const outcomes[] = { "applied", "unchanged", "rejected" };
    for (size_t i = 0; i < ELEMENTSOF(outcomes); i++)
        dm->reload[i] = metrics_series(dm->reloads, (const char *const[]){ outcomes[i] });
    dm->xids = family(dm, METRICS_COUNTER, P "xid_events_total",
                      "NVML Xid events handed to the plugin, by Xid code (ignored ones too).",
                      code);
    dm->registered = family(dm, METRICS_GAUGE, P "registered",
                            "1 when the kubelet accepted the resource's registration.",
                            L_RESOURCE);
    metrics_family_set_collect(dm->registered, collect_state, dm);
    dm->connections = family(dm, METRICS_GAUGE, P "grpc_connections",
                             "Open gRPC connections on the resource's plugin socket.",
                             L_RESOURCE);
    dm->healthy = family(dm, METRICS_GAUGE, P "device_healthy",
                         "1 when the device is advertised Healthy, 0 when Unhealthy.", dev);
    dm->last_xid = family(dm, METRICS_GAUGE, P "device_last_xid",
                          "The last Xid that made the device Unhealthy (0: none), with its "
                          "class under the running health config.", xid);
    /* one series per advertised device (replicas included): the config bounds them */
    metrics_family_set_limit(dm->healthy, DEVICE_SERIES_MAX);
    metrics_family_set_limit(dm->last_xid, DEVICE_SERIES_MAX);
    f = family(dm, METRICS_GAUGE, P "grpc_buffered_bytes",
               "Bytes the gRPC servers hold for peers now (request bodies, unsent replies).",
               NULL);
    metrics_family_set_collect(f, collect_buffered, dm);
    make_dra_families(dm);
}

/* ------------------------------------------------------------------ HTTP */

static void on_metrics(void *userdata, struct http_response *r)
{
    struct daemon_metrics *dm = userdata;
    r->body = metrics_render(dm->reg, &r->len);
    r->content_type = METRICS_CONTENT_TYPE;
}

/* Answered from the loop: that it answers at all is the proof the loop is alive. */
static void on_healthz(void *userdata, struct http_response *r)
{
    r->body = xstrdup("ok\n");
    r->len = 3;
}

/* Ready: every device-plugin resource serves and is registered, and with DRA on, the
 * driver is registered and its slices converged; either side may have nothing (a node
 * all DRA, or DRA off), not both. why says what is not ready yet, a line per side. */
struct readiness {
    unsigned resources;
    bool dp_waiting; /* a device-plugin resource is not ready (the first is named) */
    bool dra;
    char why[1024];
};

static void why_add(struct readiness *rd, const char *fmt, ...) _printf_(2, 3);
static void why_add(struct readiness *rd, const char *fmt, ...)
{
    size_t used = strlen(rd->why);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rd->why + used, sizeof(rd->why) - used, fmt, ap);
    va_end(ap);
}

static void ready_resource(void *userdata, const char *resource, bool serving,
                           bool registering, bool registered, unsigned connections)
{
    struct readiness *rd = userdata;
    rd->resources++;
    if (rd->dp_waiting)
        return;
    rd->dp_waiting = !serving || (registering && !registered);
    if (!serving)
        why_add(rd, "'%s' is not serving yet\n", resource);
    else if (registering && !registered)
        why_add(rd, "'%s' is not registered with the kubelet\n", resource);
}

static void ready_dra(void *userdata, const struct daemon_dra_status *st)
{
    struct readiness *rd = userdata;
    rd->dra = true;
    if (!st->registered)
        why_add(rd, "DRA driver %s is not registered with the kubelet yet (it registers "
                "through %s)\n", st->driver, st->registrar_path);
    if (!st->slices_converged && st->slices_restoring)
        why_add(rd, "a ResourceSlice of DRA driver %s was deleted or changed by someone else "
                "and is not restored yet (restores are paced)\n", st->driver);
    else if (!st->slices_converged && st->slices_error)
        why_add(rd, "the ResourceSlices of DRA driver %s are not published yet: %s\n",
                st->driver, st->slices_error);
    else if (!st->slices_converged)
        why_add(rd, "the ResourceSlices of DRA driver %s are not published yet\n", st->driver);
}

static void on_readyz(void *userdata, struct http_response *r)
{
    struct daemon_metrics *dm = userdata;
    static const struct daemon_visitor v = { .resource = ready_resource, .dra = ready_dra };
    struct readiness rd = { 0 };
    dm->visit(dm->source, &v, &rd);
    if (rd.resources == 0 && !rd.dra)
        why_add(&rd, "no resources to advertise\n");
    r->status = rd.why[0] ? 503 : 200;
    r->body = xstrdup(rd.why[0] ? rd.why : "ok\n");
    r->len = strlen(r->body);
}

static const struct http_route routes[] = {
    { "/metrics", on_metrics },
    { "/healthz", on_healthz },
    { "/readyz", on_readyz },
};

int daemon_metrics_new(struct loop *l, daemon_metrics_visit_fn visit, const void *source,
                       const char *address, struct daemon_metrics **out, struct error *err)
{
    struct daemon_metrics *dm = xcalloc(1, sizeof(*dm));
    dm->visit = visit;
    dm->source = source;
    int r = http_server_new(l, address, routes, ELEMENTSOF(routes), dm, NULL, &dm->http, err);
    if (r < 0) {
        free(dm);
        return error_prefix(err, "--metrics-address \"%s\"", address);
    }
    dm->reg = metrics_new();
    make_families(dm);
    *out = dm;
    return 0;
}

void daemon_metrics_free(struct daemon_metrics *dm)
{
    if (!dm)
        return;
    http_server_free(dm->http);
    metrics_free(dm->reg);
    free(dm);
}

unsigned daemon_metrics_port(const struct daemon_metrics *dm) { return http_server_port(dm->http); }

struct dp_metrics daemon_metrics_resource(struct daemon_metrics *dm, const char *resource)
{
    if (!dm)
        return (struct dp_metrics){ 0 };
    const char *v[] = { resource };
    return (struct dp_metrics){
        .allocate = metrics_series(dm->allocate, v),
        .allocate_errors = metrics_series(dm->allocate_errors, v),
        .allocate_seconds = metrics_series(dm->allocate_seconds, v),
        .preferred = metrics_series(dm->preferred, v),
        .preferred_errors = metrics_series(dm->preferred_errors, v),
        .preferred_seconds = metrics_series(dm->preferred_seconds, v),
    };
}

struct daemon_dra_metrics daemon_metrics_dra(struct daemon_metrics *dm)
{
    if (!dm)
        return (struct daemon_dra_metrics){ 0 };
    return (struct daemon_dra_metrics){
        .prepare = metrics_series(dm->dra_prepare, NULL),
        .prepare_errors = metrics_series(dm->dra_prepare_errors, NULL),
        .prepare_seconds = metrics_series(dm->dra_prepare_seconds, NULL),
        .unprepare = metrics_series(dm->dra_unprepare, NULL),
        .unprepare_errors = metrics_series(dm->dra_unprepare_errors, NULL),
        .unprepare_seconds = metrics_series(dm->dra_unprepare_seconds, NULL),
    };
}

void daemon_metrics_registration(struct daemon_metrics *dm, const char *resource,
                                 struct reg *r)
{
    if (!dm || !r)
        return;
    reg_set_metrics(r, metrics_series(dm->registrations, (const char *const[]){ resource, "ok" }),
                    metrics_series(dm->registrations,
                                   (const char *const[]){ resource, "failed" }));
}

struct metrics_family *daemon_metrics_xids(struct daemon_metrics *dm)
{
    return dm ? dm->xids : NULL;
}

void daemon_metrics_reload(struct daemon_metrics *dm, enum daemon_reload_outcome o)
{
    if (dm)
        metrics_inc(dm->reload[o]);
}
