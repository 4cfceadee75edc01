/* The signals every long-running entrypoint handles through the loop: SIGINT, SIGTERM and
 * SIGQUIT (stop), SIGHUP (reload, where the program has one) and SIGPIPE (ignored: a peer
 * gone is seen by the write). One home for the mask, so that serve, gpu-feature-discovery,
 * config-manager and mps-control-daemon block the same set. */
#pragma once

#include <stdbool.h>

/* Block the set (with SIGHUP when hup) in the calling thread, which every thread created
 * afterwards inherits, and return a non-blocking, close-on-exec signalfd reading it, or
 * -errno. Call before any thread is started. */
int signals_fd(bool hup);
