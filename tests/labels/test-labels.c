/* Label derivation on hand-built inventories (the edges no simulator profile reaches),
 * GFD's sanitiser and family table, the driver-version split, vGPU capability parsing,
 * the feature file's atomic write, and --sleep-interval parsing. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "config/config-internal.h"
#include "labels/labels.h"
#include "node/host.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"

int test_failures;

static void test_sanitise(void)
{
    struct {
        const char *in, *want;
    } cases[] = {
        { "Tesla T4", "Tesla-T4" },
        { "NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB" },
        { "  NVIDIA   H100  80GB HBM3  ", "NVIDIA-H100-80GB-HBM3" },
        { "ProLiant DL380 Gen10 (Plus)", "ProLiant-DL380-Gen10-Plus" },
        { "A ( B", "A-B" },            /* dropped before the spaces are joined */
        { "a_b.c-d", "a_b.c-d" },
        { "x/y:z@w", "xyzw" },
        { "tab\there", "tabhere" },    /* a tab is not kept, so it joins nothing */
        { "GeForce\xc2\xae RTX", "GeForce-RTX" },
        { "(((", "" },
        { "", "" },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        _cleanup_free_ char *s = labels_sanitise(cases[i].in);
        CHECK_STR(s, cases[i].want);
    }
}

static void test_family(void)
{
    struct {
        int major, minor;
        const char *want;
    } cases[] = {
        { 1, 3, "tesla" },   { 2, 1, "fermi" },   { 3, 7, "kepler" },  { 4, 0, "undefined" },
        { 5, 2, "maxwell" }, { 6, 1, "pascal" },  { 7, 0, "volta" },   { 7, 2, "volta" },
        { 7, 5, "turing" },  { 8, 0, "ampere" },  { 8, 6, "ampere" },  { 8, 9, "ada-lovelace" },
        { 9, 0, "hopper" },  { 10, 0, "blackwell" }, { 11, 0, "undefined" },
        { 12, 0, "blackwell" }, { 13, 0, "rubin" }, { 14, 0, "undefined" }, { 0, 0, "undefined" },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        CHECK_STR(labels_arch_family(cases[i].major, cases[i].minor), cases[i].want);
}

/* ---- hand-built nodes */

static struct inv_gpu gpu(const char *name, int ccmaj, int ccmin, uint64_t mib)
{
    struct inv_gpu g = { .cc_major = ccmaj, .cc_minor = ccmin, .memory_bytes = mib << 20,
                         .pci_class = 0x030200 };
    snprintf(g.name, sizeof(g.name), "%s", name);
    return g;
}

static void node(struct inventory *inv, struct inv_gpu *gpus, size_t n)
{
    memset(inv, 0, sizeof(*inv));
    snprintf(inv->driver_version, sizeof(inv->driver_version), "550.107.02");
    inv->cuda_version = 12050;
    inv->gpus = gpus;
    inv->n_gpus = n;
    inv->host.read = true;
    snprintf(inv->host.machine_type, sizeof(inv->host.machine_type), "unknown");
    inv->host.vgpu = INV_VGPU_ABSENT;
}

static struct labels *derive(const struct inventory *inv, const struct config *cfg, uint64_t ts,
                             bool missing, struct error *err)
{
    struct labels *l = NULL;
    struct labels_input in = { .cfg = cfg, .inv = inv, .timestamp = ts, .nvml_missing = missing };
    if (labels_derive(&in, &l, err) < 0)
        return NULL;
    return l;
}

static void test_versions(void)
{
    struct config cfg;
    config_init_defaults(&cfg);
    struct inv_gpu g[] = { gpu("Tesla T4", 7, 5, 15360) };
    struct inventory inv;
    node(&inv, g, 1);
    struct error err = { 0 };

    struct labels *l = derive(&inv, &cfg, 0, false, &err);
    CHECK(l != NULL);
    CHECK_STR(labels_get(l, "nvidia.com/cuda.driver-version.full"), "550.107.02");
    CHECK_STR(labels_get(l, "nvidia.com/cuda.driver.rev"), "02");
    CHECK_STR(labels_get(l, "nvidia.com/cuda.runtime-version.full"), "12.5");
    CHECK(labels_get(l, "nvidia.com/gfd.timestamp") == NULL);
    labels_free(l);

    /* two parts: revision empty */
    snprintf(inv.driver_version, sizeof(inv.driver_version), "550.107");
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK(l != NULL);
    CHECK_STR(labels_get(l, "nvidia.com/cuda.driver-version.revision"), "");
    CHECK_STR(labels_get(l, "nvidia.com/cuda.driver.rev"), "");
    CHECK_STR(labels_get(l, "nvidia.com/cuda.driver.minor"), "107");
    labels_free(l);

    /* fewer than two or more than three parts, or unknown: GFD fails to label */
    const char *bad[] = { "550", "1.2.3.4", "" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        snprintf(inv.driver_version, sizeof(inv.driver_version), "%s", bad[i]);
        memset(&err, 0, sizeof(err));
        CHECK(derive(&inv, &cfg, 0, false, &err) == NULL);
        CHECK_STR_CONTAINS(err.msg, "does not match format \"X.Y[.Z]\"");
    }
    snprintf(inv.driver_version, sizeof(inv.driver_version), "550.107.02");
    inv.cuda_version = 0;
    CHECK(derive(&inv, &cfg, 0, false, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "cuda driver version");
    config_free(&cfg);
}

static void test_edges(void)
{
    struct config cfg;
    config_init_defaults(&cfg);
    struct error err = { 0 };
    struct inventory inv;

    /* Two models: the lowest NVML index's model is labelled, with its own count. Memory
     * 0 leaves gpu.memory out; compute capability 0 leaves the architecture out. */
    struct inv_gpu two[] = { gpu("Tesla T4", 0, 0, 0), gpu("NVIDIA L4", 8, 9, 23034),
                             gpu("Tesla T4", 0, 0, 0) };
    node(&inv, two, 3);
    struct labels *l = derive(&inv, &cfg, 1724632719, false, &err);
    CHECK(l != NULL);
    CHECK_STR(labels_get(l, "nvidia.com/gfd.timestamp"), "1724632719");
    CHECK_STR(labels_get(l, "nvidia.com/gpu.product"), "Tesla-T4");
    CHECK_STR(labels_get(l, "nvidia.com/gpu.count"), "2");
    CHECK(labels_get(l, "nvidia.com/gpu.memory") == NULL);
    CHECK(labels_get(l, "nvidia.com/gpu.family") == NULL);
    CHECK(labels_get(l, "nvidia.com/gpu.compute.major") == NULL);
    CHECK_STR(labels_get(l, "nvidia.com/mig.capable"), "false");
    labels_free(l);

    /* gpu.mode: all graphics; mixed classes; one unreadable */
    two[0].pci_class = two[1].pci_class = two[2].pci_class = 0x030000;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.mode") : NULL, "graphics");
    labels_free(l);
    two[1].pci_class = 0x030200;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.mode") : NULL, "unknown");
    labels_free(l);
    two[0].pci_class = two[1].pci_class = two[2].pci_class = 0x030200;
    two[2].pci_class = 0;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.mode") : NULL, "unknown");
    labels_free(l);

    /* single: a MIG-enabled GPU without MIG devices is INVALID even if all are enabled */
    struct inv_mig m = { .profile = "1g.5gb", .memory_bytes = 4864ULL << 20 };
    struct inv_gpu mig[] = { gpu("NVIDIA A100-PCIE-40GB", 8, 0, 40960),
                             gpu("NVIDIA A100-PCIE-40GB", 8, 0, 40960) };
    mig[0].mig_capable = mig[0].mig_enabled = mig[1].mig_capable = mig[1].mig_enabled = true;
    mig[0].migs = &m;
    mig[0].n_migs = 1;
    node(&inv, mig, 2);
    cfg.mig_strategy = MIG_STRATEGY_SINGLE;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.product") : NULL,
              "NVIDIA-A100-PCIE-40GB-MIG-INVALID");
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.sharing-strategy") : NULL, "");
    labels_free(l);
    /* both populated with one profile: valid */
    mig[1].migs = &m;
    mig[1].n_migs = 1;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.product") : NULL,
              "NVIDIA-A100-PCIE-40GB-MIG-1g.5gb");
    CHECK_STR(l ? labels_get(l, "nvidia.com/gpu.count") : NULL, "2");
    labels_free(l);
    /* mixed keeps "-me" (a dash, not a '+'), turns '+' into '.' */
    struct inv_mig me[] = { { .profile = "1g.10gb-me" }, { .profile = "1g.10gb+me.all" } };
    mig[0].migs = me;
    mig[0].n_migs = 2;
    mig[1].n_migs = 0;
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK(l && labels_get(l, "nvidia.com/mig-1g.10gb-me.count") != NULL);
    CHECK(l && labels_get(l, "nvidia.com/mig-1g.10gb.me.all.count") != NULL);
    labels_free(l);

    /* NVML missing (--fail-on-init-error=false): GFD's null manager, timestamp and vGPU
     * only; the same when NVML answers but there is no GPU */
    l = derive(&inv, &cfg, 7, true, &err);
    CHECK(l && l->n == 2 && labels_get(l, "nvidia.com/gfd.timestamp") &&
          labels_get(l, "nvidia.com/vgpu.present"));
    labels_free(l);
    node(&inv, NULL, 0);
    inv.host.vgpu = INV_VGPU_UNKNOWN; /* unreadable PCI config space: no vgpu labels */
    l = derive(&inv, &cfg, 0, false, &err);
    CHECK(l && l->n == 0);
    labels_free(l);
    config_free(&cfg);
}

