/* The gRPC client against the gRPC server, both on one loop in this process (so any
 * blocking would deadlock the test), plus the server's protocol checks through raw
 * request bodies, connection failures and deadlines.
 *
 *   test-grpc-client                 all in-process cases
 *   test-grpc-client --peer <sock>   unary OK / error against another server (grpcio) */
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_internal.h"
#include "tests/common/scratch.h"

#define FAIL_MSG "bad request: ünïcode % 100%\n"

struct expect {
    const char *name;
    int status;
    const char *message;        /* exact, or NULL */
    const char *message_prefix; /* or prefix, or NULL */
    const uint8_t *resp;
    size_t resp_len;
    bool never;                 /* cancelled: done must not run */
    bool done;
};

static struct loop *loop;
static bool in_start;
static unsigned pending, failures;
static unsigned async_started, async_cancelled;
static void maybe_quit(void);

static void check(bool ok, const char *name, const char *what)
{
    if (!ok) {
        fprintf(stderr, "FAIL %s: %s\n", name, what);
        failures++;
    }
}

static void done_cb(void *userdata, int status, const char *message, const uint8_t *resp,
                    size_t len)
{
    struct expect *e = userdata;
    check(!in_start, e->name, "done called from inside grpc_call_unary");
    check(!e->never, e->name, "done called after grpc_call_cancel");
    check(!e->done, e->name, "done called twice");
    e->done = true;
    if (status != e->status) {
        fprintf(stderr, "FAIL %s: status %d (%s), want %d\n", e->name, status,
                message ? message : "", e->status);
        failures++;
    }
    if (e->message)
        check(message && streq(message, e->message), e->name, "message differs");
    if (e->message_prefix)
        check(message && startswith(message, e->message_prefix), e->name, "message prefix");
    if (e->resp)
        check(len == e->resp_len && memcmp(resp, e->resp, len) == 0, e->name, "reply differs");
    printf("%s %s: status %d %s\n", e->done ? "ok" : "??", e->name, status, message ? message : "");
    --pending;
    maybe_quit();
}

/* The run ends when every call is done and the server has seen every cancel it owes. */
static unsigned want_cancelled;
static void maybe_quit(void)
{
    if (pending == 0 && async_cancelled >= want_cancelled)
        loop_quit(loop, 0);
}

static struct grpc_call *start(const char *sock, const char *path, const void *req, size_t len,
                               unsigned timeout_ms, struct expect *e)
{
    struct grpc_call *c = NULL;
    in_start = true;
    int r = grpc_call_unary(loop, sock, "localhost", path, req, len, timeout_ms, done_cb, e, &c);
    in_start = false;
    check(r == 0, e->name, "grpc_call_unary failed");
    if (r == 0 && !e->never)
        pending++;
    return c;
}

static void start_raw(const char *sock, const char *ctype, const void *body, size_t len,
                      struct expect *e)
{
    int r = grpc_call_raw(loop, sock, "localhost", "/test.Echo/Unary", ctype, body, len, 5000,
                          done_cb, e, NULL);
    check(r == 0, e->name, "grpc_call_raw failed");
    if (r == 0)
        pending++;
}

/* ------------------------------------------------------------ in-process server */

static void srv_echo(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->data = xmalloc(len);
    if (len)
        memcpy(reply->data, req, len);
    reply->len = len;
}

static void srv_fail(void *ud, const uint8_t *req, size_t len, struct grpc_reply *reply)
{
    reply->status = GRPC_STATUS_INVALID_ARGUMENT;
    reply->message = xstrdup(FAIL_MSG);
}

/* Asynchronous calls: /Later answers from a timer, /Now from inside the handler, /Never
 * not at all (the peer's cancel, the reply deadline or the server's end settles it). */
struct later {
    struct grpc_pending *p;
    uint8_t *data;
    size_t len;
    struct loop_timer *timer;
};
static struct later *laters[8];

