/* What the publisher learns of the API server before writing (see dra-publish-internal.h):
 * the Node's UID, the slices' owner, from a watch of its metadata or a GET; the server's
 * version, which chooses DynamicMIG's layout. */
#include <stdio.h>

#include "core/log.h"
#include "core/loop.h"
#include "dra/dra-publish-internal.h"
#include "kube/kube.h"

/* ---- the Node (owner) ---- */

static void on_node_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_publish *p = userdata;
    p->retry = NULL;
    dra_publish_get_node(p);
}

static void on_node(struct kube *k, int status, json_t *body, void *userdata)
{
    struct dra_publish *p = userdata;
    char buf[512];
    p->req = NULL;
    const char *uid = json_string_value(json_object_get(json_object_get(body, "metadata"), "uid"));
    if (status != 200 || !uid || !*uid) {
        _cleanup_free_ char *why = xasprintf("reading Node %s (the slices' owner): %s", p->node,
                                             dra_publish_status_text(status, body, buf, sizeof(buf)));
        uint64_t delay_ms = dra_publish_failed(p, why);
        loop_timer_cancel(p->loop, p->retry);
        p->retry = loop_timer_add(p->loop, delay_ms, on_node_retry, p);
        return;
    }
    dra_publish_succeeded(p);
    if (p->node_uid && !streq(p->node_uid, uid))
        log_info("Node %s has a new UID %s (was %s): its ResourceSlices get it as owner", p->node,
                 uid, p->node_uid);
    if (!streq_ptr(p->node_uid, uid))
        p->wanted_changes++;
    free(p->node_uid);
    p->node_uid = xstrdup(uid);
    p->refresh_node = false;
    dra_publish_answered(p);
}

void dra_publish_get_node(struct dra_publish *p)
{
    struct error err = { 0 };
    _cleanup_free_ char *node = kube_escape(p->node);
    _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", node);
    p->req = kube_request(p->kube, KUBE_GET, path, NULL, on_node, p, &err);
    if (!p->req) {
        uint64_t delay_ms = dra_publish_failed(p, err.msg);
        loop_timer_cancel(p->loop, p->retry);
        p->retry = loop_timer_add(p->loop, delay_ms, on_node_retry, p);
    }
}

/* The Node's UID from a watch of its metadata: the owner is known without a request of
 * the rate limit, and a Node deleted and created again (its slices then go with the old
 * UID's garbage collection) is seen at once, not inferred from the slices going. Without
 * list and watch of Nodes (a ClusterRole granting only get, as before), the GET. */
static void on_node_event(struct kube_watch *w, enum kube_watch_event ev, json_t *obj, void *userdata)
{
    struct dra_publish *p = userdata;
    if (ev == KUBE_WATCH_FORBIDDEN) {
        log_info("Not allowed to watch Node %s (list and watch of nodes); reading it instead", p->node);
        kube_watch_stop(p->node_watch);
        p->node_watch = NULL;
        if (!p->req && !p->retry)
            dra_publish_get_node(p);
        return; /* else dra_publish_converge() asks once the request is answered */
    }
    if (ev != KUBE_WATCH_ADDED && ev != KUBE_WATCH_MODIFIED)
        return;
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!uid || !*uid || streq_ptr(p->node_uid, uid))
        return;
    if (p->node_uid)
        log_info("Node %s has a new UID %s (was %s): its ResourceSlices get it as owner", p->node,
                 uid, p->node_uid);
    free(p->node_uid);
    p->node_uid = xstrdup(uid);
    p->wanted_changes++;
    dra_publish_converge(p);
}

void dra_publish_watch_node(struct dra_publish *p)
{
    struct error err = { 0 };
    _cleanup_free_ char *sel = xasprintf("metadata.name=%s", p->node);
    struct kube_watch_options o = { .field_selector = sel, .metadata_only = true,
                                    .stream_list = true, .forbidden_ends = true };
    p->node_watch = kube_watch_start_opt(p->kube, "/api/v1/nodes", &o, on_node_event, p, &err);
    if (!p->node_watch)
        dra_publish_get_node(p);
}

/* ---- the API server's version (the layout of DynamicMIG's counters) ---- */

static void on_version(struct kube *k, int status, json_t *body, void *userdata)
{
    struct dra_publish *p = userdata;
    char buf[512];
    p->req = NULL;
    const char *v = json_string_value(json_object_get(body, "gitVersion"));
    if (status != 200 || !v) {
        /* not worth holding the slices back for: 1.35+ is what serves resource.k8s.io/v1
         * with counters by default, and a refusal of the split layout is logged */
        log_warning("Reading the API server's version: %s; publishing the split layout of "
                    "Kubernetes 1.35+", dra_publish_status_text(status, body, buf, sizeof(buf)));
        p->combined = false;
    } else {
        p->combined = dra_publish_combined_layout(v);
        log_info("API server %s: shared counters in %s", v,
                 p->combined ? "the slice of their devices (before 1.35)"
                             : "counters-only slices (1.35+)");
    }
    p->version_known = true;
    p->wanted_changes++;
    dra_publish_answered(p);
}

void dra_publish_get_version(struct dra_publish *p)
{
    struct error err = { 0 };
    p->req = kube_request(p->kube, KUBE_GET, "/version", NULL, on_version, p, &err);
    if (!p->req) {
        log_warning("Reading the API server's version: %s; publishing the split layout of "
                    "Kubernetes 1.35+", err.msg);
        p->version_known = true;
        p->combined = false;
        p->wanted_changes++;
    }
}
