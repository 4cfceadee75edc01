/* Hand-built inventories and configs for the output/policy tests, shaped like the
 * reference's mock profiles (8×A100-40GB, 8×H100-80GB, 4×T4). */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"
#include "node/inventory.h"

#include "tests/common/check.h"


enum fx_model { FX_A100, FX_H100, FX_T4 };

/* n GPUs of a model; GPU i: uuid GPU-<model>-0000-0000-0000-00000000000<i>, minor i,
 * NUMA node i / (n/2) (T4: -1 = none). */
void fx_inventory(struct inventory *inv, enum fx_model model, unsigned n);
/* Turn MIG on for GPU g and add MIG devices with these profiles (may be none). UUIDs
 * MIG-<g>-<m>...; gi_id m+1, ci_id 0; cap minors left -1 (read from mig-minors). */
void fx_enable_mig(struct inventory *inv, unsigned g, const char *const *profiles, size_t n);
void fx_inventory_free(struct inventory *inv);

/* A new scratch directory (tests/common/scratch.h) with <dir>/driver/nvidia-caps/mig-minors
 * for gpu 0..15, gi 0..15, ci 0..7: gi access minor = 1000 + gpu*100 + gi; ci access
 * minor = 5000 + gpu*1000 + gi*10 + ci. The caller frees the string; fx_rmtree removes it. */
char *fx_proc_root(void);

/* config_init_defaults + a tmp proc root. */
void fx_config(struct config *c, const char *proc_root);
void fx_add_replicated(struct config_sharing *s, const char *name, const char *rename, int replicas);
/* Removes a scratch directory (fx_proc_root, scratch_dir) and all it holds. */
void fx_rmtree(const char *dir);
