/* The value parsers every source of settings shares (flags and environment, the config
 * file, the health and cluster settings): booleans and durations as Go parses them, and
 * comma-separated lists. A leaf of the config module: it calls nothing else in it, so
 * config-options.c, config-health.c and config-cluster.c all point down to it. */
#include <ctype.h>
#include <stdlib.h>

#include "config/config-internal.h"

int config_parse_bool(const char *s)
{
    static const char *const t[] = { "1", "t", "T", "TRUE", "true", "True" };
    static const char *const f[] = { "0", "f", "F", "FALSE", "false", "False" };
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        if (streq(s, t[i]))
            return 1;
        if (streq(s, f[i]))
            return 0;
    }
    return -EINVAL;
}

int config_parse_sleep_interval(const char *s, uint64_t *out_ms)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = { { "ns", 1 }, { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "\xce\xbcs", 1e3 },
                  { "ms", 1e6 }, { "s", 1e9 }, { "m", 60e9 }, { "h", 3600e9 } };
    if (streq(s, "infinite")) {
        *out_ms = CONFIG_SLEEP_INFINITE;
        return 0;
    }
    const char *p = s;
    if (*p == '+')
        p++;
    if (streq(p, "0")) {
        *out_ms = 0;
        return 0;
    }
    if (!*p)
        return -EINVAL;
    double total_ns = 0;
    while (*p) {
        /* number: digits, optional fraction; at least one digit */
        const char *start = p;
        double v = 0, scale = 1;
        bool digits = false;
        for (; *p >= '0' && *p <= '9'; p++, digits = true)
            v = v * 10 + (*p - '0');
        if (*p == '.')
            for (p++; *p >= '0' && *p <= '9'; p++, digits = true)
                v += (scale /= 10) * (*p - '0');
        if (!digits || p == start)
            return -EINVAL;
        size_t best = ELEMENTSOF(units);
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
            if (startswith(p, units[i].unit) &&
                (best == ELEMENTSOF(units) || strlen(units[i].unit) > strlen(units[best].unit)))
                best = i;
        if (best == ELEMENTSOF(units))
            return -EINVAL; /* Go: missing or unknown unit */
        p += strlen(units[best].unit);
        total_ns += v * units[best].ns;
        if (total_ns > 9.2e18) /* Go's Duration is an int64 of nanoseconds */
            return -ERANGE;
    }
    *out_ms = (uint64_t)(total_ns / 1e6);
    return 0;
}

char **config_split_list(const char *value, size_t *n_out)
{
    char **v = xcalloc(1, sizeof(char *));
    size_t n = 0;
    const char *p = value;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (len && isspace((unsigned char)*s))
            s++, len--;
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
        if (len) {
            v = xreallocarray(v, n + 2, sizeof(char *));
            v[n++] = xstrndup(s, len);
            v[n] = NULL;
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (n_out)
        *n_out = n;
    return v;
}

void config_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

/* "250ms", "30s", "5m", "1h", or a bare number of seconds. */
int config_parse_duration_ms(const char *s, uint64_t *out_ms)
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
