/* Label delivery, in the mode chosen at start (GFD's flags, and ours):
 *   file        NFD's local feature file, written atomically when the set changes,
 *               removed at exit (labels/labels.h);
 *   NodeFeature the NFD object nvidia-features-for-<node> in the namespace: GET, then
 *               create (POST) or, only if it differs, update (PUT at its
 *               resourceVersion); owned by our DaemonSet and Pod when --pod-name is set;
 *   node patch  a JSON merge patch of the Node's labels, touching only the keys we own
 *               (CLUSTER_OWNED_LABELS_ANNOTATION).
 * One delivery runs at a time; a label set that changes meanwhile is delivered after
 * it. Delivery happens at start, after each reload and when the node state changes,
 * never on a timer; a failed delivery is retried with capped backoff, its failure
 * logged once per new reason.
 *
 * Healing (API modes): what the server holds is watched, not polled, so a steady state
 * costs no request but the watch. The own NodeFeature is watched by name; the own
 * Node's labels through the per-node config's Node watch when it runs, else a watch of
 * their own. An object deleted, or changed so that it no longer says what was sent
 * (content compared, so the echo of our own write is nothing), is checked again through
 * the same one-at-a-time delivery: GET, and a write only if it differs. Retries and
 * restores are paced by core/heal.h, as DRA's ResourceSlices are: a peer flipping the
 * object every 50 ms gets a write every HEAL_RESTORE_PERIOD_MS, not 20 a second. A NodeFeature API
 * that is gone (NFD's CRD deleted or re-installed) makes the watch relist with backoff;
 * its first good list without our object delivers at once. The file mode is not
 * watched: a deleted feature file comes back with the next label change or SIGHUP. */
#include <stdio.h>

#include "cluster/cluster-internal.h"
#include "cluster/cluster-objects.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/heal.h"
#include "kube/kube.h"
#include "labels/labels.h"

enum step { STEP_IDLE, STEP_POD, STEP_GET, STEP_WRITE };

static void deliver(struct cluster *c);
static void recheck(struct cluster *c, bool api_back);

static json_t *labels_json(const struct labels *l)
{
    json_t *o = json_object();
    for (size_t i = 0; i < l->n; i++)
        json_object_set_new(o, l->items[i].key, json_string(l->items[i].value));
    return o;
}

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster *c = userdata;
    c->labels_retry = NULL;
    deliver(c);
}

/* End of one delivery: ok, or failed with `why` (a warning when the reason is new, so
 * an API that stays away for an hour is one line, not one per retry). */
static void finish(struct cluster *c, bool ok, const char *why)
{
    c->labels_step = STEP_IDLE;
    c->labels_req = NULL;
    if (ok) {
        heal_succeeded(&c->labels_heal);
        if (c->labels_recheck) {
            /* The object changed while this delivery ran, maybe after its GET. */
            c->labels_recheck = c->labels_again = false;
            recheck(c, false);
        } else if (c->labels_again) {
            c->labels_again = false;
            deliver(c);
        }
        return;
    }
    bool is_new;
    uint64_t delay_ms = heal_failed(&c->labels_heal, why, &is_new);
    if (is_new)
        log_warning("Publishing node labels failed: %s; retrying with backoff (now %llus, "
                    "at most %us)",
                    why, (unsigned long long)(delay_ms / 1000), HEAL_RETRY_MAX_MS / 1000u);
    else
        log_debug("Publishing node labels failed again: %s; retrying in %llus", why,
                  (unsigned long long)(delay_ms / 1000));
    c->labels_again = c->labels_recheck = false; /* the retry delivers from a fresh GET */
    c->labels_retry = loop_timer_add(c->loop, delay_ms, on_retry, c);
}

static void sent(struct cluster *c, const char *where)
{
    json_decref(c->labels_sent);
    c->labels_sent = json_deep_copy(c->labels_want);
    log_info("Published %zu node labels (%s)", json_object_size(c->labels_want), where);
    finish(c, true, NULL);
}

static const char *status_text(int status, char buf[64])
{
    if (status < 0)
        snprintf(buf, 64, "%s", strerror(-status));
    else
        snprintf(buf, 64, "HTTP %d", status);
    return buf;
}

static bool request(struct cluster *c, enum kube_method m, const char *path, json_t *body,
                    kube_done_fn fn)
{
    struct error err = { 0 };
    struct kube *k = cluster_kube(c);
    if (!k) {
        finish(c, false, "no API client");
        return false;
    }
    c->labels_req = kube_request(k, m, path, body, fn, c, &err);
    if (!c->labels_req) {
        finish(c, false, err.msg);
        return false;
    }
    return true;
}

/* ---- NodeFeature ---- */

