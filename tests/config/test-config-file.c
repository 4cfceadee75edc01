/* Config loading, continued: the file's sections, unknown-key warnings, subcommands,
 * help, the documented example, health options checked at load, and how the file is
 * read (large, piped, /dev/null, oversized). */
#include "config-test.h"

static void test_file_sections(void)
{
    static const char *yaml =
        "version: v1\n"
        "flags:\n"
        "  migStrategy: single\n"
        "  failOnInitError: false\n"
        "  nvidiaDriverRoot: /run/nvidia/driver\n"
        "  gdrcopyEnabled: yes\n"
        "  mpsRoot: /run/nvidia/mps\n"
        "  deviceDiscoveryStrategy: nvml\n"
        "  useNodeFeatureAPI: true\n"
        "  plugin:\n"
        "    passDeviceSpecs: true\n"
        "    cdiAnnotationPrefix: example.com/\n"
        "    nvidiaCTKPath: /opt/ctk\n"
        "    containerDriverRoot: /drv\n"
        "    sharedDevicesAllocationPolicy: packed\n"
        "  gfd:\n"
        "    oneshot: true\n"
        "    sleepInterval: 60s\n"
        "resources:\n"
        "  gpus:\n"
        "  - pattern: '*A100*'\n"
        "    name: a100\n"
        "  mig:\n"
        "  - pattern: 1g.5gb\n"
        "    name: nvidia.com/mig-small\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: true\n"
        "    resources:\n"
        "    - name: gpu\n"
        "      replicas: 4\n"
        "      devices: all\n"
        "    - name: mig-small\n"
        "      rename: small-shared\n"
        "      replicas: 2\n"
        "      devices: 3\n"
        "  mps:\n"
        "    resources:\n"
        "    - name: gpu\n"
        "      replicas: 10\n"
        "      devices: [0, \"1\", \"0:1\", GPU-8f6f3f32-2f62-4d54-9bbb-c7b0bd1c1e01,\n"
        "                MIG-2d2e7b4c-10ab-4f0c-8a8f-52a5f7a7d6b1,\n"
        "                MIG-GPU-8f6f3f32-2f62-4d54-9bbb-c7b0bd1c1e01/1/0]\n"
        "imex:\n"
        "  channelIDs: [0]\n"
        "  required: true\n"
        "health:\n"
        "  xids:\n"
        "    ignore: [13, 31]\n"
        "  quietPeriod: 30\n"
        "  flapWindow: 2m\n"
        "  waitErrorThreshold: '7'\n";
    struct config c;
    struct error err = { 0 };
    int r = load(&c, yaml, NULL, NULL, NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    if (r != 0) {
        config_free(&c);
        return;
    }
    CHECK(c.mig_strategy == MIG_STRATEGY_SINGLE && !c.fail_on_init_error, "flags");
    CHECK(streq(c.driver_root, "/run/nvidia/driver") && streq(c.dev_root, "/run/nvidia/driver"),
          "roots");
    CHECK(c.gdrcopy_enabled && streq(c.mps_root, "/run/nvidia/mps"), "gdrcopy/mps");
    CHECK(streq(c.device_discovery_strategy, "nvml"), "discovery");
    CHECK(c.pass_device_specs && streq(c.cdi_annotation_prefix, "example.com/") &&
              streq(c.nvidia_cdi_hook_path, "/opt/ctk") && streq(c.driver_root_ctr_path, "/drv") &&
              c.shared_alloc_policy == SHARED_ALLOC_PACKED,
          "plugin");
    CHECK(c.n_gpu_patterns == 1 && streq(c.gpu_patterns[0].pattern, "*A100*") &&
              streq(c.gpu_patterns[0].name, "nvidia.com/a100"),
          "gpus");
    CHECK(c.n_mig_patterns == 1 && streq(c.mig_patterns[0].name, "nvidia.com/mig-small"), "mig");

    const struct config_sharing *ts = &c.time_slicing, *mps = &c.mps;
    CHECK(ts->present && ts->rename_by_default && ts->fail_requests_greater_than_one == 0 &&
              ts->n_resources == 2,
          "ts");
    CHECK(streq(ts->resources[0].name, "nvidia.com/gpu") &&
              streq(ts->resources[0].rename, "nvidia.com/gpu.shared") &&
              ts->resources[0].replicas == 4 && ts->resources[0].devices_kind == DEVICES_ALL,
          "ts[0]");
    CHECK(streq(ts->resources[1].rename, "nvidia.com/small-shared") &&
              ts->resources[1].devices_kind == DEVICES_COUNT && ts->resources[1].devices_count == 3,
          "ts[1]");
    CHECK(mps->present && mps->fail_requests_greater_than_one == 1 && mps->n_resources == 1 &&
              !mps->resources[0].rename && mps->resources[0].replicas == 10,
          "mps");
    CHECK(mps->resources[0].devices_kind == DEVICES_LIST && mps->resources[0].n_devices == 6 &&
              streq(mps->resources[0].devices[0].ref, "0") &&
              streq(mps->resources[0].devices[2].ref, "0:1") &&
              streq(mps->resources[0].devices[5].ref,
                    "MIG-GPU-8f6f3f32-2f62-4d54-9bbb-c7b0bd1c1e01/1/0"),
          "mps devices");
    CHECK(c.n_imex_channel_ids == 1 && c.imex_required, "imex");

    /* the health section is typed (integers as seconds, quoted numbers as strings) */
    const struct health_config *h = &c.health;
    CHECK(h->n_rules == 2 && h->rules[1].xid == 31 && h->rules[1].cls == HEALTH_IGNORE,
          "health xids");
    CHECK(h->quiet_ms == 30000 && h->wait_error_threshold == 7, "health values");

    /* config print */
    char *s = config_to_json_string(&c, true);
    json_error_t jerr;
    json_t *j = json_loads(s, 0, &jerr);
    CHECK(j != NULL, "print not JSON: %s", jerr.text);
    if (j) {
        json_t *fl = json_object_get(j, "flags"), *pl = json_object_get(fl, "plugin");
        CHECK(streq(json_string_value(json_object_get(j, "version")), "v1"), "version");
        CHECK(streq(json_string_value(json_object_get(fl, "migStrategy")), "single"), "mig");
        CHECK(json_is_false(json_object_get(fl, "failOnInitError")), "foie");
        CHECK(json_is_true(json_object_get(fl, "useNodeFeatureAPI")), "nfd");
        CHECK(streq(json_string_value(json_object_get(json_object_get(fl, "gfd"), "sleepInterval")),
                    "60000ms"), "gfd sleep");
        CHECK(streq(json_string_value(json_object_get(pl, "sharedDevicesAllocationPolicy")),
                    "packed"),
              "policy");
        CHECK(json_array_size(json_object_get(pl, "deviceListStrategy")) == 1, "dls");
        json_t *m = json_object_get(json_object_get(j, "sharing"), "mps");
        CHECK(json_is_true(json_object_get(m, "failRequestsGreaterThanOne")), "mps frg");
        json_t *d = json_object_get(json_array_get(json_object_get(m, "resources"), 0), "devices");
        CHECK(json_array_size(d) == 6, "devices list");
        CHECK(json_object_get(j, "health") != NULL, "health printed");
        CHECK(streq(json_string_value(json_object_get(json_object_get(j, "extensions"),
                                                      "sysfsRoot")),
                    "/sys"),
              "extensions");
        json_decref(j);
    }
    free(s);
    config_free(&c);
    config_free(&c); /* idempotent */

    /* JSON is YAML; MPS with an explicit false */
    r = load(&c,
             "{\"version\": \"v1\", \"flags\": {\"mpsRoot\": \"/mps\"}, \"sharing\": {\"mps\": "
             "{\"failRequestsGreaterThanOne\": false, \"resources\": [{\"name\": \"gpu\", "
             "\"replicas\": 2}]}}}",
             NULL, NULL, NULL, &err);
    CHECK(r == 0 && c.mps.present && c.mps.fail_requests_greater_than_one == 0, "json: %s",
          err.msg);
    config_free(&c);

    /* empty file, null sections */
    r = load(&c, "", NULL, NULL, NULL, &err);
    CHECK(r == 0, "empty file: %s", err.msg);
    config_free(&c);
    r = load(&c, "version:\nflags:\nsharing:\n  timeSlicing:\n", NULL, NULL, NULL, &err);
    CHECK(r == 0 && !c.time_slicing.present, "null sections: %s", err.msg);
    config_free(&c);
}

static void test_warnings(void)
{
    int fd = memfd_create("log", MFD_CLOEXEC);
    CHECK(fd >= 0, "memfd");
    if (fd < 0)
        return;
    log_set_fd(fd);
    struct config c;
    struct error err = { 0 };
    int r = load(&c,
                 "version: v1\nflags:\n  bogus: 1\n  plugin:\n    nope: x\nextra: {}\n"
                 "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
                 "      what: 1\n",
                 NULL, NULL, NULL, &err);
    log_set_fd(STDERR_FILENO);
    CHECK(r == 0, "unknown keys are not errors: %s", err.msg);
    config_free(&c);

    char buf[4096] = "";
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *want[] = {
        "config.yaml:3:3: unknown field \"flags.bogus\", ignoring",
        "config.yaml:5:5: unknown field \"flags.plugin.nope\", ignoring",
        "config.yaml:6:1: unknown field \"extra\", ignoring",
        "config.yaml:12:7: unknown field \"sharing.timeSlicing.resources[0].what\", ignoring",
    };
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        CHECK(strstr(buf, want[i]), "missing warning %s in:\n%s", want[i], buf);
    CHECK(buf[0] == 'W', "warning level: %.20s", buf);
}

static void test_commands(void)
{
    struct config c;
    struct config_command cmd;
    struct error err = { 0 };
    int r = load(&c, NULL, A("list", "--output", "json", "--mig-strategy", "single"), NULL, &cmd,
                 &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(cmd.name && streq(cmd.name, "list"), "name");
    CHECK(cmd.n_args == 2 && streq(cmd.args[0], "--output") && streq(cmd.args[1], "json") &&
              !cmd.args[2],
          "args");
    CHECK(c.mig_strategy == MIG_STRATEGY_SINGLE, "flag after subcommand");
    config_command_free(&cmd);
    config_free(&c);

    r = load(&c, NULL, A("--device-id-strategy=index", "config", "print", "--", "--mig-strategy"),
             NULL, &cmd, &err);
    CHECK(r == 0 && streq(cmd.name, "config") && cmd.n_args == 2 && streq(cmd.args[0], "print") &&
              streq(cmd.args[1], "--mig-strategy") && c.device_id_strategy == DEVICE_ID_INDEX &&
              c.mig_strategy == MIG_STRATEGY_NONE,
          "config print: %s", err.msg);
    config_command_free(&cmd);
    config_free(&c);

    r = load(&c, NULL, A("--bogus", "list"), NULL, &cmd, &err);
    CHECK(r < 0 && streq(err.msg, "unknown flag --bogus (see --help)"), "unknown flag before cmd");
    config_free(&c);

    r = load(&c, NULL, NULL, NULL, &cmd, &err);
    CHECK(r == 0 && !cmd.name && cmd.args && !cmd.args[0], "no command");
    config_command_free(&cmd);
    config_free(&c);
}

static void test_help(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_help(f, "gdp");
    fclose(f);
    const char *want[] = { "--mig-strategy", "$MIG_STRATEGY", "--driver-root, --nvidia-driver-root",
                           "$NVIDIA_CDI_HOOK_PATH, $NVIDIA_CTK_PATH", "--sysfs-root",
                           "$GDP_LOG_VERBOSITY", "--version", "default: \"envvar\"",
                           "gpu-device-plugin extensions" };
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        CHECK(strstr(buf, want[i]), "help lacks %s", want[i]);
    free(buf);
}

/* The full example in docs/configuration.md must load as documented. */
static void test_doc_example(void)
{
    const char *src = getenv("GDP_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "GDP_SOURCE_DIR unset, doc example not checked\n");
        failures++;
        return;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/docs/configuration.md", src);
    FILE *f = fopen(path, "re");
    CHECK(f != NULL, "%s", path);
    if (!f)
        return;
    char *doc = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&doc, &cap, 0, f);
    fclose(f);
    char *start = n > 0 ? strstr(doc, "```yaml\n") : NULL;
    char *end = start ? strstr(start + 8, "```") : NULL;
    CHECK(start && end, "no yaml block in docs");
    if (start && end) {
        *end = 0;
        struct config c;
        struct error err = { 0 };
        int r = load(&c, start + 8, NULL, NULL, NULL, &err);
        CHECK(r == 0 && streq(c.driver_root, "/run/nvidia/driver") &&
                  c.device_list_strategy == (DEVICE_LIST_ENVVAR | DEVICE_LIST_CDI_ANNOTATIONS) &&
                  c.time_slicing.n_resources == 1 && c.health.n_rules == 2,
              "doc example: %s", err.msg);
        config_free(&c);
    }
    free(doc);
}

/* `config print` and `serve` both go through config_load(): a health section serve
 * refuses must make config_load() (hence `config print`) fail too, with the same words. */
static void test_health_checked_at_load(void)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        { "health:\n  quietPeriod: 0\n", "config.yaml:1: health.quietPeriod: must be greater than zero" },
        { "health:\n  quitePeriod: 5s\n", "config.yaml:1: health.quitePeriod: unknown key" },
        { "health:\n  xids:\n    sometimes: [1]\n", "health.xids.sometimes: unknown key" },
        { "health:\n  waitErrorThreshold: 0\n", "health.waitErrorThreshold: must be at least 1" },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct config c;
        struct error err = { 0 };
        int r = load(&c, cases[i].yaml, NULL, NULL, NULL, &err);
        CHECK(r < 0 && strstr(err.msg, cases[i].want), "case %zu: r=%d %s", i, r, err.msg);
        config_free(&c);
    }
    /* the env names the variable; a flag beats env and file alike */
    const char *env[] = { "GDP_HEALTH_QUIET_PERIOD=0s", NULL };
    struct config c;
    struct error err = { 0 };
    int r = load(&c, "health:\n  quietPeriod: 5s\n", NULL, env, NULL, &err);
    CHECK(r < 0 && strstr(err.msg, "env GDP_HEALTH_QUIET_PERIOD: must be greater than zero"),
          "env: %s", err.msg);
    config_free(&c);
    const char *args[] = { "--health-quiet-period=7s", NULL };
    r = load(&c, "health:\n  quietPeriod: 0\n", args, env, NULL, &err);
    CHECK(r == 0 && c.health.quiet_ms == 7000, "flag: %s", err.msg);
    config_free(&c);
}

