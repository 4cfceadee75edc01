/* The gRPC server's defences against peers that hold resources: the accept path
 * (connection cap that makes room by closing the idle-longest connection that is not
 * the owner's client, else refuses the new one, logged once a minute; backoff
 * when the process is out of fds), the budgets on buffered bytes per connection and
 * per process (the longest holder loses), and the request deadline. Every line a
 * peer can provoke here is rate limited. The numbers are in docs/operations.md,
 * "Resource budgets". Loop thread only. */
#include <inttypes.h>
#include <sys/socket.h>

#include "core/listener.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "grpc/grpc_server_internal.h"

#define ACCEPT_BATCH 64              /* accepts per wakeup: other fds get their turn */
#define ACCEPT_BACKOFF_MIN_MS 10u
#define ACCEPT_BACKOFF_MAX_MS 1000u
#define LOG_INTERVAL_MS 60000u       /* one line per kind of peer-made trouble */
#define ACCEPT_LOG_INTERVAL_MS 10000u

/* Every live server of the process: fds and the process budget are shared. */
static struct grpc_server *servers;
static size_t held_total, held_max;

void grpc_guard_server_add(struct grpc_server *srv)
{
    srv->rate_accept = RATELIMIT_INIT(ACCEPT_LOG_INTERVAL_MS, 1);
    /* Refusals have a limiter of their own: an eviction line must not silence the
     * refusals that follow it for a minute. */
    srv->rate_evict = srv->rate_refuse = srv->rate_budget = srv->rate_deadline =
        RATELIMIT_INIT(LOG_INTERVAL_MS, 1);
    srv->snext = servers;
    servers = srv;
}

void grpc_guard_server_remove(struct grpc_server *srv)
{
    for (struct grpc_server **p = &servers; *p; p = &(*p)->snext)
        if (*p == srv) {
            *p = srv->snext;
            return;
        }
}

/* ------------------------------------------------------------------ budgets */

static struct grpc_stream *pick_holder_in(struct grpc_conn *c, const struct grpc_stream *not,
                                          struct grpc_stream *best)
{
    for (struct grpc_stream *s = c->streams; s; s = s->next) {
        if (s == not || s->held == 0 || s->killed)
            continue;
        if (!best || s->held_since_ms < best->held_since_ms ||
            (s->held_since_ms == best->held_since_ms && s->held > best->held))
            best = s;
    }
    return best;
}

/* The stream that has held bytes the longest (the largest on a tie), in c or in the
 * whole process. A request in flight or a reply being read holds its bytes for
 * milliseconds; a peer that parks a body or never reads holds them for ever, so it is
 * the one that goes. */
static struct grpc_stream *pick_holder(struct grpc_conn *c, const struct grpc_stream *not)
{
    if (c)
        return pick_holder_in(c, not, NULL);
    struct grpc_stream *best = NULL;
    for (struct grpc_server *srv = servers; srv; srv = srv->snext)
        for (struct grpc_conn *k = srv->conns; k; k = k->next)
            if (!k->dead)
                best = pick_holder_in(k, not, best);
    return best;
}

static bool evict_holder(struct grpc_stream *v, const char *which)
{
    struct grpc_server *srv = v->conn->srv;
    size_t bytes = v->held;
    uint64_t age = loop_now_ms() - v->held_since_ms;
    unsigned sup;
    if (ratelimit_below(&srv->rate_budget, &sup))
        log_warning("grpc: %s: %s buffer budget (%zu bytes) exhausted: dropping stream %d, "
                    "which held %zu bytes for %" PRIu64 " ms (%u more not logged)",
                    srv->path, which,
                    streq(which, "connection") ? srv->lim.conn_buffer : srv->lim.process_buffer,
                    v->id, bytes, age, sup);
    srv->budget_resets++;
    grpc_stream_abort(v, GRPC_STATUS_RESOURCE_EXHAUSTED,
                      "request dropped: server buffer budget exhausted");
    return v->held < bytes;
}

static void charge(struct grpc_stream *s, size_t add)
{
    if (s->held == 0)
        s->held_since_ms = loop_now_ms();
    s->held += add;
    s->conn->held += add;
    held_total += add;
    if (held_total > held_max)
        held_max = held_total;
}

int grpc_budget_charge(struct grpc_stream *s, size_t add, bool must)
{
    struct grpc_conn *c = s->conn;
    const struct grpc_server_limits *lim = &c->srv->lim;
    while (c->held + add > lim->conn_buffer) {
        struct grpc_stream *v = pick_holder(c, s);
        if (!v || !evict_holder(v, "connection"))
            break;
    }
    if (c->held + add > lim->conn_buffer && !must)
        return -ENOBUFS;
    while (held_total + add > lim->process_buffer) {
        struct grpc_stream *v = pick_holder(NULL, s);
        if (!v || !evict_holder(v, "process"))
            break;
    }
    if (held_total + add > lim->process_buffer && !must)
        return -ENOBUFS;
    charge(s, add);
    return 0;
}

