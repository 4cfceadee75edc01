/* gRPC server over libnghttp2: one server session per accepted Unix connection, all on
 * the loop thread. See grpc.h for the contract and docs/grpc.md for the rules.
 *
 * Re-entrancy rule: user handlers run inside nghttp2 callbacks, and user code calls
 * grpc_stream_send/finish from anywhere. None of those paths ever writes to the socket
 * or frees a connection; they only queue and arm a 0 ms flush timer. Sockets are
 * written and connections freed only from loop callbacks (fd events, timers) and
 * grpc_server_free, so no caller ever sees an object vanish under it. */
#include <inttypes.h>
#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_server_internal.h"

#define READ_BUF_SIZE (64u * 1024u)
#define GRPC_MAX_PATH 1024u

static int conn_flush(struct grpc_conn *c);

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

static void flush_timer_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_conn *c = userdata;
    c->flush_timer = NULL;
    if (conn_flush(c) < 0)
        grpc_conn_free(c);
}

static void conn_schedule_flush(struct grpc_conn *c)
{
    if (!c->dead && !c->flush_timer)
        c->flush_timer = loop_timer_add(c->srv->loop, 0, flush_timer_cb, c);
}

/* Wake the data provider if it is parked and make sure the session gets written. */
static void stream_kick(struct grpc_stream *s)
{
    if (s->responded && !s->in_open && s->deferred) {
        s->deferred = false;
        (void)nghttp2_session_resume_data(s->conn->session, s->id);
    }
    conn_schedule_flush(s->conn);
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

/* Error replies are trailers-only: one HEADERS frame with END_STREAM. */
static int stream_reply_status(struct grpc_stream *s, int status, const char *message)
{
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
    conn_schedule_flush(s->conn);
}

static void stream_destroy(struct grpc_stream *s)
{
    struct grpc_conn *c = s->conn;
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
    c->n_streams--;
    stream_drop_queue(s);
    grpc_stream_release_request(s);
    free(s->path);
    free(s->message);
    free(s);
}

/* ------------------------------------------------------------------ nghttp2 callbacks */

/* All output goes through one gathered write per pass (grpc_session_flush). */
static int conn_send(struct grpc_conn *c)
{
    if (c->fd < 0)
        return 0;
    return grpc_session_flush(c->session, c->fd, &c->out, &c->blocked);
}

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
        stream_destroy(s);
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    grpc_guard_request_started(c);
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
    }
    /* te, grpc-timeout, user-agent, grpc-accept-encoding...: ignored (docs/grpc.md). */
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
        stream_destroy(s);
    return 0;
}

/* ------------------------------------------------------------------ connections */

static int conn_flush(struct grpc_conn *c)
{
    if (conn_send(c) < 0)
        return -EIO;
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
        return -ECONNRESET;
    uint32_t ev = EPOLLIN | (c->blocked ? EPOLLOUT : 0);
    if (ev != c->events && c->fd >= 0) {
        int r = loop_mod_io(c->srv->loop, c->fd, ev);
        if (r < 0)
            return r;
        c->events = ev;
    }
    return 0;
}

void grpc_conn_free(struct grpc_conn *c)
{
    struct grpc_server *srv = c->srv;
    c->dead = true;
    loop_timer_cancel(srv->loop, c->handshake_timer);
    loop_timer_cancel(srv->loop, c->idle_timer);
    loop_timer_cancel(srv->loop, c->flush_timer);
    loop_timer_cancel(srv->loop, c->request_timer);
    c->handshake_timer = c->idle_timer = c->flush_timer = c->request_timer = NULL;
    /* nghttp2_session_del() does not report stream closes: do it here. */
    while (c->streams)
        stream_destroy(c->streams);
    nghttp2_session_del(c->session);
    grpc_outbuf_free(&c->out);
    if (c->fd >= 0) {
        (void)loop_del_io(srv->loop, c->fd);
        close(c->fd);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->n_conns--;
    log_debug("grpc: connection %p closed, %u left", (void *)c, srv->n_conns);
    free(c);
}

/* Best effort: whatever the socket takes now (trailers first, they come out of the
 * data providers), then GOAWAY. Never waits. */
void grpc_conn_close(struct grpc_conn *c)
{
    (void)conn_send(c);
    (void)nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                                nghttp2_session_get_last_proc_stream_id(c->session),
                                NGHTTP2_NO_ERROR, NULL, 0);
    (void)conn_send(c);
    grpc_conn_free(c);
}

