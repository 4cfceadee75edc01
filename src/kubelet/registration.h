/* Registration of one plugin endpoint with the kubelet (v1beta1.Registration/Register),
 * asynchronous on the loop: the kubelet dials the plugin back and calls
 * GetDevicePluginOptions before it answers, so the plugin keeps serving meanwhile.
 * Failures retry with capped backoff (see registration.c: 8 retries 1 ms apart, then
 * doubling from 2 ms to 10 s); a new kubelet (reg_restart) retries at once. A failure is
 * logged as a warning once (with reg_kubelet_path_hints when the kubelet cannot be
 * reached), then at debug level until it changes, registration succeeds or the kubelet
 * restarts. */
#pragma once

#include <stdbool.h>

struct loop;
struct reg;

/* What to check when the kubelet's socket or its directory is not there (a wrong
 * --kubelet-socket, a missing hostPath mount): hint lines for log_hints (core/log.h). */
extern const char *const reg_kubelet_path_hints[];

struct reg *reg_new(struct loop *l, const char *kubelet_socket, const char *endpoint,
                    const char *resource_name);
/* Register now, dropping any call or retry in flight; backoff starts over. */
void reg_restart(struct reg *r);
bool reg_registered(const struct reg *r);
/* Count every Register outcome in these series (metrics; NULL: not counted). */
struct metrics_series;
void reg_set_metrics(struct reg *r, struct metrics_series *ok, struct metrics_series *failed);
void reg_free(struct reg *r);
