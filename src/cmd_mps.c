/* The `mps-control-daemon` entrypoint (the binary run under that name: NVIDIA's chart and
 * the GPU Operator start their MPS DaemonSet from the plugin's image by it). Its flags
 * are two of the plugin's (--config-file / CONFIG_FILE, --mig-strategy / MIG_STRATEGY),
 * read by the plugin's option table; `mps-control-daemon mount-shm` prepares the shared
 * memory mount (its init container). The run: build the node state as the plugin does,
 * start an MPS daemon for each resource the config shares with MPS (mps/mps.c), write
 * <root>/.ready, and wait; a daemon that fails to start is said in one line and all are
 * started again 30 s later, except when NVIDIA's tools are not there at all (no driver
 * on this node, or a runtime that did not inject them): retrying cannot help, and a pod
 * that stays up serving nothing would look healthy (its DaemonSets have no probe), so it
 * exits with an error after that line and the pod shows the failure; SIGHUP stops them and starts them from the configuration
 * read again; SIGTERM, SIGINT and SIGQUIT stop them and end it. The root is /mps, as
 * NVIDIA's (where its DaemonSet mounts the host's MPS root); GDP_MPS_CONTAINER_ROOT moves
 * it (ours: tests, hosts without a container).
 * With --dra (GDP_DRA; ours) it also runs the MPS control daemons of DRA claims, as the
 * plugin's desired states in <--kubelet-plugins-directory-path>/gpu.nvidia.com/mps ask
 * (mps/mps-dra.h): a DaemonSet of its own, so that they outlive the plugin's restarts. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>

#include "commands.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/signals.h"
#include "mps/mps-dra.h"
#include "mps/mps.h"
#include "state/node-state.h"
#include "version.h"

#define MPS_RETRY_MS 30000u

struct mpsd {
    struct loop *loop;
    int argc;
    char **argv;
    char **envp;
    const char *root;
    bool dra;                   /* --dra: the claims' daemons are run too */
    struct node_state node;     /* of the daemons running; cfg NULL: none */
    size_t started;             /* resources[0..started) with a daemon */
    struct loop_timer *retry;
};

static bool is_mps(const struct rs_resource *r)
{
    return r->sharing == SHARING_MPS && r->n_devices > 0;
}

static void stop_all(struct mpsd *d)
{
    _cleanup_free_ char *ready = xasprintf("%s/.ready", d->root);
    if (unlink(ready) < 0 && errno != ENOENT)
        log_warning("Failed to remove .ready file: %s", strerror(errno));
    if (d->node.cfg)
        log_info("Stopping MPS daemons.");
    for (size_t i = 0; i < d->started; i++) {
        const struct rs_resource *r = &d->node.rs.resources[i];
        struct error err = { 0 };
        if (is_mps(r) && mps_daemon_stop(d->root, r, &err) < 0)
            log_error("Stopping the MPS daemon of %s: %s", r->name, err.msg);
    }
    d->started = 0;
    node_state_clear(&d->node);
    d->node = (struct node_state){ 0 };
}

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata);

/* <root>/.ready: every daemon serves (NVIDIA's readiness probe looks for it). */
static bool write_ready(const struct mpsd *d)
{
    _cleanup_free_ char *ready = xasprintf("%s/.ready", d->root);
    _cleanup_close_ int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        log_error("failed to create %s: %s", ready, strerror(errno));
    return fd >= 0;
}

/* Load the configuration, build the node state, start every MPS daemon. Returns false
 * when it cannot work on this node at all (a tool of the driver missing). */
static bool start_all(struct mpsd *d)
{
    struct error err = { 0 };
    struct config_command cmd = { 0 };
    struct config *cfg = xcalloc(1, sizeof(*cfg));
    log_info("Loading configuration.");
    int r = config_load(cfg, d->argc, d->argv, d->envp, &cmd, &err);
    config_command_free(&cmd);
    if (r != 0) {
        log_error("unable to load config: %s", r > 0 ? "unexpected --help/--version" : err.msg);
        config_free(cfg);
        free(cfg);
        goto retry;
    }
    d->node.cfg = cfg;
    struct node_state_options opt = { .tolerate_nvml_failure = false };
    if (node_state_build(&d->node, &opt, &err) < 0) {
        log_error("%s", err.msg);
        log_hints(err.hints);
        goto retry;
    }
    size_t n = 0;
    for (; d->started < d->node.rs.n_resources; d->started++) {
        const struct rs_resource *res = &d->node.rs.resources[d->started];
        if (!is_mps(res))
            continue;
        n++;
        if (mps_daemon_start(d->root, res, &err) < 0) {
            log_error("Failed to start MPS daemon: %s", err.msg);
            if (err.code == -ENOENT)
                return false; /* the tools are missing: nothing of this one to stop */
            d->started++; /* stopped with the others before the retry */
            goto retry;
        }
    }
    if (!n) {
        log_info("No devices are configured for MPS sharing; Waiting indefinitely.");
        /* The DRA DaemonSet mounts no MPS root: with nothing of the config to run, there is
         * no readiness file to write, and no reason to fail and load NVML again every 30 s
         * (an error line each time, for as long as it runs). */
        if (d->dra && access(d->root, F_OK) < 0)
            return true;
    }
    if (write_ready(d))
        return true;
retry:
    log_info("Failed to start one or more MPS daemons. Retrying in %us...",
             MPS_RETRY_MS / 1000u);
    d->retry = loop_timer_add(d->loop, MPS_RETRY_MS, on_retry, d);
    return true;
}

