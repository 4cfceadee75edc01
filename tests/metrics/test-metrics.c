/* The metrics registry and its text exposition (src/metrics/), and the metrics
 * listener's address syntax (src/http/). `test-metrics --print` writes the sample
 * registry's text to stdout for test_metrics_text.py, which reads it back with an
 * independent parser (Debian's python3-prometheus-client). */
#include <math.h>
#include <stdio.h>
#include <sys/socket.h>

#include "../common/check.h"
#include "core/error.h"
#include "http/http.h"
#include "metrics/metrics.h"

int test_failures;

static void collect_gauge(struct metrics_family *f, void *userdata)
{
    int *calls = userdata;
    (*calls)++;
    metrics_family_clear(f);
    metrics_set(metrics_series(f, (const char *const[]){ "now" }), *calls);
}

/* The sample registry: escaping, a histogram with a value on a bound, special values. */
static struct metrics *sample(int *calls)
{
    static const char *const res[] = { "resource", NULL };
    static const char *const two[] = { "a", "b", NULL };
    static const double bounds[] = { 0.001, 0.01, 0.1 };
    struct metrics *r = metrics_new();
    struct metrics_family *c = metrics_family_new(r, METRICS_COUNTER, "t_requests_total",
                                                  "Requests.\nSecond line \\ backslash.", res,
                                                  NULL, 0);
    metrics_inc(metrics_series(c, (const char *const[]){ "nvidia.com/gpu" }));
    metrics_inc(metrics_series(c, (const char *const[]){ "nvidia.com/gpu" }));
    metrics_add(metrics_series(c, (const char *const[]){ "we\"ird\\na\nme" }), 3);
    struct metrics_family *g = metrics_family_new(r, METRICS_GAUGE, "t_level", "A gauge.", NULL,
                                                  NULL, 0);
    metrics_set(metrics_series(g, NULL), 0.25);
    struct metrics_family *s = metrics_family_new(r, METRICS_GAUGE, "t_special", "Specials.",
                                                  two, NULL, 0);
    metrics_set(metrics_series(s, (const char *const[]){ "inf", "" }), INFINITY);
    metrics_set(metrics_series(s, (const char *const[]){ "ninf", "x" }), -INFINITY);
    metrics_set(metrics_series(s, (const char *const[]){ "big", "y" }), 12345678901234.0);
    struct metrics_family *h = metrics_family_new(r, METRICS_HISTOGRAM, "t_seconds",
                                                  "Latency.", res, bounds, 3);
    struct metrics_series *hs = metrics_series(h, (const char *const[]){ "r1" });
    metrics_observe(hs, 0.0005);
    metrics_observe(hs, 0.001); /* on the bound: le="0.001" */
    metrics_observe(hs, 0.05);
    metrics_observe(hs, 5);
    metrics_series(h, (const char *const[]){ "r2" }); /* never observed: all zero */
    static const char *const when[] = { "when", NULL };
    struct metrics_family *k = metrics_family_new(r, METRICS_GAUGE, "t_collected",
                                                  "Set at scrape time.", when, NULL, 0);
    metrics_family_set_collect(k, collect_gauge, calls);
    return r;
}

static const char expected[] =
    "# HELP t_requests_total Requests.\\nSecond line \\\\ backslash.\n"
    "# TYPE t_requests_total counter\n"
    "t_requests_total{resource=\"nvidia.com/gpu\"} 2\n"
    "t_requests_total{resource=\"we\\\"ird\\\\na\\nme\"} 3\n"
    "# HELP t_level A gauge.\n"
    "# TYPE t_level gauge\n"
    "t_level 0.25\n"
    "# HELP t_special Specials.\n"
    "# TYPE t_special gauge\n"
    "t_special{a=\"inf\",b=\"\"} +Inf\n"
    "t_special{a=\"ninf\",b=\"x\"} -Inf\n"
    "t_special{a=\"big\",b=\"y\"} 12345678901234\n"
    "# HELP t_seconds Latency.\n"
    "# TYPE t_seconds histogram\n"
    "t_seconds_bucket{resource=\"r1\",le=\"0.001\"} 2\n"
    "t_seconds_bucket{resource=\"r1\",le=\"0.01\"} 2\n"
    "t_seconds_bucket{resource=\"r1\",le=\"0.1\"} 3\n"
    "t_seconds_bucket{resource=\"r1\",le=\"+Inf\"} 4\n"
    "t_seconds_sum{resource=\"r1\"} 5.0515\n"
    "t_seconds_count{resource=\"r1\"} 4\n"
    "t_seconds_bucket{resource=\"r2\",le=\"0.001\"} 0\n"
    "t_seconds_bucket{resource=\"r2\",le=\"0.01\"} 0\n"
    "t_seconds_bucket{resource=\"r2\",le=\"0.1\"} 0\n"
    "t_seconds_bucket{resource=\"r2\",le=\"+Inf\"} 0\n"
    "t_seconds_sum{resource=\"r2\"} 0\n"
    "t_seconds_count{resource=\"r2\"} 0\n"
    "# HELP t_collected Set at scrape time.\n"
    "# TYPE t_collected gauge\n"
    "t_collected{when=\"now\"} 1\n";

