/* Allocate responses: every device-list strategy and combination, MPS, IMEX,
 * gdrcopy/gds/mofed, pass-device-specs with a dev root, validation messages.
 * Each response is rendered to a canonical text (the random annotation UUID checked
 * for v4 form and replaced by <uuid>) and compared whole. */
#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/macro.h"
#include "fixtures.h"
#include "output/allocate.h"
#include "tests/common/scratch.h"

static char *proc_root;

static bool is_uuid_v4(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
        } else if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
            return false;
        }
    }
    return s[14] == '4' && strchr("89ab", s[19]);
}

static char *render(V1beta1__ContainerAllocateResponse *resp, const char *dev_root)
{
    char *out = xstrdup("");
#define APPEND(...)                                                                   \
    do {                                                                              \
        char *_l = xasprintf(__VA_ARGS__);                                            \
        char *_n = xasprintf("%s%s\n", out, _l);                                      \
        free(_l);                                                                     \
        free(out);                                                                    \
        out = _n;                                                                     \
    } while (0)
    for (size_t i = 0; i < resp->n_envs; i++)
        APPEND("env %s=%s", resp->envs[i]->key, resp->envs[i]->value);
    for (size_t i = 0; i < resp->n_annotations; i++) {
        const char *k = resp->annotations[i]->key;
        const char *u = strstr(k, "nvidia-device-plugin_");
        if (u && is_uuid_v4(u + strlen("nvidia-device-plugin_")))
            APPEND("ann %.*snvidia-device-plugin_<uuid>=%s", (int)(u - k), k, resp->annotations[i]->value);
        else
            APPEND("ann BAD %s=%s", k, resp->annotations[i]->value);
    }
    for (size_t i = 0; i < resp->n_cdi_devices; i++)
        APPEND("cdi %s", resp->cdi_devices[i]->name);
    for (size_t i = 0; i < resp->n_mounts; i++)
        APPEND("mount %s <- %s%s", resp->mounts[i]->container_path, resp->mounts[i]->host_path,
               resp->mounts[i]->read_only ? " ro" : "");
    for (size_t i = 0; i < resp->n_devices; i++) {
        const char *h = resp->devices[i]->host_path;
        if (dev_root && startswith(h, dev_root))
            APPEND("dev %s <- $ROOT%s %s", resp->devices[i]->container_path, h + strlen(dev_root),
                   resp->devices[i]->permissions);
        else
            APPEND("dev %s <- %s %s", resp->devices[i]->container_path, h, resp->devices[i]->permissions);
    }
    return out;
}

struct fixture {
    struct inventory inv;
    struct config cfg;
    struct resource_set rs;
};

static void setup(struct fixture *f, int sharing /* 0 none, 1 ts, 2 mps */, bool index)
{
    struct error err = { 0 };
    fx_inventory(&f->inv, FX_T4, 4);
    fx_config(&f->cfg, proc_root);
    f->cfg.device_id_strategy = index ? DEVICE_ID_INDEX : DEVICE_ID_UUID;
    if (sharing == 1) {
        fx_add_replicated(&f->cfg.time_slicing, "nvidia.com/gpu", NULL, 2);
    } else if (sharing == 2) {
        fx_add_replicated(&f->cfg.mps, "nvidia.com/gpu", NULL, 2);
        f->cfg.mps.rename_by_default = true;
        free(f->cfg.mps_root);
        f->cfg.mps_root = xstrdup("/run/nvidia/mps");
    }
    memset(&f->rs, 0, sizeof(f->rs));
    CHECK(resources_build(&f->inv, &f->cfg, &f->rs, &err) == 0);
}

static void teardown(struct fixture *f)
{
    resources_clear(&f->rs);
    config_free(&f->cfg);
    fx_inventory_free(&f->inv);
}

static void expect(const struct fixture *f, const char *const *ids, size_t n, const char *want,
                   const char *dev_root, const char *what)
{
    struct error err = { 0 };
    V1beta1__ContainerAllocateResponse *resp = alloc_container(&f->rs.resources[0], &f->cfg, ids, n, &err);
    CHECK(resp != NULL);
    if (!resp) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
        return;
    }
    /* must pack as a valid message */
    size_t len = v1beta1__container_allocate_response__get_packed_size(resp);
    uint8_t *buf = xmalloc(len);
    CHECK(v1beta1__container_allocate_response__pack(resp, buf) == len);
    V1beta1__ContainerAllocateResponse *back = v1beta1__container_allocate_response__unpack(NULL, len, buf);
    CHECK(back && back->n_envs == resp->n_envs && back->n_devices == resp->n_devices);
    if (back)
        v1beta1__container_allocate_response__free_unpacked(back, NULL);
    free(buf);

    char *got = render(resp, dev_root);
    if (!streq(got, want)) {
        fprintf(stderr, "%s: got:\n%s--- want:\n%s---\n", what, got, want);
        test_failures++;
    }
    free(got);
    alloc_response_free(resp);
}

