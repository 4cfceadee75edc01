/* Config loading: precedence, aliases, flag forms and every validation message with
 * its origin (config-test.h has the helpers). */
#include <sys/un.h>

#include "config-test.h"
#include "dra/dra-types.h"

struct err_case {
    const char *name;
    const char *yaml;
    const char *const *args;
    const char *const *env;
    const char *msg; /* exact message */
};

/* A directory one byte longer than a DRA socket directory may be (test_dra). */
#define D78 "/01234567890123456789012345678901234567890123456789012345678901234567890123456"
#define D79 D78 "7"

static const struct err_case err_cases[] = {
    { "unknown flag", NULL, A("--bogus=1"), NULL, "unknown flag --bogus (see --help)" },
    { "unknown flag, a close one", NULL, A("--mig-stratgy=mixed"), NULL,
      "unknown flag --mig-stratgy; did you mean --mig-strategy? (see --help)" },
    { "unknown flag, an alias close", NULL, A("-nvidia-driver-rot", "/x"), NULL,
      "unknown flag --nvidia-driver-rot; did you mean --nvidia-driver-root? (see --help)" },
    { "unknown short flag", NULL, A("-x"), NULL, "unknown flag -x (see --help)" },
    { "flag needs argument", NULL, A("--mig-strategy"), NULL,
      "flag needs an argument: -mig-strategy" },
    { "positional without command", NULL, A("list"), NULL, "unexpected argument: list" },
    { "mig strategy flag", NULL, A("--mig-strategy=bar"), NULL,
      "--mig-strategy: unknown MIG strategy: bar (allowed: none, single, mixed)" },
    { "mig strategy env", NULL, NULL, A("MIG_STRATEGY=baz"),
      "env MIG_STRATEGY: unknown MIG strategy: baz (allowed: none, single, mixed)" },
    { "mig strategy file", "flags:\n  migStrategy: foo\n", NULL, NULL,
      "config.yaml:2:16: flags.migStrategy: unknown MIG strategy: foo (allowed: none, single, "
      "mixed)" },
    { "device id strategy", NULL, A("--device-id-strategy", "serial"), NULL,
      "--device-id-strategy: invalid --device-id-strategy option: serial (allowed: uuid, index)" },
    { "device id strategy file", "flags:\n  plugin:\n    deviceIDStrategy: serial\n", NULL, NULL,
      "config.yaml:3:23: flags.plugin.deviceIDStrategy: invalid --device-id-strategy option: "
      "serial (allowed: uuid, index)" },
    { "device list strategy", NULL, A("--device-list-strategy", "envvar,bogus"), NULL,
      "--device-list-strategy: invalid --device-list-strategy option: invalid strategy: bogus "
      "(allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)" },
    { "device list strategy env", NULL, NULL, A("DEVICE_LIST_STRATEGY=cdi"),
      "env DEVICE_LIST_STRATEGY: invalid --device-list-strategy option: invalid strategy: cdi "
      "(allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)" },
    { "device list strategy empty", NULL, A("--device-list-strategy="), NULL,
      "--device-list-strategy: invalid --device-list-strategy option: no strategy given "
      "(allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)" },
    { "device list strategy file list",
      "flags:\n  plugin:\n    deviceListStrategy: [envvar, 3]\n", NULL, NULL,
      "config.yaml:3:25: flags.plugin.deviceListStrategy: invalid --device-list-strategy option: "
      "invalid strategy: 3 (allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)" },
    { "shared alloc policy", NULL, A("--shared-devices-allocation-policy=spread"), NULL,
      "--shared-devices-allocation-policy: invalid --shared-devices-allocation-policy option: "
      "spread (allowed: distributed, packed)" },
    { "discovery strategy", NULL, A("--device-discovery-strategy", "wsl"), NULL,
      "--device-discovery-strategy: invalid --device-discovery-strategy option wsl (allowed: "
      "auto, nvml, tegra)" },
    { "log format", NULL, A("--log-format", "xml"), NULL,
      "--log-format: invalid --log-format option: xml (allowed: text, json)" },
    { "dra bool", NULL, A("--dra=yes"), NULL,
      "--dra: invalid boolean value \"yes\" (allowed: true, false, 1, 0, t, f)" },
    { "cdi root relative", NULL, NULL, A("CDI_ROOT=cdi"),
      "env CDI_ROOT: invalid --cdi-root \"cdi\": must be an absolute path" },
    /* 79 bytes: 108 (sun_path) - "/gpu.nvidia.com/.dra.sock.tmp" - NUL = 78 is the most */
    { "plugins dir too long", NULL,
      A("--kubelet-plugins-directory-path=" D79),
      NULL, "--kubelet-plugins-directory-path: invalid --kubelet-plugins-directory-path "
      "\"" D79 "\": 79 bytes, longer than 78: the path of the socket put there, "
      "\"<dir>/gpu.nvidia.com/.dra.sock.tmp\", must fit in a Unix socket address (108 bytes "
      "with its NUL)" },
    { "registrar dir too long", NULL, NULL, A("KUBELET_REGISTRAR_DIRECTORY_PATH=" D79),
      "env KUBELET_REGISTRAR_DIRECTORY_PATH: invalid --kubelet-registrar-directory-path "
      "\"" D79 "\": 79 bytes, longer than 78: the path of the socket put there, "
      "\"<dir>/.gpu.nvidia.com-reg.sock.tmp\", must fit in a Unix socket address (108 bytes "
      "with its NUL)" },
    { "dra device plugin gpus", NULL, A("--dra-device-plugin-gpus=0,nvidia0"), NULL,
      "--dra-device-plugin-gpus: invalid --dra-device-plugin-gpus entry \"nvidia0\": a GPU index "
      "or a GPU UUID (GPU-...)" },
    { "verbosity", NULL, A("-v", "high"), NULL,
      "-v: invalid -v value \"high\": must be an integer >= 0" },
    { "verbosity env", NULL, NULL, A("GDP_LOG_VERBOSITY=-1"),
      "env GDP_LOG_VERBOSITY: invalid -v value \"-1\": must be an integer >= 0" },
    { "bool flag", NULL, A("--pass-device-specs=maybe"), NULL,
      "--pass-device-specs: invalid boolean value \"maybe\" (allowed: true, false, 1, 0, t, f)" },
    { "bool env", NULL, NULL, A("FAIL_ON_INIT_ERROR=yes"),
      "env FAIL_ON_INIT_ERROR: invalid boolean value \"yes\" (allowed: true, false, 1, 0, t, f)" },
    { "bool file wrong type", "flags:\n  failOnInitError: \"yes\"\n", NULL, NULL,
      "config.yaml:2:20: flags.failOnInitError: expected a boolean (true or false), got a string "
      "\"yes\"" },
    { "bool file number", "imex:\n  required: 1\n", NULL, NULL,
      "config.yaml:2:13: imex.required: expected a boolean (true or false), got an integer "
      "\"1\"" },
    { "string file list", "flags:\n  nvidiaDriverRoot: [a]\n", NULL, NULL,
      "config.yaml:2:21: flags.nvidiaDriverRoot: expected a string, got a list" },
    { "section not mapping", "flags: yes\n", NULL, NULL,
      "config.yaml:1:8: flags: expected a mapping, got a boolean \"yes\"" },
    { "root not mapping", "- a\n", NULL, NULL, "config.yaml:1:1: : expected a mapping, got a list" },
    { "cdi annotation prefix", NULL, A("--cdi-annotation-prefix", "Bad_Prefix/"), NULL,
      "--cdi-annotation-prefix: invalid --cdi-annotation-prefix option: \"Bad_Prefix/\": must be "
      "a DNS subdomain followed by '/' (e.g. cdi.k8s.io/)" },
    { "cdi annotation prefix no slash", NULL, NULL, A("CDI_ANNOTATION_PREFIX=cdi.k8s.io"),
      "env CDI_ANNOTATION_PREFIX: invalid --cdi-annotation-prefix option: \"cdi.k8s.io\": must "
      "be a DNS subdomain followed by '/' (e.g. cdi.k8s.io/)" },
    { "imex flag", NULL, A("--imex-channel-ids", "0,1"), NULL,
      "--imex-channel-ids: invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] "
      "or [0]; found [0 1]" },
    { "imex env not int", NULL, NULL, A("IMEX_CHANNEL_IDS=zero"),
      "env IMEX_CHANNEL_IDS: invalid IMEX channel ID \"zero\": not an integer" },
    { "imex file", "imex:\n  channelIDs: [1]\n", NULL, NULL,
      "config.yaml:2:15: imex.channelIDs: invalid IMEX channel IDs: invalid IMEX config: "
      "channelIDs must be [] or [0]; found [1]" },
    { "imex file type", "imex:\n  channelIDs: [\"0\"]\n", NULL, NULL,
      "config.yaml:2:16: imex.channelIDs[0]: expected an integer, got a string \"0\"" },
    { "unknown version", "version: v2\n", NULL, NULL,
      "config.yaml:1:10: version: unknown version: v2 (allowed: v1)" },
    { "yaml syntax", "flags:\n  migStrategy: [none\n", NULL, NULL,
      "config.yaml:3:1: did not find expected ',' or ']'" },
    { "yaml syntax tab", "flags:\n\tmigStrategy: none\n", NULL, NULL,
      "config.yaml:2:1: found character that cannot start any token" },
    { "missing file", NULL, A("--config-file", "nope.yaml"), NULL,
      "reading config file nope.yaml: No such file or directory" },
    { "replicas < 2",
      "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
      "      replicas: 1\n",
      NULL, NULL,
      "config.yaml:6:17: sharing.timeSlicing.resources[0].replicas: number of replicas must be "
      ">= 2, got 1" },
    { "replicas wrong type",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: two\n", NULL,
      NULL,
      "config.yaml:5:17: sharing.timeSlicing.resources[0].replicas: expected an integer, got a "
      "string \"two\"" },
    { "missing name", "sharing:\n  timeSlicing:\n    resources:\n    - replicas: 2\n", NULL, NULL,
      "config.yaml:4:7: sharing.timeSlicing.resources[0]: no resource name specified" },
    { "missing replicas", "sharing:\n  mps:\n    resources:\n    - name: gpu\n", NULL, NULL,
      "config.yaml:4:7: sharing.mps.resources[0]: no replicas specified" },
    { "empty resources", "sharing:\n  timeSlicing:\n    resources: []\n", NULL, NULL,
      "config.yaml:3:16: sharing.timeSlicing.resources: no resources specified" },
    { "no resources key", "sharing:\n  timeSlicing:\n    renameByDefault: true\n", NULL, NULL,
      "config.yaml:3:5: sharing.timeSlicing: no resources specified" },
    { "sharing entry not mapping", "sharing:\n  timeSlicing:\n    resources: [gpu]\n", NULL,
      NULL, "config.yaml:3:17: sharing.timeSlicing.resources[0]: expected a mapping, got a string "
            "\"gpu\"" },
    { "bad device ref",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
      "      devices: [0, \"GPU-xyz\"]\n",
      NULL, NULL,
      "config.yaml:6:20: sharing.timeSlicing.resources[0].devices[1]: invalid device reference "
      "\"GPU-xyz\": must be a GPU index (\"0\"), a MIG index (\"0:1\"), a GPU UUID "
      "(\"GPU-<uuid>\") or a MIG UUID (\"MIG-<uuid>\", \"MIG-GPU-<uuid>/<gi>/<ci>\")" },
    { "negative device index",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
      "      devices: [-1]\n",
      NULL, NULL,
      "config.yaml:6:17: sharing.timeSlicing.resources[0].devices[0]: invalid device reference "
      "\"-1\": must be a GPU index (\"0\"), a MIG index (\"0:1\"), a GPU UUID (\"GPU-<uuid>\") or "
      "a MIG UUID (\"MIG-<uuid>\", \"MIG-GPU-<uuid>/<gi>/<ci>\")" },
    { "devices bad string",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
      "      devices: some\n",
      NULL, NULL,
      "config.yaml:6:16: sharing.timeSlicing.resources[0].devices: invalid devices value "
      "\"some\": must be \"all\", a number of devices or a list of device references" },
    { "devices zero",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n"
      "      devices: 0\n",
      NULL, NULL,
      "config.yaml:6:16: sharing.timeSlicing.resources[0].devices: number of devices must be >= "
      "1, got 0" },
    { "bad resource name",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: GPU_x\n      replicas: 2\n", NULL,
      NULL,
      "config.yaml:4:13: sharing.timeSlicing.resources[0].name: invalid resource name "
      "\"nvidia.com/GPU_x\": \"GPU_x\" must be a DNS subdomain (lowercase letters, digits, '-' and "
      "'.', starting and ending with a letter or digit)" },
    { "bad rename",
      "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      rename: -shared\n"
      "      replicas: 2\n",
      NULL, NULL,
      "config.yaml:5:15: sharing.timeSlicing.resources[0].rename: invalid resource name "
      "\"nvidia.com/-shared\": \"-shared\" must be a DNS subdomain (lowercase letters, digits, '-' "
      "and '.', starting and ending with a letter or digit)" },
    { "resource name too long",
      "sharing:\n  timeSlicing:\n    resources:\n"
      "    - name: abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd\n"
      "      replicas: 2\n",
      NULL, NULL,
      "config.yaml:4:13: sharing.timeSlicing.resources[0].name: invalid resource name "
      "\"nvidia.com/abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcd\": must be at "
      "most 63 characters, got 70" },
    { "rename by default too long",
      "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
      "    - name: abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdef\n"
      "      replicas: 2\n",
      NULL, NULL,
      "config.yaml:5:13: sharing.timeSlicing.resources[0].name: renameByDefault: invalid "
      "resource name \"nvidia.com/abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdef.shared\": "
      "must be at most 63 characters, got 68" },
    { "pattern missing", "resources:\n  gpus:\n  - name: gpu\n", NULL, NULL,
      "config.yaml:3:5: resources.gpus[0]: resources must have a 'pattern' field set" },
    { "pattern name missing", "resources:\n  mig:\n  - pattern: 1g.5gb\n", NULL, NULL,
      "config.yaml:3:5: resources.mig[0]: resources must have a 'name' field set" },
    { "pattern bad name", "resources:\n  gpus:\n  - pattern: '*'\n    name: a..b\n", NULL, NULL,
      "config.yaml:4:11: resources.gpus[0].name: invalid resource name \"nvidia.com/a..b\": "
      "\"a..b\" must be a DNS subdomain (lowercase letters, digits, '-' and '.', starting and "
      "ending with a letter or digit)" },
    { "mps with mixed",
      "version: v1\nsharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n",
      A("--mig-strategy", "mixed", "--mps-root", "/run/nvidia/mps"), NULL,
      "config.yaml:3:3: sharing.mps: using --mig-strategy=mixed is not supported with MPS" },
    { "mps without root",
      "version: v1\nsharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n", NULL,
      NULL, "config.yaml:3:3: sharing.mps: using MPS requires --mps-root to be specified" },
    { "sharing bool type",
      "sharing:\n  mps:\n    failRequestsGreaterThanOne: nope\n    resources: []\n", NULL, NULL,
      "config.yaml:3:33: sharing.mps.failRequestsGreaterThanOne: expected a boolean (true or "
      "false), got a string \"nope\"" },
};

