/* The option table (config-options.c): one row is one option. For every row, with no
 * list kept anywhere else: it has storage (a field or a setter of its own), a name to
 * set it by, a place in `config print` that shows it, a line in --help, and if it takes
 * effect only at start the reload's check names exactly it. A row added without any of
 * these fails here. */
#include "config-test.h"
#include "config/config-internal.h"


/* Values tried for each row in turn; the first the row accepts and that changes the
 * configuration is used. */
static const char *const candidates[] = {
    "true", "false", "/dev/null", "7", "2.5", "mixed", "cdi-cri", "index", "packed", "nvml",
    "json", "cdi.example.com/", "0", "13", "never", "2h", "30s", "infinite", "empty", "all",
    "DynamicMIG=true", "2Gi",
};

/* The rows whose effect shows only beside another setting's. */
static const char *base_env(enum config_opt opt)
{
    /* DP_ENABLE_HEALTHCHECKS=all undoes DP_DISABLE_HEALTHCHECKS=all */
    return opt == OPT_DP_ENABLE_HEALTHCHECKS ? "DP_DISABLE_HEALTHCHECKS=all" : NULL;
}

static int load_with(struct config *c, enum config_opt opt, const char *value)
{
    const struct config_option_def *o = &config_options[opt];
    char *argv[3] = { "gdp", NULL, NULL };
    char *envp[3] = { NULL, NULL, NULL };
    _cleanup_free_ char *arg = NULL, *env = NULL;
    size_t ne = 0;
    if (base_env(opt))
        envp[ne++] = (char *)base_env(opt);
    if (value && o->names[0])
        argv[1] = arg = xasprintf("%s%s=%s", strlen(o->names[0]) == 1 ? "-" : "--", o->names[0],
                                  value);
    else if (value)
        envp[ne++] = env = xasprintf("%s=%s", o->envs[0], value);
    struct error err = { 0 };
    return config_load(c, argv[1] ? 2 : 1, argv, envp, NULL, &err);
}

static json_t *print_json(const struct config *c)
{
    _cleanup_free_ char *s = config_to_json_string(c, false);
    return json_loads(s, 0, NULL);
}

static json_t *at_path(json_t *root, const char *path)
{
    json_t *o = root;
    for (const char *p = path; o;) {
        const char *dot = strchr(p, '.');
        _cleanup_free_ char *key = xstrndup(p, dot ? (size_t)(dot - p) : strlen(p));
        o = json_object_get(o, key);
        if (!dot)
            break;
        p = dot + 1;
    }
    return o;
}

struct reported {
    char flags[512];
};

static void on_change(void *userdata, const char *flag, const char *running, const char *wanted)
{
    struct reported *r = userdata;
    size_t n = strlen(r->flags);
    snprintf(r->flags + n, sizeof(r->flags) - n, "%s%s", n ? " " : "", flag);
}

static void test_rows(void)
{
    for (int i = 0; i < _OPT_MAX; i++) {
        const struct config_option_def *o = &config_options[i];
        const char *name = o->names[0] ? o->names[0] : o->envs[0];
        CHECK(name, "row %d has neither a flag nor an env var", i);
        if (o->kind == KIND_ACTION)
            continue;
        CHECK(o->stored || o->set, "%s: no storage and no setter", name);
        CHECK(o->print, "%s: not in config print", name);
        CHECK(!o->start_only || o->names[0], "%s: start-only without a flag to name", name);
        CHECK(o->group && o->usage, "%s: no --help group or usage", name);
        for (int j = 0; j < i; j++)
            for (size_t a = 0; a < ELEMENTSOF(o->names); a++)
                for (size_t b = 0; b < ELEMENTSOF(o->names); b++) {
                    const struct config_option_def *p = &config_options[j];
                    CHECK(!o->names[a] || !p->names[b] || !streq(o->names[a], p->names[b]),
                          "flag %s in two rows", o->names[a]);
                    CHECK(!o->envs[a] || !p->envs[b] || !streq(o->envs[a], p->envs[b]),
                          "env %s in two rows", o->envs[a]);
                }
    }
}

/* Every row: a value that changes it changes `config print` at the row's path, and the
 * start-only check reports exactly that row's flag when it is start-only, nothing else. */
static void test_print_and_restart(void)
{
    for (int i = 0; i < _OPT_MAX; i++) {
        const struct config_option_def *o = &config_options[i];
        const char *name = o->names[0] ? o->names[0] : o->envs[0];
        if (o->kind == KIND_ACTION || !o->print)
            continue;
        struct config base;
        CHECK(load_with(&base, i, NULL) == 0, "%s: defaults", name);
        json_t *before = print_json(&base);
        CHECK(at_path(before, o->print) != NULL, "%s: %s not printed", name, o->print);
        struct config_start_values *sv = config_start_values_new(&base);
        bool changed = false;
        for (size_t k = 0; k < ELEMENTSOF(candidates) && !changed; k++) {
            struct config c;
            if (load_with(&c, i, candidates[k]) < 0) {
                config_free(&c);
                continue;
            }
            json_t *after = print_json(&c);
            changed = !json_equal(at_path(before, o->print), at_path(after, o->print));
            if (changed) {
                struct reported r = { "" };
                config_start_values_diff(sv, &c, on_change, &r);
                _cleanup_free_ char *want = o->start_only ? xasprintf("--%s", name) : xstrdup("");
                CHECK(streq(r.flags, want), "%s=%s: start-only check reports \"%s\", want \"%s\"",
                      name, candidates[k], r.flags, want);
            }
            json_decref(after);
            config_free(&c);
        }
        CHECK(changed, "%s: no value changes config print at %s", name, o->print);
        config_start_values_free(sv);
        json_decref(before);
        config_free(&base);
    }
}

static void test_help_lists_every_row(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_help(f, "gdp");
    fclose(f);
    for (int i = 0; i < _OPT_MAX; i++) {
        const struct config_option_def *o = &config_options[i];
        for (size_t k = 0; k < ELEMENTSOF(o->names) && o->names[k]; k++) {
            _cleanup_free_ char *flag = xasprintf("%s%s", strlen(o->names[k]) == 1 ? "-" : "--",
                                                  o->names[k]);
            CHECK(strstr(buf, flag), "help lacks %s", flag);
        }
        for (size_t k = 0; k < ELEMENTSOF(o->envs) && o->envs[k]; k++) {
            _cleanup_free_ char *env = xasprintf("$%s", o->envs[k]);
            CHECK(strstr(buf, env), "help lacks %s", env);
        }
    }
    free(buf);
}

int main(void)
{
    log_set_level(LOG_WARNING); /* the candidates' "malformed Xid" info lines */
    static void (*const tests[])(void) = { test_rows, test_print_and_restart,
                                           test_help_lists_every_row, NULL };
    return config_test_main("config-options", tests);
}
