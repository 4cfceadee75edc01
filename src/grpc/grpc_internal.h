/* Pieces shared by the gRPC server and client (grpc_common.c), plus the hooks that
 * tests and the fuzz target use. Not for the rest of the plugin: use grpc.h. */
#pragma once

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"

#define GRPC_DEFAULT_MAX_MESSAGE (4u * 1024u * 1024u)
#define GRPC_PREFIX_LEN 5

/* An nghttp2_nv for literal strings and for computed ones. */
#define GRPC_NV_LIT(n, v)                                                             \
    { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,                   \
      NGHTTP2_NV_FLAG_NONE }
#define GRPC_NV(n, v, vlen)                                                           \
    { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE }

/* Incremental parser for gRPC length-prefixed messages on one stream. It accepts
 * exactly one message: both sides of this layer only speak unary requests and unary
 * or single-message-per-update replies.
 *
 * The body buffer grows as bytes arrive (doubling from 16 KiB, never past the
 * declared length), so a peer that declares 4 MiB and sends 10 bytes costs 16 KiB,
 * not 4 MiB: memory follows what was sent, which the server can budget. */
struct grpc_framer {
    uint8_t prefix[GRPC_PREFIX_LEN];
    size_t prefix_have;
    bool in_body;      /* prefix complete, collecting the body */
    uint8_t *msg;      /* body of the message being collected or complete */
    size_t msg_len, msg_have;
    size_t msg_cap;    /* bytes allocated for msg */
    unsigned complete; /* number of complete messages */
};

/* Feed bytes. Returns 0, or -ENOTSUP (compressed flag set: we advertise no
 * encoding), -EMSGSIZE (declared length > max, known as soon as the prefix is
 * complete), -EBADMSG (a second message starts). After an error the framer must not
 * be fed again. */
int grpc_framer_feed(struct grpc_framer *f, const uint8_t *data, size_t len, size_t max);
/* What msg_cap will be after feeding these bytes (same rules as grpc_framer_feed,
 * without changing anything): lets a caller charge the growth to a budget before it
 * happens. Errors that feeding would report leave the capacity as it is. */
size_t grpc_framer_cap_after(const struct grpc_framer *f, const uint8_t *data, size_t len,
                             size_t max);
/* At end of stream: 0 if exactly one complete message arrived, -ENODATA if none
 * (and no partial bytes), -EBADMSG if a message is truncated. */
int grpc_framer_finish(const struct grpc_framer *f);
void grpc_framer_reset(struct grpc_framer *f);

/* 5-byte prefix + message in one malloc'd buffer. */
uint8_t *grpc_frame_message(const uint8_t *msg, size_t len, size_t *out_len);

/* Decode %XX sequences; malformed ones are kept literally (the spec asks receivers
 * not to fail on them). Returns malloc'd, NUL-terminated. */
char *grpc_percent_decode(const uint8_t *s, size_t len);

/* "grpc-status" value to a status code; unparsable → UNKNOWN. */
int grpc_parse_status(const uint8_t *s, size_t len);

/* Output not yet accepted by the socket. */
struct grpc_outbuf {
    uint8_t *buf;
    size_t len, off, cap;
};

/* Move a session's pending output to a non-blocking socket with as few send() calls as
 * possible: the frames of one pass (HEADERS, DATA, trailers of a reply) are gathered, up
 * to 64 KiB, and written at once, so a unary reply costs one syscall and one wakeup of
 * the peer instead of one per frame. When the socket is full, *blocked is set and
 * nothing more is taken from nghttp2 until it drains, which keeps the buffer bounded.
 * Returns 0 or -EIO. */
int grpc_session_flush(nghttp2_session *session, int fd, struct grpc_outbuf *ob, bool *blocked);
void grpc_outbuf_free(struct grpc_outbuf *ob);

/* ------------------------------------------------------------ test hooks */

struct grpc_conn;

/* Bytes held in server-stream send queues right now, and the most ever held (both
 * summed over all streams of the server). Lets tests check that a stalled reader
 * cannot make the queue grow. */
size_t grpc_server_queued_bytes(const struct grpc_server *srv);
size_t grpc_server_queued_bytes_max(const struct grpc_server *srv);

/* What the server's defences did (grpc_server_guard.c). held_bytes is process-wide:
 * request buffers and unsent replies charged to the budgets right now. */
struct grpc_server_counters {
    size_t held_bytes, held_max; /* now, and the most ever */
    unsigned evictions;       /* connections closed to make room (cap, out of fds) */
    unsigned budget_resets;   /* streams dropped by a buffer budget */
    unsigned deadline_resets; /* requests reset (or connections closed) by the deadline */
};
void grpc_server_counters(const struct grpc_server *srv, struct grpc_server_counters *out);

/* Serve one already connected socket as if it had been accepted (fuzz target). */
struct grpc_conn *grpc_server_adopt(struct grpc_server *srv, int fd);
/* Feed bytes as if read from that connection's socket, then flush replies. Returns 0,
 * or <0 if the connection was closed (and freed) as a result. */
int grpc_server_conn_feed(struct grpc_conn *c, const uint8_t *data, size_t len);

/* grpc_call_unary() with the request body sent as is (already framed, or deliberately
 * malformed) and a chosen content-type: protocol tests of the server. */
int grpc_call_raw(struct loop *l, const char *socket_path, const char *authority,
                  const char *path, const char *content_type, const uint8_t *body,
                  size_t body_len, unsigned timeout_ms, grpc_call_done_fn done, void *userdata,
                  struct grpc_call **out);
