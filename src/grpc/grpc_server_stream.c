/* The server side of one gRPC call: a stream's request (header checks, framing into
 * the request buffer, dispatch to the method's handler), its reply (HEADERS, DATA from
 * the send queue, trailers, or a trailers-only error) and its end (abort, destroy), plus
 * the nghttp2 session callbacks that drive all of it.
 *
 * Split from grpc_server.c (the listening socket and the connections: socket I/O,
 * timers, lifetime) along the re-entrancy rule in grpc_server_internal.h: everything
 * here runs inside nghttp2 callbacks or user handlers, so it only queues and asks for
 * a flush (grpc_conn_schedule_flush); it never writes to a socket or frees a
 * connection. Loop thread only. */
#include <stdio.h>
#include <strings.h>

#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_server_internal.h"

#define GRPC_MAX_PATH 1024u

/* ------------------------------------------------------------------ queue */

/* Unsent bytes count against the budgets like request bytes: a reader that never
 * reads holds them, and the longest holder is the one dropped. */
static void queue_account(struct grpc_stream *s, size_t add, size_t sub)
{
    struct grpc_server *srv = s->conn->srv;
    srv->queued = srv->queued + add - sub;
    if (srv->queued > srv->queued_max)
        srv->queued_max = srv->queued;
    if (sub)
        grpc_budget_release(s, sub);
    if (add)
        (void)grpc_budget_charge(s, add, true);
}

static void stream_drop_queue(struct grpc_stream *s)
{
    queue_account(s, 0, (s->head_len - s->head_off) + s->pending_len);
    free(s->head);
    free(s->pending);
    s->head = s->pending = NULL;
    s->head_len = s->head_off = s->pending_len = 0;
}

/* Wake the data provider if it is parked and make sure the session gets written. */
static void stream_kick(struct grpc_stream *s)
{
    if (s->responded && !s->in_open && s->deferred) {
        s->deferred = false;
        (void)nghttp2_session_resume_data(s->conn->session, s->id);
    }
    grpc_conn_schedule_flush(s->conn);
}

int grpc_stream_send(struct grpc_stream *s, const uint8_t *msg, size_t len)
{
    if (s->closing || s->finishing || s->killed || s->conn->dead)
        return -EPIPE;
    size_t flen;
    uint8_t *framed = grpc_frame_message(msg, len, &flen);
    if (!s->head) {
        s->head = framed;
        s->head_len = flen;
        s->head_off = 0;
        queue_account(s, flen, 0);
    } else if (s->head_off == 0) {
        /* Nothing of the head is on the wire yet: the newest snapshot replaces it. */
        free(s->head);
        s->head = framed;
        queue_account(s, flen, s->head_len);
        s->head_len = flen;
    } else {
        free(s->pending);
        s->pending = framed;
        queue_account(s, flen, s->pending_len);
        s->pending_len = flen;
    }
    stream_kick(s);
    return 0;
}

void grpc_stream_finish(struct grpc_stream *s, int status, const char *message)
{
    if (s->closing || s->finishing || s->killed)
        return;
    s->finishing = true;
    s->status = status;
    s->message = message ? xstrdup(message) : NULL;
    if (!s->conn->dead)
        stream_kick(s);
}

/* ------------------------------------------------------------------ replies */

