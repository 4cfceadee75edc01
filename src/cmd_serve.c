/* Serve mode: the one event loop, signals through signalfd, the plugin manager, and the
 * cluster features (src/cluster/), which may choose the config file per node. */
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>

#include "cluster/cluster.h"
#include "commands.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/mem.h"
#include "core/signals.h"
#include "daemon/daemon.h"
#include "version.h"

struct serve {
    struct loop *loop;
    struct daemon *daemon;
    struct cluster *cluster;
    int argc;
    char **argv;
    struct config *initial;   /* per-node config: the start config, until the first apply */
    bool started;
    char *selected;           /* per-node config applied (a file, "" empty); NULL: none */
    struct config_start_values *start_values; /* what start-only settings run with */
};

/* A setting read once at start (config-restart.c) that a reload sets otherwise. From a
 * per-node config it never takes effect: a restart reads it from the flags, environment
 * and --config-file again. */
struct start_only_change {
    const char *why;       /* "SIGHUP", "per-node config <file>" */
    bool per_node;
};

static void on_start_only_change(void *userdata, const char *flag, const char *running,
                                 const char *wanted)
{
    const struct start_only_change *c = userdata;
    if (c->per_node)
        log_warning("%s: %s \"%s\" is not applied: it is read once at start, from the flags, "
                    "environment and --config-file (\"%s\" stays in effect)", c->why, flag,
                    wanted, running);
    else
        log_warning("%s: %s changed from \"%s\" to \"%s\"; it takes effect at restart (\"%s\" "
                    "stays in effect until then)", c->why, flag, running, wanted, running);
}

static void warn_start_only(const struct serve *s, const struct config *cfg, const char *path,
                            const char *why)
{
    _cleanup_free_ char *per_node = path ? xasprintf("%s (per-node config %s)", why,
                                                     *path ? path : "(empty)")
                                         : NULL;
    struct start_only_change c = { .why = per_node ? per_node : why, .per_node = path != NULL };
    config_start_values_diff(s->start_values, cfg, on_start_only_change, &c);
}

static void config_freep(struct config **c)
{
    if (*c) {
        config_free(*c);
        free(*c);
    }
}

/* The configuration from the command line and environment, its file being the per-node
 * selection when there is one. */
static struct config *load(struct serve *s, const char *file, struct error *err)
{
    _cleanup_(config_freep) struct config *cfg = xcalloc(1, sizeof(*cfg));
    int r = file ? config_load_with_file(cfg, s->argc, s->argv, environ, NULL, file, err)
                 : config_load(cfg, s->argc, s->argv, environ, NULL, err);
    if (r > 0)
        error_set(err, -EINVAL, "unexpected --help/--version");
    return r == 0 ? TAKE_PTR(cfg) : NULL;
}

static void reload(struct serve *s)
{
    struct error err = { 0 };
    if (!s->started) {
        log_info("Not reloading: the per-node config is not selected yet");
        return;
    }
    _cleanup_(config_freep) struct config *cfg = load(s, s->selected, &err);
    if (!cfg) {
        log_error("Reloading configuration failed, keeping the running configuration: %s",
                  err.msg);
        daemon_count_reload(s->daemon, DAEMON_RELOAD_REJECTED);
        return;
    }
    int level = config_log_level(cfg);
    int r = daemon_reload(s->daemon, cfg, &err);
    if (r < 0) {
        log_error("Restart after SIGHUP failed, keeping the running state: %s", err.msg);
        log_hints(err.hints);
        daemon_count_reload(s->daemon, DAEMON_RELOAD_REJECTED);
        return;
    }
    warn_start_only(s, cfg, s->selected, "SIGHUP");
    TAKE_PTR(cfg); /* the daemon's now */
    log_set_level(level);
    mem_release_free(); /* the old state and the reload's parsing are freed */
    daemon_count_reload(s->daemon, r == 1 ? DAEMON_RELOAD_UNCHANGED : DAEMON_RELOAD_APPLIED);
    log_info("Reloaded configuration and devices%s", r == 1 ? " (nothing changed)" : "");
}

/* The cluster chose a per-node config (cluster.h: cluster_apply_fn). The first one
 * starts the daemon; later ones are reloads, transactional like SIGHUP's. */
