/* The publisher's decisions (see dra-publish-internal.h): pure, no requests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/digest.h"
#include "core/log.h"
#include "core/macro.h"
#include "dra/dra-publish-internal.h"
#include "dra/dra-slice.h"

/* ---- desired state ---- */

json_t *dra_publish_taint(const struct dra_unhealthy_device *h)
{
    if (h->lost)
        return json_pack("{s:s, s:s}", "key", TAINT_LOST, "effect", "NoSchedule");
    char v[16];
    snprintf(v, sizeof(v), "%u", h->xid);
    return json_pack("{s:s, s:s, s:s}", "key", TAINT_XID, "value", v, "effect", "NoSchedule");
}

char *dra_publish_text(json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!t)
        oom(); /* jansson fails only to allocate for what we build */
    return t;
}

/* The devices to offer, from the caller's tree, which is not changed: a device the API
 * server must see otherwise (counters dropped, a taint) is a shallow copy. */
json_t *dra_publish_want(const struct dra_publish *p)
{
    json_t *want = json_array(), *d;
    size_t i;
    json_array_foreach (p->devices_tree, i, d) {
        json_t *own = NULL;
        if (p->stats.partitions == DRA_PARTITIONS_DROPPED && json_object_get(d, "consumesCounters")) {
            /* the scheduler would not see what it consumes: a placement is not offered,
             * a full GPU is, as a GPU without DynamicMIG is */
            const char *type = json_string_value(json_object_get(
                json_object_get(json_object_get(d, "attributes"), "type"), "string"));
            if (type && streq(type, "mig"))
                continue;
            own = json_copy(d);
            json_object_del(own, "consumesCounters");
        }
        json_t *t = json_object_get(p->unhealthy, json_string_value(json_object_get(d, "name")));
        if (!t) {
            json_array_append(want, own ? own : d);
        } else if (p->stats.taints != DRA_TAINTS_DROPPED) {
            if (!own)
                own = json_copy(d);
            json_object_set_new(own, "taints", json_pack("[O]", t));
            json_array_append(want, own);
        } /* else withdrawn: a device the scheduler cannot be told is unhealthy is not offered */
        json_decref(own);
    }
    return want;
}

/* "<node>-<driver>-<i>", within the 253 characters of an object name. */
static char *slice_name(const struct dra_publish *p, size_t i)
{
    char suffix[80];
    snprintf(suffix, sizeof(suffix), "-%s-%zu", p->driver, i);
    size_t room = 253 - strlen(suffix), n = strlen(p->node);
    if (n > room)
        n = room;
    while (n > 1 && (p->node[n - 1] == '-' || p->node[n - 1] == '.'))
        n--;
    return xasprintf("%.*s%s", (int)n, p->node, suffix);
}

/* The slices to hold, named, at generation gen. */
static json_t *desired(struct dra_publish *p, long long gen)
{
    json_t *counters = p->counters && p->stats.partitions != DRA_PARTITIONS_DROPPED
                           ? json_loads(p->counters, 0, NULL) : NULL; /* our own text */
    struct dra_slice_pool pool = { .driver = p->driver, .node_name = p->node,
                                   .node_uid = p->node_uid, .generation = gen,
                                   .counter_sets = counters, .combined = p->combined };
    json_t *want = dra_publish_want(p);
    json_t *slices = dra_slices_build(&pool, want), *s;
    p->want_devices = json_array_size(want);
    json_decref(want);
    json_decref(counters);
    size_t i;
    json_array_foreach (slices, i, s) {
        json_t *md = json_object_get(s, "metadata");
        json_object_del(md, "generateName");
        _cleanup_free_ char *name = slice_name(p, i);
        json_object_set_new(md, "name", json_string(name));
    }
    return slices;
}

bool dra_publish_combined_layout(const char *git_version)
{
    unsigned long major = 0, minor = 0, patch = 0;
    const char *v = git_version && *git_version == 'v' ? git_version + 1 : git_version;
    char *end = NULL;
    if (!v)
        return false;
    major = strtoul(v, &end, 10);
    if (!end || *end != '.')
        return false;
    minor = strtoul(end + 1, &end, 10);
    if (end && *end == '.')
        patch = strtoul(end + 1, &end, 10);
    if (major != 1)
        return major < 1;
    if (minor != 35)
        return minor < 35;
    /* 1.35.0-rc.1 sorts below 1.35.0 in semver, so it is given the old layout, as NVIDIA's
     * driver gives it; 1.35.0 and 1.35.x are new */
    return end && *end == '-' && patch == 0;
}

