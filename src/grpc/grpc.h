/* A small gRPC layer over libnghttp2, for exactly what the device-plugin API needs:
 * unary calls and server-streaming calls, identity encoding, no TLS, on Unix sockets.
 * Server and client both run on the one event loop (core/loop.h); nothing blocks.
 *
 * Protocol rules enforced here (gRPC over HTTP/2, doc/PROTOCOL-HTTP2.md):
 *   - POST only, `content-type: application/grpc[+proto|;...]` (else HTTP 415),
 *     exactly one length-prefixed message per unary request, compressed flag rejected
 *     (UNIMPLEMENTED), the declared length checked against the size limit as soon as
 *     the 5-byte prefix arrives (RESOURCE_EXHAUSTED).
 *   - Replies: HEADERS, DATA, trailers (grpc-status, percent-encoded grpc-message);
 *     errors are trailers-only HEADERS with END_STREAM.
 *   - Unknown method: UNIMPLEMENTED.
 *   - Per-connection handshake and idle timeouts, a request deadline, a connection
 *     cap that evicts the idle-longest connection, a stream cap, budgets on buffered
 *     bytes per connection and per process, an accept path that backs off when the
 *     process is out of fds.
 *   - Server streams: a message that cannot be written yet is coalesced with newer
 *     ones, so a stalled reader holds at most the partially sent message plus the
 *     latest snapshot.
 *   - :authority is accepted whatever it is (kubelets <= 1.25 send the socket path),
 *     so nghttp2's HTTP messaging checks are off and the few that matter are done
 *     here.
 * Ownership and threading: everything is loop-thread only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct loop;

enum grpc_status {
    GRPC_STATUS_OK = 0,
    GRPC_STATUS_CANCELLED = 1,
    GRPC_STATUS_UNKNOWN = 2,
    GRPC_STATUS_INVALID_ARGUMENT = 3,
    GRPC_STATUS_DEADLINE_EXCEEDED = 4,
    GRPC_STATUS_NOT_FOUND = 5,
    GRPC_STATUS_ALREADY_EXISTS = 6,
    GRPC_STATUS_PERMISSION_DENIED = 7,
    GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
    GRPC_STATUS_FAILED_PRECONDITION = 9,
    GRPC_STATUS_ABORTED = 10,
    GRPC_STATUS_OUT_OF_RANGE = 11,
    GRPC_STATUS_UNIMPLEMENTED = 12,
    GRPC_STATUS_INTERNAL = 13,
    GRPC_STATUS_UNAVAILABLE = 14,
    GRPC_STATUS_DATA_LOSS = 15,
    GRPC_STATUS_UNAUTHENTICATED = 16,
};

/* ---------------------------------------------------------------- server */

struct grpc_server;
struct grpc_stream;

/* The answer of a unary handler. The handler sets either `data`/`len` (malloc'd, the
 * layer frees it) with status OK, or status != OK and `message` (malloc'd or NULL). */
struct grpc_reply {
    int status;
    uint8_t *data;
    size_t len;
    char *message;
};

typedef void (*grpc_unary_fn)(void *userdata, const uint8_t *req, size_t len,
                              struct grpc_reply *reply);
/* A server-streaming call arrived with its request. The handler keeps `s` and sends
 * with grpc_stream_send(); it may also finish the stream at once. Returning a status
 * != OK (with *message malloc'd or NULL) refuses the call with that status. */
typedef int (*grpc_stream_open_fn)(void *userdata, struct grpc_stream *s, const uint8_t *req,
                                   size_t len, char **message);
/* The stream is gone (peer reset, connection closed, finished, server freed). `s` is
 * invalid after this returns. Called exactly once per opened stream. */
typedef void (*grpc_stream_closed_fn)(void *userdata, struct grpc_stream *s);

/* An asynchronous unary call: the handler may answer later, e.g. after its own I/O.
 * `p` is the call; answer it exactly once with grpc_pending_reply(), from inside the
 * handler or any time later on the loop thread. The request bytes are only valid until
 * the handler returns. */
struct grpc_pending;
typedef void (*grpc_unary_async_fn)(void *userdata, struct grpc_pending *p, const uint8_t *req,
                                    size_t len);
/* The call ended before it was answered: the peer reset the stream or closed the
 * connection, its deadline passed (the peer's grpc-timeout or reply_timeout_ms; the peer
 * gets DEADLINE_EXCEEDED), or the server is being freed (UNAVAILABLE). Called at most once
 * per call and never after grpc_pending_reply(); `p` is invalid once it returns, and
 * answering it after that is a use after free (forbidden, not a no-op). It may answer
 * other pending calls; it must not free the server. */
typedef void (*grpc_pending_cancelled_fn)(void *userdata, struct grpc_pending *p);

struct grpc_method {
    const char *path;                  /* e.g. "/v1beta1.DevicePlugin/Allocate" */
    grpc_unary_fn unary;               /* exactly one of unary / unary_async / stream_open */
    grpc_unary_async_fn unary_async;
    grpc_pending_cancelled_fn pending_cancelled; /* required with unary_async */
    grpc_stream_open_fn stream_open;
    grpc_stream_closed_fn stream_closed;
    /* A call of it says the connection is the owner's client (the DRA socket's
     * Prepare/Unprepare: the kubelet): from then on the connection is never the one
     * closed to make room for another (the cap, out of fds), whatever else its peer does
     * on it, so peers holding streams cannot push the kubelet out. Any peer that can make
     * such a call gets the mark: it is the socket's permissions that keep strangers away. */
    bool privileged;
};

