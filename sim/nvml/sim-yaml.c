/* The simulator's YAML reader (sim-yaml.h): libyaml node lookups, typed scalars with
 * range checks, PCI bus ids, and the one-line error report. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim-yaml.h"


/* Values quoted in messages may hold newlines or other control bytes: the message must
 * stay one printable line. */
void yp_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

static unsigned long line_of(const yaml_node_t *n) { return n ? (unsigned long)n->start_mark.line + 1 : 1; }

int yp_fail(struct yp_ctx *c, const yaml_node_t *n, const char *fmt, ...)
{
    if (c->failed)
        return -EINVAL;
    c->failed = true;
    int k = snprintf(c->err, c->errlen, "%s:%lu: ", c->name, line_of(n));
    if (k >= 0 && (size_t)k < c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    yp_one_line(c->err);
    return -EINVAL;
}

/* Scalar text of a node; NULL (after failing) if it is not a plain string. */
const char *yp_scalar(struct yp_ctx *c, yaml_node_t *n, const char *what)
{
    if (!n || n->type != YAML_SCALAR_NODE) {
        yp_fail(c, n, "%s: expected a scalar", what);
        return NULL;
    }
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) {
        yp_fail(c, n, "%s: embedded NUL character", what);
        return NULL;
    }
    return s;
}

yaml_node_t *yp_map_get(struct yp_ctx *c, yaml_node_t *map, const char *key, size_t keylen)
{
    if (!yp_is_map(map))
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yp_node(c, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == keylen &&
            memcmp(k->data.scalar.value, key, keylen) == 0)
            return yp_node(c, p->value);
    }
    return NULL;
}

/* Look up a dotted path ("memory.total_bytes"). An intermediate that exists but is not
 * a mapping is a type error. */
yaml_node_t *yp_path_get(struct yp_ctx *c, yaml_node_t *map, const char *path)
{
    yaml_node_t *n = map;
    const char *p = path;
    while (n) {
        size_t len = strcspn(p, ".");
        if (!yp_is_map(n)) {
            yp_fail(c, n, "%.*s: expected a mapping", (int)(p - path - 1), path);
            return NULL;
        }
        n = yp_map_get(c, n, p, len);
        if (!p[len])
            return n;
        p += len + 1;
    }
    return NULL;
}

/* device_defaults deep-merged under a device: the device's own value wins, path by
 * path. */
yaml_node_t *yp_dget(struct yp_ctx *c, yaml_node_t *dev, yaml_node_t *defaults, const char *path)
{
    yaml_node_t *n = yp_path_get(c, dev, path);
    if (!n && !c->failed && defaults)
        n = yp_path_get(c, defaults, path);
    return n;
}

int yp_str(struct yp_ctx *c, yaml_node_t *n, const char *what, char *buf, size_t size)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (strlen(s) >= size)
        return yp_fail(c, n, "%s: too long (at most %zu characters)", what, size - 1);
    snprintf(buf, size, "%s", s);
    return 0;
}

int yp_u64(struct yp_ctx *c, yaml_node_t *n, const char *what, uint64_t max, uint64_t *v)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (!*s || *s == '-' || *s == '+' || *s == ' ' || errno || *end)
        return yp_fail(c, n, "%s: expected a non-negative integer, got '%s'", what, s);
    if (x > max)
        return yp_fail(c, n, "%s: %llu is out of range (at most %llu)", what, x, (unsigned long long)max);
    *v = x;
    return 0;
}

int yp_uint(struct yp_ctx *c, yaml_node_t *n, const char *what, unsigned max, unsigned *v)
{
    uint64_t x = 0;
    int r = yp_u64(c, n, what, max, &x);
    if (r == 0)
        *v = (unsigned)x;
    return r;
}

int yp_int(struct yp_ctx *c, yaml_node_t *n, const char *what, int min, int max, int *v)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || errno || *end)
        return yp_fail(c, n, "%s: expected an integer, got '%s'", what, s);
    if (x < min || x > max)
        return yp_fail(c, n, "%s: %ld is out of range (%d..%d)", what, x, min, max);
    *v = (int)x;
    return 0;
}

int yp_bool(struct yp_ctx *c, yaml_node_t *n, const char *what, bool *v)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
        !strcasecmp(s, "enabled"))
        *v = true;
    else if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
             !strcasecmp(s, "disabled"))
        *v = false;
    else
        return yp_fail(c, n, "%s: expected true or false, got '%s'", what, s);
    return 0;
}


int sim_parse_bdf(const char *s, struct sim_bdf *bdf)
{
    unsigned long part[4];
    int n = 0;
    const char *p = s;
    char seps[4] = { 0 };
    while (n < 4) {
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F')))
            return -EINVAL;
        char *end;
        errno = 0;
        part[n] = strtoul(p, &end, 16);
        if (errno || end - p > 8)
            return -EINVAL;
        seps[n] = *end;
        n++;
        if (!*end)
            break;
        if (*end != ':' && *end != '.')
            return -EINVAL;
        p = end + 1;
    }
    if (*p && n == 4 && seps[3])
        return -EINVAL;
    struct sim_bdf b = { 0 };
    if (n == 4 && seps[0] == ':' && seps[1] == ':' && seps[2] == '.' && !seps[3])
        b = (struct sim_bdf){ part[0], part[1], part[2], part[3] };
    else if (n == 3 && seps[0] == ':' && seps[1] == ':' && !seps[2])
        b = (struct sim_bdf){ part[0], part[1], part[2], 0 };
    else if (n == 3 && seps[0] == ':' && seps[1] == '.' && !seps[2])
        b = (struct sim_bdf){ 0, part[0], part[1], part[2] };
    else
        return -EINVAL;
    if (part[0] > 0xffffffffUL || b.domain > 0xffff || b.bus > 0xff || b.device > 0x1f || b.function > 7)
        return -EINVAL;
    *bdf = b;
    return 0;
}

bool yp_bdf_eq(const struct sim_bdf *a, const struct sim_bdf *b)
{
    return a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
           a->function == b->function;
}

int yp_bdf(struct yp_ctx *c, yaml_node_t *n, const char *what, struct sim_bdf *bdf)
{
    const char *s = yp_scalar(c, n, what);
    if (!s)
        return -EINVAL;
    if (sim_parse_bdf(s, bdf) < 0)
        return yp_fail(c, n, "%s: bad PCI bus id '%s' (want DDDD:BB:DD.F)", what, s);
    return 0;
}

