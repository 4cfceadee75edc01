/* `gpu-device-plugin list`: what this node would advertise, as a table or JSON. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "node/inventory.h"
#include "policy/resources.h"

/* Which configuration the listing is of: the text's first line ("Config: <description>")
 * and the JSON's "config" object. Borrowed strings. */
struct list_config {
    const char *description; /* "ts (node label nvidia.com/device-plugin.config=ts)",
                              * "flags and --config-file" */
    const char *name;        /* the per-node config ("" for the empty one); NULL: none */
    const char *how;         /* "node label", "default", "fallback named", ...,
                              * "flags and --config-file" */
    const char *source;      /* "node label <key>=<name>" or how; NULL: as how */
    const char *note;        /* why the label or the per-node config was not used; NULL */
    const char *file;        /* the config file read; NULL: none */
};

/* Health of a device for the listing; *reason may be set to a short text. */
typedef bool (*list_health_fn)(void *userdata, const struct rs_device *d, const char **reason);

int list_print_table(FILE *f, const struct list_config *c, const struct inventory *inv,
                     const struct resource_set *rs, list_health_fn health, void *userdata);
int list_print_json(FILE *f, const struct list_config *c, const struct inventory *inv,
                    const struct resource_set *rs, list_health_fn health, void *userdata);
