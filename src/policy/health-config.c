/* Loading the health config: defaults, the config file's `health:` section, the
 * GDP_HEALTH_* variables and the reference plugin's DP_DISABLE_HEALTHCHECKS /
 * DP_ENABLE_HEALTHCHECKS, into one validated struct health_config (policy/health.h).
 * Every error names the file and line or the variable. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <strings.h>

#include "core/log.h"
#include "policy/health-internal.h"
#include "policy/health.h"

static void add_rule(struct health_config *hc, size_t *alloc, uint64_t xid, enum health_class cls)
{
    hc->rules = grow_array(hc->rules, alloc, hc->n_rules + 1, sizeof(*hc->rules));
    hc->rules[hc->n_rules++] = (struct health_xid_rule){ .xid = xid, .cls = cls };
}

/* ---- DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Unsigned decimal, whole string, no sign, no overflow (strconv.ParseUint base 10). */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

void health_xid_set_parse(struct health_xid_set *s, const char *value, unsigned *malformed)
{
    size_t alloc = s->n;
    if (!value)
        return;
    _cleanup_free_ char *copy = xstrdup(value);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *item = trim(tok);
        uint64_t xid;
        if (!*item)
            continue;
        if (strcasecmp(item, "all") == 0 || strcasecmp(item, "xids") == 0) {
            s->all = true;
            continue;
        }
        if (parse_u64(item, &xid) < 0) {
            if (malformed)
                (*malformed)++;
            continue;
        }
        s->xids = grow_array(s->xids, &alloc, s->n + 1, sizeof(*s->xids));
        s->xids[s->n++] = xid;
    }
}

void health_xid_set_clear(struct health_xid_set *s)
{
    free(s->xids);
    *s = (struct health_xid_set){ 0 };
}

bool health_xid_set_has(const struct health_xid_set *s, uint64_t xid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->xids[i] == xid)
            return true;
    return false;
}

/* ---- durations and numbers, from the file (JSON) or the environment (strings) */

/* "250ms", "30s", "5m", "1h", or a bare number of seconds. */
static int parse_duration(const char *s, uint64_t *out_ms)
{
    char *end = NULL;
    if (!*s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -ERANGE;
    uint64_t mul;
    if (!*end || streq(end, "s"))
        mul = 1000;
    else if (streq(end, "ms"))
        mul = 1;
    else if (streq(end, "m"))
        mul = 60 * 1000;
    else if (streq(end, "h"))
        mul = 60 * 60 * 1000;
    else
        return -EINVAL;
    if (v > UINT64_MAX / mul)
        return -ERANGE;
    *out_ms = v * mul;
    return 0;
}

/* Where a message points: "config.yaml:12: health.quietPeriod" or "GDP_HEALTH_QUIET_PERIOD". */
struct origin {
    const char *file;
    int line;
};

_printf_(4, 5) static int bad(struct error *err, const struct origin *o, const char *key,
                              const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (o)
        return error_set(err, -EINVAL, "%s:%d: %s: %s", o->file ? o->file : "config", o->line,
                         key, what);
    return error_set(err, -EINVAL, "%s: %s", key, what);
}

static int json_duration(json_t *v, uint64_t *out, const struct origin *o, const char *key,
                         struct error *err)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (uint64_t)i > UINT64_MAX / 1000)
            return bad(err, o, key, "duration out of range: %" JSON_INTEGER_FORMAT, i);
        *out = (uint64_t)i * 1000;
        return 0;
    }
    if (json_is_string(v)) {
        if (parse_duration(json_string_value(v), out) < 0)
            return bad(err, o, key, "invalid duration \"%s\" (use e.g. 500ms, 30s, 5m, 1h)",
                       json_string_value(v));
        return 0;
    }
    return bad(err, o, key, "expected a duration (e.g. 30s), got a %s",
               json_is_array(v) ? "list" : json_is_object(v) ? "map" : "non-string value");
}

