/* The accept path of a listening socket, shared by the gRPC server and the metrics
 * listener: accept up to `batch` connections per wakeup (other fds get their turn),
 * retry EINTR, stop at EAGAIN, and hand every other failure to the owner, who says
 * whether to go on, stop until the next wakeup, or pause. A pause stops watching the
 * fd (it is level-triggered: a connection still waiting would wake the loop at once)
 * and watches it again after the next delay of `pause` (core/backoff.h), which an
 * accepted connection resets. The policies (caps, whom to evict, what to log) stay
 * with the owner, in its callbacks.
 *
 * Loop-thread only. The listener does not own the fd: the owner closes it after
 * listener_stop(). */
#pragma once

#include <stdbool.h>

#include "core/backoff.h"

struct loop;
struct loop_timer;

enum listener_next {
    LISTENER_NEXT,  /* ignore this failure, accept the next connection */
    LISTENER_RETRY, /* room was made (a connection closed): try again */
    LISTENER_STOP,  /* until the next wakeup */
    LISTENER_PAUSE, /* unwatch the fd for the next pause delay */
};

struct listener_ops {
    /* A connection (O_NONBLOCK | O_CLOEXEC), now owned by the callee. */
    void (*conn)(void *userdata, int cfd);
    /* accept() failed with err (not EINTR or EAGAIN). retried: in this wakeup, since
     * the last connection accepted, a failure was answered LISTENER_RETRY. */
    enum listener_next (*error)(void *userdata, int err, bool retried);
};

struct listener {
    struct loop *loop;
    int fd;
    unsigned batch;
    struct backoff pause;
    const struct listener_ops *ops;
    void *userdata;
    bool listening;           /* the fd is watched */
    struct loop_timer *timer; /* a pause is running */
};

void listener_init(struct listener *ln, struct loop *l, int fd, unsigned batch,
                   struct backoff pause, const struct listener_ops *ops, void *userdata);
/* Watch the fd (again). Returns 0 or -errno. */
int listener_start(struct listener *ln);
/* Stop watching and end a pause; a zeroed (never started) listener is fine. */
void listener_stop(struct listener *ln);
/* Out of fds or memory: the failures room can be made for (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM). */
bool listener_out_of_fds(int err);
