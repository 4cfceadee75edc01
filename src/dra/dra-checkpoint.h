/* The prepared claims of this node, on disk: <kubelet plugins dir>/gpu.nvidia.com/
 * checkpoint.json (NVIDIA's path), so that a restarted plugin answers the kubelet's
 * repeated NodePrepareResources with what it prepared before, and unprepares what it no
 * longer remembers in memory.
 *
 * Our own format (version 1), not NVIDIA's v1/v2 layout: that one embeds the claim's
 * whole status and its Go structs' per-type config state, with checksums over Go's JSON
 * encoding; nothing but the plugin that wrote a checkpoint reads it, and moving a node
 * between NVIDIA's driver and this plugin means draining it first (the two would each
 * see the other's claims as unknown anyway). It records per claim UID its state
 * (PrepareStarted, PrepareCompleted), name and namespace, and the prepared devices:
 * device, pool, base request, CDI ID, admin access, the applied sharing config (of MPS only
 * its control daemon's id, all an unprepare needs: dra-mps.h) and, for a
 * DynamicMIG placement, the MIG device made for it (parent, GPU/compute instance, UUID); and
 * the node's boot id (/proc/sys/kernel/random/boot_id): a checkpoint of another boot
 * describes CDI files and device state that a reboot made stale, and is discarded.
 *
 * Written after every change so that a killed plugin leaves it whole, the old one or the
 * new one, never missing: written into a spare beside it, checkpoint.json.old (the one
 * before the last), that trades names with it atomically (core/fs.h, fs_write_exchange);
 * not fsynced (dra-checkpoint.c, replace(), says why);
 * bounded (DRA_CKPT_MAX_CLAIMS claims, DRA_CKPT_MAX_BYTES): a change that would pass a
 * bound is refused with an error and the checkpoint stays as it was.
 * What a node may have put there is moved aside, never trusted, and the plugin goes on
 * (core/fs.h, fs_move_aside: the previous one of a name is replaced; a person looks):
 * - at start, a checkpoint.json that does not parse, passes its bound, or has a record
 *   that does not check out as a claim of this node (its namespace, name, devices and
 *   requests Kubernetes names, its pool this node's, its CDI IDs its own: they are
 *   answered to the kubelet as they are) goes to checkpoint.json.corrupt, and the plugin
 *   starts with no prepared claims;
 * - at start or at any save, what is not a regular file at either name (a FIFO, a
 *   symlink, a directory, ...) goes to <name>.not-regular: never opened blocking, never
 *   followed. A save moves it and goes on, saying so in one warning.
 * Loop-only, like its only user dra-claims. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "dra/dra-config.h"
#include "dra/dra-types.h"

#define DRA_CKPT_FILE "checkpoint.json"
#define DRA_CKPT_SPARE_SUFFIX ".old"
#define DRA_CKPT_MAX_CLAIMS 4096
#define DRA_CKPT_MAX_BYTES (4u << 20)
#define DRA_CKPT_BOOT_ID_MAX 64

enum dra_ckpt_state { DRA_CKPT_PREPARE_STARTED, DRA_CKPT_PREPARE_COMPLETED };

/* DynamicMIG: the MIG device made for a placement, recorded so that Unprepare destroys
 * exactly it (and nothing someone made in its place since). */
struct dra_ckpt_mig {
    char *parent_uuid, *uuid;        /* "GPU-...", "MIG-..." */
    unsigned gi_id, ci_id;
};

struct dra_ckpt_device {
    char *device, *pool, *request, *cdi_id;
    bool admin_access;
    struct dra_config config;
    struct dra_ckpt_mig mig;         /* uuid NULL: none made for it */
    /* a share of a device offered with consumable capacity (share_id NULL: the whole
     * device) and what it holds of it: bytes of memory, percent of the SMs */
    char *share_id;
    uint64_t share_memory;
    unsigned share_compute;
};

struct dra_ckpt_claim {
    char *uid, *namespace_, *name;
    enum dra_ckpt_state state;
    struct dra_ckpt_device *devices;
    size_t n_devices;
};

struct dra_checkpoint {
    char *dir;                       /* <plugins dir>/gpu.nvidia.com: MPS's desired states too */
    char *path, *spare_path;
    char boot_id[DRA_CKPT_BOOT_ID_MAX];
    struct dra_ckpt_claim *claims;
    size_t n_claims, alloc;
};

/* This boot's id, trimmed, from path (NULL: /proc/sys/kernel/random/boot_id).
 * 0 or -errno with err naming the file. */
int dra_checkpoint_boot_id(const char *path, char out[DRA_CKPT_BOOT_ID_MAX], struct error *err);

/* Opens <dir>/checkpoint.json for boot boot_id, of the node whose pool is `pool` (dir
 * created if missing). Returns 0 with what the file holds (or nothing: no file yet), 1
 * when the file was discarded (another boot's, or moved aside as above): `discarded` then
 * says which, for the caller to log; -errno (err set) when dir cannot be made, or the
 * file cannot be read or moved aside. */
int dra_checkpoint_open(struct dra_checkpoint *c, const char *dir, const char *boot_id,
                        const char *pool, struct error *discarded, struct error *err);
void dra_checkpoint_clear(struct dra_checkpoint *c);

/* The record of uid, or NULL. Valid until the next change. */
const struct dra_ckpt_claim *dra_checkpoint_find(const struct dra_checkpoint *c, const char *uid);
/* Records *claim (taken over: *claim is zeroed), replacing a record of the same UID, and
 * saves. On failure (err set) nothing changes, and *claim is still the caller's. A save
 * that set a file aside logs its warning itself and succeeds (as do the two below). */
int dra_checkpoint_put(struct dra_checkpoint *c, struct dra_ckpt_claim *claim, struct error *err);
/* Marks the record of uid PrepareCompleted and saves (-ENOENT: not recorded). On failure
 * nothing changes. */
int dra_checkpoint_complete(struct dra_checkpoint *c, const char *uid, struct error *err);
/* Forgets uid (not recorded: 0) and saves. On failure nothing changes. */
int dra_checkpoint_remove(struct dra_checkpoint *c, const char *uid, struct error *err);

/* Records (in memory: the next save writes it) the MIG device made for `device` of uid's
 * record (copied; into each entry naming it: shares of one placement; NULL: none any
 * more). -ENOENT: no such record or device. */
int dra_checkpoint_set_mig(struct dra_checkpoint *c, const char *uid, const char *device,
                           const struct dra_ckpt_mig *mig, struct error *err);
/* Sets (in memory, as above) the sharing config of device k of uid's record: a placement's
 * share, whose MPS daemon is known once its MIG device is made. -ENOENT: no such one. */
int dra_checkpoint_set_config(struct dra_checkpoint *c, const char *uid, size_t k,
                              const struct dra_config *cfg, struct error *err);

void dra_ckpt_claim_clear(struct dra_ckpt_claim *claim);

/* The answer of a prepared claim from its record (res's uid and error untouched): what a
 * repeated Prepare returns. */
void dra_ckpt_claim_result(const struct dra_ckpt_claim *rec, struct dra_claim_result *res);