static int json_uint(json_t *v, uint64_t *out, const struct origin *o, const char *key,
                     struct error *err)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && parse_u64(json_string_value(v), out) == 0)
        return 0;
    if (json_is_string(v))
        return bad(err, o, key, "not a non-negative integer: \"%s\"", json_string_value(v));
    return bad(err, o, key, "expected a non-negative integer");
}

/* The knobs that both sources can set; env entries override file entries. */
struct knobs {
    uint64_t quiet_ms, max_quiet_ms, flap_window_ms, wait_timeout_ms, threshold, unattr_ms;
    bool has_quiet, has_max_quiet, has_flap, has_wait_timeout, has_threshold, has_unattr;
    enum health_class default_class;
    bool has_default;
    /* per-class Xid lists, in the order given */
    struct health_xid_rule *rules;
    size_t n_rules, alloc_rules;
};

static void knobs_add_rule(struct knobs *k, uint64_t xid, enum health_class cls)
{
    k->rules = grow_array(k->rules, &k->alloc_rules, k->n_rules + 1, sizeof(*k->rules));
    k->rules[k->n_rules++] = (struct health_xid_rule){ .xid = xid, .cls = cls };
}

static int check_not_listed_twice(const struct knobs *k, uint64_t xid, enum health_class cls,
                                  const struct origin *o, const char *key, struct error *err)
{
    for (size_t i = 0; i < k->n_rules; i++)
        if (k->rules[i].xid == xid && k->rules[i].cls != cls)
            return bad(err, o, key, "Xid %" PRIu64 " is also listed under \"%s\"", xid,
                       health_class_name(k->rules[i].cls));
    return 0;
}

static int parse_file_xids(json_t *xids, struct knobs *k, const struct origin *o,
                           struct error *err)
{
    const char *name;
    json_t *v;
    char key[64];

    if (!json_is_object(xids))
        return bad(err, o, "health.xids", "expected a map with ignore/recover/lost/never/default");
    json_object_foreach(xids, name, v) {
        enum health_class cls;
        snprintf(key, sizeof(key), "health.xids.%s", name);
        if (streq(name, "default")) {
            if (!json_is_string(v) || health_class_from_name(json_string_value(v), &cls) < 0)
                return bad(err, o, key, "expected one of ignore, recover, lost, never");
            k->default_class = cls;
            k->has_default = true;
            continue;
        }
        if (health_class_from_name(name, &cls) < 0)
            return bad(err, o, key,
                       "unknown key (known: ignore, recover, lost, never, default)");
        if (!json_is_array(v))
            return bad(err, o, key, "expected a list of Xid numbers");
        size_t i;
        json_t *item;
        json_array_foreach(v, i, item) {
            uint64_t xid;
            if (json_is_integer(item) && json_integer_value(item) > 0)
                xid = (uint64_t)json_integer_value(item);
            else if (json_is_string(item) && parse_u64(json_string_value(item), &xid) == 0 &&
                     xid > 0)
                ;
            else if (json_is_string(item))
                return bad(err, o, key, "item %zu: not an Xid number: \"%s\"", i + 1,
                           json_string_value(item));
            else
                return bad(err, o, key, "item %zu: not an Xid number", i + 1);
            if (check_not_listed_twice(k, xid, cls, o, key, err) < 0)
                return err ? err->code : -EINVAL;
            knobs_add_rule(k, xid, cls);
        }
    }
    return 0;
}

