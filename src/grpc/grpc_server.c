/* The gRPC server's socket and connections: the listening socket's setup and
 * teardown, one nghttp2 server session per connection, reading the socket into it and
 * writing what it queued, the per-connection timers (handshake, idle, flush) and the
 * connection's lifetime. What happens on a stream is in grpc_server_stream.c, the
 * defences (accept path, caps, budgets, deadline) in grpc_server_guard.c. See grpc.h
 * for the contract and docs/grpc.md for the rules.
 *
 * Only the loop callbacks here (fd events, timers) and grpc_server_free write to a
 * socket or free a connection: the re-entrancy rule in grpc_server_internal.h. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_server_internal.h"

#define READ_BUF_SIZE (64u * 1024u)

/* ------------------------------------------------------------------ connections */

/* All output goes through one gathered write per pass (grpc_session_flush). */
static int conn_send(struct grpc_conn *c)
{
    if (c->fd < 0)
        return 0;
    return grpc_session_flush(c->session, c->fd, &c->out, &c->blocked);
}

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

static void flush_timer_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_conn *c = userdata;
    c->flush_timer = NULL;
    if (conn_flush(c) < 0)
        grpc_conn_free(c);
}

/* The only way the stream side gets output written: from a loop timer, never
 * from inside the nghttp2 callback or handler that asked. */
void grpc_conn_schedule_flush(struct grpc_conn *c)
{
    if (!c->dead && !c->flush_timer)
        c->flush_timer = loop_timer_add(c->srv->loop, 0, flush_timer_cb, c);
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
        grpc_stream_destroy(c->streams);
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
    /* A connection with a stream (the kubelet's ListAndWatch) is never idle: no timer
     * until its last stream ends (grpc_conn_idle_watch), so it costs no wakeups. Lazy
     * re-arm otherwise: activity only stamps last_activity_ms, never the timer. */
    if (c->n_streams == 0)
        c->idle_timer = loop_timer_add(l, quiet >= idle ? idle : idle - quiet, idle_timer_cb, c);
}

void grpc_conn_idle_watch(struct grpc_conn *c)
{
    if (!c->idle_timer && !c->dead && c->n_streams == 0) {
        c->last_activity_ms = loop_now_ms();
        c->idle_timer = loop_timer_add(c->srv->loop, c->srv->lim.idle_timeout_ms, idle_timer_cb, c);
    }
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

/* One read buffer for every connection of every server: reads happen on the loop thread
 * only, and conn_feed() hands the bytes to nghttp2 (which keeps what it needs) before the
 * next read, so the device plugin's sockets and DRA's two share the pages they touch. */
static uint8_t read_buf[READ_BUF_SIZE];

static void conn_io_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct grpc_conn *c = userdata;
    int r = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = RETRY_EINTR(read(fd, read_buf, sizeof(read_buf)));
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            grpc_conn_free(c);
            return;
        }
        if (n > 0)
            r = conn_feed(c, read_buf, (size_t)n);
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
    struct ucred cred;
    socklen_t cred_len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred_len == sizeof(cred))
        c->peer_pid = cred.pid;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    c->handshake_timer = loop_timer_add(srv->loop, srv->lim.handshake_timeout_ms,
                                        handshake_timer_cb, c);
    c->idle_timer = loop_timer_add(srv->loop, srv->lim.idle_timeout_ms, idle_timer_cb, c);
    grpc_conn_schedule_flush(c); /* our SETTINGS */
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

    /* The socket appears under its name only once it listens: bound and listening under a
     * hidden temporary name in the same directory, then renamed over the old one. A peer
     * that watches the directory (the kubelet's plugin watcher dials a registration socket
     * the moment it appears, and skips names starting with '.') can never find it bound
     * but refusing connections. A path too long for the temporary name is bound directly. */
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    char tmp[sizeof(sa.sun_path)];
    bool staged = (size_t)snprintf(tmp, sizeof(tmp), "%.*s.%s.tmp", (int)dir_len, path,
                                   path + dir_len) < sizeof(tmp);
    if (staged)
        memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
    const char *bound = staged ? tmp : path;

    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (unlink(bound) < 0 && errno != ENOENT)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    if (chmod(bound, 0600) < 0 || listen(fd, 128) < 0 ||
        (staged && rename(bound, path) < 0)) {
        int r = -errno;
        unlink(bound);
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
    if (!srv->lim.reply_timeout_ms)
        srv->lim.reply_timeout_ms = 60000;
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

    srv->cbs = grpc_server_callbacks_new();
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
            else if (s->awaiting) /* tells the owner, answers the peer (best effort) */
                grpc_stream_abort(s, GRPC_STATUS_UNAVAILABLE, "server shutting down");
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
