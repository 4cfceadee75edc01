/* The DRA socket: NodePrepareResources / NodeUnprepareResources (v1 and v1beta1, one
 * handler: the messages are identical field by field and byte for byte, so the v1 types
 * decode and encode both), the health stream's method (dra-health-watch.c does the
 * rest), and keeping both sockets bound (dra-service.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "core/ratelimit.h"
#include "dra/dra-health-watch.h"
#include "dra/dra-registrar.h"
#include "dra/dra-request.h"
#include "dra/dra-service.h"
#include "dra_v1.pb-c.h"
#include "grpc/grpc.h"
#include "core/sockwatch.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry
    PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareClaim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device WireDevice;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
    UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareClaim;

enum call_kind { CALL_PREPARE, CALL_UNPREPARE };

struct dra_call {
    struct dra_service *svc;
    struct dra_call *prev, *next;
    struct grpc_pending *pending;
    enum call_kind kind;
    struct dra_request rq;     /* the claims, decoded and checked; ops got rq.refs */
    void *context;             /* the owner's */
    uint64_t started_us;       /* decoded (loop_now_us): the histograms' start */
};

struct dra_service {
    struct loop *loop;
    struct dra_service_ops ops;
    void *ud;
    char *driver, *dir, *path;  /* <plugins>/<driver>, .../dra.sock */
    struct grpc_server *server;
    struct stat sock_st;        /* the socket we bound, to notice a replaced one */
    struct dra_registrar *registrar;
    struct stat reg_st;
    struct dra_call *calls;

    struct dra_health_watch health;

    /* One directory watcher each (sockwatch.h, as the device-plugin side's): a socket
     * removed or replaced, or its directory back after it was gone or not a directory. */
    struct sockwatch *watch_sock, *watch_reg;

    struct ratelimit claim_log; /* the failed-claim lines (dra-service.h) */
    bool stopping;              /* freeing: cancelled calls are not the kubelet's doing */
};

/* ------------------------------------------------------------------ calls */

static void call_free(struct dra_call *c)
{
    struct dra_service *s = c->svc;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    dra_request_clear(&c->rq);
    free(c);
}

static const struct dra_claim_result *find_result(const struct dra_claim_result *r, size_t n,
                                                  const char *uid)
{
    for (size_t i = 0; i < n; i++)
        if (r[i].uid && streq(r[i].uid, uid))
            return &r[i];
    return NULL;
}

#define NO_RESULT "no result from the driver for this claim"

/* What claim i of c is answered with: its error, or "" when it succeeded (the wire's
 * "no error"): the rule of the encoders below, for the accounting. */
static const char *claim_error(const struct dra_call *c, size_t i,
                               const struct dra_claim_result *r, size_t n)
{
    if (c->rq.error[i])
        return c->rq.error[i];
    const struct dra_claim_result *res = find_result(r, n, c->rq.claims[i].uid);
    if (!res)
        return NO_RESULT;
    return res->error ? res->error : "";
}

/* Encode the answer: one entry per claim of the request, pointing into c and r (no
 * copies; pack writes the bytes). */
