/* DRA claims: reading the real 1.34 ResourceClaim objects (tests/data/dra/objects) for
 * our driver and pool, NVIDIA's opaque config (strict decode, defaults, precedence,
 * errors). One case per argument. */
#include <stdio.h>
#include <stdlib.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "config/config.h"
#include "core/fs.h"
#include "dra/dra-cdi.h"
#include "dra/dra-checkpoint.h"
#include "dra/dra-claim.h"
#include "dra/dra-config.h"
#include "dra/dra-types.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"
#include "tests/common/cases.h"

int test_failures;

#define POOL "gpu-node-1"

static json_t *load_object(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "dra/objects/%s.json", name);
    char *path = fixture_path("GDP_TEST_DATA", rel);
    json_error_t jerr;
    json_t *o = json_load_file(path, 0, &jerr);
    if (!o) {
        fprintf(stderr, "%s: %s\n", path, jerr.text);
        exit(1);
    }
    free(path);
    return o;
}

static json_t *parse_json(const char *text)
{
    json_error_t jerr;
    json_t *o = json_loads(text, 0, &jerr);
    if (!o) {
        fprintf(stderr, "bad test JSON: %s: %s\n", jerr.text, text);
        exit(1);
    }
    return o;
}

/* ---- claims ------------------------------------------------------------------------ */

static void test_objects(void)
{
    struct dra_claim c;
    struct error err = { 0 };

    json_t *o = load_object("resourceclaim-two-gpus-allocated");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0);
    CHECK_STR(c.uid, "2c9c529b-4ff7-4c93-b216-8506d026d54a");
    CHECK_STR(c.namespace_, "default");
    CHECK(c.n_allocs == 2);
    if (c.n_allocs == 2) {
        CHECK_STR(c.allocs[0].device, "gpu-2");
        CHECK_STR(c.allocs[1].device, "gpu-3");
        CHECK_STR(c.allocs[1].base_request, "gpus");
        CHECK(c.allocs[0].type == DRA_DEVICE_GPU && !c.allocs[0].admin_access);
        CHECK(c.allocs[0].config.kind == DRA_CONFIG_GPU &&
              c.allocs[0].config.sharing == DRA_SHARING_NONE);
    }
    dra_claim_clear(&c);
    /* Another pool (node) or another driver: nothing of ours. */
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, "gpu-node-2", &c, &err) == 0 && c.n_allocs == 0);
    dra_claim_clear(&c);
    CHECK(dra_claim_parse(o, "other.example.com", POOL, &c, &err) == 0 && c.n_allocs == 0);
    dra_claim_clear(&c);
    /* One result moved to another driver, one to another pool: the rest is ours. */
    json_t *results = json_object_get(
        json_object_get(json_object_get(json_object_get(o, "status"), "allocation"), "devices"),
        "results");
    json_object_set_new(json_array_get(results, 0), "driver", json_string("other.example.com"));
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0 && c.n_allocs == 1 &&
          streq(c.allocs[0].device, "gpu-3"));
    dra_claim_clear(&c);
    json_object_set_new(json_array_get(results, 1), "pool", json_string("gpu-node-2"));
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0 && c.n_allocs == 0);
    dra_claim_clear(&c);
    json_decref(o);

    o = load_object("resourceclaim-opaque-config-allocated");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0);
    CHECK(c.n_allocs == 1);
    if (c.n_allocs == 1) {
        /* Class config (Medium) first, claim config (Long) last: the last wins. */
        CHECK(c.allocs[0].config.sharing == DRA_SHARING_TIME_SLICING);
        CHECK(c.allocs[0].config.interval == DRA_TS_LONG);
    }
    dra_claim_clear(&c);
    json_decref(o);

    o = load_object("resourceclaim-from-template-allocated");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0 && c.n_allocs == 1 &&
          streq(c.allocs[0].device, "gpu-1") && streq(c.allocs[0].base_request, "gpu"));
    dra_claim_clear(&c);
    json_decref(o);

    o = load_object("resourceclaim-prioritized-list-allocated");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0 && c.n_allocs == 1);
    if (c.n_allocs == 1) {
        CHECK_STR(c.allocs[0].request, "gpus/small");
        CHECK_STR(c.allocs[0].base_request, "gpus");
        CHECK_STR(c.allocs[0].device, "gpu-5");
    }
    dra_claim_clear(&c);
    json_decref(o);

    o = load_object("resourceclaim-extended-resource-allocated");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == 0 && c.n_allocs == 1 &&
          streq(c.allocs[0].base_request, "container-0-request-0") &&
          streq(c.allocs[0].device, "gpu-4"));
    dra_claim_clear(&c);
    json_decref(o);

    o = load_object("resourceclaim-two-gpus-pending");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == -ENOENT);
    CHECK_STR(err.msg, "claim default/two-gpus is not allocated");
    CHECK(c.n_allocs == 0 && !c.uid);
    json_decref(o);
}

