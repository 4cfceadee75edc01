/* GPU shares (consumable capacity, KEP-5075; docs/dra.md "GPU shares"): a full GPU, an
 * existing MIG device or a DynamicMIG placement offered with allowMultipleAllocations, each claim holding a share the
 * scheduler accounted (consumedCapacity: memory, compute) under a shareID. What a Prepare
 * checks and writes for them: the share's record, that the shares prepared on a device
 * never exceed what it has (a stale scheduler or a forged claim would), and the spec's CDI
 * device names (the shareID in them) and the per-share MPS limits in the container's
 * environment. Pure: no I/O. */
#pragma once

#include <jansson.h>

#include "config/config.h"
#include "core/error.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claim.h"
#include "dra/dra-devices.h"
#include "node/inventory.h"

/* The share fields of rec (the record of allocation a on device d): the shareID and the
 * amounts (consumedCapacity, else the policy's defaults), checked against the device.
 * -EINVAL (err) for a share of a device not offered as shares, a shared device allocated
 * without a shareID, or an amount outside the device's policy. */
int dra_shares_record(const struct inventory *inv, const struct dra_device *d,
                      const struct dra_alloc *a, struct dra_ckpt_device *rec, struct error *err);
/* Whether rec's shares fit beside every other claim's in ckpt (other than rec's own UID):
 * per device, the memory and the compute of all its shares at most its capacity (the
 * device's whole MiB, 100 percent). -ENOSPC (err naming the device and the numbers). */
int dra_shares_fit(const struct inventory *inv, const struct dra_device_set *set,
                   const struct dra_checkpoint *ckpt, const struct dra_ckpt_claim *rec,
                   struct error *err);
/* Rewrite spec (dra_cdi_spec's for rec) for rec's shares: each share its own CDI device
 * "<uid>-<device>-<shareID>" (two shares of one device in one claim are two), and, when the
 * claim has shares, the MPS client's limits claim-wide: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
 * (per device, by its index in PCI bus order, which CUDA_DEVICE_ORDER=PCI_BUS_ID makes the
 * container's order; MIG devices of one GPU by UUID) and CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
 * (the smallest share's). The spec's own containerEdits are copied before they change (they may be shared). Each
 * share's device gets the hooks that put its memory as a hard limit on its container's
 * cgroup where the driver and host allow (dra-share-hook.h, docs/cdi-hook.md). */
void dra_shares_spec(json_t *spec, const struct config *cfg, const struct inventory *inv,
                     const struct dra_device_set *set, const struct dra_ckpt_claim *rec);
/* The first driver branch whose MPS has v3 namespaces (nvidia-cuda-mps-control -p 3), the
 * branch of the per-cgroup memory limits too (docs/dra.md, "What bounds a share"). */
#define DRA_SHARES_MPS_V3_DRIVER 615
/* Whether the node's driver (inv->driver_version) is of that branch or later. */
bool dra_shares_mps_v3(const struct inventory *inv);
/* The MPS v3 namespace of share share_id of claim uid: "s" and 16 hex digits of the
 * SHA-256 of "<uid>/<shareID>" (a namespace name is lower-case letters, digits and '_',
 * at most 64; the claim's UID in it: a forged claim reusing another's shareID gets a
 * namespace of its own). */
void dra_shares_mps_ns(const char *uid, const char *share_id, char out[DRA_MPS_NS_MAX]);
/* The sharing config of share (a recorded share of device d, whose UUID is uuid: a
 * placement's, that of the MIG device made for it; in claim uid): MPS, through the
 * device's one control daemon ("share-<16 hex of the SHA-256 of its UUID>", every share
 * of the device uses it; the last one's unprepare stops it), with no daemon-wide limits;
 * a MIG device's is a MigDeviceConfig, its MIG UUID the daemon's device. On an
 * r615+ driver the share also gets its own v3 namespace in that daemon (dra_shares_mps_ns)
 * holding its memory (whole MiB) and compute (percent) as the daemon's limits; before,
 * its limits are its client's (above) and its cgroup's. */
void dra_shares_mps(const struct inventory *inv, const struct dra_device *d, const char *uuid,
                    const char *uid, const struct dra_ckpt_device *share, struct dra_config *out);
/* Whether id is a shared device's daemon id ("share-" and 16 lower-case hex digits). */
bool dra_shares_mps_id_valid(const char *id);
/* Whether two recorded devices (names a, b; share IDs sa, sb, NULL: whole) may be held at
 * once: two shares of one device may. */
bool dra_shares_coexist(const char *a, const char *sa, const char *b, const char *sb);
