/* The `gpu-feature-discovery` entrypoint (the binary run under that name: NVIDIA's chart
 * and the GPU Operator start GFD from the device plugin's image by it). GFD's flags and
 * environment (reference §8.1) over the plugin's option table, which already holds
 * GFD's settings: --oneshot and the --output / -o aliases are taken here, and GFD's own
 * variables (GFD_MIG_STRATEGY, GFD_FAIL_ON_INIT_ERROR, GFD_CONFIG_FILE, GFD_ONESHOT)
 * go before the plugin's, as GFD's CLI reads them first. Then GFD's loop: label the node,
 * deliver (the NodeFeature object, or the feature file), exit after the first delivery
 * with --oneshot, else relabel every --sleep-interval ("infinite": never) and deliver
 * only what changed; SIGHUP reloads the configuration and restarts (a new timestamp);
 * SIGTERM, SIGINT and SIGQUIT end it, the feature file removed unless --oneshot or
 * infinite. No kubelet registration, no health monitor. */
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <time.h>

#include "cluster/cluster.h"
#include "commands.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/signals.h"
#include "labels/labels.h"
#include "state/node-state.h"
#include "version.h"

#define SETTLE_POLL_MS 100u

struct gfd {
    struct loop *loop;
    struct cluster *cluster;
    struct config *cfg;
    int argc;
    char **argv, **envp;
    bool oneshot;
    uint64_t timestamp;           /* per (re)start, as GFD */
    struct loop_timer *timer;     /* the next relabel, or the oneshot's settle check */
};

static void config_freep(struct config **c)
{
    if (*c) {
        config_free(*c);
        free(*c);
    }
}

/* GFD's command line as the plugin's option table reads it. Returns the new argv
 * (pointers into argv, NULL-terminated) and sets *oneshot; -EINVAL on a bad value. */
/* Every word copied (the result is freed whole with config_strv_free). *oneshot_given: the
 * flag was on the command line, which wins over GFD_ONESHOT. */
static int gfd_argv(int argc, char **argv, char ***out, int *out_argc, bool *oneshot,
                    bool *oneshot_given, struct error *err)
{
    char **v = xcalloc((size_t)argc + 1, sizeof(char *));
    int n = 0;
    v[n++] = xstrdup(argv[0]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *name = a[0] == '-' ? a + 1 + (a[1] == '-') : NULL;
        size_t len = name ? strcspn(name, "=") : 0;
        if (name && len == 7 && !strncmp(name, "oneshot", 7)) {
            int b = name[len] == '=' ? config_parse_bool(name + len + 1) : 1;
            if (b < 0) {
                config_strv_free(v);
                return error_set(err, -EINVAL, "invalid value \"%s\" for flag --oneshot",
                                 name + len + 1);
            }
            *oneshot = b;
            *oneshot_given = true;
            continue;
        }
        if (name && ((len == 6 && !strncmp(name, "output", 6)) ||
                     (len == 1 && name[0] == 'o'))) {
            v[n++] = name[len] == '=' ? xasprintf("--output-file=%s", name + len + 1)
                                      : xstrdup("--output-file");
            continue; /* its value, if in the next word, follows as is */
        }
        v[n++] = xstrdup(argv[i]);
    }
    *out = v;
    *out_argc = n;
    return 0;
}

/* GFD's own variables first: copied over the plugin's names they stand for. */
static char **gfd_env(char **envp, bool *oneshot, struct error *err, int *r)
{
    static const char *const map[][2] = { { "GFD_MIG_STRATEGY", "MIG_STRATEGY" },
                                          { "GFD_FAIL_ON_INIT_ERROR", "FAIL_ON_INIT_ERROR" },
                                          { "GFD_CONFIG_FILE", "CONFIG_FILE" } };
    size_t n = 0;
    while (envp && envp[n])
        n++;
    char **e = xcalloc(n + ELEMENTSOF(map) + 1, sizeof(char *));
    size_t m = 0;
    *r = 0;
    for (size_t i = 0; i < n; i++) {
        if (startswith(envp[i], "GFD_ONESHOT=")) {
            int b = config_parse_bool(envp[i] + strlen("GFD_ONESHOT="));
            if (b < 0)
                *r = error_set(err, -EINVAL, "invalid value \"%s\" for env GFD_ONESHOT",
                               envp[i] + strlen("GFD_ONESHOT="));
            else
                *oneshot = b;
        }
        bool shadowed = false;
        for (size_t k = 0; k < ELEMENTSOF(map); k++) {
            size_t len = strlen(map[k][1]);
            if (!strncmp(envp[i], map[k][1], len) && envp[i][len] == '=')
                for (size_t j = 0; j < n; j++)
                    if (startswith(envp[j], map[k][0]) && envp[j][strlen(map[k][0])] == '=')
                        shadowed = true;
        }
        if (!shadowed)
            e[m++] = xstrdup(envp[i]);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ELEMENTSOF(map); k++) {
            size_t len = strlen(map[k][0]);
            if (!strncmp(envp[i], map[k][0], len) && envp[i][len] == '=')
                e[m++] = xasprintf("%s=%s", map[k][1], envp[i] + len + 1);
        }
    return e;
}

