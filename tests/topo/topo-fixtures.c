#include "topo-fixtures.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/macro.h"

const char *const fx_names[] = { "dgx1-v100", "dgx-a100", "hgx-h100", "t4-2numa", "16gpu-nvswitch" };
const size_t fx_n_names = ELEMENTSOF(fx_names);

uint64_t fx_rand(uint64_t *s)
{
    /* xorshift64*: reproducible runs from a fixed seed */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static void fx_init(struct inventory *inv, size_t n)
{
    *inv = (struct inventory){ .n_gpus = n };
    inv->gpus = xcalloc(n, sizeof(*inv->gpus));
    inv->links = xcalloc(n * n, sizeof(*inv->links));
    for (size_t i = 0; i < n; i++) {
        inv->gpus[i].index = (unsigned)i;
        inv->gpus[i].numa_node = -1;
        snprintf(inv->gpus[i].uuid, sizeof(inv->gpus[i].uuid), "GPU-fx-%zu", i);
        for (size_t j = 0; j < n; j++)
            inventory_link(inv, i, j)->pcie_level = -1;
    }
}

void fx_free(struct inventory *inv)
{
    free(inv->gpus);
    free(inv->links);
    *inv = (struct inventory){ .n_gpus = 0 };
}

static void fx_nvlink(struct inventory *inv, size_t a, size_t b, unsigned links)
{
    inventory_link(inv, a, b)->nvlinks = links;
    inventory_link(inv, b, a)->nvlinks = links;
}

static int fx_level(const struct fx_place *a, const struct fx_place *b)
{
    if (a->board >= 0 && a->board == b->board)
        return 0;
    if (a->leaf >= 0 && a->leaf == b->leaf)
        return 10;
    if (a->upper >= 0 && a->upper == b->upper)
        return 20;
    if (a->root >= 0 && a->root == b->root)
        return 30;
    if (a->numa >= 0 && a->numa == b->numa)
        return 40;
    return 50;
}

static void fx_place_all(struct inventory *inv, const struct fx_place *p)
{
    size_t n = inv->n_gpus;
    for (size_t i = 0; i < n; i++) {
        inv->gpus[i].numa_node = p[i].numa;
        for (size_t j = 0; j < n; j++)
            if (i != j)
                inventory_link(inv, i, j)->pcie_level = fx_level(&p[i], &p[j]);
    }
}

/* DGX-1 with V100: hybrid cube-mesh, 6 NVLinks per GPU, some pairs doubled;
 * two PCIe switches per CPU, two GPUs per switch. */
static void fx_dgx1v(struct inventory *inv)
{
    static const struct fx_place place[8] = {
        { 0, 0, -1, 0, -1 }, { 0, 0, -1, 0, -1 }, { 0, 0, -1, 1, -1 }, { 0, 0, -1, 1, -1 },
        { 1, 1, -1, 2, -1 }, { 1, 1, -1, 2, -1 }, { 1, 1, -1, 3, -1 }, { 1, 1, -1, 3, -1 },
    };
    static const unsigned nv[][3] = {
        { 0, 1, 1 }, { 0, 2, 1 }, { 0, 3, 2 }, { 0, 4, 2 }, { 1, 2, 2 }, { 1, 3, 1 },
        { 1, 5, 2 }, { 2, 3, 2 }, { 2, 6, 1 }, { 3, 7, 1 }, { 4, 5, 1 }, { 4, 6, 1 },
        { 4, 7, 2 }, { 5, 6, 2 }, { 5, 7, 1 }, { 6, 7, 2 },
    };
    fx_init(inv, 8);
    fx_place_all(inv, place);
    for (size_t i = 0; i < ELEMENTSOF(nv); i++)
        fx_nvlink(inv, nv[i][0], nv[i][1], nv[i][2]);
}

static void fx_all_to_all(struct inventory *inv, unsigned links)
{
    for (size_t a = 0; a < inv->n_gpus; a++)
        for (size_t b = a + 1; b < inv->n_gpus; b++)
            fx_nvlink(inv, a, b, links);
}

/* DGX A100: NVSwitch, NV12 between every pair; each GPU behind its own leaf
 * switch, two leaves per upper switch, two uppers per NUMA node. */
static void fx_dgx_a100(struct inventory *inv)
{
    struct fx_place place[8];
    fx_init(inv, 8);
    for (int i = 0; i < 8; i++)
        place[i] = (struct fx_place){ .numa = i / 4, .root = i / 2, .upper = i / 2, .leaf = i, .board = -1 };
    fx_place_all(inv, place);
    fx_all_to_all(inv, 12);
}

/* HGX H100: NVSwitch, NV18 between every pair; one root port per GPU. */
static void fx_hgx_h100(struct inventory *inv)
{
    struct fx_place place[8];
    fx_init(inv, 8);
    for (int i = 0; i < 8; i++)
        place[i] = (struct fx_place){ .numa = i / 4, .root = i, .upper = -1, .leaf = i, .board = -1 };
    fx_place_all(inv, place);
    fx_all_to_all(inv, 18);
}

/* 4x T4, PCIe only: one switch with two GPUs per NUMA node. */
static void fx_t4_2numa(struct inventory *inv)
{
    static const struct fx_place place[4] = {
        { 0, 0, -1, 0, -1 }, { 0, 0, -1, 0, -1 }, { 1, 1, -1, 1, -1 }, { 1, 1, -1, 1, -1 },
    };
    fx_init(inv, 4);
    fx_place_all(inv, place);
}

/* 16 GPUs on NVSwitch (NV6 all-to-all, DGX-2 style); PCIe: two GPUs per leaf
 * switch, two leaves per upper switch, two uppers per root complex, one root
 * complex per NUMA node. */
static void fx_16gpu(struct inventory *inv)
{
    struct fx_place place[16];
    fx_init(inv, 16);
    for (int i = 0; i < 16; i++)
        place[i] = (struct fx_place){ .numa = i / 8, .root = i / 8, .upper = i / 4, .leaf = i / 2, .board = -1 };
    fx_place_all(inv, place);
    fx_all_to_all(inv, 6);
}

int fx_build(const char *name, struct inventory *inv)
{
    if (streq(name, "dgx1-v100"))
        fx_dgx1v(inv);
    else if (streq(name, "dgx-a100"))
        fx_dgx_a100(inv);
    else if (streq(name, "hgx-h100"))
        fx_hgx_h100(inv);
    else if (streq(name, "t4-2numa"))
        fx_t4_2numa(inv);
    else if (streq(name, "16gpu-nvswitch"))
        fx_16gpu(inv);
    else
        return -ENOENT;
    return 0;
}

void fx_random(struct inventory *inv, size_t n, uint64_t *rng)
{
    static const int levels[] = { -1, 0, 10, 20, 30, 40, 50 };
    fx_init(inv, n);
    for (size_t i = 0; i < n; i++)
        inv->gpus[i].numa_node = (int)(fx_rand(rng) % 3) - 1;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            int level = levels[fx_rand(rng) % ELEMENTSOF(levels)];
            inventory_link(inv, a, b)->pcie_level = level;
            inventory_link(inv, b, a)->pcie_level = level;
            /* Sparse NVLinks, and few distinct values, so that ties happen. */
            if (fx_rand(rng) % 3 == 0)
                fx_nvlink(inv, a, b, (unsigned)(1 + fx_rand(rng) % 3));
        }
}
