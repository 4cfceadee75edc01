#include <libgen.h>
#include <stdio.h>
#include <sys/inotify.h>

#include "core/log.h"
#include "core/loop.h"
#include "kubelet_watch.h"

struct kwatch {
    struct loop *loop;
    int fd;
    char *name;     /* basename of the kubelet socket */
    kwatch_fn fn;
    void *userdata;
};

static void on_inotify(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct kwatch *w = userdata;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool fire = false;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->len && streq(ev->name, w->name) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                fire = true;
            p += sizeof(*ev) + ev->len;
        }
    }
    /* Several events in one read (delete + create) mean one restart. */
    if (fire) {
        log_info("inotify: %s created, re-registering", w->name);
        w->fn(w->userdata);
    }
}

int kwatch_new(struct loop *l, const char *kubelet_socket, kwatch_fn fn, void *userdata,
               struct kwatch **out, struct error *err)
{
    _cleanup_free_ char *dir_copy = xstrdup(kubelet_socket);
    _cleanup_free_ char *base_copy = xstrdup(kubelet_socket);
    const char *dir = dirname(dir_copy);
    _cleanup_close_ int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "inotify_init1: %s", strerror(errno));
    if (inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO) < 0)
        return error_set(err, -errno, "watching %s: %s", dir, strerror(errno));
    struct kwatch *w = xcalloc(1, sizeof(*w));
    w->loop = l;
    w->name = xstrdup(basename(base_copy));
    w->fn = fn;
    w->userdata = userdata;
    int r = loop_add_io(l, fd, EPOLLIN, on_inotify, w);
    if (r < 0) {
        free(w->name);
        free(w);
        return error_set(err, r, "watching %s: %s", dir, strerror(-r));
    }
    w->fd = TAKE_FD(fd);
    *out = w;
    return 0;
}

void kwatch_free(struct kwatch *w)
{
    if (!w)
        return;
    loop_del_io(w->loop, w->fd);
    close(w->fd);
    free(w->name);
    free(w);
}
