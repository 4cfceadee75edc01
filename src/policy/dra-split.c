/* Which API serves each GPU when DRA is on (dra-split.h). */
#include <stdio.h>

#include "core/macro.h"
#include "policy/dra-split.h"

/* An entry names a GPU by its NVML index or its UUID, as the config file's device lists
 * do (config-dra.c checked the form). */
static bool entry_names(const char *entry, const struct inv_gpu *gpu)
{
    char index[16];
    snprintf(index, sizeof(index), "%u", gpu->index);
    return streq(entry, index) || streq(entry, gpu->uuid);
}

bool dra_split_serves(const struct config *cfg, const struct inv_gpu *gpu)
{
    if (!cfg->dra.enabled)
        return false;
    for (char **e = cfg->dra.device_plugin_gpus; e && *e; e++)
        if (entry_names(*e, gpu))
            return false;
    return true;
}

void dra_split_unmatched(const struct config *cfg, const struct inventory *inv,
                         void (*fn)(void *userdata, const char *entry), void *userdata)
{
    if (!cfg->dra.enabled)
        return;
    for (char **e = cfg->dra.device_plugin_gpus; e && *e; e++) {
        bool found = false;
        for (size_t g = 0; g < inv->n_gpus && !found; g++)
            found = entry_names(*e, &inv->gpus[g]);
        if (!found)
            fn(userdata, *e);
    }
}

char **dra_split_without(const struct config *cfg, const struct inventory *inv,
                               const bool *keep)
{
    size_t n = 0;
    for (char **e = cfg->dra.device_plugin_gpus; e && *e; e++)
        n++;
    char **out = xcalloc(n + 1, sizeof(*out));
    n = 0;
    for (char **e = cfg->dra.device_plugin_gpus; e && *e; e++) {
        bool kept = false;
        for (size_t g = 0; g < inv->n_gpus && !kept; g++)
            kept = keep[g] && entry_names(*e, &inv->gpus[g]);
        if (!kept)
            out[n++] = *e;
    }
    return out;
}
