/* Requests of the DRA socket, decoded and checked (dra-request.h). */
#include <string.h>

#include "core/macro.h"
#include "dra/dra-request.h"
#include "dra/dra-service.h"
#include "dra_v1.pb-c.h"
#include "grpc/grpc.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest ClaimsRequest;

void dra_request_clear(struct dra_request *r)
{
    for (size_t i = 0; r->error && i < r->n; i++)
        free(r->error[i]);
    free(r->error);
    free(r->claims);
    free(r->refs);
    if (r->msg)
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(
            r->msg, NULL);
    *r = (struct dra_request){ 0 };
}

static int check(struct dra_request *r, const ClaimsRequest *in, char **message)
{
    if (r->n > DRA_CLAIMS_MAX_PER_CALL) {
        *message = xasprintf("%zu claims in one call, at most %u", r->n, DRA_CLAIMS_MAX_PER_CALL);
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    r->claims = xcalloc(r->n ? r->n : 1, sizeof(*r->claims));
    r->error = xcalloc(r->n ? r->n : 1, sizeof(*r->error));
    r->refs = xcalloc(r->n ? r->n : 1, sizeof(*r->refs));
    for (size_t i = 0; i < r->n; i++) {
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *cl = in->claims[i];
        r->claims[i] = (struct dra_claim_ref){
            .uid = cl->uid, .namespace_ = cl->namespace_, .name = cl->name
        };
        size_t ul = strlen(cl->uid);
        if (ul == 0 || ul > DRA_CLAIM_UID_MAX) {
            *message = xasprintf("claim %zu: UID %s", i, ul ? "too long" : "empty");
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        /* A UID keys the answer and is named in messages and logs: printable ASCII only
         * (the API server's are UUIDs), so no message of ours carries a peer's newline. */
        for (const char *ch = cl->uid; *ch; ch++)
            if ((unsigned char)*ch <= ' ' || (unsigned char)*ch >= 0x7f) {
                *message = xasprintf("claim %zu: UID with a byte that is not printable ASCII", i);
                return GRPC_STATUS_INVALID_ARGUMENT;
            }
        for (size_t k = 0; k < i; k++)
            if (streq(in->claims[k]->uid, cl->uid)) {
                *message = xasprintf("claim UID %s twice in one call", cl->uid);
                return GRPC_STATUS_INVALID_ARGUMENT;
            }
        if (strlen(cl->namespace_) > DRA_CLAIM_NAME_MAX || strlen(cl->name) > DRA_CLAIM_NAME_MAX) {
            r->error[i] = xasprintf("ResourceClaim %s: namespace or name longer than %u",
                                    cl->uid, DRA_CLAIM_NAME_MAX);
            continue;
        }
        r->refs[r->n_refs++] = r->claims[i];
    }
    return GRPC_STATUS_OK;
}

/* One varint at *p (at most 10 bytes, before end), *p moved past it; false: none whole. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; *p < end && shift < 70; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* The fields of the message in [p, end): for each length-delimited one, fn(field number,
 * its bytes). False where the wire does not walk (the decoder refuses that anyway). */
static bool walk(const uint8_t *p, const uint8_t *end,
                 bool (*fn)(void *ud, uint64_t field, const uint8_t *b, size_t n), void *ud)
{
    uint64_t key, n;
    while (p < end) {
        if (!varint(&p, end, &key))
            return false;
        unsigned type = key & 7;
        if (type == 0) { /* a varint: nothing to look into */
            if (!varint(&p, end, &n))
                return false;
            continue;
        }
        if (type == 1 || type == 5)
            n = type == 1 ? 8 : 4;
        else if (type != 2 || !varint(&p, end, &n)) /* groups: protobuf-c refuses them too */
            return false;
        if (n > (uint64_t)(end - p) || (type == 2 && !fn(ud, key >> 3, p, (size_t)n)))
            return false;
        p += n;
    }
    return true;
}

struct nul_scan {
    size_t claim; /* the claims walked whole */
    bool nul;
};

/* Claim: namespace 1, uid 2, name 3, all strings. */
static bool claim_string(void *ud, uint64_t field, const uint8_t *b, size_t n)
{
    struct nul_scan *s = ud;
    s->nul = field >= 1 && field <= 3 && memchr(b, 0, n);
    return !s->nul;
}

/* The request: claims 1, repeated Claim. */
static bool claim(void *ud, uint64_t field, const uint8_t *b, size_t n)
{
    struct nul_scan *s = ud;
    if (field != 1)
        return true;
    if (!walk(b, b + n, claim_string, s))
        return false;
    s->claim++;
    return true;
}

int dra_request_parse(const uint8_t *buf, size_t len, struct dra_request *out, char **message)
{
    *out = (struct dra_request){ 0 };
    *message = NULL;
    ClaimsRequest *in =
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
                                                                                   buf);
    if (!in) {
        *message = xstrdup("cannot decode request");
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    out->msg = in;
    out->n = in->n_claims;
    /* protobuf-c hands a string over as a C string, cut at its first NUL: "u-1\0../x" would
     * be claim "u-1". Refused as a UID with a byte that is not printable is. */
    struct nul_scan scan = { 0 };
    if (!walk(buf, buf + len, claim, &scan)) {
        *message = scan.nul ? xasprintf("claim %zu: a NUL byte in its UID, namespace or name", scan.claim)
                            : xstrdup("cannot decode request");
        dra_request_clear(out);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    int status = check(out, in, message);
    if (status != GRPC_STATUS_OK)
        dra_request_clear(out);
    return status;
}
