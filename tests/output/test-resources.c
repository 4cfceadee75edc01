/* resources_build over the shared-profile-like inventories × MIG strategies × ID
 * strategies × sharing, and every error path with its message. */
#include <string.h>

#include "core/macro.h"
#include "fixtures.h"
#include "node/mig.h"
#include "policy/dra-split.h"
#include "policy/resources-warn.h"

static char *proc_root;

static const struct rs_resource *find_res(const struct resource_set *rs, const char *name)
{
    for (size_t i = 0; i < rs->n_resources; i++)
        if (streq(rs->resources[i].name, name))
            return &rs->resources[i];
    return NULL;
}

struct warns {
    int n, errors;
    char first[320], last[320];
};

static void collect(void *userdata, enum resources_warn_level level, const char *msg)
{
    struct warns *w = userdata;
    w->n++;
    w->errors += level == RESOURCES_WARN_ERROR;
    if (w->n == 1)
        snprintf(w->first, sizeof(w->first), "%s", msg);
    snprintf(w->last, sizeof(w->last), "%s", msg);
}

static void unmatched(void *userdata, const char *entry)
{
    collect(userdata, RESOURCES_WARN_WARNING, entry);
}

/* Build expecting failure; check the message contains want. */
static void expect_error(const struct inventory *inv, const struct config *cfg, const char *want)
{
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    int r = resources_build(inv, cfg, &rs, &err);
    CHECK(r < 0);
    if (r < 0 && !strstr(err.msg, want)) {
        fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err.msg, want);
        test_failures++;
    }
    CHECK(rs.n_resources == 0);
}

/* A proc root whose mig-minors has gpu99/gi1's access entry (minor 5) and no CI entry. */
static char *gi_only_proc_root(void)
{
    char *root = fx_proc_root();
    _cleanup_free_ char *f = xasprintf("%s/driver/nvidia-caps/mig-minors", root);
    FILE *fp = fopen(f, "we");
    if (!fp)
        abort();
    fprintf(fp, "config 1\nmonitor 2\ngpu99/gi1/access 5\n");
    fclose(fp);
    return root;
}

/* The cap minors fx_enable_mig() puts in the inventory are the ones discovery reads
 * from fx_proc_root()'s mig-minors. */
static void test_fixture_caps(void)
{
    static const char *const one[] = { "1g.5gb", "1g.5gb", "1g.5gb" };
    struct inventory inv;
    fx_inventory(&inv, FX_A100, 4);
    fx_enable_mig(&inv, 3, one, 3);
    struct inv_mig m = inv.gpus[3].migs[2];
    mig_resolve_caps(proc_root, inv.gpus[3].minor, &m);
    CHECK(m.gi_cap_minor == inv.gpus[3].migs[2].gi_cap_minor);
    CHECK(m.ci_cap_minor == inv.gpus[3].migs[2].ci_cap_minor);
    CHECK_STR(m.cap_error, "");
    fx_inventory_free(&inv);
}

static void test_patterns(void)
{
    static const struct {
        const char *p, *s;
        bool match;
    } t[] = {
        { "*", "NVIDIA A100-SXM4-40GB", true },     { "*A100*", "NVIDIA A100-SXM4-40GB", true },
        { "NVIDIA A100*", "NVIDIA A100-SXM4-40GB", true },
        { "A100*", "NVIDIA A100-SXM4-40GB", false }, /* anchored */
        { "1g.5gb", "1g.5gb+me", false },            /* whole string */
        { "1g.5gb", "1g.5gb", true },                { "1g.5gb", "1gx5gb", false }, /* '.' literal */
        { "*+me", "1g.10gb+me", true },              { "a*b*c", "axxbyyc", true },
        { "a*b*c", "axxbyy", false },                { "", "", true },
        { "", "x", false },                          { "**", "", true },
    };
    for (size_t i = 0; i < ELEMENTSOF(t); i++)
        if (resources_pattern_match(t[i].p, t[i].s) != t[i].match) {
            fprintf(stderr, "pattern '%s' vs '%s': expected %d\n", t[i].p, t[i].s, t[i].match);
            test_failures++;
        }
}

