/* signals.h */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "core/signals.h"

int signals_fd(bool hup)
{
    sigset_t mask;
    sigemptyset(&mask);
    if (hup)
        sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGQUIT);
    sigaddset(&mask, SIGPIPE);
    /* Blocked before any thread exists, so every thread inherits the mask. */
    int r = pthread_sigmask(SIG_BLOCK, &mask, NULL);
    if (r != 0)
        return -r;
    int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}
