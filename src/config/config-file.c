/* The config file (reference §3.3): YAML or JSON (JSON is YAML), read with libyaml's
 * document API so every node keeps its line and column. Each known field is
 * type-checked, then handed to the same setter as its flag (config-args.c), unless
 * a flag or env var already set it (precedence: flag > env > file). Unknown keys
 * are warnings; everything else wrong is an error "file:line:col: field.path: ...". */
#include <ctype.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <yaml.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/log.h"

#define CONFIG_FILE_MAX (4u << 20)
#define HEALTH_MAX_DEPTH 64
/* Aliases let a tiny file describe a huge tree; the health section is the only
 * place where we walk arbitrary structure, so cap the nodes it may visit. */
#define HEALTH_MAX_NODES 100000

struct fctx {
    const char *name;
    yaml_document_t *doc;
    struct config *c;
    const bool *set;
    struct config_marks *marks;
    size_t visits;
    struct error *err;
};

enum stype { S_NULL, S_BOOL, S_INT, S_FLOAT, S_STRING };

static yaml_node_t *node_at(struct fctx *x, int idx) { return yaml_document_get_node(x->doc, idx); }
static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }
static int col_of(const yaml_node_t *n) { return (int)n->start_mark.column + 1; }
static const char *sval(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

_printf_(4, 5) static int ferr(struct fctx *x, const yaml_node_t *n, const char *path,
                               const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return error_set(x->err, -EINVAL, "%s:%d:%d: %s: %s", x->name, line_of(n), col_of(n), path,
                     msg);
}

static void warn_unknown(struct fctx *x, const yaml_node_t *key, const char *path)
{
    log_warning("%s:%d:%d: unknown field \"%s\", ignoring", x->name, line_of(key), col_of(key),
                path);
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (streq(s, *list))
            return true;
    return false;
}

/* YAML 1.1 resolution of plain scalars (what the reference's YAML->JSON step does);
 * quoted and block scalars are always strings. */
static enum stype scalar_type(const yaml_node_t *n)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
    static const char *const bools[] = { "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
                                         "NO", "true", "True", "TRUE", "false", "False",
                                         "FALSE", "on", "On", "ON", "off", "Off", "OFF", NULL };
    const char *s = sval(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return S_STRING;
    if (in_list(s, nulls))
        return S_NULL;
    if (in_list(s, bools))
        return S_BOOL;
    if (isalpha((unsigned char)s[0]) || s[0] == '.')
        return S_STRING;
    char *end;
    errno = 0;
    (void)strtoll(s, &end, 0);
    if (end != s && !*end && !errno)
        return S_INT;
    errno = 0;
    double d = strtod(s, &end);
    if (end != s && !*end && !errno && isfinite(d))
        return S_FLOAT;
    return S_STRING;
}

static bool scalar_bool_value(const char *s)
{
    static const char *const trues[] = { "y", "Y", "yes", "Yes", "YES", "true", "True",
                                         "TRUE", "on", "On", "ON", NULL };
    return in_list(s, trues);
}

static bool is_null(const yaml_node_t *n)
{
    return !n || (n->type == YAML_SCALAR_NODE && scalar_type(n) == S_NULL);
}

static const char *type_name(const yaml_node_t *n)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    switch (scalar_type(n)) {
    case S_NULL: return "null";
    case S_BOOL: return "a boolean";
    case S_INT: return "an integer";
    case S_FLOAT: return "a number";
    case S_STRING: break;
    }
    return "a string";
}

static int type_err(struct fctx *x, const yaml_node_t *n, const char *path, const char *want)
{
    if (n->type == YAML_SCALAR_NODE)
        return ferr(x, n, path, "expected %s, got %s \"%s\"", want, type_name(n), sval(n));
    return ferr(x, n, path, "expected %s, got %s", want, type_name(n));
}

/* Any non-null scalar is accepted as text: `version: 1` or `mpsRoot: 123` are
 * unambiguous, and refusing them would only be pedantic. */
static int get_string(struct fctx *x, const yaml_node_t *n, const char *path, const char **out)
{
    if (n->type != YAML_SCALAR_NODE || scalar_type(n) == S_NULL)
        return type_err(x, n, path, "a string");
    *out = sval(n);
    return 0;
}