/* No MIG, no sharing: every model × ID strategy × MIG strategy gives nvidia.com/gpu. */
static void test_full_gpus(void)
{
    static const struct {
        enum fx_model m;
        unsigned n;
    } models[] = { { FX_A100, 8 }, { FX_H100, 8 }, { FX_T4, 4 } };
    for (size_t mi = 0; mi < ELEMENTSOF(models); mi++)
        for (int ids = 0; ids < 2; ids++)
            for (int ms = 0; ms < 3; ms++) {
                struct inventory inv;
                struct config cfg;
                struct resource_set rs = { 0 };
                struct error err = { 0 };
                fx_inventory(&inv, models[mi].m, models[mi].n);
                fx_config(&cfg, proc_root);
                cfg.device_id_strategy = ids ? DEVICE_ID_INDEX : DEVICE_ID_UUID;
                cfg.mig_strategy = (enum mig_strategy)ms;
                CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
                CHECK(rs.n_resources == 1);
                const struct rs_resource *r = find_res(&rs, "nvidia.com/gpu");
                CHECK(r != NULL);
                if (r) {
                    CHECK_STR(r->socket_name, "nvidia-gpu.sock");
                    CHECK(r->sharing == SHARING_NONE);
                    CHECK(r->n_devices == models[mi].n);
                    for (size_t i = 0; i < r->n_devices; i++) {
                        const struct rs_device *d = &r->devices[i];
                        char idx[24], path[48];
                        snprintf(idx, sizeof(idx), "%zu", i);
                        snprintf(path, sizeof(path), "/dev/nvidia%zu", i);
                        /* the kubelet sees UUIDs under both strategies (§4.1) */
                        CHECK_STR(d->id, inv.gpus[i].uuid);
                        CHECK_STR(d->base_id, ids ? idx : inv.gpus[i].uuid);
                        CHECK_STR(d->uuid, inv.gpus[i].uuid);
                        CHECK_STR(d->index, idx);
                        CHECK_STR(d->paths[0], path);
                        CHECK(d->paths[1] == NULL);
                        CHECK(d->mig == -1 && d->replica == -1 && d->replicas == 1);
                        CHECK(d->numa_node == inv.gpus[i].numa_node);
                        CHECK(d->memory_bytes == inv.gpus[i].memory_bytes);
                        CHECK(resources_find_device(r, d->id) == d);
                    }
                    CHECK(resources_find_device(r, "GPU-nope") == NULL);
                    CHECK(resources_find_device(r, "0") == NULL); /* no index IDs */
                }
                resources_clear(&rs);
                config_free(&cfg);
                fx_inventory_free(&inv);
            }
}

static const char *const a100_7x1g[] = { "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb",
                                         "1g.5gb", "1g.5gb", "1g.5gb" };