/* A claim allocated with `results` and `config` (JSON text) for the garbage cases. */
static int parse_with(const char *results, const char *configs, struct dra_claim *c,
                      struct error *err)
{
    char *text;
    if (asprintf(&text,
                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\",\"uid\":\"u-1\"},"
                 "\"status\":{\"allocation\":{\"devices\":{\"results\":%s,\"config\":%s}}}}",
                 results, configs) < 0)
        abort();
    json_t *o = parse_json(text);
    free(text);
    int r = dra_claim_parse(o, DRA_DRIVER_NAME, POOL, c, err);
    json_decref(o);
    return r;
}

#define RES(req, dev) "{\"request\":\"" req "\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"" POOL "\",\"device\":\"" dev "\"}"
#define CFG(src, reqs, params) "{\"source\":\"" src "\",\"requests\":" reqs ",\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":" params "}}"
#define GPUCFG(sharing) "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\"" sharing "}"
#define MIGCFG(sharing) "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"MigDeviceConfig\"" sharing "}"

static void test_precedence(void)
{
    struct dra_claim c;
    struct error err = { 0 };
    const char *results = "[" RES("a", "gpu-0") "," RES("b/x", "gpu-1") "," RES("m", "gpu-2-mig-1g5gb-19-0") "]";

    /* Empty requests: every device of the kind; by request (or its subrequest) after. */
    CHECK(parse_with(results,
                     "[" CFG("FromClaim", "[]", GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\"}"))
                     "," CFG("FromClaim", "[\"b\"]", GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Short\"}}"))
                     "," CFG("FromClass", "[\"a\"]", GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Long\"}}"))
                     "]", &c, &err) == 0);
    CHECK(c.n_allocs == 3);
    if (c.n_allocs == 3) {
        /* a: class config (Long) is overridden by the later claim config (Default). */
        CHECK(c.allocs[0].config.sharing == DRA_SHARING_TIME_SLICING &&
              c.allocs[0].config.interval == DRA_TS_DEFAULT);
        CHECK(c.allocs[1].config.interval == DRA_TS_SHORT && streq(c.allocs[1].base_request, "b"));
        CHECK(c.allocs[2].type == DRA_DEVICE_MIG && c.allocs[2].config.kind == DRA_CONFIG_MIG &&
              c.allocs[2].config.sharing == DRA_SHARING_NONE);
    }
    dra_claim_clear(&c);

    /* A subrequest named exactly; a MigDeviceConfig reaches only MIG devices. */
    CHECK(parse_with(results,
                     "[" CFG("FromClaim", "[\"b/x\"]", GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Medium\"}}"))
                     "," CFG("FromClaim", "[]", MIGCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\"}"))
                     "]", &c, &err) == 0 && c.n_allocs == 3);
    if (c.n_allocs == 3) {
        CHECK(c.allocs[0].config.sharing == DRA_SHARING_NONE);
        CHECK(c.allocs[1].config.interval == DRA_TS_MEDIUM);
        CHECK(c.allocs[2].config.sharing == DRA_SHARING_TIME_SLICING);
    }
    dra_claim_clear(&c);

    /* Another driver's config is not ours to decode, however odd. */
    CHECK(parse_with(results,
                     "[{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"x.example.com\",\"parameters\":{\"foo\":1}}}]",
                     &c, &err) == 0 && c.n_allocs == 3);
    dra_claim_clear(&c);

    /* A GpuConfig aimed at a MIG device by its request. */
    CHECK(parse_with(results, "[" CFG("FromClaim", "[\"m\"]", GPUCFG("")) "]", &c, &err) == -EINVAL);
    CHECK_STR(err.msg, "claim ns/c: cannot apply GpuConfig to MIG device gpu-2-mig-1g5gb-19-0 (request m)");
    CHECK(parse_with(results, "[" CFG("FromClaim", "[\"a\"]", MIGCFG("")) "]", &c, &err) == -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "cannot apply MigDeviceConfig to GPU device gpu-0");
}

