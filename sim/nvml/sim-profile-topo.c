/* Profile topology sections: `nvlink` (peer links, NVSwitch fabric) and `pcie_topology`
 * (root complexes, switches, NUMA nodes) onto the parsed devices. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim-yaml.h"

int sim_profile_parse_nvlink(struct yp_ctx *c, yaml_node_t *root, yaml_node_t *devs, struct sim_node *nd)
{
    yaml_node_t *nv = yp_map_get(c, root, "nvlink", 6);
    unsigned per_gpu = 0;
    if (nv) {
        if (!yp_is_map(nv))
            return yp_fail(c, nv, "nvlink: expected a mapping");
        yaml_node_t *n = yp_map_get(c, nv, "links_per_gpu", 13);
        if (YP_OPT(yp_uint, c, n, "nvlink.links_per_gpu", SIM_MAX_LINKS, &per_gpu) < 0)
            return -EINVAL;
        yaml_node_t *sw = yp_map_get(c, nv, "switches", 8);
        if (sw) {
            if (sw->type != YAML_SEQUENCE_NODE)
                return yp_fail(c, sw, "nvlink.switches: expected a sequence");
            size_t k = (size_t)(sw->data.sequence.items.top - sw->data.sequence.items.start);
            if (k > 64)
                return yp_fail(c, sw, "nvlink.switches: too many switches");
            nd->nvswitches = xcalloc(k ? k : 1, sizeof(*nd->nvswitches));
            for (size_t i = 0; i < k; i++) {
                yaml_node_t *s = yp_node(c, sw->data.sequence.items.start[i]);
                if (!yp_is_map(s))
                    return yp_fail(c, s, "nvlink.switches[%zu]: expected a mapping", i);
                yaml_node_t *b = yp_map_get(c, s, "bdf", 3);
                if (!b)
                    return yp_fail(c, s, "nvlink.switches[%zu]: missing bdf", i);
                if (yp_bdf(c, b, "nvlink.switches.bdf", &nd->nvswitches[i]) < 0)
                    return -EINVAL;
                nd->n_nvswitches++;
            }
        }
    }

    /* Explicit peers. */
    unsigned n = nd->n_devs;
    _cleanup_free_ unsigned *cnt = xcalloc((size_t)n * n + 1, sizeof(*cnt));
    _cleanup_free_ bool *given = xcalloc((size_t)n * n + 1, sizeof(*given));
    bool explicit = false;
    for (unsigned i = 0; i < n; i++) {
        yaml_node_t *dn = yp_node(c, devs->data.sequence.items.start[i]);
        yaml_node_t *peers = yp_map_get(c, dn, "nvlink_peers", 12);
        if (!peers)
            continue;
        explicit = true;
        if (peers->type != YAML_SEQUENCE_NODE)
            return yp_fail(c, peers, "nvlink_peers: expected a sequence");
        for (yaml_node_item_t *it = peers->data.sequence.items.start; it < peers->data.sequence.items.top; it++) {
            yaml_node_t *p = yp_node(c, *it);
            if (!yp_is_map(p))
                return yp_fail(c, p, "nvlink_peers: expected a mapping {index, links}");
            yaml_node_t *pi = yp_map_get(c, p, "index", 5), *pl = yp_map_get(c, p, "links", 5);
            unsigned j = 0, l = 0;
            if (!pi || !pl)
                return yp_fail(c, p, "nvlink_peers: needs index and links");
            if (yp_uint(c, pi, "nvlink_peers.index", SIM_MAX_DEVICES, &j) < 0 ||
                yp_uint(c, pl, "nvlink_peers.links", SIM_MAX_LINKS, &l) < 0)
                return -EINVAL;
            if (j >= n || j == i)
                return yp_fail(c, pi, "nvlink_peers.index: %u is not another device's index", j);
            size_t a = (size_t)i * n + j, b = (size_t)j * n + i;
            if ((given[a] && cnt[a] != l) || (given[b] && cnt[b] != l))
                return yp_fail(c, pl, "nvlink_peers: devices %u and %u disagree on their link count", i, j);
            given[a] = given[b] = true;
            cnt[a] = cnt[b] = l;
        }
    }
    for (unsigned i = 0; i < n; i++) {
        struct sim_device *d = &nd->devs[i];
        if (explicit) {
            for (unsigned j = 0; j < n; j++)
                for (unsigned l = 0; l < cnt[(size_t)i * n + j]; l++) {
                    if (d->n_links == SIM_MAX_LINKS)
                        return yp_fail(c, yp_node(c, devs->data.sequence.items.start[i]),
                                    "nvlink_peers: device %u has more than %d links", i, SIM_MAX_LINKS);
                    d->links[d->n_links++] = (struct sim_link){ SIM_LINK_GPU, j };
                }
        } else if (nd->n_nvswitches) {
            for (unsigned l = 0; l < per_gpu; l++)
                d->links[d->n_links++] = (struct sim_link){ SIM_LINK_SWITCH, l % nd->n_nvswitches };
        }
        d->link_capacity = d->n_links > per_gpu ? d->n_links : per_gpu;
    }
    return 0;
}

static struct sim_device *dev_by_bdf(struct sim_node *nd, const struct sim_bdf *b)
{
    for (unsigned i = 0; i < nd->n_devs; i++)
        if (yp_bdf_eq(&nd->devs[i].bdf, b))
            return &nd->devs[i];
    return NULL;
}

