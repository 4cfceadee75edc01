/* The labels of a simulated node against GFD's expected label set, one case file per
 * process (tests/labels/cases/<case>.txt): the node state is built as the `labels`
 * command builds it (config_load, node_state_build: real NVML module, simulated
 * libnvidia-ml.so.1, sysfs rendered by nvml-sim-render) and derived with no timestamp.
 *
 * Case file: "# profile: <path>" (relative to the source tree, "builtin" for the
 * simulator's built-in node), "# args: <flags>", "# | " lines of a config file,
 * "# machine-type: <text>" ("-": no such file); then the expected labels: "key=value"
 * lines (later ones replace earlier ones), "@include <file>" (headers of included files
 * are not read), "-<prefix>" removes the keys so far that start with it, "!error
 * <text>": derivation must fail saying <text>.
 *
 * usage: test-labels-profile <nvml-sim-render> <case file> */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "config/config-load.h"
#include "core/fs.h"
#include "state/node-state.h"
#include "labels/labels.h"
#include "tests/common/check.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"

int test_failures;

struct casefile {
    char *profile, *args, *machine, *error;
    char *config;              /* the "# | " lines, joined */
    struct labels *want;
};

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? xstrndup(path, (size_t)(slash - path)) : xstrdup(".");
}

static int read_case(const char *path, bool top, struct casefile *c)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return -1;
    }
    _cleanup_free_ char *dir = dir_of(path);
    char line[1024];
    int r = 0;
    while (r == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = 0;
        if (top && startswith(line, "# profile: "))
            c->profile = xstrdup(line + 11);
        else if (top && startswith(line, "# args: "))
            c->args = xstrdup(line + 8);
        else if (top && startswith(line, "# machine-type: "))
            c->machine = xstrdup(line + 16);
        else if (top && startswith(line, "# | ")) {
            char *joined = xasprintf("%s%s\n", c->config ? c->config : "", line + 4);
            free(c->config);
            c->config = joined;
        } else if (line[0] == '#' || line[0] == 0)
            continue;
        else if (startswith(line, "@include ")) {
            _cleanup_free_ char *inc = xasprintf("%s/%s", dir, line + 9);
            r = read_case(inc, false, c);
        } else if (startswith(line, "!error "))
            c->error = xstrdup(line + 7);
        else if (line[0] == '-') {
            for (size_t i = c->want->n; i-- > 0;) {
                if (!startswith(c->want->items[i].key, line + 1))
                    continue;
                free(c->want->items[i].key);
                free(c->want->items[i].value);
                memmove(&c->want->items[i], &c->want->items[i + 1],
                        (c->want->n - i - 1) * sizeof(c->want->items[0]));
                c->want->n--;
            }
        } else {
            char *eq = strchr(line, '=');
            if (!eq) {
                fprintf(stderr, "%s: not key=value: %s\n", path, line);
                r = -1;
                break;
            }
            *eq = 0;
            labels_set(c->want, line, eq + 1);
        }
    }
    fclose(f);
    return r;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Every difference, one line each, so a failure says which labels are wrong. */
static void compare(const struct labels *got, const struct labels *want)
{
    for (size_t i = 0; i < want->n; i++) {
        const char *v = labels_get(got, want->items[i].key);
        if (!v || !streq(v, want->items[i].value)) {
            fprintf(stderr, "  %s: got %s%s%s, want \"%s\"\n", want->items[i].key, v ? "\"" : "",
                    v ? v : "(missing)", v ? "\"" : "", want->items[i].value);
            test_failures++;
        }
    }
    for (size_t i = 0; i < got->n; i++)
        if (!labels_get(want, got->items[i].key)) {
            fprintf(stderr, "  unexpected %s=%s\n", got->items[i].key, got->items[i].value);
            test_failures++;
        }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s <nvml-sim-render> <case file>\n", argv[0]);
        return 2;
    }
    const char *src = getenv("GDP_SOURCE_DIR");
    struct casefile c = { .want = labels_new() };
    if (!src || read_case(argv[2], true, &c) < 0 || !c.profile) {
        fprintf(stderr, "%s: needs GDP_SOURCE_DIR and a # profile: line\n", argv[2]);
        return 2;
    }
    _cleanup_free_ char *profile = streq(c.profile, "builtin")
                                       ? xasprintf("%s/sim/nvml/default-node.yaml", src)
                                       : xasprintf("%s/%s", src, c.profile);
    fixture_check(profile);

    const char *tmp = scratch_dir("gdp-labels-");
    _cleanup_free_ char *sys = xasprintf("%s/sys", tmp), *proc = xasprintf("%s/proc", tmp),
                        *mt = xasprintf("%s/machine", tmp), *cfgfile = xasprintf("%s/c.yaml", tmp);
    if (streq(c.profile, "builtin"))
        unsetenv("MOCK_NVML_CONFIG");
    else
        setenv("MOCK_NVML_CONFIG", profile, 1);
    _cleanup_free_ char *render = xasprintf("'%s' --profile '%s' --sysfs-root '%s' --proc-root '%s'",
                                            argv[1], profile, sys, proc);
    CHECK(system(render) == 0);
    if (!c.machine || !streq(c.machine, "-"))
        write_text(mt, c.machine ? c.machine : "  NVIDIA DGX H100 (P/N 965-24387)\n");
    if (c.config)
        write_text(cfgfile, c.config);

    /* argv for config_load: our fixed flags, then the case's */
    const char *fixed[] = { "gpu-device-plugin", "--sysfs-root", sys, "--proc-root", proc,
                            "--machine-type-file", mt, "--no-timestamp" };
    char *av[64];
    int ac = 0;
    for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
        av[ac++] = (char *)fixed[i];
    if (c.config) {
        av[ac++] = (char *)"--config-file";
        av[ac++] = cfgfile;
    }
    _cleanup_free_ char *args = c.args ? xstrdup(c.args) : NULL;
    char *save = NULL;
    for (char *t = args ? strtok_r(args, " ", &save) : NULL; t && ac < 63;
         t = strtok_r(NULL, " ", &save))
        av[ac++] = t;
    av[ac] = NULL;
    char *envp[] = { NULL };

    struct config *cfg = xcalloc(1, sizeof(*cfg));
    struct error err = { 0 };
    CHECK(config_load(cfg, ac, av, envp, NULL, &err) == 0);
    if (err.msg[0])
        fprintf(stderr, "config: %s\n", err.msg);
    struct node_state node = { .cfg = cfg };
    struct node_state_options opt = { .host_facts = true, .labels_only = true };
    int r = node_state_build(&node, &opt, &err);
    CHECK(r == 0);
    if (r < 0)
        fprintf(stderr, "node state: %s\n", err.msg);
    struct labels *got = NULL;
    struct labels_input in = { .cfg = cfg, .inv = &node.inv, .nvml_missing = !node.nvml_open };
    r = r < 0 ? r : labels_derive(&in, &got, &err);
    if (c.error) {
        CHECK(r < 0);
        CHECK_STR_CONTAINS(err.msg, c.error);
    } else {
        CHECK(r == 0);
        if (r < 0)
            fprintf(stderr, "derive: %s\n", err.msg);
        else
            compare(got, c.want);
    }
    labels_free(got);
    node_state_clear(&node); /* frees cfg */
    labels_free(c.want);
    free(c.profile), free(c.args), free(c.machine), free(c.error), free(c.config);
    CHECK(scratch_remove(tmp) == 0);
    if (test_failures)
        fprintf(stderr, "%s: %d failure(s)\n", argv[2], test_failures);
    return test_failures ? 1 : 0;
}
