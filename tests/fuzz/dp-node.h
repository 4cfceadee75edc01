/* The simulated nodes of fuzz-dp (dp-node.c): each a hardware + config setup with its
 * resources and one running DevicePlugin service per resource. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "kubelet/dp_service.h"
#include "node/inventory.h"
#include "policy/resources.h"
#include "policy/topo.h"

struct dp_node {
    bool ready;
    const char *name;
    struct inventory inv;
    struct config cfg;
    struct resource_set rs;
    struct topo_model topo;
    struct dp_plugin **plugins;   /* one per rs.resources[] */
    unsigned health_mask;         /* device at position p is Unhealthy iff bit p % 8 */
};

/* Setup `which` (modulo the count), built and served on first use. */
struct dp_node *dp_node_get(unsigned which);
size_t dp_node_count(void);
/* The loop every service runs on. */
struct loop *dp_node_loop(void);
/* What the health callback answers for the device at position pos of a resource. */
bool dp_node_device_healthy(const struct dp_node *n, size_t pos);
/* Stop every service and free every node (the replay driver, before exit). */
void dp_node_free_all(void);
