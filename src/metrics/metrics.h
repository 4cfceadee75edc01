/* A tiny Prometheus registry: counters, gauges and fixed-bucket histograms, grouped in
 * families whose label names are fixed when the family is made, rendered in the text
 * exposition format 0.0.4 (docs/metrics.md lists what the plugin exports).
 *
 * Updating is the hot path (Allocate is ~20 us of CPU): a caller looks its series up
 * once (metrics_series, when the resource appears) and keeps the pointer; an update is
 * then one add, no allocation, no lock, no lookup. Every update function accepts NULL
 * and does nothing, so code instrumented with the listener off pays a test and a
 * branch.
 *
 * Threading: loop thread only (no atomics). The health monitor's thread never
 * touches this; its events are counted on the loop when they are handed over.
 *
 * Bounds: a family holds at most METRICS_MAX_SERIES series by default (its label values
 * may come from outside, e.g. Xid codes from NVML); past that metrics_series() returns
 * NULL and the update is dropped, and metrics_dropped() says how many lookups were
 * refused. A family keyed by the plugin's own data (one series per advertised device)
 * raises its cap with metrics_family_set_limit(). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define METRICS_MAX_SERIES 1024u
#define METRICS_MAX_LABELS 8u
#define METRICS_MAX_BUCKETS 32u

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

struct metrics;
struct metrics_family;
struct metrics_series;

/* Called right before a family is rendered: a collector sets gauges whose value is read
 * from elsewhere (connections now, device health), possibly after
 * metrics_family_clear(). */
typedef void (*metrics_collect_fn)(struct metrics_family *f, void *userdata);

struct metrics *metrics_new(void);
/* Frees every family and series. NULL ok. */
void metrics_free(struct metrics *r);

/* A new family, rendered in the order families were made. name and help are copied;
 * label_names is NULL-terminated (NULL: no labels), at most METRICS_MAX_LABELS names;
 * bounds (histograms only) are the ascending upper bounds, +Inf is implied, at most
 * METRICS_MAX_BUCKETS. Names are the caller's constants and are not validated beyond
 * an abort on a count out of range (a programming error). */
struct metrics_family *metrics_family_new(struct metrics *r, enum metrics_type type,
                                          const char *name, const char *help,
                                          const char *const *label_names, const double *bounds,
                                          size_t n_bounds);
void metrics_family_set_collect(struct metrics_family *f, metrics_collect_fn fn, void *userdata);
void metrics_family_set_limit(struct metrics_family *f, size_t max_series);
/* The series of f with these label values (one per label name; NULL when the family has
 * no labels), made on first use and kept until metrics_family_clear(). Returns NULL when
 * f is NULL or already holds METRICS_MAX_SERIES series. */
struct metrics_series *metrics_series(struct metrics_family *f, const char *const *values);
/* The same for a family with one label whose value is a number (an Xid code). */
struct metrics_series *metrics_series_u64(struct metrics_family *f, uint64_t value);
/* Drop every series of f (a collector about to set the current ones). Pointers to them
 * become invalid. */
void metrics_family_clear(struct metrics_family *f);

/* Updates; s may be NULL (metrics off, or a refused series): nothing happens. */
void metrics_inc(struct metrics_series *s);
void metrics_add(struct metrics_series *s, double v);
void metrics_set(struct metrics_series *s, double v);
/* Histograms: count v in the first bucket whose bound is >= v, and in _sum/_count. */
void metrics_observe(struct metrics_series *s, double v);

/* Counter or gauge value; for a histogram, its count. 0 for NULL. */
double metrics_value(const struct metrics_series *s);
/* Lookups refused by the series cap, over every family. */
uint64_t metrics_dropped(const struct metrics *r);

/* The whole registry in text format 0.0.4 (after running the collectors). Returns a
 * malloc'd NUL-terminated string; *len (may be NULL) gets its length. */
char *metrics_render(struct metrics *r, size_t *len);
/* Content-Type of what metrics_render() returns. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