static void test_mig_single(void)
{
    for (int ids = 0; ids < 2; ids++) {
        struct inventory inv;
        struct config cfg;
        struct resource_set rs = { 0 };
        struct error err = { 0 };
        fx_inventory(&inv, FX_A100, 8);
        for (unsigned g = 0; g < 8; g++)
            fx_enable_mig(&inv, g, a100_7x1g, 7);
        fx_config(&cfg, proc_root);
        cfg.mig_strategy = MIG_STRATEGY_SINGLE;
        cfg.device_id_strategy = ids ? DEVICE_ID_INDEX : DEVICE_ID_UUID;
        CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
        CHECK(rs.n_resources == 1);
        const struct rs_resource *r = find_res(&rs, "nvidia.com/gpu");
        CHECK(r && r->n_devices == 56);
        if (r && r->n_devices == 56) {
            const struct rs_device *d = &r->devices[3 * 7 + 2]; /* GPU 3, MIG 2 (GI 3) */
            CHECK_STR(d->id, inv.gpus[3].migs[2].uuid);
            CHECK_STR(d->base_id, ids ? "3:2" : inv.gpus[3].migs[2].uuid);
            CHECK_STR(d->index, "3:2");
            CHECK(resources_find_device(r, "3:2") == NULL);
            CHECK_STR(d->paths[0], "/dev/nvidia3");
            CHECK_STR(d->paths[1], "/dev/nvidia-caps/nvidia-cap1303");
            CHECK_STR(d->paths[2], "/dev/nvidia-caps/nvidia-cap8030");
            CHECK(d->paths[3] == NULL);
            CHECK(d->gpu == 3 && d->mig == 2 && d->numa_node == 0);
            CHECK(d->memory_bytes == 5ull << 30);
        }
        resources_clear(&rs);

        /* The cap minors are the inventory's. */
        inv.gpus[0].migs[0].gi_cap_minor = 77;
        inv.gpus[0].migs[0].ci_cap_minor = 78;
        CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
        if (rs.n_resources == 1) {
            CHECK_STR(rs.resources[0].devices[0].paths[1], "/dev/nvidia-caps/nvidia-cap77");
            CHECK_STR(rs.resources[0].devices[0].paths[2], "/dev/nvidia-caps/nvidia-cap78");
        }
        resources_clear(&rs);
        config_free(&cfg);
        fx_inventory_free(&inv);
    }

    /* single: validation errors */
    struct inventory inv;
    struct config cfg;
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_SINGLE;

    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, a100_7x1g, 7);
    expect_error(&inv, &cfg, "all devices on the node must be configured with the same migEnabled value");
    fx_inventory_free(&inv);

    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, a100_7x1g, 7);
    fx_enable_mig(&inv, 1, NULL, 0);
    expect_error(&inv, &cfg, "device 1 has no MIG devices configured");
    fx_inventory_free(&inv);

    static const char *const two[] = { "1g.5gb", "2g.10gb" };
    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, two, 2);
    expect_error(&inv, &cfg, "more than one MIG device type present on node");
    fx_inventory_free(&inv);

    /* several problems at once: the reference's order decides which one is reported
     * (§4.3: no MIG devices, then more than one type, then mixed migEnabled) */
    fx_inventory(&inv, FX_A100, 3);
    fx_enable_mig(&inv, 0, two, 2);
    expect_error(&inv, &cfg, "more than one MIG device type present on node");
    fx_enable_mig(&inv, 1, NULL, 0);
    expect_error(&inv, &cfg, "device 1 has no MIG devices configured");
    fx_inventory_free(&inv);
    /* a profile no pattern matches comes before all of them */
    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, two, 2);
    cfg.mig_patterns = xcalloc(1, sizeof(*cfg.mig_patterns));
    cfg.mig_patterns[0] = (struct config_pattern){ xstrdup("1g.*"), xstrdup("nvidia.com/gpu") };
    cfg.n_mig_patterns = 1;
    expect_error(&inv, &cfg, "MIG profile '2g.10gb' does not match any resource patterns");
    free(cfg.mig_patterns[0].pattern);
    free(cfg.mig_patterns[0].name);
    free(cfg.mig_patterns);
    cfg.mig_patterns = NULL;
    cfg.n_mig_patterns = 0;
    fx_inventory_free(&inv);

    /* missing mig-minors entry: GPU minor 99 (discovery resolves the caps, node/mig.c,
     * and keeps why it could not; resources refuse the device) */
    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, a100_7x1g, 1);
    inv.gpus[0].minor = 99;
    mig_resolve_caps(proc_root, 99, &inv.gpus[0].migs[0]);
    expect_error(&inv, &cfg, "no entry for gpu99/gi1/access");
    _cleanup_free_ char *gi_only = gi_only_proc_root();
    mig_resolve_caps(gi_only, 99, &inv.gpus[0].migs[0]);
    CHECK(inv.gpus[0].migs[0].gi_cap_minor == 5);
    expect_error(&inv, &cfg, "no entry for gpu99/gi1/ci0/access");
    fx_rmtree(gi_only);
    fx_inventory_free(&inv);

    /* single with no MIG-enabled GPU behaves like none */
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_H100, 8);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && rs.resources[0].n_devices == 8);
    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

