/* The API client's one connection: non-blocking TCP connect, TLS 1.2 through mbedtls
 * (ALPN h2, server verified against the CA, client certificate when configured) or
 * plain h2c, and the nghttp2 client session on top, all driven by loop callbacks.
 *
 * The connection is opened by the first request and re-opened with capped exponential
 * backoff (with jitter) after a failure, only while requests wait: an idle client holds
 * no timer. A connection that closes cleanly while idle (server GOAWAY, idle timeout)
 * is reopened by the next request. Why a connection failed is logged once per new
 * reason; the requests themselves fail only at their deadlines.
 *
 * A hung server (a stopped process, a dead peer the kernel still holds) is not kept:
 * connecting + the TLS handshake have the request timeout as deadline, and when a stream
 * times out on a connection that is up, a PING must get any answer within the request
 * timeout or the connection is dropped. Both timers exist only while that is pending, so
 * an idle connection costs no wakeups. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

#define OUT_GATHER (64u * 1024u)

static void conn_close(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    loop_timer_cancel(k->loop, c->check_timer);
    c->check_timer = NULL;
    if (c->h2) {
        nghttp2_session_del(c->h2);
        c->h2 = NULL;
    }
    if (c->fd >= 0) {
        (void)loop_del_io(k->loop, c->fd);
        close(c->fd);
        c->fd = -1;
    }
    if (c->ssl_live) {
        (void)mbedtls_ssl_session_reset(&c->ssl);
        c->ssl_live = false;
    }
    c->out_len = c->out_off = 0;
    c->events = 0;
}

static void conn_open(struct kube *k);

static void backoff_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube *k = userdata;
    k->conn.backoff_timer = NULL;
    k->conn.state = KUBE_CONN_IDLE;
    /* Only while someone waits: an idle client keeps no connection attempt going. */
    if (k->queue_head)
        conn_open(k);
}

static void conn_fail(struct kube *k, int err, const char *why)
{
    struct kube_conn *c = &k->conn;
    if (c->state == KUBE_CONN_READY && !c->lost_ms)
        c->lost_ms = loop_now_ms();
    if (!c->last_error || !streq(c->last_error, why)) {
        log_warning("kube: API server %s (%s): %s; retrying with backoff", k->creds.authority,
                    k->creds.source ? k->creds.source : "", why);
        free(c->last_error);
        c->last_error = xstrdup(why);
    }
    conn_close(k);
    c->state = KUBE_CONN_BACKOFF;
    c->backoff_timer = loop_timer_add(k->loop, backoff_next(&c->backoff), backoff_cb, k);
    kube_on_disconnected(k, err);
}

int kube_conn_wait_error(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    return c->state != KUBE_CONN_READY && c->connect_error < 0 ? c->connect_error : -ETIMEDOUT;
}

static int set_events(struct kube *k, uint32_t ev)
{
    struct kube_conn *c = &k->conn;
    if (ev == c->events)
        return 0;
    int r = loop_mod_io(k->loop, c->fd, ev);
    if (r == 0)
        c->events = ev;
    return r;
}

/* ------------------------------------------------------------------ raw I/O */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    ssize_t n = RETRY_EINTR(send(*(int *)ctx, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT));
    if (n >= 0)
        return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
                                                 : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    ssize_t n = RETRY_EINTR(recv(*(int *)ctx, buf, len, MSG_DONTWAIT));
    if (n >= 0)
        return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
}

/* Bytes written (> 0), 0 when the socket is full, <0 on error. */
static ssize_t conn_write(struct kube *k, const uint8_t *buf, size_t len)
{
    struct kube_conn *c = &k->conn;
    if (c->ssl_live) {
        int n = mbedtls_ssl_write(&c->ssl, buf, len);
        if (n == MBEDTLS_ERR_SSL_WANT_WRITE || n == MBEDTLS_ERR_SSL_WANT_READ)
            return 0;
        return n < 0 ? -EIO : n;
    }
    int n = bio_send(&c->fd, buf, len);
    if (n == MBEDTLS_ERR_SSL_WANT_WRITE)
        return 0;
    return n < 0 ? -EIO : n;
}

