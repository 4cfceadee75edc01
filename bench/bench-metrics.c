/* bench-metrics: what the instrumentation adds to one RPC (docs/metrics.md, "Cost") and
 * what one scrape costs to render. The per-RPC sequence is the one dp_service.c runs
 * after an Allocate or GetPreferredAllocation: count the request (and an error), read
 * the clock, observe the latency; "off" is the same with the NULL series the RPCs get
 * when --metrics-address is empty. Best of several runs of many iterations, so a loaded
 * machine shows as noise in the slower runs only. Prints figures; asserts nothing. */
#include <stdio.h>
#include <time.h>

#include "core/loop.h"
#include "core/macro.h"
#include "metrics/metrics.h"

#define ITERS 5000000
#define RUNS 7

static const double bounds[] = { 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The tail of dp_service.c's count_rpc(), for one RPC that started at t0. */
static __attribute__((noinline)) void count(struct metrics_series *req, struct metrics_series *err,
                                            struct metrics_series *secs, bool failed, uint64_t t0)
{
    metrics_inc(req);
    if (failed)
        metrics_inc(err);
    if (secs)
        metrics_observe(secs, (double)(loop_now_us() - t0) / 1e6);
}

static double best_ns_per_call(struct metrics_series *req, struct metrics_series *err,
                               struct metrics_series *secs)
{
    double best = 1e18;
    for (int r = 0; r < RUNS; r++) {
        uint64_t t0 = loop_now_us();
        double a = now_ns();
        for (int i = 0; i < ITERS; i++)
            count(req, err, secs, false, t0);
        double ns = (now_ns() - a) / ITERS;
        if (ns < best)
            best = ns;
    }
    return best;
}

int main(void)
{
    struct metrics *r = metrics_new();
    static const char *const l[] = { "resource", NULL };
    const char *v[] = { "nvidia.com/gpu" };
    struct metrics_series *req =
        metrics_series(metrics_family_new(r, METRICS_COUNTER, "req_total", "R.", l, NULL, 0), v);
    struct metrics_series *err =
        metrics_series(metrics_family_new(r, METRICS_COUNTER, "err_total", "E.", l, NULL, 0), v);
    struct metrics_series *secs = metrics_series(
        metrics_family_new(r, METRICS_HISTOGRAM, "secs", "S.", l, bounds, ELEMENTSOF(bounds)), v);

    double off = best_ns_per_call(NULL, NULL, NULL);
    double on = best_ns_per_call(req, err, secs);
    printf("per RPC, metrics off (NULL series): %.1f ns\n", off);
    printf("per RPC, metrics on (count + clock + histogram): %.1f ns\n", on);
    printf("{\"name\": \"metrics per RPC\", \"off_ns\": %.1f, \"on_ns\": %.1f}\n", off, on);

    /* A scrape of a node like the simulator's a100 one: 8 devices, their gauges. */
    static const char *const dev[] = { "resource", "device", "gpu_uuid", NULL };
    struct metrics_family *h = metrics_family_new(r, METRICS_GAUGE, "healthy", "H.", dev, NULL, 0);
    for (int i = 0; i < 8; i++) {
        char id[64];
        snprintf(id, sizeof(id), "GPU-12345678-1234-1234-1234-12345678000%d", i);
        metrics_set(metrics_series(h, (const char *const[]){ "nvidia.com/gpu", id, id }), 1);
    }
    double best = 1e18;
    size_t len = 0;
    for (int k = 0; k < RUNS; k++) {
        double a = now_ns();
        for (int i = 0; i < 1000; i++)
            free(metrics_render(r, &len));
        double us = (now_ns() - a) / 1000 / 1e3;
        if (us < best)
            best = us;
    }
    printf("render (3 families + 8 device gauges, %zu bytes): %.1f us\n", len, best);
    metrics_free(r);
    return 0;
}
