/* What the files of the API client share (kube.c: requests; kube-conn.c: the TLS + HTTP/2
 * connection, kube-tls.c its TLS configuration; kube-config.c: credentials; kube-watch.c: list + watch), and the pure
 * helpers the unit tests reach. Not for the rest of the plugin: use kube.h. */
#pragma once

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "core/backoff.h"
#include "core/tokenbucket.h"
#include "kube/kube.h"

struct error;
struct loop;
struct loop_timer;

#define KUBE_DEFAULT_TIMEOUT_MS 10000u
#define KUBE_DEFAULT_MAX_RESPONSE (4u * 1024u * 1024u)
#define KUBE_DEFAULT_QPS 5.0
#define KUBE_DEFAULT_BURST 10u
/* How long a request may wait in this client (its rate limit, the stream limit, a 429's
 * Retry-After) before it is sent, when the caller set no bound of its own. */
#define KUBE_DEFAULT_WAIT_MS 120000u
/* A 429's Retry-After is honoured up to this, and at most this many times per request
 * (client-go: 10 retries). No or an unreadable Retry-After: 1 s. */
#define KUBE_RETRY_AFTER_MAX_S 30u
#define KUBE_429_MAX_RETRIES 10u
/* Reconnect and watch-retry backoff: from 100 ms doubling to 30 s, with jitter. */
#define KUBE_BACKOFF_MIN_MS 100u
#define KUBE_BACKOFF_MAX_MS 30000u
/* After an outage of D, the watches' first requests on the new connection wait a random
 * point in [0, min(D, this)]: client-go's reflector backoff caps at the same 30 s, and a
 * wider spread would leave a node's labels and config stale longer than the outage
 * warrants (5,000 nodes over 30 s: ~170 watch requests a second, far under an API
 * server's 400 in-flight requests). */
#define KUBE_OUTAGE_SPREAD_MAX_MS 30000u
/* A restarted API server answers before its RBAC authorizer has synced (403 for a few
 * seconds): a 403 this soon after the connection was made (or the outage spread ended)
 * is not said at once; an error only past that and for KUBE_RBAC_ERROR_AFTER tries in a
 * row; a run of 403s that ends in a success without having been an error is one warning
 * then. */
#define KUBE_RBAC_WARMUP_MS 10000u
#define KUBE_RBAC_ERROR_AFTER 3u
/* A watch asks the server to end it after a timeout drawn afresh for each request,
 * uniformly in [KUBE_WATCH_TIMEOUT_MIN_S, 2 * KUBE_WATCH_TIMEOUT_MIN_S) as client-go's
 * reflector does (it then resumes from its last resourceVersion), so that a fleet started
 * together does not renew its watches in lock-step; it is dropped as dead when silent
 * KUBE_WATCH_SILENCE_MARGIN_MS past the timeout it asked for. */
#define KUBE_WATCH_TIMEOUT_MIN_S 300u
#define KUBE_WATCH_SILENCE_MARGIN_MS 60000u
/* The timeoutSeconds of one watch request: a fresh draw in [300, 600). */
unsigned kube_watch_timeout_s(void);
/* Tests shorten the silence after which a watch is dropped; 0 (the default): the
 * timeout sent + KUBE_WATCH_SILENCE_MARGIN_MS. */
extern unsigned kube_watch_silence_ms;
/* The token file is looked at before a request at most this often. */
#define KUBE_TOKEN_CHECK_MS 1000u
/* Caps on what a kubeconfig or credential file may be. */
#define KUBE_MAX_FILE_BYTES (1024u * 1024u)

/* --------------------------------------------------------------- credentials */