static void expect_config_error(const char *params, int code, const char *msg)
{
    struct dra_config cfg;
    struct error err = { 0 };
    json_t *p = parse_json(params);
    int r = dra_config_decode(p, &cfg, &err);
    if (r != code || !streq(err.msg, msg)) {
        fprintf(stderr, "decode %s: %d \"%s\", want %d \"%s\"\n", params, r, err.msg, code, msg);
        test_failures++;
    }
    json_decref(p);
}

static void test_config_errors(void)
{
    expect_config_error(GPUCFG(",\"foo\":1"), -EINVAL,
                        "invalid GpuConfig: strict decoding error: unknown field \"foo\"");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"bar\":{}}"), -EINVAL,
                        "invalid GpuConfig: strict decoding error: unknown field \"sharing.bar\"");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Long\",\"x\":0}}"),
                        -EINVAL,
                        "invalid GpuConfig: strict decoding error: unknown field \"sharing.timeSlicingConfig.x\"");
    expect_config_error(MIGCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{}}"),
                        -EINVAL,
                        "invalid MigDeviceConfig: strict decoding error: unknown field \"sharing.timeSlicingConfig\"");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"Sometimes\"}"), -EINVAL,
                        "invalid GpuConfig: unknown GPU sharing strategy: Sometimes");
    expect_config_error(GPUCFG(",\"sharing\":{}"), -EINVAL,
                        "invalid GpuConfig: unknown GPU sharing strategy: ");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Forever\"}}"),
                        -EINVAL, "invalid GpuConfig: unknown time-slice interval: Forever");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"mpsConfig\":{}}"), -EINVAL,
                        "invalid GpuConfig: cannot use MpsConfig with the TimeSlicing strategy");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"timeSlicingConfig\":{}}"), -EINVAL,
                        "invalid GpuConfig: cannot use TimeSlicingConfig with the 'MPS' strategy");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":7}"), -EINVAL,
                        "invalid GpuConfig: json: cannot unmarshal number into field sharing.strategy of type GpuSharingStrategy");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":101}}"),
                        -EINVAL, "invalid GpuConfig: active thread percentage must not be greater than 100");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"nope\":1}}"), -EINVAL,
                        "invalid GpuConfig: strict decoding error: unknown field \"sharing.mpsConfig.nope\"");
    /* MPS's own table: test-dra-mps.c */
    expect_config_error("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"Nope\"}", -EINVAL,
                        "error decoding config parameters: no kind \"Nope\" is registered for version \"resource.nvidia.com/v1beta1\"");
    expect_config_error("{\"apiVersion\":\"v9\",\"kind\":\"GpuConfig\"}", -EINVAL,
                        "error decoding config parameters: no kind \"GpuConfig\" is registered for version \"v9\"");
    expect_config_error("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"VfioDeviceConfig\"}", -ENOTSUP,
                        "VfioDeviceConfig is not supported by this plugin (no VFIO pass-through devices)");
    expect_config_error("[1]", -EINVAL, "error decoding config parameters: not a JSON object");
    expect_config_error("{}", -EINVAL, "error decoding config parameters: Object 'Kind' is missing");

    /* Good ones, normalised. */
    struct dra_config cfg;
    struct error err = { 0 };
    json_t *p = parse_json(GPUCFG(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":null}"));
    CHECK(dra_config_decode(p, &cfg, &err) == 0 && cfg.sharing == DRA_SHARING_TIME_SLICING &&
          cfg.interval == DRA_TS_DEFAULT);
    json_decref(p);
    p = parse_json(MIGCFG(""));
    CHECK(dra_config_decode(p, &cfg, &err) == 0 && cfg.kind == DRA_CONFIG_MIG &&
          cfg.sharing == DRA_SHARING_NONE);
    json_decref(p);

    /* In a claim: the claim's error names it and the config's text. */
    struct dra_claim c;
    CHECK(parse_with("[" RES("a", "gpu-0") "]",
                     "[" CFG("FromClaim", "[]", GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":"
                                                       "{\"defaultActiveThreadPercentage\":-1}}")) "]", &c,
                     &err) == -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "claim ns/c: invalid GpuConfig: active thread percentage must not be negative");
    /* Garbage in a config that names no allocated request still fails: all are decoded. */
    CHECK(parse_with("[" RES("a", "gpu-0") "]",
                     "[" CFG("FromClass", "[\"zz\"]", "\"garbage\"") "]", &c, &err) == -EINVAL);
    CHECK_STR(err.msg, "claim ns/c: error decoding config parameters: not a JSON object");
}