static ssize_t stream_read_cb(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                              uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (s->killed)
        return NGHTTP2_ERR_DEFERRED; /* its RST_STREAM is queued */
    if (s->head) {
        size_t n = u64_min(length, s->head_len - s->head_off);
        memcpy(buf, s->head + s->head_off, n);
        s->head_off += n;
        queue_account(s, 0, n);
        if (s->head_off == s->head_len) {
            free(s->head);
            s->head = TAKE_PTR(s->pending);
            s->head_len = s->pending_len;
            s->head_off = 0;
            s->pending_len = 0;
        }
        return (ssize_t)n;
    }
    if (s->finishing) {
        char code[16];
        snprintf(code, sizeof(code), "%d", s->status);
        _cleanup_free_ char *msg = s->message ? grpc_percent_encode(s->message) : NULL;
        nghttp2_nv nv[] = {
            GRPC_NV("grpc-status", code, strlen(code)),
            GRPC_NV("grpc-message", msg, msg ? strlen(msg) : 0),
        };
        if (nghttp2_submit_trailer(session, id, nv, msg ? 2 : 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        return 0;
    }
    s->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
}

/* HEADERS(:status 200, content-type) now; DATA and trailers through the provider. */
static int stream_submit_response(struct grpc_stream *s)
{
    static const nghttp2_nv nv[] = {
        GRPC_NV_LIT(":status", "200"),
        GRPC_NV_LIT("content-type", "application/grpc"),
    };
    nghttp2_data_provider prd = { .read_callback = stream_read_cb };
    s->responded = true;
    return nghttp2_submit_response(s->conn->session, s->id, nv, ELEMENTSOF(nv), &prd) == 0
                   ? 0
                   : -EIO;
}

/* An asynchronous call ends without its owner's answer: tell the owner, once. */
static void stream_settle(struct grpc_stream *s)
{
    if (s->awaiting)
        s->conn->n_awaiting--;
    s->awaiting = false;
}

static void stream_drop_pending(struct grpc_stream *s)
{
    if (!s->awaiting)
        return;
    stream_settle(s);
    s->method->pending_cancelled(s->conn->srv->userdata, (struct grpc_pending *)s);
}

/* Error replies are trailers-only: one HEADERS frame with END_STREAM. */
static int stream_reply_status(struct grpc_stream *s, int status, const char *message)
{
    stream_drop_pending(s);
    char code[16];
    snprintf(code, sizeof(code), "%d", status);
    _cleanup_free_ char *msg = message ? grpc_percent_encode(message) : NULL;
    nghttp2_nv nv[] = {
        GRPC_NV_LIT(":status", "200"),
        GRPC_NV_LIT("content-type", "application/grpc"),
        GRPC_NV("grpc-status", code, strlen(code)),
        GRPC_NV("grpc-message", msg, msg ? strlen(msg) : 0),
    };
    s->responded = true;
    stream_drop_queue(s);
    return nghttp2_submit_response(s->conn->session, s->id, nv, msg ? 4 : 3, NULL) == 0 ? 0
                                                                                      : -EIO;
}

static int stream_reply_http(struct grpc_stream *s, const char *code)
{
    nghttp2_nv nv[] = { GRPC_NV(":status", code, strlen(code)) };
    s->responded = true;
    return nghttp2_submit_response(s->conn->session, s->id, nv, 1, NULL) == 0 ? 0 : -EIO;
}

static int stream_reset(struct grpc_stream *s, uint32_t code)
{
    s->responded = true;
    return nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, code) == 0
                   ? 0
                   : -EIO;
}

/* ------------------------------------------------------------------ requests */

static const struct grpc_method *server_find_method(struct grpc_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_methods; i++)
        if (streq(srv->methods[i].path, path))
            return &srv->methods[i];
    return NULL;
}

/* Request headers are complete: the checks nghttp2's HTTP messaging would have made
 * (minus the :authority syntax), then the gRPC ones. */
static int stream_check_headers(struct grpc_stream *s)
{
    if (s->header_error || !s->seen_method || !s->seen_path)
        return stream_reset(s, NGHTTP2_PROTOCOL_ERROR);
    if (!s->method_post)
        return stream_reply_http(s, "405");
    if (!s->content_type_ok)
        return stream_reply_http(s, "415");
    s->method = server_find_method(s->conn->srv, s->path);
    if (!s->method) {
        _cleanup_free_ char *m = xasprintf("unknown method %s", s->path);
        return stream_reply_status(s, GRPC_STATUS_UNIMPLEMENTED, m);
    }
    /* Marked at the headers: the owner's client is protected from its first such call
     * on, even while that call's body is still coming. */
    if (s->method->privileged)
        s->conn->privileged = true;
    return 0;
}

void grpc_stream_release_request(struct grpc_stream *s)
{
    grpc_budget_release(s, s->req.msg_cap);
    grpc_framer_reset(&s->req);
    if (s->unconsumed > 0 && !s->conn->dead)
        (void)nghttp2_session_consume_connection(s->conn->session, s->unconsumed);
    s->unconsumed = 0;
}

static int stream_dispatch(struct grpc_stream *s)
{
    struct grpc_server *srv = s->conn->srv;
    int r = grpc_framer_finish(&s->req);
    if (r == -ENODATA)
        return stream_reply_status(s, GRPC_STATUS_INTERNAL, "missing request message");
    if (r < 0)
        return stream_reply_status(s, GRPC_STATUS_INTERNAL, "truncated request message");
    /* Handlers decode the request before they return, so its buffer goes right after. */
    const uint8_t *req = s->req.msg ? s->req.msg : (const uint8_t *)"";
    size_t len = s->req.msg_len;

    if (s->method->unary_async) {
        uint64_t t = srv->lim.reply_timeout_ms;
        if (s->timeout_ms && s->timeout_ms < t)
            t = s->timeout_ms;
        s->awaiting = true;
        s->conn->n_awaiting++;
        s->reply_deadline_ms = s->started_ms + t;
        s->in_open = true; /* an answer from inside the handler is submitted as usual */
        s->method->unary_async(srv->userdata, (struct grpc_pending *)s, req, len);
        s->in_open = false;
        grpc_stream_release_request(s);
        grpc_guard_deadlines(s->conn);
        return 0;
    }

    if (s->method->unary) {
        struct grpc_reply reply = { 0 };
        s->method->unary(srv->userdata, req, len, &reply);
        grpc_stream_release_request(s);
        if (reply.status != GRPC_STATUS_OK) {
            r = stream_reply_status(s, reply.status, reply.message);
        } else {
            r = grpc_stream_send(s, reply.data, reply.len);
            if (r == 0) {
                grpc_stream_finish(s, GRPC_STATUS_OK, NULL);
                r = stream_submit_response(s);
            }
        }
        free(reply.data);
        free(reply.message);
        return r;
    }

    _cleanup_free_ char *msg = NULL;
    s->in_open = true;
    int status = s->method->stream_open(srv->userdata, s, req, len, &msg);
    s->in_open = false;
    grpc_stream_release_request(s);
    if (status != GRPC_STATUS_OK)
        return stream_reply_status(s, status, msg);
    s->opened = true;
    s->conn->n_opened++;
    return stream_submit_response(s);
}