static void test_mig_mixed(void)
{
    static const char *const a100[] = { "1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb" };
    static const char *const h100[] = { "1g.10gb+me", "1g.10gb-me", "1g.20gb", "2g.20gb", "1g.10gb+me.all" };
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    struct warns w = { 0 };

    fx_inventory(&inv, FX_A100, 3);
    fx_enable_mig(&inv, 0, a100, 4);
    fx_enable_mig(&inv, 2, NULL, 0); /* enabled, no MIG devices: warning only */
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    CHECK(resources_build_warn(&inv, &cfg, collect, &w, &rs, &err) == 0);
    CHECK(w.n == 1 && strstr(w.last, "GPU 2") && strstr(w.last, "no MIG devices"));
    CHECK(rs.n_resources == 4);
    static const struct {
        const char *name, *sock;
        size_t n;
    } want[] = {
        { "nvidia.com/mig-1g.5gb", "nvidia-mig-1g.5gb.sock", 2 },
        { "nvidia.com/mig-2g.10gb", "nvidia-mig-2g.10gb.sock", 1 },
        { "nvidia.com/mig-3g.20gb", "nvidia-mig-3g.20gb.sock", 1 },
        { "nvidia.com/gpu", "nvidia-gpu.sock", 1 },
    };
    for (size_t i = 0; i < ELEMENTSOF(want); i++) {
        const struct rs_resource *r = find_res(&rs, want[i].name);
        CHECK(r != NULL);
        if (r) {
            CHECK_STR(r->socket_name, want[i].sock);
            CHECK(r->n_devices == want[i].n);
        }
    }
    const struct rs_resource *g = find_res(&rs, "nvidia.com/gpu");
    if (g && g->n_devices == 1)
        CHECK_STR(g->devices[0].uuid, inv.gpus[1].uuid);
    resources_clear(&rs);
    fx_inventory_free(&inv);

    fx_inventory(&inv, FX_H100, 1);
    fx_enable_mig(&inv, 0, h100, 5);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(find_res(&rs, "nvidia.com/mig-1g.10gb.me") != NULL);
    CHECK(find_res(&rs, "nvidia.com/mig-1g.10gb-me") != NULL);
    CHECK(find_res(&rs, "nvidia.com/mig-1g.10gb.me.all") != NULL);
    CHECK(find_res(&rs, "nvidia.com/mig-1g.20gb") != NULL);
    CHECK(find_res(&rs, "nvidia.com/mig-2g.20gb") != NULL);
    CHECK(rs.n_resources == 5);
    resources_clear(&rs);
    fx_inventory_free(&inv);

    /* C < G profile: no default pattern */
    static const char *const cg[] = { "1c.3g.20gb" };
    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, cg, 1);
    expect_error(&inv, &cfg, "MIG profile '1c.3g.20gb' does not match any resource patterns");

    /* our extension: resources.mig honoured (renaming) */
    cfg.mig_patterns = xcalloc(1, sizeof(*cfg.mig_patterns));
    cfg.mig_patterns[0] = (struct config_pattern){ xstrdup("*c.3g.*"), xstrdup("example.com/slice") };
    cfg.n_mig_patterns = 1;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && find_res(&rs, "example.com/slice"));
    if (rs.n_resources == 1)
        CHECK_STR(rs.resources[0].socket_name, "nvidia-slice.sock");
    resources_clear(&rs);
    fx_inventory_free(&inv);

    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, a100, 1);
    expect_error(&inv, &cfg, "MIG profile '1g.5gb' does not match any resource patterns");
    fx_inventory_free(&inv);

    /* mig none: MIG-enabled GPU is a full GPU */
    cfg.mig_strategy = MIG_STRATEGY_NONE;
    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 0, a100, 4);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && rs.resources[0].n_devices == 2);
    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

static void test_gpu_patterns(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_config(&cfg, proc_root);
    cfg.gpu_patterns = xcalloc(2, sizeof(*cfg.gpu_patterns));
    cfg.gpu_patterns[0] = (struct config_pattern){ xstrdup("*A100*"), xstrdup("nvidia.com/a100") };
    cfg.gpu_patterns[1] = (struct config_pattern){ xstrdup("*"), xstrdup("nvidia.com/other") };
    cfg.n_gpu_patterns = 2;
    fx_inventory(&inv, FX_A100, 2);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && find_res(&rs, "nvidia.com/a100"));
    resources_clear(&rs);
    fx_inventory_free(&inv);

    fx_inventory(&inv, FX_T4, 1);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && find_res(&rs, "nvidia.com/other")); /* first match wins */
    resources_clear(&rs);
    cfg.n_gpu_patterns = 1;
    expect_error(&inv, &cfg, "GPU name 'NVIDIA T4' does not match any resource patterns");
    cfg.n_gpu_patterns = 2;
    fx_inventory_free(&inv);
    config_free(&cfg);
}

