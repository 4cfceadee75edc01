/* Fuzz target for what the kubelet (or anyone on the plugin socket) can send the
 * DevicePlugin service: the first byte picks a request type, the rest is decoded with
 * protobuf-c and, when it decodes, run through the same policy code the service uses
 * (Allocate responses, preferred placement on full GPUs and on replicas). Nothing may
 * crash, leak or answer without a message on failure. */
#include <stdio.h>

#include "api.pb-c.h"
#include "output/allocate.h"
#include "kubelet/dp_service.h"
#include "policy/resources.h"
#include "policy/topo.h"
#include "tests/output/fixtures.h"


struct node {
    struct inventory inv;
    struct config cfg;
    struct resource_set plain, shared;
    struct topo_model topo;
};

static struct node *node(void)
{
    static struct node n;
    static bool ready;
    if (ready)
        return &n;
    struct error err = { 0 };
    fx_inventory(&n.inv, FX_A100, 8);
    fx_config(&n.cfg, "/nonexistent");
    if (resources_build(&n.inv, &n.cfg, &n.plain, &err) < 0 ||
        topo_model_build(&n.inv, &n.topo) < 0)
        abort();
    struct config shared_cfg;
    fx_config(&shared_cfg, "/nonexistent");
    fx_add_replicated(&shared_cfg.time_slicing, "nvidia.com/gpu", NULL, 4);
    if (resources_build(&n.inv, &shared_cfg, &n.shared, &err) < 0)
        abort();
    config_free(&shared_cfg);
    ready = true;
    return &n;
}

static void allocate(const struct rs_resource *r, const struct config *cfg, const uint8_t *d,
                     size_t len)
{
    V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, len, d);
    if (!req)
        return;
    for (size_t i = 0; i < req->n_container_requests; i++) {
        V1beta1__ContainerAllocateRequest *c = req->container_requests[i];
        struct error err = { 0 };
        V1beta1__ContainerAllocateResponse *resp =
            alloc_container(r, cfg, (const char *const *)c->devices_ids, c->n_devices_ids, &err);
        if (!resp && !err.msg[0])
            abort();
        if (resp) {
            /* the answer must encode */
            size_t n = v1beta1__container_allocate_response__get_packed_size(resp);
            uint8_t *buf = malloc(n ? n : 1);
            v1beta1__container_allocate_response__pack(resp, buf);
            free(buf);
        }
        alloc_response_free(resp);
    }
    v1beta1__allocate_request__free_unpacked(req, NULL);
}

/* Through the service's own per-container handler. */
static void preferred(const struct rs_resource *r, const struct config *cfg,
                      const struct topo_model *topo, const uint8_t *d, size_t len)
{
    V1beta1__PreferredAllocationRequest *req =
        v1beta1__preferred_allocation_request__unpack(NULL, len, d);
    if (!req)
        return;
    struct dp_context ctx = { .resource = r, .config = cfg, .topo = topo };
    for (size_t i = 0; i < req->n_container_requests; i++) {
        V1beta1__ContainerPreferredAllocationRequest *c = req->container_requests[i];
        const char **ids = NULL;
        size_t n = 0;
        struct error err = { 0 };
        int rc = dp_preferred_container(&ctx, c, &ids, &n, &err);
        if (rc < 0 && !err.msg[0])
            abort();
        if (rc == 0 && n > 0 && (int)n != c->allocation_size)
            abort(); /* an answer has exactly the requested size */
        free(ids);
    }
    v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct node *n = node();
    if (size < 1)
        return 0;
    const uint8_t *d = data + 1;
    size_t len = size - 1;
    switch (data[0] % 5) {
    case 0:
        allocate(&n->plain.resources[0], &n->cfg, d, len);
        break;
    case 1:
        allocate(&n->shared.resources[0], &n->cfg, d, len);
        break;
    case 2:
        preferred(&n->plain.resources[0], &n->cfg, &n->topo, d, len);
        break;
    case 3:
        preferred(&n->shared.resources[0], &n->cfg, NULL, d, len);
        break;
    default: {
        V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, d);
        if (r)
            v1beta1__register_request__free_unpacked(r, NULL);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, d);
        if (l)
            v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        break;
    }
    }
    return 0;
}