static uint8_t *encode_prepare(const struct dra_call *c, const struct dra_claim_result *r,
                               size_t n, size_t *len)
{
    _cleanup_free_ PrepareEntry *entries = xcalloc(c->rq.n, sizeof(*entries));
    _cleanup_free_ PrepareEntry **eptr = xcalloc(c->rq.n, sizeof(*eptr));
    _cleanup_free_ PrepareClaim *claims = xcalloc(c->rq.n, sizeof(*claims));
    size_t n_dev = 0;
    for (size_t i = 0; i < n; i++)
        n_dev += r[i].n_devices;
    _cleanup_free_ WireDevice *devs = xcalloc(n_dev ? n_dev : 1, sizeof(*devs));
    _cleanup_free_ WireDevice **dptr = xcalloc(n_dev ? n_dev : 1, sizeof(*dptr));
    size_t used = 0;

    for (size_t i = 0; i < c->rq.n; i++) {
        const char *uid = c->rq.claims[i].uid;
        const struct dra_claim_result *res = c->rq.error[i] ? NULL : find_result(r, n, uid);
        PrepareClaim *pc = &claims[i];
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(pc);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
            &entries[i]);
        entries[i].key = (char *)uid;
        entries[i].value = pc;
        eptr[i] = &entries[i];
        if (c->rq.error[i]) {
            pc->error = c->rq.error[i];
            continue;
        }
        if (!res) {
            pc->error = (char *)NO_RESULT;
            continue;
        }
        if (res->error) {
            pc->error = res->error; /* the kubelet ignores devices then: none sent */
            continue;
        }
        pc->devices = &dptr[used];
        pc->n_devices = res->n_devices;
        for (size_t k = 0; k < res->n_devices; k++, used++) {
            const struct dra_prepared_device *d = &res->devices[k];
            WireDevice *w = &devs[used];
            k8s__io__kubelet__pkg__apis__dra__v1__device__init(w);
            w->request_names = d->request_names;
            w->n_request_names = d->n_request_names;
            w->pool_name = d->pool_name ? d->pool_name : (char *)"";
            w->device_name = d->device_name ? d->device_name : (char *)"";
            w->cdi_device_ids = d->cdi_device_ids;
            w->n_cdi_device_ids = d->n_cdi_device_ids;
            w->share_id = d->share_id; /* NULL or "": not sent (proto3, no presence) */
            dptr[used] = w;
        }
    }
    PrepareResponse resp = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    resp.claims = eptr;
    resp.n_claims = c->rq.n;
    *len = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__get_packed_size(
        &resp);
    uint8_t *buf = xmalloc(*len + 1);
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__pack(&resp, buf);
    return buf;
}

static uint8_t *encode_unprepare(const struct dra_call *c, const struct dra_claim_result *r,
                                 size_t n, size_t *len)
{
    _cleanup_free_ UnprepareEntry *entries = xcalloc(c->rq.n, sizeof(*entries));
    _cleanup_free_ UnprepareEntry **eptr = xcalloc(c->rq.n, sizeof(*eptr));
    _cleanup_free_ UnprepareClaim *claims = xcalloc(c->rq.n, sizeof(*claims));
    for (size_t i = 0; i < c->rq.n; i++) {
        const char *uid = c->rq.claims[i].uid;
        const struct dra_claim_result *res = c->rq.error[i] ? NULL : find_result(r, n, uid);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&claims[i]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
            &entries[i]);
        entries[i].key = (char *)uid;
        entries[i].value = &claims[i];
        eptr[i] = &entries[i];
        claims[i].error = c->rq.error[i] ? c->rq.error[i]
                          : !res      ? (char *)NO_RESULT
                          : res->error ? res->error
                                       : (char *)"";
    }
    UnprepareResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    resp.claims = eptr;
    resp.n_claims = c->rq.n;
    *len = k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__get_packed_size(
        &resp);
    uint8_t *buf = xmalloc(*len + 1);
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__pack(&resp, buf);
    return buf;
}

/* ------------------------------------------------------------------ counting */

/* A namespace or name as the log shows it: a Kubernetes name is printable ASCII of at
 * most DRA_CLAIM_NAME_MAX bytes, but the peer's bytes are not checked for that (a longer
 * one gets its own error): any other byte is '?' (the log must stay valid UTF-8, and the
 * log's own escaping covers control bytes only) and past the bound it is cut with "...". */
static const char *log_name(char *buf, size_t cap, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 4 < cap; i++)
        buf[i] = s[i] > 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (s[i])
        memcpy(buf + i, "...", 3), i += 3;
    buf[i] = '\0';
    return buf;
}

/* One warning per failed claim, rate-limited: the only place a failed claim is logged,
 * whichever layer refused it (the request's checks, the claim engine, no result), so the
 * line is said once per claim and names what the kubelet sent. The UID is printable
 * ASCII already (dra-request.h). */
