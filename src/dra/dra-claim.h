/* One ResourceClaim (resource.k8s.io/v1, as the API server returns it) read for this
 * node: the allocation results of our driver in our pool, each with its base request
 * name and the opaque config that applies to it (NVIDIA's precedence: built-in default,
 * then class configs, then claim configs, the last match wins). Pure: JSON in, plain
 * structs out; nothing here knows the node's devices. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "dra/dra-config.h"
#include "dra/dra-devices.h"
#include "dra/dra-types.h"

/* Bounds on what one claim may carry (the 1.34 API server allows 32 results and 32
 * configs; ours leave room for later versions but stop a hostile object). */
#define DRA_CLAIM_MAX_RESULTS 128
#define DRA_CLAIM_MAX_CONFIGS 128
/* DRA_CLAIM_NAME_MAX and DRA_CLAIM_UID_MAX: dra-types.h, shared with the service. */
#define DRA_CLAIM_REQUEST_MAX 127    /* "<request>/<subrequest>", two DNS labels */
#define DRA_SHARE_ID_MAX 36           /* a UID, as the scheduler makes shareIDs */

struct dra_alloc {
    char *request;                   /* as allocated: "gpus/small" */
    char *base_request;              /* what the kubelet is told: "gpus" */
    char *device;                    /* "gpu-5", "gpu-0-mig-1g12gb-19-0" */
    enum dra_device_type type;       /* from the name: NVIDIA's MIG names carry "-mig-" */
    bool admin_access;
    struct dra_config config;        /* the one that applies (the default if none) */
    /* A share of a device offered with consumable capacity: the scheduler's shareID and
     * what it accounted (consumedCapacity); share_id NULL for a whole device. */
    char *share_id;
    int64_t memory, compute;         /* bytes, percent; -1: not in consumedCapacity */
};

struct dra_claim {
    char *uid, *namespace_, *name;
    struct dra_alloc *allocs;        /* ours, in the order of status.allocation */
    size_t n_allocs;
};

/* Reads claim for driver `driver` and pool `pool`. Fails (err set, one line) when the
 * claim is not allocated, is malformed or past the bounds above, or when a config of
 * ours does not decode (NVIDIA's messages, dra-config.h) or is aimed at a device of the
 * other type. Results of other drivers or pools are skipped. out is cleared first. */
int dra_claim_parse(json_t *claim, const char *driver, const char *pool, struct dra_claim *out,
                    struct error *err);
void dra_claim_clear(struct dra_claim *c);

/* A shareID we may put in a CDI device name: 1..DRA_SHARE_ID_MAX of [a-z0-9-] (the
 * scheduler makes them as UIDs). */
bool dra_claim_share_id_valid(const char *s);
/* A claim UID we may put in a file name and a CDI device name: 1..DRA_CLAIM_UID_MAX of
 * [A-Za-z0-9-] (Kubernetes UIDs are RFC 4122 text). */
bool dra_claim_uid_valid(const char *uid);
/* A claim name the API server could hold: a DNS subdomain (RFC 1123: at most 253 bytes,
 * labels of [a-z0-9-] joined by dots, each with a letter or digit first and last; NULL: no).
 * It goes into the path of the claim's GET, so "..", "a..b" or ".x" must not. */
bool dra_claim_object_name_valid(const char *s);
/* A DNS label (RFC 1123: 1..63 of [a-z0-9-], a letter or digit first and last; NULL: no):
 * a namespace, a device name (they reach CDI device names), a request name. */
bool dra_claim_dns_label(const char *s);
