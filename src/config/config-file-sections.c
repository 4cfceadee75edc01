/* The config file's `resources` and `sharing` sections (reference §3.3-3.5): resource
 * name patterns and renames, time-slicing and MPS replicas with their device
 * selections, each checked with file:line:col and the field path. */
#include <stdio.h>

#include "config/config-file-internal.h"
#include "core/log.h"

/* ---- resources ------------------------------------------------------------------- */

static int resource_name(struct fctx *x, const yaml_node_t *n, const char *path, char **out)
{
    const char *s = NULL;
    int r = cf_get_string(x, n, path, &s);
    if (r < 0)
        return r;
    struct error sub;
    char *full = config_resource_name(s, &sub);
    if (!full)
        return cf_ferr(x, n, path, "%s", sub.msg);
    free(*out);
    *out = full;
    return 0;
}

/* Look up `key` in a mapping; NULL if absent. The last duplicate wins, as in JSON. */
static const yaml_node_t *map_get(struct fctx *x, const yaml_node_t *map, const char *key)
{
    const yaml_node_t *found = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = cf_node_at(x, p->key);
        if (k->type == YAML_SCALAR_NODE && streq(cf_sval(k), key))
            found = cf_node_at(x, p->value);
    }
    return found;
}

static int check_keys(struct fctx *x, const yaml_node_t *map, const char *path,
                      const char *const *known)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = cf_node_at(x, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return cf_type_err(x, k, path, "a string key");
        if (!cf_in_list(cf_sval(k), known)) {
            _cleanup_free_ char *kpath = xasprintf("%s.%s", path, cf_sval(k));
            cf_warn_unknown(x, k, kpath);
        }
    }
    return 0;
}

