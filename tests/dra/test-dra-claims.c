/* DRA claims: reading the real 1.34 ResourceClaim objects (tests/data/dra/objects) for
 * our driver and pool, NVIDIA's opaque config (strict decode, defaults, precedence,
 * errors). One case per argument. */
#include <stdio.h>
#include <stdlib.h>

#include "dra/dra-claim.h"
#include "dra/dra-config.h"
#include "dra/dra-types.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"

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
                        "invalid GpuConfig: cannot use TimeSlicingConfig with the MPS strategy");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":7}"), -EINVAL,
                        "invalid GpuConfig: json: cannot unmarshal number into field sharing.strategy of type GpuSharingStrategy");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":101}}"),
                        -EINVAL, "invalid GpuConfig: active thread percentage must not be greater than 100");
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"nope\":1}}"), -EINVAL,
                        "invalid GpuConfig: strict decoding error: unknown field \"sharing.mpsConfig.nope\"");
    /* A valid MPS config: refused by name, we run no per-claim MPS daemons. */
    expect_config_error(GPUCFG(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":50,\"multiUser\":true}}"),
                        -ENOTSUP,
                        "invalid GpuConfig: MPS sharing is not supported by this plugin (it runs no "
                        "per-claim MPS control daemon); use TimeSlicing, or the device plugin's MPS sharing");
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
                     "[" CFG("FromClaim", "[]", GPUCFG(",\"sharing\":{\"strategy\":\"MPS\"}")) "]", &c,
                     &err) == -ENOTSUP);
    CHECK_STR_CONTAINS(err.msg, "claim ns/c: invalid GpuConfig: MPS sharing is not supported");
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

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        { "objects", test_objects },
        { "precedence", test_precedence },
        { "config-errors", test_config_errors },
        { "bounds", test_bounds },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        if (argc < 2 || streq(argv[1], cases[i].name))
            cases[i].fn();
    return test_failures ? 1 : 0;
}
