/* ResourceSlice validation (see dra-slice.h): the 1.34.9 API server's rules for what a
 * kubelet plugin writes, with its messages word for word (field paths, "Too many",
 * "Too long ... bytes", the RFC 1123 texts), so that a slice we would have refused is
 * never sent, and tests can compare with what the real API server said. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dns-name.h"
#include "core/macro.h"
#include "dra/dra-slice.h"

#define LABEL_MSG                                                                                  \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and " \
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "   \
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define SUBDOMAIN_MSG                                                                              \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or " \
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used " \
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define CIDENT_MSG                                                                                 \
    "a valid C identifier must start with alphabetic character or '_', followed by a string of " \
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used "   \
    "for validation is '[A-Za-z_][A-Za-z0-9_]*')"
#define SELECTORS "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"

struct errs {
    char *buf;
    size_t n;
};

_printf_(2, 3) static void add(struct errs *e, const char *fmt, ...)
{
    va_list ap;
    char *one;
    va_start(ap, fmt);
    if (vasprintf(&one, fmt, ap) < 0)
        abort();
    va_end(ap);
    char *joined = xasprintf("%s%s%s", e->buf ? e->buf : "", e->buf ? ", " : "", one);
    free(one);
    free(e->buf);
    e->buf = joined;
    e->n++;
}

/* Go's %q for the ASCII we expect; other bytes as \xNN. Returns malloc'd. */
static char *quote(const char *s)
{
    size_t len = strlen(s);
    char *out = xreallocarray(NULL, len * 4 + 3, 1), *o = out;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *o++ = '\\';
            *o++ = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            o += sprintf(o, "\\x%02x", *p);
        } else {
            *o++ = (char)*p;
        }
    }
    *o++ = '"';
    *o = 0;
    return out;
}

/* IsDNS1123Subdomain's messages, each an Invalid value of `field`. */
static void check_subdomain(struct errs *e, const char *field, const char *v)
{
    _cleanup_free_ char *q = quote(v);
    if (strlen(v) > 253)
        add(e, "%s: Invalid value: %s: must be no more than 253 characters", field, q);
    if (!dns_subdomain_shape(v, strlen(v)))
        add(e, "%s: Invalid value: %s: " SUBDOMAIN_MSG, field, q);
}

/* The driver name and an attribute's domain: at most 63 bytes, then a DNS subdomain
 * once lower-cased (the API server accepts "GPU.nvidia.com"). */
static void check_driver_name(struct errs *e, const char *field, const char *v)
{
    if (strlen(v) > 63) {
        add(e, "%s: Too long: may not be more than 63 bytes", field);
        return;
    }
    _cleanup_free_ char *low = xstrdup(v);
    for (char *p = low; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    check_subdomain(e, field, low);
}

static bool is_cident(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static void check_cident(struct errs *e, const char *field, const char *v)
{
    if (strlen(v) > 32) {
        add(e, "%s: Too long: may not be more than 32 bytes", field);
        return;
    }
    if (!is_cident(v)) {
        _cleanup_free_ char *q = quote(v);
        add(e, "%s: Invalid value: %s: " CIDENT_MSG, field, q);
    }
}

/* An attribute or capacity name: "<C identifier>" or "<domain>/<C identifier>". */
static void check_qualified(struct errs *e, const char *field, const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash) {
        check_cident(e, field, name);
        return;
    }
    if (strchr(slash + 1, '/')) {
        _cleanup_free_ char *q = quote(name);
        add(e, "%s: Invalid value: %s: must be the domain and name separated by one slash", field, q);
        return;
    }
    _cleanup_free_ char *domain = strndup(name, (size_t)(slash - name));
    if (!domain)
        abort();
    if (!*domain)
        add(e, "%s: Required value: the domain must not be empty", field);
    else
        check_driver_name(e, field, domain);
    if (!slash[1])
        add(e, "%s: Required value: the name must not be empty", field);
    else
        check_cident(e, field, slash + 1);
}

static bool numeric(const char *s, size_t len)
{
    if (!len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Dot-separated identifiers of [0-9A-Za-z-], none empty; numeric ones without leading
 * zeros when `strict_numbers` (pre-release, not build metadata). */
static bool idents_ok(const char *s, size_t len, bool strict_numbers)
{
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.') {
            char c = s[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '-'))
                return false;
            continue;
        }
        size_t n = i - start;
        if (!n)
            return false;
        if (strict_numbers && numeric(s + start, n) && n > 1 && s[start] == '0')
            return false;
        start = i + 1;
    }
    return true;
}

