/* The Kubernetes API client: the one home for talking to the API server.
 *
 * One `struct kube` per process holds one HTTP/2 connection to the API server (TLS
 * through mbedtls, HTTP/2 through nghttp2, both driven by our event loop; JSON through
 * jansson). Requests and watches are streams on that connection, so an idle watch
 * costs no wakeups and no thread. Why not libcurl: linking Debian's libcurl adds about
 * 8 MiB of RSS before the first request (33 shared libraries), against a 3 MiB budget
 * for the whole plugin; nghttp2 is already linked for gRPC and mbedtls adds ~0.7 MiB.
 *
 * Credentials: in-cluster (KUBERNETES_SERVICE_HOST/PORT, the service account token
 * re-read when the kubelet rotates it, its ca.crt) or a kubeconfig file (server, CA,
 * token / token file, client certificate and key; exec plugins are refused with one
 * line).
 *
 * Bounds: every request has a deadline (options.request_timeout_ms, counted from when
 * it is sent: waiting in our own rate limit is bounded apart, by options.max_wait_ms or
 * the caller's kube_request_set_wait_limit) and a response size cap
 * (options.max_response_bytes); a 429 is sent again after its Retry-After; a watch
 * that goes silent longer than its server-side timeout plus a margin is dropped and
 * resumed; after such a timeout the connection must answer a PING (and a new one finish
 * its handshake) within the request timeout, or it is dropped as hung. A 401 re-reads
 * the token and retries once; a 403 is logged here naming the verb and resource RBAC
 * must allow, so callers need not log it again: as one error per verb and resource
 * once it persisted (3 tries in a row, past the first 10 s after a (re)connection, while
 * a restarted API server may still be syncing its authorizer); a run of 403s that ends
 * in a success before that is one warning then.
 *
 * Threading: everything here runs on the loop thread. Callbacks are never called from
 * inside the function that started the request (always from the loop), so a caller may
 * free its own state from a callback. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct error;
struct loop;
struct kube;
struct kube_req;
struct kube_watch;

struct kube_options {
    /* Path of a kubeconfig file; NULL or "" for in-cluster credentials. */
    const char *kubeconfig;
    /* 0 picks the default: 10000 ms per request, 4 MiB per response body. The request
     * timeout counts from when the request is sent (or, while no connection is up, from
     * when it was queued): time it waits in this client's own rate limit is not the
     * server's. */
    uint32_t request_timeout_ms;
    /* How long a request may wait here before it is sent (the rate limit below, a 429's
     * Retry-After) when its caller set no bound (kube_request_set_wait_limit); 0 picks
     * 120000 ms. Past it the request fails with KUBE_E_THROTTLED. */
    uint32_t max_wait_ms;
    size_t max_response_bytes;
    /* Client-side rate limit like client-go's token bucket: 0 picks 5 requests per second
     * with bursts of 10 (--kube-api-qps, --kube-api-burst). A watch counts once per
     * (re)start. */
    double qps;
    uint32_t burst;
};

/* Reads credentials (no network yet: the connection is opened on the first request
 * and re-opened with capped backoff when it drops). Returns 0 or -errno with err
 * naming the file or variable at fault. */
int kube_new(struct loop *l, const struct kube_options *o, struct kube **out, struct error *err);
/* Cancels every request and watch without calling their callbacks. NULL is ignored.
 * Not from inside one of this client's callbacks. */
void kube_free(struct kube *k);

enum kube_method {
    KUBE_GET,
    KUBE_POST,
    KUBE_PUT,
    KUBE_DELETE,
    KUBE_PATCH_MERGE,     /* application/merge-patch+json */
    KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
    KUBE_PATCH_JSON,      /* application/json-patch+json */
};

/* status: the HTTP status (200, 201, 404, 409, 410, ...) or, when no status was
 * received, -errno (-ETIMEDOUT past the deadline after it was sent, or the connect()
 * error such as -ECONNREFUSED when no connection could be made by then; -EMSGSIZE past
 * the size cap; -ECONNRESET when the connection dropped; KUBE_E_THROTTLED when it never
 * left this client's rate limit within its wait bound). kube_strerror() words each. A
 * 429 Too Many Requests is retried after its Retry-After (at most 30 s, 10 times) while
 * the wait bound allows, and is the status only after that. body: the parsed JSON response (a
 * Kubernetes object, list or Status), borrowed for the call, NULL if there was none or
 * it was not JSON. */
typedef void (*kube_done_fn)(struct kube *k, int status, json_t *body, void *userdata);

/* Starts a request. path is absolute and already escaped ("/api/v1/nodes/n1"), body is
 * borrowed (serialised before return) and may be NULL. Returns NULL only when the
 * request could not be queued (err says why); otherwise fn is called exactly once
 * unless the request is cancelled. */