static void expect_fail(const struct fixture *f, const char *const *ids, size_t n, const char *want)
{
    struct error err = { 0 };
    V1beta1__ContainerAllocateResponse *resp = alloc_container(&f->rs.resources[0], &f->cfg, ids, n, &err);
    CHECK(resp == NULL);
    if (resp)
        alloc_response_free(resp);
    else
        CHECK_STR(err.msg, want);
}

#define U0 "GPU-74000000-0000-0000-0000-000000000000"
#define U1 "GPU-74000000-0000-0000-0000-000000000001"
#define U3 "GPU-74000000-0000-0000-0000-000000000003"
#define L(...) ((const char *const[]){ __VA_ARGS__ })

static void test_strategies(void)
{
    struct fixture f;
    setup(&f, 0, false);
    const char *const two[] = { U3, U1 };
    static const struct {
        unsigned strat;
        const char *prefix;
        const char *want;
    } t[] = {
        { DEVICE_LIST_ENVVAR, NULL, "env NVIDIA_VISIBLE_DEVICES=" U3 "," U1 "\n" },
        { DEVICE_LIST_VOLUME_MOUNTS, NULL,
          "env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\n"
          "mount /var/run/nvidia-container-devices/" U3 " <- /dev/null\n"
          "mount /var/run/nvidia-container-devices/" U1 " <- /dev/null\n" },
        { DEVICE_LIST_ENVVAR | DEVICE_LIST_VOLUME_MOUNTS, NULL,
          "env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\n"
          "mount /var/run/nvidia-container-devices/" U3 " <- /dev/null\n"
          "mount /var/run/nvidia-container-devices/" U1 " <- /dev/null\n" },
        { DEVICE_LIST_CDI_ANNOTATIONS, NULL,
          "ann cdi.k8s.io/nvidia-device-plugin_<uuid>=k8s.device-plugin.nvidia.com/gpu=" U3
          ",k8s.device-plugin.nvidia.com/gpu=" U1 "\n" },
        { DEVICE_LIST_CDI_ANNOTATIONS, "example.org/",
          "ann example.org/nvidia-device-plugin_<uuid>=k8s.device-plugin.nvidia.com/gpu=" U3
          ",k8s.device-plugin.nvidia.com/gpu=" U1 "\n" },
        { DEVICE_LIST_CDI_CRI, NULL,
          "cdi k8s.device-plugin.nvidia.com/gpu=" U3 "\ncdi k8s.device-plugin.nvidia.com/gpu=" U1 "\n" },
        { DEVICE_LIST_CDI_CRI | DEVICE_LIST_CDI_ANNOTATIONS, NULL,
          "ann cdi.k8s.io/nvidia-device-plugin_<uuid>=k8s.device-plugin.nvidia.com/gpu=" U3
          ",k8s.device-plugin.nvidia.com/gpu=" U1 "\n"
          "cdi k8s.device-plugin.nvidia.com/gpu=" U3 "\ncdi k8s.device-plugin.nvidia.com/gpu=" U1 "\n" },
        { DEVICE_LIST_CDI_CRI | DEVICE_LIST_ENVVAR, NULL,
          "env NVIDIA_VISIBLE_DEVICES=" U3 "," U1 "\n"
          "cdi k8s.device-plugin.nvidia.com/gpu=" U3 "\ncdi k8s.device-plugin.nvidia.com/gpu=" U1 "\n" },
    };
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        char what[32];
        snprintf(what, sizeof(what), "strategy case %zu", i);
        f.cfg.device_list_strategy = t[i].strat;
        free(f.cfg.cdi_annotation_prefix);
        f.cfg.cdi_annotation_prefix = xstrdup(t[i].prefix ? t[i].prefix : "cdi.k8s.io/");
        expect(&f, two, 2, t[i].want, NULL, what);
    }
    teardown(&f);

    /* index strategy: the kubelet names UUIDs, the runtime is told indices (request
     * order, de-duplicated); an index is not a kubelet ID (§4.1, §5) */
    setup(&f, 0, true);
    expect(&f, L(U3, U0, U3), 3, "env NVIDIA_VISIBLE_DEVICES=3,0\n", NULL, "index");
    f.cfg.device_list_strategy = DEVICE_LIST_VOLUME_MOUNTS | DEVICE_LIST_CDI_CRI;
    expect(&f, L(U1), 1,
           "env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\n"
           "cdi k8s.device-plugin.nvidia.com/gpu=1\n"
           "mount /var/run/nvidia-container-devices/1 <- /dev/null\n",
           NULL, "index volume-mounts + cdi-cri");
    expect_fail(&f, L(U3, "3"), 2,
                "invalid allocation request for \"nvidia.com/gpu\": invalid request: unknown device: 3");
    teardown(&f);

    /* index strategy with replicas: "<uuid>::<k>" in, the index out */
    setup(&f, 1, true);
    expect(&f, L(U3 "::1", U3 "::0", U0 "::1"), 3, "env NVIDIA_VISIBLE_DEVICES=3,0\n", NULL,
           "index replicas");
    expect_fail(&f, L("3::0"), 1,
                "invalid allocation request for \"nvidia.com/gpu\": invalid request: unknown device: 3::0");
    teardown(&f);
}