/* sharing over T4 (4 GPUs) */
static void test_sharing(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_T4, 4);

    for (int ids = 0; ids < 2; ids++)
        for (int rename = 0; rename < 3; rename++) {
            fx_config(&cfg, proc_root);
            cfg.device_id_strategy = ids ? DEVICE_ID_INDEX : DEVICE_ID_UUID;
            fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", rename == 2 ? "nvidia.com/tslice" : NULL, 4);
            cfg.time_slicing.rename_by_default = rename == 1;
            CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
            const char *name = rename == 0 ? "nvidia.com/gpu" : rename == 1 ? "nvidia.com/gpu.shared" : "nvidia.com/tslice";
            const char *sock = rename == 0 ? "nvidia-gpu.sock" : rename == 1 ? "nvidia-gpu.shared.sock" : "nvidia-tslice.sock";
            CHECK(rs.n_resources == 1);
            const struct rs_resource *r = find_res(&rs, name);
            CHECK(r != NULL);
            if (r) {
                CHECK_STR(r->socket_name, sock);
                CHECK(r->sharing == SHARING_TIME_SLICING);
                CHECK(!r->fail_requests_greater_than_one);
                CHECK(r->n_devices == 16);
                for (size_t i = 0; i < r->n_devices && r->n_devices == 16; i++) {
                    const struct rs_device *d = &r->devices[i];
                    char want[128];
                    const char *base = ids ? (const char *[]){ "0", "1", "2", "3" }[i / 4] : inv.gpus[i / 4].uuid;
                    snprintf(want, sizeof(want), "%s::%zu", inv.gpus[i / 4].uuid, i % 4);
                    CHECK_STR(d->id, want);
                    CHECK_STR(d->base_id, base);
                    CHECK(d->replica == (int)(i % 4) && d->replicas == 4 && d->gpu == (int)(i / 4));
                    CHECK(resources_find_device(r, want) == d);
                }
                CHECK(resources_find_device(r, inv.gpus[0].uuid) == NULL);
                CHECK(resources_find_device(r, "0::0") == NULL);
            }
            resources_clear(&rs);
            config_free(&cfg);
        }

    /* device subsets, renamed: replicated ones move, the others stay */
    fx_config(&cfg, proc_root);
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", NULL, 2);
    cfg.time_slicing.rename_by_default = true;
    cfg.time_slicing.fail_requests_greater_than_one = 1;
    cfg.time_slicing.resources[0].devices_kind = DEVICES_COUNT;
    cfg.time_slicing.resources[0].devices_count = 2;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 2);
    const struct rs_resource *plain = find_res(&rs, "nvidia.com/gpu");
    const struct rs_resource *shared = find_res(&rs, "nvidia.com/gpu.shared");
    CHECK(plain && plain->n_devices == 2 && plain->sharing == SHARING_NONE);
    CHECK(shared && shared->n_devices == 4 && shared->fail_requests_greater_than_one);
    if (plain && plain->n_devices == 2)
        CHECK_STR(plain->devices[0].id, inv.gpus[2].uuid);
    if (shared && shared->n_devices == 4)
        CHECK(shared->devices[3].gpu == 1);
    resources_clear(&rs);

    cfg.time_slicing.resources[0].devices_count = 5;
    expect_error(&inv, &cfg, "requested 5 devices to be replicated, but only 4 devices available");

    /* device list by index and UUID */
    cfg.time_slicing.resources[0].devices_kind = DEVICES_LIST;
    cfg.time_slicing.resources[0].devices = xcalloc(2, sizeof(struct config_device_ref));
    cfg.time_slicing.resources[0].devices[0].ref = xstrdup("1");
    cfg.time_slicing.resources[0].devices[1].ref = xstrdup(inv.gpus[3].uuid);
    cfg.time_slicing.resources[0].n_devices = 2;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    shared = find_res(&rs, "nvidia.com/gpu.shared");
    plain = find_res(&rs, "nvidia.com/gpu");
    CHECK(shared && shared->n_devices == 4 && plain && plain->n_devices == 2);
    if (shared && shared->n_devices == 4) {
        CHECK(shared->devices[0].gpu == 1 && shared->devices[2].gpu == 3);
    }
    resources_clear(&rs);

    free(cfg.time_slicing.resources[0].devices[0].ref);
    cfg.time_slicing.resources[0].devices[0].ref = xstrdup("7");
    expect_error(&inv, &cfg, "device '7'");
    config_free(&cfg);

    /* MPS */
    fx_config(&cfg, proc_root);
    fx_add_replicated(&cfg.mps, "nvidia.com/gpu", NULL, 2);
    expect_error(&inv, &cfg, "using MPS requires --mps-root to be specified");
    free(cfg.mps_root);
    cfg.mps_root = xstrdup("/run/nvidia/mps");
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && rs.resources[0].sharing == SHARING_MPS &&
          rs.resources[0].fail_requests_greater_than_one && rs.resources[0].n_devices == 8);
    resources_clear(&rs);
    cfg.mps.fail_requests_greater_than_one = 0;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && !rs.resources[0].fail_requests_greater_than_one);
    resources_clear(&rs);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    expect_error(&inv, &cfg, "using --mig-strategy=mixed is not supported with MPS");
    fx_inventory_free(&inv);

    /* MPS on MIG devices (single strategy) */
    cfg.mig_strategy = MIG_STRATEGY_SINGLE;
    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, a100_7x1g, 7);
    expect_error(&inv, &cfg, "sharing using MPS is not supported for MIG devices");
    fx_inventory_free(&inv);
    config_free(&cfg);

    /* time-slicing MIG devices (mixed), index IDs */
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    cfg.device_id_strategy = DEVICE_ID_INDEX;
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/mig-1g.5gb", NULL, 3);
    fx_inventory(&inv, FX_A100, 1);
    fx_enable_mig(&inv, 0, a100_7x1g, 2);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *m = find_res(&rs, "nvidia.com/mig-1g.5gb");
    CHECK(m && m->n_devices == 6);
    if (m && m->n_devices == 6) {
        char want[128];
        snprintf(want, sizeof(want), "%s::1", inv.gpus[0].migs[1].uuid);
        CHECK_STR(m->devices[4].id, want);
        CHECK_STR(m->devices[4].base_id, "0:1");
        CHECK(m->devices[4].paths[2] != NULL);
    }
    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

