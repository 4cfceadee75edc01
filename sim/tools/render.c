/* nvml-sim-render: build the host files a plugin reads next to NVML (sysfs NUMA
 * nodes, the nvidia-caps MIG minor table, /dev nodes, a driver root with the driver's
 * user-space stand-ins) from a simulator profile. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/macro.h"
#include "render-driver.h"
#include "sim-caps.h"
#include "sim-model.h"

/* Write len bytes of `data` to dir/name, creating dir. */
static int write_bytes(const char *dir, const char *name, const void *data, size_t len)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    _cleanup_free_ char *parent = xstrdup(path);
    *strrchr(parent, '/') = 0;
    int r = mkdir_p(parent, 0755);
    if (r < 0) {
        fprintf(stderr, "nvml-sim-render: mkdir %s: %s\n", parent, strerror(-r));
        return r;
    }
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, data, len) != (ssize_t)len) {
        fprintf(stderr, "nvml-sim-render: write %s: %s\n", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    return write_bytes(dir, name, text, strlen(text));
}

/* Per GPU: its NUMA node, and what the node labels read (the PCI class of a compute GPU,
 * the NVIDIA vendor id, a 256-byte config space as root reads it, without the vGPU
 * vendor capability: a bare-metal node). */
static int render_sysfs(const struct sim_node *nd, const char *root)
{
    for (unsigned i = 0; i < nd->n_devs; i++) {
        const struct sim_device *d = &nd->devs[i];
        char dir[128], name[160], val[16];
        snprintf(dir, sizeof(dir), "bus/pci/devices/%04x:%02x:%02x.%x", d->bdf.domain, d->bdf.bus,
                 d->bdf.device, d->bdf.function);
        uint8_t config[256] = { 0xde, 0x10 };
        snprintf(name, sizeof(name), "%s/class", dir);
        if (write_file(root, name, "0x030200\n") < 0)
            return -EIO;
        snprintf(name, sizeof(name), "%s/vendor", dir);
        if (write_file(root, name, "0x10de\n") < 0)
            return -EIO;
        snprintf(name, sizeof(name), "%s/config", dir);
        if (write_bytes(root, name, config, sizeof(config)) < 0)
            return -EIO;
        if (d->numa_node < 0)
            continue;
        snprintf(name, sizeof(name), "%s/numa_node", dir);
        snprintf(val, sizeof(val), "%d\n", d->numa_node);
        if (write_file(root, name, val) < 0)
            return -EIO;
    }
    return 0;
}

static int render_proc(const struct sim_node *nd, const char *root)
{
    size_t cap = 4096, len = 0;
    _cleanup_free_ char *buf = xmalloc(cap);
#define APPEND(...)                                                                   \
    do {                                                                              \
        int k_;                                                                       \
        while ((k_ = snprintf(buf + len, cap - len, __VA_ARGS__)) >= 0 && (size_t)k_ >= cap - len) \
            buf = xrealloc(buf, cap *= 2);                                            \
        len += (size_t)k_;                                                            \
    } while (0)
    APPEND("config 1\nmonitor 2\n");
    for (unsigned i = 0; i < nd->n_devs; i++) {
        unsigned g = nd->devs[i].minor;
        for (unsigned gi = 0; gi < SIM_CAP_GIS; gi++) {
            APPEND("gpu%u/gi%u/access %u\n", g, gi, sim_cap_gi_minor(g, gi));
            for (unsigned ci = 0; ci < SIM_CAP_CIS; ci++)
                APPEND("gpu%u/gi%u/ci%u/access %u\n", g, gi, ci, sim_cap_ci_minor(g, gi, ci));
        }
    }
#undef APPEND
    if (write_file(root, "driver/nvidia-caps/mig-minors", buf) < 0)
        return -EIO;
    /* The capability files of the instances that exist. */
    for (unsigned i = 0; i < nd->n_devs; i++) {
        const struct sim_device *d = &nd->devs[i];
        for (unsigned k = 0; k < d->n_gis; k++) {
            const struct sim_gi *gi = &d->gis[k];
            char name[128], text[128];
            snprintf(name, sizeof(name), "driver/nvidia/capabilities/gpu%u/mig/gi%u/access", d->minor, gi->id);
            snprintf(text, sizeof(text), "DeviceFileMinor: %u\nDeviceFileMode: 292\nDeviceFileModify: 1\n",
                     sim_cap_gi_minor(d->minor, gi->id));
            if (write_file(root, name, text) < 0)
                return -EIO;
            for (unsigned c = 0; c < gi->n_cis; c++) {
                snprintf(name, sizeof(name), "driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", d->minor,
                         gi->id, gi->cis[c].id);
                snprintf(text, sizeof(text), "DeviceFileMinor: %u\nDeviceFileMode: 292\nDeviceFileModify: 1\n",
                         sim_cap_ci_minor(d->minor, gi->id, gi->cis[c].id));
                if (write_file(root, name, text) < 0)
                    return -EIO;
            }
        }
    }
    return 0;
}

static int render_dev(const struct sim_node *nd, const char *root)
{
    static const char *const fixed[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset",
                                         "nvidia-caps/nvidia-cap1", "nvidia-caps/nvidia-cap2" };
    for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
        if (write_file(root, fixed[i], "") < 0)
            return -EIO;
    for (unsigned i = 0; i < nd->n_devs; i++) {
        const struct sim_device *d = &nd->devs[i];
        char name[64];
        snprintf(name, sizeof(name), "nvidia%u", d->minor);
        if (write_file(root, name, "") < 0)
            return -EIO;
        for (unsigned k = 0; k < d->n_gis; k++) {
            snprintf(name, sizeof(name), "nvidia-caps/nvidia-cap%u", sim_cap_gi_minor(d->minor, d->gis[k].id));
            if (write_file(root, name, "") < 0)
                return -EIO;
            for (unsigned c = 0; c < d->gis[k].n_cis; c++) {
                snprintf(name, sizeof(name), "nvidia-caps/nvidia-cap%u",
                         sim_cap_ci_minor(d->minor, d->gis[k].id, d->gis[k].cis[c].id));
                if (write_file(root, name, "") < 0)
                    return -EIO;
            }
        }
    }
    return 0;
}

/* The stand-ins' build outputs (sim/cuda/meson.build), compiled in: the tool is never
 * installed, and a test can name other files with the options. */
#ifndef SIM_STANDIN_DIR
#error "SIM_STANDIN_DIR: the build directory of sim/cuda"
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: nvml-sim-render --profile FILE [--sysfs-root DIR] [--proc-root DIR] [--dev-root DIR]\n"
               "         [--driver-root DIR [--libdir REL] [--no-host-links] [--libcuda FILE]\n"
               "          [--libnvidia-ml FILE] [--nvidia-smi FILE] [--nvidia-cuda-mps-control FILE]\n"
               "          [--sim-env MOCK_NAME=VALUE]...]\n");
}

