/* nvidia-smi stand-in for the driver root nvml-sim-render --driver-root writes: `-L` (the
 * list a container check reads) and, without arguments, a one-line header and the same
 * list. The devices are visible.h's: NVML's GPUs whose /dev/nvidia<minor> this process can
 * open, and under a GPU in MIG mode the MIG devices whose capability nodes open. Exit
 * codes are the real tool's for the cases it has: 6 no device, 2 bad arguments, 12 NVML
 * not loadable, 9 the driver not loaded. Nothing else (in particular not compute-policy:
 * tests that drive that have their own recording stand-in). */
#include <stdio.h>
#include <string.h>

#include "nvml/nvml-abi.h"
#include "visible.h"

static void list(const struct vis_node *node)
{
    for (unsigned i = 0; i < node->n_gpus; i++) {
        const struct vis_gpu *g = &node->gpus[i];
        printf("GPU %u: %s (UUID: %s)\n", i, g->name, g->uuid);
        for (unsigned j = 0; j < g->n_migs; j++)
            printf("  MIG %-11s Device %2u: (UUID: %s)\n", g->migs[j].profile, j, g->migs[j].uuid);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nvidia-smi [-L | --list-gpus]   (simulated: only these)\n");
}

int main(int argc, char **argv)
{
    int listing = 0;
    if (argc == 2 && (strcmp(argv[1], "-L") == 0 || strcmp(argv[1], "--list-gpus") == 0)) {
        listing = 1;
    } else if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    } else if (argc != 1) {
        fprintf(stderr, "nvidia-smi (simulated): unsupported arguments starting at '%s'; run 'nvidia-smi -h'\n",
                argv[1]);
        return 2;
    }
    struct vis_node node;
    char err[512];
    int r = vis_load(&node, err, sizeof(err));
    if (r == VIS_ERR_LIBRARY) {
        fprintf(stderr, "nvidia-smi (simulated): cannot use the NVML library: %s\n", err);
        return 12;
    }
    if (r == VIS_ERR_INIT) {
        fprintf(stderr, "nvidia-smi (simulated): cannot talk to the driver: %s\n", err);
        return node.nvml_error == NVML_ERROR_DRIVER_NOT_LOADED ? 9
               : node.nvml_error == NVML_ERROR_NO_PERMISSION ? 4
                                                              : 255;
    }
    if (r < 0) {
        fprintf(stderr, "nvidia-smi (simulated): %s\n", err);
        return 255;
    }
    if (node.n_gpus == 0) {
        printf("No devices were found\n");
        vis_free(&node);
        return 6;
    }
    if (!listing)
        printf("NVIDIA-SMI %s  Driver Version: %s  CUDA Version: %d.%d\n", node.driver_version,
               node.driver_version, node.cuda_version / 1000, node.cuda_version % 1000 / 10);
    list(&node);
    vis_free(&node);
    return 0;
}
