/* grpc-test-server <socket> [--handshake-ms N] [--idle-ms N] [--max-conn N]
 *                           [--max-message N] [--max-streams N] [--request-ms N]
 *                           [--conn-buffer N] [--process-buffer N]
 *
 * The gRPC layer's server with a few test methods, for the Python and hostile-input
 * tests. Runs until SIGTERM/SIGINT, then frees the server (open streams get
 * UNAVAILABLE). Prints one line per closed stream on stdout ("stream-closed <n>").
 *
 *   /test.Echo/Unary   echoes the request
 *   /test.Echo/Fail    INVALID_ARGUMENT with a message that needs percent-encoding
 *   /test.Echo/Big     request: decimal byte count; reply of that size, byte i = i % 251
 *   /test.Echo/Stream  request: [N, mode]; sends "msg <i>" for i < N, one per loop turn;
 *                      mode 0 then finishes OK, mode 1 keeps the stream open
 *   /test.Echo/Refuse  streaming method that refuses with FAILED_PRECONDITION
 *   /test.Echo/Flood   request: count (u32 BE), size (u32 BE); sends `count` messages of
 *                      `size` bytes starting "<seq %08u>", 100 per loop turn, then OK
 *   /test.Echo/Stats   "connections=.. queued=.. queued_max=.. opened=.. closed=..
 *                      flood_done=.. held=.. held_max=.. evictions=.. budget_resets=..
 *                      deadline_resets=.." */
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_internal.h"

struct tstream {
    struct tstream *next;
    struct grpc_stream *s;
    struct loop_timer *timer;
    unsigned sent, count, size;
    bool keep_open, flood;
};

static struct loop *loop;
static struct grpc_server *server;
static struct tstream *tstreams;
static unsigned n_opened, n_closed, n_flood_done;

static void unary_echo(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->data = xmalloc(len);
    if (len)
        memcpy(reply->data, req, len);
    reply->len = len;
}

static void unary_fail(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->status = GRPC_STATUS_INVALID_ARGUMENT;
    reply->message = xstrdup("bad request: ünïcode % 100%\n");
}

static void unary_big(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    _cleanup_free_ char *s = xstrndup((const char *)req, len);
    size_t n = strtoul(s, NULL, 10);
    reply->data = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        reply->data[i] = (uint8_t)(i % 251);
    reply->len = n;
}

static void unary_stats(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    struct grpc_server_counters k;
    grpc_server_counters(server, &k);
    char *s = xasprintf("connections=%u queued=%zu queued_max=%zu opened=%u closed=%u "
                        "flood_done=%u held=%zu held_max=%zu evictions=%u budget_resets=%u "
                        "deadline_resets=%u",
                        grpc_server_connections(server), grpc_server_queued_bytes(server),
                        grpc_server_queued_bytes_max(server), n_opened, n_closed, n_flood_done,
                        k.held_bytes, k.held_max, k.evictions, k.budget_resets, k.deadline_resets);
    reply->data = (uint8_t *)s;
    reply->len = strlen(s);
}

static void tick(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct tstream *ts = userdata;
    ts->timer = NULL;
    unsigned batch = ts->flood ? 100 : 1;
    for (unsigned i = 0; i < batch && ts->sent < ts->count; i++, ts->sent++) {
        _cleanup_free_ uint8_t *m = xcalloc(1, ts->size + 32);
        int n = snprintf((char *)m, ts->size + 32, ts->flood ? "%08u" : "msg %u", ts->sent);
        size_t len = ts->flood ? ts->size : (size_t)n;
        if (grpc_stream_send(ts->s, m, len) < 0)
            return;
    }
    if (ts->sent < ts->count) {
        ts->timer = loop_timer_add(l, 0, tick, ts);
        return;
    }
    if (ts->flood)
        n_flood_done++;
    if (!ts->keep_open)
        grpc_stream_finish(ts->s, GRPC_STATUS_OK, NULL);
}

static struct tstream *tstream_new(struct grpc_stream *s)
{
    struct tstream *ts = xcalloc(1, sizeof(*ts));
    ts->s = s;
    ts->next = tstreams;
    tstreams = ts;
    n_opened++;
    return ts;
}

