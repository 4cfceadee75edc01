/* CDI specs: content, validity against the CDI JSON schema (a small checker walking
 * schema.json/defs.json from $GDP_TEST_DATA/cdi-schema: type, required, properties,
 * items, patternProperties, $ref, integer bounds), atomic writing, stale removal. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/macro.h"
#include "fixtures.h"
#include "output/cdi.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"

static char *proc_root;
static json_t *schema, *defs;

static json_t *resolve(const char *ref)
{
    const char *name = strrchr(ref, '/');
    return name ? json_object_get(json_object_get(defs, "definitions"), name + 1) : NULL;
}

static bool type_ok(const char *type, json_t *v)
{
    if (streq(type, "object"))
        return json_is_object(v);
    if (streq(type, "array"))
        return json_is_array(v);
    if (streq(type, "string"))
        return json_is_string(v);
    if (streq(type, "integer"))
        return json_is_integer(v);
    if (streq(type, "boolean"))
        return json_is_boolean(v);
    return true;
}

static bool schema_ok(json_t *s, json_t *v, const char *path)
{
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        json_t *target = resolve(json_string_value(ref));
        if (!target) {
            fprintf(stderr, "%s: unresolved %s\n", path, json_string_value(ref));
            return false;
        }
        return schema_ok(target, v, path);
    }
    const char *type = json_string_value(json_object_get(s, "type"));
    if (type && !type_ok(type, v)) {
        fprintf(stderr, "%s: not %s\n", path, type);
        return false;
    }
    if (json_is_integer(v)) {
        json_t *mn = json_object_get(s, "minimum"), *mx = json_object_get(s, "maximum");
        if ((mn && json_integer_value(v) < json_integer_value(mn)) ||
            (mx && json_number_value(mx) < 9e18 && json_integer_value(v) > json_integer_value(mx)))
            return false;
    }
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(s, "required"), i, x)
        if (json_is_object(v) && !json_object_get(v, json_string_value(x))) {
            fprintf(stderr, "%s: missing %s\n", path, json_string_value(x));
            return false;
        }
    const char *k;
    json_t *val;
    if (json_is_object(v)) {
        json_t *props = json_object_get(s, "properties");
        json_t *pat = json_object_get(s, "patternProperties");
        json_object_foreach(v, k, val) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%s.%s", path, k);
            json_t *ps = json_object_get(props, k);
            if (ps && !schema_ok(ps, val, sub))
                return false;
            const char *pk;
            json_t *pv;
            json_object_foreach(pat, pk, pv) /* only ".{1,}" in the CDI schema */
                if (*k && !schema_ok(pv, val, sub))
                    return false;
        }
    }
    json_t *items = json_object_get(s, "items");
    if (items && json_is_array(v))
        json_array_foreach(v, i, x) {
            char sub[256];
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (!schema_ok(items, x, sub))
                return false;
        }
    return true;
}

static json_t *load(const char *dir, const char *file)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    if (!j)
        fprintf(stderr, "%s: %s\n", p, e.text);
    return j;
}

static void test_schema_testdata(void)
{
    _cleanup_free_ char *dir = fixture_path("GDP_TEST_DATA", "cdi-schema");
    static const struct {
        const char *file;
        bool good;
    } t[] = {
        { "testdata/good/minimal.json", true },
        { "testdata/good/spec-example.json", true },
        { "testdata/bad/empty.json", false },
        { "testdata/bad/explicit-empty.json", false },
    };
    fixture_check_in(dir, "schema.json");
    fixture_check_in(dir, "defs.json");
    for (size_t i = 0; i < ELEMENTSOF(t); i++)
        fixture_check_in(dir, t[i].file);
    schema = load(dir, "schema.json");
    defs = load(dir, "defs.json");
    CHECK(schema && defs);
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        json_t *j = load(dir, t[i].file);
        struct error err = { 0 };
        /* an empty file does not even parse: that is "bad" too */
        bool ours = j && cdi_validate(j, &err) == 0;
        bool theirs = j && schema_ok(schema, j, t[i].file);
        if (ours != t[i].good || theirs != t[i].good) {
            fprintf(stderr, "%s: ours %d schema %d want %d\n", t[i].file, ours, theirs, t[i].good);
            test_failures++;
        }
        json_decref(j);
    }
}

