/* The gRPC server's objects and the calls between its three files:
 *   grpc_server.c        the listening socket and the connections (socket I/O, timers,
 *                        lifetime);
 *   grpc_server_stream.c one call on a stream (request checks, dispatch, reply, send
 *                        queue) and the nghttp2 session callbacks;
 *   grpc_server_guard.c  the defences (accept path, connection cap, buffer budgets,
 *                        request deadlines).
 * Not for the rest of the plugin: use grpc.h. Loop thread only.
 *
 * Re-entrancy rule: user handlers run inside nghttp2 callbacks, and user code calls
 * grpc_stream_send/finish from anywhere. None of those paths ever writes to the socket
 * or frees a connection; they only queue and arm a 0 ms flush timer
 * (grpc_conn_schedule_flush). Sockets are written and connections freed only from loop
 * callbacks (fd events, timers) and grpc_server_free, so no caller ever sees an object
 * vanish under it. */
#pragma once

#include <nghttp2/nghttp2.h>

#include "core/listener.h"
#include "core/ratelimit.h"
#include "grpc/grpc_internal.h"

struct loop;
struct loop_timer;

struct grpc_stream {
    struct grpc_conn *conn;
    struct grpc_stream *prev, *next;
    int32_t id;
    const struct grpc_method *method;

    /* request headers */
    bool seen_method, method_post, seen_path, content_type_ok, header_error;
    bool headers_done; /* the whole header block (HEADERS + CONTINUATION) is in */
    char *path;
    struct grpc_framer req;
    bool req_ended;    /* END_STREAM from the peer */
    uint64_t started_ms; /* HEADERS began: the request deadline counts from here */
    size_t unconsumed; /* DATA bytes not yet handed back to the connection window */

    bool responded;   /* a response (or RST) has been submitted */
    bool in_open;     /* inside stream_open: the response is not submitted yet */
    bool opened;      /* stream_open accepted it: stream_closed is owed */
    bool closing;     /* being destroyed: sends fail */
    bool deferred;    /* the data provider is parked (NGHTTP2_ERR_DEFERRED) */
    bool killed;      /* reset by the budget or a deadline: nothing more is sent */
    bool awaiting;    /* an asynchronous unary call its owner has not answered yet:
                       * pending_cancelled is owed if it ends first */
    uint64_t timeout_ms;        /* the peer's grpc-timeout; 0 = none */
    uint64_t reply_deadline_ms; /* awaiting: answer DEADLINE_EXCEEDED from then on */
    void *pending_context;

    /* Send queue: at most the message being written plus the latest one. */
    uint8_t *head;
    size_t head_len, head_off;
    uint8_t *pending;
    size_t pending_len;

    /* Bytes this stream holds against the budgets (request buffer capacity + unsent
     * queue) and since when it has held some: the longest holder loses first. */
    size_t held;
    uint64_t held_since_ms;

    bool finishing;
    int status;
    char *message;
};

struct grpc_conn {
    struct grpc_server *srv;
    struct grpc_conn *prev, *next;
    int fd;
    nghttp2_session *session;
    struct grpc_stream *streams;
    unsigned n_streams;
    unsigned n_opened; /* server streams handed to stream_open (ListAndWatch) */
    unsigned n_awaiting; /* asynchronous unary calls not answered yet */
    struct loop_timer *handshake_timer, *idle_timer, *flush_timer, *request_timer;
    uint64_t last_activity_ms;
    uint64_t serial;   /* accept order: the older goes first on a tie */
    size_t held;       /* sum of its streams' held bytes */
    uint32_t events;
    bool handshake_done;
    bool privileged;   /* it called a privileged method (grpc.h): never evicted */
    int peer_pid;      /* SO_PEERCRED at accept; 0: not known (or the peer is outside our
                        * pid namespace: every such peer looks the same) */
    bool blocked;
    bool dead;
    struct grpc_outbuf out;
};

