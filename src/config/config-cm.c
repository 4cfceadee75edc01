/* config-manager's flags and environment (config-cm.h). Parsed as urfave/cli parses
 * them for NVIDIA's binary: -name or --name, a value after '=' or in the next word,
 * booleans bare or with =value (Go's strconv.ParseBool), the string slice repeatable and
 * split on commas, a variable read only when its flag is not given (and, for a number or
 * a boolean, only when not empty). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "config/config-cm.h"
#include "config/config-internal.h"
#include "core/macro.h"

enum cm_kind { CM_BOOL, CM_STRING, CM_INT, CM_SLICE, CM_VERBOSITY, CM_HELP, CM_VERSION };

struct cm_option {
    const char *name;
    const char *env;
    enum cm_kind kind;
    size_t offset;
    const char *defval;
    const char *usage;
};

#define F(field) offsetof(struct config_cm, field)

/* NVIDIA's order and words (cmd/config-manager/main.go). */
static const struct cm_option cm_options[] = {
    { "oneshot", "ONESHOT", CM_BOOL, F(oneshot), "false",
      "check and update the config only once and then exit" },
    { "kubeconfig", "KUBECONFIG", CM_STRING, F(kubeconfig), "",
      "absolute path to the kubeconfig file" },
    { "node-name", "NODE_NAME", CM_STRING, F(node_name), "",
      "the name of the node to watch for label changes on" },
    { "node-label", "NODE_LABEL", CM_STRING, F(node_label), "nvidia.com/device-plugin.config",
      "the name of the node label to use for selecting a config" },
    { "config-file-srcdir", "CONFIG_FILE_SRCDIR", CM_STRING, F(srcdir), "",
      "the path to the directory containing available device configuration files" },
    { "config-file-dst", "CONFIG_FILE_DST", CM_STRING, F(dst), "",
      "the path to destination device configuration file" },
    { "default-config", "DEFAULT_CONFIG", CM_STRING, F(default_config), "",
      "the default config to use if no label is set" },
    { "fallback-strategies", "FALLBACK_STRATEGIES", CM_SLICE, F(fallbacks), "",
      "ordered list of fallback strategies to use to set a default config when none is "
      "provided (named, single, empty)" },
    { "send-signal", "SEND_SIGNAL", CM_BOOL, F(send_signal), "true",
      "send a signal to <process-to-signal> once a config change is made" },
    { "signal", "SIGNAL", CM_INT, F(signal), "1",
      "the signal to sent to <process-to-signal> if <send-signal> is set" },
    { "process-to-signal", "PROCESS_TO_SIGNAL", CM_STRING, F(process), "nvidia-device-plugin",
      "the name of the process to signal if <send-signal> is set" },
    { "v", NULL, CM_VERBOSITY, F(log_verbosity), "0",
      "log verbosity, as the plugin's -v (ours)" },
    { "help", NULL, CM_HELP, 0, NULL, "show help" },
    { "h", NULL, CM_HELP, 0, NULL, NULL },
    { "version", NULL, CM_VERSION, 0, NULL, "print the version" },
};

#undef F

/* Set one option from its string form; origin names it in errors ("--signal", "env
 * SIGNAL"). A slice given several times (flags) accumulates. */
static int set(struct config_cm *c, const struct cm_option *o, const char *value,
               const char *origin, bool append, struct error *err)
{
    void *field = (char *)c + o->offset;
    switch (o->kind) {
    case CM_BOOL: {
        int b = config_parse_bool(value);
        if (b < 0)
            return error_set(err, -EINVAL, "invalid value \"%s\" for %s: parse error", value,
                             origin);
        *(bool *)field = b;
        return 0;
    }
    case CM_STRING:
        free(*(char **)field);
        *(char **)field = xstrdup(value);
        return 0;
    case CM_INT:
    case CM_VERBOSITY: {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 0);
        if (!*value || *end || errno || v < INT_MIN || v > INT_MAX ||
            (o->kind == CM_VERBOSITY && v < 0))
            return error_set(err, -EINVAL, "invalid value \"%s\" for %s: parse error", value,
                             origin);
        *(int *)field = (int)v;
        return 0;
    }
    case CM_SLICE: {
        char ***v = field;
        size_t n_old = 0, n_new = 0;
        if (!append || !*v) {
            config_strv_free(*v);
            *v = config_split_list(value, NULL);
            return 0;
        }
        _cleanup_(config_strv_freep) char **more = config_split_list(value, &n_new);
        while ((*v)[n_old])
            n_old++;
        *v = xreallocarray(*v, n_old + n_new + 1, sizeof(char *));
        for (size_t i = 0; i < n_new; i++)
            (*v)[n_old + i] = TAKE_PTR(more[i]);
        (*v)[n_old + n_new] = NULL;
        return 0;
    }
    case CM_HELP:
    case CM_VERSION:
        break;
    }
    return 0;
}

