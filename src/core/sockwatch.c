/* A socket's directory watched (sockwatch.h): first written for kubelet restart
 * detection, inotify on the device-plugin directory for the kubelet's socket being created
 * again (no polling).
 *
 * Without inotify (inotify_init1 fails with EMFILE when the per-user limit of instances,
 * 128 by default and shared with every other agent of the user on the node, is used up;
 * or no watch can be added) the same things are checked with stat() every
 * SOCKWATCH_POLL_MS, after one warning saying why: a kubelet restart is then noticed within
 * that period instead of at once. The plugin never stops serving for want of inotify.
 *
 * The directory itself can go away (an operator or a node agent wipes and recreates
 * /var/lib/kubelet/device-plugins). A watch on the directory never reports the new one,
 * so its parent (or, if that is gone too, the nearest existing ancestor) is watched as
 * well; when the directory comes back it is watched again and reported like a restart: the manager rebinds the plugin sockets into the new directory and
 * registers again (retrying with backoff until the kubelet serves).
 *
 * The DRA service watches its own two sockets with it too (SOCKWATCH_ANY_CHANGE): one
 * directory watcher in the plugin, so its directory coming back (or a socket removed)
 * is noticed as the device-plugin side notices it. */
#include <libgen.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/sockwatch.h"

/* Polling period without inotify: how late a kubelet restart may be noticed then. */
#define SOCKWATCH_POLL_MS 2000u

#define DIR_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
#define PARENT_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF)

struct sockwatch {
    struct loop *loop;
    int fd;
    char *dir;          /* the device-plugin directory */
    char *dir_name;     /* its last component */
    char *name;         /* basename of the kubelet socket */
    int wd_dir;         /* watch on dir, or -1 while it is missing */
    int wd_up;          /* watch on dir's parent, or its nearest existing ancestor */
    bool up_is_parent;  /* wd_up is on the direct parent (events name dir_name) */
    bool any_change;    /* SOCKWATCH_ANY_CHANGE */
    sockwatch_fn fn;
    void *userdata;
    /* Polling, when fd < 0. */
    struct loop_timer *poll;
    bool dir_seen, sock_seen;
    struct stat sock;   /* the kubelet socket as last seen */
};

/* What in dir, naming the file, fires. */
static uint32_t file_events(const struct sockwatch *w)
{
    return DIR_EVENTS | (w->any_change ? IN_DELETE | IN_MOVED_FROM : 0);
}

/* Watch the nearest existing ancestor of dir, then dir itself. The parent is watched
 * even while dir exists: a removed directory's own IN_DELETE_SELF only comes once the
 * last reference to it goes, and our bound plugin socket is such a reference, so only
 * the parent's IN_DELETE says at once that the directory is gone. Returns true when dir
 * is watched. */
static bool rewatch(struct sockwatch *w)
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
        w->wd_dir = inotify_add_watch(w->fd, w->dir, file_events(w) | IN_ONLYDIR);
    return w->wd_dir >= 0;
}

static void on_inotify(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct sockwatch *w = userdata;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool fire = false, dir_gone = false, up_changed = false;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            if (w->any_change && (ev->mask & IN_Q_OVERFLOW))
                fire = true; /* what was lost may have been about the file */
            if (ev->wd == w->wd_dir) {
                const uint32_t named = file_events(w) & ~(uint32_t)(IN_DELETE_SELF | IN_MOVE_SELF);
                if (ev->len && streq(ev->name, w->name) && (ev->mask & named))
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
        if (!w->any_change) /* the owner of its own socket says what it did */
            log_info("inotify: %s created, re-registering", w->name);
        w->fn(w->userdata);
    }
}

/* One stat() round: the directory gone or back, the socket created anew (another inode
 * or change time: a restarted kubelet unlinks and binds it again). report=false only
 * takes the first picture. */
