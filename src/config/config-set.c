/* What the option table's rows have in common (config-internal.h): each kind's setter,
 * writing through the row's storage, and each kind's value, read from it; the one entry
 * every source goes through (config_option_set: flags, environment, the file, defaults)
 * and the defaults themselves. A row with a setter or a value of its own uses that. */
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>

#include "config/config-internal.h"
#include "core/log.h"

static void *field_of(struct config *c, const struct config_option_def *o)
{
    return (char *)c + o->offset;
}

static const void *cfield_of(const struct config *c, const struct config_option_def *o)
{
    return (const char *)c + o->offset;
}

/* The flag as --help spells it: "-v", "--kube-api-burst". */
static const char *dashes(const struct config_option_def *o)
{
    return o->names[0] && strlen(o->names[0]) == 1 ? "-" : "--";
}

static int set_int(struct config *c, const struct config_option_def *o, const char *value,
                   struct error *err)
{
    char *end;
    errno = 0;
    long x = strtol(value, &end, 10);
    if (errno || *end || end == value || x < (long)o->min || x > (long)o->max)
        return error_set(err, -EINVAL, "invalid %s%s value \"%s\": must be an integer >= %g",
                         dashes(o), o->names[0], value, o->min);
    *(int *)field_of(c, o) = (int)x;
    return 0;
}

static int set_number(struct config *c, const struct config_option_def *o, const char *value,
                      struct error *err)
{
    char *end;
    errno = 0;
    double x = strtod(value, &end);
    if (errno || *end || end == value || !(x > o->min && x <= o->max))
        return error_set(err, -EINVAL, "invalid %s%s value \"%s\": must be a number > %g",
                         dashes(o), o->names[0], value, o->min);
    *(double *)field_of(c, o) = x;
    return 0;
}

static int set_by_kind(struct config *c, const struct config_option_def *o, const char *value,
                       struct error *err)
{
    void *field = field_of(c, o);
    switch (o->kind) {
    case KIND_STRING: {
        char **s = field;
        free(*s);
        *s = xstrdup(value);
        return 0;
    }
    case KIND_BOOL: {
        int b = config_parse_bool(value);
        if (b < 0)
            return error_set(err, -EINVAL,
                             "invalid boolean value \"%s\" (allowed: true, false, 1, 0, t, f)",
                             value);
        *(bool *)field = b;
        return 0;
    }
    case KIND_INT: return set_int(c, o, value, err);
    case KIND_NUMBER: return set_number(c, o, value, err);
    case KIND_DURATION:
        if (config_parse_duration_ms(value, field) < 0)
            return error_set(err, -EINVAL,
                             "invalid duration \"%s\" (use e.g. 500ms, 30s, 5m, 1h)", value);
        return 0;
    case KIND_SLICE: {
        char ***v = field;
        config_strv_free(*v);
        *v = config_split_list(value, NULL);
        return 0;
    }
    case KIND_ACTION: break;
    }
    return error_set(err, -EINVAL, "option cannot be set");
}

static int apply(struct config *c, enum config_opt opt, const char *value, struct error *err)
{
    const struct config_option_def *o = &config_options[opt];
    if (o->set)
        return o->set(c, opt, value, err);
    if (!o->stored)
        return error_set(err, -EINVAL, "option cannot be set");
    return set_by_kind(c, o, value, err);
}

/* Strict UTF-8 (no overlong forms, surrogates or code points above U+10FFFF). */
static bool utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned char c = *s++;
        int more = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
        if (more < 0)
            return false;
        unsigned char lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        for (int i = 0; i < more; i++, s++) {
            if (*s < (i == 0 ? lo : 0x80) || *s > (i == 0 ? hi : 0xbf))
                return false;
        }
    }
    return true;
}

int config_option_set(struct config *c, enum config_opt opt, const char *value,
                      const char *origin, struct error *err)
{
    /* Flags and the environment are bytes; everything downstream (the JSON print at
     * start-up, CDI specs, the kubelet's protobuf strings) needs text. The file's
     * values are text already (libyaml checks). The value is not echoed: it is not
     * printable. */
    int r = utf8_valid(value) ? apply(c, opt, value, err)
                              : error_set(err, -EINVAL, "value is not valid UTF-8");
    if (r < 0)
        return error_prefix(err, "%s", origin);
    return 0;
}

