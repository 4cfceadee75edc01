/* The health streams of the DRA socket (dra-health-watch.h). */
#include <string.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "dra/dra-health-watch.h"
#include "dra/dra-service.h"
#include "dra_health_v1alpha1.pb-c.h"
#include "grpc/grpc.h"

struct dra_health_stream {
    struct dra_health_stream *next;
    struct grpc_stream *stream;
};

static uint8_t *encode(struct dra_health_watch *w, size_t *len)
{
    struct dra_health_entry *h = NULL;
    size_t n = w->health ? w->health(w->ud, &h) : 0;
    _cleanup_free_ V1alpha1__DeviceHealth *dh = xcalloc(n ? n : 1, sizeof(*dh));
    _cleanup_free_ V1alpha1__DeviceHealth **dp = xcalloc(n ? n : 1, sizeof(*dp));
    _cleanup_free_ V1alpha1__DeviceIdentifier *id = xcalloc(n ? n : 1, sizeof(*id));
    for (size_t i = 0; i < n; i++) {
        v1alpha1__device_identifier__init(&id[i]);
        id[i].pool_name = (char *)(h[i].pool ? h[i].pool : "");
        id[i].device_name = (char *)(h[i].device ? h[i].device : "");
        v1alpha1__device_health__init(&dh[i]);
        dh[i].device = &id[i];
        dh[i].health = h[i].health == 1   ? V1ALPHA1__HEALTH_STATUS__HEALTHY
                       : h[i].health == 2 ? V1ALPHA1__HEALTH_STATUS__UNHEALTHY
                                          : V1ALPHA1__HEALTH_STATUS__UNKNOWN;
        dh[i].last_updated_time = h[i].last_updated;
        dp[i] = &dh[i];
    }
    V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
    resp.devices = dp;
    resp.n_devices = n;
    *len = v1alpha1__node_watch_resources_response__get_packed_size(&resp);
    uint8_t *buf = xmalloc(*len + 1);
    v1alpha1__node_watch_resources_response__pack(&resp, buf);
    if (h && w->free_fn)
        w->free_fn(w->ud, h, n);
    free(h);
    return buf;
}

static void resend_cb(struct loop *l, struct loop_timer *t, void *userdata);

/* Send the current list on every stream (all = even if unchanged), then count the
 * re-send period from now. */
static void send_list(struct dra_health_watch *w, bool all)
{
    size_t len;
    uint8_t *buf = encode(w, &len);
    if (!all && w->sent_any && len == w->last_len && memcmp(buf, w->last, len) == 0) {
        free(buf);
        return;
    }
    for (struct dra_health_stream *h = w->streams; h; h = h->next)
        (void)grpc_stream_send(h->stream, buf, len); /* a closing stream goes on its own */
    free(w->last);
    w->last = buf;
    w->last_len = len;
    w->sent_any = true;
    loop_timer_cancel(w->loop, w->resend);
    w->resend = w->streams ? loop_timer_add(w->loop, w->resend_ms, resend_cb, w) : NULL;
}

static void resend_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_health_watch *w = userdata;
    w->resend = NULL;
    send_list(w, true);
}

void dra_health_watch_changed(struct dra_health_watch *w)
{
    if (w->streams)
        send_list(w, false);
}

int dra_health_watch_open(struct dra_health_watch *w, struct grpc_stream *st, const uint8_t *req,
                          size_t len, char **message)
{
    V1alpha1__NodeWatchResourcesRequest *in =
        v1alpha1__node_watch_resources_request__unpack(NULL, len, req);
    if (!in) {
        *message = xstrdup("cannot decode NodeWatchResourcesRequest");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    v1alpha1__node_watch_resources_request__free_unpacked(in, NULL);
    struct dra_health_stream *h = xcalloc(1, sizeof(*h));
    h->stream = st;
    h->next = w->streams;
    w->streams = h;
    w->n_streams++;
    log_debug("DRA: health stream opened (%u open)", w->n_streams);
    /* The complete list at once, to this stream and, harmlessly, to the others. */
    send_list(w, true);
    return GRPC_STATUS_OK;
}

void dra_health_watch_closed(struct dra_health_watch *w, struct grpc_stream *st)
{
    for (struct dra_health_stream **p = &w->streams; *p; p = &(*p)->next)
        if ((*p)->stream == st) {
            struct dra_health_stream *h = *p;
            *p = h->next;
            free(h);
            w->n_streams--;
            break;
        }
    if (!w->streams) {
        /* No watcher: no timer (zero idle wakeups). */
        loop_timer_cancel(w->loop, w->resend);
        w->resend = NULL;
    }
    log_debug("DRA: health stream closed (%u open)", w->n_streams);
}

void dra_health_watch_clear(struct dra_health_watch *w)
{
    while (w->streams) {
        struct dra_health_stream *h = w->streams;
        w->streams = h->next;
        free(h);
    }
    w->n_streams = 0;
    loop_timer_cancel(w->loop, w->resend);
    w->resend = NULL;
    free(w->last);
    w->last = NULL;
}
