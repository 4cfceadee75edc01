/* The API client's HTTP/2 side (see kube.c): nghttp2's callbacks for the one connection —
 * a response's status and headers, its body (streamed or collected, capped), a stream's
 * end handed to the request's conclusion. */
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    struct kube *k = ud;
    struct kube_req *r = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    if (r && namelen == 11 && memcmp(name, "retry-after", 11) == 0) {
        /* Seconds; an HTTP date (which the API server does not send) reads as none. */
        int v = valuelen ? 0 : -1;
        for (size_t i = 0; i < valuelen && v >= 0; i++)
            v = value[i] >= '0' && value[i] <= '9' && v < 100000 ? v * 10 + (value[i] - '0') : -1;
        r->retry_after_s = v;
        return 0;
    }
    if (!r || namelen != 7 || memcmp(name, ":status", 7) != 0)
        return 0;
    int st = 0;
    for (size_t i = 0; i < valuelen && i < 3; i++)
        st = st * 10 + (value[i] - '0');
    if (st >= 200)
        r->status = st;
    /* A success ends a run of 403s (at its headers: a watch stream concludes much later). */
    if (st >= 200 && st < 300 && k->n_forbidden)
        kube_rbac_seen(k, r->method, r->path, st, NULL);
    /* The server answers: the connection works, so the next failure starts backoff anew. */
    backoff_reset(&k->conn.backoff);
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *ud)
{
    struct kube *k = ud;
    struct kube_req *r = nghttp2_session_get_stream_user_data(s, id);
    if (!r)
        return 0;
    if (len > r->max - r->len) {
        /* Past the cap: reset the stream now rather than buffer more. */
        r->error = -EMSGSIZE;
        (void)nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        kube_ready_push(k, r);
        return 0;
    }
    if (r->len + len > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + len)
            cap *= 2;
        r->cap = (size_t)u64_min(cap, r->max);
        r->buf = xrealloc(r->buf, r->cap);
    }
    memcpy(r->buf + r->len, data, len);
    r->len += len;
    if (r->chunk)
        r->pending_chunk = true;
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    struct kube *k = ud;
    struct kube_req *r = nghttp2_session_get_stream_user_data(s, id);
    if (!r)
        return 0;
    r->closed = true;
    r->rst_code = code;
    kube_ready_push(k, r);
    return 0;
}

/* A GOAWAY: the server is shutting down (or rebalancing) and takes no new streams here.
 * Unary requests it already has get their answers; watch streams would keep this
 * connection (and every request queued behind it) open until the server gives up on
 * them, so they end now with -ESHUTDOWN and resume on a new connection. */
static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    struct kube *k = ud;
    if (frame->hd.type != NGHTTP2_GOAWAY)
        return 0;
    for (struct kube_req *r = k->active, *next; r; r = next) {
        next = r->next;
        if (r->chunk)
            kube_req_fail(r, -ESHUTDOWN);
    }
    return 0;
}

nghttp2_session_callbacks *kube_h2_callbacks(void)
{
    static nghttp2_session_callbacks *cbs;
    if (!cbs) {
        if (nghttp2_session_callbacks_new(&cbs) != 0)
            oom();
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    }
    return cbs;
}