static size_t kind_size(enum config_opt_kind k)
{
    switch (k) {
    case KIND_STRING: return sizeof(char *);
    case KIND_BOOL: return sizeof(bool);
    case KIND_INT: return sizeof(int);
    case KIND_NUMBER: return sizeof(double);
    case KIND_DURATION: return sizeof(uint64_t);
    case KIND_SLICE: return sizeof(char **);
    case KIND_ACTION: break;
    }
    return 0;
}

void config_init_defaults(struct config *c)
{
    *c = (struct config){
        .cdi_feature_flags = xcalloc(1, sizeof(char *)),
        .cdi_disable_hooks = xcalloc(1, sizeof(char *)),
        .time_slicing = { .fail_requests_greater_than_one = -1 },
        .mps = { .fail_requests_greater_than_one = -1 },
        /* not settings: how fast a failing NVML event wait is retried */
        .health = { .wait_backoff_ms = 100, .wait_backoff_max_ms = 5000 },
    };
    for (int i = 0; i < _OPT_MAX; i++) {
        const struct config_option_def *o = &config_options[i];
        struct error err = { 0 };
        if (o->stored && !o->set && o->size != kind_size(o->kind)) {
            log_error("BUG: option %d is stored in a field of %zu bytes, its kind needs %zu", i,
                      o->size, kind_size(o->kind));
            abort();
        }
        if (o->defval && apply(c, i, o->defval, &err) < 0) {
            log_error("BUG: the default of option %d does not parse: %s", i, err.msg);
            abort();
        }
    }
}

struct json_t *config_option_json(const struct config *c, enum config_opt opt)
{
    const struct config_option_def *o = &config_options[opt];
    if (o->value)
        return o->value(c, opt);
    if (!o->stored)
        return json_null();
    const void *field = cfield_of(c, o);
    switch (o->kind) {
    case KIND_STRING: {
        const char *s = *(char *const *)field;
        return s ? json_string(s) : json_null();
    }
    case KIND_BOOL: return json_boolean(*(const bool *)field);
    case KIND_INT: return json_integer(*(const int *)field);
    case KIND_NUMBER: return json_real(*(const double *)field);
    case KIND_DURATION: return json_sprintf("%" PRIu64 "ms", *(const uint64_t *)field);
    case KIND_SLICE: {
        json_t *a = json_array();
        for (char *const *v = *(char **const *)field; v && *v; v++)
            json_array_append_new(a, json_string(*v));
        return a;
    }
    case KIND_ACTION: break;
    }
    return json_null();
}

/* A value as a flag spells it: lists joined with ',', maps as k=v. */
static char *json_text(json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_STRING: return xstrdup(json_string_value(j));
    case JSON_TRUE: return xstrdup("true");
    case JSON_FALSE: return xstrdup("false");
    case JSON_INTEGER: return xasprintf("%" JSON_INTEGER_FORMAT, json_integer_value(j));
    case JSON_REAL: return xasprintf("%g", json_real_value(j));
    case JSON_ARRAY: {
        char *s = xstrdup("");
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            _cleanup_free_ char *t = json_text(v);
            char *n = xasprintf("%s%s%s", s, i ? "," : "", t);
            free(s);
            s = n;
        }
        return s;
    }
    case JSON_OBJECT: {
        char *s = xstrdup("");
        const char *key;
        json_t *v;
        json_object_foreach(j, key, v) {
            _cleanup_free_ char *t = json_text(v);
            char *n = xasprintf("%s%s%s=%s", s, *s ? "," : "", key, t);
            free(s);
            s = n;
        }
        return s;
    }
    case JSON_NULL: break;
    }
    return xstrdup("");
}

char *config_option_text(const struct config *c, enum config_opt opt)
{
    json_t *j = config_option_json(c, opt);
    char *s = json_text(j);
    json_decref(j);
    return s;
}