void grpc_pending_reply(struct grpc_pending *p, int status, const uint8_t *data, size_t len,
                        const char *message)
{
    struct grpc_stream *s = (struct grpc_stream *)p;
    int r;
    stream_settle(s);
    if (s->killed || s->responded || s->conn->dead)
        return;
    if (status != GRPC_STATUS_OK) {
        r = stream_reply_status(s, status, message);
    } else {
        r = grpc_stream_send(s, data ? data : (const uint8_t *)"", len);
        if (r == 0) {
            grpc_stream_finish(s, GRPC_STATUS_OK, NULL);
            r = stream_submit_response(s);
        }
    }
    if (r < 0)
        (void)stream_reset(s, NGHTTP2_INTERNAL_ERROR);
    grpc_conn_schedule_flush(s->conn);
    if (!s->in_open)
        grpc_guard_deadlines(s->conn);
}

void grpc_pending_set_context(struct grpc_pending *p, void *context)
{
    ((struct grpc_stream *)p)->pending_context = context;
}

void *grpc_pending_context(const struct grpc_pending *p)
{
    return ((const struct grpc_stream *)p)->pending_context;
}

uint64_t grpc_pending_deadline_ms(const struct grpc_pending *p)
{
    return ((const struct grpc_stream *)p)->reply_deadline_ms;
}

void grpc_stream_abort(struct grpc_stream *s, int status, const char *message)
{
    grpc_stream_release_request(s);
    if (!s->responded && s->headers_done) {
        /* Answered before the request ended: on_frame_send resets it after the status. */
        (void)stream_reply_status(s, status, message);
    } else {
        s->killed = true;
        stream_drop_queue(s);
        s->responded = true;
        (void)nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                        NGHTTP2_CANCEL);
        /* A parked provider would otherwise keep the stream waiting for a resume. */
        if (s->deferred) {
            s->deferred = false;
            (void)nghttp2_session_resume_data(s->conn->session, s->id);
        }
    }
    grpc_conn_schedule_flush(s->conn);
}