/* The file is read whole whatever it is: a regular file into a buffer of its size, a pipe
 * or device in doubling steps (NVIDIA's config-manager points the config at /dev/null),
 * and nothing over the 4 MiB bound. */
static void test_file_reads(void)
{
    /* the key after 100 KiB of comments: the end of a large regular file is read */
    size_t pad = 100 * 1024;
    char *yaml = malloc(pad + 64);
    memset(yaml, '#', pad);
    for (size_t i = 79; i < pad; i += 80)
        yaml[i] = '\n';
    yaml[pad - 1] = '\n';
    strcpy(yaml + pad, "health:\n  quietPeriod: 7s\n");
    struct config c;
    struct error err = { 0 };
    int r = load(&c, yaml, NULL, NULL, NULL, &err);
    CHECK(r == 0 && c.health.quiet_ms == 7000, "regular file: r=%d %s", r, err.msg);
    config_free(&c);

    /* the same bytes through a pipe: no size to go by, read past the first 4 KiB */
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    size_t len = strlen(yaml);
    CHECK(write(p[1], yaml, len) == (ssize_t)len, "pipe write");
    close(p[1]);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
    r = load(&c, NULL, A("--config-file", path), NULL, NULL, &err);
    CHECK(r == 0 && c.health.quiet_ms == 7000, "pipe: r=%d %s", r, err.msg);
    config_free(&c);
    close(p[0]);
    free(yaml);

    /* /dev/null: an empty config, the defaults */
    r = load(&c, NULL, A("--config-file", "/dev/null"), NULL, NULL, &err);
    CHECK(r == 0, "/dev/null: %s", err.msg);
    config_free(&c);

    /* over the bound: refused, naming the file */
    int fd = open("big.yaml", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0 && ftruncate(fd, (4 << 20) + 1) == 0, "big.yaml");
    close(fd);
    r = load(&c, NULL, A("--config-file", "big.yaml"), NULL, NULL, &err);
    CHECK(r < 0 && strstr(err.msg, "big.yaml") && strstr(err.msg, "at most 4194304 bytes"),
          "big file: r=%d %s", r, err.msg);
    config_free(&c);
    unlink("big.yaml");
}
int main(void)
{
    static void (*const tests[])(void) = {
        test_health_checked_at_load, test_file_reads, test_file_sections, test_warnings,
        test_commands, test_help, test_doc_example, NULL,
    };
    return config_test_main("config-file", tests);
}