static void restart(struct mpsd *d)
{
    loop_timer_cancel(d->loop, d->retry);
    d->retry = NULL;
    stop_all(d);
    log_info("Starting Daemons.");
    if (!start_all(d))
        loop_quit(d->loop, GDP_EXIT_FAILURE);
}

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct mpsd *d = userdata;
    d->retry = NULL;
    restart(d);
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct mpsd *d = userdata;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGPIPE)
            continue;
        if (si.ssi_signo == SIGHUP) {
            log_info("Received SIGHUP, restarting.");
            restart(d);
            continue;
        }
        log_info("Received signal \"%s\", shutting down.", strsignal((int)si.ssi_signo));
        loop_quit(l, GDP_EXIT_OK);
        return;
    }
}

/* MPS is validated against the plugin's --mps-root; this entrypoint has the root itself. */
static char **with_mps_root(char **envp, const char *root)
{
    size_t n = 0;
    bool set = false;
    for (; envp && envp[n]; n++)
        set = set || startswith(envp[n], "MPS_ROOT=");
    char **e = xcalloc(n + 2, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        e[i] = xstrdup(envp[i]);
    if (!set)
        e[n] = xasprintf("MPS_ROOT=%s", root);
    return e;
}

int cmd_mps_control_daemon(int argc, char **argv)
{
    struct mpsd d = { .argc = argc, .argv = argv };
    const char *root = getenv("GDP_MPS_CONTAINER_ROOT");
    d.root = root && *root ? root : "/mps";
    d.envp = with_mps_root(environ, d.root);
    struct error err = { 0 };
    struct config_command cmd = { 0 };
    struct config *cfg = xcalloc(1, sizeof(*cfg));
    _cleanup_free_ char *dra_plugins = NULL; /* --dra: the claims' daemons too */
    struct mps_dra *dra = NULL;
    int rc = GDP_EXIT_FAILURE;
    int r = config_load(cfg, argc, argv, d.envp, &cmd, &err);
    if (r == CONFIG_LOAD_HELP) {
        config_print_help_mps(stdout, argv[0], d.root);
        rc = GDP_EXIT_OK;
    } else if (r == CONFIG_LOAD_VERSION) {
        printf("mps-control-daemon (gpu-device-plugin) version %s\ncommit: %s\n", GDP_VERSION,
               GDP_REVISION);
        rc = GDP_EXIT_OK;
    } else if (r < 0) {
        log_error("%s", err.msg);
    } else if (cmd.name && streq(cmd.name, "mount-shm")) {
        if (mps_mount_shm(d.root, &err) < 0)
            log_error("%s", err.msg);
        else
            rc = GDP_EXIT_OK;
    } else if (cmd.name) {
        log_error("unknown command \"%s\" (mps-control-daemon [flags] [mount-shm]; see --help)",
                  cmd.name);
    } else {
        log_set_level(config_log_level(cfg));
        if (cfg->dra.enabled)
            dra_plugins = xstrdup(cfg->dra.plugins_dir);
        config_free(cfg);
        free(cfg);
        cfg = NULL;
        rc = GDP_EXIT_OK;
    }
    config_command_free(&cmd);
    if (cfg) {
        config_free(cfg);
        free(cfg);
        config_strv_free(d.envp);
        return rc;
    }
    log_info("NVIDIA MPS Control Daemon (gpu-device-plugin %s, %s)", GDP_VERSION, GDP_REVISION);
    _cleanup_close_ int sfd = signals_fd(true);
    int lr = sfd < 0 ? sfd : loop_new(&d.loop);
    if (lr < 0) {
        log_error("%s: %s", sfd < 0 ? "signalfd" : "creating the event loop", strerror(-lr));
        config_strv_free(d.envp);
        return GDP_EXIT_FAILURE;
    }
    loop_add_io(d.loop, sfd, EPOLLIN, on_signal, &d);
    d.dra = dra_plugins != NULL;
    if (dra_plugins && mps_dra_start(d.loop, dra_plugins, &dra, &err) < 0) {
        log_error("DRA: %s", err.msg);
        rc = GDP_EXIT_FAILURE;
        goto out;
    }
    log_info("Starting Daemons.");
    rc = start_all(&d) ? loop_run(d.loop) : GDP_EXIT_FAILURE;
out:
    mps_dra_stop(dra);
    loop_timer_cancel(d.loop, d.retry);
    stop_all(&d);
    loop_del_io(d.loop, sfd);
    loop_free(d.loop);
    config_strv_free(d.envp);
    return rc < 0 ? GDP_EXIT_FAILURE : rc;
}
