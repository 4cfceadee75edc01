/* List + watch of one collection: list (paged), then a watch stream from the list's
 * resourceVersion with bookmarks, its newline-delimited JSON events parsed as they come
 * (each line bounded by the response cap). A stream that ends or breaks resumes from the
 * last resourceVersion; 410 Gone (as an HTTP status or an ERROR event) relists, and the
 * relist reports objects that vanished meanwhile as DELETED, then SYNCED. Failures back
 * off (capped) and are logged once per new reason. The objects last seen are kept so
 * that a DELETED found by a relist carries the object.
 *
 * The server is not trusted to honour the field selector: with "metadata.name=X" an
 * object of another name (from a faulty or hostile server, in a list or an event) is
 * neither kept nor reported, and said in one warning per KUBE_WATCH_FOREIGN_LOG_MS (the
 * next one counts those left out), so a watch of one Node holds one object whatever the
 * server streams. */
#include <stdio.h>

#include "core/error.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "core/ratelimit.h"
#include "kube/kube-internal.h"

struct kube_watch {
    struct kube *k;
    struct kube_watch *prev, *next; /* in k->watches, so kube_free can stop it */
    char *collection, *selector;
    char *name;            /* "metadata.name=NAME" asked for; NULL: any name matches */
    struct ratelimit foreign_log; /* objects ignored for not matching the selector */
    bool metadata_only;    /* kube_watch_options */
    bool stream_list;      /* kube_watch_options; cleared when the server cannot */
    bool forbidden_ends;   /* kube_watch_options */
    bool in_initial;       /* a streaming list's initial events are coming */
    struct loop_timer *initial_timer; /* their end bookmark must come by then */
    kube_watch_fn fn;
    void *userdata;
    char *rv;              /* resume point, NULL before the first list */
    char *cont;            /* continue token of a paged list in progress */
    json_t *known;         /* "namespace/name" -> last object seen */
    json_t *listed;        /* keys seen by the list in progress */
    struct kube_req *req;
    struct loop_timer *retry_timer, *silence_timer;
    uint64_t last_data_ms, started_ms;
    uint64_t silence_ms;   /* of the stream in progress: its timeout + the margin */
    struct backoff backoff;
    bool busy, stopped;
    char *last_error;
};

/* A server that ignores the selector keeps doing so: a reminder every 5 minutes. */
#define KUBE_WATCH_FOREIGN_LOG_MS (5 * 60 * 1000)

unsigned kube_watch_silence_ms;

unsigned kube_watch_timeout_s(void)
{
    return KUBE_WATCH_TIMEOUT_MIN_S + (unsigned)backoff_random_below(KUBE_WATCH_TIMEOUT_MIN_S);
}

static void start_list(struct kube_watch *w);
static void start_watch(struct kube_watch *w);

/* Whether obj is one the selector can match; rate-limited warning when it is not. */
static bool wanted(struct kube_watch *w, json_t *obj)
{
    const char *name = kube_meta_str(obj, "name");
    if (!w->name || (name && streq(name, w->name)))
        return true;
    unsigned left_out = 0;
    if (!ratelimit_below(&w->foreign_log, &left_out))
        return false;
    char more[48] = "";
    if (left_out)
        snprintf(more, sizeof(more), " (%u more not logged)", left_out);
    log_warning("kube: watch %s: ignoring an object named \"%.253s\" that the field selector "
                "%s does not match: the server does not honour it%s",
                w->collection, name ? name : "", w->selector, more);
    return false;
}


static void set_str(char **p, const char *v)
{
    free(*p);
    *p = v ? xstrdup(v) : NULL;
}

static void watch_free(struct kube_watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        w->k->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    kube_request_cancel(w->req);
    loop_timer_cancel(w->k->loop, w->retry_timer);
    loop_timer_cancel(w->k->loop, w->silence_timer);
    loop_timer_cancel(w->k->loop, w->initial_timer);
    json_decref(w->known);
    json_decref(w->listed);
    free(w->collection);
    free(w->selector);
    free(w->name);
    free(w->rv);
    free(w->cont);
    free(w->last_error);
    free(w);
}

/* Call the user; false when it stopped the watch (the caller must return at once). */
static bool emit(struct kube_watch *w, enum kube_watch_event ev, json_t *obj)
{
    w->busy = true;
    w->fn(w, ev, obj, w->userdata);
    w->busy = false;
    return !w->stopped;
}