static void log_failed_claim(struct dra_service *s, const struct dra_call *c,
                             const struct dra_claim_ref *claim, const char *cause)
{
    unsigned left_out = 0;
    if (!ratelimit_below(&s->claim_log, &left_out))
        return;
    char more[48] = "", ns[DRA_CLAIM_NAME_MAX + 4], name[DRA_CLAIM_NAME_MAX + 4];
    if (left_out)
        snprintf(more, sizeof(more), " (%u more not logged)", left_out);
    log_warning("DRA: %s of claim %s/%s (UID %s) failed: %s%s",
                c->kind == CALL_PREPARE ? "NodePrepareResources" : "NodeUnprepareResources",
                log_name(ns, sizeof(ns), claim->namespace_),
                log_name(name, sizeof(name), claim->name), claim->uid, cause, more);
}

/* Tell the owner c ended (n_failed of its claims failed): its metrics. */
static void count_call(struct dra_service *s, const struct dra_call *c, size_t n_failed)
{
    if (s->ops.call_ended && c->rq.n)
        s->ops.call_ended(s->ud, c->kind == CALL_PREPARE, c->rq.n, n_failed,
                          loop_now_us() - c->started_us);
}

/* The answer to c is r: count it, log its failed claims. No allocation (the log line of
 * a failed claim formats on the stack). */
static void account_answer(struct dra_service *s, const struct dra_call *c,
                           const struct dra_claim_result *r, size_t n)
{
    size_t failed = 0;
    for (size_t i = 0; i < c->rq.n; i++) {
        const char *e = claim_error(c, i, r, n);
        if (e && *e) {
            failed++;
            log_failed_claim(s, c, &c->rq.claims[i], e);
        }
    }
    count_call(s, c, failed);
}

/* The kubelet gave up on c: every claim of it failed as far as the kubelet knows. Not
 * logged while the service stops (that is ours, and said once). */
static void account_cancelled(struct dra_service *s, const struct dra_call *c)
{
    count_call(s, c, c->rq.n);
    if (s->stopping)
        return;
    for (size_t i = 0; i < c->rq.n; i++)
        log_failed_claim(s, c, &c->rq.claims[i],
                         c->rq.error[i] ? c->rq.error[i]
                                        : "the kubelet gave up waiting for the answer (its "
                                          "deadline passed, or its connection closed)");
}

void dra_call_set_context(struct dra_call *c, void *context) { c->context = context; }
void *dra_call_context(const struct dra_call *c) { return c->context; }
uint64_t dra_call_deadline_ms(const struct dra_call *c) { return grpc_pending_deadline_ms(c->pending); }

void dra_call_done(struct dra_call *c, const struct dra_claim_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool asked = false;
        for (size_t k = 0; k < c->rq.n && !asked; k++)
            asked = r[i].uid && streq(r[i].uid, c->rq.claims[k].uid);
        if (!asked)
            log_warning("DRA: result for claim %s that the kubelet did not ask for, ignoring",
                        r[i].uid ? r[i].uid : "(no UID)");
    }
    account_answer(c->svc, c, r, n);
    size_t len;
    _cleanup_free_ uint8_t *buf = c->kind == CALL_PREPARE ? encode_prepare(c, r, n, &len)
                                                          : encode_unprepare(c, r, n, &len);
    grpc_pending_reply(c->pending, GRPC_STATUS_OK, buf, len, NULL);
    call_free(c);
}

static void on_claims(struct dra_service *s, enum call_kind kind, struct grpc_pending *p,
                      const uint8_t *req, size_t len)
{
    struct dra_request rq;
    _cleanup_free_ char *message = NULL;
    int status = dra_request_parse(req, len, &rq, &message);
    if (status != GRPC_STATUS_OK) {
        log_warning("DRA: %s refused: %s", kind == CALL_PREPARE ? "NodePrepareResources"
                                                                : "NodeUnprepareResources",
                    message);
        grpc_pending_reply(p, status, NULL, 0, message);
        return;
    }
    struct dra_call *c = xcalloc(1, sizeof(*c));
    c->svc = s;
    c->pending = p;
    c->kind = kind;
    c->rq = rq;
    c->started_us = loop_now_us();
    c->next = s->calls;
    if (s->calls)
        s->calls->prev = c;
    s->calls = c;
    grpc_pending_set_context(p, c);
    /* Nothing for ops (an empty call, NVIDIA's health probe, or every claim refused
     * already): answer at once. */
    if (c->rq.n_refs == 0) {
        dra_call_done(c, NULL, 0);
        return;
    }
    if (kind == CALL_PREPARE)
        s->ops.prepare(s->ud, c, c->rq.refs, c->rq.n_refs);
    else
        s->ops.unprepare(s->ud, c, c->rq.refs, c->rq.n_refs);
}