void grpc_budget_release(struct grpc_stream *s, size_t sub)
{
    s->held -= sub;
    s->conn->held -= sub;
    held_total -= sub;
    if (s->held == 0)
        s->held_since_ms = 0;
}

/* ------------------------------------------------------------------ request deadline */

/* When s must have moved on: its request whole (request_timeout_ms from its HEADERS),
 * or, for an asynchronous unary call, its owner's answer there; UINT64_MAX when nothing
 * is owed. */
static uint64_t stream_deadline(const struct grpc_stream *s, uint64_t request_timeout)
{
    if (s->killed)
        return UINT64_MAX;
    if (!s->req_ended && !s->responded)
        return s->started_ms + request_timeout;
    if (s->awaiting)
        return s->reply_deadline_ms;
    return UINT64_MAX;
}

static void request_timer_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct grpc_conn *c = userdata;
    struct grpc_server *srv = c->srv;
    uint64_t now = loop_now_ms(), timeout = srv->lim.request_timeout_ms;
    unsigned expired = 0, live = 0, sup;
    c->request_timer = NULL;
    for (struct grpc_stream *s = c->streams; s; s = s->next) {
        if (s->killed)
            continue;
        uint64_t deadline = stream_deadline(s, timeout);
        if (deadline > now) {
            live++;
            continue;
        }
        if (s->awaiting) {
            /* The owner is told (pending_cancelled) and the peer gets the status. */
            _cleanup_free_ char *m = xasprintf("no answer within %" PRIu64 " ms",
                                               s->reply_deadline_ms - s->started_ms);
            if (ratelimit_below(&srv->rate_deadline, &sup))
                log_warning("grpc: %s: stream %d: %s, answering DEADLINE_EXCEEDED "
                            "(%u more not logged)", srv->path, s->id, m, sup);
            srv->deadline_resets++;
            grpc_stream_abort(s, GRPC_STATUS_DEADLINE_EXCEEDED, m);
            live++;
            continue;
        }
        if (!s->headers_done) {
            /* Nothing else can arrive on the connection before the CONTINUATION
             * that ends this block (RFC 9113 6.10): the connection is stuck. */
            if (ratelimit_below(&srv->rate_deadline, &sup))
                log_warning("grpc: %s: request headers not complete within %" PRIu64
                            " ms, closing the connection (%u more not logged)",
                            srv->path, timeout, sup);
            srv->deadline_resets++;
            grpc_conn_close(c);
            return;
        }
        _cleanup_free_ char *m = xasprintf("request not complete within %" PRIu64 " ms",
                                           timeout);
        if (ratelimit_below(&srv->rate_deadline, &sup))
            log_warning("grpc: %s: stream %d: %s, resetting it (%u more not logged)",
                        srv->path, s->id, m, sup);
        srv->deadline_resets++;
        grpc_stream_abort(s, GRPC_STATUS_DEADLINE_EXCEEDED, m);
        expired++;
    }
    if (expired > 0 && live == 0) {
        log_debug("grpc: %s: connection left with expired requests only, closing", srv->path);
        grpc_conn_close(c);
        return;
    }
    grpc_guard_deadlines(c);
}

void grpc_guard_deadlines(struct grpc_conn *c)
{
    struct grpc_server *srv = c->srv;
    uint64_t next = UINT64_MAX;
    if (c->dead)
        return;
    for (struct grpc_stream *s = c->streams; s; s = s->next) {
        uint64_t d = stream_deadline(s, srv->lim.request_timeout_ms);
        if (d < next)
            next = d;
    }
    loop_timer_cancel(srv->loop, c->request_timer);
    c->request_timer = NULL;
    if (next == UINT64_MAX)
        return;
    uint64_t now = loop_now_ms();
    c->request_timer = loop_timer_add(srv->loop, next > now ? next - now : 0, request_timer_cb, c);
}

/* ------------------------------------------------------------------ accept path */

/* Whether c's peer process holds only a few connections of its server: a client such as
 * the kubelet (one connection, perhaps a second), not a peer piling them up. Only for a
 * peer whose pid we see (pid 0 is every peer outside our pid namespace at once). */
static bool peer_holds_few(const struct grpc_conn *c)
{
    unsigned n = 0;
    if (c->peer_pid <= 0)
        return false;
    for (const struct grpc_conn *o = c->srv->conns; o; o = o->next)
        n += !o->dead && o->peer_pid == c->peer_pid;
    return n <= GRPC_PEER_FEW_CONNECTIONS;
}

