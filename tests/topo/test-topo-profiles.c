/* sim/profiles/topo-<name>.yaml describe the same machines as the test fixtures:
 * load one in the simulated libnvidia-ml.so.1 and compare, for every GPU pair, the
 * PCIe common-ancestor level and the NVLink count the reference would derive, and
 * each GPU's NUMA node. Usage: test-topo-profiles <name> (one process per profile:
 * the simulator parses its profile once per process). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/macro.h"
#include "tests/common/fixture.h"
#include "topo-fixtures.h"

/* Only what this test needs of the NVML ABI (tests/data/nvml-abi):
 * handles are opaque, nvmlPciInfo_t is 68 bytes with busId at offset 36. */
typedef void *nvml_dev;
struct pci_info {
    char bytes[68];
};
#define PCI_BUSID_OFFSET 36
#define NVLINK_MAX 36

static int (*init_v2)(void);
static int (*get_count)(unsigned *);
static int (*get_handle)(unsigned, nvml_dev *);
static int (*get_level)(nvml_dev, nvml_dev, int *);
static int (*get_pci)(nvml_dev, struct pci_info *);
static int (*link_state)(nvml_dev, unsigned, int *);
static int (*link_remote)(nvml_dev, unsigned, struct pci_info *);
static int (*get_numa)(nvml_dev, unsigned *);

static unsigned failures;
#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                    \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

static const char *bus_of(const struct pci_info *p)
{
    return p->bytes + PCI_BUSID_OFFSET;
}

int main(int argc, char **argv)
{
    const char *build = getenv("GDP_BUILD_DIR"), *src = getenv("GDP_SOURCE_DIR");
    if (argc != 2 || !build || !src) {
        fprintf(stderr, "usage: GDP_BUILD_DIR=.. GDP_SOURCE_DIR=.. %s <topology>\n", argv[0]);
        return 2;
    }
    _cleanup_free_ char *profile = xasprintf("%s/sim/profiles/topo-%s.yaml", src, argv[1]);
    fixture_check(profile);
    _cleanup_free_ char *lib = xasprintf("%s/sim/nvml/libnvidia-ml.so.1", build);
    setenv("MOCK_NVML_CONFIG", profile, 1);

    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
#define SYM(var, name) *(void **)&var = dlsym(h, name)
    SYM(init_v2, "nvmlInit_v2");
    SYM(get_count, "nvmlDeviceGetCount_v2");
    SYM(get_handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(get_level, "nvmlDeviceGetTopologyCommonAncestor");
    SYM(get_pci, "nvmlDeviceGetPciInfo_v3");
    SYM(link_state, "nvmlDeviceGetNvLinkState");
    SYM(link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    SYM(get_numa, "nvmlDeviceGetNumaNodeId");
    if (!init_v2 || !get_count || !get_handle || !get_level || !get_pci || !link_state ||
        !link_remote || !get_numa) {
        fprintf(stderr, "missing NVML symbol in %s\n", lib);
        return 1;
    }
    if (init_v2() != 0) {
        fprintf(stderr, "nvmlInit_v2 failed on %s\n", profile);
        return 1;
    }

    struct inventory inv;
    if (fx_build(argv[1], &inv) < 0) {
        fprintf(stderr, "no fixture %s\n", argv[1]);
        return 2;
    }
    unsigned n = 0;
    CHECK(get_count(&n) == 0 && n == inv.n_gpus, "GPU count %u, fixture %zu", n, inv.n_gpus);
    if (n != inv.n_gpus)
        return 1;

    nvml_dev dev[64];
    struct pci_info pci[64];
    for (unsigned i = 0; i < n; i++) {
        CHECK(get_handle(i, &dev[i]) == 0 && get_pci(dev[i], &pci[i]) == 0, "GPU %u handle", i);
        unsigned node = 0;
        CHECK(get_numa(dev[i], &node) == 0 && (int)node == inv.gpus[i].numa_node,
              "GPU %u NUMA node %u, fixture %d", i, node, inv.gpus[i].numa_node);
    }

    for (unsigned a = 0; a < n; a++) {
        unsigned to_gpu[64] = { 0 }, to_switch = 0;
        for (unsigned l = 0; l < NVLINK_MAX; l++) {
            int state = 0;
            struct pci_info remote;
            if (link_state(dev[a], l, &state) != 0 || !state)
                continue;
            if (link_remote(dev[a], l, &remote) != 0)
                continue;
            bool gpu = false;
            for (unsigned b = 0; b < n; b++)
                if (strcasecmp(bus_of(&remote), bus_of(&pci[b])) == 0) {
                    to_gpu[b]++;
                    gpu = true;
                }
            to_switch += !gpu;
        }
        for (unsigned b = 0; b < n; b++) {
            if (a == b)
                continue;
            int level = -1;
            CHECK(get_level(dev[a], dev[b], &level) == 0 &&
                      level == inventory_link(&inv, a, b)->pcie_level,
                  "%s: GPUs %u-%u PCIe level %d, fixture %d", argv[1], a, b, level,
                  inventory_link(&inv, a, b)->pcie_level);
            /* Through NVSwitches every GPU reaches every other one over all its links:
             * the fixture models that as the (uniform) per-pair count. */
            unsigned links = to_switch ? to_switch : to_gpu[b];
            CHECK(links == inventory_link(&inv, a, b)->nvlinks, "%s: GPUs %u-%u NVLinks %u, fixture %u",
                  argv[1], a, b, links, inventory_link(&inv, a, b)->nvlinks);
        }
    }
    fx_free(&inv);
    printf("%s: %u GPUs, %u failures\n", argv[1], n, failures);
    return failures ? 1 : 0;
}
