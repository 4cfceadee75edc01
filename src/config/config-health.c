/* The health settings of struct config (config-health.h): the setters of the
 * health rows of the option table (flags, GDP_HEALTH_* and the reference plugin's
 * DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS), the config file's `health:`
 * section, and the checks that run at every load, so `config print`, `serve` and a
 * reload accept and refuse the same things. Precedence per setting: flag > env >
 * file > default; Xid lists are merged per Xid in that order. */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <strings.h>

#include "config/config-internal.h"
#include "core/log.h"

const char *config_health_class_name(enum health_class cls)
{
    switch (cls) {
    case HEALTH_IGNORE: return "ignore";
    case HEALTH_RECOVER: return "recover";
    case HEALTH_LOST: return "lost";
    case HEALTH_NEVER: return "never";
    }
    return "?";
}

static int class_from_name(const char *s, enum health_class *out)
{
    for (enum health_class c = HEALTH_IGNORE; c <= HEALTH_NEVER; c++)
        if (strcasecmp(s, config_health_class_name(c)) == 0) {
            *out = c;
            return 0;
        }
    return -EINVAL;
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

void config_xid_set_parse(struct health_xid_set *s, const char *value, unsigned *malformed)
{
    size_t alloc = s->n;
    if (!value)
        return;
    _cleanup_(config_strv_freep) char **items = config_split_list(value, NULL);
    for (char **it = items; *it; it++) {
        const char *item = *it;
        uint64_t xid;
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

void config_xid_set_clear(struct health_xid_set *s)
{
    free(s->xids);
    *s = (struct health_xid_set){ 0 };
}

bool config_xid_set_has(const struct health_xid_set *s, uint64_t xid)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->xids[i] == xid)
            return true;
    return false;
}

static void add_rule(struct health_config *hc, uint64_t xid, enum health_class cls,
                     enum health_rule_kind kind)
{
    hc->rules = xreallocarray(hc->rules, hc->n_rules + 1, sizeof(*hc->rules));
    hc->rules[hc->n_rules++] = (struct health_xid_rule){ .xid = xid, .cls = cls, .kind = kind };
}

/* ---- option setters (flags, environment, defaults; the durations are the table's
 * KIND_DURATION) */

/* One class's Xid list. Flags and env vars are applied before the file, so every SET
 * rule present now came from one of them: a number in two classes there is a mistake
 * worth stopping for. */
static int set_xid_list(struct health_config *hc, enum health_class cls, const char *value,
                        struct error *err)
{
    _cleanup_(config_strv_freep) char **items = config_split_list(value, NULL);
    for (char **it = items; *it; it++) {
        const char *item = *it;
        uint64_t xid;
        if (parse_u64(item, &xid) < 0 || xid == 0)
            return error_set(err, -EINVAL, "not an Xid number: \"%s\"", item);
        for (size_t i = 0; i < hc->n_rules; i++)
            if (hc->rules[i].kind == HEALTH_RULE_SET && hc->rules[i].xid == xid &&
                hc->rules[i].cls != cls)
                return error_set(err, -EINVAL, "Xid %" PRIu64 " is also listed as \"%s\"", xid,
                                 config_health_class_name(hc->rules[i].cls));
        add_rule(hc, xid, cls, HEALTH_RULE_SET);
    }
    return 0;
}

/* The reference's switches: malformed items are skipped, as there. */
static void set_dp(struct health_config *hc, const char *value, bool disable, const char *name)
{
    struct health_xid_set s = { 0 };
    unsigned malformed = 0;
    config_xid_set_parse(&s, value, &malformed);
    if (malformed > 0)
        log_info("Ignoring %u malformed Xid value(s) in %s", malformed, name);
    if (s.all) {
        if (disable)
            hc->disabled = true;
        else
            hc->enable_all = true;
    }
    for (size_t i = 0; i < s.n; i++)
        add_rule(hc, s.xids[i], HEALTH_IGNORE,
                 disable ? HEALTH_RULE_DP_DISABLE : HEALTH_RULE_DP_ENABLE);
    config_xid_set_clear(&s);
}

int config_health_option_set(struct config *c, enum config_opt opt, const char *value,
                             struct error *err)
{
    struct health_config *hc = &c->health;
    uint64_t n;

    switch (opt) {
    case OPT_HEALTH_WAIT_ERROR_THRESHOLD:
        if (parse_u64(value, &n) < 0)
            return error_set(err, -EINVAL, "not a non-negative integer: \"%s\"", value);
        hc->wait_error_threshold = n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
        return 0;
    case OPT_HEALTH_XIDS_DEFAULT:
        if (class_from_name(value, &hc->default_class) < 0)
            return error_set(err, -EINVAL, "\"%s\" is not one of ignore, recover, lost, never",
                             value);
        return 0;
    case OPT_HEALTH_XIDS_IGNORE: return set_xid_list(hc, HEALTH_IGNORE, value, err);
    case OPT_HEALTH_XIDS_RECOVER: return set_xid_list(hc, HEALTH_RECOVER, value, err);
    case OPT_HEALTH_XIDS_LOST: return set_xid_list(hc, HEALTH_LOST, value, err);
    case OPT_HEALTH_XIDS_NEVER: return set_xid_list(hc, HEALTH_NEVER, value, err);
    case OPT_DP_DISABLE_HEALTHCHECKS:
        set_dp(hc, value, true, "DP_DISABLE_HEALTHCHECKS");
        return 0;
    case OPT_DP_ENABLE_HEALTHCHECKS:
        set_dp(hc, value, false, "DP_ENABLE_HEALTHCHECKS");
        return 0;
    default:
        return error_set(err, -EINVAL, "not a health option");
    }
}

/* ---- the config file's `health:` section (a JSON tree from config-file.c) */

struct hfile {
    const char *file;
    int line;
    struct error *err;
};

_printf_(3, 4) static int bad(const struct hfile *h, const char *key, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return error_set(h->err, -EINVAL, "%s:%d: %s: %s", h->file ? h->file : "config", h->line,
                     key, what);
}

static int json_duration(const struct hfile *h, json_t *v, uint64_t *out, const char *key)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (uint64_t)i > UINT64_MAX / 1000)
            return bad(h, key, "duration out of range: %" JSON_INTEGER_FORMAT, i);
        *out = (uint64_t)i * 1000;
        return 0;
    }
    if (json_is_string(v)) {
        if (config_parse_duration_ms(json_string_value(v), out) < 0)
            return bad(h, key, "invalid duration \"%s\" (use e.g. 500ms, 30s, 5m, 1h)",
                       json_string_value(v));
        return 0;
    }
    return bad(h, key, "expected a duration (e.g. 30s), got a %s",
               json_is_array(v) ? "list" : json_is_object(v) ? "map" : "non-string value");
}