struct kube_creds {
    bool tls;             /* https (else h2c: http with HTTP/2 prior knowledge) */
    char *host;           /* no brackets ("::1", "10.0.0.1", "api.example") */
    char *port;           /* decimal */
    char *authority;      /* host:port as sent in :authority ("[::1]:443") */
    char *server_name;    /* name the certificate must carry (tls-server-name or host) */
    bool insecure;        /* insecure-skip-tls-verify */
    char *ca_pem;         /* NUL-terminated PEM, or NULL (insecure or plain http) */
    size_t ca_len;
    char *cert_pem, *key_pem; /* client certificate, NUL-terminated, or NULL */
    size_t cert_len, key_len;
    char *token;          /* bearer token or NULL */
    char *token_file;     /* re-read when it changes, or NULL */
    dev_t token_dev;
    ino_t token_ino;
    struct timespec token_mtime;
    off_t token_size;
    uint64_t token_checked_ms;
    char *source;         /* "kubeconfig FILE" or "in-cluster config", for messages */
};

/* The service account directory in-cluster credentials come from (tests point it
 * elsewhere). */
extern const char *kube_sa_dir;

void kube_creds_clear(struct kube_creds *c);
/* From the kubeconfig at path (its current context). */
int kube_creds_from_kubeconfig(struct kube_creds *c, const char *path, struct error *err);
/* From the in-cluster environment and the service account directory sa_dir. */
int kube_creds_in_cluster(struct kube_creds *c, const char *sa_dir, struct error *err);
/* Parse "https://host:port[/]" into c->tls/host/port/authority. */
int kube_parse_server(struct kube_creds *c, const char *url, struct error *err);
/* Re-read the token file if it changed since it was read (force: read it anyway).
 * Returns 1 when the token changed, 0 when not, -errno (err set) when it cannot be read
 * (the old token is kept). */
int kube_creds_refresh_token(struct kube_creds *c, bool force, struct error *err);

/* --------------------------------------------------------------- watch lines */

/* One watch event line: {"type": "...", "object": {...}}. On success *type is one of
 * ADDED, MODIFIED, DELETED, BOOKMARK, ERROR (borrowed from *event, which the caller
 * owns) and *object is borrowed from *event. */
int kube_watch_parse_line(const char *line, size_t len, json_t **event, const char **type,
                          json_t **object, struct error *err);

/* --------------------------------------------------------------- connection */

enum kube_conn_state {
    KUBE_CONN_IDLE,       /* no socket; opened by the next request */
    KUBE_CONN_CONNECTING, /* TCP connect in progress */
    KUBE_CONN_HANDSHAKE,  /* TLS handshake in progress */
    KUBE_CONN_READY,      /* HTTP/2 session up */
    KUBE_CONN_BACKOFF,    /* failed; waiting for the backoff timer */
};

struct kube_conn {
    enum kube_conn_state state;
    int fd;
    uint32_t events;
    nghttp2_session *h2;
    bool tls_ready;       /* ssl, ctr_drbg, certs initialised (once per kube) */
    mbedtls_ssl_context ssl;
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca, cert;
    mbedtls_pk_context key;
    mbedtls_ctr_drbg_context drbg;
    bool ssl_live;        /* ssl set up for the current socket */
    uint8_t *out;         /* bytes from nghttp2 not yet accepted by the socket / TLS */
    size_t out_len, out_off, out_cap;
    struct backoff backoff;
    struct loop_timer *backoff_timer;
    /* Armed only while something is pending: the connect + TLS handshake deadline, or,
     * once up, a PING sent because a stream timed out (any byte from the server ends
     * it). Firing drops the connection: a hung server is not kept forever. */
    struct loop_timer *check_timer;
    char *last_error;     /* why the last attempt failed, logged once per change */
    /* Outage spread: when the connection that was up went down (0 while up, and before
     * the first connection), and until when the requests marked `spread` (a watch's
     * list and watch) wait on the new connection (backoff_after_outage()). */
    uint64_t lost_ms, spread_until_ms;
    uint64_t up_ms;       /* when the connection in use was made */
    int connect_error;    /* -errno of the last connect() that failed; 0 once one worked */
};

/* --------------------------------------------------------------- requests */

