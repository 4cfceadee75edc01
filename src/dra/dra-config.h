/* The opaque per-claim configuration of NVIDIA's DRA driver (resource.nvidia.com/v1beta1
 * GpuConfig and MigDeviceConfig, carried in spec.devices.config[].opaque.parameters of
 * claims and classes), decoded strictly as NVIDIA's driver does: an unknown field, a
 * wrong type, an unknown kind or value fails the claim, with NVIDIA's messages where it
 * has them. Pure: JSON in, a small struct out. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "dra/dra-types.h"

#define DRA_CONFIG_API_VERSION "resource.nvidia.com/v1beta1"

enum dra_config_kind { DRA_CONFIG_GPU, DRA_CONFIG_MIG };

enum dra_sharing {
    DRA_SHARING_NONE,          /* no `sharing`: compute mode untouched (NVIDIA's default) */
    DRA_SHARING_TIME_SLICING,
    DRA_SHARING_MPS,           /* a control daemon per claim config group (dra-mps.h) */
};

/* timeSlicingConfig.interval, in the order of nvidia-smi's --set-timeslice values 0..3. */
enum dra_ts_interval { DRA_TS_DEFAULT, DRA_TS_SHORT, DRA_TS_MEDIUM, DRA_TS_LONG };

/* mpsConfig's bounds (ours: NVIDIA's are the API object's). A key longer than a UUID can
 * be is no UUID of the group and no index either: NVIDIA's error for it at once. A group
 * is the devices of one claim sharing one daemon (dra-mps.h). */
#define DRA_MPS_LIMITS_MAX 8
#define DRA_MPS_KEY_MAX 56
#define DRA_MPS_GROUP_MAX 16
/* "<claim UID>-<5 hex>" */
#define DRA_MPS_ID_MAX (DRA_CLAIM_UID_MAX + 7)
/* A GPU share's MPS v3 namespace: "s" and 16 hex digits (dra-shares.h) */
#define DRA_MPS_NS_MAX 18

/* defaultPerDevicePinnedMemoryLimit: a key (a UUID of the group, or a decimal index into
 * its UUIDs sorted) and its limit, whole MiB (NVIDIA's value/1024/1024, at least 1). */
struct dra_mps_limit {
    char key[DRA_MPS_KEY_MAX];
    int64_t mib;
};

/* mpsConfig, decoded (limits in NVIDIA's units: whole MiB, percent), and the group it
 * was planned for (dra_mps_plan: set on every device of a claim before it is applied;
 * only id survives in the checkpoint, which is all an unprepare needs). */
struct dra_mps_config {
    int thread_pct;                          /* defaultActiveThreadPercentage; -1: unset */
    int64_t pinned_mib;                      /* defaultPinnedDeviceMemoryLimit; -1: unset */
    bool multi_user;
    unsigned n_limits;
    struct dra_mps_limit limits[DRA_MPS_LIMITS_MAX];
    char id[DRA_MPS_ID_MAX];                 /* the group's daemon; "" until planned */
    unsigned n_group;                        /* the group's UUIDs, sorted ascending */
    char group[DRA_MPS_GROUP_MAX][DRA_MPS_KEY_MAX];
    /* A GPU share's own MPS v3 namespace in its GPU's daemon (driver r615+, dra-shares.h),
     * "" for anything else; only the name survives in the checkpoint (an unprepare deletes
     * it by name). */
    char ns[DRA_MPS_NS_MAX];
    int64_t ns_mib;  /* its pinned-memory limit */
    int ns_pct;      /* its active thread percentage */
    bool ns_only;    /* a reset's: the namespace goes, the daemon stays (other shares use it) */
};

struct dra_config {
    enum dra_config_kind kind;
    enum dra_sharing sharing;
    enum dra_ts_interval interval;   /* DRA_SHARING_TIME_SLICING only */
    struct dra_mps_config mps;       /* DRA_SHARING_MPS only */
};

/* Whether a and b ask for the same daemon settings (id and group aside): NVIDIA groups a
 * claim's devices by the config that applies to them; we by what it says. */
bool dra_mps_config_same(const struct dra_mps_config *a, const struct dra_mps_config *b);

/* Decodes one `parameters` object (strict, normalised: TimeSlicing without
 * timeSlicingConfig gets interval Default) and validates it. Fails (-EINVAL, err set to
 * NVIDIA's text: "strict decoding error: unknown field \"sharing.foo\"", "unknown GPU
 * sharing strategy: X", "error transforming DefaultPerDevicePinnedMemoryLimit into
 * string: ...", ...) on anything NVIDIA's driver refuses. What needs the claim's devices
 * (a per-device key, multiUser's compute capability) is checked by dra_mps_plan. */
int dra_config_decode(json_t *parameters, struct dra_config *out, struct error *err);

/* The built-in default of a kind (lowest precedence): no sharing. */
struct dra_config dra_config_default(enum dra_config_kind kind);

const char *dra_config_kind_name(enum dra_config_kind kind);        /* "GpuConfig" */
const char *dra_sharing_name(enum dra_sharing s);                   /* "TimeSlicing", "" */
const char *dra_ts_interval_name(enum dra_ts_interval i);           /* "Default" */
/* The inverse of the two above: 0 or -EINVAL. */
int dra_sharing_from_name(const char *s, enum dra_sharing *out);
int dra_ts_interval_from_name(const char *s, enum dra_ts_interval *out);
