/* Registration of one plugin endpoint with the kubelet (v1beta1.Registration/Register),
 * asynchronous on the loop: the kubelet dials the plugin back and calls
 * GetDevicePluginOptions before it answers, so the plugin keeps serving meanwhile.
 * Failures retry with capped exponential backoff (100 ms doubling to 10 s); a new
 * kubelet (reg_restart) retries at once. */
#pragma once

#include <stdbool.h>

struct loop;
struct reg;

struct reg *reg_new(struct loop *l, const char *kubelet_socket, const char *endpoint,
                    const char *resource_name);
/* Register now, dropping any call or retry in flight; backoff starts over. */
void reg_restart(struct reg *r);
bool reg_registered(const struct reg *r);
/* Number of successful registrations so far (tests, metrics). */
unsigned reg_count(const struct reg *r);
/* Count every Register outcome in these series (metrics; NULL: not counted). */
struct metrics_series;
void reg_set_metrics(struct reg *r, struct metrics_series *ok, struct metrics_series *failed);
void reg_free(struct reg *r);