static const struct cm_option *find(const char *name, size_t len)
{
    for (size_t i = 0; i < ELEMENTSOF(cm_options); i++)
        if (strlen(cm_options[i].name) == len && !strncmp(cm_options[i].name, name, len))
            return &cm_options[i];
    return NULL;
}

static const char *env_get(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

static int parse(struct config_cm *c, int argc, char **argv, char **envp, struct error *err)
{
    bool given[ELEMENTSOF(cm_options)] = { false };
    for (size_t i = 0; i < ELEMENTSOF(cm_options); i++)
        if (cm_options[i].defval)
            (void)set(c, &cm_options[i], cm_options[i].defval, "default", false, err);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1])
            return error_set(err, -EINVAL, "unexpected argument \"%s\" (config-manager takes "
                             "only flags; see --help)", a);
        const char *name = a + (a[1] == '-' ? 2 : 1);
        size_t len = strcspn(name, "=");
        const struct cm_option *o = find(name, len);
        if (!o)
            return error_set(err, -EINVAL, "flag provided but not defined: -%.*s (see --help)",
                             (int)len, name);
        if (o->kind == CM_HELP)
            return CONFIG_CM_HELP;
        if (o->kind == CM_VERSION)
            return CONFIG_CM_VERSION;
        const char *value = name[len] == '=' ? name + len + 1 : NULL;
        if (!value && o->kind == CM_BOOL)
            value = "true";
        if (!value) {
            if (i + 1 >= argc)
                return error_set(err, -EINVAL, "flag needs an argument: --%s", o->name);
            value = argv[++i];
        }
        _cleanup_free_ char *origin = xasprintf("--%s", o->name);
        size_t k = (size_t)(o - cm_options);
        int r = set(c, o, value, origin, given[k], err);
        if (r < 0)
            return r;
        given[k] = true;
    }
    for (size_t i = 0; i < ELEMENTSOF(cm_options); i++) {
        const char *v = cm_options[i].env && !given[i] ? env_get(envp, cm_options[i].env) : NULL;
        /* An empty variable leaves a number or boolean at its default, as urfave/cli
         * does: NVIDIA's chart gives its init container SIGNAL="". */
        if (!v || (!*v && cm_options[i].kind != CM_STRING))
            continue;
        _cleanup_free_ char *origin = xasprintf("env %s", cm_options[i].env);
        int r = set(c, &cm_options[i], v, origin, false, err);
        if (r < 0)
            return r;
    }
    /* config-manager's own checks, in its order and words. */
    static const struct {
        size_t offset;
        const char *what;
    } required[] = { { offsetof(struct config_cm, node_name), "node-name" },
                     { offsetof(struct config_cm, node_label), "node-label" },
                     { offsetof(struct config_cm, srcdir), "config-file-srcdir" },
                     { offsetof(struct config_cm, dst), "config-file-dst" } };
    for (size_t i = 0; i < ELEMENTSOF(required); i++) {
        const char *v = *(char **)((char *)c + required[i].offset);
        if (!v || !*v)
            return error_set(err, -EINVAL, "invalid <%s>: must not be empty string",
                             required[i].what);
    }
    if (!config_node_name_valid(c->node_name))
        return error_set(err, -EINVAL, "invalid <node-name> \"%s\": not a DNS-1123 subdomain",
                         c->node_name);
    for (char **f = c->fallbacks; f && *f; f++)
        if (!streq(*f, "named") && !streq(*f, "single") && !streq(*f, "empty"))
            return error_set(err, -EINVAL, "unknown fallback strategy: %s (named, single, "
                             "empty)", *f);
    if (c->send_signal && (c->signal <= 0 || c->signal >= NSIG))
        return error_set(err, -EINVAL, "invalid <signal> %d: not a signal number", c->signal);
    return 0;
}

int config_cm_load(struct config_cm *out, int argc, char **argv, char **envp,
                   struct error *err)
{
    *out = (struct config_cm){ 0 };
    int r = parse(out, argc, argv, envp, err);
    if (r < 0)
        config_cm_free(out);
    return r;
}

void config_cm_free(struct config_cm *c)
{
    free(c->kubeconfig);
    free(c->node_name);
    free(c->node_label);
    free(c->srcdir);
    free(c->dst);
    free(c->default_config);
    config_strv_free(c->fallbacks);
    free(c->process);
    *c = (struct config_cm){ 0 };
}

void config_cm_print_help(FILE *f, const char *prog)
{
    fprintf(f, "usage: %s [flags]\n\nNVIDIA's config-manager, from gpu-device-plugin: picks the "
               "node's named config from the node label, points the destination file at it "
               "(a symlink; /dev/null for the empty config) and signals the plugin.\n\n",
            prog);
    for (size_t i = 0; i < ELEMENTSOF(cm_options); i++) {
        const struct cm_option *o = &cm_options[i];
        if (!o->usage)
            continue;
        fprintf(f, "  --%-22s %s", o->name, o->usage);
        if (o->defval && *o->defval)
            fprintf(f, " (default: %s)", o->defval);
        if (o->env)
            fprintf(f, " [$%s]", o->env);
        fputc('\n', f);
    }
}