static void retry_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube_watch *w = userdata;
    w->retry_timer = NULL;
    if (w->rv)
        start_watch(w);
    else
        start_list(w);
}

/* Something failed: say so once per new reason, try again after the backoff. */
static void fail(struct kube_watch *w, const char *fmt, ...) _printf_(2, 3);
static void fail(struct kube_watch *w, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (!w->last_error || !streq(w->last_error, why)) {
        log_warning("kube: watch %s: %s; retrying with backoff", w->collection, why);
        set_str(&w->last_error, why);
    }
    loop_timer_cancel(w->k->loop, w->retry_timer);
    w->retry_timer = loop_timer_add(w->k->loop, backoff_next(&w->backoff), retry_cb, w);
}

static char *status_text(int status, json_t *body)
{
    const char *m = kube_status_message(body);
    if (status < 0)
        return xasprintf("%s", strerror(-status));
    return xasprintf("HTTP %d%s%s", status, m ? ": " : "", m ? m : "");
}

/* A 403 under forbidden_ends: said to the user, not retried (it may stop the watch). */
static void forbidden(struct kube_watch *w, json_t *body)
{
    w->in_initial = false;
    if (!emit(w, KUBE_WATCH_FORBIDDEN, body))
        watch_free(w);
}

/* ------------------------------------------------------------------ list */

/* A list (paged or streamed) is complete at rv: what was known and not listed went
 * meanwhile (DELETED), then SYNCED. False when the user stopped the watch. */
static bool listed_all(struct kube_watch *w, const char *rv)
{
    const char *key;
    json_t *obj;
    void *iter_tmp;
    json_object_foreach_safe(w->known, iter_tmp, key, obj) {
        if (json_object_get(w->listed, key))
            continue;
        json_incref(obj);
        json_object_del(w->known, key);
        bool go_on = emit(w, KUBE_WATCH_DELETED, obj);
        json_decref(obj);
        if (!go_on)
            return false;
    }
    json_object_clear(w->listed);
    set_str(&w->rv, rv);
    backoff_reset(&w->backoff);
    set_str(&w->last_error, NULL);
    return emit(w, KUBE_WATCH_SYNCED, NULL);
}

static void list_done(struct kube *k, int status, json_t *body, void *userdata)
{
    struct kube_watch *w = userdata;
    w->req = NULL;
    if (status == 410 && w->cont) {
        /* The continue token expired: the whole list again. */
        set_str(&w->cont, NULL);
        json_object_clear(w->listed);
        start_list(w);
        return;
    }
    json_t *items = json_object_get(body, "items");
    const char *rv = kube_meta_str(body, "resourceVersion");
    if (status == 403 && w->forbidden_ends) {
        forbidden(w, body);
        return;
    }
    if (status != 200 || !json_is_array(items) || !rv) {
        _cleanup_free_ char *t = status == 200 ? xstrdup("not a list") : status_text(status, body);
        set_str(&w->cont, NULL);
        json_object_clear(w->listed);
        fail(w, "list: %s", t);
        return;
    }
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item) {
        if (!wanted(w, item))
            continue;
        _cleanup_free_ char *key = kube_watch_obj_key(item);
        json_object_set_new(w->listed, key, json_true());
        json_object_set_new(w->known, key, kube_watch_known_copy(item));
        if (!emit(w, KUBE_WATCH_ADDED, item)) {
            watch_free(w);
            return;
        }
    }
    const char *cont = kube_meta_str(body, "continue");
    if (cont && *cont) {
        set_str(&w->cont, cont);
        start_list(w);
        return;
    }
    set_str(&w->cont, NULL);
    if (!listed_all(w, rv)) {
        watch_free(w);
        return;
    }
    start_watch(w);
}

static char *query_path(struct kube_watch *w, const char *params)
{
    _cleanup_free_ char *sel = w->selector ? kube_escape(w->selector) : NULL;
    return xasprintf("%s?%s%s%s", w->collection, params, sel ? "&fieldSelector=" : "", sel ? sel : "");
}

/* Metadata only (kube.h): what kube-apiserver v1.20 answers with. A list must ask for the
 * List form (the object form is 406 Not Acceptable) and a watch for the object form (the
 * List form gives an empty stream); application/json is the fallback. */
