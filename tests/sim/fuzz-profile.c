/* libFuzzer target for the simulator's profile parser. Any input must give either a
 * node or a single "<name>:<line>: ..." message, never a crash or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    struct sim_node *nd = sim_profile_parse("fuzz", data, size, err, sizeof(err));
    if (nd)
        sim_node_free(nd);
    else if (strncmp(err, "fuzz:", 5) || strchr(err, '\n'))
        abort();
    return 0;
}
