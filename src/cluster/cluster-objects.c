/* The JSON objects and patches of the cluster features (see cluster-objects.h). */
#include <stdio.h>

#include "cluster/cluster-objects.h"
#include "core/macro.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, comma-separated keys of labels: stable, so an unchanged set compares equal. */
static char *owned_value(const json_t *labels)
{
    size_t n = json_object_size(labels), i = 0, len = 1;
    const char **keys = xcalloc(n ? n : 1, sizeof(char *));
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v) {
        keys[i++] = k;
        len += strlen(k) + 1;
    }
    qsort(keys, n, sizeof(char *), cmp_str);
    char *out = xcalloc(1, len), *p = out;
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s%s", i ? "," : "", keys[i]);
    free(keys);
    return out;
}

json_t *cluster_node_labels_patch(const json_t *labels, const json_t *node_labels,
                                  const json_t *node_annotations)
{
    json_t *set = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v) {
        json_t *cur = node_labels ? json_object_get(node_labels, k) : NULL;
        if (!cur || !json_equal(cur, v))
            json_object_set(set, k, v);
    }
    const char *prev = node_annotations
                           ? json_string_value(json_object_get(node_annotations,
                                                               CLUSTER_OWNED_LABELS_ANNOTATION))
                           : NULL;
    for (const char *p = prev; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        _cleanup_free_ char *key = xstrndup(p, len);
        /* Only a key we wrote, that we no longer produce, and that is still there. */
        if (len && !json_object_get(labels, key) && node_labels &&
            json_object_get(node_labels, key))
            json_object_set_new(set, key, json_null());
        p = e ? e + 1 : p + len;
    }
    _cleanup_free_ char *owned = owned_value(labels);
    bool owned_same = prev && streq(prev, owned);
    if (json_object_size(set) == 0 && owned_same) {
        json_decref(set);
        return NULL;
    }
    json_t *meta = json_pack("{s:o}", "labels", set);
    if (!owned_same)
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", CLUSTER_OWNED_LABELS_ANNOTATION, owned));
    return json_pack("{s:o}", "metadata", meta);
}

json_t *cluster_nodefeature_build(const char *node, const char *ns, const json_t *labels,
                                  const json_t *owner_refs)
{
    _cleanup_free_ char *name = xasprintf("nvidia-features-for-%s", node);
    json_t *meta = json_pack("{s:s, s:s, s:{s:s}}", "name", name, "namespace", ns, "labels",
                             CLUSTER_NODEFEATURE_NODE_LABEL, node);
    if (owner_refs && json_array_size(owner_refs))
        json_object_set_new(meta, "ownerReferences", json_deep_copy(owner_refs));
    return json_pack("{s:s, s:s, s:o, s:{s:O}}", "apiVersion",
                     CLUSTER_NODEFEATURE_GROUP_VERSION, "kind", "NodeFeature", "metadata", meta,
                     "spec", "labels", labels);
}

static bool same_field(const json_t *a, const json_t *b)
{
    return a && b ? json_equal(a, b) : a == b;
}

bool cluster_nodefeature_same(const json_t *existing, const json_t *want)
{
    const json_t *em = json_object_get(existing, "metadata");
    const json_t *wm = json_object_get(want, "metadata");
    const json_t *el = json_object_get(json_object_get(existing, "spec"), "labels");
    const json_t *wl = json_object_get(json_object_get(want, "spec"), "labels");
    /* An empty label set comes back from the server without the field. */
    if (!(same_field(el, wl) || (json_object_size(wl) == 0 && json_object_size(el) == 0)))
        return false;
    const char *node = json_string_value(
        json_object_get(json_object_get(wm, "labels"), CLUSTER_NODEFEATURE_NODE_LABEL));
    const char *have = json_string_value(
        json_object_get(json_object_get(em, "labels"), CLUSTER_NODEFEATURE_NODE_LABEL));
    if (!streq_ptr(node, have))
        return false;
    const json_t *wo = json_object_get(wm, "ownerReferences");
    return !wo || same_field(json_object_get(em, "ownerReferences"), wo);
}

json_t *cluster_owner_refs_from_pod(const json_t *pod)
{
    const json_t *meta = json_object_get(pod, "metadata");
    const char *pod_name = json_string_value(json_object_get(meta, "name"));
    const char *pod_uid = json_string_value(json_object_get(meta, "uid"));
    size_t i;
    json_t *ref;
    json_array_foreach (json_object_get(meta, "ownerReferences"), i, ref) {
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        const char *api = json_string_value(json_object_get(ref, "apiVersion"));
        if (!kind || !streq(kind, "DaemonSet") || !name || !uid || !api || !pod_name || !pod_uid)
            continue;
        return json_pack("[{s:s, s:s, s:s, s:s, s:b}, {s:s, s:s, s:s, s:s}]", "apiVersion",
                         api, "kind", "DaemonSet", "name", name, "uid", uid, "controller", 1,
                         "apiVersion", "v1", "kind", "Pod", "name", pod_name, "uid", pod_uid);
    }
    return NULL;
}

json_t *cluster_event_build(const char *node, const char *name, const char *type,
                            const char *reason, const char *message, unsigned count,
                            const char *first_time, const char *last_time)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:i, "
                     "s:s, s:s, s:{s:s, s:s}, s:s, s:s}",
                     "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
                     "namespace", "default", "involvedObject", "apiVersion", "v1", "kind",
                     "Node", "name", node, "uid", node, "type", type, "reason", reason,
                     "message", message, "count", (json_int_t)count, "firstTimestamp",
                     first_time, "lastTimestamp", last_time, "source", "component",
                     "gpu-device-plugin", "host", node, "reportingComponent",
                     "gpu-device-plugin", "reportingInstance", node);
}

json_t *cluster_event_patch(const char *message, unsigned count, const char *last_time)
{
    return json_pack("{s:s, s:i, s:s}", "message", message, "count", (json_int_t)count,
                     "lastTimestamp", last_time);
}
