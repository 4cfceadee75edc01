/* Registration with the kubelet (v1beta1.Registration/Register) for one plugin
 * endpoint: one asynchronous gRPC client call at a time on the loop, retried with the
 * backoff below until the kubelet accepts. The contract is in registration.h. */
#include <stdio.h>

#include "api.pb-c.h"
#include "core/backoff.h"
#include "core/log.h"
#include "core/loop.h"
#include "grpc/grpc.h"
#include "metrics/metrics.h"
#include "registration.h"

/* The kubelet creates its socket (bind: our inotify fires) a moment before it listens;
 * a dial in between is refused. Waiting a whole 100 ms then made one restart in seven
 * cost 100 ms, so the first REG_FAST_RETRIES retries come every millisecond (a kubelet
 * that is coming up listens within a few), then the wait doubles from 2 ms and still
 * reaches 10 s. Retries shorter than REG_BACKOFF_QUIET_MS are debug lines only. */
#define REG_BACKOFF_FIRST_MS 1u
#define REG_FAST_RETRIES 8u
#define REG_BACKOFF_QUIET_MS 100u
#define REG_BACKOFF_MAX_MS 10000u
/* The kubelet dials back with a 10 s budget before it answers; leave it room. */
#define REG_TIMEOUT_MS 15000u

struct reg {
    struct loop *loop;
    char *kubelet_socket;
    char *endpoint;
    char *resource;
    struct grpc_call *call;
    struct loop_timer *retry;
    struct backoff backoff;    /* failures in a row, since the last success or restart */
    bool registered;
    uint64_t started_us;
    struct metrics_series *ok, *failed;
    struct log_repeat fail_log; /* a failure that stays the same is warned about once */
};

const char *const reg_kubelet_path_hints[] = {
    "Is --kubelet-socket the kubelet's registration socket, <kubelet --root-dir>/"
    "device-plugins/kubelet.sock (default /var/lib/kubelet/device-plugins/kubelet.sock)? "
    "The plugin sockets go into the same directory.",
    "Is that directory mounted into this container from the host (a hostPath volume of the "
    "kubelet's device-plugins directory), and is the kubelet running? The directory is "
    "watched: serving and registering start again as soon as the kubelet's socket appears "
    "there.",
    NULL,
};

static void reg_call(struct reg *r);

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct reg *r = userdata;
    r->retry = NULL;
    reg_call(r);
}

static void on_done(void *userdata, int status, const char *message, const uint8_t *resp,
                    size_t len)
{
    struct reg *r = userdata;
    r->call = NULL;
    metrics_inc(status == GRPC_STATUS_OK ? r->ok : r->failed);
    if (status == GRPC_STATUS_OK) {
        r->registered = true;
        backoff_reset(&r->backoff);
        log_repeat_reset(&r->fail_log);
        log_info("Registered device plugin for '%s' with Kubelet (%llu us)", r->resource,
                 (unsigned long long)(loop_now_us() - r->started_us));
        return;
    }
    /* Said once at warning level, and again only when the failure changes: the retries
     * of a kubelet that is not there (a wrong --kubelet-socket) are debug lines. */
    char key[600];
    snprintf(key, sizeof(key), "%d %s", status, message ? message : "");
    uint64_t delay_ms = backoff_next(&r->backoff);
    int level = delay_ms < REG_BACKOFF_QUIET_MS
                    ? LOG_DEBUG
                    : log_repeat_level(&r->fail_log, LOG_WARNING, key);
    log_full(level,
             "Could not register device plugin for '%s' with Kubelet at %s: %s (status %d); "
             "retrying in %llu ms%s",
             r->resource, r->kubelet_socket, message ? message : "", status,
             (unsigned long long)delay_ms,
             r->fail_log.repeats ? " (the same failure again)" : "");
    if (level == LOG_WARNING && status == GRPC_STATUS_UNAVAILABLE)
        log_hints(reg_kubelet_path_hints);
    r->retry = loop_timer_add(r->loop, delay_ms, on_retry, r);
}

static void reg_call(struct reg *r)
{
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    opts.get_preferred_allocation_available = true;
    req.version = "v1beta1";
    req.endpoint = r->endpoint;
    req.resource_name = r->resource;
    req.options = &opts;

    size_t len = v1beta1__register_request__get_packed_size(&req);
    uint8_t *buf = xmalloc(len ? len : 1);
    v1beta1__register_request__pack(&req, buf);
    r->started_us = loop_now_us();
    int rc = grpc_call_unary(r->loop, r->kubelet_socket, "localhost", "/v1beta1.Registration/Register",
                             buf, len, REG_TIMEOUT_MS, on_done, r, &r->call);
    free(buf);
    if (rc < 0) {
        r->call = NULL;
        on_done(r, GRPC_STATUS_UNAVAILABLE, strerror(-rc), NULL, 0);
    }
}

struct reg *reg_new(struct loop *l, const char *kubelet_socket, const char *endpoint,
                    const char *resource_name)
{
    struct reg *r = xcalloc(1, sizeof(*r));
    r->loop = l;
    r->kubelet_socket = xstrdup(kubelet_socket);
    r->endpoint = xstrdup(endpoint);
    r->resource = xstrdup(resource_name);
    r->backoff = BACKOFF_INIT(REG_BACKOFF_FIRST_MS, REG_BACKOFF_MAX_MS, REG_FAST_RETRIES, false);
    return r;
}

void reg_restart(struct reg *r)
{
    grpc_call_cancel(r->call);
    r->call = NULL;
    loop_timer_cancel(r->loop, r->retry);
    r->retry = NULL;
    r->registered = false;
    backoff_reset(&r->backoff);
    log_repeat_reset(&r->fail_log); /* a new kubelet: its first failure is news */
    reg_call(r);
}

bool reg_registered(const struct reg *r) { return r->registered; }

void reg_set_metrics(struct reg *r, struct metrics_series *ok, struct metrics_series *failed)
{
    r->ok = ok;
    r->failed = failed;
}

void reg_free(struct reg *r)
{
    if (!r)
        return;
    grpc_call_cancel(r->call);
    loop_timer_cancel(r->loop, r->retry);
    free(r->kubelet_socket);
    free(r->endpoint);
    free(r->resource);
    free(r);
}
