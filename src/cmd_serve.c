/* Serve mode: the one event loop, signals through signalfd, the plugin manager. */
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>

#include "commands.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/loop.h"
#include "daemon/daemon.h"
#include "version.h"

struct serve {
    struct loop *loop;
    struct daemon *daemon;
    int argc;
    char **argv;
};

static void reload(struct serve *s)
{
    struct config *cfg = xcalloc(1, sizeof(*cfg));
    struct error err = { 0 };
    int r = config_load(cfg, s->argc, s->argv, environ, NULL, &err);
    if (r != 0) {
        log_error("Reloading configuration failed, keeping the running configuration: %s",
                  r < 0 ? err.msg : "unexpected --help/--version");
        daemon_count_reload(s->daemon, DAEMON_RELOAD_REJECTED);
        config_free(cfg);
        free(cfg);
        return;
    }
    int level = config_log_level(cfg);
    r = daemon_reload(s->daemon, cfg, &err);
    if (r < 0) {
        log_error("Restart after SIGHUP failed, keeping the running state: %s", err.msg);
        daemon_count_reload(s->daemon, DAEMON_RELOAD_REJECTED);
        config_free(cfg);
        free(cfg);
        return;
    }
    log_set_level(level);
    mem_release_free(); /* the old state and the reload's parsing are freed */
    daemon_count_reload(s->daemon, r == 1 ? DAEMON_RELOAD_UNCHANGED : DAEMON_RELOAD_APPLIED);
    log_info("Reloaded configuration and devices%s", r == 1 ? " (nothing changed)" : "");
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
            loop_quit(l, 0);
            break;
        }
    }
}

int cmd_serve(struct config *cfg, int argc, char **argv)
{
    struct serve s = { .argc = argc, .argv = argv };
    struct error err = { 0 };
    sigset_t mask;
    int rc = 1;
    _cleanup_close_ int sfd = -1;

    log_info("Starting gpu-device-plugin %s (%s)", GDP_VERSION, GDP_REVISION);
    _cleanup_free_ char *dump = config_to_json_string(cfg, false);
    log_info("Running with config: %s", dump);
    if (cfg->gfd_sleep_interval_ms != 60000) /* GFD's default */
        log_info("--sleep-interval is accepted for compatibility with gpu-feature-discovery and "
                 "not used: labels are republished at start, on reload and when the GPUs "
                 "change, never on a timer");

    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGPIPE);
    /* Blocked before any thread exists, so every thread inherits the mask. */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        log_error("signalfd: %s", strerror(errno));
        goto fail_cfg;
    }
    int r = loop_new(&s.loop);
    if (r < 0) {
        log_error("creating the event loop: %s", strerror(-r));
        goto fail_cfg;
    }
    loop_add_io(s.loop, sfd, EPOLLIN, on_signal, &s);
    s.daemon = daemon_new(s.loop);
    if (daemon_start(s.daemon, cfg, &err) < 0) {
        log_error("%s", err.msg);
        daemon_free(s.daemon);
        loop_del_io(s.loop, sfd);
        loop_free(s.loop);
        goto fail_cfg;
    }
    mem_release_free(); /* startup's parsing and discovery are freed */
    rc = loop_run(s.loop) < 0 ? 1 : 0;
    daemon_free(s.daemon);
    loop_del_io(s.loop, sfd);
    loop_free(s.loop);
    log_info("Stopped.");
    return rc;

fail_cfg:
    config_free(cfg);
    free(cfg);
    return 1;
}
