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

#include "config/config-file-internal.h"
#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/fs.h"
#include "core/log.h"

#define CONFIG_FILE_MAX (4u << 20)
#define HEALTH_MAX_DEPTH 64
/* Aliases let a tiny file describe a huge tree; the health section is the only
 * place where we walk arbitrary structure, so cap the nodes it may visit. */
#define HEALTH_MAX_NODES 100000



yaml_node_t *cf_node_at(struct fctx *x, int idx){ return yaml_document_get_node(x->doc, idx); }
int cf_line_of(const yaml_node_t *n){ return (int)n->start_mark.line + 1; }
int cf_col_of(const yaml_node_t *n){ return (int)n->start_mark.column + 1; }
const char *cf_sval(const yaml_node_t *n){ return (const char *)n->data.scalar.value; }

_printf_(4, 5) int cf_ferr(struct fctx *x, const yaml_node_t *n, const char *path,
                               const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return error_set(x->err, -EINVAL, "%s:%d:%d: %s: %s", x->name, cf_line_of(n), cf_col_of(n), path,
                     msg);
}

void cf_warn_unknown(struct fctx *x, const yaml_node_t *key, const char *path)
{
    log_warning("%s:%d:%d: unknown field \"%s\", ignoring", x->name, cf_line_of(key), cf_col_of(key),
                path);
}

bool cf_in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (streq(s, *list))
            return true;
    return false;
}

/* YAML 1.1 resolution of plain scalars (what the reference's YAML->JSON step does);
 * quoted and block scalars are always strings. */
enum stype cf_scalar_type(const yaml_node_t *n)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
    static const char *const bools[] = { "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
                                         "NO", "true", "True", "TRUE", "false", "False",
                                         "FALSE", "on", "On", "ON", "off", "Off", "OFF", NULL };
    const char *s = cf_sval(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return S_STRING;
    if (cf_in_list(s, nulls))
        return S_NULL;
    if (cf_in_list(s, bools))
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
    return cf_in_list(s, trues);
}

bool cf_is_null(const yaml_node_t *n)
{
    return !n || (n->type == YAML_SCALAR_NODE && cf_scalar_type(n) == S_NULL);
}

static const char *type_name(const yaml_node_t *n)
{
    if (n->type == YAML_MAPPING_NODE)
        return "a mapping";
    if (n->type == YAML_SEQUENCE_NODE)
        return "a list";
    switch (cf_scalar_type(n)) {
    case S_NULL: return "null";
    case S_BOOL: return "a boolean";
    case S_INT: return "an integer";
    case S_FLOAT: return "a number";
    case S_STRING: break;
    }
    return "a string";
}

int cf_type_err(struct fctx *x, const yaml_node_t *n, const char *path, const char *want)
{
    if (n->type == YAML_SCALAR_NODE)
        return cf_ferr(x, n, path, "expected %s, got %s \"%s\"", want, type_name(n), cf_sval(n));
    return cf_ferr(x, n, path, "expected %s, got %s", want, type_name(n));
}

/* Any non-null scalar is accepted as text: `version: 1` or `mpsRoot: 123` are
 * unambiguous, and refusing them would only be pedantic. */
int cf_get_string(struct fctx *x, const yaml_node_t *n, const char *path, const char **out)
{
    if (n->type != YAML_SCALAR_NODE || cf_scalar_type(n) == S_NULL)
        return cf_type_err(x, n, path, "a string");
    *out = cf_sval(n);
    return 0;
}

int cf_get_bool(struct fctx *x, const yaml_node_t *n, const char *path, bool *out)
{
    if (n->type != YAML_SCALAR_NODE || cf_scalar_type(n) != S_BOOL)
        return cf_type_err(x, n, path, "a boolean (true or false)");
    *out = scalar_bool_value(cf_sval(n));
    return 0;
}