/* 4 GPUs × 2500 replicas: lookup must use the index, and find every one. */
static void test_find_many(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_T4, 4);
    fx_config(&cfg, proc_root);
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", NULL, 2500);
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 1 && rs.resources[0].n_devices == 10000);
    const struct rs_resource *r = &rs.resources[0];
    size_t ok = 0;
    for (size_t i = 0; i < r->n_devices; i++)
        ok += resources_find_device(r, r->devices[i].id) == &r->devices[i];
    CHECK(ok == 10000);
    resources_clear(&rs);
    fx_inventory_free(&inv);
    config_free(&cfg);
}

/* NVML device IDs reach env values, mount paths and CDI names: an ID outside
 * [A-Za-z0-9-] ("GPU-x,all" would widen a container to every GPU) is left out with one
 * error naming it; the other devices are served. */
static void test_unsafe_ids(void)
{
    static const char *const profiles[] = { "1g.5gb", "1g.5gb" };
    for (int ids = 0; ids < 2; ids++) {
        struct inventory inv;
        struct config cfg;
        struct resource_set rs = { 0 };
        struct error err = { 0 };
        struct warns w = { 0 };
        fx_inventory(&inv, FX_A100, 4);
        snprintf(inv.gpus[1].uuid, sizeof(inv.gpus[1].uuid), "GPU-x,all");
        inv.gpus[2].uuid[0] = 0; /* NVML answered nothing */
        fx_enable_mig(&inv, 3, profiles, 2);
        snprintf(inv.gpus[3].migs[0].uuid, sizeof(inv.gpus[3].migs[0].uuid), "MIG-a b");
        /* the legacy MIG UUID form has '/' and is accepted */
        snprintf(inv.gpus[3].migs[1].uuid, sizeof(inv.gpus[3].migs[1].uuid),
                 "MIG-GPU-a1000000-0000-0000-0000-000000000003/2/0");
        fx_config(&cfg, proc_root);
        cfg.mig_strategy = MIG_STRATEGY_MIXED;
        cfg.device_id_strategy = ids ? DEVICE_ID_INDEX : DEVICE_ID_UUID;
        CHECK(resources_build_warn(&inv, &cfg, collect, &w, &rs, &err) == 0);
        CHECK(w.n == 3 && w.errors == 3);
        CHECK(strstr(w.last, "MIG device 3:0") && strstr(w.last, "'MIG-a b'"));
        const struct rs_resource *g = find_res(&rs, "nvidia.com/gpu");
        CHECK(g && g->n_devices == 1);
        if (g && g->n_devices == 1)
            CHECK_STR(g->devices[0].id, inv.gpus[0].uuid);
        const struct rs_resource *m = find_res(&rs, "nvidia.com/mig-1g.5gb");
        CHECK(m && m->n_devices == 1);
        if (m && m->n_devices == 1)
            CHECK_STR(m->devices[0].id, inv.gpus[3].migs[1].uuid);
        resources_clear(&rs);
        config_free(&cfg);

        CHECK(strstr(w.first, "GPU 1") && strstr(w.first, "'GPU-x,all'") &&
              strstr(w.first, "left out"));
        fx_inventory_free(&inv);
    }
}

