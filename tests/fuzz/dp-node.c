/* The nodes fuzz-dp serves: a fixed list of hardware + config-file setups (full GPUs,
 * MIG mixed and single, time-slicing, MPS, index IDs, every device-list strategy, no
 * topology, more GPUs than the exact placement search takes), each built once through
 * the real config parser, resources_build() and topo_model_build(), and one real
 * DevicePlugin service (dp_plugin_start) per resource, started on first use. */
#include <stdio.h>
#include <sys/stat.h>

#include "config/config-internal.h"
#include "core/log.h"
#include "core/loop.h"
#include "dp-node.h"
#include "policy/topo.h"
#include "tests/common/scratch.h"
#include "tests/output/fixtures.h"

enum layout { PLAIN, MIG_MIXED, MIG_ALL, MIG_H100 };

static const struct {
    const char *name;
    enum fx_model model;
    unsigned n_gpus;
    enum layout layout;
    bool topo;
    const char *yaml;
} specs[] = {
    { "a100", FX_A100, 8, PLAIN, true, "version: v1\n" },
    { "a100-index-every-output", FX_A100, 8, PLAIN, true,
      "flags:\n"
      "  gdsEnabled: true\n"
      "  mofedEnabled: true\n"
      "  gdrcopyEnabled: true\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    deviceIDStrategy: index\n"
      "    deviceListStrategy: [envvar, volume-mounts, cdi-annotations, cdi-cri]\n"
      "    cdiAnnotationPrefix: cdi.example.com/\n"
      "imex:\n"
      "  channelIDs: [0]\n" },
    { "mig-mixed", FX_A100, 8, MIG_MIXED, true,
      "flags:\n"
      "  migStrategy: mixed\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    deviceListStrategy: [cdi-cri, envvar]\n"
      "resources:\n"
      "  mig:\n"
      "  - pattern: \"3g.*\"\n"
      "    name: mig-big\n"
      "  - pattern: \"*\"\n"
      "    name: mig-small\n" },
    { "mig-single-index", FX_A100, 8, MIG_ALL, true,
      "flags:\n"
      "  migStrategy: single\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    deviceIDStrategy: index\n" },
    { "time-slicing", FX_A100, 8, PLAIN, true,
      "flags:\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    sharedDevicesAllocationPolicy: packed\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    failRequestsGreaterThanOne: false\n"
      "    resources:\n"
      "    - name: gpu\n"
      "      replicas: 4\n" },
    { "time-slicing-rename-subset", FX_A100, 8, PLAIN, true,
      "flags:\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    deviceIDStrategy: index\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    renameByDefault: true\n"
      "    failRequestsGreaterThanOne: true\n"
      "    resources:\n"
      "    - name: gpu\n"
      "      replicas: 3\n"
      "      devices: [0, 1, GPU-a1000000-0000-0000-0000-000000000005]\n" },
    { "mps", FX_A100, 8, PLAIN, true,
      "flags:\n"
      "  mpsRoot: /run/nvidia/mps\n"
      "sharing:\n"
      "  mps:\n"
      "    resources:\n"
      "    - name: gpu\n"
      "      replicas: 2\n" },
    { "t4-renamed-no-topology", FX_T4, 4, PLAIN, false,
      "resources:\n"
      "  gpus:\n"
      "  - pattern: \"*T4*\"\n"
      "    name: t4\n" },
    { "h100-mig-shared-cdi", FX_H100, 8, MIG_H100, true,
      "flags:\n"
      "  migStrategy: mixed\n"
      "  plugin:\n"
      "    passDeviceSpecs: true\n"
      "    deviceListStrategy: cdi-annotations\n"
      "sharing:\n"
      "  timeSlicing:\n"
      "    resources:\n"
      "    - name: gpu\n"
      "      replicas: 2\n"
      "    - name: mig-1g.10gb\n"
      "      replicas: 2\n" },
    { "h100-24-heuristic", FX_H100, 24, PLAIN, true, "version: v1\n" },
};

static struct dp_node nodes[ELEMENTSOF(specs)];
static struct loop *loop;
static const char *root; /* a scratch directory: removed at exit and on a crash's abort */

/* PCIe levels by NUMA side and a model-dependent NVLink pattern, so pair scores differ
 * and the placement search has something to choose. */
static void links(struct inventory *inv, enum fx_model model)
{
    size_t n = inv->n_gpus;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            struct inv_link *l = inventory_link(inv, a, b);
            bool same_numa = inv->gpus[a].numa_node == inv->gpus[b].numa_node;
            l->pcie_level = model == FX_T4 ? (a / 2 == b / 2 ? 10 : 20) : same_numa ? 30 : 50;
            l->nvlinks = model == FX_T4 ? 0 : (unsigned)((a ^ b) % 3) * 6;
        }
}

