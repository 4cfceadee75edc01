/* gRPC unary client over libnghttp2: one non-blocking Unix connection per call, driven
 * by the loop. Used for Registration/Register while the plugin's own server keeps
 * serving on the same loop (the kubelet calls the plugin back before it answers), so
 * nothing here may block.
 *
 * `done` is only ever called from a loop callback (fd event or timer), never from
 * grpc_call_unary() or from inside an nghttp2 callback, so the caller may start or
 * cancel other calls from it. */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_internal.h"

struct grpc_call {
    struct loop *loop;
    int fd;
    nghttp2_session *session;
    struct loop_timer *deadline_timer, *fail_timer;
    unsigned timeout_ms;
    grpc_call_done_fn done;
    void *userdata;
    char *socket_path, *authority, *path, *content_type;

    uint8_t *body;
    size_t body_len, body_off;
    int32_t stream_id;
    uint32_t events;
    bool connected, blocked;
    struct grpc_outbuf out;

    /* response */
    int http_status;
    bool have_grpc_status;
    int grpc_status;
    char *grpc_message;
    struct grpc_framer resp;
    int resp_error;
    bool stream_closed;
    uint32_t rst_code;

    /* an outcome decided before the loop could run (connect failure) */
    int fail_status;
    char *fail_message;
};

static void call_free(struct grpc_call *c)
{
    loop_timer_cancel(c->loop, c->deadline_timer);
    loop_timer_cancel(c->loop, c->fail_timer);
    if (c->session)
        nghttp2_session_del(c->session);
    if (c->fd >= 0) {
        (void)loop_del_io(c->loop, c->fd);
        close(c->fd);
    }
    grpc_framer_reset(&c->resp);
    grpc_outbuf_free(&c->out);
    free(c->socket_path);
    free(c->authority);
    free(c->path);
    free(c->content_type);
    free(c->body);
    free(c->grpc_message);
    free(c->fail_message);
    free(c);
}

void grpc_call_cancel(struct grpc_call *c)
{
    if (c)
        call_free(c);
}

static void call_complete(struct grpc_call *c, int status, const char *message)
{
    if (status == GRPC_STATUS_OK)
        c->done(c->userdata, status, NULL, c->resp.msg, c->resp.msg_len);
    else
        c->done(c->userdata, status, message, NULL, 0);
    call_free(c);
}

/* HTTP status to gRPC status when no grpc-status came (doc/http-grpc-status-mapping). */
static int status_from_http(int http)
{
    switch (http) {
    case 400:
        return GRPC_STATUS_INTERNAL;
    case 401:
        return GRPC_STATUS_UNAUTHENTICATED;
    case 403:
        return GRPC_STATUS_PERMISSION_DENIED;
    case 404:
        return GRPC_STATUS_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return GRPC_STATUS_UNAVAILABLE;
    default:
        return GRPC_STATUS_UNKNOWN;
    }
}

/* The stream is closed: decide the outcome from what arrived. */
static void call_conclude(struct grpc_call *c)
{
    if (c->have_grpc_status) {
        if (c->grpc_status != GRPC_STATUS_OK) {
            call_complete(c, c->grpc_status, c->grpc_message ? c->grpc_message : "");
            return;
        }
        if (c->resp_error == -EMSGSIZE) {
            call_complete(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "response message too large");
            return;
        }
        if (c->resp_error < 0 || grpc_framer_finish(&c->resp) < 0) {
            call_complete(c, GRPC_STATUS_INTERNAL, "server did not send exactly one message");
            return;
        }
        call_complete(c, GRPC_STATUS_OK, NULL);
        return;
    }
    char buf[96];
    if (c->http_status != 0 && c->http_status != 200) {
        snprintf(buf, sizeof(buf), "HTTP status %d from %s", c->http_status, c->socket_path);
        call_complete(c, status_from_http(c->http_status), buf);
    } else if (c->rst_code == NGHTTP2_REFUSED_STREAM) {
        call_complete(c, GRPC_STATUS_UNAVAILABLE, "stream refused by server");
    } else if (c->rst_code == NGHTTP2_CANCEL) {
        call_complete(c, GRPC_STATUS_CANCELLED, "stream cancelled by server");
    } else if (c->rst_code != 0) {
        snprintf(buf, sizeof(buf), "stream reset by server (HTTP/2 error %u)", c->rst_code);
        call_complete(c, GRPC_STATUS_INTERNAL, buf);
    } else {
        call_complete(c, GRPC_STATUS_INTERNAL, "response without grpc-status");
    }
}

