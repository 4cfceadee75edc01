/* The metrics registry and its text exposition (format 0.0.4): families of series, the
 * updates the instrumented code calls, and the renderer with its escaping rules. The
 * contract is in metrics.h. */
#include "metrics/metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/macro.h"

struct metrics_series {
    struct metrics_series *next;
    const struct metrics_family *family;
    double value;      /* counter, gauge */
    double sum;        /* histogram */
    uint64_t count;    /* histogram */
    uint64_t *buckets; /* histogram: per bucket, not cumulative; [n_bounds] is +Inf */
    char **values;     /* one per label name */
};

struct metrics_family {
    struct metrics_family *next;
    struct metrics *registry;
    enum metrics_type type;
    char *name;
    char *help;
    char **labels;
    size_t n_labels;
    double *bounds;
    size_t n_bounds;
    struct metrics_series *series, *last;
    size_t n_series, max_series;
    metrics_collect_fn collect;
    void *collect_data;
};

struct metrics {
    struct metrics_family *families, *last;
    uint64_t dropped;
};

struct metrics *metrics_new(void) { return xcalloc(1, sizeof(struct metrics)); }

static void series_free(struct metrics_series *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++)
        free(s->values[i]);
    free(s->values);
    free(s->buckets);
    free(s);
}

void metrics_family_clear(struct metrics_family *f)
{
    if (!f)
        return;
    while (f->series) {
        struct metrics_series *s = f->series;
        f->series = s->next;
        series_free(s, f->n_labels);
    }
    f->last = NULL;
    f->n_series = 0;
}

void metrics_free(struct metrics *r)
{
    if (!r)
        return;
    while (r->families) {
        struct metrics_family *f = r->families;
        r->families = f->next;
        metrics_family_clear(f);
        for (size_t i = 0; i < f->n_labels; i++)
            free(f->labels[i]);
        free(f->labels);
        free(f->bounds);
        free(f->name);
        free(f->help);
        free(f);
    }
    free(r);
}

struct metrics_family *metrics_family_new(struct metrics *r, enum metrics_type type,
                                          const char *name, const char *help,
                                          const char *const *label_names, const double *bounds,
                                          size_t n_bounds)
{
    struct metrics_family *f = xcalloc(1, sizeof(*f));
    f->registry = r;
    f->type = type;
    f->name = xstrdup(name);
    f->help = xstrdup(help);
    f->max_series = METRICS_MAX_SERIES;
    while (label_names && label_names[f->n_labels])
        f->n_labels++;
    if (f->n_labels > METRICS_MAX_LABELS || n_bounds > METRICS_MAX_BUCKETS)
        abort(); /* the caller's constants are wrong */
    f->labels = xcalloc(f->n_labels ? f->n_labels : 1, sizeof(char *));
    for (size_t i = 0; i < f->n_labels; i++)
        f->labels[i] = xstrdup(label_names[i]);
    if (type == METRICS_HISTOGRAM) {
        f->n_bounds = n_bounds;
        f->bounds = xcalloc(n_bounds ? n_bounds : 1, sizeof(double));
        memcpy(f->bounds, bounds, n_bounds * sizeof(double));
    }
    if (r->last)
        r->last->next = f;
    else
        r->families = f;
    r->last = f;
    return f;
}

void metrics_family_set_collect(struct metrics_family *f, metrics_collect_fn fn, void *userdata)
{
    f->collect = fn;
    f->collect_data = userdata;
}

void metrics_family_set_limit(struct metrics_family *f, size_t max_series)
{
    f->max_series = max_series;
}

struct metrics_series *metrics_series(struct metrics_family *f, const char *const *values)
{
    if (!f)
        return NULL;
    for (struct metrics_series *s = f->series; s; s = s->next) {
        size_t i = 0;
        while (i < f->n_labels && streq(s->values[i], values[i]))
            i++;
        if (i == f->n_labels)
            return s;
    }
    if (f->n_series >= f->max_series) {
        f->registry->dropped++;
        return NULL;
    }
    struct metrics_series *s = xcalloc(1, sizeof(*s));
    s->family = f;
    s->values = xcalloc(f->n_labels ? f->n_labels : 1, sizeof(char *));
    for (size_t i = 0; i < f->n_labels; i++)
        s->values[i] = xstrdup(values[i]);
    if (f->type == METRICS_HISTOGRAM)
        s->buckets = xcalloc(f->n_bounds + 1, sizeof(uint64_t));
    if (f->last)
        f->last->next = s;
    else
        f->series = s;
    f->last = s;
    f->n_series++;
    return s;
}

struct metrics_series *metrics_series_u64(struct metrics_family *f, uint64_t value)
{
    char text[24];
    snprintf(text, sizeof(text), "%llu", (unsigned long long)value);
    return metrics_series(f, (const char *const[]){ text });
}

void metrics_inc(struct metrics_series *s)
{
    if (s)
        s->value += 1;
}