static void mig_layout(struct inventory *inv, enum layout layout)
{
    static const char *const mixed0[] = { "1g.5gb", "1g.5gb", "1g.5gb", "2g.10gb" };
    static const char *const mixed1[] = { "3g.20gb", "3g.20gb" };
    static const char *const h100[] = { "1g.10gb", "1g.10gb", "2g.20gb" };
    switch (layout) {
    case PLAIN:
        break;
    case MIG_MIXED:
        fx_enable_mig(inv, 0, mixed0, ELEMENTSOF(mixed0));
        fx_enable_mig(inv, 1, mixed1, ELEMENTSOF(mixed1));
        break;
    case MIG_ALL:
        for (unsigned g = 0; g < inv->n_gpus; g++)
            fx_enable_mig(inv, g, mixed1, ELEMENTSOF(mixed1));
        break;
    case MIG_H100:
        for (unsigned g = 0; g < 4; g++)
            fx_enable_mig(inv, g, h100, ELEMENTSOF(h100));
        break;
    }
}

/* The control nodes pass-device-specs looks for, under the config's dev root. */
static void make_dev_root(void)
{
    static const char *const files[] = { "nvidiactl", "nvidia-uvm", "nvidia-modeset" };
    _cleanup_free_ char *dev = xasprintf("%s/dev", root);
    if (mkdir(dev, 0755) < 0)
        abort();
    for (size_t i = 0; i < ELEMENTSOF(files); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dev, files[i]);
        FILE *f = fopen(p, "we");
        if (!f)
            abort();
        fclose(f);
    }
}

static bool healthy(void *userdata, const struct rs_device *d, const char **reason)
{
    const struct dp_node *n = userdata;
    /* position in its resource: the same device ID gets the same answer */
    size_t pos = 0;
    for (size_t i = 0; i < n->rs.n_resources; i++) {
        const struct rs_resource *r = &n->rs.resources[i];
        if (d >= r->devices && d < r->devices + r->n_devices)
            pos = (size_t)(d - r->devices);
    }
    bool ok = dp_node_device_healthy(n, pos);
    if (!ok && reason)
        *reason = "fuzz: marked\nUnhealthy \"quoted\"";
    return ok;
}

bool dp_node_device_healthy(const struct dp_node *n, size_t pos)
{
    return !((n->health_mask >> (pos % 8)) & 1);
}

static void build(struct dp_node *n, size_t i)
{
    struct error err = { 0 };
    bool set[_OPT_MAX] = { 0 };
    struct config_marks marks = { 0 };
    _cleanup_free_ char *proc = xasprintf("%s/proc", root);
    _cleanup_free_ char *socks = xasprintf("%s/sock-%zu", root, i);

    n->name = specs[i].name;
    fx_inventory(&n->inv, specs[i].model, specs[i].n_gpus);
    links(&n->inv, specs[i].model);
    mig_layout(&n->inv, specs[i].layout);
    fx_config(&n->cfg, proc);
    free(n->cfg.dev_root);
    n->cfg.dev_root = xstrdup(root);
    if (config_file_parse(&n->cfg, n->name, (const unsigned char *)specs[i].yaml,
                          strlen(specs[i].yaml), set, &marks, &err) < 0 ||
        config_validate(&n->cfg, &marks, &err) < 0 ||
        resources_build(&n->inv, &n->cfg, &n->rs, &err) < 0 ||
        topo_model_build(&n->inv, &n->topo) < 0 || n->rs.n_resources == 0) {
        fprintf(stderr, "fuzz-dp: setup %s: %s\n", n->name, err.msg);
        abort();
    }
    if (mkdir(socks, 0700) < 0)
        abort();
    n->plugins = xcalloc(n->rs.n_resources, sizeof(*n->plugins));
    for (size_t k = 0; k < n->rs.n_resources; k++) {
        struct dp_context ctx = {
            .resource = &n->rs.resources[k],
            .config = &n->cfg,
            .inventory = &n->inv,
            .topo = specs[i].topo ? &n->topo : NULL,
            .callbacks = { .device_healthy = healthy },
            .userdata = n,
        };
        if (dp_plugin_start(loop, socks, &ctx, &n->plugins[k], &err) < 0) {
            fprintf(stderr, "fuzz-dp: setup %s: %s\n", n->name, err.msg);
            abort();
        }
    }
    n->ready = true;
}

struct dp_node *dp_node_get(unsigned which)
{
    if (!loop) {
        log_set_level(LOG_ERROR);
        root = scratch_socket_dir("gdp-fuzz-dp-"); /* the plugin's sockets are under it */
        if (loop_new(&loop) < 0)
            abort();
        _cleanup_free_ char *proc = fx_proc_root();
        _cleanup_free_ char *cmd = xasprintf("%s/proc", root);
        if (rename(proc, cmd) < 0)
            abort();
        fx_rmtree(proc); /* gone already: only its scratch entry is left to drop */
        make_dev_root();
    }
    struct dp_node *n = &nodes[which % ELEMENTSOF(specs)];
    if (!n->ready)
        build(n, which % ELEMENTSOF(specs));
    return n;
}

size_t dp_node_count(void) { return ELEMENTSOF(specs); }

struct loop *dp_node_loop(void) { return loop; }

void dp_node_free_all(void)
{
    for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
        struct dp_node *n = &nodes[i];
        if (!n->ready)
            continue;
        for (size_t k = 0; k < n->rs.n_resources; k++)
            dp_plugin_stop(n->plugins[k]);
        free(n->plugins);
        resources_clear(&n->rs);
        topo_model_clear(&n->topo);
        config_free(&n->cfg);
        fx_inventory_free(&n->inv);
        memset(n, 0, sizeof(*n));
    }
    loop_free(loop);
    loop = NULL;
}
