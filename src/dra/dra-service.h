/* The kubelet-facing side of the DRA driver: the DRA socket
 * (<plugins dir>/<driver>/dra.sock) serving DRAPlugin v1 and v1beta1
 * (NodePrepareResources, NodeUnprepareResources) and the DRAResourceHealth v1alpha1
 * stream, plus the registration socket (dra-registrar.h) that points the kubelet at it.
 *
 * Prepare and Unprepare are asynchronous: the service decodes and checks the request,
 * hands the claims to ops (which may take its time, e.g. GET the claims from the API
 * server) and answers when the owner calls dra_call_done(). It never sees protobuf
 * types leave this file, nor the owner's JSON: dra-types.h is the whole interface.
 *
 * Health: while the kubelet watches (a NodeWatchResources stream is open), the complete
 * list from ops->health is sent at open, on dra_service_health_changed() when it
 * differs from the last one sent, and again every health_resend_ms so the kubelet's 30 s
 * staleness rule never turns a device Unknown; with no stream open there is no timer.
 *
 * Sockets: dra_service_kubelet_restarted() and an inotify watch on both directories
 * bind again any socket whose file is gone or replaced, within milliseconds; a new
 * registration socket is what makes the kubelet register again (GetInfo).
 *
 * Loop-thread only. ops run on the loop (prepare/unprepare inside the gRPC layer's
 * callbacks): from inside an op, dra_call_done and dra_service_health_changed are fine,
 * dra_service_kubelet_restarted and dra_service_free are not (they free the server the
 * op runs in). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "dra/dra-types.h"

struct loop;
struct dra_service;
/* One pending Node(Un)PrepareResources call. */
struct dra_call;

/* The kubelet drops a device to Unknown when its last report is older than 30 s. */
#define DRA_HEALTH_STALE_MS 30000u
/* The default re-send period while a health stream is open: half the kubelet's
 * staleness time, so one late wakeup still leaves margin. */
#define DRA_HEALTH_RESEND_MS 15000u
/* The bounds of a call are the claim engine's, defined once in dra-types.h: more than
 * DRA_CLAIMS_MAX_PER_CALL claims refuses the call (RESOURCE_EXHAUSTED); a claim whose
 * namespace or name passes DRA_CLAIM_NAME_MAX gets its own error; a UID past
 * DRA_CLAIM_UID_MAX refuses the call (INVALID_ARGUMENT), as it cannot key an answer. */

/* A claim answered with an error, or a call the kubelet gave up on, is one warning per
 * claim naming its namespace/name, UID and cause; at most this many per window, the next
 * line let through counts the ones left out (core/ratelimit.h): a pod whose claims keep
 * failing, or a peer sending hundreds of bad claims, cannot flood the log. */
#define DRA_CLAIM_LOG_INTERVAL_MS 60000u
#define DRA_CLAIM_LOG_BURST 20u

struct dra_service_options {
    const char *driver_name;    /* e.g. DRA_DRIVER_NAME */
    const char *registrar_dir;  /* the kubelet's plugins_registry */
    const char *plugins_dir;    /* the kubelet's plugins dir: <dir>/<driver>/dra.sock */
    unsigned health_resend_ms;  /* 0 = DRA_HEALTH_RESEND_MS (tests shorten it) */
};

struct dra_health_entry {
    const char *pool, *device;  /* owned by the snapshot's maker; freed with it */
    int health;                 /* 0 unknown, 1 healthy, 2 unhealthy (the wire's enum) */
    int64_t last_updated;       /* Unix seconds of the last check */
};

struct dra_service_ops {
    /* A call with n >= 1 claims (UIDs unique and non-empty; namespace and name within
     * bounds). Answer with dra_call_done(c, ...) now or later, unless call_cancelled
     * comes first. The claims are borrowed until then. */
    void (*prepare)(void *ud, struct dra_call *c, const struct dra_claim_ref *claims, size_t n);
    void (*unprepare)(void *ud, struct dra_call *c, const struct dra_claim_ref *claims, size_t n);
    /* The kubelet gave up on c (its deadline, the connection closed, the service freed):
     * drop c, never call dra_call_done on it. Its claims are invalid after this returns.
     * May answer other calls; must not free the service. */
    void (*call_cancelled)(void *ud, struct dra_call *c);
    /* The current health of every device: *out malloc'd (free() by the service, which
     * calls health_free first, if set, for what the entries point to). Returns the
     * count. NULL: no health is reported (the stream is still served, empty). */
    size_t (*health)(void *ud, struct dra_health_entry **out);
    void (*health_free)(void *ud, struct dra_health_entry *h, size_t n);
    /* A call with n >= 1 claims ended: answered (failed of them with an error) or given up
     * on by the kubelet (failed == n), elapsed_us after its request was decoded. For the
     * owner's metrics (the service knows none): called on the loop once per call, as it
     * ends; on the Prepare path, so it should not allocate. NULL: not told. */
    void (*call_ended)(void *ud, bool prepare, size_t n, size_t failed, uint64_t elapsed_us);
};

/* Create both sockets (directories made as needed: the driver's 0750, the registrar's
 * 0755) and serve. ops and ud must outlive the service; options' strings are copied.
 * Returns 0 or -errno with err set. */
int dra_service_start(struct loop *l, const struct dra_service_options *opts,
                      const struct dra_service_ops *ops, void *ud, struct dra_service **out,
                      struct error *err);
/* One pointer of the owner's per call (e.g. its claim engine's call, to cancel it from
 * call_cancelled), NULL until set. */
void dra_call_set_context(struct dra_call *c, void *context);
void *dra_call_context(const struct dra_call *c);
/* The kubelet's deadline for c (its grpc-timeout, or the server's own bound on an answer
 * when sooner), in loop_now_ms() time: past it the kubelet has given up and
 * call_cancelled comes. */
uint64_t dra_call_deadline_ms(const struct dra_call *c);
/* Answer c: the results are copied into the reply (the caller keeps and frees its own).
 * A claim of the request without a result gets an error entry (the kubelet would
 * otherwise count it as skipped); a result for a UID not asked for is left out. c is
 * invalid afterwards. */
void dra_call_done(struct dra_call *c, const struct dra_claim_result *r, size_t n);
/* Health may have changed: send the list on every open stream if it differs from the
 * last one sent. Without a stream, nothing (ops->health is not called). */
void dra_service_health_changed(struct dra_service *s);
/* The kubelet restarted (or may have wiped its directories): bind again any socket
 * whose file is gone or is not ours any more. Returns the number rebound (>= 0) or
 * -errno with err set. */
int dra_service_kubelet_restarted(struct dra_service *s, struct error *err);
/* Close both sockets: pending calls are cancelled (call_cancelled for each), health
 * streams end. NULL ok. */
void dra_service_free(struct dra_service *s);

/* For the daemon's status and for tests. */
bool dra_service_registered(const struct dra_service *s);
unsigned dra_service_health_streams(const struct dra_service *s);
unsigned dra_service_health_resend_ms(const struct dra_service *s);
const char *dra_service_socket_path(const struct dra_service *s);
const char *dra_service_registrar_path(const struct dra_service *s);
