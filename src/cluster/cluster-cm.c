/* config-manager (cluster-cm.h): the own Node's config label → the destination symlink →
 * a signal to the plugin. Log lines follow NVIDIA's config-manager, so that an operator's
 * runbook and log searches keep working. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster/cluster-cm.h"
#include "cluster/cluster-select.h"
#include "cluster/cluster.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"

struct cluster_cm {
    struct loop *loop;
    const struct config_cm *cfg;
    struct kube *kube;
    struct kube_watch *watch;
    cluster_cm_done_fn done;
    void *userdata;
    bool seen;           /* the Node was delivered once: later events act on changes only */
    bool finished;       /* oneshot: the update was made, done is called next */
    int rc;              /* oneshot: its exit code */
    char *label;         /* the value last acted on; NULL: absent */
};

/* Where dst should point: <srcdir>/<name>, or /dev/null for the empty config. */
static char *link_target(const struct config_cm *cfg, const struct cluster_selection *s)
{
    return s->name ? xasprintf("%s/%s", cfg->srcdir, s->name) : xstrdup("/dev/null");
}

/* Point dst at target unless it already resolves to the same file. The new link is made
 * beside dst and renamed over it, so the plugin never finds the file missing. */
static int update_link(const char *dst, const char *target, bool *changed, struct error *err)
{
    char want[PATH_MAX], have[PATH_MAX];
    *changed = false;
    if (!realpath(target, want))
        return error_set(err, -errno, "error evaluating realpath of '%s': %s", target,
                         strerror(errno));
    if (realpath(dst, have) && streq(want, have))
        return 0;
    _cleanup_free_ char *tmp = xasprintf("%s.gdp-new", dst);
    (void)unlink(tmp);
    if (symlink(target, tmp) < 0)
        return error_set(err, -errno, "error creating symlink %s -> %s: %s", tmp, target,
                         strerror(errno));
    if (rename(tmp, dst) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return error_set(err, -e, "error replacing %s: %s", dst, strerror(e));
    }
    *changed = true;
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cluster_cm_find_process(const char *proc_root, const char *name)
{
    DIR *d = opendir(proc_root);
    if (!d)
        return -errno;
    int found = -ESRCH;
    struct dirent *e;
    while (found < 0 && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0 || pid > INT_MAX)
            continue;
        _cleanup_free_ char *path = xasprintf("%s/%ld/cmdline", proc_root, pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        char argv0[PATH_MAX + 1];
        ssize_t n = fd >= 0 ? read(fd, argv0, sizeof(argv0) - 1) : -1;
        if (n <= 0)
            continue; /* gone meanwhile, or a kernel thread */
        argv0[n] = '\0'; /* the first NUL ends argv[0] */
        if (streq(argv0, name) || (strchr(name, '/') && streq(base_name(argv0), base_name(name))))
            found = (int)pid;
    }
    closedir(d);
    return found;
}

int cluster_cm_update(const struct config_cm *cfg, const char *label, bool *changed,
                      struct error *err)
{
    struct cluster_selection sel = { 0 };
    *changed = false;
    int r = cluster_select_config(cfg->srcdir, label, cfg->node_label, cfg->default_config,
                                  cfg->fallbacks, &sel, err);
    if (r < 0)
        return r;
    if (sel.note)
        log_error("%s; using the next rule instead", sel.note);
    if (sel.name)
        log_info("Updating to config: %s", sel.name);
    else
        log_info("Updating to empty config");
    _cleanup_free_ char *target = link_target(cfg, &sel);
    r = update_link(cfg->dst, target, changed, err);
    if (r < 0)
        goto out;
    if (!*changed) {
        log_info("Already configured. Skipping update...");
        goto out;
    }
    if (sel.name)
        log_info("Successfully updated to config: %s", sel.name);
    else
        log_info("Successfully updated to empty config");
    if (cfg->send_signal) {
        log_info("Sending signal '%s' to '%s'", strsignal(cfg->signal), cfg->process);
        int pid = cluster_cm_find_process("/proc", cfg->process);
        if (pid < 0) {
            r = error_set(err, pid, "error finding pid: %s",
                          pid == -ESRCH ? "no process found" : strerror(-pid));
            goto out;
        }
        if (kill(pid, cfg->signal) < 0) {
            r = error_set(err, -errno, "error sending signal to pid %d: %s", pid,
                          strerror(errno));
            goto out;
        }
        log_info("Successfully sent signal");
    }
out:
    cluster_selection_clear(&sel);
    return r;
}

static void on_finish(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster_cm *m = userdata;
    kube_watch_stop(TAKE_PTR(m->watch));
    m->done(m->userdata, m->rc);
}

static void act(struct cluster_cm *m, const char *label)
{
    log_info("Label change detected: %s=%s", m->cfg->node_label, label ? label : "");
    struct error err = { 0 };
    bool changed;
    int r = cluster_cm_update(m->cfg, label, &changed, &err);
    if (r < 0)
        log_error("%s", err.msg);
    if (m->cfg->oneshot) {
        /* Ended from the loop: the watch is not stopped from inside its own callback. */
        m->finished = true;
        m->rc = r < 0 ? 1 : 0;
        loop_timer_add(m->loop, 0, on_finish, m);
        return;
    }
    log_info("Waiting for change to '%s' label", m->cfg->node_label);
}

static void on_node(struct kube_watch *w, enum kube_watch_event ev, json_t *obj, void *userdata)
{
    struct cluster_cm *m = userdata;
    if (m->finished || (ev != KUBE_WATCH_ADDED && ev != KUBE_WATCH_MODIFIED))
        return; /* a deleted Node keeps the last config (cluster-cm.h) */
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!name || !streq(name, m->cfg->node_name))
        return; /* the watch keeps only the field-selected object; never trust one */
    json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    const char *v = json_string_value(json_object_get(labels, m->cfg->node_label));
    if (v && !*v)
        v = NULL;
    bool same = (!v && !m->label) || (v && m->label && streq(v, m->label));
    if (m->seen && same)
        return;
    m->seen = true;
    free(m->label);
    m->label = v ? xstrdup(v) : NULL;
    act(m, v);
}

int cluster_cm_new(struct loop *l, const struct config_cm *cfg, cluster_cm_done_fn done,
                   void *userdata, struct cluster_cm **out, struct error *err)
{
    struct cluster_cm *m = xcalloc(1, sizeof(*m));
    m->loop = l;
    m->cfg = cfg;
    m->done = done;
    m->userdata = userdata;
    const struct config_cluster k = { .kubeconfig = cfg->kubeconfig, .kube_api_qps = 5,
                                      .kube_api_burst = 10 };
    int r = cluster_kube_new(l, &k, &m->kube, err);
    if (r < 0) {
        free(m);
        return r;
    }
    _cleanup_free_ char *sel = xasprintf("metadata.name=%s", cfg->node_name);
    m->watch = kube_watch_start(m->kube, "/api/v1/nodes", sel, on_node, m, err);
    if (!m->watch) {
        kube_free(m->kube);
        free(m);
        return err->code ? err->code : -EIO;
    }
    log_info("Waiting for change to '%s' label", cfg->node_label);
    *out = m;
    return 0;
}

void cluster_cm_free(struct cluster_cm *m)
{
    if (!m)
        return;
    kube_watch_stop(m->watch);
    kube_free(m->kube);
    free(m->label);
    free(m);
}