static void poll_check(struct sockwatch *w, bool report)
{
    struct stat d, s;
    _cleanup_free_ char *path = xasprintf("%s/%s", w->dir, w->name);
    bool dir = stat(w->dir, &d) == 0 && S_ISDIR(d.st_mode);
    bool sock = dir && stat(path, &s) == 0;
    bool fire = false;
    if (report && w->dir_seen && !dir)
        log_warning("%s was removed; plugin sockets are gone, waiting for it to come back",
                    w->dir);
    else if (report && !w->dir_seen && dir) {
        log_info("%s is back, serving and registering again", w->dir);
        fire = true;
    } else if (report && sock && (!w->sock_seen || !fs_same_file(&s, &w->sock)))
        fire = true;
    else if (report && w->any_change && w->sock_seen && !sock)
        fire = true;
    w->dir_seen = dir;
    w->sock_seen = sock;
    if (sock)
        w->sock = s;
    if (fire) {
        if (!w->any_change)
            log_info("%s created, re-registering", w->name);
        w->fn(w->userdata);
    }
}

static void on_poll(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct sockwatch *w = userdata;
    w->poll = loop_timer_add(l, SOCKWATCH_POLL_MS, on_poll, w);
    poll_check(w, true);
}

static struct sockwatch *sockwatch_alloc(struct loop *l, const char *kubelet_socket, unsigned flags,
                                   sockwatch_fn fn, void *userdata)
{
    _cleanup_free_ char *dir_copy = xstrdup(kubelet_socket);
    _cleanup_free_ char *base_copy = xstrdup(kubelet_socket);
    struct sockwatch *w = xcalloc(1, sizeof(*w));
    w->loop = l;
    w->fd = -1;
    w->dir = xstrdup(dirname(dir_copy));
    w->name = xstrdup(basename(base_copy));
    const char *last = strrchr(w->dir, '/');
    w->dir_name = xstrdup(last ? last + 1 : w->dir);
    w->wd_dir = w->wd_up = -1;
    w->any_change = flags & SOCKWATCH_ANY_CHANGE;
    w->fn = fn;
    w->userdata = userdata;
    return w;
}

int sockwatch_new(struct loop *l, const char *kubelet_socket, sockwatch_fn fn, void *userdata,
               struct sockwatch **out, struct error *err)
{
    return sockwatch_new_flags(l, kubelet_socket, 0, fn, userdata, out, err);
}

int sockwatch_new_flags(struct loop *l, const char *kubelet_socket, unsigned flags, sockwatch_fn fn,
                     void *userdata, struct sockwatch **out, struct error *err)
{
    struct sockwatch *w = sockwatch_alloc(l, kubelet_socket, flags, fn, userdata);
    const char *what = "inotify_init1";
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd >= 0) {
        w->fd = fd;
        what = "inotify_add_watch";
        if (rewatch(w) || w->wd_up >= 0) {
            int r = loop_add_io(l, fd, EPOLLIN, on_inotify, w);
            if (r < 0) {
                error_set(err, r, "watching %s: %s", w->dir, strerror(-r));
                sockwatch_free(w);
                return r;
            }
            if (w->wd_dir < 0)
                log_warning("%s does not exist; waiting for it", w->dir);
            *out = w;
            return 0;
        }
        int saved = errno;
        close(fd);
        w->fd = -1;
        errno = saved;
    }
    log_warning("Watching %s for %s: %s: %s%s; checking it every %us instead", w->dir,
                w->any_change ? "changes to our socket" : "kubelet restarts", what, strerror(errno),
                errno == EMFILE ? " (fs.inotify.max_user_instances is shared by every process "
                                  "of this user on the node)"
                : errno == ENOSPC ? " (fs.inotify.max_user_watches is used up)"
                                  : "",
                SOCKWATCH_POLL_MS / 1000u);
    poll_check(w, false);
    if (!w->dir_seen)
        log_warning("%s does not exist; waiting for it", w->dir);
    w->poll = loop_timer_add(l, SOCKWATCH_POLL_MS, on_poll, w);
    *out = w;
    return 0;
}

void sockwatch_free(struct sockwatch *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        loop_del_io(w->loop, w->fd);
        close(w->fd);
    }
    loop_timer_cancel(w->loop, w->poll);
    free(w->dir);
    free(w->dir_name);
    free(w->name);
    free(w);
}
