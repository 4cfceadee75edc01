/* Allocate: validate one container's device IDs against a resource and build its
 * ContainerAllocateResponse exactly as the reference (§2.7 validation, §5 steps in
 * order). Pure over (resource, config, ids) apart from stat()ing the optional control
 * nodes for pass-device-specs and drawing a random UUID for the CDI annotation key.
 *
 * Ownership: the response and everything it points to are heap-allocated by this
 * module; the service packs it into an AllocateResponse and frees it with
 * alloc_response_free() (== protobuf_c_message_free_unpacked(&resp->base, NULL)). */
#pragma once

#include <stddef.h>

#include "api.pb-c.h"
#include "config/config.h"
#include "core/error.h"
#include "policy/resources.h"

#define ALLOC_CDI_VENDOR "k8s.device-plugin.nvidia.com"
#define ALLOC_MPS_CONTAINER_ROOT "/mps"
#define ALLOC_VOLUME_MOUNTS_ROOT "/var/run/nvidia-container-devices"
#define ALLOC_IMEX_CHANNEL_DIR "/dev/nvidia-caps-imex-channels"

/* The optional control nodes (/dev/nvidiactl, nvidia-uvm, nvidia-uvm-tools,
 * nvidia-modeset, in the reference's order) that exist under cfg->dev_root or on the
 * host: both the pass-device-specs answer and the CDI spec list these. Fills out,
 * returns how many. */
#define ALLOC_CONTROL_NODES_MAX 4
size_t alloc_control_nodes(const struct config *cfg, const char *out[ALLOC_CONTROL_NODES_MAX]);

/* The reference's ValidateRequest: unknown device first, then the shared > 1 rule.
 * err->msg is the reference's full message ("invalid allocation request for ..."). */
int alloc_validate(const struct rs_resource *r, const char *const *ids, size_t n_ids,
                   struct error *err);

/* Validate, then build. NULL (err set) on a validation failure. */
V1beta1__ContainerAllocateResponse *alloc_container(const struct rs_resource *r,
                                                    const struct config *cfg,
                                                    const char *const *ids, size_t n_ids,
                                                    struct error *err);
void alloc_response_free(V1beta1__ContainerAllocateResponse *resp);

/* MPS paths for a resource (§5 step 2 / §9), also what a readiness check needs:
 *   pipe_dir       = /mps/<resource>/pipe          (CUDA_MPS_PIPE_DIRECTORY in the container)
 *   host_pipe_dir  = <mps_root>/<resource>/pipe
 *   host_shm       = <mps_root>/shm                (mounted at /dev/shm)
 *   host_started   = <mps_root>/<resource>/.started (written by the MPS daemon) */
struct alloc_mps {
    char *pipe_dir, *host_pipe_dir, *host_shm, *host_started;
};
/* -EINVAL (err set) if cfg has no mps_root. */
int alloc_mps_paths(const struct rs_resource *r, const struct config *cfg, struct alloc_mps *out,
                    struct error *err);
void alloc_mps_clear(struct alloc_mps *m);

/* "<root>/<path>" with exactly one slash between; root "" or "/" gives path. */
char *alloc_join_root(const char *root, const char *path);
