/* The CDI spec of one prepared claim, named as NVIDIA's DRA driver names it so that
 * tooling written for it finds ours: kind "k8s.gpu.nvidia.com/claim", one device
 * "<claim UID>-<device name>" per prepared device, file
 * "<cdi root>/k8s.gpu.nvidia.com-claim_<claim UID>.yaml". Each device carries the edits
 * the device plugin's own CDI spec gives that GPU or MIG device, and the spec the same
 * common edits (output/cdi.c: one home for both).
 *
 * The file holds JSON, which is YAML: the CDI library (tags.cncf.io/container-device-
 * interface, as containerd 1.7 and CRI-O vendor it) reads a ".yaml" spec through
 * sigs.k8s.io/yaml, whose YAML parser takes JSON's flow style as it is; NVIDIA's name
 * ends in ".yaml", and keeping it lets its cleanup and ours recognise the same files. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "config/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "dra/dra-devices.h"
#include "node/inventory.h"

/* "k8s.gpu.nvidia.com/claim=<uid>-<device>" (malloc'd). */
char *dra_cdi_device_id(const char *uid, const char *device);
/* A share's: "...=<uid>-<device>-<shareID>", so that two shares of one device in one claim
 * are two CDI devices; share NULL: dra_cdi_device_id's (malloc'd). */
char *dra_cdi_share_device_id(const char *uid, const char *device, const char *share);
/* "k8s.gpu.nvidia.com-claim_<uid>.yaml" (malloc'd). */
char *dra_cdi_file_name(const char *uid);

/* The spec for claim uid with the n devices devs (of inv). made[i] (NULL: none) is the MIG
 * device made for devs[i] when that is a DynamicMIG placement (dra-mig.h). common: the
 * spec-wide edits, cdi_common_edits() made earlier (borrowed; NULL: made now). NULL (err
 * set, naming the device) when a MIG device's capability nodes are unknown. New
 * reference. */
json_t *dra_cdi_spec(const struct config *cfg, const struct inventory *inv, const char *uid,
                     const struct dra_device *const *devs, const struct inv_mig *made, size_t n,
                     json_t *common, struct error *err);

/* The claim's file created under cdi_root (made if missing), for dra_cdi_write to fill:
 * a Prepare makes it while the claim's GET is in flight. 0 or -errno, err naming it. */
int dra_cdi_stage(const char *cdi_root, const char *uid, struct fs_stage *st, struct error *err);

/* Validates spec (cdi_validate) and writes it atomically as the claim's file under
 * cdi_root, into st when dra_cdi_stage opened it (else made now), without fsync
 * (dra-cdi.c says why). st is closed either way. 0 or -errno, err naming the file. */
int dra_cdi_write(const char *cdi_root, const char *uid, json_t *spec, struct fs_stage *st,
                  struct error *err);
/* Removes the temporary files of specs staged by an earlier run that ended before it
 * wrote them (killed while a claim's GET was in flight): only names dra_cdi_stage makes.
 * The number removed; a root that cannot be read has none. */
int dra_cdi_sweep(const char *cdi_root);
/* Removes the claim's file; a missing one is fine. 0 or -errno, err naming the file. */
int dra_cdi_remove(const char *cdi_root, const char *uid, struct error *err);