bool dra_semver_valid(const char *v)
{
    size_t len = strlen(v);
    const char *plus = memchr(v, '+', len);
    size_t core_len = plus ? (size_t)(plus - v) : len;
    if (plus && !idents_ok(plus + 1, len - core_len - 1, false))
        return false;
    const char *dash = memchr(v, '-', core_len);
    size_t nums_len = dash ? (size_t)(dash - v) : core_len;
    if (dash && !idents_ok(dash + 1, core_len - nums_len - 1, true))
        return false;
    /* major.minor.patch: exactly three numbers, no leading zeros, each fits 64 bits */
    size_t start = 0;
    int parts = 0;
    for (size_t i = 0; i <= nums_len; i++) {
        if (i < nums_len && v[i] != '.')
            continue;
        size_t n = i - start;
        if (!numeric(v + start, n) || (n > 1 && v[start] == '0') || n > 20)
            return false;
        if (n == 20 && strncmp(v + start, "18446744073709551615", 20) > 0)
            return false;
        parts++;
        start = i + 1;
    }
    return parts == 3;
}

static void check_attribute(struct errs *e, const char *field, json_t *val)
{
    static const char *const kinds[] = { "int", "bool", "string", "version" };
    int set = 0;
    for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
        set += json_object_get(val, kinds[k]) && !json_is_null(json_object_get(val, kinds[k]));
    if (set == 0) {
        add(e, "%s: Required value: exactly one value must be specified", field);
        return;
    }
    json_t *i = json_object_get(val, "int"), *b = json_object_get(val, "bool"),
           *s = json_object_get(val, "string"), *v = json_object_get(val, "version");
    if (set > 1) {
        /* the Go struct as the API server prints it */
        char ibuf[32] = "null";
        if (json_is_integer(i))
            snprintf(ibuf, sizeof(ibuf), "%" JSON_INTEGER_FORMAT, json_integer_value(i));
        _cleanup_free_ char *sq = json_is_string(s) ? quote(json_string_value(s)) : xstrdup("null");
        _cleanup_free_ char *vq = json_is_string(v) ? quote(json_string_value(v)) : xstrdup("null");
        add(e, "%s: Invalid value: {\"IntValue\":%s,\"BoolValue\":%s,\"StringValue\":%s,\"VersionValue\":%s}: "
            "exactly one value must be specified", field, ibuf,
            json_is_boolean(b) ? (json_is_true(b) ? "true" : "false") : "null", sq, vq);
        return;
    }
    if (json_is_string(s) && strlen(json_string_value(s)) > 64)
        add(e, "%s.string: Too long: may not be more than 64 bytes", field);
    if (json_is_string(v)) {
        const char *ver = json_string_value(v);
        if (strlen(ver) > 64) {
            add(e, "%s.version: Too long: may not be more than 64 bytes", field);
        } else if (!dra_semver_valid(ver)) {
            _cleanup_free_ char *q = quote(ver);
            add(e, "%s.version: Invalid value: %s: must be a string compatible with semver.org spec 2.0.0",
                field, q);
        }
    }
}

static void check_taints(struct errs *e, const char *dev, json_t *taints)
{
    size_t n = json_array_size(taints);
    if (n > DRA_DEVICE_MAX_TAINTS) {
        add(e, "%s.taints: Too many: %zu: must have at most %d items", dev, n, DRA_DEVICE_MAX_TAINTS);
        return;
    }
    for (size_t t = 0; t < n; t++) {
        json_t *taint = json_array_get(taints, t);
        const char *key = json_string_value(json_object_get(taint, "key"));
        const char *value = json_string_value(json_object_get(taint, "value"));
        const char *effect = json_string_value(json_object_get(taint, "effect"));
        if (!key || !*key)
            add(e, "%s.taints[%zu].key: Required value", dev, t);
        if (value && strlen(value) > 63)
            add(e, "%s.taints[%zu].value: Invalid value: \"%s\": must be no more than 63 characters",
                dev, t, value);
        if (!effect || !*effect) {
            add(e, "%s.taints[%zu].effect: Required value", dev, t);
        } else if (!streq(effect, "NoSchedule") && !streq(effect, "NoExecute")) {
            _cleanup_free_ char *q = quote(effect);
            add(e, "%s.taints[%zu].effect: Unsupported value: %s: supported values: \"NoExecute\", "
                "\"NoSchedule\"", dev, t, q);
        }
    }
}

