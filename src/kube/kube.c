/* The API client's requests: the queue (rate limited like client-go's token bucket),
 * HTTP/2 streams on the one connection (nghttp2's callbacks in kube-h2.c), deadlines, the
 * response size cap, the token re-read and single retry on 401, the RBAC line on 403
 * (worded in kube-names.c), and calling back exactly once, always from the loop. */
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "kube/kube-internal.h"
#include "version.h"

#define NV(n, v, vlen) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE }

static void kick(struct kube *k);
static void deadline_cb(struct loop *l, struct loop_timer *t, void *userdata);

static void req_free(struct kube_req *r)
{
    struct kube *k = r->k;
    loop_timer_cancel(k->loop, r->deadline);
    loop_timer_cancel(k->loop, r->retry_timer);
    if (r->active) {
        if (k->conn.h2 && r->stream_id > 0)
            (void)nghttp2_submit_rst_stream(k->conn.h2, NGHTTP2_FLAG_NONE, r->stream_id,
                                            NGHTTP2_CANCEL);
        kube_active_remove(k, r);
        kick(k);
    }
    if (r->queued)
        kube_queue_remove(k, r);
    if (r->ready)
        kube_ready_remove(k, r);
    free(r->path);
    free(r->body);
    free(r->buf);
    free(r);
}

/* ------------------------------------------------------------------ outcome */

static void retry_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube_req *r = userdata;
    r->retry_timer = NULL;
    kick(r->k);
}

/* A 429 Too Many Requests: send r again once its Retry-After passed (capped), in its
 * turn and through the rate limit, if that is within its wait bound. */
static bool retry_429(struct kube *k, struct kube_req *r)
{
    if (r->retries_429 >= KUBE_429_MAX_RETRIES)
        return false;
    unsigned s = r->retry_after_s >= 0 ? (unsigned)r->retry_after_s : 1;
    if (s > KUBE_RETRY_AFTER_MAX_S)
        s = KUBE_RETRY_AFTER_MAX_S;
    uint64_t now = loop_now_ms();
    if (now + s * 1000ull > r->wait_until_ms)
        return false;
    r->retries_429++;
    log_debug("kube: %s %s: 429 Too Many Requests, again in %u s (%u)",
              kube_verb(r->method, r->path), r->path, s, r->retries_429);
    r->status = 0;
    r->closed = false;
    r->rst_code = 0;
    r->len = 0;
    r->body_off = 0;
    r->retry_after_s = -1;
    r->not_before_ms = now + s * 1000ull;
    loop_timer_cancel(k->loop, r->retry_timer);
    r->retry_timer = loop_timer_add(k->loop, s * 1000ull + 1, retry_cb, r); /* + 1: not before */
    kube_queue_push(k, r, true);
    return true;
}

/* The request is finished (or must be retried): call back once, or requeue. */
static void conclude(struct kube *k, struct kube_req *r)
{
    int status;
    if (r->error < 0)
        status = r->error;
    else if (r->status > 0 && r->closed && r->rst_code == NGHTTP2_NO_ERROR)
        status = r->status;
    else if (r->rst_code == NGHTTP2_REFUSED_STREAM) {
        /* Not processed by the server (GOAWAY, stream limit): safe to send again. */
        r->closed = false;
        r->rst_code = 0;
        r->status = 0;
        r->len = 0;
        kube_queue_push(k, r, true);
        kick(k);
        return;
    } else
        status = r->status > 0 && r->chunk ? r->status : -ECONNRESET;

    if (status == 401 && !r->retried_401 && k->creds.token_file) {
        struct error err = { 0 };
        if (kube_creds_refresh_token(&k->creds, true, &err) < 0)
            log_warning("kube: after 401 Unauthorized: %s", err.msg);
        r->retried_401 = true;
        r->status = 0;
        r->closed = false;
        r->len = 0;
        r->body_off = 0;
        kube_queue_push(k, r, true);
        kick(k);
        return;
    }
    if (status == 429 && !r->chunk && retry_429(k, r))
        return;
    json_t *body = NULL;
    if (r->len > 0 && (!r->chunk || status != 200))
        body = json_loadb((const char *)r->buf, r->len, JSON_DECODE_ANY, NULL);
    if (status == 403)
        kube_rbac_seen(k, r->method, r->path, status, body);
    r->ready = false;
    if (r->done)
        r->done(k, status, body, r->userdata);
    json_decref(body);
    req_free(r);
}

