/* The objects of a watch (see kube-watch.c): its event lines parsed, the metadata read,
 * and what is kept of an object for a DELETED found by a relist. */
#include <stdio.h>

#include "core/error.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

int kube_watch_parse_line(const char *line, size_t len, json_t **event, const char **type,
                          json_t **object, struct error *err)
{
    json_error_t jerr;
    json_t *ev = json_loadb(line, len, 0, &jerr);
    if (!ev)
        return error_set(err, -EBADMSG, "watch event: not JSON: %s", jerr.text);
    json_t *t = json_object_get(ev, "type"), *o = json_object_get(ev, "object");
    if (!json_is_string(t) || !json_is_object(o)) {
        json_decref(ev);
        return error_set(err, -EBADMSG, "watch event: no \"type\" string and \"object\" mapping");
    }
    const char *ts = json_string_value(t);
    if (!streq(ts, "ADDED") && !streq(ts, "MODIFIED") && !streq(ts, "DELETED") &&
        !streq(ts, "BOOKMARK") && !streq(ts, "ERROR")) {
        error_set(err, -EBADMSG, "watch event: unknown type \"%.40s\"", ts);
        json_decref(ev);
        return -EBADMSG;
    }
    *event = ev;
    *type = ts;
    *object = o;
    return 0;
}

const char *kube_meta_str(json_t *obj, const char *key)
{
    json_t *v = json_object_get(json_object_get(obj, "metadata"), key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* What is kept of an object for reporting it DELETED after a relist: its kind and
 * metadata without managedFields. A real Node's spec, status (images, conditions) and
 * managedFields are tens of KiB as JSON and several times that as a jansson tree; keeping
 * them would hold that much per watched object for the watch's life. The copy is deep: a
 * member shared with the event kept the pages of its parse (a 31 KiB slice's) resident
 * around a few hundred live bytes. */
json_t *kube_watch_known_copy(json_t *obj)
{
    json_t *keep = json_object();
    const char *fields[] = { "apiVersion", "kind" };
    for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
        json_t *v = json_object_get(obj, fields[i]);
        if (v)
            json_object_set_new(keep, fields[i], json_deep_copy(v));
    }
    json_t *meta = json_object_get(obj, "metadata"), *v;
    const char *key;
    if (json_is_object(meta)) {
        json_t *m = json_object();
        json_object_foreach (meta, key, v)
            if (!streq(key, "managedFields"))
                json_object_set_new(m, key, json_deep_copy(v));
        json_object_set_new(keep, "metadata", m);
    }
    return keep;
}

char *kube_watch_obj_key(json_t *obj)
{
    const char *ns = kube_meta_str(obj, "namespace"), *name = kube_meta_str(obj, "name");
    return xasprintf("%s/%s", ns ? ns : "", name ? name : "");
}