static void test_bounds(void)
{
    struct dra_claim c;
    struct error err = { 0 };

    CHECK(parse_with("[" RES("a", "GPU-0") "]", "[]", &c, &err) == -EINVAL);
    CHECK_STR(err.msg, "claim ns/c: allocation result 0: device name \"GPU-0\" is not a DNS label");
    CHECK(parse_with("[" RES("a", "gpu-0/../x") "]", "[]", &c, &err) == -EINVAL);
    CHECK(parse_with("[" RES("a", "gpu-0123456789012345678901234567890123456789012345678901234567890") "]",
                     "[]", &c, &err) == -E2BIG);
    CHECK(parse_with("[{\"driver\":\"gpu.nvidia.com\",\"pool\":\"" POOL "\",\"device\":\"gpu-0\"}]", "[]",
                     &c, &err) == -EINVAL);
    CHECK_STR(err.msg, "claim ns/c: allocation result 0: missing string 'request'");
    CHECK(parse_with("{}", "[]", &c, &err) == -EINVAL);

    /* More results than any API server allows. */
    size_t n = DRA_CLAIM_MAX_RESULTS + 1, cap = n * 128 + 16, len = 0;
    char *many = malloc(cap);
    len += (size_t)snprintf(many + len, cap - len, "[");
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(many + len, cap - len, "%s" RES("a", "gpu-%zu"), i ? "," : "", i);
    snprintf(many + len, cap - len, "]");
    CHECK(parse_with(many, "[]", &c, &err) == -E2BIG);
    CHECK_STR_CONTAINS(err.msg, "more than 128 allocation results");
    free(many);

    json_t *o = parse_json("{\"metadata\":{\"namespace\":\"ns\",\"name\":\"c\"}}");
    CHECK(dra_claim_parse(o, DRA_DRIVER_NAME, POOL, &c, &err) == -EINVAL);
    CHECK_STR(err.msg, "claim metadata: missing string 'uid'");
    json_decref(o);

    CHECK(dra_claim_uid_valid("2c9c529b-4ff7-4c93-b216-8506d026d54a"));
    CHECK(!dra_claim_uid_valid(""));
    CHECK(!dra_claim_uid_valid("../x"));
    CHECK(!dra_claim_uid_valid("a/b"));
}

/* ---- CDI ---------------------------------------------------------------------------- */

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len;
    if (read_file_bounded(path, 1 << 20, &text, &len, NULL) < 0)
        return NULL;
    return text;
}