/* ---- vGPU capability */

static void test_vgpu(void)
{
    uint8_t cfgspace[256] = { 0xde, 0x10 };
    struct inv_host h = { 0 };
    CHECK(host_vgpu_from_config(cfgspace, 64, "0000:01:00.0", &h) == INV_VGPU_UNKNOWN);
    CHECK(host_vgpu_from_config(cfgspace, 256, "0000:01:00.0", &h) == INV_VGPU_ABSENT);

    /* capability list: 0x40 a PM capability (id 1) -> 0x60 vendor-specific "VF" */
    cfgspace[0x06] = 0x10;
    cfgspace[0x34] = 0x40;
    cfgspace[0x40] = 0x01, cfgspace[0x41] = 0x60, cfgspace[0x42] = 8;
    uint8_t *cap = &cfgspace[0x60];
    cap[0] = 0x09, cap[1] = 0, cap[3] = 'V', cap[4] = 'F';
    /* records from offset 5: one of id 7 and length 4, then the host driver record */
    cap[5] = 7, cap[6] = 4;
    cap[9] = 0, cap[10] = 22;
    memcpy(&cap[11], "550.54.16\0", 10);
    memcpy(&cap[21], "r550_40\0\0\0", 10);
    cap[2] = 31; /* capability length */
    CHECK(host_vgpu_from_config(cfgspace, 256, "0000:01:00.0", &h) == INV_VGPU_PRESENT);
    CHECK_STR(h.vgpu_host_driver_version, "550.54.16");
    CHECK_STR(h.vgpu_host_driver_branch, "r550_40");
    CHECK_STR(h.vgpu_record_missing, "");

    /* the record cut short by the capability length: present, record missing, and the
     * derivation fails as GFD's does */
    cap[2] = 20;
    struct inv_host h2 = { 0 };
    CHECK(host_vgpu_from_config(cfgspace, 256, "0000:01:00.0", &h2) == INV_VGPU_PRESENT);
    CHECK_STR(h2.vgpu_record_missing, "0000:01:00.0");
    struct config cfg;
    config_init_defaults(&cfg);
    struct inventory inv;
    node(&inv, NULL, 0);
    inv.host = h2;
    inv.host.read = true;
    inv.host.vgpu = INV_VGPU_PRESENT;
    struct error err = { 0 };
    CHECK(derive(&inv, &cfg, 0, false, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "cannot find driver version record");
    inv.host = h;
    inv.host.read = true;
    inv.host.vgpu = INV_VGPU_PRESENT;
    struct labels *l = derive(&inv, &cfg, 0, false, &err);
    CHECK_STR(l ? labels_get(l, "nvidia.com/vgpu.present") : NULL, "true");
    CHECK_STR(l ? labels_get(l, "nvidia.com/vgpu.host-driver-branch") : NULL, "r550_40");
    labels_free(l);

    /* a capability chain that loops ends without a vendor capability */
    cfgspace[0x41] = 0x40;
    CHECK(host_vgpu_from_config(cfgspace, 256, "0000:01:00.0", &h) == INV_VGPU_ABSENT);
    config_free(&cfg);
}

/* ---- the feature file */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = xcalloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static size_t count_entries(const char *dir)
{
    _cleanup_free_ char *cmd = xasprintf("ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    unsigned n = 0;
    if (p) {
        if (fscanf(p, "%u", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

static void test_feature_file(void)
{
    const char *dir = scratch_dir("gdp-labels-file-");
    _cleanup_free_ char *path = xasprintf("%s/gfd", dir);
    struct labels *l = labels_new();
    labels_set(l, "nvidia.com/gpu.product", "Tesla-T4");
    labels_set(l, "nvidia.com/gpu.count", "4");
    labels_set(l, "nvidia.com/gfd.timestamp", "1");
    struct error err = { 0 };

    mode_t old = umask(077); /* the file must still be readable by NFD's worker */
    CHECK(labels_write_feature_file(l, path, &err) == 0);
    umask(old);
    _cleanup_free_ char *text = slurp(path);
    CHECK_STR(text, "nvidia.com/gfd.timestamp=1\nnvidia.com/gpu.count=4\n"
                    "nvidia.com/gpu.product=Tesla-T4\n");
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0644);
    CHECK(count_entries(dir) == 1); /* no temporary file left */

    /* Replaced by rename: a reader that opened the old file keeps reading all of it,
     * the path shows the new one whole (never a truncated or half-written file). */
    int oldfd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(oldfd >= 0);
    labels_set(l, "nvidia.com/gpu.count", "8");
    CHECK(labels_write_feature_file(l, path, &err) == 0);
    struct stat st2;
    CHECK(stat(path, &st2) == 0 && st2.st_ino != st.st_ino);
    char buf[256] = { 0 };
    CHECK(read(oldfd, buf, sizeof(buf) - 1) > 0);
    CHECK_STR_CONTAINS(buf, "nvidia.com/gpu.count=4\n");
    close(oldfd);
    _cleanup_free_ char *text2 = slurp(path);
    CHECK_STR_CONTAINS(text2, "nvidia.com/gpu.count=8\n");
    CHECK(count_entries(dir) == 1);

    /* a directory that does not exist: an error naming it, nothing created */
    _cleanup_free_ char *missing = xasprintf("%s/nodir/gfd", dir);
    CHECK(labels_write_feature_file(l, missing, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "nodir");
    CHECK(count_entries(dir) == 1);

    CHECK(labels_remove_feature_file(path) == 0);
    CHECK(labels_remove_feature_file(path) == 0); /* already gone: fine */
    CHECK(count_entries(dir) == 0);
    CHECK(scratch_remove(dir) == 0);
    labels_free(l);
}

static void test_label_set(void)
{
    struct labels *a = labels_new(), *b = labels_new();
    labels_set(a, "b", "1");
    labels_set(a, "a", "2");
    labels_set(a, "b", "3");
    CHECK(a->n == 2 && streq(a->items[0].key, "a") && streq(a->items[1].value, "3"));
    labels_set(b, "a", "2");
    CHECK(!labels_equal(a, b));
    labels_set(b, "b", "3");
    CHECK(labels_equal(a, b));
    labels_set(b, "b", "4");
    CHECK(!labels_equal(a, b));
    labels_free(a);
    labels_free(b);
}

static void test_sleep_interval(void)
{
    struct {
        const char *in;
        uint64_t ms;
    } ok[] = { { "60s", 60000 }, { "1m", 60000 }, { "1m30s", 90000 }, { "1.5h", 5400000 },
               { "500ms", 500 }, { "0", 0 }, { "2h45m", 9900000 }, { "1500us", 1 },
               { "infinite", CONFIG_SLEEP_INFINITE } };
    for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
        uint64_t v = 12345;
        CHECK(config_parse_sleep_interval(ok[i].in, &v) == 0);
        CHECK(v == ok[i].ms);
    }
    const char *bad[] = { "", "60", "s", "1x", "-1s", "1..5s", "infinity", "1s ", "3000000h" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        uint64_t v;
        CHECK(config_parse_sleep_interval(bad[i], &v) < 0);
    }
}

int main(void)
{
    test_sanitise();
    test_family();
    test_versions();
    test_edges();
    test_vgpu();
    test_feature_file();
    test_label_set();
    test_sleep_interval();
    return test_failures ? 1 : 0;
}