/* Show a watch stream its new bytes. Returns false when the hook cancelled it (freed). */
static bool feed_chunk(struct kube_req *r)
{
    r->pending_chunk = false;
    r->busy = true;
    r->chunk(r, r->userdata);
    r->busy = false;
    if (r->cancelled) {
        req_free(r);
        return false;
    }
    return true;
}

/* Runs user callbacks: called only from loop callbacks, never from inside nghttp2's. */
void kube_dispatch(struct kube *k)
{
    for (;;) {
        struct kube_req *c = NULL;
        for (struct kube_req *r = k->active; r; r = r->next)
            if (r->pending_chunk) {
                c = r;
                break;
            }
        if (!c)
            break;
        (void)feed_chunk(c);
    }
    while (k->ready) {
        struct kube_req *r = k->ready;
        k->ready = r->ready_next;
        r->ready_next = NULL;
        r->ready = false;
        /* A watch gets its last bytes before its end. */
        if (r->pending_chunk && r->chunk && !feed_chunk(r))
            continue;
        conclude(k, r);
    }
}

void kube_req_fail(struct kube_req *r, int err)
{
    struct kube *k = r->k;
    r->error = err;
    if (r->active && k->conn.h2 && r->stream_id > 0) {
        (void)nghttp2_submit_rst_stream(k->conn.h2, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
        kick(k);
    }
    kube_ready_push(k, r);
}

void kube_req_consume(struct kube_req *r, size_t n)
{
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
    /* A watch stream's buffer grew to its largest event (a carved GPU's slice: 31 KiB,
     * 64 KiB of buffer) and would stay that size for the stream's life (5-10 min), idle
     * in between: once empty it goes, the next event starts small. */
    if (!r->len && r->cap > KUBE_BUF_KEEP) {
        free(r->buf);
        r->buf = NULL;
        r->cap = 0;
    }
}

/* ------------------------------------------------------------------ sending */

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    struct kube_req *r = src->ptr;
    size_t n = u64_min(length, r->body_len - r->body_off);
    memcpy(buf, r->body + r->body_off, n);
    r->body_off += n;
    if (r->body_off == r->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static const char *content_type(enum kube_method m)
{
    switch (m) {
    case KUBE_PATCH_MERGE:
        return "application/merge-patch+json";
    case KUBE_PATCH_STRATEGIC:
        return "application/strategic-merge-patch+json";
    case KUBE_PATCH_JSON:
        return "application/json-patch+json";
    default:
        return "application/json";
    }
}

static const char *method_name(enum kube_method m)
{
    static const char *const names[] = { "GET", "POST", "PUT", "DELETE", "PATCH", "PATCH", "PATCH" };
    return names[m];
}

static int start_stream(struct kube *k, struct kube_req *r)
{
    struct kube_creds *cr = &k->creds;
    struct error err = { 0 };
    if (kube_creds_refresh_token(cr, false, &err) < 0)
        log_warning("kube: %s, keeping the token read before", err.msg);
    _cleanup_free_ char *auth = cr->token ? xasprintf("Bearer %s", cr->token) : NULL;
    const char *m = method_name(r->method), *ct = content_type(r->method);
    const char *scheme = cr->tls ? "https" : "http";
    const char *accept = r->accept ? r->accept : "application/json";
    static const char ua[] = "gpu-device-plugin/" GDP_VERSION;
    nghttp2_nv nv[8] = {
        NV(":method", m, strlen(m)),
        NV(":scheme", scheme, strlen(scheme)),
        NV(":path", r->path, strlen(r->path)),
        NV(":authority", cr->authority, strlen(cr->authority)),
        NV("accept", accept, strlen(accept)),
        NV("user-agent", ua, sizeof(ua) - 1),
    };
    size_t n = 6;
    if (auth)
        nv[n++] = (nghttp2_nv)NV("authorization", auth, strlen(auth));
    if (r->body)
        nv[n++] = (nghttp2_nv)NV("content-type", ct, strlen(ct));
    nghttp2_data_provider prd = { .source.ptr = r, .read_callback = body_read };
    r->body_off = 0;
    int32_t id = nghttp2_submit_request(k->conn.h2, NULL, nv, n, r->body ? &prd : NULL, r);
    if (auth)
        explicit_bzero(auth, strlen(auth));
    if (id < 0)
        return -EIO;
    r->stream_id = id;
    r->active = true;
    /* The deadline is the server's from here: time queued in this client is not. */
    if (r->timeout_ms > 0) {
        loop_timer_cancel(k->loop, r->deadline);
        r->deadline = loop_timer_add(k->loop, r->timeout_ms, deadline_cb, r);
    }
    r->prev = NULL;
    r->next = k->active;
    if (k->active)
        k->active->prev = r;
    k->active = r;
    k->requests_sent++;
    return 0;
}

static void rate_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube *k = userdata;
    k->rate_timer = NULL;
    kick(k);
}

/* Take one token from the bucket, or arm the timer for when one is there. */
static bool rate_take(struct kube *k)
{
    uint64_t now = loop_now_us();
    if (tokenbucket_take(&k->rate, now))
        return true;
    /* + 1 ms: the timer's millisecond must not end before the token is there. */
    if (!k->rate_timer)
        k->rate_timer = loop_timer_add(k->loop, tokenbucket_wait(&k->rate, now) / 1000 + 1,
                                       rate_cb, k);
    return false;
}

static void spread_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube *k = userdata;
    k->spread_timer = NULL;
    kick(k);
}

