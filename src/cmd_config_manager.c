/* The `config-manager` entrypoint (the binary run under that name: NVIDIA's chart and the
 * GPU Operator start it as an init container and a sidecar of the plugin's pod). Wiring:
 * its own flags (config/config-cm.c), one loop, SIGTERM/SIGINT/SIGQUIT end it; the work
 * is cluster/cluster-cm.c. */
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>

#include "cluster/cluster-cm.h"
#include "commands.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/signals.h"
#include "version.h"

static void on_signal(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        log_info("Received signal \"%s\", shutting down.", strsignal((int)si.ssi_signo));
        loop_quit(l, GDP_EXIT_OK);
    }
}

static void on_done(void *userdata, int rc)
{
    loop_quit(userdata, rc);
}

int cmd_config_manager(int argc, char **argv)
{
    struct config_cm cfg;
    struct error err = { 0 };
    int r = config_cm_load(&cfg, argc, argv, environ, &err);
    if (r == CONFIG_CM_HELP) {
        config_cm_print_help(stdout, argv[0]);
        config_cm_free(&cfg);
        return GDP_EXIT_OK;
    }
    if (r == CONFIG_CM_VERSION) {
        printf("config-manager (gpu-device-plugin) version %s\ncommit: %s\n", GDP_VERSION,
               GDP_REVISION);
        config_cm_free(&cfg);
        return GDP_EXIT_OK;
    }
    if (r < 0) {
        log_error("%s", err.msg);
        return GDP_EXIT_FAILURE;
    }
    log_set_level(cfg.log_verbosity >= 1 ? LOG_DEBUG : LOG_INFO);
    log_info("Starting config-manager (gpu-device-plugin %s, %s)", GDP_VERSION, GDP_REVISION);

    int rc = GDP_EXIT_FAILURE;
    _cleanup_close_ int sfd = signals_fd(false);
    struct loop *l = NULL;
    struct cluster_cm *m = NULL;
    if (sfd < 0) {
        log_error("signalfd: %s", strerror(-sfd));
        goto out;
    }
    if ((r = loop_new(&l)) < 0) {
        log_error("creating the event loop: %s", strerror(-r));
        goto out;
    }
    loop_add_io(l, sfd, EPOLLIN, on_signal, NULL);
    if (cluster_cm_new(l, &cfg, on_done, l, &m, &err) < 0) {
        log_error("error building kubernetes client: %s", err.msg);
        goto out;
    }
    rc = loop_run(l); /* on_done's code, or 0 after a signal */
    if (rc < 0)
        rc = GDP_EXIT_FAILURE;
out:
    cluster_cm_free(m);
    if (l) {
        if (sfd >= 0)
            loop_del_io(l, sfd);
        loop_free(l);
    }
    config_cm_free(&cfg);
    return rc;
}