static int get_bool(struct fctx *x, const yaml_node_t *n, const char *path, bool *out)
{
    if (n->type != YAML_SCALAR_NODE || scalar_type(n) != S_BOOL)
        return type_err(x, n, path, "a boolean (true or false)");
    *out = scalar_bool_value(sval(n));
    return 0;
}

static int get_int(struct fctx *x, const yaml_node_t *n, const char *path, long long *out)
{
    if (n->type != YAML_SCALAR_NODE || scalar_type(n) != S_INT)
        return type_err(x, n, path, "an integer");
    *out = strtoll(sval(n), NULL, 0);
    return 0;
}

/* ---- fields that mirror flags ---------------------------------------------------- */

enum ftype { F_STRING, F_BOOL, F_STRING_LIST, F_INT_LIST, F_IGNORE, F_SECTION };

struct field {
    const char *key;
    enum ftype type;
    enum config_opt opt;
    int (*section)(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key, const char *path);
};

/* The value as the flag's string form; NULL for null (keep the default). */
static int field_text(struct fctx *x, const struct field *f, const yaml_node_t *n,
                      const char *path, char **out)
{
    *out = NULL;
    if (is_null(n))
        return 0;
    const char *s = NULL;
    bool b = false;
    long long v = 0;
    int r;
    switch (f->type) {
    case F_STRING:
        r = get_string(x, n, path, &s);
        if (r < 0)
            return r;
        *out = xstrdup(s);
        return 0;
    case F_BOOL:
        r = get_bool(x, n, path, &b);
        if (r < 0)
            return r;
        *out = xstrdup(b ? "true" : "false");
        return 0;
    case F_STRING_LIST:
    case F_INT_LIST: {
        if (f->type == F_STRING_LIST && n->type == YAML_SCALAR_NODE) {
            r = get_string(x, n, path, &s);
            if (r < 0)
                return r;
            *out = xstrdup(s);
            return 0;
        }
        if (n->type != YAML_SEQUENCE_NODE)
            return type_err(x, n, path,
                            f->type == F_INT_LIST ? "a list of integers" : "a string or a list of strings");
        _cleanup_free_ char *acc = xstrdup("");
        size_t i = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++, i++) {
            const yaml_node_t *item = node_at(x, *it);
            _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
            char buf[32];
            if (f->type == F_INT_LIST) {
                r = get_int(x, item, ipath, &v);
                if (r < 0)
                    return r;
                snprintf(buf, sizeof(buf), "%lld", v);
                s = buf;
            } else {
                r = get_string(x, item, ipath, &s);
                if (r < 0)
                    return r;
            }
            char *next = xasprintf("%s%s%s", acc, i ? "," : "", s);
            free(acc);
            acc = next;
        }
        *out = TAKE_PTR(acc);
        return 0;
    }
    case F_IGNORE:
    case F_SECTION:
        break;
    }
    return 0;
}

static int apply_field(struct fctx *x, const struct field *f, const yaml_node_t *n,
                       const char *path)
{
    _cleanup_free_ char *text = NULL;
    int r = field_text(x, f, n, path, &text);
    if (r < 0 || !text || x->set[f->opt])
        return r;
    _cleanup_free_ char *origin = xasprintf("%s:%d:%d: %s", x->name, line_of(n), col_of(n), path);
    return config_option_set(x->c, f->opt, text, origin, x->err);
}

static int walk(struct fctx *x, const yaml_node_t *n, const char *path, const struct field *fields,
                size_t n_fields)
{
    if (is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return type_err(x, n, path, "a mapping");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *key = node_at(x, p->key), *val = node_at(x, p->value);
        if (key->type != YAML_SCALAR_NODE)
            return type_err(x, key, path, "a string key");
        _cleanup_free_ char *kpath = *path ? xasprintf("%s.%s", path, sval(key)) : xstrdup(sval(key));
        const struct field *f = NULL;
        for (size_t i = 0; i < n_fields; i++)
            if (streq(fields[i].key, sval(key)))
                f = &fields[i];
        int r = 0;
        if (!f)
            warn_unknown(x, key, kpath);
        else if (f->type == F_SECTION)
            r = f->section(x, val, key, kpath);
        else if (f->type != F_IGNORE)
            r = apply_field(x, f, val, kpath);
        if (r < 0)
            return r;
    }
    return 0;
}