/* Whether r must still wait out the outage spread (then the timer is armed for its end). */
static bool spread_holds(struct kube *k, struct kube_req *r)
{
    uint64_t now = loop_now_ms();
    if (!r->spread || now >= k->conn.spread_until_ms)
        return false;
    if (!k->spread_timer)
        k->spread_timer = loop_timer_add(k->loop, k->conn.spread_until_ms - now, spread_cb, k);
    return true;
}

/* Move queued requests onto the connection as far as the rate limit allows, in order,
 * passing over those that wait out the outage spread. Watch streams take no token, as
 * client-go does not rate-limit watches (rest.Request.Watch): a stream is one request for
 * as long as it lasts, and its list is what costs (a list, or the initial events of a
 * streaming watch, which the server paces with its own flow control). */
static void pump(struct kube *k)
{
    if (!k->queue_head)
        return;
    if (k->conn.state != KUBE_CONN_READY) {
        kube_conn_want(k);
        return;
    }
    struct kube_req *r = k->queue_head;
    uint64_t now = loop_now_ms();
    bool out_of_tokens = false;
    while (r && nghttp2_session_check_request_allowed(k->conn.h2)) {
        struct kube_req *next = r->next;
        if (now < r->not_before_ms || spread_holds(k, r)) { /* retry_timer or spread_timer */
            r = next;
            continue;
        }
        if (!r->chunk && (out_of_tokens || !rate_take(k))) {
            out_of_tokens = true; /* the others wait their turn; a stream behind them goes */
            r = next;
            continue;
        }
        kube_queue_remove(k, r);
        if (start_stream(k, r) < 0) {
            r->error = -EIO;
            kube_ready_push(k, r);
        }
        r = next;
    }
}

static void kick_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube *k = userdata;
    k->kick_timer = NULL;
    pump(k);
    kube_conn_flush(k);
    kube_dispatch(k);
}

/* Send from the loop, not from the caller's stack: a failure found while sending must
 * not call back into a caller that is still inside kube_request(). */
