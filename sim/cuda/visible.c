/* The GPUs and MIG devices a process can use (visible.h). NVML is loaded at run time, by
 * its SONAME, exactly as the real libcuda and nvidia-smi load it: a container without a
 * libnvidia-ml.so.1 the loader can find must fail here the way it fails on a GPU node. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvml/nvml-abi.h"
#include "sim-caps.h"
#include "visible.h"

struct nvml_fns {
    __typeof__(&nvmlInit_v2) init;
    __typeof__(&nvmlShutdown) shutdown;
    __typeof__(&nvmlErrorString) error_string;
    __typeof__(&nvmlSystemGetDriverVersion) driver_version;
    __typeof__(&nvmlSystemGetCudaDriverVersion) cuda_version;
    __typeof__(&nvmlDeviceGetCount_v2) count;
    __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index;
    __typeof__(&nvmlDeviceGetMinorNumber) minor;
    __typeof__(&nvmlDeviceGetName) name;
    __typeof__(&nvmlDeviceGetUUID) uuid;
    __typeof__(&nvmlDeviceGetMemoryInfo) memory;
    __typeof__(&nvmlDeviceGetMigMode) mig_mode;
    __typeof__(&nvmlDeviceGetMaxMigDeviceCount) max_migs;
    __typeof__(&nvmlDeviceGetMigDeviceHandleByIndex) mig_by_index;
    __typeof__(&nvmlDeviceGetGpuInstanceId) gi_id;
    __typeof__(&nvmlDeviceGetComputeInstanceId) ci_id;
};

bool vis_can_open(const char *rel)
{
    const char *root = getenv(VIS_DEV_ROOT_ENV);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root && *root ? root : "/dev", rel);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    return errno == ENXIO || errno == ENODEV;
}

static int load_fns(void *lib, struct nvml_fns *f, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(field, fn) { #fn, offsetof(struct nvml_fns, field) }
        SYM(init, nvmlInit_v2),
        SYM(shutdown, nvmlShutdown),
        SYM(error_string, nvmlErrorString),
        SYM(driver_version, nvmlSystemGetDriverVersion),
        SYM(cuda_version, nvmlSystemGetCudaDriverVersion),
        SYM(count, nvmlDeviceGetCount_v2),
        SYM(by_index, nvmlDeviceGetHandleByIndex_v2),
        SYM(minor, nvmlDeviceGetMinorNumber),
        SYM(name, nvmlDeviceGetName),
        SYM(uuid, nvmlDeviceGetUUID),
        SYM(memory, nvmlDeviceGetMemoryInfo),
        SYM(mig_mode, nvmlDeviceGetMigMode),
        SYM(max_migs, nvmlDeviceGetMaxMigDeviceCount),
        SYM(mig_by_index, nvmlDeviceGetMigDeviceHandleByIndex),
        SYM(gi_id, nvmlDeviceGetGpuInstanceId),
        SYM(ci_id, nvmlDeviceGetComputeInstanceId),
#undef SYM
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) {
            snprintf(err, errlen, "dlsym %s in libnvidia-ml.so.1: %s", syms[i].name, dlerror());
            return VIS_ERR_LIBRARY;
        }
        memcpy((char *)f + syms[i].off, &p, sizeof(p));
    }
    return 0;
}

/* The MIG devices of a GPU in MIG mode whose capability nodes open. A slot NVML cannot
 * answer for is left out, as CUDA leaves out what it cannot use. */
