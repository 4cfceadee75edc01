/* The command line and the environment: Go-flag-style parsing of argv into the
 * option table's rows (config-options.c), the subcommand's words, and the env vars of
 * each row. */
#include <stdio.h>

#include "config/config-internal.h"
#include "config/config-load.h"
#include "core/suggest.h"

static int find_option(const char *name, size_t len)
{
    for (int i = 0; i < _OPT_MAX; i++)
        for (size_t k = 0; k < ELEMENTSOF(config_options[i].names) && config_options[i].names[k]; k++)
            if (strlen(config_options[i].names[k]) == len && !strncmp(config_options[i].names[k], name, len))
                return i;
    return -1;
}

const char *config_flag_closest(const char *name, size_t len, const char *const *extra)
{
    struct suggest sg;
    suggest_init(&sg, name, len);
    for (; extra && *extra; extra++)
        suggest_offer(&sg, *extra);
    for (int i = 0; i < _OPT_MAX; i++)
        for (size_t k = 0; k < ELEMENTSOF(config_options[i].names) && config_options[i].names[k]; k++)
            suggest_offer(&sg, config_options[i].names[k]);
    return suggest_best(&sg);
}

/* "unknown flag --mig-stratgy; did you mean --mig-strategy? (see --help)". */
static int unknown_flag(const char *name, size_t len, struct error *err)
{
    const char *best = config_flag_closest(name, len, NULL);
    const char *dash = len == 1 ? "-" : "--";
    if (!best)
        return error_set(err, -EINVAL, "unknown flag %s%.*s (see --help)", dash, (int)len, name);
    return error_set(err, -EINVAL, "unknown flag %s%.*s; did you mean %s%s? (see --help)", dash,
                     (int)len, name, strlen(best) == 1 ? "-" : "--", best);
}

char *config_unknown_argument(const char *cmd, const char *arg, const char *const *extra,
                              const char *allowed)
{
    const char *name = arg + strspn(arg, "-");
    const char *best = arg[0] == '-' ? config_flag_closest(name, strcspn(name, "="), extra) : NULL;
    if (best)
        return xasprintf("%s: unknown argument \"%s\"; did you mean %s%s? (%s; see --help)", cmd,
                         arg, strlen(best) == 1 ? "-" : "--", best, allowed);
    return xasprintf("%s: unknown argument \"%s\" (%s; see --help)", cmd, arg, allowed);
}

static const char *env_lookup(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=')
            return *e + len + 1;
    return NULL;
}

static void cmd_push(struct config_command *cmd, const char *arg)
{
    cmd->args = xreallocarray(cmd->args, cmd->n_args + 2, sizeof(char *));
    cmd->args[cmd->n_args++] = arg;
    cmd->args[cmd->n_args] = NULL;
}

void config_command_free(struct config_command *cmd)
{
    if (!cmd)
        return;
    free(cmd->args);
    *cmd = (struct config_command){ 0 };
}

struct cli_values {
    char *value[_OPT_MAX];  /* slices: every occurrence joined with ',' */
    char *origin[_OPT_MAX]; /* the flag as typed, e.g. "--nvidia-driver-root" */
};

static void cli_values_clear(struct cli_values *v)
{
    for (int i = 0; i < _OPT_MAX; i++) {
        free(v->value[i]);
        free(v->origin[i]);
    }
}

static int positional(struct config_command *cmd, const char *arg, struct error *err)
{
    if (!cmd)
        return error_set(err, -EINVAL, "unexpected argument: %s", arg);
    if (!cmd->name)
        cmd->name = arg;
    else
        cmd_push(cmd, arg);
    return 0;
}

/* Go's flag package (under urfave/cli) accepts -name and --name alike, with the
 * value as "=value" or the next argument; booleans never take the next argument. */
static int parse_argv(int argc, char **argv, struct cli_values *v, struct config_command *cmd,
                      struct error *err)
{
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == 0) {
            int r = positional(cmd, arg, err);
            if (r < 0)
                return r;
            continue;
        }
        if (streq(arg, "--")) {
            only_positional = true;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int opt = find_option(name, len);
        if (opt < 0) {
            if (cmd && cmd->name) {
                cmd_push(cmd, arg); /* the subcommand's own flag */
                continue;
            }
            return unknown_flag(name, len, err);
        }
        const struct config_option_def *o = &config_options[opt];
        if (o->kind == KIND_ACTION)
            return opt == OPT_HELP ? CONFIG_LOAD_HELP : CONFIG_LOAD_VERSION;
        const char *value;
        if (eq)
            value = eq + 1;
        else if (o->kind == KIND_BOOL)
            value = "true";
        else if (i + 1 < argc)
            value = argv[++i];
        else
            return error_set(err, -EINVAL, "flag needs an argument: -%.*s", (int)len, name);

        if (o->kind == KIND_SLICE && v->value[opt]) {
            char *joined = xasprintf("%s,%s", v->value[opt], value);
            free(v->value[opt]);
            v->value[opt] = joined;
        } else {
            free(v->value[opt]);
            v->value[opt] = xstrdup(value);
        }
        free(v->origin[opt]);
        v->origin[opt] = xstrndup(arg, (size_t)(name - arg) + len); /* as typed */
    }
    return 0;
}

int config_args_apply(struct config *c, int argc, char **argv, char **envp,
                      struct config_command *cmd, bool *set, struct config_marks *marks,
                      struct error *err)
{
    _cleanup_(cli_values_clear) struct cli_values v = { 0 };
    int r = parse_argv(argc, argv, &v, cmd, err);
    if (r != 0)
        return r;

    for (int i = 0; i < _OPT_MAX; i++) {
        if (v.value[i]) {
            r = config_option_set(c, i, v.value[i], v.origin[i], err);
            if (r < 0)
                return r;
            set[i] = true;
            marks->origin[i] = xstrdup(v.origin[i]);
            continue;
        }
        /* An empty variable counts as unset: Helm and manifests often render
         * `VAR: ""` for "not configured". */
        for (size_t k = 0; k < ELEMENTSOF(config_options[i].envs) && config_options[i].envs[k]; k++) {
            const char *e = env_lookup(envp, config_options[i].envs[k]);
            if (!e || !*e)
                continue;
            char *origin = xasprintf("env %s", config_options[i].envs[k]);
            marks->origin[i] = origin;
            r = config_option_set(c, i, e, origin, err);
            if (r < 0)
                return r;
            set[i] = true;
            break;
        }
    }
    return 0;
}