/* ------------------------------------------------------------------ nghttp2 callbacks */


static ssize_t body_read_cb(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    struct grpc_call *c = user_data;
    size_t n = u64_min(length, c->body_len - c->body_off);
    memcpy(buf, c->body + c->body_off, n);
    c->body_off += n;
    if (c->body_off == c->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NAME_IS(lit) (namelen == sizeof(lit) - 1 && memcmp(name, lit, namelen) == 0)

static int on_header_cb(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    struct grpc_call *c = user_data;
    if (frame->hd.stream_id != c->stream_id)
        return 0;
    if (NAME_IS(":status")) {
        c->http_status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++)
            c->http_status = c->http_status * 10 + (value[i] - '0');
    } else if (NAME_IS("grpc-status")) {
        c->have_grpc_status = true;
        c->grpc_status = grpc_parse_status(value, valuelen);
    } else if (NAME_IS("grpc-message")) {
        free(c->grpc_message);
        c->grpc_message = grpc_percent_decode(value, valuelen);
    }
    return 0;
}

static int on_data_chunk_recv_cb(nghttp2_session *session, uint8_t flags, int32_t id,
                                 const uint8_t *data, size_t len, void *user_data)
{
    struct grpc_call *c = user_data;
    if (id != c->stream_id || c->resp_error < 0)
        return 0;
    c->resp_error = grpc_framer_feed(&c->resp, data, len, GRPC_DEFAULT_MAX_MESSAGE);
    return 0;
}

static int on_stream_close_cb(nghttp2_session *session, int32_t id, uint32_t error_code,
                              void *user_data)
{
    struct grpc_call *c = user_data;
    if (id == c->stream_id) {
        c->stream_closed = true;
        c->rst_code = error_code;
    }
    return 0;
}

/* ------------------------------------------------------------------ connection */

static int call_flush(struct grpc_call *c)
{
    if (grpc_session_flush(c->session, c->fd, &c->out, &c->blocked) < 0)
        return -EIO;
    uint32_t ev = EPOLLIN | (c->blocked ? EPOLLOUT : 0);
    if (ev != c->events) {
        int r = loop_mod_io(c->loop, c->fd, ev);
        if (r < 0)
            return r;
        c->events = ev;
    }
    return 0;
}

static int call_start(struct grpc_call *c)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        oom();
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close_cb);
    int r = nghttp2_session_client_new(&c->session, cbs, c);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0)
        return -ENOMEM;

    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 } };
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, ELEMENTSOF(iv)) != 0)
        return -EIO;

    /* grpc-timeout lets the server give up too; at most 8 digits (the spec). */
    char timeout[16];
    int tlen = snprintf(timeout, sizeof(timeout), "%um", c->timeout_ms);
    nghttp2_nv nv[] = {
        GRPC_NV_LIT(":method", "POST"),
        GRPC_NV_LIT(":scheme", "http"),
        GRPC_NV(":path", c->path, strlen(c->path)),
        GRPC_NV(":authority", c->authority, strlen(c->authority)),
        GRPC_NV("content-type", c->content_type, strlen(c->content_type)),
        GRPC_NV_LIT("te", "trailers"),
        GRPC_NV("grpc-timeout", timeout, (size_t)tlen),
    };
    size_t n_nv = ELEMENTSOF(nv);
    if (c->timeout_ms == 0 || c->timeout_ms > 99999999u)
        n_nv--;
    nghttp2_data_provider prd = { .read_callback = body_read_cb };
    c->stream_id = nghttp2_submit_request(c->session, NULL, nv, n_nv, &prd, c);
    if (c->stream_id < 0)
        return -EIO;
    c->connected = true;
    return call_flush(c);
}

