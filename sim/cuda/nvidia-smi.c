/* nvidia-smi stand-in for the driver root nvml-sim-render --driver-root writes: `-L` (the
 * list a container check reads) and, without arguments, a one-line header and the same
 * list. The devices are visible.h's: NVML's GPUs whose /dev/nvidia<minor> this process can
 * open, and under a GPU in MIG mode the MIG devices whose capability nodes open. Exit
 * codes are the real tool's for the cases it has: 6 no device, 2 bad arguments, 12 NVML
 * not loadable, 9 the driver not loaded. Settings (nvidia-smi-set.c): `[-i <id>] -c <mode>`,
 * and in recording mode `compute-policy`.
 *
 * Recording mode: with MOCK_NVIDIA_SMI_LOG set, every invocation appends one line, its
 * arguments joined by spaces, to that file before anything else happens. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvidia-smi.h"
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

static void record(int argc, char **argv)
{
    const char *path = getenv(SMI_RECORD_ENV);
    if (!path || !*path)
        return;
    char line[8192];
    size_t n = 0;
    for (int i = 1; i < argc && n < sizeof(line); i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s", i > 1 ? " " : "", argv[i]);
    if (n >= sizeof(line) - 1)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, n) != (ssize_t)n)
        fprintf(stderr, "nvidia-smi (simulated): %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* The value of option `a` (argv[*i]) when it is `name` ("-i") or one of the long forms
 * ("--id=X", "--id X"): the value (advancing *i past a separate one), else NULL. */
static const char *opt(int argc, char **argv, int *i, const char *name, const char *lng)
{
    const char *a = argv[*i];
    size_t l = strlen(lng);
    if (strncmp(a, lng, l) == 0 && a[l] == '=')
        return a + l + 1;
    if ((strcmp(a, name) == 0 || strcmp(a, lng) == 0) && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

/* -i/-c and compute-policy: -1 when argv is not one of them, else the exit status. */
static int settings(int argc, char **argv)
{
    const char *ids = NULL, *mode = NULL, *slice = NULL, *v;
    int policy = argc > 1 && strcmp(argv[1], "compute-policy") == 0;
    for (int i = 1 + policy; i < argc; i++) {
        if ((v = opt(argc, argv, &i, "-i", "--id")))
            ids = v;
        else if (!policy && (v = opt(argc, argv, &i, "-c", "--compute-mode")))
            mode = v;
        else if (policy && (v = opt(argc, argv, &i, "--set-timeslice", "--set-timeslice")))
            slice = v;
        else
            return -1;
    }
    if (mode)
        return smi_compute_mode(ids, mode);
    /* compute-policy only records: nothing here keeps a time slice. */
    if (slice && getenv(SMI_RECORD_ENV) && *getenv(SMI_RECORD_ENV))
        return smi_timeslice(ids, slice);
    return -1;
}

int main(int argc, char **argv)
{
    int listing = 0;
    record(argc, argv);
    int set = settings(argc, argv);
    if (set >= 0)
        return set;
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