#define ACCEPT_META_LIST "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#define ACCEPT_META "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

static void start_stream(struct kube_watch *w, const char *params);

static void start_list(struct kube_watch *w)
{
    if (w->stream_list) {
        set_str(&w->rv, NULL);
        set_str(&w->cont, NULL);
        json_object_clear(w->listed);
        w->in_initial = true;
        start_stream(w, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
        return;
    }
    _cleanup_free_ char *cont = w->cont ? kube_escape(w->cont) : NULL;
    _cleanup_free_ char *params = xasprintf("limit=500%s%s", cont ? "&continue=" : "", cont ? cont : "");
    _cleanup_free_ char *path = query_path(w, params);
    set_str(&w->rv, NULL);
    w->req = kube_req_new(w->k, KUBE_GET, path, NULL, list_done, w);
    kube_req_set_spread(w->req);
    if (w->metadata_only)
        kube_req_set_accept(w->req, ACCEPT_META_LIST);
    kube_req_submit(w->req);
}

/* ------------------------------------------------------------------ watch stream */

static void silence_cb(struct loop *l, struct loop_timer *t, void *userdata);

/* Stop reading the current stream (from inside its chunk hook too: the request is freed
 * once the hook returns). */
static void end_stream(struct kube_watch *w)
{
    kube_request_cancel(w->req);
    w->req = NULL;
    loop_timer_cancel(w->k->loop, w->silence_timer);
    w->silence_timer = NULL;
    loop_timer_cancel(w->k->loop, w->initial_timer);
    w->initial_timer = NULL;
}

static void arm_silence(struct kube_watch *w, uint64_t ms)
{
    w->silence_timer = loop_timer_add(w->k->loop, ms, silence_cb, w);
}

static void silence_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube_watch *w = userdata;
    uint64_t limit = w->silence_ms;
    uint64_t quiet = loop_now_ms() - w->last_data_ms;
    w->silence_timer = NULL;
    if (!w->req)
        return;
    /* Re-armed only when it fires, not at every byte: data costs no timer work. */
    if (quiet < limit) {
        arm_silence(w, limit - quiet);
        return;
    }
    if (w->req->active)
        kube_conn_probe(w->k);
    kube_req_fail(w->req, w->req->active ? -ETIMEDOUT : kube_conn_wait_error(w->k));
    kube_dispatch(w->k);
}

/* The bookmark that ends a streaming list's initial events. */
static bool initial_end(json_t *obj)
{
    json_t *a = json_object_get(json_object_get(obj, "metadata"), "annotations");
    const char *v = json_string_value(json_object_get(a, "k8s.io/initial-events-end"));
    return v && streq(v, "true");
}

/* The server cannot list through the watch: the paged list from now on. */
static void no_stream_list(struct kube_watch *w, const char *why)
{
    log_info("kube: watch %s: %s; listing page by page instead of through the watch",
             w->collection, why);
    w->stream_list = false;
    w->in_initial = false;
    loop_timer_cancel(w->k->loop, w->initial_timer);
    w->initial_timer = NULL;
    start_list(w);
}

static void initial_cb(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct kube_watch *w = userdata;
    w->initial_timer = NULL;
    end_stream(w);
    char why[64];
    snprintf(why, sizeof(why), "no end of the initial events in %u ms", KUBE_WATCH_INITIAL_MS);
    no_stream_list(w, why);
}