static char *nodefeature_path(const struct cluster *c, bool item)
{
    return item ? xasprintf("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/%s/nodefeatures/"
                            "nvidia-features-for-%s",
                            c->ns, c->node)
                : xasprintf("/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/%s/nodefeatures", c->ns);
}

static void nf_get(struct cluster *c);

static void on_nf_written(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    char buf[64];
    c->labels_req = NULL;
    if (status == 200 || status == 201) {
        sent(c, "NodeFeature");
    } else if (status == 409) {
        /* Someone else wrote it in between: compare again, as a restore (rate-limited,
         * so a peer that always wins the race cannot make us loop). */
        c->labels_step = STEP_IDLE;
        recheck(c, false);
    } else if (status == 404) {
        finish(c, false, "the NodeFeature API is not served (is NFD's NodeFeature CRD "
                         "installed?)");
    } else {
        finish(c, false, status_text(status, buf));
    }
}

static void on_nf_get(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    char buf[64];
    c->labels_req = NULL;
    if (status != 200 && status != 404) {
        finish(c, false, status_text(status, buf));
        return;
    }
    json_t *want = cluster_nodefeature_build(c->node, c->ns, c->labels_want, c->owner_refs);
    if (status == 200 && body && cluster_nodefeature_same(body, want)) {
        json_decref(want);
        json_decref(c->labels_sent);
        c->labels_sent = json_deep_copy(c->labels_want);
        log_debug("NodeFeature nvidia-features-for-%s is up to date", c->node);
        finish(c, true, NULL);
        return;
    }
    c->labels_step = STEP_WRITE;
    _cleanup_free_ char *path = nodefeature_path(c, status == 200);
    if (status == 200) {
        /* An update at the version we compared against: a concurrent writer gets 409. */
        json_t *rv = json_object_get(json_object_get(body, "metadata"), "resourceVersion");
        if (rv)
            json_object_set(json_object_get(want, "metadata"), "resourceVersion", rv);
        request(c, KUBE_PUT, path, want, on_nf_written);
    } else {
        request(c, KUBE_POST, path, want, on_nf_written);
    }
    json_decref(want);
}

static void nf_get(struct cluster *c)
{
    c->labels_step = STEP_GET;
    _cleanup_free_ char *path = nodefeature_path(c, true);
    request(c, KUBE_GET, path, NULL, on_nf_get);
}

static void on_pod(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    char buf[64];
    c->labels_req = NULL;
    if (status == 200 && body) {
        c->owner_refs = cluster_owner_refs_from_pod(body);
        if (!c->owner_refs)
            log_info("Pod %s/%s has no DaemonSet owner: the NodeFeature gets no owner "
                     "references",
                     c->ns, c->pod);
    } else {
        /* Not worth failing the labels for: GFD also goes on without owners. */
        log_warning("Reading pod %s/%s for owner references failed: %s; the NodeFeature "
                    "gets none",
                    c->ns, c->pod, status_text(status, buf));
    }
    c->owner_refs_done = true;
    nf_get(c);
}

/* ---- Node labels patch ---- */

static void on_node_patched(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    char buf[64];
    c->labels_req = NULL;
    if (status == 200)
        sent(c, "Node labels");
    else
        finish(c, false, status_text(status, buf));
}

static void on_node_get(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    char buf[64];
    c->labels_req = NULL;
    if (status != 200 || !body) {
        finish(c, false, status_text(status, buf));
        return;
    }
    const json_t *meta = json_object_get(body, "metadata");
    json_t *patch = cluster_node_labels_patch(c->labels_want, json_object_get(meta, "labels"),
                                              json_object_get(meta, "annotations"));
    if (!patch) {
        json_decref(c->labels_sent);
        c->labels_sent = json_deep_copy(c->labels_want);
        log_debug("Node %s labels are up to date", c->node);
        finish(c, true, NULL);
        return;
    }
    c->labels_step = STEP_WRITE;
    _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", c->node);
    request(c, KUBE_PATCH_MERGE, path, patch, on_node_patched);
    json_decref(patch);
}

/* ---- the delivery ---- */

static void deliver(struct cluster *c)
{
    if (!c->labels_want || c->labels_step != STEP_IDLE || c->labels_retry)
        return;
    if (c->labels_sent && json_equal(c->labels_sent, c->labels_want))
        return;
    switch (c->labels_mode) {
    case CLUSTER_LABELS_OFF:
        return;
    case CLUSTER_LABELS_FILE: {
        _cleanup_labels_ struct labels *l = labels_new();
        const char *k;
        json_t *v;
        json_object_foreach (c->labels_want, k, v)
            labels_set(l, k, json_string_value(v));
        struct error err = { 0 };
        if (labels_write_feature_file(l, c->output_file, &err) < 0)
            finish(c, false, err.msg);
        else
            sent(c, c->output_file && *c->output_file ? c->output_file : "stdout");
        return;
    }
    case CLUSTER_LABELS_NODEFEATURE:
        if (c->pod && !c->owner_refs_done) {
            c->labels_step = STEP_POD;
            _cleanup_free_ char *path = xasprintf("/api/v1/namespaces/%s/pods/%s", c->ns,
                                                  c->pod);
            request(c, KUBE_GET, path, NULL, on_pod);
            return;
        }
        nf_get(c);
        return;
    case CLUSTER_LABELS_NODE_PATCH: {
        c->labels_step = STEP_GET;
        _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", c->node);
        request(c, KUBE_GET, path, NULL, on_node_get);
        return;
    }
    }
}