bool dra_publish_has_counters(json_t *slice)
{
    json_t *spec = json_object_get(slice, "spec"), *d;
    size_t i;
    if (json_array_size(json_object_get(spec, "sharedCounters")))
        return true;
    json_array_foreach (json_object_get(spec, "devices"), i, d)
        if (json_array_size(json_object_get(d, "consumesCounters")))
            return true;
    return false;
}

/* A device as compared: what we send (name, attributes, capacity, taints without the
 * timeAdded the server fills in and without an empty value it leaves out). */
static json_t *device_view(json_t *d)
{
    json_t *v = json_object();
    static const char *const keys[] = { "name", "attributes", "capacity", "consumesCounters" };
    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if (json_object_get(d, keys[i]))
            json_object_set(v, keys[i], json_object_get(d, keys[i]));
    json_t *taints = json_object_get(d, "taints"), *t;
    size_t i;
    if (json_array_size(taints)) {
        json_t *out = json_array();
        json_array_foreach (taints, i, t) {
            json_t *c = json_deep_copy(t);
            json_object_del(c, "timeAdded");
            const char *val = json_string_value(json_object_get(c, "value"));
            if (val && !*val)
                json_object_del(c, "value");
            json_array_append_new(out, c);
        }
        json_object_set_new(v, "taints", out);
    }
    return v;
}

/* What is compared of a slice: driver, node, pool name and size, the counter sets, the
 * devices as device_view() sees them; kept as the SHA-256 of its text (the text of a
 * pool of carved GPUs is hundreds of KiB, kept twice: what the server holds, what we
 * want). */
static char *content_of(json_t *slice)
{
    json_t *spec = json_object_get(slice, "spec"), *pool = json_object_get(spec, "pool");
    json_t *v = json_object(), *pv = json_object(), *devices = json_array(), *d;
    static const char *const keys[] = { "driver", "nodeName" };
    for (size_t i = 0; i < ELEMENTSOF(keys); i++)
        if (json_object_get(spec, keys[i]))
            json_object_set(v, keys[i], json_object_get(spec, keys[i]));
    static const char *const pool_keys[] = { "name", "resourceSliceCount" };
    for (size_t i = 0; i < ELEMENTSOF(pool_keys); i++)
        if (json_object_get(pool, pool_keys[i]))
            json_object_set(pv, pool_keys[i], json_object_get(pool, pool_keys[i]));
    json_object_set_new(v, "pool", pv);
    if (json_array_size(json_object_get(spec, "sharedCounters")))
        json_object_set(v, "sharedCounters", json_object_get(spec, "sharedCounters"));
    size_t i;
    json_array_foreach (json_object_get(spec, "devices"), i, d)
        json_array_append_new(devices, device_view(d));
    json_object_set_new(v, "devices", devices);
    _cleanup_free_ char *t = dra_publish_text(v);
    json_decref(v);
    char *hex = xmalloc(65);
    digest_sha256_hex(t, strlen(t), hex);
    return hex;
}

static json_t *owners_of(json_t *slice)
{
    return json_object_get(json_object_get(slice, "metadata"), "ownerReferences");
}

/* The record of slice, whose compared content is given. */
static json_t *record_with(json_t *slice, const char *content)
{
    json_t *md = json_object_get(slice, "metadata");
    json_t *pool = json_object_get(json_object_get(slice, "spec"), "pool");
    json_t *r = json_object();
    json_t *rv = json_object_get(md, "resourceVersion");
    if (json_is_string(rv))
        json_object_set(r, "resourceVersion", rv);
    json_object_set_new(r, "generation",
                        json_integer(json_integer_value(json_object_get(pool, "generation"))));
    if (content)
        json_object_set_new(r, "content", json_string_nocheck(content));
    if (owners_of(slice)) {
        char *owners = dra_publish_text(owners_of(slice));
        json_object_set_new(r, "owners", json_string_nocheck(owners));
        free(owners);
    }
    return r;
}

json_t *dra_publish_record(json_t *slice)
{
    _cleanup_free_ char *content = content_of(slice);
    return record_with(slice, content);
}

/* Whether the server's slice holds what sent holds, as content_of() compares it: the same
 * devices (no taint: the server adds their timeAdded), counter sets, driver, node and
 * pool. Cheaper than content_of()'s copy, sorted dump and digest of an answer. */