static void kick(struct kube *k)
{
    if (!k->kick_timer)
        k->kick_timer = loop_timer_add(k->loop, 0, kick_cb, k);
}

void kube_send_now(struct kube *k)
{
    if (!k)
        return;
    pump(k);
    kube_conn_advance(k);
    kube_conn_flush(k);
    if (k->ready)
        kick(k); /* a request that failed meanwhile is answered from the loop */
}

void kube_on_connected(struct kube *k)
{
    pump(k);
}

void kube_on_disconnected(struct kube *k, int err)
{
    while (k->active) {
        struct kube_req *r = k->active;
        if (r->error == 0)
            r->error = err;
        kube_ready_push(k, r);
    }
}

static void deadline_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube_req *r = userdata;
    struct kube *k = r->k;
    r->deadline = NULL;
    /* Held back by us, not slow at the server: the deadline counts from the end of it. */
    uint64_t now = loop_now_ms();
    if (r->queued && r->spread && k->conn.state == KUBE_CONN_READY && now < k->conn.spread_until_ms) {
        r->deadline = loop_timer_add(k->loop, k->conn.spread_until_ms - now + r->timeout_ms,
                                     deadline_cb, r);
        return;
    }
    /* Queued on a working connection: held back here (rate limit, stream limit, a 429's
     * Retry-After), not slow at the server. Its deadline starts when it is sent; until
     * then only its wait bound counts. */
    if (r->queued && k->conn.state == KUBE_CONN_READY) {
        if (now < r->wait_until_ms) {
            r->deadline = loop_timer_add(k->loop, u64_min(r->wait_until_ms - now, r->timeout_ms),
                                         deadline_cb, r);
            return;
        }
        kube_req_fail(r, KUBE_E_THROTTLED);
        kube_dispatch(k);
        return;
    }
    /* Sent and unanswered: is the server still there at all? */
    if (r->active)
        kube_conn_probe(k);
    /* Never sent: say why (a refused connection is not a timeout). */
    kube_req_fail(r, r->active ? -ETIMEDOUT : kube_conn_wait_error(k));
    kube_dispatch(k);
}

/* ------------------------------------------------------------------ API */

struct kube_req *kube_req_new(struct kube *k, enum kube_method m, const char *path, json_t *body,
                              kube_done_fn fn, void *userdata)
{
    struct kube_req *r = xcalloc(1, sizeof(*r));
    r->k = k;
    r->method = m;
    r->path = xstrdup(path);
    r->done = fn;
    r->userdata = userdata;
    r->timeout_ms = k->timeout_ms;
    r->retry_after_s = -1;
    r->max = k->max_response;
    if (body) {
        char *s = json_dumps(body, JSON_COMPACT);
        if (!s)
            oom();
        r->body = (uint8_t *)s;
        r->body_len = strlen(s);
    }
    return r;
}

void kube_req_set_stream(struct kube_req *r, kube_chunk_fn chunk, size_t max_buffer)
{
    r->chunk = chunk;
    r->max = max_buffer;
    r->timeout_ms = 0;
}

void kube_req_set_spread(struct kube_req *r)
{
    r->spread = true;
}

void kube_req_set_accept(struct kube_req *r, const char *accept)
{
    r->accept = accept;
}

void kube_req_submit(struct kube_req *r)
{
    struct kube *k = r->k;
    r->wait_until_ms = loop_now_ms() + k->wait_ms;
    if (r->timeout_ms > 0)
        r->deadline = loop_timer_add(k->loop, r->timeout_ms, deadline_cb, r);
    kube_queue_push(k, r, false);
    kick(k);
}

struct kube_req *kube_request(struct kube *k, enum kube_method m, const char *path, json_t *body,
                              kube_done_fn fn, void *userdata, struct error *err)
{
    if (!k || !path || path[0] != '/' || !fn || (unsigned)m > KUBE_PATCH_JSON) {
        error_set(err, -EINVAL, "kube request: bad arguments");
        return NULL;
    }
    if (strlen(path) > 8192) {
        error_set(err, -ENAMETOOLONG, "kube request: path longer than 8192 bytes");
        return NULL;
    }
    struct kube_req *r = kube_req_new(k, m, path, body, fn, userdata);
    kube_req_submit(r);
    return r;
}