static struct config *load(struct gfd *g, struct error *err)
{
    _cleanup_(config_freep) struct config *cfg = xcalloc(1, sizeof(*cfg));
    struct config_command cmd = { 0 };
    int r = config_load(cfg, g->argc, g->argv, g->envp, &cmd, err);
    if (r == 0 && cmd.name)
        r = error_set(err, -EINVAL, "unexpected argument \"%s\" (gpu-feature-discovery takes "
                      "only flags; see --help)", cmd.name);
    config_command_free(&cmd);
    if (r > 0)
        r = error_set(err, -EINVAL, "unexpected --help/--version");
    if (r < 0)
        return NULL;
    cfg->gfd = true;
    return TAKE_PTR(cfg);
}

/* Label the node now and hand the set to the delivery (which sends only a change). */
/* The node's labels now, as `labels` derives them (NVML opened for the call only). */
static int derive(const struct gfd *g, struct labels **out, struct error *err)
{
    struct node_state node = { .cfg = g->cfg };
    struct node_state_options opt = { .tolerate_nvml_failure = !g->cfg->fail_on_init_error,
                                      .host_facts = true, .labels_only = true };
    int r = node_state_build(&node, &opt, err);
    if (r >= 0) {
        struct labels_input in = { .cfg = g->cfg, .inv = &node.inv,
                                   .nvml_missing = !node.nvml_open,
                                   .timestamp = g->cfg->gfd_no_timestamp ? 0 : g->timestamp };
        r = labels_derive(&in, out, err);
    }
    node.cfg = NULL; /* g's */
    node_state_clear(&node);
    return r;
}

static int relabel(struct gfd *g, struct error *err)
{
    _cleanup_labels_ struct labels *labels = NULL;
    int r = derive(g, &labels, err);
    if (r < 0)
        return r;
    cluster_labels_publish(g->cluster, labels);
    return 0;
}

static void on_timer(struct loop *l, struct loop_timer *t, void *userdata);

static void schedule(struct gfd *g)
{
    loop_timer_cancel(g->loop, g->timer);
    g->timer = NULL;
    if (g->oneshot)
        g->timer = loop_timer_add(g->loop, SETTLE_POLL_MS, on_timer, g);
    else if (g->cfg->gfd_sleep_interval_ms != CONFIG_SLEEP_INFINITE)
        g->timer = loop_timer_add(g->loop, g->cfg->gfd_sleep_interval_ms, on_timer, g);
}

static void on_timer(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct gfd *g = userdata;
    g->timer = NULL;
    if (g->oneshot) {
        int s = cluster_labels_settled(g->cluster);
        if (s != 0) {
            loop_quit(l, s > 0 ? GDP_EXIT_OK : GDP_EXIT_FAILURE);
            return;
        }
    } else {
        struct error err = { 0 };
        if (relabel(g, &err) < 0)
            log_error("Labelling the node failed, keeping the labels published: %s", err.msg);
    }
    schedule(g);
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct gfd *g = userdata;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGPIPE)
            continue;
        if (si.ssi_signo != SIGHUP) {
            log_info("Received signal \"%s\", shutting down.", strsignal((int)si.ssi_signo));
            loop_quit(l, GDP_EXIT_OK);
            return;
        }
        log_info("Received SIGHUP, restarting.");
        struct error err = { 0 };
        struct config *cfg = load(g, &err);
        if (!cfg) {
            log_error("Reloading configuration failed, keeping the running configuration: %s",
                      err.msg);
            continue;
        }
        config_freep(&g->cfg);
        g->cfg = cfg;
        g->timestamp = (uint64_t)time(NULL);
        if (relabel(g, &err) < 0)
            log_error("Labelling the node failed, keeping the labels published: %s", err.msg);
        schedule(g);
    }
}