static void handshake_timer_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_conn *c = userdata;
    c->handshake_timer = NULL;
    log_debug("grpc: no client preface and SETTINGS within %u ms, closing",
              c->srv->lim.handshake_timeout_ms);
    grpc_conn_free(c);
}

static void idle_timer_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_conn *c = userdata;
    uint64_t idle = c->srv->lim.idle_timeout_ms;
    uint64_t quiet = loop_now_ms() - c->last_activity_ms;
    c->idle_timer = NULL;
    if (c->n_streams == 0 && quiet >= idle) {
        log_debug("grpc: connection idle for %" PRIu64 " ms, closing", quiet);
        grpc_conn_close(c);
        return;
    }
    /* Lazy re-arm: activity only stamps last_activity_ms, it never touches the timer. */
    c->idle_timer = loop_timer_add(l, c->n_streams > 0 || quiet >= idle ? idle : idle - quiet,
                                   idle_timer_cb, c);
}

static int conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len)
{
    c->last_activity_ms = loop_now_ms();
    ssize_t n = nghttp2_session_mem_recv(c->session, data, len);
    if (n < 0) {
        log_debug("grpc: closing connection: %s", nghttp2_strerror((int)n));
        /* nghttp2 may have queued a GOAWAY saying why: best effort. */
        (void)conn_send(c);
        return -EPROTO;
    }
    return conn_flush(c);
}

static void conn_io_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct grpc_conn *c = userdata;
    int r = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = RETRY_EINTR(read(fd, c->srv->rbuf, READ_BUF_SIZE));
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            grpc_conn_free(c);
            return;
        }
        if (n > 0)
            r = conn_feed(c, c->srv->rbuf, (size_t)n);
    } else {
        r = conn_flush(c);
    }
    if (r < 0)
        grpc_conn_free(c);
}

struct grpc_conn *grpc_conn_new(struct grpc_server *srv, int fd)
{
    struct grpc_conn *c = xcalloc(1, sizeof(*c));
    c->srv = srv;
    c->fd = fd;
    static uint64_t serial;
    c->serial = ++serial;
    c->last_activity_ms = loop_now_ms();
    if (nghttp2_session_server_new2(&c->session, srv->cbs, c, srv->opt) != 0) {
        free(c);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, srv->lim.max_streams },
    };
    /* The connection window is the per-connection budget (docs/grpc.md, "Limits"). */
    int32_t window = (int32_t)u64_min(srv->lim.conn_buffer, INT32_MAX);
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, ELEMENTSOF(iv)) != 0 ||
        nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, window) != 0 ||
        loop_add_io(srv->loop, fd, EPOLLIN, conn_io_cb, c) < 0) {
        nghttp2_session_del(c->session);
        free(c);
        return NULL;
    }
    c->events = EPOLLIN;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    c->handshake_timer = loop_timer_add(srv->loop, srv->lim.handshake_timeout_ms,
                                        handshake_timer_cb, c);
    c->idle_timer = loop_timer_add(srv->loop, srv->lim.idle_timeout_ms, idle_timer_cb, c);
    conn_schedule_flush(c); /* our SETTINGS */
    return c;
}

/* ------------------------------------------------------------------ server */