static void test_errors(void)
{
    for (size_t i = 0; i < ELEMENTSOF(err_cases); i++) {
        const struct err_case *t = &err_cases[i];
        struct config c;
        struct error err = { 0 };
        int r = load(&c, t->yaml, t->args, t->env, NULL, &err);
        CHECK(r < 0, "%s: expected failure, got %d", t->name, r);
        CHECK(r >= 0 || err.code == r, "%s: err.code %d != %d", t->name, err.code, r);
        CHECK(r >= 0 || streq(err.msg, t->msg), "%s:\n  got:  %s\n  want: %s", t->name, err.msg,
              t->msg);
        config_free(&c);
    }
}

static void test_defaults(void)
{
    struct config c;
    struct error err = { 0 };
    int r = load(&c, NULL, NULL, NULL, NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(c.mig_strategy == MIG_STRATEGY_NONE, "mig");
    CHECK(c.fail_on_init_error, "fail-on-init-error");
    CHECK(streq(c.driver_root, "/") && streq(c.dev_root, "/"), "roots %s %s", c.driver_root,
          c.dev_root);
    CHECK(!c.pass_device_specs, "pass-device-specs");
    CHECK(c.device_list_strategy == DEVICE_LIST_ENVVAR, "dls %u", c.device_list_strategy);
    CHECK(c.device_id_strategy == DEVICE_ID_UUID, "dis");
    CHECK(!c.gdrcopy_enabled && !c.gds_enabled && !c.mofed_enabled, "extras");
    CHECK(streq(c.cdi_annotation_prefix, "cdi.k8s.io/"), "prefix");
    CHECK(streq(c.nvidia_cdi_hook_path, "/usr/bin/nvidia-ctk"), "hook");
    CHECK(streq(c.driver_root_ctr_path, "/driver-root"), "ctr path");
    CHECK(streq(c.mps_root, ""), "mps root");
    CHECK(c.shared_alloc_policy == SHARED_ALLOC_DISTRIBUTED, "policy");
    CHECK(streq(c.device_discovery_strategy, "auto"), "discovery");
    CHECK(c.n_imex_channel_ids == 0 && !c.imex_required, "imex");
    CHECK(streq(c.kubelet_socket, "/var/lib/kubelet/device-plugins/kubelet.sock"), "socket");
    CHECK(c.cdi_feature_flags && !c.cdi_feature_flags[0], "feature flags");
    CHECK(c.cdi_disable_hooks && !c.cdi_disable_hooks[0], "disable hooks");
    CHECK(streq(c.sysfs_root, "/sys") && streq(c.proc_root, "/proc"), "sys/proc");
    CHECK(streq(c.cdi_spec_dir, "/var/run/cdi"), "cdi dir");
    CHECK(c.log_verbosity == 0 && !c.log_json && config_log_level(&c) == LOG_INFO, "log");
    CHECK(!c.config_file && !c.time_slicing.present && !c.mps.present && !c.health.n_rules, "file");
    config_free(&c);
}

/* One field set at every level: the highest present level must win. */
static void test_precedence(void)
{
    static const char *yaml = "flags:\n  migStrategy: single\n  plugin:\n    deviceIDStrategy: index\n";
    struct {
        const char *const *args;
        const char *const *env;
        const char *file;
        enum mig_strategy want;
    } cases[] = {
        { NULL, NULL, NULL, MIG_STRATEGY_NONE },
        { NULL, NULL, yaml, MIG_STRATEGY_SINGLE },
        { NULL, A("MIG_STRATEGY=mixed"), yaml, MIG_STRATEGY_MIXED },
        { A("--mig-strategy", "none"), A("MIG_STRATEGY=mixed"), yaml, MIG_STRATEGY_NONE },
        { A("--mig-strategy=single"), A("MIG_STRATEGY=mixed"), NULL, MIG_STRATEGY_SINGLE },
        /* empty env counts as unset */
        { NULL, A("MIG_STRATEGY="), yaml, MIG_STRATEGY_SINGLE },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct config c;
        struct error err = { 0 };
        int r = load(&c, cases[i].file, cases[i].args, cases[i].env, NULL, &err);
        CHECK(r == 0, "case %zu: %s", i, err.msg);
        CHECK(c.mig_strategy == cases[i].want, "case %zu: mig %d want %d", i, c.mig_strategy,
              cases[i].want);
        /* per field: the file's deviceIDStrategy survives a flag on another field */
        CHECK(c.device_id_strategy == (cases[i].file ? DEVICE_ID_INDEX : DEVICE_ID_UUID),
              "case %zu: id strategy", i);
        config_free(&c);
    }

    /* An invalid file value overridden by a flag is never validated (the reference
     * overlays flags before validating). */
    struct config c;
    struct error err = { 0 };
    int r = load(&c, "flags:\n  migStrategy: bogus\n", A("--mig-strategy", "mixed"), NULL, NULL,
                 &err);
    CHECK(r == 0 && c.mig_strategy == MIG_STRATEGY_MIXED, "override: %s", err.msg);
    config_free(&c);

    /* ... but its type still is. */
    r = load(&c, "flags:\n  failOnInitError: [1]\n", A("--fail-on-init-error=false"), NULL, NULL,
             &err);
    CHECK(r < 0 && strstr(err.msg, "config.yaml:2:20: flags.failOnInitError: expected a boolean"),
          "type check: %d %s", r, err.msg);
    config_free(&c);

    /* CONFIG_FILE from the environment */
    write_file("env.yaml", "flags:\n  gdsEnabled: true\n");
    r = load(&c, NULL, NULL, A("CONFIG_FILE=env.yaml"), NULL, &err);
    CHECK(r == 0 && c.gds_enabled && streq(c.config_file, "env.yaml"), "CONFIG_FILE: %s",
          err.msg);
    config_free(&c);
}

static void test_forms(void)
{
    struct config c;
    struct error err = { 0 };
    int r;

    /* aliases, "=" and space forms, single dash */
    r = load(&c, NULL,
             A("--nvidia-driver-root", "/host", "-nvidia-ctk-path=/bin/ctk",
               "--container-driver-root=/drv", "--kubelet-socket", "", "--v=2"),
             NULL, NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(streq(c.driver_root, "/host") && streq(c.dev_root, "/host"), "dev root fallback %s",
          c.dev_root);
    CHECK(streq(c.nvidia_cdi_hook_path, "/bin/ctk"), "hook %s", c.nvidia_cdi_hook_path);
    CHECK(streq(c.driver_root_ctr_path, "/drv"), "ctr");
    CHECK(streq(c.kubelet_socket, ""), "empty socket flag is a value");
    CHECK(c.log_verbosity == 2 && config_log_level(&c) == LOG_DEBUG, "verbosity");
    config_free(&c);

    /* second env names of an option */
    r = load(&c, NULL, NULL,
             A("NVIDIA_CTK_PATH=/x/ctk", "CONTAINER_DRIVER_ROOT=/y", "NVIDIA_DEV_ROOT=/dev-root",
               "GDP_SYSFS_ROOT=/s", "GDP_PROC_ROOT=/p", "GDP_CDI_SPEC_DIR=/c", "GDP_LOG_FORMAT=json"),
             NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(streq(c.nvidia_cdi_hook_path, "/x/ctk") && streq(c.driver_root_ctr_path, "/y"),
          "env aliases");
    CHECK(streq(c.driver_root, "/") && streq(c.dev_root, "/dev-root"), "dev root");
    CHECK(streq(c.sysfs_root, "/s") && streq(c.proc_root, "/p") && streq(c.cdi_spec_dir, "/c"),
          "extension roots");
    CHECK(c.log_json, "log json");
    config_free(&c);

    /* the first env name wins over the second */
    r = load(&c, NULL, NULL, A("NVIDIA_CTK_PATH=/second", "NVIDIA_CDI_HOOK_PATH=/first"), NULL,
             &err);
    CHECK(r == 0 && streq(c.nvidia_cdi_hook_path, "/first"), "env order %s",
          c.nvidia_cdi_hook_path);
    config_free(&c);

    /* booleans, Go strconv.ParseBool */
    struct {
        const char *arg;
        bool want;
    } bools[] = {
        { "--pass-device-specs", true },     { "--pass-device-specs=true", true },
        { "--pass-device-specs=false", false }, { "--pass-device-specs=1", true },
        { "--pass-device-specs=0", false },  { "-pass-device-specs=t", true },
        { "--pass-device-specs=F", false },  { "--pass-device-specs=TRUE", true },
    };
    for (size_t i = 0; i < ELEMENTSOF(bools); i++) {
        const char *args[] = { bools[i].arg, NULL };
        r = load(&c, NULL, args, NULL, NULL, &err);
        CHECK(r == 0 && c.pass_device_specs == bools[i].want, "%s", bools[i].arg);
        config_free(&c);
    }
    r = load(&c, NULL, A("--fail-on-init-error=false", "--imex-required", "--gdrcopy-enabled",
                         "--mofed-enabled=1"),
             A("GDS_ENABLED=t", "IMEX_REQUIRED=false"), NULL, &err);
    CHECK(r == 0 && !c.fail_on_init_error && c.imex_required && c.gdrcopy_enabled &&
              c.mofed_enabled && c.gds_enabled,
          "bools: %s", err.msg);
    config_free(&c);

    /* slices: comma separated, repeated flags accumulate, flag replaces env */
    r = load(&c, NULL, A("--device-list-strategy", "envvar,cdi-cri"), NULL, NULL, &err);
    CHECK(r == 0 && c.device_list_strategy == (DEVICE_LIST_ENVVAR | DEVICE_LIST_CDI_CRI),
          "dls %u", c.device_list_strategy);
    config_free(&c);
    r = load(&c, NULL,
             A("--device-list-strategy", "volume-mounts", "--device-list-strategy=cdi-annotations",
               "--cdi-feature-flags", "a,b", "--cdi-feature-flags", "c"),
             A("DEVICE_LIST_STRATEGY=envvar", "CDI_DISABLE_HOOKS=all", "IMEX_CHANNEL_IDS=0"),
             NULL, &err);
    CHECK(r == 0 &&
              c.device_list_strategy == (DEVICE_LIST_VOLUME_MOUNTS | DEVICE_LIST_CDI_ANNOTATIONS),
          "dls %u", c.device_list_strategy);
    CHECK(c.cdi_feature_flags[0] && streq(c.cdi_feature_flags[0], "a") &&
              streq(c.cdi_feature_flags[1], "b") && streq(c.cdi_feature_flags[2], "c") &&
              !c.cdi_feature_flags[3],
          "feature flags");
    CHECK(streq(c.cdi_disable_hooks[0], "all") && !c.cdi_disable_hooks[1], "hooks");
    CHECK(c.n_imex_channel_ids == 1 && c.imex_channel_ids[0] == 0, "imex");
    config_free(&c);

    /* the file's list and string forms */
    r = load(&c, "flags:\n  plugin:\n    deviceListStrategy: [envvar, cdi-annotations]\n", NULL,
             NULL, NULL, &err);
    CHECK(r == 0 && c.device_list_strategy == (DEVICE_LIST_ENVVAR | DEVICE_LIST_CDI_ANNOTATIONS),
          "file list %s", err.msg);
    config_free(&c);
    r = load(&c, "flags:\n  plugin:\n    deviceListStrategy: volume-mounts\n", NULL, NULL, NULL,
             &err);
    CHECK(r == 0 && c.device_list_strategy == DEVICE_LIST_VOLUME_MOUNTS, "file string %s",
          err.msg);
    config_free(&c);

    /* help and version */
    r = load(&c, NULL, A("--mig-strategy=bogus", "--help"), NULL, NULL, &err);
    CHECK(r == CONFIG_LOAD_HELP, "help %d", r);
    config_free(&c);
    r = load(&c, NULL, A("-h"), NULL, NULL, &err);
    CHECK(r == CONFIG_LOAD_HELP, "-h %d", r);
    config_free(&c);
    r = load(&c, NULL, A("--version"), NULL, NULL, &err);
    CHECK(r == CONFIG_LOAD_VERSION, "version %d", r);
    config_free(&c);
}

/* NODE_NAME goes into request paths: only a DNS-1123 subdomain is a Node's name. */
static void test_node_name(void)
{
    char longest[254], too_long[255];
    memset(longest, 'a', 253);
    longest[253] = 0;
    memset(too_long, 'a', 254);
    too_long[254] = 0;
    const char *good[] = { "n1", "a", "node-1.example.com", "0", "a-b-c.d0", longest };
    const char *bad[] = { NULL, "", "N1", "n_1", "-n1", "n1-", ".n1", "n1.", "a..b", "a.-b",
                          "a-.b", "n1/../x", "n1?watch=1", "n 1", "n1\n", "nöde", too_long };
    for (size_t i = 0; i < ELEMENTSOF(good); i++)
        CHECK(config_node_name_valid(good[i]), "\"%.20s\" refused", good[i]);
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        CHECK(!config_node_name_valid(bad[i]), "\"%.20s\" accepted", bad[i] ? bad[i] : "(null)");
}

/* DRA's options: NVIDIA's gpu-kubelet-plugin names and defaults, and that program name
 * turning DRA on and the device plugin off on every load. */
static void test_dra(void)
{
    struct config c = { 0 };
    struct error err = { 0 };
    int r = load(&c, NULL, NULL, NULL, NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(!c.dra.enabled && !c.dra.only, "DRA on by default");
    CHECK(streq(c.dra.registrar_dir, "/var/lib/kubelet/plugins_registry"), "%s",
          c.dra.registrar_dir);
    CHECK(streq(c.dra.plugins_dir, "/var/lib/kubelet/plugins"), "%s", c.dra.plugins_dir);
    CHECK(streq(c.dra.cdi_root, "/etc/cdi"), "%s", c.dra.cdi_root);
    CHECK(c.dra.device_plugin_gpus && !c.dra.device_plugin_gpus[0], "gpus not empty");
    config_free(&c);

    r = load(&c, NULL, A("--dra", "--cdi-root=/var/run/cdi", "--dra-device-plugin-gpus=0,GPU-a"),
             A("KUBELET_REGISTRAR_DIRECTORY_PATH=/r", "KUBELET_PLUGINS_DIRECTORY_PATH=/p"), NULL,
             &err);
    CHECK(r == 0, "%s", err.msg);
    CHECK(c.dra.enabled && !c.dra.only, "--dra");
    CHECK(streq(c.dra.registrar_dir, "/r") && streq(c.dra.plugins_dir, "/p") &&
          streq(c.dra.cdi_root, "/var/run/cdi"), "dirs");
    CHECK(streq(c.dra.device_plugin_gpus[0], "0") && streq(c.dra.device_plugin_gpus[1], "GPU-a")
          && !c.dra.device_plugin_gpus[2], "gpus");
    config_free(&c);

    /* The longest directories a socket path leaves room for (sun_path, 108 bytes): each
     * with "/", the longest socket name put there and the NUL fills it exactly (the
     * names config-dra.c spells out, config being below dra). */
    CHECK(streq(DRA_DRIVER_NAME, "gpu.nvidia.com"), "%s", DRA_DRIVER_NAME);
    CHECK(strlen(D78) == sizeof(((struct sockaddr_un *)0)->sun_path) -
                         sizeof("/.gpu.nvidia.com-reg.sock.tmp") &&
          strlen(D78) == sizeof(((struct sockaddr_un *)0)->sun_path) -
                         sizeof("/gpu.nvidia.com/.dra.sock.tmp"), "%zu", strlen(D78));
    r = load(&c, NULL, A("--kubelet-plugins-directory-path=" D78),
             A("KUBELET_REGISTRAR_DIRECTORY_PATH=" D78), NULL, &err);
    CHECK(r == 0, "a 78-byte directory: %s", err.msg);
    CHECK(streq(c.dra.registrar_dir, D78) && streq(c.dra.plugins_dir, D78), "78-byte dirs");
    config_free(&c);

    char *kp[] = { (char *)"/usr/bin/gpu-kubelet-plugin", NULL };
    r = config_load(&c, 1, kp, (char *[]){ NULL }, NULL, &err);
    CHECK(r == 0 && c.dra.enabled && c.dra.only, "gpu-kubelet-plugin: %s", err.msg);
    config_free(&c);
    char *kp_off[] = { (char *)"gpu-kubelet-plugin", (char *)"--dra=false", NULL };
    r = config_load(&c, 2, kp_off, (char *[]){ NULL }, NULL, &err);
    CHECK(r < 0 && strstr(err.msg, "gpu-kubelet-plugin serves only DRA"), "%s", err.msg);
    config_free(&c);
    char *kp_split[] = { (char *)"gpu-kubelet-plugin", (char *)"--dra-device-plugin-gpus=1", NULL };
    r = config_load(&c, 2, kp_split, (char *[]){ NULL }, NULL, &err);
    CHECK(r < 0 && strstr(err.msg, "no GPU is left to a device plugin"), "%s", err.msg);
    config_free(&c);
}

int main(void)
{
    static void (*const tests[])(void) = {
        test_errors, test_defaults, test_precedence, test_forms, test_node_name, test_dra, NULL,
    };
    return config_test_main("config", tests);
}
