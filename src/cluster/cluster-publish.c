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
 * never on a timer; a failed delivery is retried with capped backoff. */
#include <stdio.h>

#include "cluster/cluster-internal.h"
#include "cluster/cluster-objects.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"
#include "labels/labels.h"

#define RETRY_MIN_MS 1000u
#define RETRY_MAX_MS (5u * 60u * 1000u)

enum step { STEP_IDLE, STEP_POD, STEP_GET, STEP_WRITE };

static void deliver(struct cluster *c);

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

/* End of one delivery: ok, or failed with `why` (logged here, once per delivery). */
static void finish(struct cluster *c, bool ok, const char *why)
{
    c->labels_step = STEP_IDLE;
    c->labels_req = NULL;
    if (ok) {
        backoff_reset(&c->labels_backoff);
        if (c->labels_again) {
            c->labels_again = false;
            deliver(c);
        }
        return;
    }
    if (c->labels_backoff.failures == 0) /* a run of failures starts: from RETRY_MIN_MS */
        c->labels_backoff = BACKOFF_INIT(RETRY_MIN_MS, RETRY_MAX_MS, 0, false);
    uint64_t delay_ms = backoff_next(&c->labels_backoff);
    log_warning("Publishing node labels failed: %s; retrying in %llus", why,
                (unsigned long long)(delay_ms / 1000));
    c->labels_again = false;
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
        nf_get(c); /* someone else wrote it in between: compare again */
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
    json_decref(c->labels_want);
    c->labels_want = want;
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

void cluster_publish_free(struct cluster *c)
{
    kube_request_cancel(c->labels_req);
    c->labels_req = NULL;
    if (c->labels_retry)
        loop_timer_cancel(c->loop, c->labels_retry);
    c->labels_retry = NULL;
    if (c->labels_mode == CLUSTER_LABELS_FILE && c->labels_sent && c->output_file &&
        *c->output_file) {
        int r = labels_remove_feature_file(c->output_file);
        if (r < 0)
            log_warning("Removing %s: %s", c->output_file, strerror(-r));
    }
    json_decref(c->labels_want);
    json_decref(c->labels_sent);
    json_decref(c->owner_refs);
    free(c->output_file);
}