static void on_prepare(void *ud, struct grpc_pending *p, const uint8_t *req, size_t len)
{
    on_claims(ud, CALL_PREPARE, p, req, len);
}

static void on_unprepare(void *ud, struct grpc_pending *p, const uint8_t *req, size_t len)
{
    on_claims(ud, CALL_UNPREPARE, p, req, len);
}

static void on_call_cancelled(void *ud, struct grpc_pending *p)
{
    struct dra_service *s = ud;
    struct dra_call *c = grpc_pending_context(p);
    if (!c)
        return; /* refused inside the handler: never handed out */
    log_debug("DRA: the kubelet gave up on a call of %zu claims", c->rq.n);
    account_cancelled(s, c);
    s->ops.call_cancelled(s->ud, c);
    call_free(c);
}

/* ------------------------------------------------------------------ health */

static int on_watch_open(void *ud, struct grpc_stream *st, const uint8_t *req, size_t len,
                         char **message)
{
    struct dra_service *s = ud;
    return dra_health_watch_open(&s->health, st, req, len, message);
}

static void on_watch_closed(void *ud, struct grpc_stream *st)
{
    struct dra_service *s = ud;
    dra_health_watch_closed(&s->health, st);
}

void dra_service_health_changed(struct dra_service *s) { dra_health_watch_changed(&s->health); }

#define DRA_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define DRA_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"

/* Prepare and Unprepare are privileged (grpc.h): the connection the kubelet makes them on
 * is never closed to make room, so peers holding health streams up to the connection cap
 * cannot push it out (they are refused instead). */
static const struct grpc_method dra_methods[] = {
    { .path = DRA_V1 "NodePrepareResources", .unary_async = on_prepare,
      .pending_cancelled = on_call_cancelled, .privileged = true },
    { .path = DRA_V1 "NodeUnprepareResources", .unary_async = on_unprepare,
      .pending_cancelled = on_call_cancelled, .privileged = true },
    { .path = DRA_V1BETA1 "NodePrepareResources", .unary_async = on_prepare,
      .pending_cancelled = on_call_cancelled, .privileged = true },
    { .path = DRA_V1BETA1 "NodeUnprepareResources", .unary_async = on_unprepare,
      .pending_cancelled = on_call_cancelled, .privileged = true },
    { .path = "/v1alpha1.DRAResourceHealth/NodeWatchResources", .stream_open = on_watch_open,
      .stream_closed = on_watch_closed },
};

/* ------------------------------------------------------------------ sockets */

static int serve(struct dra_service *s, struct error *err)
{
    int r = mkdir_p(s->dir, 0750);
    if (r < 0)
        return error_set(err, r, "creating %s: %s", s->dir, strerror(-r));
    r = grpc_server_new(s->loop, s->path, dra_methods, ELEMENTSOF(dra_methods), s, NULL,
                        &s->server);
    if (r < 0)
        return error_set(err, r, "serving DRA on %s: %s", s->path, strerror(-r));
    if (stat(s->path, &s->sock_st) < 0)
        return error_set(err, -errno, "stat %s: %m", s->path);
    return 0;
}

static bool socket_is_ours(const char *path, const struct stat *ours)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && fs_same_file(&st, ours);
}