static int parse_file(json_t *root, struct knobs *k, const struct origin *o, struct error *err)
{
    const char *name;
    json_t *v;
    int r;

    if (!json_is_object(root))
        return bad(err, o, "health", "expected a map");
    json_object_foreach(root, name, v) {
        char key[64];
        snprintf(key, sizeof(key), "health.%s", name);
        if (streq(name, "quietPeriod")) {
            r = json_duration(v, &k->quiet_ms, o, key, err);
            k->has_quiet = true;
        } else if (streq(name, "maxQuietPeriod")) {
            r = json_duration(v, &k->max_quiet_ms, o, key, err);
            k->has_max_quiet = true;
        } else if (streq(name, "flapWindow")) {
            r = json_duration(v, &k->flap_window_ms, o, key, err);
            k->has_flap = true;
        } else if (streq(name, "waitTimeout")) {
            r = json_duration(v, &k->wait_timeout_ms, o, key, err);
            k->has_wait_timeout = true;
        } else if (streq(name, "unattributedProbeDelay")) {
            r = json_duration(v, &k->unattr_ms, o, key, err);
            k->has_unattr = true;
        } else if (streq(name, "waitErrorThreshold")) {
            r = json_uint(v, &k->threshold, o, key, err);
            k->has_threshold = true;
        } else if (streq(name, "xids")) {
            r = parse_file_xids(v, k, o, err);
        } else {
            r = bad(err, o, key,
                    "unknown key (known: quietPeriod, maxQuietPeriod, flapWindow, "
                    "unattributedProbeDelay, waitTimeout, waitErrorThreshold, xids)");
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static const char *env_get(char **envp, const char *name)
{
    size_t n = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static int env_duration(char **envp, const char *name, uint64_t *out, bool *has,
                        struct error *err)
{
    const char *v = env_get(envp, name);
    if (!v)
        return 0;
    if (parse_duration(v, out) < 0)
        return bad(err, NULL, name, "invalid duration \"%s\" (use e.g. 500ms, 30s, 5m, 1h)", v);
    *has = true;
    return 0;
}

static int parse_env(char **envp, struct knobs *k, struct error *err)
{
    static const struct {
        const char *name;
        enum health_class cls;
    } lists[] = {
        { "GDP_HEALTH_XIDS_IGNORE", HEALTH_IGNORE },
        { "GDP_HEALTH_XIDS_RECOVER", HEALTH_RECOVER },
        { "GDP_HEALTH_XIDS_LOST", HEALTH_LOST },
        { "GDP_HEALTH_XIDS_NEVER", HEALTH_NEVER },
    };
    const char *v;
    int r;

    if ((r = env_duration(envp, "GDP_HEALTH_QUIET_PERIOD", &k->quiet_ms, &k->has_quiet, err)) < 0 ||
        (r = env_duration(envp, "GDP_HEALTH_MAX_QUIET_PERIOD", &k->max_quiet_ms,
                          &k->has_max_quiet, err)) < 0 ||
        (r = env_duration(envp, "GDP_HEALTH_FLAP_WINDOW", &k->flap_window_ms, &k->has_flap,
                          err)) < 0 ||
        (r = env_duration(envp, "GDP_HEALTH_WAIT_TIMEOUT", &k->wait_timeout_ms,
                          &k->has_wait_timeout, err)) < 0 ||
        (r = env_duration(envp, "GDP_HEALTH_UNATTRIBUTED_PROBE_DELAY", &k->unattr_ms,
                          &k->has_unattr, err)) < 0)
        return r;
    if ((v = env_get(envp, "GDP_HEALTH_WAIT_ERROR_THRESHOLD"))) {
        if (parse_u64(v, &k->threshold) < 0)
            return bad(err, NULL, "GDP_HEALTH_WAIT_ERROR_THRESHOLD",
                       "not a non-negative integer: \"%s\"", v);
        k->has_threshold = true;
    }
    if ((v = env_get(envp, "GDP_HEALTH_XIDS_DEFAULT"))) {
        if (health_class_from_name(v, &k->default_class) < 0)
            return bad(err, NULL, "GDP_HEALTH_XIDS_DEFAULT",
                       "\"%s\" is not one of ignore, recover, lost, never", v);
        k->has_default = true;
    }
    /* env lists are applied after the file's, so they win; within the environment a
     * number in two lists is a mistake worth stopping for */
    size_t env_start = k->n_rules;
    for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
        if (!(v = env_get(envp, lists[l].name)))
            continue;
        _cleanup_free_ char *copy = xstrdup(v);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *item = trim(tok);
            uint64_t xid;
            if (!*item)
                continue;
            if (parse_u64(item, &xid) < 0 || xid == 0)
                return bad(err, NULL, lists[l].name, "not an Xid number: \"%s\"", item);
            for (size_t i = env_start; i < k->n_rules; i++)
                if (k->rules[i].xid == xid && k->rules[i].cls != lists[l].cls)
                    return bad(err, NULL, lists[l].name,
                               "Xid %" PRIu64 " is also listed as \"%s\"", xid,
                               health_class_name(k->rules[i].cls));
            knobs_add_rule(k, xid, lists[l].cls);
        }
    }
    return 0;
}

/* A semantic error names where the offending value came from. */
static int bad_value(struct error *err, const struct origin *o, bool from_env, const char *env,
                     const char *key, const char *what)
{
    if (from_env)
        return bad(err, NULL, env, "%s", what);
    return bad(err, o, key, "%s", what);
}

static int validate(const struct health_config *hc, const struct knobs *env_k,
                    const struct origin *o, struct error *err)
{
    char what[160];

    if (hc->quiet_ms == 0)
        return bad_value(err, o, env_k->has_quiet, "GDP_HEALTH_QUIET_PERIOD",
                         "health.quietPeriod", "must be greater than zero");
    if (hc->max_quiet_ms < hc->quiet_ms) {
        snprintf(what, sizeof(what),
                 "%" PRIu64 "ms is shorter than quietPeriod (%" PRIu64 "ms)", hc->max_quiet_ms,
                 hc->quiet_ms);
        return bad_value(err, o, env_k->has_max_quiet, "GDP_HEALTH_MAX_QUIET_PERIOD",
                         "health.maxQuietPeriod", what);
    }
    if (hc->wait_timeout_ms < 10 || hc->wait_timeout_ms > 24ULL * 3600 * 1000) {
        snprintf(what, sizeof(what), "must be between 10ms and 24h, got %" PRIu64 "ms",
                 hc->wait_timeout_ms);
        return bad_value(err, o, env_k->has_wait_timeout, "GDP_HEALTH_WAIT_TIMEOUT",
                         "health.waitTimeout", what);
    }
    if (hc->unattributed_probe_ms == 0)
        return bad_value(err, o, env_k->has_unattr, "GDP_HEALTH_UNATTRIBUTED_PROBE_DELAY",
                         "health.unattributedProbeDelay", "must be greater than zero");
    if (hc->wait_error_threshold == 0)
        return bad_value(err, o, env_k->has_threshold, "GDP_HEALTH_WAIT_ERROR_THRESHOLD",
                         "health.waitErrorThreshold", "must be at least 1");
    return 0;
}

static void knobs_clear(struct knobs *k)
{
    free(k->rules);
    k->rules = NULL;
}

int health_config_load(struct health_config **out, void *health_json, int health_line,
                       const char *file, char **envp, struct error *err)
{
    struct knobs file_k = { 0 }, env_k = { 0 };
    struct origin o = { .file = file, .line = health_line };
    struct health_xid_set dis = { 0 }, en = { 0 };
    unsigned malformed = 0;
    int r;

    struct health_config *hc = xcalloc(1, sizeof(*hc));
    *hc = (struct health_config){
        .default_class = HEALTH_RECOVER,
        .quiet_ms = HEALTH_DEFAULT_QUIET_MS,
        .max_quiet_ms = HEALTH_DEFAULT_MAX_QUIET_MS,
        .flap_window_ms = HEALTH_DEFAULT_FLAP_WINDOW_MS,
        .wait_timeout_ms = HEALTH_DEFAULT_WAIT_TIMEOUT_MS,
        .unattributed_probe_ms = HEALTH_DEFAULT_UNATTRIBUTED_PROBE_MS,
        .wait_error_threshold = HEALTH_DEFAULT_WAIT_ERROR_THRESHOLD,
        .wait_backoff_ms = 100,
        .wait_backoff_max_ms = 5000,
    };

    if (health_json && (r = parse_file(health_json, &file_k, &o, err)) < 0)
        goto fail;
    if ((r = parse_env(envp, &env_k, err)) < 0)
        goto fail;

    size_t alloc = 0;
    const struct knobs *layers[] = { &file_k, &env_k };
    for (size_t i = 0; i < ELEMENTSOF(layers); i++) {
        const struct knobs *k = layers[i];
        if (k->has_quiet)
            hc->quiet_ms = k->quiet_ms;
        if (k->has_max_quiet)
            hc->max_quiet_ms = k->max_quiet_ms;
        if (k->has_flap)
            hc->flap_window_ms = k->flap_window_ms;
        if (k->has_wait_timeout)
            hc->wait_timeout_ms = k->wait_timeout_ms;
        if (k->has_unattr)
            hc->unattributed_probe_ms = k->unattr_ms;
        if (k->has_threshold)
            hc->wait_error_threshold = k->threshold > UINT32_MAX ? UINT32_MAX
                                                                 : (unsigned)k->threshold;
        if (k->has_default)
            hc->default_class = k->default_class;
        for (size_t j = 0; j < k->n_rules; j++)
            add_rule(hc, &alloc, k->rules[j].xid, k->rules[j].cls);
    }
    /* only maxQuietPeriod missing but quietPeriod above the default cap: follow it */
    if (!file_k.has_max_quiet && !env_k.has_max_quiet && hc->max_quiet_ms < hc->quiet_ms)
        hc->max_quiet_ms = hc->quiet_ms;
    if ((r = validate(hc, &env_k, &o, err)) < 0)
        goto fail;

    /* The reference's two variables come last and only decide ignore vs act. */
    health_xid_set_parse(&dis, env_get(envp, "DP_DISABLE_HEALTHCHECKS"), &malformed);
    health_xid_set_parse(&en, env_get(envp, "DP_ENABLE_HEALTHCHECKS"), &malformed);
    if (malformed > 0)
        log_info("Ignoring %u malformed Xid value(s) in DP_DISABLE_HEALTHCHECKS / "
                 "DP_ENABLE_HEALTHCHECKS",
                 malformed);
    /* the disable-all marker alone decides: numeric enables do not punch holes in it */
    if (dis.all && !en.all)
        hc->disabled = true;
    for (size_t i = 0; i < dis.n; i++)
        add_rule(hc, &alloc, dis.xids[i], HEALTH_IGNORE);
    /* An Xid forced on acts with its own class, or RECOVER if that class is IGNORE. */
    for (size_t i = 0; i < en.n; i++) {
        if (health_classify(hc, en.xids[i]) != HEALTH_IGNORE)
            continue;
        enum health_class c = health_builtin_class(hc, en.xids[i]);
        add_rule(hc, &alloc, en.xids[i], c == HEALTH_IGNORE ? HEALTH_RECOVER : c);
    }
    if (en.all) {
        /* every Xid is acted on: every IGNORE rule and an IGNORE default turn into acting */
        size_t n = hc->n_rules;
        for (size_t i = 0; i < n; i++)
            if (hc->rules[i].cls == HEALTH_IGNORE) {
                enum health_class c = health_builtin_class(hc, hc->rules[i].xid);
                hc->rules[i].cls = c == HEALTH_IGNORE ? HEALTH_RECOVER : c;
            }
        uint64_t xid;
        for (size_t i = 0; health_builtin_xid(i, &xid); i++)
            if (health_classify(hc, xid) == HEALTH_IGNORE)
                add_rule(hc, &alloc, xid, HEALTH_RECOVER);
        if (hc->default_class == HEALTH_IGNORE)
            hc->default_class = HEALTH_RECOVER;
    }

    knobs_clear(&file_k);
    knobs_clear(&env_k);
    health_xid_set_clear(&dis);
    health_xid_set_clear(&en);
    *out = hc;
    return 0;

fail:
    knobs_clear(&file_k);
    knobs_clear(&env_k);
    health_config_free(hc);
    return r;
}

void health_config_free(struct health_config *hc)
{
    if (!hc)
        return;
    free(hc->rules);
    free(hc);
}