static void check_device(struct errs *e, json_t *devices, size_t i)
{
    json_t *d = json_array_get(devices, i);
    char dev[48], field[512];
    snprintf(dev, sizeof(dev), "spec.devices[%zu]", i);

    const char *name = json_string_value(json_object_get(d, "name"));
    if (!name || !*name) {
        add(e, "%s.name: Required value", dev);
    } else {
        _cleanup_free_ char *q = quote(name);
        size_t len = strlen(name);
        if (len > 63)
            add(e, "%s.name: Invalid value: %s: must be no more than 63 characters", dev, q);
        if (!dns_label_shape(name, len))
            add(e, "%s.name: Invalid value: %s: " LABEL_MSG, dev, q);
        for (size_t j = 0; j < i; j++)
            if (streq_ptr(json_string_value(json_object_get(json_array_get(devices, j), "name")), name)) {
                add(e, "%s.name: Duplicate value: %s", dev, q);
                break;
            }
    }
    const char *key;
    json_t *val;
    json_t *attrs = json_object_get(d, "attributes"), *caps = json_object_get(d, "capacity");
    json_object_foreach(attrs, key, val) {
        snprintf(field, sizeof(field), "%s.attributes[%s]", dev, key);
        check_qualified(e, field, key);
        check_attribute(e, field, val);
    }
    json_object_foreach(caps, key, val) {
        snprintf(field, sizeof(field), "%s.capacity[%s]", dev, key);
        check_qualified(e, field, key);
        if (!json_is_string(json_object_get(val, "value")))
            add(e, "%s.value: Required value", field);
    }
    size_t total = json_object_size(attrs) + json_object_size(caps);
    if (total > DRA_DEVICE_MAX_ATTRS)
        add(e, "%s: Invalid value: %zu: the total number of attributes and capacities must not exceed %d",
            dev, total, DRA_DEVICE_MAX_ATTRS);
    check_taints(e, dev, json_object_get(d, "taints"));

    /* partitionable devices (1.34 alpha, 1.36 beta): at most 2 consumptions, each of a
     * distinct set, with 1..32 counters */
    json_t *cc = json_object_get(d, "consumesCounters"), *c;
    size_t k;
    if (json_array_size(cc) > DRA_DEVICE_MAX_CONSUMPTIONS)
        add(e, "%s.consumesCounters: Too many: %zu: must have at most %d items", dev,
            json_array_size(cc), DRA_DEVICE_MAX_CONSUMPTIONS);
    json_array_foreach (cc, k, c) {
        snprintf(field, sizeof(field), "%s.consumesCounters[%zu]", dev, k);
        const char *set = json_string_value(json_object_get(c, "counterSet"));
        if (!set || !*set)
            add(e, "%s.counterSet: Required value", field);
        for (size_t j = 0; set && j < k; j++)
            if (streq_ptr(json_string_value(json_object_get(json_array_get(cc, j), "counterSet")), set))
                add(e, "%s.counterSet: Duplicate value: \"%s\"", field, set);
        size_t nc = json_object_size(json_object_get(c, "counters"));
        if (nc == 0)
            add(e, "%s.counters: Required value", field);
        else if (nc > DRA_COUNTERS_MAX)
            add(e, "%s.counters: Too many: %zu: must have at most %d items", field, nc, DRA_COUNTERS_MAX);
    }
    /* a request policy only on a device many claims may share */
    json_object_foreach(caps, key, val)
        if (json_object_get(val, "requestPolicy") && !json_is_true(json_object_get(d, "allowMultipleAllocations")))
            add(e, "%s.capacity[%s].requestPolicy: Forbidden: allowMultipleAllocations must be true", dev, key);
}

/* spec.sharedCounters: at most 8 sets (1.36) of 1..32 counters, names DNS labels, each set
 * once in the slice. */
static void check_counter_sets(struct errs *e, json_t *sets)
{
    size_t n = json_array_size(sets), i;
    json_t *s;
    if (n > DRA_SLICE_MAX_COUNTER_SETS)
        add(e, "spec.sharedCounters: Too many: %zu: must have at most %d items", n,
            DRA_SLICE_MAX_COUNTER_SETS);
    json_array_foreach (sets, i, s) {
        char field[64];
        snprintf(field, sizeof(field), "spec.sharedCounters[%zu]", i);
        const char *name = json_string_value(json_object_get(s, "name"));
        if (!name || !*name)
            add(e, "%s.name: Required value", field);
        else if (!dns_label_shape(name, strlen(name)) || strlen(name) > 63)
            add(e, "%s.name: Invalid value: \"%s\": " LABEL_MSG, field, name);
        for (size_t j = 0; name && j < i; j++)
            if (streq_ptr(json_string_value(json_object_get(json_array_get(sets, j), "name")), name))
                add(e, "%s.name: Duplicate value: \"%s\"", field, name);
        json_t *counters = json_object_get(s, "counters"), *v;
        const char *key;
        if (json_object_size(counters) == 0)
            add(e, "%s.counters: Required value", field);
        else if (json_object_size(counters) > DRA_COUNTERS_MAX)
            add(e, "%s.counters: Too many: %zu: must have at most %d items", field,
                json_object_size(counters), DRA_COUNTERS_MAX);
        json_object_foreach (counters, key, v)
            if (!dns_label_shape(key, strlen(key)) || strlen(key) > 63)
                add(e, "%s.counters[%s]: Invalid value: \"%s\": " LABEL_MSG, field, key, key);
    }
}

