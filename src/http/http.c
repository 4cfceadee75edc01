/* The HTTP/1.1 listener: listening socket, accept with a connection cap, one parser per
 * connection (libhttp-parser), the per-request deadline, responses written without
 * blocking. The contract, and why libhttp-parser rather than libmicrohttpd, is in
 * http.h. */
#include "http/http.h"

#include <arpa/inet.h>
#include <http_parser.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>

#include "core/error.h"
#include "core/listener.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/ratelimit.h"

#define URL_MAX 1024u
#define ACCEPTS_PER_WAKEUP 16
#define ACCEPT_PAUSE_MS 1000u
#define WARN_INTERVAL_MS 10000u /* one line per 10 s, with the count left out */

struct http_conn {
    struct http_server *srv;
    struct http_conn *prev, *next;
    int fd;
    http_parser parser;
    char *in;             /* bytes read but not parsed yet (max_head bytes) */
    size_t in_len;
    size_t head_bytes;    /* of the current request, until its headers are complete */
    bool in_request;      /* from its first byte until its response is written */
    bool headers_done, message_done, close_after;
    bool want_out;        /* watching EPOLLOUT (an answer only partly written) */
    int error_status;     /* set by a callback that refuses the request */
    char url[URL_MAX];
    size_t url_len;
    char *out;            /* the response being written */
    size_t out_len, out_off;
    struct loop_timer *deadline;
    uint64_t idle_since_ms, started_ms;
};

struct http_server {
    struct loop *loop;
    int fd;
    unsigned port;
    const struct http_route *routes;
    size_t n_routes;
    void *userdata;
    struct http_limits lim;
    struct http_conn *conns;
    unsigned n_conns;
    struct listener listener;
    struct ratelimit warn_rate;
};

/* ------------------------------------------------------------------ connections */

static void warn_limited(struct http_server *s, const char *what)
{
    unsigned sup;
    if (ratelimit_below(&s->warn_rate, &sup))
        log_warning("metrics listener on port %u: %s (%u more not logged)", s->port, what, sup);
}

static void conn_close(struct http_conn *c)
{
    struct http_server *s = c->srv;
    loop_del_io(s->loop, c->fd);
    close(c->fd);
    loop_timer_cancel(s->loop, c->deadline);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    free(c->out);
    free(c->in);
    free(c);
}

static void on_deadline(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct http_conn *c = userdata;
    c->deadline = NULL;
    log_debug("metrics listener: request not done within %u ms, closing the connection",
              c->srv->lim.request_timeout_ms);
    conn_close(c);
}

static void request_start(struct http_conn *c)
{
    c->in_request = true;
    c->started_ms = loop_now_ms();
    c->deadline = loop_timer_add(c->srv->loop, c->srv->lim.request_timeout_ms, on_deadline, c);
}

static void request_reset(struct http_conn *c)
{
    loop_timer_cancel(c->srv->loop, c->deadline);
    c->deadline = NULL;
    c->in_request = c->headers_done = c->message_done = false;
    c->error_status = 0;
    c->head_bytes = c->url_len = 0;
    c->idle_since_ms = loop_now_ms();
    http_parser_pause(&c->parser, 0);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* Queue the response; HEAD gets the head of what GET would get. */
static void respond(struct http_conn *c, struct http_response *r, bool head_only)
{
    char hdr[256];
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                     r->status, reason_phrase(r->status),
                     r->content_type ? r->content_type : "text/plain; charset=utf-8", r->len,
                     r->status == 405 ? "Allow: GET, HEAD\r\n" : "",
                     c->close_after ? "Connection: close\r\n" : "");
    size_t body = head_only ? 0 : r->len;
    c->out = xmalloc((size_t)n + body + 1);
    memcpy(c->out, hdr, (size_t)n);
    if (body)
        memcpy(c->out + n, r->body, body);
    c->out_len = (size_t)n + body;
    c->out_off = 0;
    free(r->body);
}

static void respond_text(struct http_conn *c, int status, const char *text)
{
    struct http_response r = { .status = status, .body = xstrdup(text), .len = strlen(text) };
    respond(c, &r, c->parser.method == HTTP_HEAD);
}

static void dispatch(struct http_conn *c)
{
    struct http_server *s = c->srv;
    size_t plen = strcspn(c->url, "?#");
    for (size_t i = 0; i < s->n_routes; i++) {
        if (strlen(s->routes[i].path) == plen && memcmp(s->routes[i].path, c->url, plen) == 0) {
            struct http_response r = { .status = 200 };
            s->routes[i].fn(s->userdata, &r);
            respond(c, &r, c->parser.method == HTTP_HEAD);
            return;
        }
    }
    respond_text(c, 404, "not found\n");
}