int main(int argc, char **argv)
{
    enum { OPT_LIBDIR = 256, OPT_NO_LINKS, OPT_LIBCUDA, OPT_NVML, OPT_SMI, OPT_MPS, OPT_SIM_ENV };
    static const struct option opts[] = {
        { "profile", required_argument, NULL, 'p' },    { "sysfs-root", required_argument, NULL, 's' },
        { "proc-root", required_argument, NULL, 'r' },  { "dev-root", required_argument, NULL, 'd' },
        { "driver-root", required_argument, NULL, 'D' }, { "libdir", required_argument, NULL, OPT_LIBDIR },
        { "no-host-links", no_argument, NULL, OPT_NO_LINKS }, { "libcuda", required_argument, NULL, OPT_LIBCUDA },
        { "libnvidia-ml", required_argument, NULL, OPT_NVML }, { "nvidia-smi", required_argument, NULL, OPT_SMI },
        { "nvidia-cuda-mps-control", required_argument, NULL, OPT_MPS },
        { "sim-env", required_argument, NULL, OPT_SIM_ENV },
        { "help", no_argument, NULL, 'h' },             { 0 },
    };
    const char *profile = NULL, *sysfs = NULL, *proc = NULL, *dev = NULL;
    const char *sim_env[32];
    struct driver_root_opts drv = {
        .libdir = "usr/lib/x86_64-linux-gnu",
        .host_links = true,
        .libcuda = SIM_STANDIN_DIR "/libcuda.so.1",
        .libnvidia_ml = SIM_STANDIN_DIR "/libnvidia-ml-driver.so",
        .nvidia_smi = SIM_STANDIN_DIR "/nvidia-smi",
        .mps_control = SIM_STANDIN_DIR "/nvidia-cuda-mps-control",
        .sim_env = sim_env,
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': profile = optarg; break;
        case 's': sysfs = optarg; break;
        case 'r': proc = optarg; break;
        case 'd': dev = optarg; break;
        case 'D': drv.root = optarg; break;
        case OPT_LIBDIR: drv.libdir = optarg; break;
        case OPT_NO_LINKS: drv.host_links = false; break;
        case OPT_LIBCUDA: drv.libcuda = optarg; break;
        case OPT_NVML: drv.libnvidia_ml = optarg; break;
        case OPT_SMI: drv.nvidia_smi = optarg; break;
        case OPT_MPS: drv.mps_control = optarg; break;
        case OPT_SIM_ENV:
            if (drv.n_sim_env == ELEMENTSOF(sim_env)) {
                fprintf(stderr, "nvml-sim-render: at most %zu --sim-env\n", ELEMENTSOF(sim_env));
                return 2;
            }
            drv.sim_env[drv.n_sim_env++] = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!profile || optind != argc) {
        usage(stderr);
        return 2;
    }
    char err[512];
    struct sim_node *nd = sim_profile_load(profile, err, sizeof(err));
    if (!nd) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int r = 0;
    if (sysfs && render_sysfs(nd, sysfs) < 0)
        r = 1;
    if (!r && proc && render_proc(nd, proc) < 0)
        r = 1;
    if (!r && dev && render_dev(nd, dev) < 0)
        r = 1;
    if (!r && drv.root && render_driver_root(nd->driver_version, &drv) < 0)
        r = 1;
    sim_node_free(nd);
    return r;
}