struct grpc_conn *grpc_guard_pick_idle(struct grpc_server *srv)
{
    struct grpc_conn *best = NULL;
    for (struct grpc_server *x = srv ? srv : servers; x; x = srv ? NULL : x->snext)
        for (struct grpc_conn *c = x->conns; c; c = c->next) {
            /* A server stream is the kubelet's ListAndWatch, an unanswered asynchronous
             * call its Prepare, a privileged connection the one it made Prepare calls on
             * (idle between them): never the one to go. Nor is the connection of a peer
             * process holding a few, though it has not called yet: the kubelet's, made at
             * its registration, before its first Prepare, must not make room for another
             * peer's pile of health streams. */
            if (c->dead || c->privileged || c->n_opened > 0 || c->n_awaiting > 0 ||
                peer_holds_few(c))
                continue;
            if (!best || c->last_activity_ms < best->last_activity_ms ||
                (c->last_activity_ms == best->last_activity_ms && c->serial < best->serial))
                best = c;
        }
    return best;
}

static void evict_idle(struct grpc_conn *v, const char *why)
{
    struct grpc_server *srv = v->srv;
    unsigned sup;
    if (ratelimit_below(&srv->rate_evict, &sup))
        log_warning("grpc: %s: %s: closing the connection idle longest (%" PRIu64 " ms%s) "
                    "(%u more not logged)",
                    srv->path, why, loop_now_ms() - v->last_activity_ms,
                    v->handshake_done ? "" : ", no handshake", sup);
    srv->evictions++;
    grpc_conn_close(v);
}

static enum listener_next accept_error(void *userdata, int err, bool evicted);
static void accept_conn(void *userdata, int cfd);

static const struct listener_ops accept_ops = { .conn = accept_conn, .error = accept_error };

int grpc_guard_listen(struct grpc_server *srv)
{
    if (!srv->listener.ops)
        listener_init(&srv->listener, srv->loop, srv->fd, ACCEPT_BATCH,
                      BACKOFF_INIT(ACCEPT_BACKOFF_MIN_MS, ACCEPT_BACKOFF_MAX_MS, 0, false),
                      &accept_ops, srv);
    return listener_start(&srv->listener);
}

void grpc_guard_unlisten(struct grpc_server *srv) { listener_stop(&srv->listener); }

/* accept() fails while a connection waits: the listener pauses (capped backoff, see
 * ACCEPT_BACKOFF_*); one line per episode. */
static void accept_pause(struct grpc_server *srv, int err, bool evicted)
{
    if (!srv->accept_failing) {
        unsigned sup = 0;
        srv->accept_failing = true;
        srv->accept_fail_since_ms = loop_now_ms();
        srv->accept_failures = 0;
        srv->accept_logged = ratelimit_below(&srv->rate_accept, &sup);
        if (srv->accept_logged)
            log_warning("grpc: accept on %s: %s; %s, retrying within %u ms "
                        "(%u earlier episodes not logged)",
                        srv->path, strerror(err),
                        evicted ? "closed the connection idle longest"
                                : "no idle connection to close",
                        ACCEPT_BACKOFF_MAX_MS, sup);
    }
    srv->accept_failures++;
}

static void accept_recovered(struct grpc_server *srv)
{
    if (!srv->accept_failing)
        return;
    srv->accept_failing = false;
    if (srv->accept_logged)
        log_info("grpc: accepting connections on %s again, after %u failed attempts "
                 "over %" PRIu64 " ms",
                 srv->path, srv->accept_failures, loop_now_ms() - srv->accept_fail_since_ms);
}

static enum listener_next accept_error(void *userdata, int err, bool evicted)
{
    struct grpc_server *srv = userdata;
    if (err == ECONNABORTED)
        return LISTENER_NEXT;
    /* One fd freed per try: if that is not enough, wait for the timer. */
    if (listener_out_of_fds(err) && !evicted) {
        struct grpc_conn *v = grpc_guard_pick_idle(NULL);
        if (v) {
            evict_idle(v, "out of file descriptors");
            return LISTENER_RETRY;
        }
    }
    accept_pause(srv, err, evicted);
    return LISTENER_PAUSE;
}

static void accept_conn(void *userdata, int cfd)
{
    struct grpc_server *srv = userdata;
    accept_recovered(srv);
    if (srv->n_conns >= srv->lim.max_connections) {
        struct grpc_conn *v = grpc_guard_pick_idle(srv);
        if (!v) {
            unsigned sup;
            if (ratelimit_below(&srv->rate_refuse, &sup))
                log_warning("grpc: %s: %u connections open, none of them idle (a server "
                            "stream, a call awaiting its answer, or the owner's client): "
                            "refusing a new one (%u more not logged)",
                            srv->path, srv->n_conns, sup);
            close(cfd);
            return;
        }
        evict_idle(v, "connection cap reached");
    }
    if (!grpc_conn_new(srv, cfd)) {
        log_warning("grpc: cannot set up a connection on %s, ignoring", srv->path);
        close(cfd);
    }
}

size_t grpc_server_buffered_bytes(void) { return held_total; }

void grpc_server_counters(const struct grpc_server *srv, struct grpc_server_counters *out)
{
    *out = (struct grpc_server_counters){
        .held_bytes = held_total,
        .held_max = held_max,
        .evictions = srv->evictions,
        .budget_resets = srv->budget_resets,
        .deadline_resets = srv->deadline_resets,
    };
}