struct kube_req;
/* Internal streaming hook: called after each read with the bytes buffered so far in
 * r->buf (the hook consumes what it wants with kube_req_consume). */
typedef void (*kube_chunk_fn)(struct kube_req *r, void *userdata);

struct kube_req {
    struct kube *k;
    struct kube_req *prev, *next; /* in k->queue or k->active */
    bool queued, active, ready;   /* ready: in k->ready, to be concluded */
    struct kube_req *ready_next;
    enum kube_method method;
    char *path;
    uint8_t *body;
    size_t body_len, body_off;
    kube_done_fn done;
    kube_chunk_fn chunk;          /* watch streams only */
    void *userdata;
    int32_t stream_id;
    uint32_t timeout_ms;          /* 0: no deadline (watch streams: silence timer) */
    struct loop_timer *deadline;  /* timeout_ms from when it was sent (or queued, while
                                   * no connection is up) */
    uint64_t wait_until_ms;       /* held back here (rate limit, Retry-After) until at most */
    uint64_t not_before_ms;       /* a 429's Retry-After: not sent again before */
    struct loop_timer *retry_timer; /* kicks the queue at not_before_ms */
    int retry_after_s;            /* the answer's Retry-After; -1: none */
    unsigned retries_429;
    int status;                   /* HTTP status once headers came */
    int error;                    /* -errno decided locally (timeout, size, reset) */
    bool closed;                  /* stream closed by nghttp2 */
    uint32_t rst_code;
    bool retried_401;
    bool spread;                  /* waits out the outage spread (kube_req_set_spread) */
    const char *accept;           /* static; NULL: application/json */
    bool pending_chunk;           /* stream bytes not yet shown to chunk */
    bool busy, cancelled;         /* inside chunk; cancelled meanwhile (free after) */
    uint8_t *buf;
    size_t len, cap, max;
};

/* The 403s of one verb + resource (kube-names.c). */
struct kube_forbidden {
    char *key;         /* "verb group resource" */
    unsigned in_a_row; /* 403s since its last success */
    unsigned warming;  /* of those, how many came while the authorizer may be warming up */
    uint64_t first_ms; /* the first of them */
    bool run_errored;  /* this run of 403s was said as an error */
    bool errored;      /* the error was said: once per client */
};

struct kube {
    struct loop *loop;
    struct kube_creds creds;
    uint32_t timeout_ms;
    uint32_t wait_ms;              /* options.max_wait_ms: a request's bound in our queue */
    size_t max_response;
    double qps;                    /* as configured (reported by tests/kube/kube-probe) */
    uint32_t burst;
    struct tokenbucket rate;       /* from qps and burst; time in µs */
    struct loop_timer *rate_timer;
    struct loop_timer *kick_timer; /* sends what kube_request queued, from the loop */
    struct loop_timer *spread_timer; /* sends the spread requests at conn.spread_until_ms */
    struct kube_conn conn;
    struct kube_req *queue_head, *queue_tail; /* waiting to be sent */
    struct kube_req *active;                  /* streams on the connection */
    struct kube_req *ready;                   /* finished, callbacks pending */
    struct kube_watch *watches;
    struct kube_forbidden *forbidden; /* per verb + resource that got a 403 */
    size_t n_forbidden, alloc_forbidden;
    uint64_t requests_sent; /* tests */
};

/* kube-conn.c (kube_conn_init: kube-tls.c) */
/* TLS material from the credentials (CA, client certificate and key); no socket yet. */
int kube_conn_init(struct kube *k, struct error *err);
void kube_conn_free(struct kube *k);
/* Make sure a connection is on its way (no-op unless idle). */
void kube_conn_want(struct kube *k);
void kube_conn_advance(struct kube *k);
/* Push nghttp2's pending output to the socket; on failure the connection is dropped. */
void kube_conn_flush(struct kube *k);
/* What a request that waited for a connection until its deadline fails with: the error of
 * the last connect() when no connection could be made (-ECONNREFUSED, -EHOSTUNREACH...),
 * else -ETIMEDOUT. */