/* One event line. Returns false when the stream must not be read further. */
static bool handle_line(struct kube_watch *w, const char *line, size_t len)
{
    json_t *ev, *obj;
    const char *type;
    struct error err = { 0 };
    if (kube_watch_parse_line(line, len, &ev, &type, &obj, &err) < 0) {
        end_stream(w);
        fail(w, "%s", err.msg);
        return false;
    }
    bool go_on = true;
    const char *rv = kube_meta_str(obj, "resourceVersion");
    if (streq(type, "ERROR")) {
        json_t *code = json_object_get(obj, "code");
        end_stream(w);
        go_on = false;
        if (json_integer_value(code) == 410) {
            log_info("kube: watch %s: resourceVersion %s is gone (410): relisting", w->collection,
                     w->rv ? w->rv : "");
            start_list(w);
        } else if (w->in_initial && json_integer_value(code) != 403) {
            /* 1.34+ with an etcd that cannot tell watch progress (before 3.4.31/3.5.13)
             * ends a streaming list with a 500 "RequestWatchProgress is disabled" */
            _cleanup_free_ char *t = status_text((int)json_integer_value(code), obj);
            no_stream_list(w, t);
        } else {
            _cleanup_free_ char *t = status_text((int)json_integer_value(code), obj);
            fail(w, "watch error event: %s", t);
        }
    } else if (streq(type, "BOOKMARK")) {
        if (w->in_initial && initial_end(obj)) {
            w->in_initial = false;
            loop_timer_cancel(w->k->loop, w->initial_timer);
            w->initial_timer = NULL;
            go_on = listed_all(w, rv);
        } else if (rv && !w->in_initial) {
            set_str(&w->rv, rv);
        }
    } else if (!wanted(w, obj)) {
        if (rv && !w->in_initial)
            set_str(&w->rv, rv);
    } else {
        _cleanup_free_ char *key = kube_watch_obj_key(obj);
        enum kube_watch_event e = streq(type, "ADDED")      ? KUBE_WATCH_ADDED
                                  : streq(type, "MODIFIED") ? KUBE_WATCH_MODIFIED
                                                            : KUBE_WATCH_DELETED;
        if (e == KUBE_WATCH_DELETED)
            json_object_del(w->known, key);
        else
            json_object_set_new(w->known, key, kube_watch_known_copy(obj));
        /* An initial event is a listed object; the stream resumes from a resourceVersion
         * only once the list is whole (a break before restarts the list). */
        if (w->in_initial) {
            if (e == KUBE_WATCH_DELETED)
                json_object_del(w->listed, key);
            else
                json_object_set_new(w->listed, key, json_true());
        } else if (rv) {
            set_str(&w->rv, rv);
        }
        backoff_reset(&w->backoff);
        go_on = emit(w, e, obj);
    }
    json_decref(ev);
    return go_on;
}

static void watch_chunk(struct kube_req *r, void *userdata)
{
    struct kube_watch *w = userdata;
    w->last_data_ms = loop_now_ms();
    /* Anything but 200 is a Status for watch_done, not events. */
    if (r->status != 200)
        return;
    size_t start = 0;
    for (;;) {
        uint8_t *nl = memchr(r->buf + start, '\n', r->len - start);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (r->buf + start));
        const char *line = (const char *)r->buf + start;
        start += len + 1;
        if (len == 0 || (len == 1 && line[0] == '\r'))
            continue;
        if (!handle_line(w, line, len)) {
            if (w->stopped)
                watch_free(w);
            return;
        }
    }
    kube_req_consume(r, start);
}

static void watch_done(struct kube *k, int status, json_t *body, void *userdata)
{
    struct kube_watch *w = userdata;
    w->req = NULL;
    loop_timer_cancel(k->loop, w->silence_timer);
    w->silence_timer = NULL;
    loop_timer_cancel(k->loop, w->initial_timer);
    w->initial_timer = NULL;
    if (status == 410) {
        log_info("kube: watch %s: resourceVersion %s is gone (410): relisting", w->collection,
                 w->rv ? w->rv : "");
        start_list(w);
        return;
    }
    if (status == 403 && w->forbidden_ends) {
        forbidden(w, body);
        return;
    }
    if (w->in_initial && (status == 400 || status == 422 || status == 200)) {
        /* 400/422: a server before 1.27, or its WatchList gate off ("sendInitialEvents is
         * forbidden ..."); 200: it ended the stream before the list was whole */
        _cleanup_free_ char *t = status == 200 ? xstrdup("the stream ended before its initial events did")
                                               : status_text(status, body);
        no_stream_list(w, t);
        return;
    }
    if (status == -ESHUTDOWN) {
        log_info("kube: watch %s: the server is going away; resuming from resourceVersion %s on a new connection",
                 w->collection, w->rv);
        start_watch(w);
        return;
    }
    /* A stream the server ended after its timeout resumes at once; one that ends right
     * away again and again (or fails) backs off. */
    if (status == 200 && loop_now_ms() - w->started_ms >= 1000) {
        start_watch(w);
        return;
    }
    _cleanup_free_ char *t = status == 200 ? xstrdup("the stream ended at once") : status_text(status, body);
    fail(w, "watch from resourceVersion %s: %s", w->rv, t);
    /* 404: the collection is gone (a CRD deleted) and its resourceVersions with it; the
     * retry lists, so that the collection served again is seen whole (and SYNCED says so). */
    if (status == 404)
        set_str(&w->rv, NULL);
}