static int on_message_begin(http_parser *p)
{
    struct http_conn *c = p->data;
    c->url_len = 0;
    c->url[0] = '\0';
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (len >= URL_MAX - c->url_len) {
        c->error_status = 414;
        return -1;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

/* Only HTTP/1.x GET and HEAD, never with a body: refusing here means the body is never
 * read. */
static int on_headers_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->headers_done = true;
    if (p->http_major != 1) {
        c->error_status = 505;
        return -1;
    }
    if (p->method != HTTP_GET && p->method != HTTP_HEAD) {
        c->error_status = 405;
        return -1;
    }
    if ((p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != ULLONG_MAX)) {
        c->error_status = 413;
        return -1;
    }
    return 0;
}

/* One request at a time: the parser stops here until the response is written. */
static int on_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->message_done = true;
    c->close_after = !http_should_keep_alive(p) || p->upgrade;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

/* Write the pending response. Returns 1 when it is all written and the connection waits
 * for its next request, 0 while the rest waits for EPOLLOUT, -1 when the connection was
 * closed (and freed). */
static int conn_write(struct http_conn *c)
{
    struct http_server *s = c->srv;
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->want_out)
                loop_mod_io(s->loop, c->fd, EPOLLOUT);
            c->want_out = true;
            return 0;
        }
        if (w < 0) {
            conn_close(c);
            return -1;
        }
        c->out_off += (size_t)w;
    }
    free(c->out);
    c->out = NULL;
    if (c->close_after) {
        shutdown(c->fd, SHUT_WR);
        conn_close(c);
        return -1;
    }
    request_reset(c);
    if (c->want_out)
        loop_mod_io(s->loop, c->fd, EPOLLIN);
    c->want_out = false;
    return 1;
}

/* Parse what is buffered and answer, request after request (pipelining), until more
 * bytes are needed or an answer waits for EPOLLOUT. Returns 0, or -1 when the
 * connection was closed (and freed). */
static int conn_process(struct http_conn *c)
{
    struct http_server *s = c->srv;
    for (;;) {
        if (c->out) {
            int r = conn_write(c);
            if (r <= 0)
                return r;
        }
        if (c->in_len == 0)
            return 0;
        if (!c->in_request)
            request_start(c);
        /* Never let the parser see more head than the limit allows. */
        size_t feed = c->in_len;
        if (!c->headers_done && feed > s->lim.max_head - c->head_bytes)
            feed = s->lim.max_head - c->head_bytes;
        size_t n = http_parser_execute(&c->parser, &parser_settings, c->in, feed);
        if (!c->headers_done)
            c->head_bytes += n;
        memmove(c->in, c->in + n, c->in_len - n);
        c->in_len -= n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (c->message_done) {
            if (c->parser.upgrade)
                c->close_after = true;
            dispatch(c);
        } else if (e != HPE_OK && e != HPE_PAUSED) {
            c->close_after = true;
            int status = c->error_status ? c->error_status : 400;
            log_debug("metrics listener: refusing a request (%d): %s", status,
                      c->error_status ? reason_phrase(status) : http_errno_name(e));
            respond_text(c, status, status == 400 ? "malformed request\n" : "refused\n");
        } else if (!c->headers_done && c->head_bytes >= s->lim.max_head) {
            c->close_after = true;
            respond_text(c, 431, "request head too large\n");
        } else if (n < feed) {
            /* stopped without an error or a message: an upgrade the parser hands over */
            c->close_after = true;
            respond_text(c, 400, "malformed request\n");
        } else {
            return 0; /* need more bytes */
        }
    }
}

static void on_conn_io(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct http_conn *c = userdata;
    if (c->out) {
        if (events & (EPOLLERR | EPOLLHUP)) {
            conn_close(c);
            return;
        }
        if (conn_write(c) == 1)
            conn_process(c);
        return;
    }
    size_t room = c->srv->lim.max_head - c->in_len;
    if (room == 0) { /* cannot happen: conn_process answers before the buffer fills */
        conn_close(c);
        return;
    }
    ssize_t r = RETRY_EINTR(read(fd, c->in + c->in_len, room));
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r <= 0) {
        conn_close(c); /* peer closed (or failed): nothing to answer to */
        return;
    }
    c->in_len += (size_t)r;
    conn_process(c);
}

/* At the cap: the connection idle longest, else the one whose request is oldest. */
static struct http_conn *pick_victim(struct http_server *s)
{
    struct http_conn *idle = NULL, *busy = NULL;
    for (struct http_conn *c = s->conns; c; c = c->next) {
        if (!c->in_request && (!idle || c->idle_since_ms < idle->idle_since_ms))
            idle = c;
        if (c->in_request && (!busy || c->started_ms < busy->started_ms))
            busy = c;
    }
    return idle ? idle : busy;
}