struct grpc_server {
    struct grpc_server *snext; /* every live server of the process (budget, fds) */
    struct loop *loop;
    int fd;
    char *path;
    const struct grpc_method *methods;
    size_t n_methods;
    void *userdata;
    struct grpc_server_limits lim;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    struct grpc_conn *conns;
    unsigned n_conns;
    size_t queued, queued_max;

    /* accept path (grpc_server_guard.c) */
    struct listener listener;  /* the listen fd (core/listener.h) */
    bool accept_failing;       /* an out-of-fds episode is going on */
    bool accept_logged;        /* ... and its start was logged */
    uint64_t accept_fail_since_ms;
    unsigned accept_failures;
    /* lines a peer can provoke: one per interval, with a count of those left out */
    struct ratelimit rate_accept, rate_evict, rate_refuse, rate_budget, rate_deadline;
    unsigned evictions;        /* connections closed to make room (tests) */
    unsigned budget_resets;    /* streams reset by the buffer budget (tests) */
    unsigned deadline_resets;  /* requests reset by the request deadline (tests) */
};

/* A peer process (SO_PEERCRED pid) holding at most this many connections of a server is
 * not piling them up: none of them is closed to make room (grpc_guard_pick_idle). */
#define GRPC_PEER_FEW_CONNECTIONS 2

/* grpc_server.c */
void grpc_conn_free(struct grpc_conn *c);
/* GOAWAY (best effort) and free. */
void grpc_conn_close(struct grpc_conn *c);
struct grpc_conn *grpc_conn_new(struct grpc_server *srv, int fd);
/* Have the connection's queued output written from a 0 ms timer (the re-entrancy rule
 * above); no-op on a dead connection or when one is armed already. */
void grpc_conn_schedule_flush(struct grpc_conn *c);

/* grpc_server_stream.c */
/* The callbacks every server session of the process uses; aborts on OOM. */
nghttp2_session_callbacks *grpc_server_callbacks_new(void);
/* Unlink and free a stream, telling the method's stream_closed first if stream_open
 * accepted it. Called when nghttp2 closes the stream and for each stream left when a
 * connection is freed (nghttp2_session_del() reports no closes). */
void grpc_stream_destroy(struct grpc_stream *s);
/* Give up on a stream's buffered bytes: an unanswered request gets `status` and
 * `message` (then RST after it, as for any early answer), an answered one is reset
 * with CANCEL. Its buffers are freed and its window bytes handed back. */
void grpc_stream_abort(struct grpc_stream *s, int status, const char *message);
/* Free the request buffer and hand its DATA bytes back to the connection window. */
void grpc_stream_release_request(struct grpc_stream *s);

/* grpc_server_guard.c */
void grpc_guard_server_add(struct grpc_server *srv);
void grpc_guard_server_remove(struct grpc_server *srv);
/* Watch the listen fd (accepting with the cap, eviction and out-of-fd backoff). */
int grpc_guard_listen(struct grpc_server *srv);
void grpc_guard_unlisten(struct grpc_server *srv);
/* Charge `add` bytes to s, its connection and the process, making room by aborting
 * the streams that have held bytes the longest (never s). With `must` (the bytes
 * exist already) the charge is made whatever happens; otherwise -ENOBUFS says s
 * itself does not fit and must give up. */
int grpc_budget_charge(struct grpc_stream *s, size_t add, bool must);
void grpc_budget_release(struct grpc_stream *s, size_t sub);
/* A request began on c, became whole, or an asynchronous call of c was answered or
 * began to wait: the deadline timer is re-armed for the nearest deadline of c's streams
 * (a request's body, an asynchronous call's answer), or goes when none is owed, so a
 * plugin that answered everything makes no wakeup later (idle means no wakeups). */
void grpc_guard_deadlines(struct grpc_conn *c);
/* The last stream of c ended: watch it for idleness again. */
void grpc_conn_idle_watch(struct grpc_conn *c);
/* The connection that can go with the least harm (no server stream, idle longest),
 * among this server's (srv) or every server's (NULL) connections; NULL if none. */
struct grpc_conn *grpc_guard_pick_idle(struct grpc_server *srv);