static void test_extras(void)
{
    struct fixture f;
    setup(&f, 0, false);
    f.cfg.gdrcopy_enabled = f.cfg.gds_enabled = f.cfg.mofed_enabled = true;
    f.cfg.imex_channel_ids = xcalloc(1, sizeof(int));
    f.cfg.n_imex_channel_ids = 1;
    f.cfg.device_list_strategy = DEVICE_LIST_CDI_CRI;
    expect(&f, L(U0), 1,
           "env NVIDIA_GDRCOPY=enabled\nenv NVIDIA_GDS=enabled\nenv NVIDIA_MOFED=enabled\n"
           "cdi k8s.device-plugin.nvidia.com/gpu=" U0 "\n"
           "cdi k8s.device-plugin.nvidia.com/imex-channel=0\n"
           "cdi k8s.device-plugin.nvidia.com/gdrcopy=all\n"
           "cdi k8s.device-plugin.nvidia.com/gds=all\n"
           "cdi k8s.device-plugin.nvidia.com/mofed=all\n",
           NULL, "extras cdi-only");

    f.cfg.device_list_strategy = DEVICE_LIST_ENVVAR | DEVICE_LIST_VOLUME_MOUNTS;
    f.cfg.gdrcopy_enabled = f.cfg.mofed_enabled = false;
    f.cfg.pass_device_specs = true;
    expect(&f, L(U0), 1,
           "env NVIDIA_GDS=enabled\n"
           "env NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\n"
           "env NVIDIA_IMEX_CHANNELS=0\n"
           "mount /var/run/nvidia-container-devices/" U0 " <- /dev/null\n"
           "mount /var/run/nvidia-container-devices/imex/0 <- /dev/null\n"
           "dev /dev/nvidia0 <- /dev/nvidia0 rw\n"
           "dev /dev/nvidia-caps-imex-channels/channel0 <- /dev/nvidia-caps-imex-channels/channel0 rw\n",
           NULL, "extras envvar+volume+imex+specs");
    teardown(&f);
}

static void test_sharing(void)
{
    struct fixture f;
    setup(&f, 1, false);
    /* time-slicing: >1 allowed by default, duplicates collapse, specs repeat */
    f.cfg.pass_device_specs = true;
    expect(&f, L(U0 "::0", U0 "::1", U1 "::1"), 3,
           "env NVIDIA_VISIBLE_DEVICES=" U0 "," U1 "\n"
           "dev /dev/nvidia0 <- /dev/nvidia0 rw\n"
           "dev /dev/nvidia0 <- /dev/nvidia0 rw\n"
           "dev /dev/nvidia1 <- /dev/nvidia1 rw\n",
           NULL, "ts dup");
    expect_fail(&f, L(U0), 1,
                "invalid allocation request for \"nvidia.com/gpu\": invalid request: unknown device: " U0);
    f.rs.resources[0].fail_requests_greater_than_one = true;
    expect_fail(&f, L(U0 "::0", U1 "::1"), 2,
                "invalid allocation request for \"nvidia.com/gpu\": invalid request: maximum request size "
                "for shared resources is 1; found 2");
    /* unknown beats the size rule */
    expect_fail(&f, L(U0 "::0", "bogus"), 2,
                "invalid allocation request for \"nvidia.com/gpu\": invalid request: unknown device: bogus");
    f.cfg.pass_device_specs = false;
    expect(&f, L(U1 "::0"), 1, "env NVIDIA_VISIBLE_DEVICES=" U1 "\n", NULL, "ts one");
    teardown(&f);

    setup(&f, 2, false);
    CHECK_STR(f.rs.resources[0].name, "nvidia.com/gpu.shared");
    expect(&f, L(U3 "::1"), 1,
           "env CUDA_MPS_PIPE_DIRECTORY=/mps/nvidia.com/gpu.shared/pipe\n"
           "env NVIDIA_VISIBLE_DEVICES=" U3 "\n"
           "mount /mps/nvidia.com/gpu.shared/pipe <- /run/nvidia/mps/nvidia.com/gpu.shared/pipe\n"
           "mount /dev/shm <- /run/nvidia/mps/shm\n",
           NULL, "mps");
    expect_fail(&f, L(U3 "::1", U3 "::0"), 2,
                "invalid allocation request for \"nvidia.com/gpu.shared\": invalid request: maximum "
                "request size for shared resources is 1; found 2");
    struct alloc_mps m;
    struct error err = { 0 };
    CHECK(alloc_mps_paths(&f.rs.resources[0], &f.cfg, &m, &err) == 0);
    CHECK_STR(m.host_started, "/run/nvidia/mps/nvidia.com/gpu.shared/.started");
    alloc_mps_clear(&m);
    teardown(&f);
}

