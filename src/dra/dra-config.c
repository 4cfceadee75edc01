/* Strict decoding of NVIDIA's opaque GpuConfig / MigDeviceConfig (see dra-config.h).
 *
 * Why TimeSlicing and MPS are accepted although NVIDIA's driver refuses them by default:
 * there they are behind the driver's own alpha feature gates TimeSlicingSettings and
 * MPSSupport (off unless the chart switches them on). Here both are always on
 * (config-dra.c says so at start for either gate); a claim that asks for one gets it, which
 * is what the same claim gets from NVIDIA's driver with the gate on. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/quantity.h"
#include "dra/dra-config.h"

static const char *const kind_names[] = { [DRA_CONFIG_GPU] = "GpuConfig",
                                          [DRA_CONFIG_MIG] = "MigDeviceConfig" };
static const char *const sharing_names[] = { [DRA_SHARING_NONE] = "",
                                             [DRA_SHARING_TIME_SLICING] = "TimeSlicing",
                                             [DRA_SHARING_MPS] = "MPS" };
static const char *const interval_names[] = { [DRA_TS_DEFAULT] = "Default",
                                              [DRA_TS_SHORT] = "Short",
                                              [DRA_TS_MEDIUM] = "Medium",
                                              [DRA_TS_LONG] = "Long" };

const char *dra_config_kind_name(enum dra_config_kind kind) { return kind_names[kind]; }
const char *dra_sharing_name(enum dra_sharing s) { return sharing_names[s]; }
const char *dra_ts_interval_name(enum dra_ts_interval i) { return interval_names[i]; }

int dra_sharing_from_name(const char *s, enum dra_sharing *out)
{
    for (size_t i = DRA_SHARING_TIME_SLICING; i < ELEMENTSOF(sharing_names); i++)
        if (streq(s, sharing_names[i])) {
            *out = (enum dra_sharing)i;
            return 0;
        }
    return -EINVAL;
}

int dra_ts_interval_from_name(const char *s, enum dra_ts_interval *out)
{
    for (size_t i = 0; i < ELEMENTSOF(interval_names); i++)
        if (streq(s, interval_names[i])) {
            *out = (enum dra_ts_interval)i;
            return 0;
        }
    return -EINVAL;
}

struct dra_config dra_config_default(enum dra_config_kind kind)
{
    return (struct dra_config){ .kind = kind, .sharing = DRA_SHARING_NONE,
                                .mps = { .thread_pct = -1, .pinned_mib = -1 } };
}

static const char *json_type_word(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "bool";
    default: return "null";
    }
}

/* The strict decoder's refusal of a key the type does not have (the apimachinery text,
 * with the field's path from the top of `parameters`). */
static int only_keys(json_t *obj, const char *path, const char *const *allowed, size_t n,
                     struct error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++)
            known = streq(key, allowed[i]);
        if (!known)
            return error_set(err, -EINVAL, "strict decoding error: unknown field \"%s%s%s\"", path,
                             *path ? "." : "", key);
    }
    return 0;
}

/* A field whose JSON type does not fit (Go's json message, in our words for the type). */
static int wrong_type(json_t *v, const char *path, const char *want, struct error *err)
{
    return error_set(err, -EINVAL, "json: cannot unmarshal %s into field %s of type %s",
                     json_type_word(v), path, want);
}