static const struct field plugin_fields[] = {
    { "passDeviceSpecs", F_BOOL, OPT_PASS_DEVICE_SPECS, NULL },
    { "deviceListStrategy", F_STRING_LIST, OPT_DEVICE_LIST_STRATEGY, NULL },
    { "deviceIDStrategy", F_STRING, OPT_DEVICE_ID_STRATEGY, NULL },
    { "cdiAnnotationPrefix", F_STRING, OPT_CDI_ANNOTATION_PREFIX, NULL },
    { "nvidiaCTKPath", F_STRING, OPT_NVIDIA_CDI_HOOK_PATH, NULL },
    { "containerDriverRoot", F_STRING, OPT_DRIVER_ROOT_CTR_PATH, NULL },
    { "sharedDevicesAllocationPolicy", F_STRING, OPT_SHARED_ALLOC_POLICY, NULL },
};

static int section_plugin(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                          const char *path)
{
    return walk(x, n, path, plugin_fields, ELEMENTSOF(plugin_fields));
}

/* GFD-only settings: valid in a shared config file, meaningless for the plugin. */
static const struct field gfd_fields[] = {
    { "oneshot", F_IGNORE, 0, NULL },       { "noTimestamp", F_IGNORE, 0, NULL },
    { "sleepInterval", F_IGNORE, 0, NULL }, { "outputFile", F_IGNORE, 0, NULL },
    { "machineTypeFile", F_IGNORE, 0, NULL },
};

static int section_gfd(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                       const char *path)
{
    return walk(x, n, path, gfd_fields, ELEMENTSOF(gfd_fields));
}

static const struct field flags_fields[] = {
    { "migStrategy", F_STRING, OPT_MIG_STRATEGY, NULL },
    { "failOnInitError", F_BOOL, OPT_FAIL_ON_INIT_ERROR, NULL },
    { "nvidiaDriverRoot", F_STRING, OPT_DRIVER_ROOT, NULL },
    { "nvidiaDevRoot", F_STRING, OPT_DEV_ROOT, NULL },
    { "gdrcopyEnabled", F_BOOL, OPT_GDRCOPY_ENABLED, NULL },
    { "gdsEnabled", F_BOOL, OPT_GDS_ENABLED, NULL },
    { "mofedEnabled", F_BOOL, OPT_MOFED_ENABLED, NULL },
    { "mpsRoot", F_STRING, OPT_MPS_ROOT, NULL },
    { "deviceDiscoveryStrategy", F_STRING, OPT_DEVICE_DISCOVERY_STRATEGY, NULL },
    { "useNodeFeatureAPI", F_IGNORE, 0, NULL },
    { "plugin", F_SECTION, 0, section_plugin },
    { "gfd", F_SECTION, 0, section_gfd },
};

static int section_flags(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                         const char *path)
{
    return walk(x, n, path, flags_fields, ELEMENTSOF(flags_fields));
}

static const struct field imex_fields[] = {
    { "channelIDs", F_INT_LIST, OPT_IMEX_CHANNEL_IDS, NULL },
    { "required", F_BOOL, OPT_IMEX_REQUIRED, NULL },
};

static int section_imex(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                        const char *path)
{
    return walk(x, n, path, imex_fields, ELEMENTSOF(imex_fields));
}

/* ---- resources ------------------------------------------------------------------- */

static int resource_name(struct fctx *x, const yaml_node_t *n, const char *path, char **out)
{
    const char *s = NULL;
    int r = get_string(x, n, path, &s);
    if (r < 0)
        return r;
    struct error sub;
    char *full = config_resource_name(s, &sub);
    if (!full)
        return ferr(x, n, path, "%s", sub.msg);
    free(*out);
    *out = full;
    return 0;
}

/* Look up `key` in a mapping; NULL if absent. The last duplicate wins, as in JSON. */
static const yaml_node_t *map_get(struct fctx *x, const yaml_node_t *map, const char *key)
{
    const yaml_node_t *found = NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node_at(x, p->key);
        if (k->type == YAML_SCALAR_NODE && streq(sval(k), key))
            found = node_at(x, p->value);
    }
    return found;
}