/* ---- healing ---- */

static void on_restore_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster *c = userdata;
    c->labels_retry = NULL;
    recheck(c, false);
}

/* What the server holds may no longer be what was sent: deliver again (GET, then a write
 * only if it differs), after the running delivery, and at most as often as the restore
 * bucket allows. api_back: the API answered again after failing, so a failure's pending
 * retry is not waited for. */
static void recheck(struct cluster *c, bool api_back)
{
    if (!c->labels_want)
        return; /* nothing sent yet: the first delivery will look */
    json_decref(c->labels_sent);
    c->labels_sent = NULL;
    if (c->labels_step != STEP_IDLE) {
        c->labels_recheck = true;
        return;
    }
    if (c->labels_retry) {
        if (!api_back)
            return; /* a retry or a restore is pending: it delivers from a fresh GET */
        loop_timer_cancel(c->loop, c->labels_retry);
        c->labels_retry = NULL;
    }
    bool warn;
    char more[HEAL_MORE_MAX];
    uint64_t wait_ms = heal_restore(&c->labels_heal, &warn, more);
    if (wait_ms) {
        if (warn)
            log_warning("Node labels keep being deleted or changed by someone else; restoring "
                        "them at most once every %us%s",
                        HEAL_RESTORE_PERIOD_MS / 1000u, more);
        c->labels_retry = loop_timer_add(c->loop, wait_ms, on_restore_timer, c);
        return;
    }
    deliver(c);
}

/* The watch shows the server holding what we want (our write's echo, or a peer that put
 * it back): a restore still paced by the bucket, or owed after the running delivery by an
 * older event, has nothing left to do; without this its GET would come up to
 * HEAL_RESTORE_PERIOD_MS after the object was whole. A failure's retry stays. */
static void settled(struct cluster *c)
{
    if (c->labels_step != STEP_IDLE) {
        c->labels_recheck = false;
        return;
    }
    if (!c->labels_retry || c->labels_heal.error)
        return;
    loop_timer_cancel(c->loop, c->labels_retry);
    c->labels_retry = NULL;
    json_decref(c->labels_sent);
    c->labels_sent = json_deep_copy(c->labels_want);
}

/* One line per restore, within HEAL_LOG_BURST per HEAL_LOG_MS. */
static void say_restore(struct cluster *c, const char *what, const char *how)
{
    char more[HEAL_MORE_MAX];
    if (heal_say(&c->labels_heal, more))
        log_info("%s %s by someone else; restoring it%s", what, how, more);
}

static void on_nf_event(struct kube_watch *w, enum kube_watch_event ev, json_t *obj,
                        void *userdata)
{
    struct cluster *c = userdata;
    if (ev == KUBE_WATCH_SYNCED) {
        /* A (re)list without our object: deleted while the watch was away, or the API
         * back after a 404 (the CRD re-installed). */
        if (!c->labels_present && c->labels_sent) {
            say_restore(c, "NodeFeature", "missing after a relist, deleted");
            recheck(c, true);
        } else if (!c->labels_present && c->labels_retry && c->labels_heal.error) {
            recheck(c, true); /* the API is back: do not wait for the failure's retry */
        }
        return;
    }
    const json_t *meta = json_object_get(obj, "metadata");
    _cleanup_free_ char *name = xasprintf("nvidia-features-for-%s", c->node);
    if (!streq_ptr(json_string_value(json_object_get(meta, "name")), name))
        return;
    if (ev == KUBE_WATCH_DELETED) {
        c->labels_present = false;
        if (c->labels_sent)
            say_restore(c, "NodeFeature", "deleted");
        recheck(c, false);
        return;
    }
    c->labels_present = true;
    if (!c->labels_want)
        return;
    json_t *want = cluster_nodefeature_build(c->node, c->ns, c->labels_want, c->owner_refs);
    bool same = cluster_nodefeature_same(obj, want);
    json_decref(want);
    if (same) {
        settled(c); /* our own write's echo, or a change to what we do not own */
        return;
    }
    if (c->labels_sent)
        say_restore(c, "NodeFeature", "changed");
    recheck(c, false);
}