int kube_conn_wait_error(struct kube *k);
/* A stream on the connection timed out: send a PING; when nothing at all comes back
 * within the request timeout the connection is dropped (and re-opened if requests wait). */
void kube_conn_probe(struct kube *k);

/* kube-lists.c: the request lists of struct kube (queue, active, ready). */
void kube_queue_remove(struct kube *k, struct kube_req *r);
/* front: ahead of the others (a request retried keeps its turn). */
void kube_queue_push(struct kube *k, struct kube_req *r, bool front);
/* Also forgets the request as its stream's user data. */
void kube_active_remove(struct kube *k, struct kube_req *r);
/* To be concluded from the loop: taken off the queue or the active list first. */
void kube_ready_push(struct kube *k, struct kube_req *r);
void kube_ready_remove(struct kube *k, struct kube_req *r);

/* kube-addr.c */
/* host:port as a sockaddr when host is numeric (no resolver); -1 when host is a name
 * or port not a number. */
int kube_numeric_address(const char *host, const char *port, struct sockaddr_storage *ss,
                         socklen_t *len);
bool kube_is_ip(const char *s);

/* kube.c, called by kube-conn.c */
nghttp2_session_callbacks *kube_h2_callbacks(void);
/* The session is up: send what is queued. */
void kube_on_connected(struct kube *k);
/* The connection is gone: every active stream fails with err (queued ones wait). */
void kube_on_disconnected(struct kube *k, int err);
/* After each batch of input: conclude finished streams, feed watch streams. */
void kube_dispatch(struct kube *k);

/* kube.c, for kube-watch.c */
struct kube_req *kube_req_new(struct kube *k, enum kube_method m, const char *path, json_t *body,
                              kube_done_fn fn, void *userdata);
/* A watch stream: no deadline, unbounded total size, chunk called as bytes come. */
void kube_req_set_stream(struct kube_req *r, kube_chunk_fn chunk, size_t max_buffer);
/* A watch's list or watch: after an outage it waits out the connection's spread (its
 * deadline does not run meanwhile). */
void kube_req_set_spread(struct kube_req *r);
/* The Accept header (a static string), instead of application/json. */
void kube_req_set_accept(struct kube_req *r, const char *accept);
void kube_req_submit(struct kube_req *r);
void kube_req_consume(struct kube_req *r, size_t n);
/* Reset the stream and conclude with err (kube_done_fn gets status err). */
void kube_req_fail(struct kube_req *r, int err);

/* kube-watch.c: stop every watch (kube_free). */
void kube_watches_free(struct kube *k);

/* kube-names.c: a 403 (status 403, body its Status) or a success (2xx, body NULL) of a
 * request. A 403 that persists (KUBE_RBAC_*) is one error line per (verb, group, resource)
 * per client; a run of 403s that a success ends before that (an API server that had just
 * started and not yet synced its authorizer) is one warning when it ends. */
void kube_rbac_seen(struct kube *k, enum kube_method m, const char *path, int status,
                    json_t *body);

/* "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection". */
const char *kube_verb(enum kube_method m, const char *path);
/* Resource named by an API path ("nodes", "nodes/status", "events"), and its API group
 * ("" for the core group), written into the buffers. */
void kube_path_resource(const char *path, char *resource, size_t rlen, char *group, size_t glen);

/* kube-watch-objects.c: a string of obj's metadata (borrowed) or NULL; what a watch keeps
 * of an object (its kind and metadata without managedFields, shallow); its
 * "namespace/name" key (malloc'd). */
const char *kube_meta_str(json_t *obj, const char *key);
json_t *kube_watch_known_copy(json_t *obj);
char *kube_watch_obj_key(json_t *obj);

/* A connection's write buffer and a stream's read buffer past this, once empty, are
 * freed rather than kept at their largest for the connection's or stream's life. */
#define KUBE_BUF_KEEP (16u * 1024u)