static void test_render(void)
{
    int calls = 0;
    struct metrics *r = sample(&calls);
    size_t len = 0;
    char *text = metrics_render(r, &len);
    CHECK_STR(text, expected);
    CHECK(len == strlen(expected));
    CHECK(calls == 1);
    free(text);
    /* the collector runs at every scrape and its family shows only what it set */
    text = metrics_render(r, NULL);
    CHECK_STR_CONTAINS(text, "t_collected{when=\"now\"} 2\n");
    free(text);
    metrics_free(r);
}

static void test_updates(void)
{
    struct metrics *r = metrics_new();
    static const char *const l[] = { "code", NULL };
    struct metrics_family *f = metrics_family_new(r, METRICS_COUNTER, "x_total", "X.", l,
                                                  NULL, 0);
    /* the same label values are the same series */
    struct metrics_series *a = metrics_series_u64(f, 48);
    CHECK(a == metrics_series(f, (const char *const[]){ "48" }));
    metrics_inc(a);
    CHECK(metrics_value(a) == 1);
    /* NULL series (metrics off) are ignored */
    metrics_inc(NULL);
    metrics_observe(NULL, 1);
    metrics_set(NULL, 1);
    CHECK(metrics_value(NULL) == 0);
    CHECK(metrics_series(NULL, NULL) == NULL);
    /* the series cap bounds a family fed from outside */
    for (unsigned i = 0; i < METRICS_MAX_SERIES + 10; i++)
        metrics_series_u64(f, 1000 + i);
    CHECK(metrics_series_u64(f, 999999) == NULL);
    CHECK(metrics_dropped(r) == 12); /* 1 + 1023 made, 11 + 1 refused */
    metrics_family_clear(f);
    CHECK(metrics_series_u64(f, 999999) != NULL);
    /* a family keyed by the plugin's own data can hold more */
    metrics_family_set_limit(f, METRICS_MAX_SERIES + 100);
    for (unsigned i = 0; i < METRICS_MAX_SERIES + 10; i++)
        CHECK(metrics_series_u64(f, 5000 + i) != NULL);
    metrics_free(r);
}

static void test_address(void)
{
    struct { const char *text; int family; unsigned port; } ok[] = {
        { ":9808", AF_INET6, 9808 },       { "127.0.0.1:0", AF_INET, 0 },
        { "0.0.0.0:80", AF_INET, 80 },     { "[::1]:8080", AF_INET6, 8080 },
        { "localhost:65535", AF_INET, 65535 }, { "[::]:1", AF_INET6, 1 },
    };
    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        struct sockaddr_storage ss;
        unsigned len = 0;
        struct error err = { 0 };
        int r = http_address_parse(ok[i].text, &ss, &len, &err);
        if (r < 0)
            fprintf(stderr, "%s: %s\n", ok[i].text, err.msg);
        CHECK(r == 0);
        CHECK(ss.ss_family == ok[i].family);
    }
    const char *bad[] = { "", "9808", ":", ":65536", ":-1", ":80x", "host.example:80",
                          "::1:80", "[::1]80", "[::1", "1.2.3.4:", ":123456",
                          "[0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef]:1" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        struct sockaddr_storage ss;
        unsigned len = 0;
        struct error err = { 0 };
        if (http_address_parse(bad[i], &ss, &len, &err) != -EINVAL)
            fprintf(stderr, "accepted bad address \"%s\"\n", bad[i]), test_failures++;
        CHECK(err.msg[0] != '\0');
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && streq(argv[1], "--print")) {
        int calls = 0;
        struct metrics *r = sample(&calls);
        char *text = metrics_render(r, NULL);
        fputs(text, stdout);
        free(text);
        metrics_free(r);
        return 0;
    }
    test_render();
    test_updates();
    test_address();
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