static void call_io_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct grpc_call *c = userdata;
    char msg[512];

    if (!c->connected) {
        int err = 0;
        socklen_t elen = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
            err = errno;
        if (err == 0 && call_start(c) < 0)
            err = EIO;
        if (err != 0) {
            snprintf(msg, sizeof(msg), "connect %s: %s", c->socket_path, strerror(err));
            call_complete(c, GRPC_STATUS_UNAVAILABLE, msg);
        }
        return;
    }

    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        /* A kubelet's answers to Register are a few hundred bytes; more stays readable
         * (level-triggered) for the next pass. Small, because nghttp2's callbacks and the
         * logger run below this frame and the main thread keeps its deepest stack
         * resident. */
        uint8_t buf[4096];
        ssize_t n = RETRY_EINTR(read(fd, buf, sizeof(buf)));
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            snprintf(msg, sizeof(msg), "connection to %s closed: %s", c->socket_path,
                     n == 0 ? "end of file" : strerror(errno));
            call_complete(c, GRPC_STATUS_UNAVAILABLE, msg);
            return;
        }
        if (n > 0) {
            ssize_t r = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
            if (r < 0) {
                snprintf(msg, sizeof(msg), "HTTP/2 from %s: %s", c->socket_path,
                         nghttp2_strerror((int)r));
                call_complete(c, GRPC_STATUS_INTERNAL, msg);
                return;
            }
        }
        if (c->stream_closed) {
            call_conclude(c);
            return;
        }
    }
    if (call_flush(c) < 0) {
        snprintf(msg, sizeof(msg), "writing to %s failed", c->socket_path);
        call_complete(c, GRPC_STATUS_UNAVAILABLE, msg);
    }
}

static void deadline_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_call *c = userdata;
    char msg[96];
    c->deadline_timer = NULL;
    snprintf(msg, sizeof(msg), "deadline of %u ms exceeded", c->timeout_ms);
    call_complete(c, GRPC_STATUS_DEADLINE_EXCEEDED, msg);
}

static void fail_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_call *c = userdata;
    c->fail_timer = NULL;
    call_complete(c, c->fail_status, c->fail_message);
}

int grpc_call_unary(struct loop *l, const char *socket_path, const char *authority,
                    const char *path, const uint8_t *req, size_t len, unsigned timeout_ms,
                    grpc_call_done_fn done, void *userdata, struct grpc_call **out)
{
    if (len > GRPC_DEFAULT_MAX_MESSAGE)
        return -EMSGSIZE;
    size_t blen;
    _cleanup_free_ uint8_t *body = grpc_frame_message(req, len, &blen);
    return grpc_call_raw(l, socket_path, authority, path, "application/grpc", body, blen,
                         timeout_ms, done, userdata, out);
}

int grpc_call_raw(struct loop *l, const char *socket_path, const char *authority,
                  const char *path, const char *content_type, const uint8_t *body,
                  size_t body_len, unsigned timeout_ms, grpc_call_done_fn done, void *userdata,
                  struct grpc_call **out)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (!socket_path || !path || !done)
        return -EINVAL;
    if (strlen(socket_path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct grpc_call *c = xcalloc(1, sizeof(*c));
    c->loop = l;
    c->fd = fd;
    c->done = done;
    c->userdata = userdata;
    c->timeout_ms = timeout_ms;
    c->socket_path = xstrdup(socket_path);
    c->authority = xstrdup(authority ? authority : "localhost");
    c->path = xstrdup(path);
    c->content_type = xstrdup(content_type);
    c->body = xmalloc(body_len);
    if (body_len)
        memcpy(c->body, body, body_len);
    c->body_len = body_len;

    int r = loop_add_io(l, fd, EPOLLOUT, call_io_cb, c);
    if (r < 0) {
        call_free(c);
        return r;
    }
    c->events = EPOLLOUT;
    if (timeout_ms > 0)
        c->deadline_timer = loop_timer_add(l, timeout_ms, deadline_cb, c);

    /* A Unix connect either completes at once or fails at once, except when the
     * backlog is full (EAGAIN): then wait for writability like EINPROGRESS. */
    if (RETRY_EINTR(connect(fd, (struct sockaddr *)&sa, sizeof(sa))) == 0) {
        r = call_start(c);
        if (r < 0) {
            c->fail_status = GRPC_STATUS_INTERNAL;
            c->fail_message = xasprintf("starting HTTP/2 session to %s failed", socket_path);
        }
    } else if (errno != EINPROGRESS && errno != EAGAIN) {
        c->fail_status = GRPC_STATUS_UNAVAILABLE;
        c->fail_message = xasprintf("connect %s: %s", socket_path, strerror(errno));
    }
    if (c->fail_message) {
        (void)loop_del_io(l, fd);
        close(TAKE_FD(c->fd));
        c->fail_timer = loop_timer_add(l, 0, fail_cb, c);
    }
    if (out)
        *out = c;
    return 0;
}