static bool has_device(json_t *spec, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
        if (streq(json_string_value(json_object_get(d, "name")), name))
            return true;
    return false;
}

static json_t *device_nodes(json_t *spec, const char *name)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d)
        if (streq(json_string_value(json_object_get(d, "name")), name))
            return json_object_get(json_object_get(d, "containerEdits"), "deviceNodes");
    return NULL;
}

static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += !streq(e->d_name, ".") && !streq(e->d_name, ".."); /* temp files count too */
    closedir(d);
    return n;
}

static void test_specs(void)
{
    const char *root = scratch_dir("gdp-res-cdi-");
    _cleanup_free_ char *dev = xasprintf("%s/dev", root);
    _cleanup_free_ char *ctl = xasprintf("%s/dev/nvidiactl", root);
    _cleanup_free_ char *fs0 = xasprintf("%s/dev/nvidia-fs0", root);
    _cleanup_free_ char *spec_dir = xasprintf("%s/run/cdi", root);
    mkdir(dev, 0755);
    fclose(fopen(ctl, "we"));
    fclose(fopen(fs0, "we"));

    static const char *const profiles[] = { "1g.5gb", "2g.10gb" };
    struct inventory inv;
    struct config cfg;
    struct resource_set rs = { 0 };
    struct error err = { 0 };
    fx_inventory(&inv, FX_A100, 2);
    fx_enable_mig(&inv, 1, profiles, 2);
    fx_config(&cfg, proc_root);
    cfg.mig_strategy = MIG_STRATEGY_MIXED;
    free(cfg.dev_root);
    cfg.dev_root = xstrdup(root);
    free(cfg.cdi_spec_dir);
    cfg.cdi_spec_dir = xstrdup(spec_dir);
    fx_add_replicated(&cfg.time_slicing, "nvidia.com/gpu", NULL, 3); /* replicas share one CDI device */
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);

    /* envvar only: nothing written */
    CHECK(cdi_write_specs(&rs, &inv, &cfg, &err) == 0);
    struct stat st;
    CHECK(stat(spec_dir, &st) < 0);

    cfg.device_list_strategy = DEVICE_LIST_CDI_CRI;
    cfg.gds_enabled = true;
    cfg.imex_channel_ids = xcalloc(1, sizeof(int));
    cfg.n_imex_channel_ids = 1;
    CHECK(cdi_write_specs(&rs, &inv, &cfg, &err) == 0);
    CHECK(count_files(spec_dir) == 3);

    json_t *gpu = load(spec_dir, "k8s.device-plugin.nvidia.com-gpu.json");
    CHECK(gpu && schema_ok(schema, gpu, "gpu"));
    if (gpu) {
        CHECK_STR(json_string_value(json_object_get(gpu, "kind")), "k8s.device-plugin.nvidia.com/gpu");
        CHECK_STR(json_string_value(json_object_get(gpu, "cdiVersion")), CDI_VERSION);
        CHECK(json_array_size(json_object_get(gpu, "devices")) == 4); /* GPU0, 2 MIG, all */
        CHECK(has_device(gpu, inv.gpus[0].uuid));
        CHECK(has_device(gpu, inv.gpus[1].migs[0].uuid));
        CHECK(has_device(gpu, inv.gpus[1].migs[1].uuid));
        CHECK(!has_device(gpu, inv.gpus[1].uuid));
        json_t *n = device_nodes(gpu, inv.gpus[1].migs[1].uuid);
        CHECK(json_array_size(n) == 3);
        json_t *n0 = json_array_get(n, 2);
        CHECK_STR(json_string_value(json_object_get(n0, "path")), "/dev/nvidia-caps/nvidia-cap6020");
        _cleanup_free_ char *host = xasprintf("%s/dev/nvidia-caps/nvidia-cap6020", root);
        CHECK_STR(json_string_value(json_object_get(n0, "hostPath")), host);
        CHECK(json_array_size(device_nodes(gpu, "all")) == 6); /* nvidia0, nvidia1, 2×2 caps */
        json_t *common = json_object_get(json_object_get(gpu, "containerEdits"), "deviceNodes");
        CHECK(json_array_size(common) == 1);
        CHECK_STR(json_string_value(json_object_get(json_array_get(common, 0), "path")), "/dev/nvidiactl");
    }
    json_decref(gpu);

    json_t *imex = load(spec_dir, "k8s.device-plugin.nvidia.com-imex-channel.json");
    CHECK(imex && schema_ok(schema, imex, "imex") && has_device(imex, "0"));
    if (imex)
        CHECK_STR(json_string_value(json_object_get(json_array_get(device_nodes(imex, "0"), 0), "path")),
                  "/dev/nvidia-caps-imex-channels/channel0");
    json_decref(imex);

    json_t *gds = load(spec_dir, "k8s.device-plugin.nvidia.com-gds.json");
    CHECK(gds && schema_ok(schema, gds, "gds") && has_device(gds, "all"));
    if (gds)
        CHECK_STR(json_string_value(json_object_get(json_array_get(device_nodes(gds, "all"), 0), "path")),
                  "/dev/nvidia-fs0");
    json_decref(gds);

    _cleanup_free_ char *gpu_path = xasprintf("%s/k8s.device-plugin.nvidia.com-gpu.json", spec_dir);
    CHECK(stat(gpu_path, &st) == 0 && (st.st_mode & 0777) == 0644);

    /* gds off, index IDs: stale gds spec removed, names are indices */
    resources_clear(&rs);
    cfg.gds_enabled = false;
    cfg.device_id_strategy = DEVICE_ID_INDEX;
    CHECK(resources_build(&inv, &cfg, &rs, &err) == 0);
    CHECK(cdi_write_specs(&rs, &inv, &cfg, &err) == 0);
    CHECK(count_files(spec_dir) == 2);
    gpu = load(spec_dir, "k8s.device-plugin.nvidia.com-gpu.json");
    CHECK(gpu && has_device(gpu, "0") && has_device(gpu, "1:0") && has_device(gpu, "1:1"));
    json_decref(gpu);

    /* structural checker catches what the schema requires */
    json_t *bad = json_pack("{s:s, s:s, s:[{s:s}]}", "cdiVersion", "0.5.0", "kind", "a/b", "devices", "name", "x");
    CHECK(cdi_validate(bad, &err) < 0 && strstr(err.msg, "containerEdits"));
    CHECK(!schema_ok(schema, bad, "bad"));
    json_decref(bad);
    bad = json_pack("{s:s, s:s, s:[{s:s, s:{s:[{s:s}]}}]}", "cdiVersion", "0.5.0", "kind", "a/b", "devices",
                    "name", "x", "containerEdits", "deviceNodes", "hostPath", "/dev/x");
    CHECK(cdi_validate(bad, &err) < 0 && strstr(err.msg, "path"));
    CHECK(!schema_ok(schema, bad, "bad2"));
    json_decref(bad);

    /* unwritable spec dir: error names the path */
    free(cfg.cdi_spec_dir);
    cfg.cdi_spec_dir = xasprintf("%s/nvidiactl/sub", dev);
    CHECK(cdi_write_specs(&rs, &inv, &cfg, &err) < 0 && strstr(err.msg, "nvidiactl"));

    resources_clear(&rs);
    config_free(&cfg);
    fx_inventory_free(&inv);
    fx_rmtree(root);
}

int main(void)
{
    test_schema_testdata(); /* first: a missing fixture exits before the temp tree exists */
    proc_root = fx_proc_root();
    test_specs();
    json_decref(schema);
    json_decref(defs);
    fx_rmtree(proc_root);
    free(proc_root);
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
