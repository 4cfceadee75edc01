/* Fuzz target: a NodePrepareResources / NodeUnprepareResources request as the DRA
 * socket reads it (dra_request_parse: the protobuf decode and the checks made before the
 * claim engine sees a claim; v1 and v1beta1, prepare and unprepare share the bytes).
 * What is accepted must hold every bound the engine relies on; what is refused must say
 * why in one line and hold nothing; nothing may crash or leak. Build with clang
 * -fsanitize=fuzzer -DGDP_LIBFUZZER; otherwise tests/common/fuzz-main.c replays the
 * corpus (tests/dra/corpus-request, seeded by make-request-corpus.py). A replay with
 * FUZZ_DRA_REQUEST_MUST_ACCEPT=1 also fails on any input refused in whole or in part:
 * tests/data/dra/kubelet-requests, the requests as kubelets send them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra-request.h"
#include "dra/dra-service.h"
#include "grpc/grpc.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void fail(const char *why)
{
    fprintf(stderr, "fuzz-dra-request: %s\n", why);
    abort();
}

static bool one_line(const char *s)
{
    return s && *s && !strchr(s, '\n');
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    struct dra_request rq;
    char *message;
    int status = dra_request_parse(data, size, &rq, &message);
#ifndef GDP_LIBFUZZER
    static int must_accept = -1;
    if (must_accept < 0)
        must_accept = getenv("FUZZ_DRA_REQUEST_MUST_ACCEPT") != NULL;
    if (must_accept && status != GRPC_STATUS_OK) {
        fprintf(stderr, "fuzz-dra-request: refused (status %d): %s\n", status,
                message ? message : "(no message)");
        fail("a request as the kubelet sends it refused");
    }
    for (size_t i = 0; must_accept && status == GRPC_STATUS_OK && i < rq.n; i++)
        if (rq.error[i] || !*rq.claims[i].uid || !*rq.claims[i].namespace_ || !*rq.claims[i].name) {
            fprintf(stderr, "fuzz-dra-request: claim %zu: %s\n", i,
                    rq.error[i] ? rq.error[i] : "a string lost");
            fail("a claim as the kubelet sends it refused");
        }
#endif
    if (status != GRPC_STATUS_OK) {
        if (status != GRPC_STATUS_INVALID_ARGUMENT && status != GRPC_STATUS_RESOURCE_EXHAUSTED)
            fail("unexpected status");
        if (!one_line(message)) {
            fprintf(stderr, "fuzz-dra-request: message: \"%s\"\n", message ? message : "(null)");
            fail("refused without a one-line message");
        }
        if (rq.msg || rq.n || rq.claims || rq.error || rq.refs || rq.n_refs)
            fail("a refused request left something behind");
        free(message);
        return 0;
    }
    if (message)
        fail("a message for an accepted request");
    if (rq.n > DRA_CLAIMS_MAX_PER_CALL || rq.n_refs > rq.n)
        fail("more claims than the bounds allow");
    size_t refused = 0;
    for (size_t i = 0; i < rq.n; i++) {
        const struct dra_claim_ref *c = &rq.claims[i];
        if (!c->uid || !c->namespace_ || !c->name)
            fail("a claim without its strings");
        size_t ul = strlen(c->uid);
        if (ul == 0 || ul > DRA_CLAIM_UID_MAX)
            fail("a UID out of bounds accepted");
        for (const char *ch = c->uid; *ch; ch++)
            if ((unsigned char)*ch <= ' ' || (unsigned char)*ch >= 0x7f)
                fail("a UID with a byte that is not printable accepted");
        for (size_t k = 0; k < i; k++)
            if (!strcmp(rq.claims[k].uid, c->uid))
                fail("a UID twice accepted");
        bool long_name = strlen(c->namespace_) > DRA_CLAIM_NAME_MAX || strlen(c->name) > DRA_CLAIM_NAME_MAX;
        if (rq.error[i]) {
            refused++;
            if (!one_line(rq.error[i]) || !long_name)
                fail("a claim refused without a reason, or for none");
        } else if (long_name) {
            fail("a name out of bounds reached the engine");
        }
    }
    /* The engine gets exactly the claims without an error, in request order. */
    if (rq.n_refs + refused != rq.n)
        fail("refs and errors do not add up to the request");
    for (size_t i = 0, r = 0; i < rq.n; i++)
        if (!rq.error[i] && rq.refs[r++].uid != rq.claims[i].uid)
            fail("refs out of request order");
    dra_request_clear(&rq);
    if (rq.msg || rq.n)
        fail("clear left something");
    return 0;
}