/* --oneshot with the feature file: written once and left in place (GFD's Job). */
static int oneshot_file(struct gfd *g)
{
    struct error err = { 0 };
    _cleanup_labels_ struct labels *labels = NULL;
    int r = derive(g, &labels, &err);
    if (r >= 0)
        r = labels_write_feature_file(labels, g->cfg->gfd_output_file, &err);
    if (r < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
        return GDP_EXIT_FAILURE;
    }
    return GDP_EXIT_OK;
}

static int run(struct gfd *g)
{
    struct error err = { 0 };
    bool api = g->cfg->use_node_feature_api;
    if (api && (!g->cfg->cluster.node_name || !*g->cfg->cluster.node_name)) {
        log_error("The NodeFeature API (--use-node-feature-api, the default) needs the node's "
                  "name: set NODE_NAME (downward API spec.nodeName) or --node-name");
        return GDP_EXIT_FAILURE;
    }
    if (g->oneshot && !api)
        return oneshot_file(g);
    _cleanup_close_ int sfd = signals_fd(true);
    int lr = sfd < 0 ? sfd : loop_new(&g->loop);
    if (lr < 0) {
        log_error("%s: %s", sfd < 0 ? "signalfd" : "creating the event loop", strerror(-lr));
        return GDP_EXIT_FAILURE;
    }
    loop_add_io(g->loop, sfd, EPOLLIN, on_signal, g);
    struct cluster_options co = {
        .labels = api ? CLUSTER_LABELS_NODEFEATURE : CLUSTER_LABELS_FILE,
        .output_file = g->cfg->gfd_output_file,
        .keep_output_file = g->cfg->gfd_sleep_interval_ms == CONFIG_SLEEP_INFINITE,
    };
    g->cluster = cluster_new(g->loop, g->cfg, &co, NULL, NULL);
    int rc = GDP_EXIT_FAILURE;
    if (relabel(g, &err) < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
    } else {
        schedule(g);
        rc = loop_run(g->loop);
        if (rc < 0)
            rc = GDP_EXIT_FAILURE;
    }
    loop_timer_cancel(g->loop, g->timer);
    cluster_free(g->cluster);
    loop_del_io(g->loop, sfd);
    loop_free(g->loop);
    return rc;
}

int cmd_gfd(int argc, char **argv)
{
    struct gfd g = { .timestamp = (uint64_t)time(NULL) };
    struct error err = { 0 };
    bool flag_oneshot = false, flag_given = false, env_oneshot = false;
    int r = gfd_argv(argc, argv, &g.argv, &g.argc, &flag_oneshot, &flag_given, &err);
    if (r < 0) {
        log_error("%s", err.msg);
        return GDP_EXIT_FAILURE;
    }
    int rc = GDP_EXIT_FAILURE;
    g.envp = gfd_env(environ, &env_oneshot, &err, &r);
    if (r < 0) {
        log_error("%s", err.msg);
        goto out;
    }
    g.oneshot = flag_given ? flag_oneshot : env_oneshot;
    struct config_command cmd = { 0 };
    g.cfg = xcalloc(1, sizeof(*g.cfg));
    r = config_load(g.cfg, g.argc, g.argv, g.envp, &cmd, &err);
    config_command_free(&cmd);
    if (r == CONFIG_LOAD_HELP) {
        config_print_help_gfd(stdout, argv[0]);
        rc = GDP_EXIT_OK;
        goto out;
    }
    if (r == CONFIG_LOAD_VERSION) {
        printf("gpu-feature-discovery (gpu-device-plugin) version %s\ncommit: %s\n",
               GDP_VERSION, GDP_REVISION);
        rc = GDP_EXIT_OK;
        goto out;
    }
    config_freep(&g.cfg);
    g.cfg = load(&g, &err);
    if (!g.cfg) {
        log_error("%s", err.msg);
        goto out;
    }
    log_set_level(config_log_level(g.cfg));
    if (g.cfg->log_json)
        log_set_format(LOG_FORMAT_JSON);
    log_info("Starting gpu-feature-discovery (gpu-device-plugin %s, %s)", GDP_VERSION,
             GDP_REVISION);
    rc = run(&g);
out:
    config_freep(&g.cfg);
    config_strv_free(g.argv);
    config_strv_free(g.envp);
    return rc;
}
