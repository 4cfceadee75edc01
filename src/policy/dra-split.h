/* Never the same GPU twice: a 1.34 scheduler counts the device plugin's nvidia.com/gpu
 * and DRA's devices separately and would hand one GPU out through both. With --dra each
 * GPU (with its MIG devices) is served by exactly one of the two APIs: by DRA, unless
 * --dra-device-plugin-gpus names it for the device plugin. Pure; both sides ask here. */
#pragma once
#include <stdbool.h>
#include "config/config.h"
#include "node/inventory.h"

/* True when DRA serves gpu (and the device plugin must not). */
bool dra_split_serves(const struct config *cfg, const struct inv_gpu *gpu);

/* Calls fn for each --dra-device-plugin-gpus entry that names no GPU of inv (a typo or a
 * GPU gone), so the caller can say so; such an entry keeps nothing from DRA. */
void dra_split_unmatched(const struct config *cfg, const struct inventory *inv,
                         void (*fn)(void *userdata, const char *entry), void *userdata);

/* The --dra-device-plugin-gpus entries of cfg less those naming a GPU of inv that
 * keep[g] holds for DRA (a prepared claim holds it: node-state.c), as a list to build the
 * device plugin's resources from. The array malloc'd (free() it alone), NULL-terminated;
 * its strings are cfg's. */
char **dra_split_without(const struct config *cfg, const struct inventory *inv,
                         const bool *keep);