/* --dra: every GPU goes to exactly one API. By default DRA takes them all; the GPUs that
 * --dra-device-plugin-gpus names (index or UUID) stay with the device plugin, MIG devices
 * with their GPU; an entry naming no GPU is reported and keeps nothing. */
static void test_dra_split(void)
{
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_A100, 8);
    fx_config(&cfg, proc_root);
    cfg.dra.enabled = true;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(rs.n_resources == 0); /* all through DRA */
    for (size_t g = 0; g < inv.n_gpus; g++)
        CHECK(dra_split_serves(&cfg, &inv.gpus[g]));
    resources_clear(&rs);

    char **keep = xcalloc(4, sizeof(char *));
    keep[0] = xstrdup("2");
    keep[1] = xstrdup(inv.gpus[5].uuid);
    keep[2] = xstrdup("GPU-gone");
    config_strv_free(cfg.dra.device_plugin_gpus);
    cfg.dra.device_plugin_gpus = keep;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    const struct rs_resource *r = find_res(&rs, "nvidia.com/gpu");
    CHECK(r && r->n_devices == 2);
    if (r && r->n_devices == 2) {
        CHECK_STR(r->devices[0].uuid, inv.gpus[2].uuid);
        CHECK_STR(r->devices[1].uuid, inv.gpus[5].uuid);
    }
    for (size_t g = 0; g < inv.n_gpus; g++)
        CHECK(dra_split_serves(&cfg, &inv.gpus[g]) == (g != 2 && g != 5));
    struct warns w = { 0 };
    dra_split_unmatched(&cfg, &inv, unmatched, &w);
    CHECK(w.n == 1);
    CHECK_STR(w.first, "GPU-gone");
    resources_clear(&rs);

    cfg.dra.enabled = false; /* the list means nothing without --dra */
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    r = find_res(&rs, "nvidia.com/gpu");
    CHECK(r && r->n_devices == 8);
    CHECK(!dra_split_serves(&cfg, &inv.gpus[0]));
    resources_clear(&rs);
    config_free(&cfg);
    fx_inventory_free(&inv);

    /* MIG devices follow their GPU. */
    fx_inventory(&inv, FX_A100, 2);
    fx_config(&cfg, proc_root);
    fx_enable_mig(&inv, 1, a100_7x1g, ELEMENTSOF(a100_7x1g));
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    cfg.dra.enabled = true;
    config_strv_free(cfg.dra.device_plugin_gpus);
    cfg.dra.device_plugin_gpus = xcalloc(2, sizeof(char *));
    cfg.dra.device_plugin_gpus[0] = xstrdup("1");
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    r = find_res(&rs, "nvidia.com/mig-1g.5gb");
    CHECK(r && r->n_devices == 7);
    CHECK(find_res(&rs, "nvidia.com/gpu") == NULL);
    resources_clear(&rs);
    config_free(&cfg);
    fx_inventory_free(&inv);
}

int main(void)
{
    proc_root = fx_proc_root();
    test_fixture_caps();
    test_patterns();
    test_full_gpus();
    test_mig_single();
    test_mig_mixed();
    test_gpu_patterns();
    test_sharing();
    test_find_many();
    test_unsafe_ids();
    test_dra_split();
    fx_rmtree(proc_root);
    free(proc_root);
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
