/* What the kubelet-facing service (dra-service) and the claim preparer (dra-claims) pass
 * each other: the claims of one NodePrepareResources / NodeUnprepareResources call and
 * the per-claim answers. Plain data, no protobuf or JSON types, so neither side knows
 * the other's encoding. */
#pragma once
#include <stddef.h>

/* The DRA driver name and the CDI kind of its per-claim specs (NVIDIA's, so that
 * DeviceClasses, claims and tooling written for NVIDIA's driver keep working). */
#define DRA_DRIVER_NAME "gpu.nvidia.com"
#define DRA_CDI_VENDOR "k8s.gpu.nvidia.com"
#define DRA_CDI_CLASS "claim"

/* The bounds both sides hold a call to, defined here once so that they cannot drift: no
 * claim the service accepts is refused behind it by the preparer, and the other way round.
 * A pod has at most 32 resource claims (API validation), and the kubelet batches one pod's
 * claims per driver per call: a call with more than DRA_CLAIMS_MAX_PER_CALL is no
 * kubelet's, refused whole (the service: RESOURCE_EXHAUSTED) so the reply cannot grow with
 * the abuse. UIDs and names: longer than any valid UID (36), namespace (63) or name or
 * pool (253, a DNS subdomain); a UID names files (CDI specs), so it is bounded too. */
#define DRA_CLAIMS_MAX_PER_CALL 256
#define DRA_CLAIM_UID_MAX 128
#define DRA_CLAIM_NAME_MAX 253       /* namespace, name, pool */

/* One claim of a call, as the kubelet names it (all borrowed for the call). */
struct dra_claim_ref {
    const char *uid;
    const char *namespace_;
    const char *name;
};

/* One prepared device of a claim. */
struct dra_prepared_device {
    char **request_names;     /* base request names ("gpu", never "gpu/sub") */
    size_t n_request_names;
    char *pool_name;
    char *device_name;
    char **cdi_device_ids;    /* "k8s.gpu.nvidia.com/claim=<uid>-<device>" */
    size_t n_cdi_device_ids;
    char *share_id;           /* a share's shareID (consumable capacity); NULL: none */
};

/* The answer for one claim: error == NULL and the devices (possibly none), or an error
 * message (one line, naming the claim and what is wrong) and no devices. */
struct dra_claim_result {
    char *uid;
    char *error;
    struct dra_prepared_device *devices;
    size_t n_devices;
};

/* Frees what the members point to (not r itself). */
void dra_claim_result_clear(struct dra_claim_result *r);