static int stream_open(void *ud, struct grpc_stream *s, const uint8_t *req, size_t len,
                       char **message)
{
    if (len < 2) {
        *message = xstrdup("request must be [count, mode]");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    struct tstream *ts = tstream_new(s);
    ts->count = req[0];
    ts->keep_open = req[1] == 1;
    ts->timer = loop_timer_add(loop, 0, tick, ts);
    return GRPC_STATUS_OK;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int flood_open(void *ud, struct grpc_stream *s, const uint8_t *req, size_t len,
                      char **message)
{
    if (len != 8) {
        *message = xstrdup("request must be count and size, 4 bytes each");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    struct tstream *ts = tstream_new(s);
    ts->count = be32(req);
    ts->size = be32(req + 4);
    if (ts->size < 8)
        ts->size = 8;
    ts->flood = true;
    ts->timer = loop_timer_add(loop, 0, tick, ts);
    return GRPC_STATUS_OK;
}

static int refuse_open(void *ud, struct grpc_stream *s, const uint8_t *req, size_t len,
                       char **message)
{
    *message = xstrdup("refused");
    return GRPC_STATUS_FAILED_PRECONDITION;
}

static void stream_closed(void *ud, struct grpc_stream *s)
{
    for (struct tstream **p = &tstreams; *p; p = &(*p)->next) {
        struct tstream *ts = *p;
        if (ts->s != s)
            continue;
        *p = ts->next;
        loop_timer_cancel(loop, ts->timer);
        free(ts);
        break;
    }
    n_closed++;
    printf("stream-closed %u\n", n_closed);
    fflush(stdout);
}

static const struct grpc_method methods[] = {
    { .path = "/test.Echo/Unary", .unary = unary_echo },
    { .path = "/test.Echo/Fail", .unary = unary_fail },
    { .path = "/test.Echo/Big", .unary = unary_big },
    { .path = "/test.Echo/Stats", .unary = unary_stats },
    { .path = "/test.Echo/Stream", .stream_open = stream_open, .stream_closed = stream_closed },
    { .path = "/test.Echo/Flood", .stream_open = flood_open, .stream_closed = stream_closed },
    { .path = "/test.Echo/Refuse", .stream_open = refuse_open, .stream_closed = stream_closed },
};

static void signal_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) == sizeof(si))
        loop_quit(l, 0);
}

int main(int argc, char **argv)
{
    struct grpc_server_limits lim = { 0 };
    if (argc < 2) {
        fprintf(stderr, "usage: %s <socket> [--handshake-ms N] ...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        unsigned long v = strtoul(argv[i + 1], NULL, 10);
        if (streq(argv[i], "--handshake-ms"))
            lim.handshake_timeout_ms = (unsigned)v;
        else if (streq(argv[i], "--idle-ms"))
            lim.idle_timeout_ms = (unsigned)v;
        else if (streq(argv[i], "--max-conn"))
            lim.max_connections = (unsigned)v;
        else if (streq(argv[i], "--max-message"))
            lim.max_message = v;
        else if (streq(argv[i], "--max-streams"))
            lim.max_streams = (unsigned)v;
        else if (streq(argv[i], "--request-ms"))
            lim.request_timeout_ms = (unsigned)v;
        else if (streq(argv[i], "--conn-buffer"))
            lim.conn_buffer = v;
        else if (streq(argv[i], "--process-buffer"))
            lim.process_buffer = v;
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (getenv("GDP_GRPC_DEBUG"))
        log_set_level(LOG_DEBUG);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    _cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return 1;

    int r = loop_new(&loop);
    if (r < 0)
        return 1;
    r = grpc_server_new(loop, argv[1], methods, ELEMENTSOF(methods), NULL, &lim, &server);
    if (r < 0) {
        fprintf(stderr, "grpc_server_new %s: %s\n", argv[1], strerror(-r));
        return 1;
    }
    (void)loop_add_io(loop, sfd, EPOLLIN, signal_cb, NULL);
    printf("ready\n");
    fflush(stdout);
    r = loop_run(loop);
    grpc_server_free(server);
    (void)loop_del_io(loop, sfd);
    loop_free(loop);
    printf("exit opened=%u closed=%u\n", n_opened, n_closed);
    return r < 0 ? 1 : 0;
}