static int json_uint(const struct hfile *h, json_t *v, uint64_t *out, const char *key)
{
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && parse_u64(json_string_value(v), out) == 0)
        return 0;
    if (json_is_string(v))
        return bad(h, key, "not a non-negative integer: \"%s\"", json_string_value(v));
    return bad(h, key, "expected a non-negative integer");
}

/* The file's Xid lists; a number in two of its classes is an error. */
static int file_xids(const struct hfile *h, json_t *xids, struct health_config *fk,
                     bool *has_default)
{
    const char *name;
    json_t *v;
    char key[64];

    if (!json_is_object(xids))
        return bad(h, "health.xids", "expected a map with ignore/recover/lost/never/default");
    json_object_foreach(xids, name, v) {
        enum health_class cls;
        snprintf(key, sizeof(key), "health.xids.%s", name);
        if (streq(name, "default")) {
            if (!json_is_string(v) || class_from_name(json_string_value(v), &cls) < 0)
                return bad(h, key, "expected one of ignore, recover, lost, never");
            fk->default_class = cls;
            *has_default = true;
            continue;
        }
        if (class_from_name(name, &cls) < 0)
            return bad(h, key, "unknown key (known: ignore, recover, lost, never, default)");
        if (!json_is_array(v))
            return bad(h, key, "expected a list of Xid numbers");
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
                return bad(h, key, "item %zu: not an Xid number: \"%s\"", i + 1,
                           json_string_value(item));
            else
                return bad(h, key, "item %zu: not an Xid number", i + 1);
            for (size_t j = 0; j < fk->n_rules; j++)
                if (fk->rules[j].xid == xid && fk->rules[j].cls != cls)
                    return bad(h, key, "Xid %" PRIu64 " is also listed under \"%s\"", xid,
                               config_health_class_name(fk->rules[j].cls));
            add_rule(fk, xid, cls, HEALTH_RULE_SET);
        }
    }
    return 0;
}