/* A JSON null is what Go decodes as "absent" for pointers and strings alike. */
static json_t *field(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int decode_time_slicing(json_t *ts, struct dra_config *c, struct error *err)
{
    static const char *const keys[] = { "interval" };
    if (!json_is_object(ts))
        return wrong_type(ts, "sharing.timeSlicingConfig", "TimeSlicingConfig", err);
    int r = only_keys(ts, "sharing.timeSlicingConfig", keys, ELEMENTSOF(keys), err);
    if (r < 0)
        return r;
    json_t *iv = field(ts, "interval");
    if (!iv)
        return 0; /* Normalize: Default */
    if (!json_is_string(iv))
        return wrong_type(iv, "sharing.timeSlicingConfig.interval", "TimeSliceInterval", err);
    if (dra_ts_interval_from_name(json_string_value(iv), &c->interval) < 0)
        return error_set(err, -EINVAL, "unknown time-slice interval: %s", json_string_value(iv));
    return 0;
}

/* NVIDIA's prefix for every limit it cannot turn into the daemon's "<n>M". */
#define MPS_LIMIT_ERROR "error transforming DefaultPerDevicePinnedMemoryLimit into string: "

/* A resource.Quantity (a JSON string, or a number as its UnmarshalJSON takes one) in whole
 * MiB as NVIDIA turns it (value/1024/1024, rounded toward zero); text: what to name it. */
static int quantity_mib(json_t *v, const char *path, int64_t *mib, char *text, size_t len,
                        struct error *err)
{
    if (json_is_integer(v))
        snprintf(text, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_string(v))
        snprintf(text, len, "%s", json_string_value(v));
    else
        return wrong_type(v, path, "Quantity", err);
    int64_t bytes;
    if (quantity_parse(text, &bytes) < 0)
        return error_set(err, -EINVAL, "%s: quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", path);
    *mib = bytes / 1024 / 1024;
    return 0;
}

static int decode_limits(json_t *v, struct dra_mps_config *m, struct error *err)
{
    const char *path = "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit";
    if (!json_is_object(v))
        return wrong_type(v, path, "MpsPerDevicePinnedMemoryLimit", err);
    if (json_object_size(v) > DRA_MPS_LIMITS_MAX)
        return error_set(err, -E2BIG, "%s: more than %d devices (this plugin's bound)", path,
                         DRA_MPS_LIMITS_MAX);
    const char *k;
    json_t *q;
    json_object_foreach(v, k, q) {
        struct dra_mps_limit *l = &m->limits[m->n_limits++];
        char text[64];
        int r = quantity_mib(q, path, &l->mib, text, sizeof(text), err);
        if (r < 0)
            return r;
        if (l->mib < 1)
            return error_set(err, -EINVAL, MPS_LIMIT_ERROR "invalid limit: value set too low: %s: %s",
                             k, text);
        /* too long for a UUID, so no device of the group: NVIDIA then reads it as an index */
        if (strlen(k) >= sizeof(l->key))
            return error_set(err, -EINVAL, MPS_LIMIT_ERROR "invalid device: unable to parse key "
                             "as an integer: %s", k);
        snprintf(l->key, sizeof(l->key), "%s", k);
    }
    return 0;
}

static int decode_mps(json_t *mps, struct dra_mps_config *m, struct error *err)
{
    static const char *const keys[] = { "defaultActiveThreadPercentage",
                                        "defaultPinnedDeviceMemoryLimit",
                                        "defaultPerDevicePinnedMemoryLimit", "multiUser" };
    if (!json_is_object(mps))
        return wrong_type(mps, "sharing.mpsConfig", "MpsConfig", err);
    int r = only_keys(mps, "sharing.mpsConfig", keys, ELEMENTSOF(keys), err);
    if (r < 0)
        return r;
    json_t *v;
    if ((v = field(mps, "defaultActiveThreadPercentage"))) {
        if (!json_is_integer(v))
            return wrong_type(v, "sharing.mpsConfig.defaultActiveThreadPercentage", "int", err);
        json_int_t pct = json_integer_value(v);
        if (pct < 0)
            return error_set(err, -EINVAL, "active thread percentage must not be negative");
        if (pct > 100)
            return error_set(err, -EINVAL, "active thread percentage must not be greater than 100");
        m->thread_pct = (int)pct;
    }
    if ((v = field(mps, "defaultPinnedDeviceMemoryLimit"))) {
        char text[64];
        if ((r = quantity_mib(v, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit",
                              &m->pinned_mib, text, sizeof(text), err)) < 0)
            return r;
        if (m->pinned_mib < 1)
            return error_set(err, -EINVAL, MPS_LIMIT_ERROR "invalid limit: default value set too low: %s",
                             text);
    }
    if ((v = field(mps, "defaultPerDevicePinnedMemoryLimit")) && (r = decode_limits(v, m, err)) < 0)
        return r;
    if ((v = field(mps, "multiUser"))) {
        if (!json_is_boolean(v))
            return wrong_type(v, "sharing.mpsConfig.multiUser", "bool", err);
        m->multi_user = json_is_true(v);
    }
    return 0;
}

bool dra_mps_config_same(const struct dra_mps_config *a, const struct dra_mps_config *b)
{
    if (a->thread_pct != b->thread_pct || a->pinned_mib != b->pinned_mib ||
        a->multi_user != b->multi_user || a->n_limits != b->n_limits)
        return false;
    for (unsigned i = 0; i < a->n_limits; i++)
        if (!streq(a->limits[i].key, b->limits[i].key) || a->limits[i].mib != b->limits[i].mib)
            return false;
    return true;
}

static int decode_sharing(json_t *sh, struct dra_config *c, struct error *err)
{
    static const char *const gpu_keys[] = { "strategy", "timeSlicingConfig", "mpsConfig" };
    /* MigDeviceSharing has no time-slice interval: the key is unknown there. */
    static const char *const mig_keys[] = { "strategy", "mpsConfig" };
    const char *type = c->kind == DRA_CONFIG_GPU ? "GpuSharing" : "MigDeviceSharing";
    if (!json_is_object(sh))
        return wrong_type(sh, "sharing", type, err);
    int r = c->kind == DRA_CONFIG_GPU ? only_keys(sh, "sharing", gpu_keys, ELEMENTSOF(gpu_keys), err)
                                      : only_keys(sh, "sharing", mig_keys, ELEMENTSOF(mig_keys), err);
    if (r < 0)
        return r;

    json_t *st = field(sh, "strategy"), *ts = field(sh, "timeSlicingConfig"),
           *mps = field(sh, "mpsConfig");
    if (st && !json_is_string(st))
        return wrong_type(st, "sharing.strategy", "GpuSharingStrategy", err);
    const char *name = st ? json_string_value(st) : "";
    if (dra_sharing_from_name(name, &c->sharing) < 0)
        return error_set(err, -EINVAL, "unknown GPU sharing strategy: %s", name);

    if (c->sharing == DRA_SHARING_TIME_SLICING) {
        if (mps)
            return error_set(err, -EINVAL, "cannot use MpsConfig with the TimeSlicing strategy");
        c->interval = DRA_TS_DEFAULT;
        return ts ? decode_time_slicing(ts, c, err) : 0;
    }
    if (ts)
        return error_set(err, -EINVAL, "cannot use TimeSlicingConfig with the 'MPS' strategy");
    /* Normalize: no mpsConfig is an empty one */
    return mps ? decode_mps(mps, &c->mps, err) : 0;
}

int dra_config_decode(json_t *p, struct dra_config *out, struct error *err)
{
    static const char *const keys[] = { "apiVersion", "kind", "sharing" };
    if (!json_is_object(p))
        return error_set(err, -EINVAL, "error decoding config parameters: not a JSON object");
    json_t *av = json_object_get(p, "apiVersion"), *kv = json_object_get(p, "kind");
    const char *api = json_is_string(av) ? json_string_value(av) : "";
    const char *kind = json_is_string(kv) ? json_string_value(kv) : "";
    if (!*kind)
        return error_set(err, -EINVAL, "error decoding config parameters: Object 'Kind' is missing");

    struct dra_config c;
    if (streq(kind, "GpuConfig"))
        c = dra_config_default(DRA_CONFIG_GPU);
    else if (streq(kind, "MigDeviceConfig"))
        c = dra_config_default(DRA_CONFIG_MIG);
    else if (streq(kind, "VfioDeviceConfig") && streq(api, DRA_CONFIG_API_VERSION))
        return error_set(err, -ENOTSUP, "VfioDeviceConfig is not supported by this plugin "
                                        "(no VFIO pass-through devices)");
    else
        c = (struct dra_config){ .kind = (enum dra_config_kind)-1 };
    if ((int)c.kind < 0 || !streq(api, DRA_CONFIG_API_VERSION))
        return error_set(err, -EINVAL,
                         "error decoding config parameters: no kind \"%s\" is registered for "
                         "version \"%s\"", kind, api);

    int r = only_keys(p, "", keys, ELEMENTSOF(keys), err);
    json_t *sh = field(p, "sharing");
    if (r >= 0 && sh)
        r = decode_sharing(sh, &c, err);
    if (r < 0)
        return error_prefix(err, "invalid %s", kind);
    *out = c;
    return 0;
}
