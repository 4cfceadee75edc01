/* Kubelet restart detection: inotify on the device-plugin directory for the kubelet's
 * socket being created again (no polling).
 *
 * The directory itself can go away (an operator or a node agent wipes and recreates
 * /var/lib/kubelet/device-plugins). A watch on the directory never reports the new one,
 * so its parent (or, if that is gone too, the nearest existing ancestor) is watched as
 * well; when the directory comes back it is watched again and reported like a restart: the manager rebinds the plugin sockets into the new directory and
 * registers again (retrying with backoff until the kubelet serves). */
#include <libgen.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/loop.h"
#include "kubelet_watch.h"

#define DIR_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define PARENT_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF)

struct kwatch {
    struct loop *loop;
    int fd;
    char *dir;          /* the device-plugin directory */
    char *dir_name;     /* its last component */
    char *name;         /* basename of the kubelet socket */
    int wd_dir;         /* watch on dir, or -1 while it is missing */
    int wd_up;          /* watch on dir's parent, or its nearest existing ancestor */
    bool up_is_parent;  /* wd_up is on the direct parent (events name dir_name) */
    kwatch_fn fn;
    void *userdata;
};

/* Watch the nearest existing ancestor of dir, then dir itself. The parent is watched
 * even while dir exists: a removed directory's own IN_DELETE_SELF only comes once the
 * last reference to it goes, and our bound plugin socket is such a reference, so only
 * the parent's IN_DELETE says at once that the directory is gone. Returns true when dir
 * is watched. */
static bool rewatch(struct kwatch *w)
{
    _cleanup_free_ char *path = xstrdup(w->dir);
    bool direct = true;
    if (w->wd_up >= 0)
        (void)inotify_rm_watch(w->fd, w->wd_up);
    w->wd_up = -1;
    for (;;) {
        char *slash = strrchr(path, '/');
        if (!slash)
            break;
        if (slash == path)
            slash[1] = '\0';
        else
            *slash = '\0';
        w->wd_up = inotify_add_watch(w->fd, path, PARENT_EVENTS | IN_ONLYDIR);
        if (w->wd_up >= 0 || streq(path, "/"))
            break;
        direct = false;
    }
    w->up_is_parent = direct && w->wd_up >= 0;
    if (w->wd_dir < 0)
        w->wd_dir = inotify_add_watch(w->fd, w->dir, DIR_EVENTS | IN_ONLYDIR);
    return w->wd_dir >= 0;
}

static void on_inotify(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct kwatch *w = userdata;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool fire = false, dir_gone = false, up_changed = false;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (ev->wd == w->wd_dir) {
                if (ev->len && streq(ev->name, w->name) && (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                    fire = true;
                if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
                    dir_gone = true;
            } else if (ev->wd == w->wd_up) {
                bool ours = !w->up_is_parent || (ev->len && streq(ev->name, w->dir_name));
                if (ours && (ev->mask & (IN_DELETE | IN_MOVED_FROM)))
                    dir_gone = true;
                if ((ours && (ev->mask & (IN_CREATE | IN_MOVED_TO))) ||
                    (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)))
                    up_changed = true;
            }
            p += sizeof(*ev) + ev->len;
        }
    }
    bool was_watched = w->wd_dir >= 0;
    if (dir_gone && w->wd_dir >= 0) {
        (void)inotify_rm_watch(w->fd, w->wd_dir);
        w->wd_dir = -1;
        log_warning("%s was removed; plugin sockets are gone, waiting for it to come back",
                    w->dir);
    }
    if ((dir_gone || up_changed) && rewatch(w) && (!was_watched || dir_gone)) {
        log_info("%s is back, serving and registering again", w->dir);
        fire = true;
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
    _cleanup_close_ int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "inotify_init1: %s", strerror(errno));
    struct kwatch *w = xcalloc(1, sizeof(*w));
    w->loop = l;
    w->fd = fd;
    w->dir = xstrdup(dirname(dir_copy));
    w->name = xstrdup(basename(base_copy));
    const char *last = strrchr(w->dir, '/');
    w->dir_name = xstrdup(last ? last + 1 : w->dir);
    w->wd_dir = w->wd_up = -1;
    w->fn = fn;
    w->userdata = userdata;
    int r = 0;
    if (!rewatch(w) && w->wd_up < 0)
        r = error_set(err, -errno, "watching %s: %s", w->dir, strerror(errno));
    else if ((r = loop_add_io(l, fd, EPOLLIN, on_inotify, w)) < 0)
        error_set(err, r, "watching %s: %s", w->dir, strerror(-r));
    if (r < 0) {
        free(w->dir);
        free(w->dir_name);
        free(w->name);
        free(w);
        return r;
    }
    if (w->wd_dir < 0)
        log_warning("%s does not exist; waiting for it", w->dir);
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
    free(w->dir);
    free(w->dir_name);
    free(w->name);
    free(w);
}