static int check_keys(struct fctx *x, const yaml_node_t *map, const char *path,
                      const char *const *known)
{
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node_at(x, p->key);
        if (k->type != YAML_SCALAR_NODE)
            return type_err(x, k, path, "a string key");
        if (!in_list(sval(k), known)) {
            _cleanup_free_ char *kpath = xasprintf("%s.%s", path, sval(k));
            warn_unknown(x, k, kpath);
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
    if (is_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return type_err(x, n, path, "a list");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    *out = xcalloc(count, sizeof(**out));
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = node_at(x, n->data.sequence.items.start[i]);
        _cleanup_free_ char *epath = xasprintf("%s[%zu]", path, i);
        struct config_pattern *p = &(*out)[i];
        *n_out = i + 1;
        if (e->type != YAML_MAPPING_NODE)
            return type_err(x, e, epath, "a mapping");
        int r = check_keys(x, e, epath, known);
        if (r < 0)
            return r;
        const yaml_node_t *pat = map_get(x, e, "pattern"), *name = map_get(x, e, "name");
        if (is_null(pat))
            return ferr(x, e, epath, "resources must have a 'pattern' field set");
        if (is_null(name))
            return ferr(x, e, epath, "resources must have a 'name' field set");
        const char *s = NULL;
        _cleanup_free_ char *ppath = xasprintf("%s.pattern", epath);
        r = get_string(x, pat, ppath, &s);
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

static int section_resources(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                             const char *path)
{
    static const char *const known[] = { "gpus", "mig", NULL };
    if (is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return type_err(x, n, path, "a mapping");
    int r = check_keys(x, n, path, known);
    if (r < 0)
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
    if (is_null(n))
        return 0;
    if (n->type == YAML_SCALAR_NODE) {
        enum stype t = scalar_type(n);
        if (t == S_STRING && streq(sval(n), "all"))
            return 0;
        if (t == S_INT) {
            long long v = strtoll(sval(n), NULL, 0);
            if (v < 1 || v > INT32_MAX)
                return ferr(x, n, path, "number of devices must be >= 1, got %lld", v);
            r->devices_kind = DEVICES_COUNT;
            r->devices_count = (int)v;
            return 0;
        }
        return ferr(x, n, path,
                    "invalid devices value \"%s\": must be \"all\", a number of devices or a "
                    "list of device references",
                    sval(n));
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return type_err(x, n, path, "\"all\", a number of devices or a list");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    r->devices_kind = DEVICES_LIST;
    r->devices = xcalloc(count, sizeof(*r->devices));
    for (size_t i = 0; i < count; i++) {
        const yaml_node_t *e = node_at(x, n->data.sequence.items.start[i]);
        _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
        if (e->type != YAML_SCALAR_NODE || scalar_type(e) == S_NULL || scalar_type(e) == S_BOOL ||
            scalar_type(e) == S_FLOAT)
            return type_err(x, e, ipath, "a device index or UUID");
        struct error sub;
        if (config_check_device_ref(sval(e), &sub) < 0)
            return ferr(x, e, ipath, "%s", sub.msg);
        r->devices[i].ref = xstrdup(sval(e));
        r->n_devices = i + 1;
    }
    return 0;
}

static int parse_replicated(struct fctx *x, const yaml_node_t *e, const char *path,
                            struct config_replicated *res)
{
    static const char *const known[] = { "name", "rename", "replicas", "devices", NULL };
    if (e->type != YAML_MAPPING_NODE)
        return type_err(x, e, path, "a mapping");
    int r = check_keys(x, e, path, known);
    if (r < 0)
        return r;
    const yaml_node_t *name = map_get(x, e, "name"), *replicas = map_get(x, e, "replicas"),
                      *rename = map_get(x, e, "rename"), *devices = map_get(x, e, "devices");
    if (is_null(name))
        return ferr(x, e, path, "no resource name specified");
    _cleanup_free_ char *npath = xasprintf("%s.name", path);
    r = resource_name(x, name, npath, &res->name);
    if (r < 0)
        return r;
    if (is_null(replicas))
        return ferr(x, e, path, "no replicas specified");
    _cleanup_free_ char *rpath = xasprintf("%s.replicas", path);
    long long v = 0;
    r = get_int(x, replicas, rpath, &v);
    if (r < 0)
        return r;
    if (v < 2)
        return ferr(x, replicas, rpath, "number of replicas must be >= 2, got %lld", v);
    if (v > INT32_MAX)
        return ferr(x, replicas, rpath, "number of replicas too large, got %lld", v);
    res->replicas = (int)v;
    if (!is_null(rename)) {
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
    if (is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return type_err(x, n, path, "a mapping");
    s->present = true;
    int r = check_keys(x, n, path, known);
    if (r < 0)
        return r;
    const yaml_node_t *rbd = map_get(x, n, "renameByDefault"),
                      *frg = map_get(x, n, "failRequestsGreaterThanOne"),
                      *res = map_get(x, n, "resources");
    if (!is_null(rbd)) {
        _cleanup_free_ char *p = xasprintf("%s.renameByDefault", path);
        r = get_bool(x, rbd, p, &s->rename_by_default);
        if (r < 0)
            return r;
    }
    if (!is_null(frg)) {
        _cleanup_free_ char *p = xasprintf("%s.failRequestsGreaterThanOne", path);
        bool b = false;
        r = get_bool(x, frg, p, &b);
        if (r < 0)
            return r;
        s->fail_requests_greater_than_one = b;
    }
    _cleanup_free_ char *rpath = xasprintf("%s.resources", path);
    if (is_null(res))
        return ferr(x, res ? res : n, res ? rpath : path, "no resources specified");
    if (res->type != YAML_SEQUENCE_NODE)
        return type_err(x, res, rpath, "a list");
    size_t count = (size_t)(res->data.sequence.items.top - res->data.sequence.items.start);
    if (count == 0)
        return ferr(x, res, rpath, "no resources specified");
    s->resources = xcalloc(count, sizeof(*s->resources));
    for (size_t i = 0; i < count; i++) {
        _cleanup_free_ char *epath = xasprintf("%s[%zu]", rpath, i);
        s->n_resources = i + 1;
        r = parse_replicated(x, node_at(x, res->data.sequence.items.start[i]), epath,
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
            const yaml_node_t *e = node_at(x, res->data.sequence.items.start[i]);
            _cleanup_free_ char *epath = xasprintf("%s[%zu].name", rpath, i);
            return ferr(x, map_get(x, e, "name"), epath, "renameByDefault: %s", sub.msg);
        }
    }
    return 0;
}

static int section_sharing(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                           const char *path)
{
    static const char *const known[] = { "timeSlicing", "mps", NULL };
    if (is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return type_err(x, n, path, "a mapping");
    int r = check_keys(x, n, path, known);
    if (r < 0)
        return r;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node_at(x, p->key), *v = node_at(x, p->value);
        bool mps = streq(sval(k), "mps");
        if (!mps && !streq(sval(k), "timeSlicing"))
            continue;
        _cleanup_free_ char *kpath = xasprintf("%s.%s", path, sval(k));
        r = parse_sharing(x, v, kpath, mps ? &x->c->mps : &x->c->time_slicing);
        if (r < 0)
            return r;
        if (mps) {
            x->marks->mps_line = line_of(k);
            x->marks->mps_col = col_of(k);
        }
    }
    return 0;
}

/* ---- health: typed into JSON here, read by config-health.c ------------------------- */

static json_t *to_json(struct fctx *x, const yaml_node_t *n, const char *path, int depth)
{
    if (++x->visits > HEALTH_MAX_NODES || depth > HEALTH_MAX_DEPTH) {
        ferr(x, n, path, "section too large or too deeply nested");
        return NULL;
    }
    if (n->type == YAML_SCALAR_NODE) {
        json_t *j = NULL;
        switch (scalar_type(n)) {
        case S_NULL: return json_null();
        case S_BOOL: return json_boolean(scalar_bool_value(sval(n)));
        case S_INT: return json_integer(strtoll(sval(n), NULL, 0));
        case S_FLOAT: return json_real(strtod(sval(n), NULL));
        case S_STRING: j = json_stringn(sval(n), n->data.scalar.length); break;
        }
        if (!j)
            ferr(x, n, path, "invalid string");
        return j;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        size_t i = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++, i++) {
            _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
            json_t *v = to_json(x, node_at(x, *it), ipath, depth + 1);
            if (!v || json_array_append_new(a, v) < 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    json_t *o = json_object();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node_at(x, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            type_err(x, k, path, "a string key");
            json_decref(o);
            return NULL;
        }
        _cleanup_free_ char *kpath = xasprintf("%s.%s", path, sval(k));
        json_t *v = to_json(x, node_at(x, p->value), kpath, depth + 1);
        if (!v) {
            json_decref(o);
            return NULL;
        }
        if (json_object_setn_new(o, sval(k), k->data.scalar.length, v) < 0) {
            ferr(x, k, kpath, "invalid key");
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static int section_health(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                          const char *path)
{
    json_t *j = to_json(x, n, path, 0);
    if (!j)
        return x->err ? x->err->code : -EINVAL;
    int r = config_health_file(x->c, j, x->name, line_of(key), x->set, x->marks, x->err);
    json_decref(j);
    return r;
}

static int section_version(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                           const char *path)
{
    const char *v = "";
    if (!is_null(n)) {
        int r = get_string(x, n, path, &v);
        if (r < 0)
            return r;
    }
    if (*v && !streq(v, "v1"))
        return ferr(x, n, path, "unknown version: %s (allowed: v1)", v);
    return 0;
}

static const struct field top_fields[] = {
    { "version", F_SECTION, 0, section_version },
    { "flags", F_SECTION, 0, section_flags },
    { "resources", F_SECTION, 0, section_resources },
    { "sharing", F_SECTION, 0, section_sharing },
    { "imex", F_SECTION, 0, section_imex },
    { "health", F_SECTION, 0, section_health },
};

int config_file_parse(struct config *c, const char *name, const unsigned char *data,
                      size_t size, const bool *set, struct config_marks *marks,
                      struct error *err)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct error local;
    int r;

    if (!yaml_parser_initialize(&parser))
        oom();
    yaml_parser_set_input_string(&parser, data, size);
    if (!yaml_parser_load(&parser, &doc)) {
        r = error_set(err, -EINVAL, "%s:%zu:%zu: %s", name, parser.problem_mark.line + 1,
                      parser.problem_mark.column + 1,
                      parser.problem ? parser.problem : "invalid YAML");
        yaml_parser_delete(&parser);
        return r;
    }
    yaml_parser_delete(&parser);

    struct fctx x = {
        .name = name, .doc = &doc, .c = c, .set = set, .marks = marks,
        .err = err ? err : &local,
    };
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    r = root ? walk(&x, root, "", top_fields, ELEMENTSOF(top_fields)) : 0;
    yaml_document_delete(&doc);
    return r;
}

int config_file_load(struct config *c, const char *path, const bool *set,
                     struct config_marks *marks, struct error *err)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return error_set(err, -errno, "reading config file %s: %s", path, strerror(errno));
    /* A directory or socket is a mistake; a character device is allowed because NVIDIA's
     * config-manager points the config at /dev/null for its "no config" fallback. */
    if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode) ||
        (S_ISREG(st.st_mode) && st.st_size > (off_t)CONFIG_FILE_MAX))
        return error_set(err, -EINVAL, "reading config file %s: not a regular file of at most %u bytes",
                         path, CONFIG_FILE_MAX);
    size_t cap = CONFIG_FILE_MAX + 1;
    _cleanup_free_ unsigned char *buf = xmalloc(cap + 1);
    size_t got = 0;
    while (got < cap) {
        ssize_t n = RETRY_EINTR(read(fd, buf + got, cap - got));
        if (n < 0)
            return error_set(err, -errno, "reading config file %s: %s", path, strerror(errno));
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got > CONFIG_FILE_MAX)
        return error_set(err, -EINVAL, "reading config file %s: larger than %u bytes", path,
                         CONFIG_FILE_MAX);
    return config_file_parse(c, path, buf, got, set, marks, err);
}