/* Every bound a peer meets (docs/grpc.md, "Limits"; docs/operations.md, "Resource
 * budgets"). 0 means the default. */
struct grpc_server_limits {
    size_t max_message;          /* bytes; 0 = 4 MiB (the kubelet's default) */
    unsigned max_connections;    /* 0 = 64; at the cap the idle-longest connection
                                  * without a server stream makes room (never one
                                  * that made a privileged call, nor one of a peer
                                  * process holding at most 2: the kubelet's before
                                  * its first call); with none, the new one is
                                  * refused */
    unsigned max_streams;        /* per connection; 0 = 100 */
    unsigned handshake_timeout_ms; /* 0 = 5000: client preface + SETTINGS */
    unsigned idle_timeout_ms;    /* 0 = 300000: no open stream and no frames */
    unsigned request_timeout_ms; /* 0 = 10000: a request's HEADERS and body */
    unsigned reply_timeout_ms;   /* 0 = 60000: an asynchronous unary call's answer,
                                  * counted from its HEADERS (the peer's grpc-timeout
                                  * when shorter) */
    size_t conn_buffer;          /* bytes buffered per connection (request bodies,
                                  * unsent replies); 0 = max_message + 64 KiB; also
                                  * the connection's HTTP/2 receive window */
    size_t process_buffer;       /* the same summed over every connection of every
                                  * server of the process; 0 = 16 MiB */
};

/* Remove a stale socket at `path`, bind, listen, start serving on `l`.
 * `methods` must outlive the server. Returns 0 or -errno (message in the log is the
 * caller's job). */
int grpc_server_new(struct loop *l, const char *path, const struct grpc_method *methods,
                    size_t n_methods, void *userdata, const struct grpc_server_limits *limits,
                    struct grpc_server **out);
/* Finish open streams with UNAVAILABLE (best effort), close every connection, close
 * and unlink the socket. stream_closed is called for each open stream. NULL ok. */
void grpc_server_free(struct grpc_server *srv);
/* Number of open connections (tests and metrics). */
unsigned grpc_server_connections(const struct grpc_server *srv);
/* Bytes every server of the process holds for peers now (the process budget's use). */
size_t grpc_server_buffered_bytes(void);

/* Answer an asynchronous unary call: status OK with the reply message (copied; len 0
 * is a valid empty message), or another status with `message` (may be NULL). `p` is
 * invalid afterwards. If the connection is going away the answer is dropped quietly. */
void grpc_pending_reply(struct grpc_pending *p, int status, const uint8_t *data, size_t len,
                        const char *message);
/* One pointer of the owner's per call (e.g. its own call object), NULL until set. */
void grpc_pending_set_context(struct grpc_pending *p, void *context);
void *grpc_pending_context(const struct grpc_pending *p);
/* When the answer to p is due, in loop_now_ms() time: the peer's deadline (its
 * grpc-timeout, counted from the call's HEADERS), or reply_timeout_ms when that is sooner
 * or the peer sent none. Past it the peer has DEADLINE_EXCEEDED and pending_cancelled is
 * called: work for the call that cannot end before it is wasted. */
uint64_t grpc_pending_deadline_ms(const struct grpc_pending *p);

/* Queue one message on a server stream (copied). If an earlier message is still
 * unsent it is replaced (coalescing). Returns 0, or -EPIPE if the stream is closing. */
int grpc_stream_send(struct grpc_stream *s, const uint8_t *msg, size_t len);
/* End the stream with a status (after queued messages are sent). */
void grpc_stream_finish(struct grpc_stream *s, int status, const char *message);

/* ---------------------------------------------------------------- client */

struct grpc_call;

/* Called once with the outcome. On status OK, resp/len hold the reply message. On
 * failure `message` says why (connection refused, timeout, grpc-message...). The call
 * object is freed right after this returns. */
typedef void (*grpc_call_done_fn)(void *userdata, int status, const char *message,
                                  const uint8_t *resp, size_t len);

/* Start a unary call to `path` on the server at unix socket `socket_path`, over a new
 * connection. `authority` is sent as :authority ("localhost" like kubelet >= 1.26
 * clients). Connection failures and timeouts report UNAVAILABLE / DEADLINE_EXCEEDED
 * through `done` (asynchronously, never from inside this function). Returns 0 or
 * -errno; *out may be NULL. */
int grpc_call_unary(struct loop *l, const char *socket_path, const char *authority,
                    const char *path, const uint8_t *req, size_t len, unsigned timeout_ms,
                    grpc_call_done_fn done, void *userdata, struct grpc_call **out);
/* Abandon a call: `done` is not called. NULL ok. */
void grpc_call_cancel(struct grpc_call *c);

/* Percent-encode a grpc-message value (exported for tests). Returns malloc'd. */
char *grpc_percent_encode(const char *s);