static const struct {
    const char *key;
    enum config_opt opt;
} file_durations[] = {
    { "quietPeriod", OPT_HEALTH_QUIET_PERIOD },
    { "maxQuietPeriod", OPT_HEALTH_MAX_QUIET_PERIOD },
    { "flapWindow", OPT_HEALTH_FLAP_WINDOW },
    { "waitTimeout", OPT_HEALTH_WAIT_TIMEOUT },
    { "unattributedProbeDelay", OPT_HEALTH_UNATTRIBUTED_PROBE_DELAY },
};

static uint64_t *duration_field(struct health_config *hc, enum config_opt opt)
{
    switch (opt) {
    case OPT_HEALTH_QUIET_PERIOD: return &hc->quiet_ms;
    case OPT_HEALTH_MAX_QUIET_PERIOD: return &hc->max_quiet_ms;
    case OPT_HEALTH_FLAP_WINDOW: return &hc->flap_window_ms;
    case OPT_HEALTH_WAIT_TIMEOUT: return &hc->wait_timeout_ms;
    default: return &hc->unattributed_probe_ms;
    }
}

static int file_section(const struct hfile *h, json_t *root, struct health_config *fk,
                        bool *has, bool *has_default)
{
    const char *name;
    json_t *v;

    if (!json_is_object(root))
        return bad(h, "health", "expected a map");
    json_object_foreach(root, name, v) {
        char key[64];
        int r = 0;
        bool known = false;
        snprintf(key, sizeof(key), "health.%s", name);
        for (size_t i = 0; i < ELEMENTSOF(file_durations) && !known; i++) {
            if (!streq(name, file_durations[i].key))
                continue;
            known = true;
            r = json_duration(h, v, duration_field(fk, file_durations[i].opt), key);
            has[file_durations[i].opt] = true;
        }
        if (known)
            ;
        else if (streq(name, "waitErrorThreshold")) {
            uint64_t n = 0;
            r = json_uint(h, v, &n, key);
            fk->wait_error_threshold = n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
            has[OPT_HEALTH_WAIT_ERROR_THRESHOLD] = true;
        } else if (streq(name, "xids"))
            r = file_xids(h, v, fk, has_default);
        else
            r = bad(h, key,
                    "unknown key (known: quietPeriod, maxQuietPeriod, flapWindow, "
                    "unattributedProbeDelay, waitTimeout, waitErrorThreshold, xids)");
        if (r < 0)
            return r;
    }
    return 0;
}

int config_health_file(struct config *c, void *health_json, const char *file, int line,
                       const bool *set, struct config_marks *marks, struct error *err)
{
    const struct hfile h = { .file = file, .line = line, .err = err };
    struct health_config fk = { 0 };
    bool has[_OPT_MAX] = { 0 }, has_default = false;
    struct health_config *hc = &c->health;

    int r = file_section(&h, health_json, &fk, has, &has_default);
    if (r < 0) {
        free(fk.rules);
        return r;
    }
    marks->health_file = file;
    marks->health_line = line;
    /* a value a flag or env var set was type-checked above and is not applied */
    for (size_t i = 0; i < ELEMENTSOF(file_durations); i++) {
        enum config_opt o = file_durations[i].opt;
        if (has[o] && !set[o])
            *duration_field(hc, o) = *duration_field(&fk, o);
        marks->health_in_file[o] = has[o];
    }
    if (has[OPT_HEALTH_WAIT_ERROR_THRESHOLD] && !set[OPT_HEALTH_WAIT_ERROR_THRESHOLD])
        hc->wait_error_threshold = fk.wait_error_threshold;
    marks->health_in_file[OPT_HEALTH_WAIT_ERROR_THRESHOLD] = has[OPT_HEALTH_WAIT_ERROR_THRESHOLD];
    if (has_default && !set[OPT_HEALTH_XIDS_DEFAULT])
        hc->default_class = fk.default_class;
    /* the file's rules go first: flags' and env's, read earlier, win per Xid */
    if (fk.n_rules) {
        hc->rules = xreallocarray(hc->rules, hc->n_rules + fk.n_rules, sizeof(*hc->rules));
        memmove(hc->rules + fk.n_rules, hc->rules, hc->n_rules * sizeof(*hc->rules));
        memcpy(hc->rules, fk.rules, fk.n_rules * sizeof(*hc->rules));
        hc->n_rules += fk.n_rules;
    }
    free(fk.rules);
    return 0;
}

/* ---- checks, once every source is in */

