/* A NodePrepareResources / NodeUnprepareResources request as the kubelet sends it,
 * decoded and checked before the claim engine sees it. v1 and v1beta1, prepare and
 * unprepare: the four messages are one field (repeated Claim{namespace, uid, name}) and
 * identical byte for byte, so one decoder serves them all. Pure: bytes in, plain data
 * out, no socket or loop; the service (dra-service.c) and the fuzz target
 * (tests/dra/fuzz-dra-request.c) share it.
 *
 * The checks (bounds in dra-types.h): more than DRA_CLAIMS_MAX_PER_CALL claims refuses
 * the call (RESOURCE_EXHAUSTED); a UID empty, longer than DRA_CLAIM_UID_MAX, with a byte
 * that is not printable ASCII, or twice in the call refuses it (INVALID_ARGUMENT: it
 * cannot key an answer, or would carry a peer's bytes into messages); so does a NUL byte
 * in a claim's UID, namespace or name (the decoder would cut the string there, making it
 * another claim's); a namespace or name longer than DRA_CLAIM_NAME_MAX gives that claim its
 * own error (the engine checks that a prepared claim's are Kubernetes names). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dra/dra-types.h"

struct dra_request {
    void *msg;                    /* the decoded message: owns every string below */
    size_t n;                     /* claims, in request order */
    struct dra_claim_ref *claims; /* all n */
    char **error;                 /* per claim: refused here, or NULL */
    struct dra_claim_ref *refs;   /* the claims without an error, for the engine */
    size_t n_refs;
};

/* Decode and check len bytes. Returns a gRPC status: 0 (OK) with *out filled, or the
 * status that refuses the call with *message (malloc'ed, one line: "cannot decode
 * request", "300 claims in one call, at most 256", ...) and *out empty. */
int dra_request_parse(const uint8_t *buf, size_t len, struct dra_request *out, char **message);
/* Frees what r holds and empties it; an empty one is fine. */
void dra_request_clear(struct dra_request *r);