int dra_service_kubelet_restarted(struct dra_service *s, struct error *err)
{
    int rebound = 0, r;
    if (!socket_is_ours(s->path, &s->sock_st)) {
        grpc_server_free(s->server); /* pending calls cancelled, streams closed */
        s->server = NULL;
        r = serve(s, err);
        if (r < 0)
            return r;
        log_info("DRA: %s was gone, serving it again", s->path);
        rebound++;
    }
    if (!socket_is_ours(dra_registrar_path(s->registrar), &s->reg_st)) {
        r = dra_registrar_rebind(s->registrar, err);
        if (r == 0 && stat(dra_registrar_path(s->registrar), &s->reg_st) < 0)
            r = error_set(err, -errno, "stat %s: %m", dra_registrar_path(s->registrar));
        if (r < 0)
            return r;
        log_info("DRA: %s was gone, serving it again (the kubelet registers us anew)",
                 dra_registrar_path(s->registrar));
        rebound++;
    }
    return rebound;
}

/* Whatever happened to either socket or its directory: check both (two lstat calls). */
static void on_socket_changed(void *userdata)
{
    struct dra_service *s = userdata;
    struct error err = { 0 };
    if (dra_service_kubelet_restarted(s, &err) < 0)
        log_error("DRA: serving a removed socket again: %s (again when its directory changes)",
                  err.msg);
}

int dra_service_start(struct loop *l, const struct dra_service_options *opts,
                      const struct dra_service_ops *ops, void *ud, struct dra_service **out,
                      struct error *err)
{
    struct dra_service *s = xcalloc(1, sizeof(*s));
    s->loop = l;
    s->ops = *ops;
    s->ud = ud;
    s->claim_log = RATELIMIT_INIT(DRA_CLAIM_LOG_INTERVAL_MS, DRA_CLAIM_LOG_BURST);
    s->health = (struct dra_health_watch){
        .loop = l, .health = ops->health, .free_fn = ops->health_free, .ud = ud,
        .resend_ms = opts->health_resend_ms ? opts->health_resend_ms : DRA_HEALTH_RESEND_MS,
    };
    s->driver = xstrdup(opts->driver_name);
    s->dir = xasprintf("%s/%s", opts->plugins_dir, opts->driver_name);
    s->path = xasprintf("%s/dra.sock", s->dir);
    _cleanup_free_ char *reg = xasprintf("%s/%s-reg.sock", opts->registrar_dir, opts->driver_name);
    int r = serve(s, err);
    if (r == 0)
        r = dra_registrar_start(l, reg, s->driver, s->path, &s->registrar, err);
    if (r == 0 && stat(reg, &s->reg_st) < 0)
        r = error_set(err, -errno, "stat %s: %m", reg);
    if (r < 0) {
        dra_service_free(s);
        return r;
    }
    /* Without inotify the watchers poll (sockwatch.h). */
    r = sockwatch_new_flags(l, s->path, SOCKWATCH_ANY_CHANGE, on_socket_changed, s, &s->watch_sock, err);
    if (r == 0)
        r = sockwatch_new_flags(l, reg, SOCKWATCH_ANY_CHANGE, on_socket_changed, s, &s->watch_reg, err);
    if (r < 0) {
        dra_service_free(s);
        return r;
    }
    *out = s;
    return 0;
}

void dra_service_free(struct dra_service *s)
{
    if (!s)
        return;
    s->stopping = true;
    sockwatch_free(s->watch_sock);
    sockwatch_free(s->watch_reg);
    grpc_server_free(s->server); /* cancels pending calls, closes health streams */
    dra_registrar_free(s->registrar);
    dra_health_watch_clear(&s->health);
    free(s->driver);
    free(s->dir);
    free(s->path);
    free(s);
}

bool dra_service_registered(const struct dra_service *s)
{
    return dra_registrar_registered(s->registrar);
}
unsigned dra_service_health_streams(const struct dra_service *s) { return s->health.n_streams; }
unsigned dra_service_health_resend_ms(const struct dra_service *s) { return s->health.resend_ms; }
const char *dra_service_socket_path(const struct dra_service *s) { return s->path; }
const char *dra_service_registrar_path(const struct dra_service *s)
{
    return dra_registrar_path(s->registrar);
}