void grpc_stream_destroy(struct grpc_stream *s)
{
    struct grpc_conn *c = s->conn;
    stream_drop_pending(s);
    s->closing = true;
    if (s->opened) {
        c->n_opened--;
        if (s->method->stream_closed)
            s->method->stream_closed(c->srv->userdata, s);
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    if (--c->n_streams == 0)
        grpc_conn_idle_watch(c);
    stream_drop_queue(s);
    grpc_stream_release_request(s);
    free(s->path);
    free(s->message);
    free(s);
}

/* ------------------------------------------------------------------ nghttp2 callbacks */

static int on_begin_headers_cb(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data)
{
    struct grpc_conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct grpc_stream *s = xcalloc(1, sizeof(*s));
    s->conn = c;
    s->id = frame->hd.stream_id;
    s->started_ms = loop_now_ms();
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    c->n_streams++;
    if (nghttp2_session_set_stream_user_data(session, s->id, s) != 0) {
        grpc_stream_destroy(s);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    grpc_guard_deadlines(c);
    return 0;
}

static bool content_type_is_grpc(const uint8_t *v, size_t len)
{
    static const char base[] = "application/grpc";
    size_t n = sizeof(base) - 1;
    if (len < n || strncasecmp((const char *)v, base, n) != 0)
        return false;
    return len == n || v[n] == '+' || v[n] == ';';
}

/* grpc-timeout: 1 to 8 digits and a unit (H M S m u n), in ms rounded up; 0 when it is
 * malformed (then only the server's own bound applies). Only asynchronous calls use it:
 * the others are answered as soon as their request is whole. */
static uint64_t grpc_timeout_ms(const uint8_t *v, size_t len)
{
    uint64_t n = 0;
    if (len < 2 || len > 9)
        return 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return 0;
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    switch (v[len - 1]) {
    case 'H': return n * 3600000u;
    case 'M': return n * 60000u;
    case 'S': return n * 1000u;
    case 'm': return n;
    case 'u': return (n + 999u) / 1000u;
    case 'n': return (n + 999999u) / 1000000u;
    default: return 0;
    }
}

#define NAME_IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)

static int on_header_cb(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers from a client carry nothing we use */
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s)
        return 0;
    if (NAME_IS(":method")) {
        s->header_error |= s->seen_method;
        s->seen_method = true;
        s->method_post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
    } else if (NAME_IS(":path")) {
        /* Method paths are short; a 64 KiB one would only cost memory per stream. */
        s->header_error |= s->seen_path || valuelen == 0 || valuelen > GRPC_MAX_PATH;
        s->seen_path = true;
        if (valuelen > GRPC_MAX_PATH)
            return 0;
        free(s->path);
        s->path = xstrndup((const char *)value, valuelen);
        /* An embedded NUL would make the path look like another one. */
        s->header_error |= strlen(s->path) != valuelen;
    } else if (NAME_IS(":scheme") || NAME_IS(":authority")) {
        /* accepted as is: kubelets <= 1.25 send the socket path as :authority */
    } else if (namelen > 0 && name[0] == ':') {
        s->header_error = true;
    } else if (NAME_IS("content-type")) {
        s->content_type_ok = content_type_is_grpc(value, valuelen);
    } else if (NAME_IS("grpc-timeout")) {
        s->timeout_ms = grpc_timeout_ms(value, valuelen);
    }
    /* te, user-agent, grpc-accept-encoding...: ignored (docs/grpc.md). */
    return 0;
}

/* Flow control is ours (no automatic WINDOW_UPDATE): stream windows are handed back
 * as bytes arrive, the connection window only when the bytes are freed. So the peer
 * can never have more than conn_buffer request bytes outstanding on a connection; the
 * budget charge below also bounds the process. */
static int on_data_chunk_recv_cb(nghttp2_session *session, uint8_t flags, int32_t id,
                                 const uint8_t *data, size_t len, void *user_data)
{
    struct grpc_conn *c = user_data;
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (!s || s->responded || !s->method) {
        (void)nghttp2_session_consume(session, id, len);
        return 0;
    }
    (void)nghttp2_session_consume_stream(session, id, len);
    s->unconsumed += len;
    size_t max = c->srv->lim.max_message;
    size_t cap = grpc_framer_cap_after(&s->req, data, len, max);
    if (cap > s->req.msg_cap && grpc_budget_charge(s, cap - s->req.msg_cap, false) < 0) {
        grpc_stream_abort(s, GRPC_STATUS_RESOURCE_EXHAUSTED,
                          "request dropped: server buffer budget exhausted");
        return 0;
    }
    int r = grpc_framer_feed(&s->req, data, len, max);
    if (r == 0)
        return 0;
    if (r == -ENOTSUP)
        r = stream_reply_status(s, GRPC_STATUS_UNIMPLEMENTED,
                                "compressed messages are not supported");
    else if (r == -EMSGSIZE) {
        _cleanup_free_ char *m = xasprintf("request message larger than %zu bytes", max);
        r = stream_reply_status(s, GRPC_STATUS_RESOURCE_EXHAUSTED, m);
    } else
        r = stream_reply_status(s, GRPC_STATUS_INTERNAL,
                                "more than one request message on a unary call");
    grpc_stream_release_request(s);
    return r < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_frame_recv_cb(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct grpc_conn *c = user_data;
    if (frame->hd.type == NGHTTP2_SETTINGS && !(frame->hd.flags & NGHTTP2_FLAG_ACK) &&
        !c->handshake_done) {
        c->handshake_done = true;
        loop_timer_cancel(c->srv->loop, c->handshake_timer);
        c->handshake_timer = NULL;
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s)
        return 0;
    int r = 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        s->headers_done = true;
        r = stream_check_headers(s);
    }
    if (r == 0 && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        s->req_ended = true;
        grpc_guard_deadlines(s->conn);
        if (!s->responded)
            r = stream_dispatch(s);
    }
    return r < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_frame_send_cb(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    /* We answered before the request was complete (error, oversized message). The
     * reset must follow the response, never overtake it, or the client sees a bare
     * RST_STREAM instead of the status: hence here and not next to the submit. */
    if (s && !s->req_ended)
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close_cb(nghttp2_session *session, int32_t id, uint32_t error_code,
                              void *user_data)
{
    struct grpc_stream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s)
        grpc_stream_destroy(s);
    return 0;
}

nghttp2_session_callbacks *grpc_server_callbacks_new(void)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        oom();
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers_cb);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv_cb);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close_cb);
    return cbs;
}