/* Bytes read (> 0), 0 at end of stream, -EAGAIN when nothing more, other <0 on error. */
static ssize_t conn_read(struct kube *k, uint8_t *buf, size_t len)
{
    struct kube_conn *c = &k->conn;
    int n = c->ssl_live ? mbedtls_ssl_read(&c->ssl, buf, len) : bio_recv(&c->fd, buf, len);
    if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
        return -EAGAIN;
    if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY)
        return 0;
    return n < 0 ? -ECONNRESET : n;
}

void kube_conn_flush(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    if (c->state != KUBE_CONN_READY)
        return;
    bool blocked = false;
    for (;;) {
        while (c->out_off < c->out_len) {
            ssize_t n = conn_write(k, c->out + c->out_off, c->out_len - c->out_off);
            if (n < 0) {
                conn_fail(k, -ECONNRESET, "writing to the connection failed");
                return;
            }
            if (n == 0) {
                blocked = true;
                goto done;
            }
            c->out_off += (size_t)n;
        }
        c->out_len = c->out_off = 0;
        while (c->out_len < OUT_GATHER) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(c->h2, &data);
            if (n < 0) {
                conn_fail(k, -EPROTO, nghttp2_strerror((int)n));
                return;
            }
            if (n == 0)
                break;
            c->out = grow_array(c->out, &c->out_cap, c->out_len + (size_t)n, 1);
            memcpy(c->out + c->out_len, data, (size_t)n);
            c->out_len += (size_t)n;
        }
        if (c->out_len == 0)
            break;
    }
done:
    if (!c->out_len && c->out_cap > KUBE_BUF_KEEP) { /* grown for a burst of writes */
        free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
    if (!blocked && !nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2)) {
        /* GOAWAY exchanged and every stream done: a clean end, not a failure (but if
         * the server is going away for a while, the outage counts from here). */
        if (!c->lost_ms)
            c->lost_ms = loop_now_ms();
        conn_close(k);
        c->state = KUBE_CONN_IDLE;
        kube_on_disconnected(k, -ECONNRESET);
        if (k->queue_head)
            conn_open(k);
        return;
    }
    if (set_events(k, EPOLLIN | (blocked ? EPOLLOUT : 0)) < 0)
        conn_fail(k, -EIO, "epoll_ctl failed");
}

/* ------------------------------------------------------------------ setup steps */

static void session_start(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    loop_timer_cancel(k->loop, c->check_timer);
    c->check_timer = NULL;
    if (nghttp2_session_client_new(&c->h2, kube_h2_callbacks(), k) != 0)
        oom();
    /* No server push; a large window so that a watch stream is never throttled by us. */
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20 },
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, ELEMENTSOF(iv)) != 0) {
        conn_fail(k, -EPROTO, "HTTP/2 settings");
        return;
    }
    c->state = KUBE_CONN_READY;
    free(c->last_error);
    c->last_error = NULL;
    c->up_ms = loop_now_ms();
    if (c->lost_ms) {
        /* Back after an outage: the watches' first requests wait a random part of it, so
         * that a fleet that lost the server together does not come back in one second;
         * the connection attempts themselves were spread by the backoff's jitter, whose
         * delay had grown with the outage. */
        uint64_t now = loop_now_ms(), down = now - c->lost_ms;
        uint64_t hold = backoff_after_outage(down, KUBE_OUTAGE_SPREAD_MAX_MS);
        c->lost_ms = 0;
        c->spread_until_ms = now + hold;
        log_full(down >= 1000 ? LOG_INFO : LOG_DEBUG,
                 "kube: API server %s reachable again after %" PRIu64 " ms; watches resume in %" PRIu64 " ms",
                 k->creds.authority, down, hold);
    }
    kube_on_connected(k);
    kube_conn_flush(k);
}

/* mbedtls 2.28 matches only DNS names: an IP address is checked here against the
 * certificate's IP subjectAltNames, which is where API server certificates put it. */
static bool peer_has_ip(struct kube *k)
{
    unsigned char ip[16];
    size_t len;
    if (inet_pton(AF_INET, k->creds.server_name, ip) == 1)
        len = 4;
    else if (inet_pton(AF_INET6, k->creds.server_name, ip) == 1)
        len = 16;
    else
        return false;
    const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&k->conn.ssl);
    for (const mbedtls_x509_sequence *s = crt ? &crt->subject_alt_names : NULL; s; s = s->next)
        if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            s->buf.len == len && memcmp(s->buf.p, ip, len) == 0)
            return true;
    return false;
}