void cluster_labels_node_event(struct cluster *c, enum kube_watch_event ev, json_t *obj)
{
    /* A deleted Node is not ours to re-create; its next incarnation is compared. */
    if (c->labels_mode != CLUSTER_LABELS_NODE_PATCH || !c->labels_want ||
        ev == KUBE_WATCH_SYNCED || ev == KUBE_WATCH_DELETED)
        return;
    const json_t *meta = json_object_get(obj, "metadata");
    if (!streq_ptr(json_string_value(json_object_get(meta, "name")), c->node))
        return;
    json_t *patch = cluster_node_labels_patch(c->labels_want, json_object_get(meta, "labels"),
                                              json_object_get(meta, "annotations"));
    if (!patch) {
        settled(c);
        return;
    }
    json_decref(patch);
    if (c->labels_sent)
        say_restore(c, "Node labels", "removed or changed");
    recheck(c, false);
}

static void on_node_event(struct kube_watch *w, enum kube_watch_event ev, json_t *obj,
                          void *userdata)
{
    cluster_labels_node_event(userdata, ev, obj);
}

/* The watch that heals what was delivered, from the first delivery on. */
static void watch_start(struct cluster *c)
{
    heal_init(&c->labels_heal);
    if (c->labels_mode == CLUSTER_LABELS_NODE_PATCH && c->watch)
        return; /* per-node config's Node watch passes its events on */
    if (c->labels_mode != CLUSTER_LABELS_NODE_PATCH &&
        c->labels_mode != CLUSTER_LABELS_NODEFEATURE)
        return;
    struct kube *k = cluster_kube(c);
    if (!k)
        return; /* said once by cluster_kube */
    struct error err = { 0 };
    if (c->labels_mode == CLUSTER_LABELS_NODEFEATURE) {
        _cleanup_free_ char *path = nodefeature_path(c, false);
        _cleanup_free_ char *sel = xasprintf("metadata.name=nvidia-features-for-%s", c->node);
        c->labels_watch = kube_watch_start(k, path, sel, on_nf_event, c, &err);
    } else {
        /* Only the labels and annotations count: the kubelet's status writes stay small. */
        _cleanup_free_ char *sel = xasprintf("metadata.name=%s", c->node);
        struct kube_watch_options o = { .field_selector = sel, .metadata_only = true };
        c->labels_watch = kube_watch_start_opt(k, "/api/v1/nodes", &o, on_node_event, c, &err);
    }
    if (!c->labels_watch)
        log_warning("Watching the published node labels: %s; labels someone deletes are "
                    "restored only at the next change or SIGHUP",
                    err.msg);
}

bool cluster_labels_enabled(const struct cluster *c)
{
    return c && c->labels_mode != CLUSTER_LABELS_OFF;
}

void cluster_labels_publish(struct cluster *c, const struct labels *l)
{
    if (!cluster_labels_enabled(c))
        return;
    json_t *want = labels_json(l);
    if (c->labels_want && json_equal(c->labels_want, want)) {
        json_decref(want);
        return;
    }
    bool first = !c->labels_want;
    json_decref(c->labels_want);
    c->labels_want = want;
    if (first)
        watch_start(c);
    if (c->labels_step != STEP_IDLE) {
        c->labels_again = true;
        return;
    }
    if (c->labels_retry) {
        /* New labels: try now rather than at the end of the backoff. */
        loop_timer_cancel(c->loop, c->labels_retry);
        c->labels_retry = NULL;
    }
    deliver(c);
}

int cluster_labels_settled(const struct cluster *c)
{
    if (!c || !c->labels_want)
        return 0;
    if (c->labels_step == STEP_IDLE && c->labels_sent && json_equal(c->labels_sent, c->labels_want))
        return 1;
    /* Waiting for a retry after a failure (labels_retry also paces restores). */
    return c->labels_step == STEP_IDLE && c->labels_retry && c->labels_heal.error ? -1 : 0;
}

void cluster_publish_free(struct cluster *c)
{
    kube_watch_stop(c->labels_watch);
    c->labels_watch = NULL;
    kube_request_cancel(c->labels_req);
    c->labels_req = NULL;
    if (c->labels_retry)
        loop_timer_cancel(c->loop, c->labels_retry);
    c->labels_retry = NULL;
    if (c->labels_mode == CLUSTER_LABELS_FILE && c->labels_sent && c->output_file &&
        *c->output_file && !c->keep_output_file) {
        int r = labels_remove_feature_file(c->output_file);
        if (r < 0)
            log_warning("Removing %s: %s", c->output_file, strerror(-r));
    }
    json_decref(c->labels_want);
    json_decref(c->labels_sent);
    json_decref(c->owner_refs);
    heal_clear(&c->labels_heal);
    free(c->output_file);
}