static void start_watch(struct kube_watch *w)
{
    if (!w->rv) { /* a streaming list broken before its end: nothing to resume from */
        start_list(w);
        return;
    }
    _cleanup_free_ char *rv = kube_escape(w->rv);
    _cleanup_free_ char *params = xasprintf("resourceVersion=%s", rv);
    /* At most once per server timeout (5-10 min) on a healthy watch. */
    log_debug("kube: watch %s: from resourceVersion %s", w->collection, w->rv);
    start_stream(w, params);
}

/* The watch stream, with params: from a resourceVersion, or a streaming list. */
static void start_stream(struct kube_watch *w, const char *params)
{
    unsigned timeout_s = kube_watch_timeout_s();
    _cleanup_free_ char *all = xasprintf("watch=1&%s&allowWatchBookmarks=true&timeoutSeconds=%u",
                                         params, timeout_s);
    _cleanup_free_ char *path = query_path(w, all);
    w->silence_ms = kube_watch_silence_ms ? kube_watch_silence_ms
                                          : timeout_s * 1000ull + KUBE_WATCH_SILENCE_MARGIN_MS;
    if (w->in_initial) {
        loop_timer_cancel(w->k->loop, w->initial_timer);
        w->initial_timer = loop_timer_add(w->k->loop, KUBE_WATCH_INITIAL_MS, initial_cb, w);
    }
    w->req = kube_req_new(w->k, KUBE_GET, path, NULL, watch_done, w);
    kube_req_set_stream(w->req, watch_chunk, w->k->max_response);
    kube_req_set_spread(w->req);
    if (w->metadata_only)
        kube_req_set_accept(w->req, ACCEPT_META);
    w->started_ms = w->last_data_ms = loop_now_ms();
    loop_timer_cancel(w->k->loop, w->silence_timer);
    arm_silence(w, w->silence_ms);
    kube_req_submit(w->req);
}

/* ------------------------------------------------------------------ API */

struct kube_watch *kube_watch_start(struct kube *k, const char *collection_path,
                                    const char *field_selector, kube_watch_fn fn, void *userdata,
                                    struct error *err)
{
    struct kube_watch_options o = { .field_selector = field_selector };
    return kube_watch_start_opt(k, collection_path, &o, fn, userdata, err);
}

struct kube_watch *kube_watch_start_opt(struct kube *k, const char *collection_path,
                                        const struct kube_watch_options *o, kube_watch_fn fn,
                                        void *userdata, struct error *err)
{
    const char *field_selector = o ? o->field_selector : NULL;
    if (!k || !collection_path || collection_path[0] != '/' || strchr(collection_path, '?') || !fn) {
        error_set(err, -EINVAL, "kube watch: bad arguments");
        return NULL;
    }
    struct kube_watch *w = xcalloc(1, sizeof(*w));
    w->k = k;
    w->backoff = BACKOFF_INIT(KUBE_BACKOFF_MIN_MS, KUBE_BACKOFF_MAX_MS, 0, true);
    w->collection = xstrdup(collection_path);
    w->metadata_only = o && o->metadata_only;
    w->stream_list = o && o->stream_list;
    w->forbidden_ends = o && o->forbidden_ends;
    w->selector = field_selector && *field_selector ? xstrdup(field_selector) : NULL;
    /* Only the one form this client uses is enforced; any other selector is the server's. */
    if (w->selector && startswith(w->selector, "metadata.name=") && !strchr(w->selector, ','))
        w->name = xstrdup(w->selector + strlen("metadata.name="));
    w->foreign_log = RATELIMIT_INIT(KUBE_WATCH_FOREIGN_LOG_MS, 1);
    w->fn = fn;
    w->userdata = userdata;
    w->known = json_object();
    w->listed = json_object();
    w->next = k->watches;
    if (k->watches)
        k->watches->prev = w;
    k->watches = w;
    start_list(w);
    return w;
}

void kube_watches_free(struct kube *k)
{
    while (k->watches)
        watch_free(k->watches);
}

void kube_watch_stop(struct kube_watch *w)
{
    if (!w)
        return;
    if (w->busy) {
        w->stopped = true;
        return;
    }
    watch_free(w);
}