static void handshake_step(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    int r = mbedtls_ssl_handshake(&c->ssl);
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
        if (set_events(k, r == MBEDTLS_ERR_SSL_WANT_READ ? EPOLLIN : EPOLLOUT) < 0)
            conn_fail(k, -EIO, "epoll_ctl failed");
        return;
    }
    char why[400];
    if (r != 0) {
        char e[160];
        mbedtls_strerror(r, e, sizeof(e));
        uint32_t flags = mbedtls_ssl_get_verify_result(&c->ssl);
        if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags != 0 && flags != (uint32_t)-1) {
            char info[200];
            mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
            for (char *p = info; *p; p++)
                if (*p == '\n')
                    *p = ';';
            snprintf(why, sizeof(why), "TLS handshake: server certificate not accepted: %s", info);
        } else {
            snprintf(why, sizeof(why), "TLS handshake: %s", e);
        }
        conn_fail(k, -ECONNREFUSED, why);
        return;
    }
    if (!k->creds.insecure && kube_is_ip(k->creds.server_name) && !peer_has_ip(k)) {
        snprintf(why, sizeof(why), "TLS: the server certificate has no IP address %s",
                 k->creds.server_name);
        conn_fail(k, -ECONNREFUSED, why);
        return;
    }
    const char *proto = mbedtls_ssl_get_alpn_protocol(&c->ssl);
    if (!proto || !streq(proto, "h2")) {
        conn_fail(k, -EPROTO, "TLS: the server did not agree to HTTP/2 (ALPN h2)");
        return;
    }
    c->state = KUBE_CONN_READY;
    session_start(k);
}

static void connected(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    int err = 0;
    socklen_t elen = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        err = errno;
    if (err != 0) {
        char why[160];
        snprintf(why, sizeof(why), "connect: %s", strerror(err));
        c->connect_error = -err;
        conn_fail(k, -err, why);
        return;
    }
    c->connect_error = 0;
    if (!k->creds.tls) {
        session_start(k);
        return;
    }
    mbedtls_ssl_set_bio(&c->ssl, &c->fd, bio_send, bio_recv, NULL);
    /* A name goes to SNI and certificate matching; an IP address is checked by us. */
    int r = mbedtls_ssl_set_hostname(&c->ssl, kube_is_ip(k->creds.server_name) || k->creds.insecure
                                                  ? NULL : k->creds.server_name);
    if (r != 0) {
        conn_fail(k, -EINVAL, "TLS server name");
        return;
    }
    c->ssl_live = true;
    c->state = KUBE_CONN_HANDSHAKE;
    handshake_step(k);
}

static void conn_io_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct kube *k = userdata;
    struct kube_conn *c = &k->conn;
    switch (c->state) {
    case KUBE_CONN_CONNECTING:
        connected(k);
        return;
    case KUBE_CONN_HANDSHAKE:
        handshake_step(k);
        return;
    case KUBE_CONN_READY:
        break;
    default:
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        uint8_t buf[16384];
        for (;;) {
            ssize_t n = conn_read(k, buf, sizeof(buf));
            if (n == -EAGAIN)
                break;
            if (n <= 0) {
                conn_fail(k, -ECONNRESET, n == 0 ? "the server closed the connection"
                                                 : "the connection was reset");
                kube_dispatch(k);
                return;
            }
            if (c->check_timer) {
                /* The server answers: not hung (the stream that timed out was slow). */
                loop_timer_cancel(k->loop, c->check_timer);
                c->check_timer = NULL;
            }
            ssize_t r = nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
            if (r < 0) {
                conn_fail(k, -EPROTO, nghttp2_strerror((int)r));
                kube_dispatch(k);
                return;
            }
        }
    }
    kube_conn_flush(k);
    kube_dispatch(k);
}

static void check_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube *k = userdata;
    struct kube_conn *c = &k->conn;
    char why[160];
    c->check_timer = NULL;
    if (c->state == KUBE_CONN_READY)
        snprintf(why, sizeof(why), "no answer to a PING within %u ms after a request timed out (hung?)",
                 k->timeout_ms);
    else
        snprintf(why, sizeof(why), "%s not done within %u ms",
                 c->state == KUBE_CONN_HANDSHAKE ? "TLS handshake" : "connect", k->timeout_ms);
    conn_fail(k, -ETIMEDOUT, why);
    kube_dispatch(k);
}