/* Attach the GPUs listed in `seq` (bus ids) to root complex `rc` (and switch `sw`). */
static int attach_gpus(struct yp_ctx *c, struct sim_node *nd, yaml_node_t *seq, const char *what, int rc, int sw)
{
    if (!seq)
        return 0;
    if (seq->type != YAML_SEQUENCE_NODE)
        return yp_fail(c, seq, "%s: expected a sequence", what);
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *b = yp_node(c, *it);
        struct sim_bdf bdf;
        if (yp_bdf(c, b, what, &bdf) < 0)
            return -EINVAL;
        struct sim_device *d = dev_by_bdf(nd, &bdf);
        if (!d)
            continue; /* NICs and other non-GPU endpoints */
        if ((d->root_complex >= 0 && d->root_complex != rc) || (sw >= 0 && d->pcie_switch >= 0 && d->pcie_switch != sw))
            return yp_fail(c, b, "%s: GPU %s is placed twice in pcie_topology", what, (const char *)b->data.scalar.value);
        d->root_complex = rc;
        d->numa_node = nd->rcs[rc].numa_node;
        if (sw >= 0)
            d->pcie_switch = sw;
    }
    return 0;
}

int sim_profile_parse_pcie(struct yp_ctx *c, yaml_node_t *root, struct sim_node *nd)
{
    yaml_node_t *pt = yp_map_get(c, root, "pcie_topology", 13);
    if (!pt)
        return 0;
    if (!yp_is_map(pt))
        return yp_fail(c, pt, "pcie_topology: expected a mapping");
    yaml_node_t *rcs = yp_map_get(c, pt, "root_complexes", 14);
    if (!rcs)
        return 0;
    if (rcs->type != YAML_SEQUENCE_NODE)
        return yp_fail(c, rcs, "pcie_topology.root_complexes: expected a sequence");
    size_t n = (size_t)(rcs->data.sequence.items.top - rcs->data.sequence.items.start);
    if (n > 64)
        return yp_fail(c, rcs, "pcie_topology.root_complexes: too many root complexes");
    nd->rcs = xcalloc(n ? n : 1, sizeof(*nd->rcs));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *r = yp_node(c, rcs->data.sequence.items.start[i]);
        if (!yp_is_map(r))
            return yp_fail(c, r, "root_complexes[%zu]: expected a mapping", i);
        nd->rcs[i].numa_node = -1;
        nd->n_rcs++;
        yaml_node_t *f = yp_map_get(c, r, "numa_node", 9);
        if (YP_OPT(yp_int, c, f, "root_complexes.numa_node", -1, 1023, &nd->rcs[i].numa_node) < 0)
            return -EINVAL;
        yaml_node_t *sws = yp_map_get(c, r, "switches", 8);
        size_t first = nd->n_pcie_switches;
        if (sws) {
            if (sws->type != YAML_SEQUENCE_NODE)
                return yp_fail(c, sws, "root_complexes.switches: expected a sequence");
            size_t k = (size_t)(sws->data.sequence.items.top - sws->data.sequence.items.start);
            if (nd->n_pcie_switches + k > 256)
                return yp_fail(c, sws, "root_complexes.switches: too many switches");
            nd->pcie_switches = xreallocarray(nd->pcie_switches, nd->n_pcie_switches + k + 1,
                                              sizeof(*nd->pcie_switches));
            for (size_t s = 0; s < k; s++) {
                yaml_node_t *sn = yp_node(c, sws->data.sequence.items.start[s]);
                if (!yp_is_map(sn))
                    return yp_fail(c, sn, "switches[%zu]: expected a mapping", s);
                struct sim_pcie_switch *ps = &nd->pcie_switches[nd->n_pcie_switches];
                *ps = (struct sim_pcie_switch){ .parent = -1, .rc = (int)i };
                yaml_node_t *idn = yp_map_get(c, sn, "id", 2);
                if (!idn)
                    return yp_fail(c, sn, "switches[%zu]: missing id", s);
                if (yp_str(c, idn, "switches.id", ps->id, sizeof(ps->id)) < 0)
                    return -EINVAL;
                for (size_t o = 0; o < nd->n_pcie_switches; o++)
                    if (streq(nd->pcie_switches[o].id, ps->id))
                        return yp_fail(c, idn, "switches.id: duplicate switch id '%s'", ps->id);
                nd->n_pcie_switches++;
            }
            /* Second pass: parents (may name a later switch) and devices. */
            for (size_t s = 0; s < k; s++) {
                yaml_node_t *sn = yp_node(c, sws->data.sequence.items.start[s]);
                struct sim_pcie_switch *ps = &nd->pcie_switches[first + s];
                yaml_node_t *pn = yp_map_get(c, sn, "parent", 6);
                if (pn) {
                    const char *p = yp_scalar(c, pn, "switches.parent");
                    if (!p)
                        return -EINVAL;
                    for (size_t o = first; o < nd->n_pcie_switches; o++)
                        if (streq(nd->pcie_switches[o].id, p))
                            ps->parent = (int)o;
                    if (ps->parent < 0)
                        return yp_fail(c, pn, "switches.parent: no switch '%s' under this root complex", p);
                }
                if (attach_gpus(c, nd, yp_map_get(c, sn, "devices", 7), "switches.devices", (int)i,
                                (int)(first + s)) < 0)
                    return -EINVAL;
            }
            for (size_t s = first; s < nd->n_pcie_switches; s++) {
                int p = nd->pcie_switches[s].parent;
                for (size_t steps = 0; p >= 0; steps++, p = nd->pcie_switches[p].parent)
                    if (steps > nd->n_pcie_switches)
                        return yp_fail(c, sws, "switches: parent chain of '%s' loops", nd->pcie_switches[s].id);
            }
        }
        if (attach_gpus(c, nd, yp_map_get(c, r, "devices", 7), "root_complexes.devices", (int)i, -1) < 0)
            return -EINVAL;
    }
    return 0;
}