static bool holds_sent(json_t *slice, json_t *sent)
{
    json_t *a = json_object_get(slice, "spec"), *b = json_object_get(sent, "spec");
    json_t *pa = json_object_get(a, "pool"), *pb = json_object_get(b, "pool");
    static const char *const keys[] = { "driver", "nodeName", "sharedCounters", "devices" };
    for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
        json_t *va = json_object_get(a, keys[i]), *vb = json_object_get(b, keys[i]);
        if ((va || vb) && !json_equal(va, vb))
            return false;
    }
    json_t *d;
    size_t i;
    json_array_foreach (json_object_get(b, "devices"), i, d)
        if (json_object_get(d, "taints"))
            return false;
    return json_equal(json_object_get(pa, "name"), json_object_get(pb, "name")) &&
           json_equal(json_object_get(pa, "resourceSliceCount"), json_object_get(pb, "resourceSliceCount"));
}

json_t *dra_publish_record_as(json_t *slice, json_t *want)
{
    json_t *sent = json_object_get(want, "slice");
    if (!sent || !holds_sent(slice, sent))
        return dra_publish_record(slice);
    /* its content is the entry's, taken when first compared (record_content) */
    json_t *r = record_with(slice, NULL);
    json_object_set(r, "want", want);
    return r;
}

/* The compared content of a wanted entry, taken when first asked for: a start's creates
 * compare nothing before the round ends, so the sorted dumps and digests of a carved
 * pool's slices (~250 KiB of text) come after its "up to date" line, in
 * dra_publish_wanted_release, not before its first write. */
static const char *want_content(json_t *e)
{
    if (!json_object_get(e, "content")) {
        json_t *s = json_object_get(e, "slice");
        _cleanup_free_ char *c = s ? content_of(s) : NULL; /* released entries have one */
        json_object_set_new(e, "content", json_string_nocheck(c ? c : ""));
    }
    return json_string_value(json_object_get(e, "content"));
}

/* The compared content of a record: its own, or that of the wanted entry it was written
 * from (copied now, and the entry let go of). */
static const char *record_content(json_t *r)
{
    json_t *e = json_object_get(r, "want");
    if (e) {
        json_object_set_new(r, "content", json_string_nocheck(want_content(e)));
        json_object_del(r, "want");
    }
    return json_string_value(json_object_get(r, "content"));
}

const char *dra_publish_record_version(json_t *record)
{
    return json_string_value(json_object_get(record, "resourceVersion"));
}

void dra_publish_wanted_clear(struct dra_publish *p)
{
    json_decref(p->want_cache);
    p->want_cache = NULL;
}

/* The caller's devices, asked for again (dra_publish_set_source) once let go of. */
static bool have_devices(struct dra_publish *p)
{
    if (!p->devices_tree && p->source) {
        p->in_source = true;
        p->source(p->source_userdata);
        p->in_source = false;
    }
    return p->devices_tree != NULL;
}

json_t *dra_publish_wanted(struct dra_publish *p)
{
    if (p->want_cache && p->want_cache_at == p->wanted_changes)
        return p->want_cache;
    if (!have_devices(p)) {
        /* cannot happen (set_pool keeps them without a source); an empty pool would be
         * taken for "delete every slice" */
        log_error("ResourceSlices of node %s: the devices are gone; keeping the slices as they are", p->node);
        if (!p->want_cache)
            p->want_cache = json_array();
        return p->want_cache;
    }
    dra_publish_wanted_clear(p);
    json_t *slices = desired(p, 0), *s;
    p->want_cache = json_array();
    size_t i;
    json_array_foreach (slices, i, s) {
        json_t *e = json_pack("{s:s, s:O}", "name", dra_publish_name_of(s), "slice", s);
        if (owners_of(s)) {
            _cleanup_free_ char *owners = dra_publish_text(owners_of(s));
            json_object_set_new(e, "owners", json_string(owners));
        }
        json_array_append_new(p->want_cache, e);
    }
    json_decref(slices);
    p->want_cache_at = p->wanted_changes;
    return p->want_cache;
}

void dra_publish_digest(json_t *devices, char out[65])
{
    _cleanup_free_ char *text = dra_publish_text(devices);
    digest_sha256_hex(text, strlen(text), out);
}

void dra_publish_wanted_release(struct dra_publish *p)
{
    json_t *e, *r;
    size_t i;
    const char *key;
    json_array_foreach (p->want_cache, i, e) {
        want_content(e); /* compared later, when the tree is gone */
        json_object_del(e, "slice");
    }
    json_object_foreach (p->store, key, r)
        record_content(r);
    if (p->source && p->devices_tree) {
        /* what tells a later set whether the devices changed, taken now, past the start's
         * publish, and not at every set */
        char digest[65];
        dra_publish_digest(p->devices_tree, digest);
        free(p->devices);
        p->devices = xstrdup(digest);
        json_decref(p->devices_tree);
        p->devices_tree = NULL;
    }
}

