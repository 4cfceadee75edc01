/* --feature-gates / FEATURE_GATES: NVIDIA's DRA driver gates, parsed as Kubernetes'
 * featuregate package parses them; DynamicMIG stored, the others accepted with one
 * warning each, unknown names and non-booleans refused, NVIDIA's exclusion rule, and the
 * precedence of every option (flag > env > default). */
#include <sys/mman.h>
#include <unistd.h>

#include "config-test.h"
#include "config/config-internal.h"

struct err_case {
    const char *name;
    const char *const *args;
    const char *const *env;
    const char *msg;
};

static const struct err_case err_cases[] = {
    { "unknown, a close one", A("--feature-gates=DynamicMig=true"), NULL,
      "--feature-gates: unrecognized feature gate: DynamicMig; did you mean DynamicMIG?" },
    { "unknown env", NULL, A("FEATURE_GATES=Bogus=true"),
      "env FEATURE_GATES: unrecognized feature gate: Bogus (see docs/dra.md)" },
    { "not a boolean", A("--feature-gates", "DynamicMIG=yes"), NULL,
      "--feature-gates: invalid value of DynamicMIG=yes (allowed: true, false, 1, 0, t, f)" },
    { "no value", A("--feature-gates=MPSSupport"), NULL,
      "--feature-gates: missing bool value for MPSSupport" },
    { "DynamicMIG and MPSSupport", A("--feature-gates=MPSSupport=true,DynamicMIG=true"), NULL,
      "--feature-gates: feature gate DynamicMIG is currently mutually exclusive with MPSSupport" },
    { "DynamicMIG and PassthroughSupport", NULL,
      A("FEATURE_GATES=DynamicMIG=1, PassthroughSupport=t"),
      "env FEATURE_GATES: feature gate DynamicMIG is currently mutually exclusive with "
      "PassthroughSupport" },
    { "across repeated flags",
      A("--feature-gates=DynamicMIG=true", "--feature-gates=PassthroughSupport=true"), NULL,
      "--feature-gates: feature gate DynamicMIG is currently mutually exclusive with "
      "PassthroughSupport" },
};

static void test_errors(void)
{
    for (size_t i = 0; i < ELEMENTSOF(err_cases); i++) {
        const struct err_case *t = &err_cases[i];
        struct config c;
        struct error err = { 0 };
        int r = load(&c, NULL, t->args, t->env, NULL, &err);
        CHECK(r < 0 && streq(err.msg, t->msg), "%s:\n  got:  %s\n  want: %s", t->name, err.msg,
              t->msg);
        config_free(&c);
    }
}

static bool gates_are(const struct config *c, const char *const *want)
{
    size_t i = 0;
    for (; want[i]; i++)
        if (!c->dra.feature_gates[i] || !streq(c->dra.feature_gates[i], want[i]))
            return false;
    return !c->dra.feature_gates[i];
}

static void test_parse(void)
{
    struct config c;
    struct error err = { 0 };
    CHECK(load(&c, NULL, NULL, NULL, NULL, &err) == 0, "%s", err.msg);
    CHECK(!c.dra.dynamic_mig && c.dra.feature_gates && !c.dra.feature_gates[0], "default");
    config_free(&c);

    /* Kubernetes' syntax: spaces around names and values, empty items, the last of a name
     * winning, every ParseBool spelling; NVMLDeviceHealthCheck is fine with DynamicMIG */
    CHECK(load(&c, NULL, A("--dra", "--feature-gates= DynamicMIG = false,,NVMLDeviceHealthCheck=T,"
                                    "DynamicMIG=1 ,MPSSupport=false"),
               NULL, NULL, &err) == 0, "%s", err.msg);
    CHECK(c.dra.dynamic_mig, "DynamicMIG=1");
    CHECK(gates_are(&c, A("DynamicMIG=true", "NVMLDeviceHealthCheck=true", "MPSSupport=false")),
          "gates as stored");
    _cleanup_free_ char *json = config_to_json_string(&c, false);
    CHECK(strstr(json, "\"featureGates\":{\"DynamicMIG\":true,\"NVMLDeviceHealthCheck\":true,"
                       "\"MPSSupport\":false}"), "print: %s", json);
    config_free(&c);

    /* gpu-kubelet-plugin takes them as NVIDIA's does */
    char *kp[] = { (char *)"gpu-kubelet-plugin", (char *)"--feature-gates=DynamicMIG=true", NULL };
    CHECK(config_load(&c, 2, kp, (char *[]){ NULL }, NULL, &err) == 0 && c.dra.dynamic_mig,
          "gpu-kubelet-plugin: %s", err.msg);
    config_free(&c);
}

/* flag > env > default, as for every option: a flag replaces the variable whole. */
static void test_precedence(void)
{
    struct config c;
    struct error err = { 0 };
    CHECK(load(&c, NULL, NULL, A("FEATURE_GATES=DynamicMIG=true,MPSSupport=false"), NULL,
               &err) == 0 && c.dra.dynamic_mig, "env: %s", err.msg);
    config_free(&c);
    CHECK(load(&c, NULL, A("--feature-gates=TimeSlicingSettings=true"),
               A("FEATURE_GATES=DynamicMIG=true"), NULL, &err) == 0, "%s", err.msg);
    CHECK(!c.dra.dynamic_mig && gates_are(&c, A("TimeSlicingSettings=true")), "flag over env");
    config_free(&c);
    /* an empty variable counts as unset (Helm renders unset values as "") */
    CHECK(load(&c, NULL, NULL, A("FEATURE_GATES="), NULL, &err) == 0 && !c.dra.dynamic_mig,
          "empty env: %s", err.msg);
    config_free(&c);
}

/* One warning line per gate that changes nothing here, after the load succeeded. */
static char *warnings_of(const char *const *args)
{
    int fd = memfd_create("log", MFD_CLOEXEC);
    log_set_fd(fd);
    struct config c;
    struct error err = { 0 };
    int r = load(&c, NULL, args, NULL, NULL, &err);
    CHECK(r == 0, "%s", err.msg);
    config_free(&c);
    log_set_fd(STDERR_FILENO);
    off_t n = lseek(fd, 0, SEEK_END);
    char *buf = xcalloc((size_t)n + 1, 1);
    CHECK(pread(fd, buf, (size_t)n, 0) == n, "read log");
    close(fd);
    return buf;
}

static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_warnings(void)
{
    _cleanup_free_ char *w = warnings_of(A("--dra", "--feature-gates=DynamicMIG=true,"
                                           "TimeSlicingSettings=false,PassthroughSupport=false"));
    CHECK(lines(w) == 2, "%s", w);
    CHECK(strstr(w, "Feature gate TimeSlicingSettings=false: always on in gpu-device-plugin "
                    "(claims asking for TimeSlicing are always served), ignoring"), "%s", w);
    CHECK(strstr(w, "Feature gate PassthroughSupport=false: not implemented in "
                    "gpu-device-plugin (no VFIO devices are served), ignoring"), "%s", w);
    _cleanup_free_ char *quiet = warnings_of(A("--dra", "--feature-gates=DynamicMIG=true"));
    CHECK(!*quiet, "DynamicMIG alone: %s", quiet);
    _cleanup_free_ char *off = warnings_of(A("--feature-gates=MPSSupport=true"));
    CHECK(lines(off) == 1 && strstr(off, "act only with --dra"), "without DRA: %s", off);
}

int main(void)
{
    static void (*const tests[])(void) = { test_errors, test_parse, test_precedence,
                                           test_warnings, NULL };
    return config_test_main("config-gates", tests);
}
