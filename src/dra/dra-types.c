/* The one owner-side helper of dra-types.h: freeing a per-claim result, whoever built it
 * (the claim preparer fills them, dra-service copies them into its reply). */
#include <stdlib.h>

#include "dra/dra-types.h"

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void dra_claim_result_clear(struct dra_claim_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_devices; i++) {
        struct dra_prepared_device *d = &r->devices[i];
        strv_free(d->request_names, d->n_request_names);
        strv_free(d->cdi_device_ids, d->n_cdi_device_ids);
        free(d->pool_name);
        free(d->device_name);
        free(d->share_id);
    }
    free(r->devices);
    free(r->uid);
    free(r->error);
    *r = (struct dra_claim_result){ 0 };
}