static int parse_patterns(struct fctx *x, const yaml_node_t *n, const char *path,
                          struct config_pattern **out, size_t *n_out)
{
    static const char *const known[] = { "pattern", "name", NULL };
    for (size_t i = 0; i < *n_out; i++) {
        free((*out)[i].pattern);
        free((*out)[i].name);
    }
    free(*out);
    *out = NULL;
    *n_out = 0;
    if (cf_is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return cf_type_err(x, n, path, "a list");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    *out = xcalloc(count, sizeof(**out));
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = cf_node_at(x, n->data.sequence.items.start[i]);
        _cleanup_free_ char *epath = xasprintf("%s[%zu]", path, i);
        struct config_pattern *p = &(*out)[i];
        *n_out = i + 1;
        if (e->type != YAML_MAPPING_NODE)
            return cf_type_err(x, e, epath, "a mapping");
        int r = check_keys(x, e, epath, known);
        if (r < 0)
            return r;
        const yaml_node_t *pat = map_get(x, e, "pattern"), *name = map_get(x, e, "name");
        if (cf_is_null(pat))
            return cf_ferr(x, e, epath, "resources must have a 'pattern' field set");
        if (cf_is_null(name))
            return cf_ferr(x, e, epath, "resources must have a 'name' field set");
        const char *s = NULL;
        _cleanup_free_ char *ppath = xasprintf("%s.pattern", epath);
        r = cf_get_string(x, pat, ppath, &s);
        if (r < 0)
            return r;
        p->pattern = xstrdup(s);
        _cleanup_free_ char *npath = xasprintf("%s.name", epath);
        r = resource_name(x, name, npath, &p->name);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A section that is a mapping of known keys: 1 to go on, 0 for null (nothing to do),
 * or the error. */
static int section_open(struct fctx *x, const yaml_node_t *n, const char *path,
                        const char *const *known)
{
    if (cf_is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return cf_type_err(x, n, path, "a mapping");
    int r = check_keys(x, n, path, known);
    return r < 0 ? r : 1;
}

int cf_section_resources(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                             const char *path)
{
    static const char *const known[] = { "gpus", "mig", NULL };
    int r = section_open(x, n, path, known);
    if (r <= 0)
        return r;
    const yaml_node_t *g = map_get(x, n, "gpus"), *m = map_get(x, n, "mig");
    _cleanup_free_ char *gpath = xasprintf("%s.gpus", path);
    _cleanup_free_ char *mpath = xasprintf("%s.mig", path);
    r = parse_patterns(x, g, gpath, &x->c->gpu_patterns, &x->c->n_gpu_patterns);
    if (r < 0)
        return r;
    return parse_patterns(x, m, mpath, &x->c->mig_patterns, &x->c->n_mig_patterns);
}

/* ---- sharing --------------------------------------------------------------------- */

static int parse_devices(struct fctx *x, const yaml_node_t *n, const char *path,
                         struct config_replicated *r)
{
    r->devices_kind = DEVICES_ALL;
    if (cf_is_null(n))
        return 0;
    if (n->type == YAML_SCALAR_NODE) {
        enum stype t = cf_scalar_type(n);
        if (t == S_STRING && streq(cf_sval(n), "all"))
            return 0;
        if (t == S_INT) {
            long long v = strtoll(cf_sval(n), NULL, 0);
            if (v < 1 || v > INT32_MAX)
                return cf_ferr(x, n, path, "number of devices must be >= 1, got %lld", v);
            r->devices_kind = DEVICES_COUNT;
            r->devices_count = (int)v;
            return 0;
        }
        return cf_ferr(x, n, path,
                    "invalid devices value \"%s\": must be \"all\", a number of devices or a "
                    "list of device references",
                    cf_sval(n));
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return cf_type_err(x, n, path, "\"all\", a number of devices or a list");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    r->devices_kind = DEVICES_LIST;
    r->devices = xcalloc(count, sizeof(*r->devices));
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = cf_node_at(x, n->data.sequence.items.start[i]);
        _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
        if (e->type != YAML_SCALAR_NODE || cf_scalar_type(e) == S_NULL || cf_scalar_type(e) == S_BOOL ||
            cf_scalar_type(e) == S_FLOAT)
            return cf_type_err(x, e, ipath, "a device index or UUID");
        struct error sub;
        if (config_check_device_ref(cf_sval(e), &sub) < 0)
            return cf_ferr(x, e, ipath, "%s", sub.msg);
        r->devices[i].ref = xstrdup(cf_sval(e));
        r->n_devices = i + 1;
    }
    return 0;
}

static int parse_replicated(struct fctx *x, const yaml_node_t *e, const char *path,
                            struct config_replicated *res)
{
    static const char *const known[] = { "name", "rename", "replicas", "devices", NULL };
    if (e->type != YAML_MAPPING_NODE)
        return cf_type_err(x, e, path, "a mapping");
    int r = check_keys(x, e, path, known);
    if (r < 0)
        return r;
    const yaml_node_t *name = map_get(x, e, "name"), *replicas = map_get(x, e, "replicas"),
                      *rename = map_get(x, e, "rename"), *devices = map_get(x, e, "devices");
    if (cf_is_null(name))
        return cf_ferr(x, e, path, "no resource name specified");
    _cleanup_free_ char *npath = xasprintf("%s.name", path);
    r = resource_name(x, name, npath, &res->name);
    if (r < 0)
        return r;
    if (cf_is_null(replicas))
        return cf_ferr(x, e, path, "no replicas specified");
    _cleanup_free_ char *rpath = xasprintf("%s.replicas", path);
    long long v = 0;
    r = cf_get_int(x, replicas, rpath, &v);
    if (r < 0)
        return r;
    if (v < 2)
        return cf_ferr(x, replicas, rpath, "number of replicas must be >= 2, got %lld", v);
    if (v > INT32_MAX)
        return cf_ferr(x, replicas, rpath, "number of replicas too large, got %lld", v);
    res->replicas = (int)v;
    if (!cf_is_null(rename)) {
        _cleanup_free_ char *rnpath = xasprintf("%s.rename", path);
        r = resource_name(x, rename, rnpath, &res->rename);
        if (r < 0)
            return r;
    }
    _cleanup_free_ char *dpath = xasprintf("%s.devices", path);
    return parse_devices(x, devices, dpath, res);
}

static void sharing_clear(struct config_sharing *s)
{
    for (size_t i = 0; i < s->n_resources; i++) {
        free(s->resources[i].name);
        free(s->resources[i].rename);
        for (size_t j = 0; j < s->resources[i].n_devices; j++)
            free(s->resources[i].devices[j].ref);
        free(s->resources[i].devices);
    }
    free(s->resources);
    *s = (struct config_sharing){ .fail_requests_greater_than_one = -1 };
}

static int parse_sharing(struct fctx *x, const yaml_node_t *n, const char *path,
                         struct config_sharing *s)
{
    static const char *const known[] = { "renameByDefault", "failRequestsGreaterThanOne",
                                         "resources", NULL };
    sharing_clear(s);
    if (cf_is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return cf_type_err(x, n, path, "a mapping");
    s->present = true;
    int r = check_keys(x, n, path, known);
    if (r < 0)
        return r;
    const yaml_node_t *rbd = map_get(x, n, "renameByDefault"),
                      *frg = map_get(x, n, "failRequestsGreaterThanOne"),
                      *res = map_get(x, n, "resources");
    if (!cf_is_null(rbd)) {
        _cleanup_free_ char *p = xasprintf("%s.renameByDefault", path);
        r = cf_get_bool(x, rbd, p, &s->rename_by_default);
        if (r < 0)
            return r;
    }
    if (!cf_is_null(frg)) {
        _cleanup_free_ char *p = xasprintf("%s.failRequestsGreaterThanOne", path);
        bool b = false;
        r = cf_get_bool(x, frg, p, &b);
        if (r < 0)
            return r;
        s->fail_requests_greater_than_one = b;
    }
    _cleanup_free_ char *rpath = xasprintf("%s.resources", path);
    if (cf_is_null(res))
        return cf_ferr(x, res ? res : n, res ? rpath : path, "no resources specified");
    if (res->type != YAML_SEQUENCE_NODE)
        return cf_type_err(x, res, rpath, "a list");
    size_t count = (size_t)(res->data.sequence.items.top - res->data.sequence.items.start);
    if (count == 0)
        return cf_ferr(x, res, rpath, "no resources specified");
    s->resources = xcalloc(count, sizeof(*s->resources));
    for (size_t i = 0; i < count; i++) {
        _cleanup_free_ char *epath = xasprintf("%s[%zu]", rpath, i);
        s->n_resources = i + 1;
        r = parse_replicated(x, cf_node_at(x, res->data.sequence.items.start[i]), epath,
                             &s->resources[i]);
        if (r < 0)
            return r;
    }
    /* renameByDefault may come after resources in the mapping: apply it last. */
    for (size_t i = 0; s->rename_by_default && i < count; i++) {
        struct config_replicated *rr = &s->resources[i];
        if (rr->rename)
            continue;
        _cleanup_free_ char *shared = xasprintf("%s.shared", rr->name);
        struct error sub;
        rr->rename = config_resource_name(shared, &sub);
        if (!rr->rename) {
            const yaml_node_t *e = cf_node_at(x, res->data.sequence.items.start[i]);
            _cleanup_free_ char *epath = xasprintf("%s[%zu].name", rpath, i);
            return cf_ferr(x, map_get(x, e, "name"), epath, "renameByDefault: %s", sub.msg);
        }
    }
    return 0;
}

int cf_section_sharing(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                           const char *path)
{
    static const char *const known[] = { "timeSlicing", "mps", NULL };
    int r = section_open(x, n, path, known);
    if (r <= 0)
        return r;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = cf_node_at(x, p->key), *v = cf_node_at(x, p->value);
        bool mps = streq(cf_sval(k), "mps");
        if (!mps && !streq(cf_sval(k), "timeSlicing"))
            continue;
        _cleanup_free_ char *kpath = xasprintf("%s.%s", path, cf_sval(k));
        r = parse_sharing(x, v, kpath, mps ? &x->c->mps : &x->c->time_slicing);
        if (r < 0)
            return r;
        if (mps) {
            x->marks->mps_line = cf_line_of(k);
            x->marks->mps_col = cf_col_of(k);
        }
    }
    return 0;
}