static void load_migs(const struct nvml_fns *f, nvmlDevice_t gpu, struct vis_gpu *g)
{
    unsigned max = 0;
    if (f->max_migs(gpu, &max) != NVML_SUCCESS || max == 0)
        return;
    g->migs = calloc(max, sizeof(*g->migs));
    if (!g->migs)
        return;
    for (unsigned j = 0; j < max; j++) {
        nvmlDevice_t h;
        struct vis_mig *m = &g->migs[g->n_migs];
        nvmlMemory_t mem;
        if (f->mig_by_index(gpu, j, &h) != NVML_SUCCESS || f->gi_id(h, &m->gi) != NVML_SUCCESS ||
            f->ci_id(h, &m->ci) != NVML_SUCCESS)
            continue;
        char gi_node[64], ci_node[64];
        snprintf(gi_node, sizeof(gi_node), "nvidia-caps/nvidia-cap%u", sim_cap_gi_minor(g->minor, m->gi));
        snprintf(ci_node, sizeof(ci_node), "nvidia-caps/nvidia-cap%u", sim_cap_ci_minor(g->minor, m->gi, m->ci));
        if (!vis_can_open(gi_node) || !vis_can_open(ci_node))
            continue;
        if (f->name(h, m->name, sizeof(m->name)) != NVML_SUCCESS ||
            f->uuid(h, m->uuid, sizeof(m->uuid)) != NVML_SUCCESS || f->memory(h, &mem) != NVML_SUCCESS)
            continue;
        m->mem_total = mem.total;
        const char *p = strstr(m->name, " MIG ");
        m->profile = p ? p + 5 : m->name;
        g->n_migs++;
    }
}

static int load_node(const struct nvml_fns *f, struct vis_node *node, char *err, size_t errlen)
{
    unsigned n = 0;
    nvmlReturn_t r = f->driver_version(node->driver_version, sizeof(node->driver_version));
    if (r == NVML_SUCCESS)
        r = f->count(&n);
    if (r != NVML_SUCCESS) {
        snprintf(err, errlen, "libnvidia-ml.so.1: driver version or device count: %s", f->error_string(r));
        return VIS_ERR_QUERY;
    }
    if (f->cuda_version(&node->cuda_version) != NVML_SUCCESS)
        node->cuda_version = 0;
    node->gpus = calloc(n ? n : 1, sizeof(*node->gpus));
    if (!node->gpus) {
        snprintf(err, errlen, "libnvidia-ml.so.1: out of memory for %u devices", n);
        return VIS_ERR_QUERY;
    }
    for (unsigned i = 0; i < n; i++) {
        struct vis_gpu *g = &node->gpus[node->n_gpus];
        nvmlDevice_t h;
        nvmlMemory_t mem;
        char dev[32];
        /* A GPU NVML cannot describe (lost, failing) is not one a program can use. */
        if (f->by_index(i, &h) != NVML_SUCCESS || f->minor(h, &g->minor) != NVML_SUCCESS)
            continue;
        snprintf(dev, sizeof(dev), "nvidia%u", g->minor);
        if (!vis_can_open(dev))
            continue;
        if (f->name(h, g->name, sizeof(g->name)) != NVML_SUCCESS ||
            f->uuid(h, g->uuid, sizeof(g->uuid)) != NVML_SUCCESS || f->memory(h, &mem) != NVML_SUCCESS)
            continue;
        g->mem_total = mem.total;
        unsigned cur = 0, pending = 0;
        g->mig_enabled = f->mig_mode(h, &cur, &pending) == NVML_SUCCESS && cur == NVML_DEVICE_MIG_ENABLE;
        if (g->mig_enabled)
            load_migs(f, h, g);
        node->n_gpus++;
    }
    return 0;
}

int vis_load(struct vis_node *node, char *err, size_t errlen)
{
    memset(node, 0, sizeof(*node));
    /* Never closed: the simulator is linked -z nodelete (its control thread), and the
     * real library is not one a process unloads either. */
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "dlopen libnvidia-ml.so.1: %s", dlerror());
        return VIS_ERR_LIBRARY;
    }
    struct nvml_fns f;
    int r = load_fns(lib, &f, err, errlen);
    if (r < 0)
        return r;
    nvmlReturn_t nr = f.init();
    if (nr != NVML_SUCCESS) {
        node->nvml_error = (int)nr;
        snprintf(err, errlen, "libnvidia-ml.so.1: nvmlInit_v2: %s", f.error_string(nr));
        return VIS_ERR_INIT;
    }
    r = load_node(&f, node, err, errlen);
    f.shutdown();
    if (r < 0)
        vis_free(node);
    return r;
}

void vis_free(struct vis_node *node)
{
    for (unsigned i = 0; i < node->n_gpus; i++)
        free(node->gpus[i].migs);
    free(node->gpus);
    node->gpus = NULL;
    node->n_gpus = 0;
}
