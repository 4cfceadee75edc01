/* The shared accept path of a listening socket; the contract is in listener.h. */
#include <errno.h>
#include <sys/socket.h>

#include "listener.h"
#include "loop.h"
#include "macro.h"

static void accept_cb(struct loop *l, int fd, uint32_t events, void *userdata);

static void pause_done(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct listener *ln = userdata;
    ln->timer = NULL;
    if (listener_start(ln) < 0) /* try again after the same delay */
        ln->timer = loop_timer_add(l, ln->pause.delay_ms, pause_done, ln);
}

int listener_start(struct listener *ln)
{
    if (ln->listening)
        return 0;
    int r = loop_add_io(ln->loop, ln->fd, EPOLLIN, accept_cb, ln);
    if (r < 0)
        return r;
    ln->listening = true;
    return 0;
}

void listener_stop(struct listener *ln)
{
    if (ln->timer)
        loop_timer_cancel(ln->loop, ln->timer);
    ln->timer = NULL;
    if (ln->listening)
        (void)loop_del_io(ln->loop, ln->fd);
    ln->listening = false;
}

void listener_init(struct listener *ln, struct loop *l, int fd, unsigned batch,
                   struct backoff pause, const struct listener_ops *ops, void *userdata)
{
    *ln = (struct listener){ .loop = l, .fd = fd, .batch = batch ? batch : 1, .pause = pause,
                             .ops = ops, .userdata = userdata };
}

bool listener_out_of_fds(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

static void accept_cb(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct listener *ln = userdata;
    bool retried = false;
    for (unsigned i = 0; i < ln->batch; i++) {
        int cfd = RETRY_EINTR(accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (cfd >= 0) {
            retried = false;
            backoff_reset(&ln->pause);
            ln->ops->conn(ln->userdata, cfd);
            continue;
        }
        int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK)
            return;
        enum listener_next next = ln->ops->error(ln->userdata, err, retried);
        if (next == LISTENER_RETRY)
            retried = true;
        if (next == LISTENER_STOP)
            return;
        if (next == LISTENER_PAUSE) {
            listener_stop(ln);
            ln->timer = loop_timer_add(l, backoff_next(&ln->pause), pause_done, ln);
            return;
        }
    }
}