static int apply_config(void *userdata, const char *path, struct error *err)
{
    struct serve *s = userdata;
    _cleanup_(config_freep) struct config *cfg =
        !path && s->initial ? TAKE_PTR(s->initial) : load(s, path, err);
    if (!cfg) {
        if (s->started)
            daemon_count_reload(s->daemon, DAEMON_RELOAD_REJECTED);
        return err->code;
    }
    int level = config_log_level(cfg);
    _cleanup_free_ char *dump = config_to_json_string(cfg, false);
    int r;
    if (s->started) {
        /* One line per switch at -v 0: cluster.c's "Applied per-node config ...". */
        log_demote_begin();
        r = daemon_reload(s->daemon, cfg, err);
        log_demote_end();
    } else {
        r = daemon_start(s->daemon, cfg, err);
    }
    if (s->started)
        daemon_count_reload(s->daemon, r < 0    ? DAEMON_RELOAD_REJECTED
                                       : r == 1 ? DAEMON_RELOAD_UNCHANGED
                                                : DAEMON_RELOAD_APPLIED);
    if (r < 0) {
        if (!s->started && !path) {
            /* Nothing left to fall back to: the same exit as without per-node config. */
            log_error("%s", err->msg);
            log_hints(err->hints);
            loop_quit(s->loop, GDP_EXIT_FAILURE);
        }
        return r;
    }
    warn_start_only(s, cfg, path, "Node label");
    TAKE_PTR(cfg);
    bool was_started = s->started;
    s->started = true;
    log_set_level(level);
    mem_release_free(); /* the selection's parsing (and a replaced state) are freed */
    /* At start, as NVIDIA's plugin prints it; a switch of the per-node config is one
     * line already ("Applied per-node config ..."), and label flapping must not flood
     * the log with the whole configuration each time. */
    log_full(was_started ? LOG_DEBUG : LOG_INFO, "Running with config: %s", dump);
    free(s->selected);
    s->selected = path ? xstrdup(path) : NULL;
    return 0;
}

static struct cluster_options cluster_options_of(const struct config *cfg)
{
    enum cluster_labels_mode mode = CLUSTER_LABELS_OFF;
    if (cfg->node_labels_patch)
        mode = CLUSTER_LABELS_NODE_PATCH;
    else if (cfg->gfd)
        mode = cfg->use_node_feature_api ? CLUSTER_LABELS_NODEFEATURE : CLUSTER_LABELS_FILE;
    return (struct cluster_options){ .labels = mode, .output_file = cfg->gfd_output_file };
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct serve *s = userdata;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGHUP:
            log_info("Received SIGHUP, restarting.");
            reload(s);
            break;
        case SIGPIPE:
            break;
        default:
            log_info("Received signal \"%s\", shutting down.", strsignal((int)si.ssi_signo));
            loop_quit(l, GDP_EXIT_OK);
            break;
        }
    }
}

int cmd_serve(struct config *cfg, int argc, char **argv)
{
    struct serve s = { .argc = argc, .argv = argv, .start_values = config_start_values_new(cfg) };
    struct error err = { 0 };
    int rc = GDP_EXIT_FAILURE;
    _cleanup_close_ int sfd = -1;

    log_info("Starting gpu-device-plugin %s (%s)", GDP_VERSION, GDP_REVISION);
    _cleanup_free_ char *dump = config_to_json_string(cfg, false);
    log_info("Running with config: %s", dump);
    if (cfg->gfd_sleep_interval_ms != 60000) /* GFD's default */
        log_info("--sleep-interval is accepted for compatibility with gpu-feature-discovery and "
                 "not used: labels are republished at start, on reload and when the GPUs "
                 "change, never on a timer");

    sfd = signals_fd(true);
    if (sfd < 0) {
        log_error("signalfd: %s", strerror(-sfd));
        goto fail_cfg;
    }
    int r = loop_new(&s.loop);
    if (r < 0) {
        log_error("creating the event loop: %s", strerror(-r));
        goto fail_cfg;
    }
    loop_add_io(s.loop, sfd, EPOLLIN, on_signal, &s);
    s.daemon = daemon_new(s.loop);
    struct cluster_options co = cluster_options_of(cfg);
    s.cluster = cluster_new(s.loop, cfg, &co, apply_config, &s);
    daemon_set_cluster(s.daemon, s.cluster);
    if (cluster_config_enabled(s.cluster)) {
        /* The daemon starts from the first per-node selection (apply_config). */
        s.initial = cfg;
        cluster_config_start(s.cluster);
    } else if (daemon_start(s.daemon, cfg, &err) < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
        daemon_free(s.daemon);
        cluster_free(s.cluster);
        loop_del_io(s.loop, sfd);
        loop_free(s.loop);
        goto fail_cfg;
    } else {
        s.started = true;
    }
    mem_release_free(); /* startup's parsing and discovery are freed */
    mem_release_when_quiet(s.loop);
    int lr = loop_run(s.loop);
    rc = lr != 0 ? GDP_EXIT_FAILURE : GDP_EXIT_OK;
    daemon_free(s.daemon);
    cluster_free(s.cluster);
    config_freep(&s.initial);
    free(s.selected);
    config_start_values_free(s.start_values);
    loop_del_io(s.loop, sfd);
    loop_free(s.loop);
    log_info("Stopped.");
    return rc;

fail_cfg:
    config_start_values_free(s.start_values);
    config_free(cfg);
    free(cfg);
    return GDP_EXIT_FAILURE;
}
