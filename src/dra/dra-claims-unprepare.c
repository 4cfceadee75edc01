/* Unpreparing claims (see dra-claims.h): their CDI specs and records removed. */
#include <errno.h>

#include "dra/dra-cdi.h"
#include "dra/dra-claim.h"
#include "dra/dra-claims-internal.h"

struct dra_claims_call *dra_claims_unprepare(struct dra_claims *c,
                                             const struct dra_claim_ref *claims, size_t n,
                                             dra_claims_done_fn done, void *userdata)
{
    struct dra_claims_call *call = claims_call_new(c, claims, n, done, userdata);
    if (claims_over_bound(call, "unpreparing"))
        return claims_call_maybe_done(call);
    for (size_t i = 0; i < n; i++) {
        struct dra_claim_result *res = &call->results[i];
        struct error err = { 0 };
        /* Not a UID we could have prepared (or named a file after): nothing to undo. */
        if (!dra_claim_uid_valid(res->uid))
            continue;
        /* A prepare of it waits for its sharing configs: the tool stopped, that prepare
         * failed (answered from the loop), and the unprepare goes on as for any. */
        struct pending *busy = claims_busy(c, res->uid);
        if (busy) {
            c->apply_cancel(c->apply_userdata, TAKE_PTR(busy->op));
            json_decref(TAKE_PTR(busy->spec));
            fs_stage_abort(&busy->stage);
            error_set(&err, -ECANCELED, "unprepared while its sharing configs were being applied");
            claims_result_error(&busy->call->results[busy->i], "preparing", busy->namespace_, busy->name, &err);
            busy->call->outstanding--;
            claims_call_maybe_done(busy->call);
        }
        /* The spec goes even without a record: a checkpoint discarded as corrupt forgot
         * claims whose specs are still there. Missing is fine. */
        if (dra_cdi_remove(c->cdi_root, res->uid, &err) < 0 ||
            dra_checkpoint_remove(&c->ckpt, res->uid, &err) < 0)
            claims_result_error(res, "unpreparing", claims[i].namespace_, claims[i].name, &err);
    }
    return claims_call_maybe_done(call);
}