/* A semantic error names where the offending value came from. */
static int bad_value(const struct config_marks *m, enum config_opt opt, const char *key,
                     const char *what, struct error *err)
{
    if (m->origin[opt])
        return error_set(err, -EINVAL, "%s: %s", m->origin[opt], what);
    if (m->health_in_file[opt])
        return error_set(err, -EINVAL, "%s:%d: %s: %s", m->health_file ? m->health_file : "config",
                         m->health_line, key, what);
    return error_set(err, -EINVAL, "%s: %s", key, what);
}

int config_health_check(struct config *c, const struct config_marks *m, struct error *err)
{
    struct health_config *hc = &c->health;
    char what[160];

    /* only quietPeriod given, above the default cap: the cap follows it */
    if (!m->origin[OPT_HEALTH_MAX_QUIET_PERIOD] && !m->health_in_file[OPT_HEALTH_MAX_QUIET_PERIOD] &&
        hc->max_quiet_ms < hc->quiet_ms)
        hc->max_quiet_ms = hc->quiet_ms;
    /* the disable-all marker alone decides, unless everything is enabled */
    if (hc->enable_all)
        hc->disabled = false;

    if (hc->quiet_ms == 0)
        return bad_value(m, OPT_HEALTH_QUIET_PERIOD, "health.quietPeriod",
                         "must be greater than zero", err);
    if (hc->max_quiet_ms < hc->quiet_ms) {
        snprintf(what, sizeof(what), "%" PRIu64 "ms is shorter than quietPeriod (%" PRIu64 "ms)",
                 hc->max_quiet_ms, hc->quiet_ms);
        return bad_value(m, OPT_HEALTH_MAX_QUIET_PERIOD, "health.maxQuietPeriod", what, err);
    }
    if (hc->wait_timeout_ms < 10 || hc->wait_timeout_ms > 24ULL * 3600 * 1000) {
        snprintf(what, sizeof(what), "must be between 10ms and 24h, got %" PRIu64 "ms",
                 hc->wait_timeout_ms);
        return bad_value(m, OPT_HEALTH_WAIT_TIMEOUT, "health.waitTimeout", what, err);
    }
    if (hc->unattributed_probe_ms == 0)
        return bad_value(m, OPT_HEALTH_UNATTRIBUTED_PROBE_DELAY, "health.unattributedProbeDelay",
                         "must be greater than zero", err);
    if (hc->wait_error_threshold == 0)
        return bad_value(m, OPT_HEALTH_WAIT_ERROR_THRESHOLD, "health.waitErrorThreshold",
                         "must be at least 1", err);
    return 0;
}

/* ---- `config print`: the section in the file's own keys, so the print loads back */

static json_t *duration_json(uint64_t ms)
{
    static const struct { uint64_t div; const char *unit; } u[] = {
        { 3600000, "h" }, { 60000, "m" }, { 1000, "s" },
    };
    for (size_t i = 0; i < ELEMENTSOF(u); i++)
        if (ms && ms % u[i].div == 0)
            return json_sprintf("%" PRIu64 "%s", ms / u[i].div, u[i].unit);
    return json_sprintf("%" PRIu64 "ms", ms);
}

void *config_health_json(const struct health_config *hc)
{
    json_t *xids = json_object();
    for (enum health_class cls = HEALTH_IGNORE; cls <= HEALTH_NEVER; cls++) {
        json_t *a = json_array();
        for (size_t i = 0; i < hc->n_rules; i++) {
            const struct health_xid_rule *r = &hc->rules[i];
            if (r->kind != HEALTH_RULE_SET)
                continue;
            /* the class that counts is the last rule's for that Xid */
            bool later = false;
            for (size_t j = i + 1; j < hc->n_rules && !later; j++)
                later = hc->rules[j].kind == HEALTH_RULE_SET && hc->rules[j].xid == r->xid;
            if (!later && r->cls == cls)
                json_array_append_new(a, json_integer((json_int_t)r->xid));
        }
        json_object_set_new(xids, config_health_class_name(cls), a);
    }
    json_object_set_new(xids, "default", json_string(config_health_class_name(hc->default_class)));
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:o}",
                     "quietPeriod", duration_json(hc->quiet_ms),
                     "maxQuietPeriod", duration_json(hc->max_quiet_ms),
                     "flapWindow", duration_json(hc->flap_window_ms),
                     "unattributedProbeDelay", duration_json(hc->unattributed_probe_ms),
                     "waitTimeout", duration_json(hc->wait_timeout_ms),
                     "waitErrorThreshold", (json_int_t)hc->wait_error_threshold,
                     "xids", xids);
}