int cf_get_int(struct fctx *x, const yaml_node_t *n, const char *path, long long *out)
{
    if (n->type != YAML_SCALAR_NODE || cf_scalar_type(n) != S_INT)
        return cf_type_err(x, n, path, "an integer");
    *out = strtoll(cf_sval(n), NULL, 0);
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
    if (cf_is_null(n))
        return 0;
    const char *s = NULL;
    bool b = false;
    long long v = 0;
    int r;
    switch (f->type) {
    case F_STRING:
        r = cf_get_string(x, n, path, &s);
        if (r < 0)
            return r;
        *out = xstrdup(s);
        return 0;
    case F_BOOL:
        r = cf_get_bool(x, n, path, &b);
        if (r < 0)
            return r;
        *out = xstrdup(b ? "true" : "false");
        return 0;
    case F_STRING_LIST:
    case F_INT_LIST: {
        if (f->type == F_STRING_LIST && n->type == YAML_SCALAR_NODE) {
            r = cf_get_string(x, n, path, &s);
            if (r < 0)
                return r;
            *out = xstrdup(s);
            return 0;
        }
        if (n->type != YAML_SEQUENCE_NODE)
            return cf_type_err(x, n, path,
                            f->type == F_INT_LIST ? "a list of integers" : "a string or a list of strings");
        _cleanup_free_ char *acc = xstrdup("");
        size_t i = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++, i++) {
            const yaml_node_t *item = cf_node_at(x, *it);
            _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
            char buf[32];
            if (f->type == F_INT_LIST) {
                r = cf_get_int(x, item, ipath, &v);
                if (r < 0)
                    return r;
                snprintf(buf, sizeof(buf), "%lld", v);
                s = buf;
            } else {
                r = cf_get_string(x, item, ipath, &s);
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
    _cleanup_free_ char *origin = xasprintf("%s:%d:%d: %s", x->name, cf_line_of(n), cf_col_of(n), path);
    return config_option_set(x->c, f->opt, text, origin, x->err);
}

static int walk(struct fctx *x, const yaml_node_t *n, const char *path, const struct field *fields,
                size_t n_fields)
{
    if (cf_is_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return cf_type_err(x, n, path, "a mapping");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *key = cf_node_at(x, p->key), *val = cf_node_at(x, p->value);
        if (key->type != YAML_SCALAR_NODE)
            return cf_type_err(x, key, path, "a string key");
        _cleanup_free_ char *kpath = *path ? xasprintf("%s.%s", path, cf_sval(key)) : xstrdup(cf_sval(key));
        const struct field *f = NULL;
        for (size_t i = 0; i < n_fields; i++)
            if (streq(fields[i].key, cf_sval(key)))
                f = &fields[i];
        int r = 0;
        if (!f)
            cf_warn_unknown(x, key, kpath);
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

/* GFD's settings (a config file shared with GFD works unchanged): the node labels. */
static const struct field gfd_fields[] = {
    { "oneshot", F_IGNORE, 0, NULL }, /* serve republishes on change; `labels` is oneshot */
    { "noTimestamp", F_BOOL, OPT_GFD_NO_TIMESTAMP, NULL },
    { "sleepInterval", F_STRING, OPT_GFD_SLEEP_INTERVAL, NULL },
    { "outputFile", F_STRING, OPT_GFD_OUTPUT_FILE, NULL },
    { "machineTypeFile", F_STRING, OPT_MACHINE_TYPE_FILE, NULL },
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
    { "useNodeFeatureAPI", F_BOOL, OPT_USE_NODE_FEATURE_API, NULL },
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

/* ---- health: typed into JSON here, read by config-health.c ------------------------- */

static json_t *to_json(struct fctx *x, const yaml_node_t *n, const char *path, int depth)
{
    if (++x->visits > HEALTH_MAX_NODES || depth > HEALTH_MAX_DEPTH) {
        cf_ferr(x, n, path, "section too large or too deeply nested");
        return NULL;
    }
    if (n->type == YAML_SCALAR_NODE) {
        json_t *j = NULL;
        switch (cf_scalar_type(n)) {
        case S_NULL: return json_null();
        case S_BOOL: return json_boolean(scalar_bool_value(cf_sval(n)));
        case S_INT: return json_integer(strtoll(cf_sval(n), NULL, 0));
        case S_FLOAT: return json_real(strtod(cf_sval(n), NULL));
        case S_STRING: j = json_stringn(cf_sval(n), n->data.scalar.length); break;
        }
        if (!j)
            cf_ferr(x, n, path, "invalid string");
        return j;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        size_t i = 0;
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++, i++) {
            _cleanup_free_ char *ipath = xasprintf("%s[%zu]", path, i);
            json_t *v = to_json(x, cf_node_at(x, *it), ipath, depth + 1);
            if (!v || json_array_append_new(a, v) < 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    json_t *o = json_object();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = cf_node_at(x, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            cf_type_err(x, k, path, "a string key");
            json_decref(o);
            return NULL;
        }
        _cleanup_free_ char *kpath = xasprintf("%s.%s", path, cf_sval(k));
        json_t *v = to_json(x, cf_node_at(x, p->value), kpath, depth + 1);
        if (!v) {
            json_decref(o);
            return NULL;
        }
        if (json_object_setn_new(o, cf_sval(k), k->data.scalar.length, v) < 0) {
            cf_ferr(x, k, kpath, "invalid key");
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
    int r = config_health_file(x->c, j, x->name, cf_line_of(key), x->set, x->marks, x->err);
    json_decref(j);
    return r;
}

static int section_version(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                           const char *path)
{
    const char *v = "";
    if (!cf_is_null(n)) {
        int r = cf_get_string(x, n, path, &v);
        if (r < 0)
            return r;
    }
    if (*v && !streq(v, "v1"))
        return cf_ferr(x, n, path, "unknown version: %s (allowed: v1)", v);
    return 0;
}

/* ours: DRA settings a per-node config may choose (config-manager hands each node its file) */
static const struct field dra_fields[] = {
    { "consumableCapacity", F_BOOL, OPT_DRA_CONSUMABLE_CAPACITY, NULL },
    { "shareMemoryStep", F_STRING, OPT_DRA_SHARE_MEMORY_STEP, NULL },
    { "shareMemoryDefault", F_STRING, OPT_DRA_SHARE_MEMORY_DEFAULT, NULL },
    { "shareComputeDefault", F_STRING, OPT_DRA_SHARE_COMPUTE_DEFAULT, NULL },
};

static int section_dra(struct fctx *x, const yaml_node_t *n, const yaml_node_t *key,
                       const char *path)
{
    return walk(x, n, path, dra_fields, ELEMENTSOF(dra_fields));
}

static const struct field top_fields[] = {
    { "version", F_SECTION, 0, section_version },
    { "flags", F_SECTION, 0, section_flags },
    { "resources", F_SECTION, 0, cf_section_resources },
    { "sharing", F_SECTION, 0, cf_section_sharing },
    { "imex", F_SECTION, 0, section_imex },
    { "health", F_SECTION, 0, section_health },
    { "dra", F_SECTION, 0, section_dra },
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
    /* A device (or a file growing meanwhile) is read in doubling steps up to the bound. */
    _cleanup_free_ char *buf = NULL;
    size_t got = 0;
    int r = read_fd_bounded(fd, S_ISREG(st.st_mode) ? (size_t)st.st_size : 4095, CONFIG_FILE_MAX,
                            &buf, &got);
    if (r == -EFBIG)
        return error_set(err, -EINVAL, "reading config file %s: larger than %u bytes", path,
                         CONFIG_FILE_MAX);
    if (r < 0)
        return error_set(err, r, "reading config file %s: %s", path, strerror(-r));
    return config_file_parse(c, path, (const unsigned char *)buf, got, set, marks, err);
}