void metrics_add(struct metrics_series *s, double v)
{
    if (s)
        s->value += v;
}

void metrics_set(struct metrics_series *s, double v)
{
    if (s)
        s->value = v;
}

void metrics_observe(struct metrics_series *s, double v)
{
    if (!s || !s->buckets)
        return;
    const struct metrics_family *f = s->family;
    size_t i = 0;
    while (i < f->n_bounds && v > f->bounds[i])
        i++;
    s->buckets[i]++;
    s->count++;
    s->sum += v;
}

double metrics_value(const struct metrics_series *s)
{
    if (!s)
        return 0;
    return s->buckets ? (double)s->count : s->value;
}

uint64_t metrics_dropped(const struct metrics *r) { return r->dropped; }

/* ------------------------------------------------------------------ rendering */

struct out {
    char *buf;
    size_t len, cap;
};

static void out_grow(struct out *o, size_t add)
{
    if (o->len + add + 1 <= o->cap)
        return;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + add + 1)
        cap *= 2;
    o->buf = xrealloc(o->buf, cap);
    o->cap = cap;
}

static void out_mem(struct out *o, const char *s, size_t n)
{
    out_grow(o, n);
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void out_str(struct out *o, const char *s) { out_mem(o, s, strlen(s)); }

/* HELP text escapes backslash and newline; label values also the double quote. */
static void out_escaped(struct out *o, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            out_str(o, "\\\\");
        else if (*s == '\n')
            out_str(o, "\\n");
        else if (*s == '"' && quote)
            out_str(o, "\\\"");
        else
            out_mem(o, s, 1);
    }
}

/* Shortest text that reads back as the same double (0.001, not 0.0010000000000000000208);
 * Inf and NaN spelled as the format wants. */
static void out_double(struct out *o, double v)
{
    char b[40];
    if (isnan(v)) {
        out_str(o, "NaN");
        return;
    }
    if (isinf(v)) {
        out_str(o, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(b, sizeof(b), "%.*g", prec, v);
        if (strtod(b, NULL) == v)
            break;
    }
    out_str(o, b);
}

static void out_u64(struct out *o, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
    out_str(o, b);
}

/* name{l1="v1",...[,le="bound"]} */
static void out_sample_name(struct out *o, const struct metrics_family *f,
                            const struct metrics_series *s, const char *suffix, const double *le)
{
    out_str(o, f->name);
    out_str(o, suffix);
    if (f->n_labels == 0 && !le)
        return;
    out_str(o, "{");
    for (size_t i = 0; i < f->n_labels; i++) {
        if (i)
            out_str(o, ",");
        out_str(o, f->labels[i]);
        out_str(o, "=\"");
        out_escaped(o, s->values[i], true);
        out_str(o, "\"");
    }
    if (le) {
        out_str(o, f->n_labels ? ",le=\"" : "le=\"");
        out_double(o, *le);
        out_str(o, "\"");
    }
    out_str(o, "}");
}

static void render_histogram(struct out *o, const struct metrics_family *f,
                             const struct metrics_series *s)
{
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= f->n_bounds; i++) {
        double le = i < f->n_bounds ? f->bounds[i] : INFINITY;
        cumulative += s->buckets[i];
        out_sample_name(o, f, s, "_bucket", &le);
        out_str(o, " ");
        out_u64(o, cumulative);
        out_str(o, "\n");
    }
    out_sample_name(o, f, s, "_sum", NULL);
    out_str(o, " ");
    out_double(o, s->sum);
    out_str(o, "\n");
    out_sample_name(o, f, s, "_count", NULL);
    out_str(o, " ");
    out_u64(o, s->count);
    out_str(o, "\n");
}

static const char *type_name(enum metrics_type t)
{
    switch (t) {
    case METRICS_COUNTER: return "counter";
    case METRICS_GAUGE: return "gauge";
    case METRICS_HISTOGRAM: return "histogram";
    }
    return "untyped";
}

char *metrics_render(struct metrics *r, size_t *len)
{
    struct out o = { 0 };
    out_grow(&o, 0);
    o.buf[0] = '\0';
    for (struct metrics_family *f = r->families; f; f = f->next) {
        if (f->collect)
            f->collect(f, f->collect_data);
        out_str(&o, "# HELP ");
        out_str(&o, f->name);
        out_str(&o, " ");
        out_escaped(&o, f->help, false);
        out_str(&o, "\n# TYPE ");
        out_str(&o, f->name);
        out_str(&o, " ");
        out_str(&o, type_name(f->type));
        out_str(&o, "\n");
        for (struct metrics_series *s = f->series; s; s = s->next) {
            if (f->type == METRICS_HISTOGRAM) {
                render_histogram(&o, f, s);
                continue;
            }
            out_sample_name(&o, f, s, "", NULL);
            out_str(&o, " ");
            out_double(&o, s->value);
            out_str(&o, "\n");
        }
    }
    if (len)
        *len = o.len;
    return o.buf;
}