int grpc_server_new(struct loop *l, const char *path, const struct grpc_method *methods,
                    size_t n_methods, void *userdata, const struct grpc_server_limits *limits,
                    struct grpc_server **out)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);

    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    if (chmod(path, 0600) < 0 || listen(fd, 128) < 0) {
        int r = -errno;
        unlink(path);
        return r;
    }

    struct grpc_server *srv = xcalloc(1, sizeof(*srv));
    srv->loop = l;
    srv->path = xstrdup(path);
    srv->methods = methods;
    srv->n_methods = n_methods;
    srv->userdata = userdata;
    if (limits)
        srv->lim = *limits;
    if (!srv->lim.max_message)
        srv->lim.max_message = GRPC_DEFAULT_MAX_MESSAGE;
    if (!srv->lim.max_connections)
        srv->lim.max_connections = 64;
    if (!srv->lim.max_streams)
        srv->lim.max_streams = 100;
    if (!srv->lim.handshake_timeout_ms)
        srv->lim.handshake_timeout_ms = 5000;
    if (!srv->lim.idle_timeout_ms)
        srv->lim.idle_timeout_ms = 300000;
    if (!srv->lim.request_timeout_ms)
        srv->lim.request_timeout_ms = 10000;
    /* One whole max-size request must fit on a connection, and one connection's worth
     * in the process. */
    size_t one = srv->lim.max_message + GRPC_PREFIX_LEN;
    if (!srv->lim.conn_buffer)
        srv->lim.conn_buffer = srv->lim.max_message + 64u * 1024u;
    if (srv->lim.conn_buffer < one)
        srv->lim.conn_buffer = one;
    if (!srv->lim.process_buffer)
        srv->lim.process_buffer = 16u * 1024u * 1024u;
    if (srv->lim.process_buffer < srv->lim.conn_buffer)
        srv->lim.process_buffer = srv->lim.conn_buffer;
    srv->rbuf = xmalloc(READ_BUF_SIZE);

    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        oom();
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers_cb);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv_cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv_cb);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close_cb);
    srv->cbs = cbs;
    if (nghttp2_option_new(&srv->opt) != 0)
        oom();
    /* Old kubelets send the socket path as :authority, which nghttp2's checks reject;
     * the checks that matter are made in on_header_cb / stream_check_headers. */
    nghttp2_option_set_no_http_messaging(srv->opt, 1);
    /* Connection windows follow the buffer budget (on_data_chunk_recv_cb). */
    nghttp2_option_set_no_auto_window_update(srv->opt, 1);
    grpc_guard_server_add(srv);

    srv->fd = TAKE_FD(fd);
    int r = grpc_guard_listen(srv);
    if (r < 0) {
        unlink(path);
        close(srv->fd);
        srv->fd = -1;
        grpc_server_free(srv);
        return r;
    }
    *out = srv;
    return 0;
}

void grpc_server_free(struct grpc_server *srv)
{
    if (!srv)
        return;
    while (srv->conns) {
        struct grpc_conn *c = srv->conns;
        for (struct grpc_stream *s = c->streams; s; s = s->next)
            if (s->opened)
                grpc_stream_finish(s, GRPC_STATUS_UNAVAILABLE, "server shutting down");
        grpc_conn_close(c);
    }
    grpc_guard_unlisten(srv);
    grpc_guard_server_remove(srv);
    if (srv->fd >= 0) {
        close(srv->fd);
        unlink(srv->path);
    }
    nghttp2_session_callbacks_del(srv->cbs);
    nghttp2_option_del(srv->opt);
    free(srv->rbuf);
    free(srv->path);
    free(srv);
}

unsigned grpc_server_connections(const struct grpc_server *srv) { return srv->n_conns; }

size_t grpc_server_queued_bytes(const struct grpc_server *srv) { return srv->queued; }
size_t grpc_server_queued_bytes_max(const struct grpc_server *srv) { return srv->queued_max; }

struct grpc_conn *grpc_server_adopt(struct grpc_server *srv, int fd)
{
    return grpc_conn_new(srv, fd);
}

int grpc_server_conn_feed(struct grpc_conn *gc, const uint8_t *data, size_t len)
{
    struct grpc_conn *c = gc;
    int r = conn_feed(c, data, len);
    if (r < 0)
        grpc_conn_free(c);
    return r;
}
