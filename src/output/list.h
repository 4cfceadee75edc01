/* `gpu-device-plugin list`: what this node would advertise, as a table or JSON. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "node/inventory.h"
#include "policy/resources.h"

/* Health of a device for the listing; *reason may be set to a short text. */
typedef bool (*list_health_fn)(void *userdata, const struct rs_device *d, const char **reason);

int list_print_table(FILE *f, const struct inventory *inv, const struct resource_set *rs,
                     list_health_fn health, void *userdata);
int list_print_json(FILE *f, const struct inventory *inv, const struct resource_set *rs,
                    list_health_fn health, void *userdata);