static void later_fire(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct later *w = userdata;
    check(grpc_pending_context(w->p) == w, "async-later", "context lost");
    grpc_pending_reply(w->p, GRPC_STATUS_OK, w->data, w->len, NULL);
    for (size_t i = 0; i < ELEMENTSOF(laters); i++)
        if (laters[i] == w)
            laters[i] = NULL;
    free(w->data);
    free(w);
}

static void srv_later(void *ud, struct grpc_pending *p, const uint8_t *req, size_t len)
{
    struct later *w = xcalloc(1, sizeof(*w));
    w->p = p;
    w->data = xmalloc(len + 1);
    memcpy(w->data, req, len); /* the request is gone once the handler returns */
    w->len = len;
    w->timer = loop_timer_add(loop, 50, later_fire, w);
    grpc_pending_set_context(p, w);
    for (size_t i = 0; i < ELEMENTSOF(laters); i++)
        if (!laters[i]) {
            laters[i] = w;
            break;
        }
    async_started++;
}

static void srv_now(void *ud, struct grpc_pending *p, const uint8_t *req, size_t len)
{
    async_started++;
    if (len == 1 && req[0] == 'e')
        grpc_pending_reply(p, GRPC_STATUS_FAILED_PRECONDITION, NULL, 0, "at once");
    else
        grpc_pending_reply(p, GRPC_STATUS_OK, req, len, NULL);
}

static void srv_never(void *ud, struct grpc_pending *p, const uint8_t *req, size_t len)
{
    async_started++;
    check(grpc_pending_context(p) == NULL, "async-never", "context not NULL at start");
}

static void srv_cancelled(void *ud, struct grpc_pending *p)
{
    struct later *w = grpc_pending_context(p);
    if (w) { /* a /Later call whose peer went first: its timer must not answer */
        check(false, "async-later", "cancelled before its answer");
        loop_timer_cancel(loop, w->timer);
        free(w->data);
        free(w);
    }
    async_cancelled++;
    maybe_quit();
}

static const struct grpc_method methods[] = {
    { .path = "/test.Echo/Unary", .unary = srv_echo },
    { .path = "/test.Echo/Fail", .unary = srv_fail },
    { .path = "/test.Async/Later", .unary_async = srv_later, .pending_cancelled = srv_cancelled },
    { .path = "/test.Async/Now", .unary_async = srv_now, .pending_cancelled = srv_cancelled },
    { .path = "/test.Async/Never", .unary_async = srv_never, .pending_cancelled = srv_cancelled },
};

static int listen_only(const char *path, bool do_listen)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        (do_listen && listen(fd, 8) < 0)) {
        perror("listen_only");
        exit(1);
    }
    return fd;
}

static void cancel_call_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    grpc_call_cancel(userdata);
    pending--;
    maybe_quit();
}

struct later_start {
    const char *sock;
    struct expect *e;
};

static void start_later_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct later_start *ls = userdata;
    start(ls->sock, "/test.Echo/Unary", "n", 1, 5000, ls->e);
}

static void free_server_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_server **srv = userdata;
    grpc_server_free(*srv);
    *srv = NULL;
}

static int run_peer(const char *sock)
{
    struct expect ok = { .name = "peer-unary", .status = GRPC_STATUS_OK,
                         .resp = (const uint8_t *)"ping", .resp_len = 4 };
    struct expect fail = { .name = "peer-fail", .status = GRPC_STATUS_INVALID_ARGUMENT,
                           .message = FAIL_MSG };
    struct expect unknown = { .name = "peer-unknown", .status = GRPC_STATUS_UNIMPLEMENTED };
    start(sock, "/test.Echo/Unary", "ping", 4, 5000, &ok);
    start(sock, "/test.Echo/Fail", "x", 1, 5000, &fail);
    start(sock, "/test.Echo/Nope", "x", 1, 5000, &unknown);
    return loop_run(loop);
}