static void touch(const char *root, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

static void test_device_specs(void)
{
    const char *root = scratch_dir("gdp-res-dev-");
    _cleanup_free_ char *dev = xasprintf("%s/dev", root);
    mkdir(dev, 0755);
    touch(root, "/dev/nvidiactl");
    touch(root, "/dev/nvidia-uvm");

    static const char *const profiles[] = { "1g.5gb", "1g.5gb" };
    struct fixture f;
    struct error err = { 0 };
    fx_inventory(&f.inv, FX_A100, 2);
    fx_enable_mig(&f.inv, 1, profiles, 2);
    fx_config(&f.cfg, proc_root);
    f.cfg.mig_strategy = MIG_STRATEGY_MIXED;
    f.cfg.device_id_strategy = DEVICE_ID_INDEX;
    f.cfg.pass_device_specs = true;
    free(f.cfg.dev_root);
    f.cfg.dev_root = xasprintf("%s/", root); /* trailing slash joins cleanly */
    memset(&f.rs, 0, sizeof(f.rs));
    CHECK(resources_build(&f.inv, &f.cfg, &f.rs, &err) == 0);
    const struct rs_resource *mig = NULL;
    for (size_t i = 0; i < f.rs.n_resources; i++)
        if (streq(f.rs.resources[i].name, "nvidia.com/mig-1g.5gb"))
            mig = &f.rs.resources[i];
    CHECK(mig != NULL);
    if (mig) {
        /* the kubelet names the MIG UUID; the runtime gets "<gpu>:<slot>" (index) */
        V1beta1__ContainerAllocateResponse *resp =
            alloc_container(mig, &f.cfg, L(f.inv.gpus[1].migs[1].uuid), 1, &err);
        CHECK(resp != NULL);
        if (resp) {
            char *got = render(resp, root);
            CHECK_STR(got, "env NVIDIA_VISIBLE_DEVICES=1:1\n"
                           "dev /dev/nvidiactl <- $ROOT/dev/nvidiactl rw\n"
                           "dev /dev/nvidia-uvm <- $ROOT/dev/nvidia-uvm rw\n"
                           "dev /dev/nvidia1 <- $ROOT/dev/nvidia1 rw\n"
                           "dev /dev/nvidia-caps/nvidia-cap1102 <- $ROOT/dev/nvidia-caps/nvidia-cap1102 rw\n"
                           "dev /dev/nvidia-caps/nvidia-cap6020 <- $ROOT/dev/nvidia-caps/nvidia-cap6020 rw\n");
            free(got);
            alloc_response_free(resp);
        }
    }
    teardown(&f);
    fx_rmtree(root);

    _cleanup_free_ char *a = alloc_join_root("/", "/dev/x");
    _cleanup_free_ char *b = alloc_join_root("/host//", "/dev/x");
    _cleanup_free_ char *c = alloc_join_root("", "/dev/x");
    CHECK_STR(a, "/dev/x");
    CHECK_STR(b, "/host/dev/x");
    CHECK_STR(c, "/dev/x");
}

int main(void)
{
    proc_root = fx_proc_root();
    test_strategies();
    test_extras();
    test_sharing();
    test_device_specs();
    fx_rmtree(proc_root);
    free(proc_root);
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