void kube_request_set_wait_limit(struct kube_req *r, uint32_t ms)
{
    if (!r)
        return;
    uint64_t until = loop_now_ms() + ms;
    if (until < r->wait_until_ms)
        r->wait_until_ms = until;
    /* Its deadline timer is what ends the wait: armed at the request timeout, it would
     * notice a shorter bound only then. Re-armed for the bound (deadline_cb re-arms it for
     * the timeout again while the request waits on a working connection). */
    if (r->queued && r->timeout_ms > ms) {
        loop_timer_cancel(r->k->loop, r->deadline);
        r->deadline = loop_timer_add(r->k->loop, ms, deadline_cb, r);
    }
}

const char *kube_strerror(int status)
{
    if (status == KUBE_E_THROTTLED)
        return "never sent: it waited in this client's own rate limit (--kube-api-qps, "
               "--kube-api-burst) until its wait bound passed";
    return strerror(-status);
}

void kube_request_cancel(struct kube_req *r)
{
    if (!r)
        return;
    if (r->busy) {
        r->cancelled = true;
        return;
    }
    req_free(r);
}

int kube_new(struct loop *l, const struct kube_options *o, struct kube **out, struct error *err)
{
    struct kube *k = xcalloc(1, sizeof(*k));
    k->loop = l;
    k->conn.fd = -1;
    k->conn.backoff = BACKOFF_INIT(KUBE_BACKOFF_MIN_MS, KUBE_BACKOFF_MAX_MS, 0, true);
    k->timeout_ms = o && o->request_timeout_ms ? o->request_timeout_ms : KUBE_DEFAULT_TIMEOUT_MS;
    k->wait_ms = o && o->max_wait_ms ? o->max_wait_ms : KUBE_DEFAULT_WAIT_MS;
    k->max_response = o && o->max_response_bytes ? o->max_response_bytes : KUBE_DEFAULT_MAX_RESPONSE;
    k->qps = o && o->qps > 0 ? o->qps : KUBE_DEFAULT_QPS;
    k->burst = o && o->burst ? o->burst : KUBE_DEFAULT_BURST;
    double period_us = 1e6 / k->qps; /* one token per period; at least 1 µs */
    k->rate = TOKENBUCKET_INIT(period_us >= 1.0 ? (uint64_t)period_us : 1, k->burst);
    int r;
    if (o && o->kubeconfig && *o->kubeconfig)
        r = kube_creds_from_kubeconfig(&k->creds, o->kubeconfig, err);
    else
        r = kube_creds_in_cluster(&k->creds, kube_sa_dir, err);
    if (r < 0) {
        free(k);
        return r;
    }
    r = kube_conn_init(k, err);
    if (r < 0) {
        error_prefix(err, "%s", k->creds.source);
        kube_free(k);
        return r;
    }
    /* Said once at start: with it the token goes to whoever answers on the path. */
    if (k->creds.insecure)
        log_warning("kube: %s: insecure-skip-tls-verify is true: the API server's certificate "
                    "is not verified, so the bearer token and every answer can be intercepted",
                    k->creds.source);
    *out = k;
    return 0;
}

void kube_free(struct kube *k)
{
    if (!k)
        return;
    kube_watches_free(k);
    while (k->ready)
        req_free(k->ready);
    while (k->queue_head)
        req_free(k->queue_head);
    while (k->active)
        req_free(k->active);
    loop_timer_cancel(k->loop, k->rate_timer);
    loop_timer_cancel(k->loop, k->kick_timer);
    loop_timer_cancel(k->loop, k->spread_timer);
    kube_conn_free(k);
    kube_creds_clear(&k->creds);
    for (size_t i = 0; i < k->n_forbidden; i++)
        free(k->forbidden[i].key);
    free(k->forbidden);
    free(k);
}