static void test_cdi(void)
{
    struct inv_mig migs[1] = { { .gi_cap_minor = 12, .ci_cap_minor = 13 } };
    snprintf(migs[0].uuid, sizeof(migs[0].uuid), "MIG-x");
    struct inv_gpu gpus[2] = { { .minor = 3 }, { .minor = 5, .mig_enabled = true } };
    gpus[1].migs = migs;
    gpus[1].n_migs = 1;
    struct inventory inv = { .gpus = gpus, .n_gpus = 2 };
    struct dra_device d0 = { .name = "gpu-3", .type = DRA_DEVICE_GPU, .gpu = 0 };
    struct dra_device d1 = { .name = "gpu-5-mig-1g5gb-19-0", .type = DRA_DEVICE_MIG, .gpu = 1, .mig = 0 };
    const struct dra_device *devs[] = { &d0, &d1 };
    struct config cfg;
    struct error err = { 0 };
    config_init_defaults(&cfg);

    char *id = dra_cdi_device_id("u-1", "gpu-3");
    CHECK_STR(id, "k8s.gpu.nvidia.com/claim=u-1-gpu-3");
    free(id);
    char *file = dra_cdi_file_name("u-1");
    CHECK_STR(file, "k8s.gpu.nvidia.com-claim_u-1.yaml");
    free(file);

    json_t *spec = dra_cdi_spec(&cfg, &inv, "u-1", devs, NULL, 2, NULL, &err);
    CHECK(spec != NULL);
    /* The common edits made earlier (while a GET is in flight) are the ones used. */
    json_t *common = json_pack("{s:[s]}", "env", "X=1");
    json_t *with = dra_cdi_spec(&cfg, &inv, "u-1", devs, NULL, 2, common, &err);
    CHECK(with && json_object_get(with, "containerEdits") == common);
    json_decref(with);
    json_decref(common);
    CHECK_STR(json_string_value(json_object_get(spec, "kind")), "k8s.gpu.nvidia.com/claim");
    json_t *devices = json_object_get(spec, "devices");
    CHECK(json_array_size(devices) == 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(devices, 1), "name")),
              "u-1-gpu-5-mig-1g5gb-19-0");
    json_t *nodes = json_object_get(json_object_get(json_array_get(devices, 1), "containerEdits"),
                                    "deviceNodes");
    CHECK(json_array_size(nodes) == 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(nodes, 0), "path")), "/dev/nvidia5");
    CHECK_STR(json_string_value(json_object_get(json_array_get(nodes, 2), "path")),
              "/dev/nvidia-caps/nvidia-cap13");
    CHECK_STR(json_string_value(json_array_get(
                  json_object_get(json_object_get(spec, "containerEdits"), "env"), 0)),
              "NVIDIA_VISIBLE_DEVICES=void");

    /* Written atomically under a root made for it, removed, removed again (missing: ok). */
    const char *dir = scratch_dir("dra-cdi-");
    char *root = xasprintf("%s/run/cdi", dir), *path = xasprintf("%s/k8s.gpu.nvidia.com-claim_u-1.yaml", root);
    struct fs_stage stage = { 0 };
    CHECK(dra_cdi_write(root, "u-1", spec, &stage, &err) == 0 && !stage.tmp);
    char *text = slurp(path);
    CHECK(text != NULL);
    json_t *back = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(back && json_equal(back, spec));
    json_decref(back);
    free(text);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644);
    CHECK(dra_cdi_remove(root, "u-1", &err) == 0 && access(path, F_OK) < 0);
    CHECK(dra_cdi_remove(root, "u-1", &err) == 0);

    /* Staged first (a hidden file), then written into the same file; a stage of another
     * claim's file given to the write is dropped, not renamed to this claim's name. */
    CHECK(dra_cdi_stage(root, "u-1", &stage, &err) == 0 && stage.tmp && access(path, F_OK) < 0);
    char *staged = xstrdup(stage.tmp);
    CHECK(dra_cdi_write(root, "u-1", spec, &stage, &err) == 0 && !stage.tmp);
    CHECK(access(staged, F_OK) < 0 && access(path, F_OK) == 0);
    free(staged);
    CHECK(dra_cdi_stage(root, "u-2", &stage, &err) == 0);
    staged = xstrdup(stage.tmp);
    CHECK(dra_cdi_write(root, "u-1", spec, &stage, &err) == 0 && !stage.tmp);
    CHECK(access(staged, F_OK) < 0);
    free(staged);
    char *path2 = xasprintf("%s/k8s.gpu.nvidia.com-claim_u-2.yaml", root);
    CHECK(access(path2, F_OK) < 0);
    free(path2);
    CHECK(dra_cdi_remove(root, "u-1", &err) == 0);

    /* A root that cannot be written: the error names the file. */
    char *blocked = xasprintf("%s/file", dir);
    int fd = open(blocked, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    close(fd);
    CHECK(dra_cdi_write(blocked, "u-1", spec, &stage, &err) < 0);
    CHECK(dra_cdi_stage(blocked, "u-1", &stage, &err) < 0 && !stage.tmp);
    CHECK_STR_CONTAINS(err.msg, "CDI spec k8s.gpu.nvidia.com-claim_u-1.yaml: creating ");
    /* A spec that is not one is not written. */
    json_object_del(spec, "kind");
    CHECK(dra_cdi_stage(root, "u-1", &stage, &err) == 0);
    CHECK(dra_cdi_write(root, "u-1", spec, &stage, &err) == -EINVAL && access(path, F_OK) < 0);
    CHECK(!stage.tmp);
    CHECK(rmdir(root) == 0); /* empty: no spec, no temporary file left by any case above */
    json_decref(spec);

    /* A MIG device whose capability nodes discovery could not find. */
    migs[0].ci_cap_minor = -1;
    CHECK(dra_cdi_spec(&cfg, &inv, "u-1", devs, NULL, 2, NULL, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "device gpu-5-mig-1g5gb-19-0: MIG device MIG-x");

    free(blocked);
    free(root);
    free(path);
    scratch_remove(dir);
    config_free(&cfg);
}

/* ---- checkpoint ----------------------------------------------------------------------- */

static struct dra_ckpt_claim ckpt_claim(const char *uid, enum dra_ckpt_state state, size_t n_devices)
{
    struct dra_ckpt_claim cl = { .uid = xstrdup(uid), .namespace_ = xstrdup("ns"),
                                 .name = xasprintf("claim-%s", uid), .state = state };
    cl.devices = xcalloc(n_devices + 1, sizeof(*cl.devices));
    for (size_t i = 0; i < n_devices; i++) {
        char *dev = xasprintf("gpu-%zu", i);
        cl.devices[cl.n_devices++] = (struct dra_ckpt_device){
            .device = dev, .pool = xstrdup("node"), .request = xstrdup("gpu"),
            .cdi_id = dra_cdi_device_id(uid, dev),
            .config = { .kind = DRA_CONFIG_GPU, .sharing = DRA_SHARING_TIME_SLICING,
                        .interval = DRA_TS_LONG },
        };
    }
    return cl;
}

static void test_checkpoint(void)
{
    const char *dir = scratch_dir("dra-ckpt-");
    char *pdir = xasprintf("%s/plugins/gpu.nvidia.com", dir);
    char *path = xasprintf("%s/checkpoint.json", pdir);
    struct dra_checkpoint c;
    struct error err = { 0 }, discarded = { 0 };
    char boot[DRA_CKPT_BOOT_ID_MAX];

    CHECK(dra_checkpoint_boot_id(NULL, boot, &err) == 0 && strlen(boot) == 36);
    CHECK(dra_checkpoint_boot_id("/nonexistent/boot_id", boot, &err) == -ENOENT);

    /* No file yet: empty. Two claims recorded, one of them replaced by its next state. */
    CHECK(dra_checkpoint_open(&c, pdir, "boot-1", "node", &discarded, &err) == 0 && c.n_claims == 0);
    struct dra_ckpt_claim a = ckpt_claim("uid-a", DRA_CKPT_PREPARE_STARTED, 2);
    struct dra_ckpt_claim b = ckpt_claim("uid-b", DRA_CKPT_PREPARE_COMPLETED, 1);
    CHECK(dra_checkpoint_put(&c, &a, &err) == 0 && !a.uid);
    CHECK(dra_checkpoint_put(&c, &b, &err) == 0);
    a = ckpt_claim("uid-a", DRA_CKPT_PREPARE_COMPLETED, 2);
    CHECK(dra_checkpoint_put(&c, &a, &err) == 0 && c.n_claims == 2);
    CHECK(dra_checkpoint_find(&c, "uid-a")->state == DRA_CKPT_PREPARE_COMPLETED);
    CHECK(dra_checkpoint_find(&c, "uid-zz") == NULL);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    dra_checkpoint_clear(&c);

    /* Read back as written (a restart). */
    CHECK(dra_checkpoint_open(&c, pdir, "boot-1", "node", &discarded, &err) == 0 && c.n_claims == 2);
    const struct dra_ckpt_claim *ra = dra_checkpoint_find(&c, "uid-a");
    CHECK(ra && ra->state == DRA_CKPT_PREPARE_COMPLETED && ra->n_devices == 2 &&
          streq(ra->name, "claim-uid-a") && streq(ra->devices[1].device, "gpu-1") &&
          streq(ra->devices[0].cdi_id, "k8s.gpu.nvidia.com/claim=uid-a-gpu-0") &&
          ra->devices[0].config.sharing == DRA_SHARING_TIME_SLICING &&
          ra->devices[0].config.interval == DRA_TS_LONG);
    CHECK(dra_checkpoint_remove(&c, "uid-a", &err) == 0 && c.n_claims == 1);
    CHECK(dra_checkpoint_remove(&c, "uid-a", &err) == 0);
    dra_checkpoint_clear(&c);
    CHECK(dra_checkpoint_open(&c, pdir, "boot-1", "node", &discarded, &err) == 0 && c.n_claims == 1 &&
          dra_checkpoint_find(&c, "uid-b"));
    dra_checkpoint_clear(&c);

    /* Another boot's: forgotten, and the next write is this boot's. */
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 1 && c.n_claims == 0);
    CHECK_STR_CONTAINS(discarded.msg, "is of another boot (boot-1, now boot-2): its 1 claims are forgotten");
    a = ckpt_claim("uid-a", DRA_CKPT_PREPARE_COMPLETED, 1);
    CHECK(dra_checkpoint_put(&c, &a, &err) == 0);
    dra_checkpoint_clear(&c);
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 0 && c.n_claims == 1);
    dra_checkpoint_clear(&c);

    /* Corrupt: moved aside, start empty; the moved file is kept as it was. */
    static const char garbage[] = "{\"version\": 1, \"preparedClaims\": [";
    CHECK(write_file_atomic(path, garbage, sizeof(garbage) - 1, 0600, false) == 0);
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 1 && c.n_claims == 0);
    CHECK_STR_CONTAINS(discarded.msg, "checkpoint.json is not JSON: moved to ");
    char *aside = xasprintf("%s.corrupt", path);
    char *text = slurp(aside);
    CHECK_STR(text, garbage);
    free(text);
    CHECK(access(path, F_OK) < 0);
    dra_checkpoint_clear(&c);
    static const char wrong[] = "{\"version\": 1, \"nodeBootID\": \"boot-2\", \"preparedClaims\": "
                                "{\"../x\": {\"checkpointState\": \"PrepareCompleted\", \"name\": \"n\", "
                                "\"namespace\": \"ns\", \"devices\": []}}}";
    CHECK(write_file_atomic(path, wrong, sizeof(wrong) - 1, 0600, false) == 0);
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 1 && c.n_claims == 0);
    CHECK_STR_CONTAINS(discarded.msg, "has a malformed claim");
    dra_checkpoint_clear(&c);
    /* A device recorded without "sharing" (no config, or an older plugin's): loaded as no
     * sharing config, which is what unprepare reads to leave its GPU alone. */
    static const char plain[] = "{\"version\": 1, \"nodeBootID\": \"boot-2\", \"preparedClaims\": "
                                "{\"u-1\": {\"checkpointState\": \"PrepareCompleted\", \"name\": \"n\", "
                                "\"namespace\": \"ns\", \"devices\": [{\"device\": \"gpu-0\", \"pool\": "
                                "\"node\", \"request\": \"r\", \"cdiDeviceID\": \"k8s.gpu.nvidia.com/claim=u-1-gpu-0\", "
                                "\"configKind\": \"GpuConfig\"}]}}}";
    CHECK(write_file_atomic(path, plain, sizeof(plain) - 1, 0600, false) == 0);
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 0 && c.n_claims == 1 &&
          c.claims[0].devices[0].config.sharing == DRA_SHARING_NONE);
    dra_checkpoint_clear(&c);
    CHECK(unlink(path) == 0);

    /* Bounds: the number of claims, then the size. Refused, nothing changes. */
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 0);
    for (size_t i = 0; i < DRA_CKPT_MAX_CLAIMS && c.n_claims == i; i++) {
        char uid[32];
        snprintf(uid, sizeof(uid), "u%zu", i);
        struct dra_ckpt_claim cl = ckpt_claim(uid, DRA_CKPT_PREPARE_COMPLETED, 0);
        /* Written once at the end: 4096 saves of a growing file would be slow. */
        c.claims = grow_array(c.claims, &c.alloc, c.n_claims + 1, sizeof(*c.claims));
        c.claims[c.n_claims++] = cl;
    }
    a = ckpt_claim("uid-last", DRA_CKPT_PREPARE_STARTED, 1);
    CHECK(dra_checkpoint_put(&c, &a, &err) == -ENOSPC && a.uid && c.n_claims == DRA_CKPT_MAX_CLAIMS);
    CHECK_STR_CONTAINS(err.msg, "more than 4096 prepared claims");
    dra_ckpt_claim_clear(&a);
    CHECK(dra_checkpoint_remove(&c, "u0", &err) == 0 && c.n_claims == DRA_CKPT_MAX_CLAIMS - 1);
    a = ckpt_claim("uid-big", DRA_CKPT_PREPARE_STARTED, 30000);
    CHECK(dra_checkpoint_put(&c, &a, &err) == -EFBIG && a.uid && !dra_checkpoint_find(&c, "uid-big"));
    CHECK_STR_CONTAINS(err.msg, "past its bound of 4194304");
    dra_ckpt_claim_clear(&a);
    dra_checkpoint_clear(&c);

    /* A directory that cannot be written: the error says so, nothing is recorded. */
    CHECK(dra_checkpoint_open(&c, pdir, "boot-2", "node", &discarded, &err) == 0);
    CHECK(chmod(pdir, 0500) == 0);
    a = ckpt_claim("uid-ro", DRA_CKPT_PREPARE_STARTED, 1);
    if (geteuid() != 0) { /* root writes anyway */
        CHECK(dra_checkpoint_put(&c, &a, &err) == -EACCES && c.n_claims == DRA_CKPT_MAX_CLAIMS - 1);
        CHECK_STR_CONTAINS(err.msg, "writing checkpoint ");
    }
    CHECK(chmod(pdir, 0700) == 0);
    dra_ckpt_claim_clear(&a);
    dra_checkpoint_clear(&c);

    free(aside);
    free(path);
    free(pdir);
    scratch_remove(dir);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        { "objects", test_objects },
        { "precedence", test_precedence },
        { "config-errors", test_config_errors },
        { "bounds", test_bounds },
        { "cdi", test_cdi },
        { "checkpoint", test_checkpoint },
    };
    return test_cases_run(argc, argv, cases, ELEMENTSOF(cases));
}