static struct http_conn *conn_new(struct http_server *s, int fd)
{
    struct http_conn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    c->fd = fd;
    c->in = xmalloc(s->lim.max_head);
    c->idle_since_ms = loop_now_ms();
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (loop_add_io(s->loop, fd, EPOLLIN, on_conn_io, c) < 0) {
        free(c->in);
        free(c);
        return NULL;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    return c;
}

/* Out of fds: make room while a connection can go, else pause accepting (the listener's
 * fixed ACCEPT_PAUSE_MS). Any other failure: wait for the next wakeup. */
static enum listener_next accept_error(void *userdata, int err, bool retried)
{
    struct http_server *s = userdata;
    if (!listener_out_of_fds(err))
        return LISTENER_STOP;
    struct http_conn *v = pick_victim(s);
    if (v) {
        conn_close(v);
        return LISTENER_RETRY;
    }
    warn_limited(s, "out of file descriptors, pausing accept");
    return LISTENER_PAUSE;
}

static void accept_conn(void *userdata, int cfd)
{
    struct http_server *s = userdata;
    if (s->n_conns >= s->lim.max_connections) {
        warn_limited(s, "connection cap reached, closing the idle longest");
        conn_close(pick_victim(s));
    }
    if (!conn_new(s, cfd))
        close(cfd);
}

static const struct listener_ops accept_ops = { .conn = accept_conn, .error = accept_error };

/* ------------------------------------------------------------------ server */

static int listen_on(const struct sockaddr_storage *ss, unsigned len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ss->ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, (const struct sockaddr *)ss, len) < 0 || listen(fd, 64) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int http_server_new(struct loop *l, const char *address, const struct http_route *routes,
                    size_t n_routes, void *userdata, const struct http_limits *limits,
                    struct http_server **out, struct error *err)
{
    struct sockaddr_storage ss;
    unsigned len;
    int r = http_address_parse(address, &ss, &len, err);
    if (r < 0)
        return r;
    int fd = listen_on(&ss, len);
    if (fd == -EAFNOSUPPORT && ss.ss_family == AF_INET6 &&
        IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
        /* every address on a host without IPv6 */
        struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
        uint16_t port = ((struct sockaddr_in6 *)&ss)->sin6_port;
        memset(&ss, 0, sizeof(ss));
        in4->sin_family = AF_INET;
        in4->sin_port = port;
        in4->sin_addr.s_addr = htonl(INADDR_ANY);
        fd = listen_on(&ss, sizeof(*in4));
    }
    if (fd < 0)
        return error_set(err, fd, "listening on %s: %s", address, strerror(-fd));

    struct http_server *s = xcalloc(1, sizeof(*s));
    s->warn_rate = RATELIMIT_INIT(WARN_INTERVAL_MS, 1);
    s->loop = l;
    s->fd = fd;
    s->routes = routes;
    s->n_routes = n_routes;
    s->userdata = userdata;
    if (limits)
        s->lim = *limits;
    s->lim.max_head = s->lim.max_head ? s->lim.max_head : 8192;
    s->lim.max_connections = s->lim.max_connections ? s->lim.max_connections : 16;
    s->lim.request_timeout_ms = s->lim.request_timeout_ms ? s->lim.request_timeout_ms : 10000;
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                   : ((struct sockaddr_in6 *)&bound)->sin6_port);
    listener_init(&s->listener, l, fd, ACCEPTS_PER_WAKEUP,
                  BACKOFF_INIT(ACCEPT_PAUSE_MS, ACCEPT_PAUSE_MS, 0, false), &accept_ops, s);
    r = listener_start(&s->listener);
    if (r < 0) {
        close(fd);
        free(s);
        return error_set(err, r, "listening on %s: %s", address, strerror(-r));
    }
    *out = s;
    return 0;
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    while (s->conns)
        conn_close(s->conns);
    listener_stop(&s->listener);
    close(s->fd);
    free(s);
}

unsigned http_server_port(const struct http_server *s) { return s->port; }

struct http_conn *http_server_adopt(struct http_server *s, int fd)
{
    if (s->n_conns >= s->lim.max_connections)
        conn_close(pick_victim(s));
    return conn_new(s, fd);
}

int http_conn_feed(struct http_conn *c, const uint8_t *data, size_t len)
{
    while (len > 0) {
        if (c->out)
            return 0; /* the peer is not reading: the rest would wait in the socket */
        size_t room = c->srv->lim.max_head - c->in_len;
        size_t k = len < room ? len : room;
        memcpy(c->in + c->in_len, data, k);
        c->in_len += k;
        data += k;
        len -= k;
        if (conn_process(c) < 0)
            return -1;
    }
    return 0;
}