/* The slice to write at generation gen, over the wanted tree without changing it (the
 * parts changed are shallow copies). */
static json_t *slice_at(json_t *tree, long long gen, json_t *have)
{
    json_t *out = json_copy(tree);
    json_t *md = json_copy(json_object_get(tree, "metadata"));
    json_t *spec = json_copy(json_object_get(tree, "spec"));
    json_t *pool = json_copy(json_object_get(spec, "pool"));
    json_object_set_new(pool, "generation", json_integer(gen));
    json_object_set_new(spec, "pool", pool);
    json_object_set_new(out, "spec", spec);
    if (have) /* at the version compared against: a concurrent writer gets 409 */
        json_object_set(md, "resourceVersion", json_object_get(have, "resourceVersion"));
    json_object_set_new(out, "metadata", md);
    return out;
}

/* The record of what the server holds against a wanted slice (an entry of want_cache): the
 * same content, and the same owner where the wanted slice names one. */
static bool same_content(json_t *have, json_t *want)
{
    /* a record made from this very entry holds its content (dra_publish_record_as) */
    if (json_object_get(have, "want") != want && !streq_ptr(record_content(have), want_content(want)))
        return false;
    const char *wo = json_string_value(json_object_get(want, "owners"));
    return !wo || streq_ptr(json_string_value(json_object_get(have, "owners")), wo);
}

static const char *want_name(json_t *want)
{
    return json_string_value(json_object_get(want, "name"));
}

static long long generation_of(json_t *record)
{
    return json_integer_value(json_object_get(record, "generation"));
}

const char *dra_publish_name_of(json_t *o)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
}

/* The server holds exactly the wanted slices, all of one generation. */
bool dra_publish_steady(struct dra_publish *p)
{
    if (p->round_gen)
        return false;
    json_t *slices = dra_publish_wanted(p), *s, *have;
    size_t i;
    bool ok = json_object_size(p->store) == json_array_size(slices);
    long long g = -1;
    json_array_foreach (slices, i, s) {
        have = json_object_get(p->store, want_name(s));
        if (!ok || !have || !same_content(have, s) || (g >= 0 && generation_of(have) != g)) {
            ok = false;
            break;
        }
        g = generation_of(have);
    }
    return ok;
}

/* The next request of the round (a new pool generation, started when something
 * differs): create or update a wanted slice (*slice_out), then delete the extras
 * (*name_out); ACT_WAIT: nothing more until a write in flight is answered; ACT_NONE
 * ends the round. */
enum dra_publish_action dra_publish_plan(struct dra_publish *p, json_t **slice_out, char **name_out,
                                         json_t **want_out)
{
    *want_out = NULL;
    const char *key;
    json_t *have, *s;
    size_t i;
    if (!p->round_gen) {
        if (dra_publish_steady(p))
            return ACT_NONE;
        long long max_gen = p->last_gen;
        json_object_foreach (p->store, key, have)
            if (generation_of(have) > max_gen)
                max_gen = generation_of(have);
        p->round_gen = max_gen + 1;
    }
    long long gen = p->round_gen;
    json_t *slices = dra_publish_wanted(p);
    enum dra_publish_action act = ACT_NONE;
    json_array_foreach (slices, i, s) {
        if (dra_publish_in_flight(p, want_name(s)))
            continue; /* its answer decides */
        have = json_object_get(p->store, want_name(s));
        if (have && same_content(have, s) && generation_of(have) == gen)
            continue;
        act = have ? ACT_UPDATE : ACT_CREATE;
        if (!json_object_get(s, "slice")) {
            /* let go of after the last round (dra_publish_wanted_release): built again
             * from the same inputs, so the same slices in the same order */
            dra_publish_wanted_clear(p);
            slices = dra_publish_wanted(p);
            s = json_array_get(slices, i);
        }
        *slice_out = slice_at(json_object_get(s, "slice"), gen, have);
        *name_out = xstrdup(want_name(s));
        *want_out = s;
        break;
    }
    if (act == ACT_NONE && p->n_writes)
        return ACT_WAIT; /* the extras go once every wanted slice is written */
    if (act == ACT_NONE) {
        /* every wanted slice is written: the extras (a bigger pool before, another
         * program's slices for this driver and node) go */
        json_object_foreach (p->store, key, have) {
            bool wanted = false;
            json_array_foreach (slices, i, s)
                wanted |= streq(key, want_name(s));
            if (!wanted) {
                act = ACT_DELETE;
                *name_out = xstrdup(key);
                break;
            }
        }
    }
    if (act == ACT_NONE) {
        p->last_gen = gen;
        p->round_gen = 0;
    }
    return act;
}