static void check_spec(struct errs *e, json_t *spec)
{
    const char *driver = json_string_value(json_object_get(spec, "driver"));
    if (!driver || !*driver)
        add(e, "spec.driver: Required value");
    else
        check_driver_name(e, "spec.driver", driver);

    json_t *pool = json_object_get(spec, "pool");
    const char *pool_name = json_string_value(json_object_get(pool, "name"));
    if (!pool_name || !*pool_name) {
        add(e, "spec.pool.name: Required value");
    } else if (strlen(pool_name) > 253) {
        add(e, "spec.pool.name: Too long: may not be more than 253 bytes");
    } else {
        _cleanup_free_ char *copy = xstrdup(pool_name);
        char *save = NULL;
        for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save))
            check_subdomain(e, "spec.pool.name", part);
    }
    json_int_t gen = json_integer_value(json_object_get(pool, "generation"));
    if (gen < 0)
        add(e, "spec.pool.generation: Invalid value: %" JSON_INTEGER_FORMAT ": must be greater than or equal to zero", gen);
    json_int_t count = json_integer_value(json_object_get(pool, "resourceSliceCount"));
    if (count <= 0)
        add(e, "spec.pool.resourceSliceCount: Invalid value: %" JSON_INTEGER_FORMAT ": must be greater than zero", count);

    /* exactly one way of naming the nodes */
    const char *node = json_string_value(json_object_get(spec, "nodeName"));
    json_t *sel = json_object_get(spec, "nodeSelector");
    bool has[4] = { node && *node, sel && !json_is_null(sel),
                    json_is_true(json_object_get(spec, "allNodes")),
                    json_is_true(json_object_get(spec, "perDeviceNodeSelection")) };
    static const char *const names[4] = { "`nodeName`", "`nodeSelector`", "`allNodes`",
                                          "`perDeviceNodeSelection`" };
    char set[160] = "";
    int nset = 0;
    for (int i = 0; i < 4; i++)
        if (has[i]) {
            snprintf(set + strlen(set), sizeof(set) - strlen(set), "%s%s", nset ? ", " : "", names[i]);
            nset++;
        }
    if (nset == 0)
        add(e, "spec: Required value: exactly one of " SELECTORS " is required");
    else if (nset > 1)
        add(e, "spec: Invalid value: \"{%s}\": exactly one of " SELECTORS " is required, but multiple fields are set", set);
    if (has[0])
        check_subdomain(e, "spec.nodeName", node);

    check_counter_sets(e, json_object_get(spec, "sharedCounters"));
    json_t *devices = json_object_get(spec, "devices");
    size_t n = json_array_size(devices);
    if (n > DRA_SLICE_MAX_DEVICES) {
        add(e, "spec.devices: Too many: %zu: must have at most %d items", n, DRA_SLICE_MAX_DEVICES);
        return;
    }
    /* 64 where a device consumes counters or carries taints */
    bool limited = false;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(devices, i);
        limited |= json_array_size(json_object_get(d, "consumesCounters")) > 0 ||
                   json_array_size(json_object_get(d, "taints")) > 0;
    }
    if (limited && n > DRA_SLICE_MAX_DEVICES_LIMITED) {
        add(e, "spec.devices: Too many: %zu: must have at most %d items", n, DRA_SLICE_MAX_DEVICES_LIMITED);
        return;
    }
    for (size_t i = 0; i < n; i++)
        check_device(e, devices, i);
}

int dra_slice_validate(const json_t *slice, const char *name, char **msg)
{
    struct errs e = { 0 };
    json_t *md = json_object_get(slice, "metadata");
    const char *obj_name = json_string_value(json_object_get(md, "name"));
    const char *gen_name = json_string_value(json_object_get(md, "generateName"));
    if ((!obj_name || !*obj_name) && (!gen_name || !*gen_name))
        add(&e, "metadata.name: Required value: name or generateName is required");
    check_spec(&e, json_object_get(slice, "spec"));
    if (!e.n)
        return 0;
    if (!name)
        name = obj_name ? obj_name : "";
    *msg = xasprintf("ResourceSlice.resource.k8s.io \"%s\" is invalid: %s%s%s", name,
                     e.n > 1 ? "[" : "", e.buf, e.n > 1 ? "]" : "");
    free(e.buf);
    return -EINVAL;
}
