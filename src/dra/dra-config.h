/* The opaque per-claim configuration of NVIDIA's DRA driver (resource.nvidia.com/v1beta1
 * GpuConfig and MigDeviceConfig, carried in spec.devices.config[].opaque.parameters of
 * claims and classes), decoded strictly as NVIDIA's driver does: an unknown field, a
 * wrong type, an unknown kind or value fails the claim, with NVIDIA's messages where it
 * has them. Pure: JSON in, a small struct out. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "core/error.h"

#define DRA_CONFIG_API_VERSION "resource.nvidia.com/v1beta1"

enum dra_config_kind { DRA_CONFIG_GPU, DRA_CONFIG_MIG };

enum dra_sharing {
    DRA_SHARING_NONE,          /* no `sharing`: compute mode untouched (NVIDIA's default) */
    DRA_SHARING_TIME_SLICING,
    DRA_SHARING_MPS,           /* decoded (so that its errors are NVIDIA's), then refused */
};

/* timeSlicingConfig.interval, in the order of nvidia-smi's --set-timeslice values 0..3. */
enum dra_ts_interval { DRA_TS_DEFAULT, DRA_TS_SHORT, DRA_TS_MEDIUM, DRA_TS_LONG };

struct dra_config {
    enum dra_config_kind kind;
    enum dra_sharing sharing;
    enum dra_ts_interval interval;   /* DRA_SHARING_TIME_SLICING only */
};

/* Decodes one `parameters` object (strict, normalised: TimeSlicing without
 * timeSlicingConfig gets interval Default) and validates it. Fails (-EINVAL, err set to
 * NVIDIA's text: "strict decoding error: unknown field \"sharing.foo\"", "unknown GPU
 * sharing strategy: X", ...) on anything NVIDIA's driver refuses, and on MPS, which
 * this plugin does not run per claim (docs/compatibility.md). */
int dra_config_decode(json_t *parameters, struct dra_config *out, struct error *err);

/* The built-in default of a kind (lowest precedence): no sharing. */
struct dra_config dra_config_default(enum dra_config_kind kind);

const char *dra_config_kind_name(enum dra_config_kind kind);        /* "GpuConfig" */
const char *dra_sharing_name(enum dra_sharing s);                   /* "TimeSlicing", "" */
const char *dra_ts_interval_name(enum dra_ts_interval i);           /* "Default" */
/* The inverse of the two above: 0 or -EINVAL. */
int dra_sharing_from_name(const char *s, enum dra_sharing *out);
int dra_ts_interval_from_name(const char *s, enum dra_ts_interval *out);