void kube_conn_probe(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    if (c->state != KUBE_CONN_READY || c->check_timer)
        return;
    if (nghttp2_submit_ping(c->h2, NGHTTP2_FLAG_NONE, NULL) != 0)
        oom();
    c->check_timer = loop_timer_add(k->loop, k->timeout_ms, check_cb, k);
    kube_conn_flush(k);
}

static void conn_open(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    struct kube_creds *cr = &k->creds;
    char why[300];
    struct sockaddr_storage ss;
    socklen_t ss_len = 0;
    if (kube_numeric_address(cr->host, cr->port, &ss, &ss_len) < 0) {
        /* A name is resolved here, synchronously, once per connection attempt. */
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
        struct addrinfo *ai = NULL;
        int r = getaddrinfo(cr->host, cr->port, &hints, &ai);
        if (r != 0) {
            snprintf(why, sizeof(why), "resolving %s: %s", cr->host, gai_strerror(r));
            c->state = KUBE_CONN_CONNECTING;
            conn_fail(k, -EHOSTUNREACH, why);
            return;
        }
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        ss_len = ai->ai_addrlen;
        freeaddrinfo(ai);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, sizeof(why), "socket: %s", strerror(errno));
        c->state = KUBE_CONN_CONNECTING;
        conn_fail(k, -errno, why);
        return;
    }
    int one = 1, idle = 30, intvl = 10, cnt = 3;
    /* A dead peer is found by the kernel (about 60 s), without waking us while idle. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    c->fd = fd;
    c->state = KUBE_CONN_CONNECTING;
    int r = RETRY_EINTR(connect(fd, (struct sockaddr *)&ss, ss_len));
    int cerr = errno;
    if (r < 0 && cerr != EINPROGRESS) {
        snprintf(why, sizeof(why), "connect: %s", strerror(cerr));
        c->connect_error = -cerr;
        conn_fail(k, -cerr, why);
        return;
    }
    if (loop_add_io(k->loop, fd, EPOLLOUT, conn_io_cb, k) < 0) {
        conn_fail(k, -EIO, "epoll_ctl failed");
        return;
    }
    c->events = EPOLLOUT;
    /* A server that accepts (its kernel does, even when the process is stopped) but
     * never finishes the handshake must not hold the connection forever. */
    c->check_timer = loop_timer_add(k->loop, k->timeout_ms, check_cb, k);
}

/* The connect and the handshake moved on as far as they can without waiting (see
 * kube_send_now): nothing is read past the handshake, so nothing is called back. */
void kube_conn_advance(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    while (c->state == KUBE_CONN_CONNECTING || c->state == KUBE_CONN_HANDSHAKE) {
        /* poll's bits are epoll's (EPOLLIN == POLLIN ... on Linux) */
        struct pollfd pfd = { .fd = c->fd, .events = (short)c->events };
        enum kube_conn_state was = c->state;
        uint32_t events = c->events;
        if (RETRY_EINTR(poll(&pfd, 1, 0)) <= 0)
            return;
        conn_io_cb(k->loop, c->fd, (uint32_t)pfd.revents, k);
        if (c->state == was && c->events == events)
            return; /* waits for the server */
    }
}

void kube_conn_want(struct kube *k)
{
    if (k->conn.state == KUBE_CONN_IDLE)
        conn_open(k);
}

void kube_conn_free(struct kube *k)
{
    struct kube_conn *c = &k->conn;
    loop_timer_cancel(k->loop, c->backoff_timer);
    conn_close(k);
    if (c->tls_ready) {
        mbedtls_ssl_free(&c->ssl);
        mbedtls_ssl_config_free(&c->conf);
        mbedtls_x509_crt_free(&c->ca);
        mbedtls_x509_crt_free(&c->cert);
        mbedtls_pk_free(&c->key);
        mbedtls_ctr_drbg_free(&c->drbg);
    }
    free(c->out);
    free(c->last_error);
    *c = (struct kube_conn){ .fd = -1 };
}