int main(int argc, char **argv)
{
    if (loop_new(&loop) < 0)
        return 1;
    if (argc == 3 && streq(argv[1], "--peer")) {
        int r = run_peer(argv[2]);
        loop_free(loop);
        return r < 0 || failures ? 1 : 0;
    }

    const char *dir = scratch_socket_dir("gdp-grpc-client-"); /* sockets: sun_path's bound */
    _cleanup_free_ char *sock = xasprintf("%s/srv.sock", dir);
    _cleanup_free_ char *silent = xasprintf("%s/silent.sock", dir);
    _cleanup_free_ char *refusing = xasprintf("%s/refusing.sock", dir);
    _cleanup_free_ char *missing = xasprintf("%s/missing.sock", dir);

    struct grpc_server *srv = NULL;
    struct grpc_server_limits lim = { .max_message = 4u * 1024u * 1024u };
    if (grpc_server_new(loop, sock, methods, ELEMENTSOF(methods), NULL, &lim, &srv) < 0)
        return 1;
    int silent_fd = listen_only(silent, true);     /* accepts nothing, answers nothing */
    int refusing_fd = listen_only(refusing, false); /* bound, not listening */

    size_t big_len = 3u * 1024u * 1024u;
    _cleanup_free_ uint8_t *big = xmalloc(big_len);
    for (size_t i = 0; i < big_len; i++)
        big[i] = (uint8_t)(i * 7);

    struct expect e_ok = { .name = "unary", .status = GRPC_STATUS_OK,
                           .resp = (const uint8_t *)"hello", .resp_len = 5 };
    struct expect e_empty = { .name = "unary-empty", .status = GRPC_STATUS_OK,
                              .resp = (const uint8_t *)"", .resp_len = 0 };
    struct expect e_big = { .name = "unary-3MiB", .status = GRPC_STATUS_OK, .resp = big,
                            .resp_len = big_len };
    struct expect e_fail = { .name = "error-status", .status = GRPC_STATUS_INVALID_ARGUMENT,
                             .message = FAIL_MSG };
    struct expect e_unknown = { .name = "unknown-method", .status = GRPC_STATUS_UNIMPLEMENTED,
                                .message = "unknown method /test.Echo/Nope" };
    struct expect e_missing = { .name = "connect-enoent", .status = GRPC_STATUS_UNAVAILABLE,
                                .message_prefix = "connect " };
    struct expect e_refused = { .name = "connect-refused", .status = GRPC_STATUS_UNAVAILABLE,
                                .message_prefix = "connect " };
    struct expect e_deadline = { .name = "deadline", .status = GRPC_STATUS_DEADLINE_EXCEEDED };
    struct expect e_cancel = { .name = "cancelled", .never = true };

    start(sock, "/test.Echo/Unary", "hello", 5, 5000, &e_ok);
    start(sock, "/test.Echo/Unary", "", 0, 5000, &e_empty);
    start(sock, "/test.Echo/Unary", big, big_len, 10000, &e_big);
    start(sock, "/test.Echo/Fail", "x", 1, 5000, &e_fail);
    start(sock, "/test.Echo/Nope", "x", 1, 5000, &e_unknown);
    start(missing, "/test.Echo/Unary", "x", 1, 5000, &e_missing);
    start(refusing, "/test.Echo/Unary", "x", 1, 5000, &e_refused);
    start(silent, "/test.Echo/Unary", "x", 1, 200, &e_deadline);
    grpc_call_cancel(start(silent, "/test.Echo/Unary", "x", 1, 100, &e_cancel));
    grpc_call_cancel(start(missing, "/test.Echo/Unary", "x", 1, 100, &e_cancel));

    /* Server-side protocol checks, through hand-made request bodies. */
    static const uint8_t two[] = { 0, 0, 0, 0, 1, 'a', 0, 0, 0, 0, 1, 'b' };
    static const uint8_t compressed[] = { 1, 0, 0, 0, 1, 'a' };
    static const uint8_t truncated[] = { 0, 0, 0, 0, 9, 'a' };
    static const uint8_t huge[] = { 0, 0xff, 0xff, 0xff, 0xff };
    static const uint8_t one[] = { 0, 0, 0, 0, 1, 'a' };
    struct expect r_two = { .name = "two-messages", .status = GRPC_STATUS_INTERNAL };
    struct expect r_comp = { .name = "compressed", .status = GRPC_STATUS_UNIMPLEMENTED };
    struct expect r_trunc = { .name = "truncated", .status = GRPC_STATUS_INTERNAL };
    struct expect r_none = { .name = "no-message", .status = GRPC_STATUS_INTERNAL };
    struct expect r_huge = { .name = "declared-4GiB", .status = GRPC_STATUS_RESOURCE_EXHAUSTED };
    struct expect r_ctype = { .name = "content-type", .status = GRPC_STATUS_UNKNOWN,
                              .message_prefix = "HTTP status 415" };
    struct expect r_suffix = { .name = "content-type+proto", .status = GRPC_STATUS_OK,
                               .resp = (const uint8_t *)"a", .resp_len = 1 };
    start_raw(sock, "application/grpc", two, sizeof(two), &r_two);
    start_raw(sock, "application/grpc", compressed, sizeof(compressed), &r_comp);
    start_raw(sock, "application/grpc", truncated, sizeof(truncated), &r_trunc);
    start_raw(sock, "application/grpc", NULL, 0, &r_none);
    start_raw(sock, "application/grpc", huge, sizeof(huge), &r_huge);
    start_raw(sock, "text/plain", one, sizeof(one), &r_ctype);
    start_raw(sock, "application/grpc+proto", one, sizeof(one), &r_suffix);

    /* Asynchronous unary calls: answered later, at once (OK and error), never (the
     * client's own deadline closes its connection: the owner is told), past the
     * server's reply deadline (DEADLINE_EXCEEDED, owner told), the peer cancelling
     * first, and a server freed with a call still pending (owner told, no leak). */
    struct expect a_later = { .name = "async-later", .status = GRPC_STATUS_OK,
                              .resp = (const uint8_t *)"later", .resp_len = 5 };
    struct expect a_later0 = { .name = "async-later-empty", .status = GRPC_STATUS_OK,
                               .resp = (const uint8_t *)"", .resp_len = 0 };
    struct expect a_now = { .name = "async-now", .status = GRPC_STATUS_OK,
                            .resp = (const uint8_t *)"now", .resp_len = 3 };
    struct expect a_now_err = { .name = "async-now-error",
                                .status = GRPC_STATUS_FAILED_PRECONDITION, .message = "at once" };
    struct expect a_client_deadline = { .name = "async-client-deadline",
                                        .status = GRPC_STATUS_DEADLINE_EXCEEDED };
    struct expect a_grpc_timeout = { .name = "async-grpc-timeout",
                                     .status = GRPC_STATUS_DEADLINE_EXCEEDED };
    struct expect a_server_deadline = { .name = "async-reply-timeout",
                                        .status = GRPC_STATUS_DEADLINE_EXCEEDED,
                                        .message = "no answer within 300 ms" };
    struct expect a_cancel = { .name = "async-peer-cancels", .never = true };
    struct expect a_freed = { .name = "async-server-freed", .status = GRPC_STATUS_UNAVAILABLE,
                              .message = "server shutting down" };
    struct expect a_kept = { .name = "async-not-evicted", .status = GRPC_STATUS_UNAVAILABLE,
                             .message = "server shutting down" };
    struct expect a_newcomer = { .name = "async-cap-newcomer", .status = GRPC_STATUS_UNAVAILABLE };
    start(sock, "/test.Async/Later", "later", 5, 5000, &a_later);
    start(sock, "/test.Async/Later", "", 0, 5000, &a_later0);
    start(sock, "/test.Async/Now", "now", 3, 5000, &a_now);
    start(sock, "/test.Async/Now", "e", 1, 5000, &a_now_err);
    /* the client gives up at 200 ms and closes; its grpc-timeout would have the server
     * give up at the same time: either way the owner hears of it once */
    start(sock, "/test.Async/Never", "x", 1, 200, &a_client_deadline);
    /* the server's own bound, shorter than the client's patience */
    _cleanup_free_ char *sock2 = xasprintf("%s/short.sock", dir);
    struct grpc_server *srv2 = NULL;
    struct grpc_server_limits lim2 = { .reply_timeout_ms = 300 };
    if (grpc_server_new(loop, sock2, methods, ELEMENTSOF(methods), NULL, &lim2, &srv2) < 0)
        return 1;
    start(sock2, "/test.Async/Never", "x", 1, 5000, &a_server_deadline);
    /* grpc-timeout shorter than the bound: the server answers at the peer's deadline
     * (the client's own timer may win the race; both are DEADLINE_EXCEEDED) */
    start(sock2, "/test.Async/Never", "y", 1, 100, &a_grpc_timeout);
    /* the peer abandons its call once the server holds it */
    struct grpc_call *doomed = start(sock, "/test.Async/Never", "z", 1, 5000, &a_cancel);
    pending++; /* settled by the cancel below, not by done */
    loop_timer_add(loop, 100, cancel_call_cb, doomed);
    /* a server freed while a call waits on it */
    _cleanup_free_ char *sock3 = xasprintf("%s/freed.sock", dir);
    struct grpc_server *srv3 = NULL;
    if (grpc_server_new(loop, sock3, methods, ELEMENTSOF(methods), NULL, NULL, &srv3) < 0)
        return 1;
    start(sock3, "/test.Async/Never", "w", 1, 5000, &a_freed);
    loop_timer_add(loop, 150, free_server_cb, &srv3);
    /* at the connection cap, a connection with an unanswered call is not the one closed
     * to make room (it is the kubelet's Prepare): the newcomer goes, the call stays until
     * the server is freed */
    _cleanup_free_ char *sock4 = xasprintf("%s/cap.sock", dir);
    struct grpc_server *srv4 = NULL;
    struct grpc_server_limits lim4 = { .max_connections = 1 };
    if (grpc_server_new(loop, sock4, methods, ELEMENTSOF(methods), NULL, &lim4, &srv4) < 0)
        return 1;
    start(sock4, "/test.Async/Never", "k", 1, 5000, &a_kept);
    struct later_start ls = { sock4, &a_newcomer };
    loop_timer_add(loop, 100, start_later_cb, &ls);
    loop_timer_add(loop, 300, free_server_cb, &srv4);
    want_cancelled = 6; /* client deadline, reply timeout, grpc-timeout, peer cancel, freed x2 */

    int r = loop_run(loop);
    check(r == 0, "loop", "loop_run failed");
    struct expect *all[] = { &e_ok, &e_empty, &e_big, &e_fail, &e_unknown, &e_missing,
                             &e_refused, &e_deadline, &r_two, &r_comp, &r_trunc, &r_none,
                             &r_huge, &r_ctype, &r_suffix, &a_later, &a_later0, &a_now,
                             &a_now_err, &a_client_deadline, &a_grpc_timeout,
                             &a_server_deadline, &a_freed, &a_kept, &a_newcomer };
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        check(all[i]->done, all[i]->name, "never completed");
    check(async_started == 10, "async", "not every asynchronous call reached its handler");
    check(async_cancelled == want_cancelled, "async", "owner not told exactly once per call");
    for (size_t i = 0; i < ELEMENTSOF(laters); i++)
        check(!laters[i], "async-later", "answer still owed");
    check(srv3 == NULL && srv4 == NULL, "async-server-freed", "server not freed");

    grpc_server_free(srv2);
    grpc_server_free(srv);
    check(access(sock, F_OK) < 0, "free", "socket not unlinked");
    close(silent_fd);
    close(refusing_fd);
    unlink(silent);
    unlink(refusing);
    scratch_remove(dir);
    loop_free(loop);
    printf("%u failures\n", failures);
    return failures ? 1 : 0;
}
