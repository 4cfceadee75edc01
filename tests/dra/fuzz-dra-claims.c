/* Fuzz target: what the claim preparer reads from outside. The first byte picks one:
 *   0  a ResourceClaim as the API server returns it (dra_claim_parse, for our driver and
 *      the pool "gpu-node-1")
 *   1  an opaque config's parameters (dra_config_decode)
 *   2  a checkpoint file (written to a fresh directory, opened with dra_checkpoint_open)
 * Every failure must carry a one-line message; what parses must hold its bounds; nothing
 * may crash or leak. Build with clang -fsanitize=fuzzer -DGDP_LIBFUZZER; otherwise
 * tests/common/fuzz-main.c replays the corpus (tests/dra/corpus). */
#include <jansson.h>
#include <stdio.h>

#include "core/fs.h"
#include "dra/dra-cdi.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claim.h"
#include "dra/dra-config.h"
#include "dra/dra-types.h"
#include "tests/common/scratch.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void must_say(int r, const struct error *err)
{
    if (r < 0 && (!err->msg[0] || strchr(err->msg, '\n'))) {
        fprintf(stderr, "fuzz-dra-claims: failure without a one-line message: \"%s\"\n", err->msg);
        abort();
    }
}

static void claim(json_t *o)
{
    struct dra_claim c;
    struct error err = { 0 };
    int r = dra_claim_parse(o, DRA_DRIVER_NAME, "gpu-node-1", &c, &err);
    must_say(r, &err);
    if (r == 0) {
        if (c.n_allocs > DRA_CLAIM_MAX_RESULTS || !c.uid || strlen(c.uid) > DRA_CLAIM_UID_MAX)
            abort();
        for (size_t i = 0; i < c.n_allocs; i++)
            if (strchr(c.allocs[i].base_request, '/') || strlen(c.allocs[i].device) >= DRA_DEVICE_NAME_MAX ||
                (c.allocs[i].share_id && !dra_claim_share_id_valid(c.allocs[i].share_id)))
                abort();
        dra_claim_clear(&c);
    }
}

static void config(json_t *o)
{
    struct dra_config c;
    struct error err = { 0 };
    int r = dra_config_decode(o, &c, &err);
    must_say(r, &err);
    /* MPS: its limits in the daemon's units, within their bounds, not planned yet */
    if (r == 0 && c.sharing == DRA_SHARING_MPS &&
        (c.mps.thread_pct < -1 || c.mps.thread_pct > 100 || c.mps.pinned_mib == 0 ||
         c.mps.pinned_mib < -1 || c.mps.n_limits > DRA_MPS_LIMITS_MAX || c.mps.id[0]))
        abort();
    for (unsigned i = 0; r == 0 && i < c.mps.n_limits; i++)
        if (c.mps.limits[i].mib < 1)
            abort();
}

static void checkpoint(const unsigned char *data, size_t size)
{
    const char *dir = scratch_dir("fuzz-dra-ckpt-");
    char path[600];
    if ((size_t)snprintf(path, sizeof(path), "%s/" DRA_CKPT_FILE, dir) >= sizeof(path) ||
        write_file_atomic(path, data, size, 0600, false) < 0)
        abort();
    struct dra_checkpoint c;
    struct error err = { 0 }, discarded = { 0 };
    int r = dra_checkpoint_open(&c, dir, "boot", "gpu-node-1", &discarded, &err);
    must_say(r, &err);
    if (r == 1)
        must_say(-1, &discarded);
    if (r >= 0) {
        /* What is loaded is answered as it is: it must check out as a claim of this node. */
        for (size_t i = 0; i < c.n_claims; i++) {
            const struct dra_ckpt_claim *cl = &c.claims[i];
            if (!dra_claim_uid_valid(cl->uid) || !dra_claim_dns_label(cl->namespace_) ||
                !dra_claim_object_name_valid(cl->name) || cl->n_devices > DRA_CLAIM_MAX_RESULTS)
                abort();
            for (size_t j = 0; j < cl->n_devices; j++) {
                char *id = dra_cdi_share_device_id(cl->uid, cl->devices[j].device, cl->devices[j].share_id);
                if (cl->devices[j].share_id && (!dra_claim_share_id_valid(cl->devices[j].share_id) ||
                                                cl->devices[j].share_compute > 100))
                    abort();
                if (!streq(cl->devices[j].pool, "gpu-node-1") || !streq(cl->devices[j].cdi_id, id) ||
                    !dra_claim_dns_label(cl->devices[j].device) || !dra_claim_dns_label(cl->devices[j].request))
                    abort();
                free(id);
            }
        }
        dra_checkpoint_clear(&c);
    }
    scratch_remove(dir);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    if (size < 1 || size > (1 << 20))
        return 0;
    unsigned char which = data[0] % 3;
    data++;
    size--;
    if (which == 2) {
        checkpoint(data, size);
        return 0;
    }
    json_t *o = json_loadb((const char *)data, size, 0, NULL);
    if (!o)
        return 0;
    if (which == 0)
        claim(o);
    else
        config(o);
    json_decref(o);
    return 0;
}