struct kube_req *kube_request(struct kube *k, enum kube_method m, const char *path, json_t *body,
                              kube_done_fn fn, void *userdata, struct error *err);
/* fn is not called afterwards. NULL is ignored; not for use after fn was called. */
void kube_request_cancel(struct kube_req *r);
/* Moves the queued requests on without waiting for the loop: opens the connection, takes
 * the TLS handshake as far as the server has answered, sends what the rate limit allows.
 * For a caller about to block the loop for a while (a start loading NVML and building its
 * devices), so that the server's side of the handshake and of the first requests runs
 * meanwhile. Reads nothing past the handshake and calls no callback. NULL is ignored. */
void kube_send_now(struct kube *k);
/* The caller's own bound on how long r may wait in this client before it is sent (its
 * rate limit, a 429's Retry-After, a connection being made), from now: instead of
 * options.max_wait_ms when sooner. Right after kube_request (its request timeout still
 * counts from then), not from inside its callback. */
void kube_request_set_wait_limit(struct kube_req *r, uint32_t ms);

/* Never sent: it waited in this client's rate limit past its wait bound. */
#define KUBE_E_THROTTLED (-EAGAIN)
/* The words for a negative status (strerror, but KUBE_E_THROTTLED says what it is). */
const char *kube_strerror(int status);

enum kube_watch_event {
    KUBE_WATCH_ADDED,
    KUBE_WATCH_MODIFIED,
    KUBE_WATCH_DELETED,
    /* A (re)list finished: every object currently matching was just delivered as
     * ADDED (after a 410 Gone or a first list), and objects that disappeared in
     * between were delivered as DELETED (only their apiVersion, kind and metadata
     * without managedFields: the watch keeps no more per object). object is NULL. */
    KUBE_WATCH_SYNCED,
    /* Only with kube_watch_options.forbidden_ends: the server answered 403 to the list or
     * the watch; the watch stops trying (object: the server's Status, or NULL). The user
     * may then stop it. */
    KUBE_WATCH_FORBIDDEN,
};

/* object is borrowed for the call. */
typedef void (*kube_watch_fn)(struct kube_watch *w, enum kube_watch_event ev, json_t *object,
                              void *userdata);

/* List then watch a collection ("/api/v1/nodes") narrowed by a field selector
 * ("metadata.name=node-1", or NULL), with resourceVersion and bookmarks; resumes after
 * a dropped connection from the last resourceVersion, relists after 410 Gone, and backs
 * off (capped) while the server fails. Returns NULL only when it could not start. */
struct kube_watch *kube_watch_start(struct kube *k, const char *collection_path,
                                    const char *field_selector, kube_watch_fn fn, void *userdata,
                                    struct error *err);

struct kube_watch_options {
    const char *field_selector; /* or NULL */
    /* Only the objects' metadata, as client-go's metadata informers: the list asks for a
     * PartialObjectMetadataList and the watch for PartialObjectMetadata (meta.k8s.io/v1,
     * GA since Kubernetes 1.15), so objects carry apiVersion, kind
     * "PartialObjectMetadata" and metadata, no spec or status. A Node's status (images,
     * conditions: tens of KiB) is rewritten by the kubelet far more often than anyone
     * changes its labels. application/json is the fallback asked for: a server that
     * cannot serve metadata alone may send whole objects. */
    bool metadata_only;
    /* List through the watch (a "streaming list", KEP-3157: sendInitialEvents=true): the
     * objects come as ADDED events on the watch stream, then a bookmark marked
     * k8s.io/initial-events-end, and the stream goes on as the watch. One request instead
     * of a list and a watch, and, as client-go does not rate-limit watches, no token of
     * the rate limit (client-go's informers list this way from 1.35). Served by
     * kube-apiserver 1.34+ (WatchList, on by default; 1.32 too); a server that refuses it
     * (400/422: older, or the gate off), ends the stream or sends no end bookmark within
     * KUBE_WATCH_INITIAL_MS gets the paged list from then on. */
    bool stream_list;
    /* A 403 is reported once as KUBE_WATCH_FORBIDDEN instead of retried with backoff: for
     * a watch that is an optimisation over a request the caller can make instead. */
    bool forbidden_ends;
};

#define KUBE_WATCH_INITIAL_MS 10000u

/* kube_watch_start with options (o may be NULL). */
struct kube_watch *kube_watch_start_opt(struct kube *k, const char *collection_path,
                                        const struct kube_watch_options *o, kube_watch_fn fn,
                                        void *userdata, struct error *err);
/* fn is not called afterwards. NULL is ignored. */
void kube_watch_stop(struct kube_watch *w);

/* The "message" of a Kubernetes Status object (borrowed from body), or NULL. */
const char *kube_status_message(json_t *body);

/* Percent-encode s for a path segment or a query value (everything but RFC 3986
 * unreserved bytes). Returns malloc'd. */
char *kube_escape(const char *s);
