/* The cluster object (see cluster.h): which features run, the API client created on
 * first use, and per-node configuration: the own Node watched for the config label,
 * the config directory watched with inotify, the selected config applied through the
 * daemon's transactional reload (the apply callback), the applied name put on the Node
 * as an annotation. Label delivery is cluster-publish.c, Events cluster-events.c. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "cluster/cluster-internal.h"
#include "cluster/cluster-objects.h"
#include "cluster/cluster-select.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/loop.h"
#include "kube/kube.h"

static char *dup_nonempty(const char *s)
{
    return s && *s ? xstrdup(s) : NULL;
}

bool cluster_config_on(const struct config_cluster *k)
{
    return k->config_dir && *k->config_dir && config_node_name_valid(k->node_name);
}

/* ---- per-node configuration ---- */

static void annotate(struct cluster *c, const char *name, const char *source);

/* The selected file cannot be read, or is over CLUSTER_SELECT_MAX_BYTES: said once per
 * content (the file's identity, size and time: a ConfigMap update is a new file), with a
 * ConfigRejected Event naming the file and the limit, as the selection repeats on every
 * change of the directory or the label. */
static void refuse_unreadable(struct cluster *c, const char *path, int r)
{
    struct stat st = { 0 };
    bool big = r == -EFBIG && stat(path, &st) == 0;
    _cleanup_free_ char *key = xasprintf("%s\x1f%d\x1f%llu\x1f%lld\x1f%lld.%09ld", path, r,
                                         (unsigned long long)st.st_ino, (long long)st.st_size,
                                         (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    bool again = streq_ptr(c->refused_key, key);
    free(c->refused_key);
    c->refused_key = TAKE_PTR(key);
    _cleanup_free_ char *why =
        big ? xasprintf("config file %s is %lld bytes, over the limit of %d bytes (1 MiB, what "
                        "a ConfigMap can hold)",
                        path, (long long)st.st_size, CLUSTER_SELECT_MAX_BYTES)
            : xasprintf("reading config file %s: %s", path, strerror(-r));
    if (again) {
        log_debug("Per-node configuration: %s (said before)", why);
        return;
    }
    log_error("Per-node configuration: %s; %s", why,
              c->applied_once ? "keeping the running configuration"
                              : "starting with the configuration of the flags, environment "
                                "and --config-file");
    cluster_event(c, "Warning", "ConfigRejected", "%s", why);
}

/* Choose the config for the current label and directory and apply it if it differs
 * from the one applied (name or content). Refusals keep the running state. */
static void reselect(struct cluster *c)
{
    struct cluster_selection s;
    struct error err = { 0 };
    int r = cluster_select_config(c->config_dir, c->label, c->label_key, c->config_default,
                                  c->fallbacks, &s, &err);
    if (r < 0) {
        log_error("Per-node configuration: %s; %s", err.msg,
                  c->applied_once ? "keeping the running configuration"
                                  : "starting with the configuration of the flags, "
                                    "environment and --config-file");
        cluster_event(c, "Warning", "ConfigRejected", "%s", err.msg);
        if (!c->applied_once && c->apply(c->userdata, NULL, &err) == 0) {
            c->applied_once = true;
            free(c->applied_path);
            c->applied_path = NULL;
        }
        return;
    }
    if (s.note) {
        log_warning("Per-node configuration: %s; using \"%s\" (%s)", s.note,
                    s.name ? s.name : "", s.how);
        cluster_event(c, "Warning", "ConfigRejected", "%s; using \"%s\" (%s)", s.note,
                      s.name ? s.name : "", s.how);
    }
    _cleanup_free_ char *content = NULL;
    size_t len = 0;
    if (s.path && (r = read_file_bounded(s.path, CLUSTER_SELECT_MAX_BYTES, &content, &len, NULL)) < 0) {
        refuse_unreadable(c, s.path, r);
        cluster_selection_clear(&s);
        if (!c->applied_once && c->apply(c->userdata, NULL, &err) == 0) {
            c->applied_once = true;
            free(c->applied_path);
            c->applied_path = NULL;
        }
        return;
    }
    const char *path = s.path ? s.path : "";
    if (c->applied_once && streq_ptr(c->applied_path, path) && len == c->applied_len &&
        (len == 0 || memcmp(content, c->applied_content, len) == 0)) {
        log_debug("Per-node configuration \"%s\" unchanged", s.name ? s.name : "");
        /* Same file, maybe chosen another way (a label naming the default). */
        _cleanup_free_ char *source = cluster_selection_source(&s, c->label_key);
        annotate(c, s.name ? s.name : "", source);
        cluster_selection_clear(&s);
        return;
    }
    r = c->apply(c->userdata, path, &err);
    if (r < 0) {
        log_error("Config \"%s\" (%s) rejected, keeping the running configuration: %s",
                  s.name ? s.name : "", s.how, err.msg);
        cluster_event(c, "Warning", "ConfigRejected", "config \"%s\" rejected: %s",
                      s.name ? s.name : "", err.msg);
        if (!c->applied_once && c->apply(c->userdata, NULL, &err) == 0) {
            c->applied_once = true;
            free(c->applied_path);
            c->applied_path = NULL;
        }
        cluster_selection_clear(&s);
        return;
    }
    c->applied_once = true;
    free(c->applied_path);
    c->applied_path = xstrdup(path);
    free(c->applied_content);
    c->applied_content = TAKE_PTR(content);
    c->applied_len = len;
    /* The same words as `list` (cluster_selection_describe) and the annotations. */
    _cleanup_free_ char *desc = cluster_selection_describe(&s, c->label_key, false);
    _cleanup_free_ char *source = cluster_selection_source(&s, c->label_key);
    log_info("Applied per-node config %s", desc);
    cluster_event(c, "Normal", "ConfigApplied", "config %s applied", desc);
    annotate(c, s.name ? s.name : "", source);
    cluster_selection_clear(&s);
}

static void on_annotated(struct kube *k, int status, json_t *body, void *userdata)
{
    struct cluster *c = userdata;
    c->annotate_req = NULL;
    if (status != 200)
        log_warning("Annotating node %s with %s failed: %s%d; ignoring", c->node,
                    CLUSTER_CONFIG_ANNOTATION, status < 0 ? "error " : "HTTP ",
                    status < 0 ? -status : status);
}

/* The applied name and how it was chosen on the Node, for `kubectl get node -o yaml`
 * (NVIDIA's config-manager exposes nothing). Only when they differ from what the Node
 * already says. */
static void annotate(struct cluster *c, const char *name, const char *source)
{
    if (!c->label_known ||
        (streq_ptr(c->annotation, name) && streq_ptr(c->annotation_source, source)))
        return;
    struct kube *k = cluster_kube(c);
    if (!k)
        return;
    kube_request_cancel(c->annotate_req);
    json_t *patch = json_pack("{s:{s:{s:s,s:s}}}", "metadata", "annotations",
                              CLUSTER_CONFIG_ANNOTATION, name,
                              CLUSTER_CONFIG_SOURCE_ANNOTATION, source);
    _cleanup_free_ char *path = xasprintf("/api/v1/nodes/%s", c->node);
    struct error err = { 0 };
    c->annotate_req = kube_request(k, KUBE_PATCH_MERGE, path, patch, on_annotated, c, &err);
    json_decref(patch);
    if (!c->annotate_req)
        log_warning("Annotating node %s: %s; ignoring", c->node, err.msg);
}

static void on_wait_timeout(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster *c = userdata;
    c->wait_timer = NULL;
    if (c->applied_once)
        return;
    log_warning("Node %s not read from the API server within %us: selecting the per-node "
                "config without its label for now",
                c->node, CLUSTER_CONFIG_WAIT_MS / 1000);
    reselect(c);
}

static void on_node(struct kube_watch *w, enum kube_watch_event ev, json_t *obj, void *userdata)
{
    struct cluster *c = userdata;
    cluster_labels_node_event(c, ev, obj); /* one Node watch for both features */
    if (ev == KUBE_WATCH_SYNCED) {
        if (!c->label_known) {
            /* Listed, and our Node is not there (yet): like a Node without the label. */
            log_warning("Node %s not found by the API server; selecting the per-node config "
                        "without its label",
                        c->node);
            c->label_known = true;
            if (!c->applied_once)
                reselect(c);
        }
        return;
    }
    const json_t *meta = json_object_get(obj, "metadata");
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    /* Only the own Node says what its label is (the watch drops other names already;
     * this holds whatever a server sends). */
    if (!streq_ptr(json_string_value(json_object_get(meta, "name")), c->node) ||
        (kind && !streq(kind, "Node") && !streq(kind, "PartialObjectMetadata")))
        return;
    if (ev == KUBE_WATCH_DELETED) {
        /* Deleted is not "label removed": a Node re-created (a re-registered kubelet, a
         * replaced VM) keeps the config applied until its new object says otherwise, as
         * NVIDIA's config-manager keeps the last label. */
        if (!c->node_gone)
            log_info("Node %s deleted; keeping the per-node config until it is re-created",
                     c->node);
        c->node_gone = true;
        free(c->annotation);
        c->annotation = NULL;
        free(c->annotation_source);
        c->annotation_source = NULL;
        return;
    }
    bool recreated = c->node_gone;
    c->node_gone = false;
    const char *value =
        json_string_value(json_object_get(json_object_get(meta, "labels"), c->label_key));
    const char *ann = json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                        CLUSTER_CONFIG_ANNOTATION));
    const char *ann_source = json_string_value(json_object_get(
        json_object_get(meta, "annotations"), CLUSTER_CONFIG_SOURCE_ANNOTATION));
    free(c->annotation);
    c->annotation = ann ? xstrdup(ann) : NULL;
    free(c->annotation_source);
    c->annotation_source = ann_source ? xstrdup(ann_source) : NULL;
    bool first = !c->label_known;
    c->label_known = true;
    if (!first && streq_ptr(c->label, value) && c->applied_once) {
        /* The same label: nothing to apply; a re-created Node gets its annotations back
         * (reselect finds the config unchanged and only annotates). */
        if (recreated)
            reselect(c);
        return;
    }
    /* Debug: what it changes is the one line at -v 0 (reselect: "Applied per-node
     * config ... (node label K=V)", or why not). */
    if (!first || value)
        log_debug("Node label %s=%s", c->label_key, value ? value : "(absent)");
    free(c->label);
    c->label = value ? xstrdup(value) : NULL;
    if (c->wait_timer) {
        loop_timer_cancel(c->loop, c->wait_timer);
        c->wait_timer = NULL;
    }
    reselect(c);
}

static void on_dir_event(struct loop *l, int fd, uint32_t events, void *userdata)
{
    struct cluster *c = userdata;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool any = false;
    while (read(fd, buf, sizeof(buf)) > 0)
        any = true;
    /* Before the first apply, the first selection is the label's (or the timeout's). */
    if (any && c->applied_once)
        reselect(c);
}

/* The directory and the applied file as stat() sees them now (zeroed when missing). */
static void dir_snapshot(const struct cluster *c, struct stat *dir, struct stat *file)
{
    memset(dir, 0, sizeof(*dir));
    memset(file, 0, sizeof(*file));
    (void)stat(c->config_dir, dir);
    if (c->applied_path && *c->applied_path)
        (void)stat(c->applied_path, file);
}

/* Without inotify: a ConfigMap update (the kubelet swaps the ..data link, which changes
 * the directory) or a file rewritten in place is seen within CLUSTER_DIR_POLL_MS. */
static void on_dir_poll(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster *c = userdata;
    c->dir_poll = loop_timer_add(l, CLUSTER_DIR_POLL_MS, on_dir_poll, c);
    struct stat d, f;
    dir_snapshot(c, &d, &f);
    bool changed = !fs_same_file(&d, &c->dir_st) || !fs_same_file(&f, &c->file_st);
    c->dir_st = d;
    c->file_st = f;
    if (changed && c->applied_once) {
        reselect(c);
        dir_snapshot(c, &c->dir_st, &c->file_st); /* the file applied may be another now */
    }
}

static void on_start_now(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct cluster *c = userdata;
    c->wait_timer = NULL;
    reselect(c);
}

void cluster_config_start(struct cluster *c)
{
    if (!cluster_config_enabled(c))
        return;
    c->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (c->inotify_fd < 0 ||
        inotify_add_watch(c->inotify_fd, c->config_dir,
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE |
                              IN_ATTRIB | IN_ONLYDIR) < 0) {
        log_warning("Watching %s: %s: %s%s; checking it every %us instead", c->config_dir,
                    c->inotify_fd < 0 ? "inotify_init1" : "inotify_add_watch", strerror(errno),
                    errno == EMFILE ? " (fs.inotify.max_user_instances is shared by every "
                                      "process of this user on the node)"
                                    : "",
                    CLUSTER_DIR_POLL_MS / 1000u);
        if (c->inotify_fd >= 0)
            close(c->inotify_fd);
        c->inotify_fd = -1;
        dir_snapshot(c, &c->dir_st, &c->file_st);
        c->dir_poll = loop_timer_add(c->loop, CLUSTER_DIR_POLL_MS, on_dir_poll, c);
    } else {
        loop_add_io(c->loop, c->inotify_fd, EPOLLIN, on_dir_event, c);
    }
    struct kube *k = cluster_kube(c);
    struct error err = { 0 };
    if (k) {
        _cleanup_free_ char *sel = xasprintf("metadata.name=%s", c->node);
        struct kube_watch_options o = { .field_selector = sel, .metadata_only = true };
        c->watch = kube_watch_start_opt(k, "/api/v1/nodes", &o, on_node, c, &err);
        if (!c->watch)
            log_error("Watching node %s: %s; the per-node config is selected without its "
                      "label",
                      c->node, err.msg);
    }
    /* Always from the loop, so serve sees the same order with or without an API. */
    c->wait_timer = loop_timer_add(c->loop, c->watch ? CLUSTER_CONFIG_WAIT_MS : 0,
                                   c->watch ? on_wait_timeout : on_start_now, c);
}

bool cluster_config_enabled(const struct cluster *c)
{
    return c && c->config_on;
}

/* ---- the object ---- */

static const char *const mode_names[] = {
    [CLUSTER_LABELS_OFF] = "off",
    [CLUSTER_LABELS_FILE] = "feature file",
    [CLUSTER_LABELS_NODEFEATURE] = "NodeFeature",
    [CLUSTER_LABELS_NODE_PATCH] = "node labels patch",
};

struct cluster *cluster_new(struct loop *l, const struct config *cfg,
                            const struct cluster_options *o, cluster_apply_fn apply,
                            void *userdata)
{
    const struct config_cluster *k = &cfg->cluster;
    struct cluster *c = xcalloc(1, sizeof(*c));
    c->loop = l;
    c->apply = apply;
    c->userdata = userdata;
    c->inotify_fd = -1;
    c->kube_cfg.kubeconfig = dup_nonempty(k->kubeconfig);
    c->kube_cfg.kube_api_qps = k->kube_api_qps;
    c->kube_cfg.kube_api_burst = k->kube_api_burst;
    /* A name that is no Node's would go into request paths: one line, and every API
     * feature off (they need the Node); the device plugin serves on without them. */
    bool bad_node = k->node_name && *k->node_name && !config_node_name_valid(k->node_name);
    if (bad_node)
        /* The log escapes what it quotes (escape_cntrl); the bound keeps it one short line. */
        log_error("Invalid node name \"%.300s\" (--node-name, NODE_NAME): not a DNS-1123 "
                  "subdomain (lowercase letters, digits, '-' and '.', at most 253); node "
                  "labels via the API, per-node configuration and Events are off",
                  k->node_name);
    c->node = bad_node ? NULL : dup_nonempty(k->node_name);
    c->ns = xstrdup(k->namespace && *k->namespace ? k->namespace : "default");
    c->pod = dup_nonempty(k->pod_name);
    cluster_evcache_init(&c->evcache);

    c->labels_mode = o->labels;
    c->output_file = o->output_file ? xstrdup(o->output_file) : NULL;
    c->keep_output_file = o->keep_output_file;
    bool labels_api = c->labels_mode == CLUSTER_LABELS_NODEFEATURE ||
                      c->labels_mode == CLUSTER_LABELS_NODE_PATCH;
    if (labels_api && !c->node) {
        if (!bad_node)
            log_error("Node labels via the API (%s) need the node name (--node-name, NODE_NAME "
                      "from the downward API); node labels are off",
                      mode_names[c->labels_mode]);
        c->labels_mode = CLUSTER_LABELS_OFF;
    }
    if (k->config_dir && *k->config_dir) {
        if (!cluster_config_on(k)) {
            if (!bad_node)
                log_error("Per-node configuration (--config-dir %s) needs the node name "
                          "(--node-name, NODE_NAME); serving the configuration of the flags, "
                          "environment and --config-file",
                          k->config_dir);
        } else {
            c->config_on = true;
            c->config_dir = xstrdup(k->config_dir);
            c->label_key = xstrdup(k->config_node_label);
            c->config_default = dup_nonempty(k->config_default);
            size_t n = 0;
            for (char **p = k->config_fallback_strategies; p && *p; p++)
                n++;
            c->fallbacks = xcalloc(n + 1, sizeof(char *));
            for (size_t i = 0; i < n; i++)
                c->fallbacks[i] = xstrdup(k->config_fallback_strategies[i]);
        }
    }
    /* Events ride along only when the node name is known: without it (NVIDIA's default
     * deployment) nothing here talks to the API server. */
    c->events_on = k->events && c->node;
    if (c->labels_mode != CLUSTER_LABELS_OFF || c->config_on || c->events_on)
        log_info("Cluster features: node labels %s, per-node config %s, events %s%s%s",
                 mode_names[c->labels_mode], c->config_on ? "on" : "off",
                 c->events_on ? "on" : "off", c->node ? ", node " : "",
                 c->node ? c->node : "");
    return c;
}

void cluster_free(struct cluster *c)
{
    if (!c)
        return;
    cluster_publish_free(c);
    cluster_events_free(c);
    kube_watch_stop(c->watch);
    kube_request_cancel(c->annotate_req);
    kube_free(c->kube);
    if (c->wait_timer)
        loop_timer_cancel(c->loop, c->wait_timer);
    loop_timer_cancel(c->loop, c->dir_poll);
    if (c->inotify_fd >= 0) {
        loop_del_io(c->loop, c->inotify_fd);
        close(c->inotify_fd);
    }
    free(c->kube_cfg.kubeconfig);
    free(c->node);
    free(c->ns);
    free(c->pod);
    free(c->config_dir);
    free(c->label_key);
    free(c->config_default);
    for (char **p = c->fallbacks; p && *p; p++)
        free(*p);
    free(c->fallbacks);
    free(c->label);
    free(c->annotation);
    free(c->annotation_source);
    free(c->applied_path);
    free(c->applied_content);
    free(c->refused_key);
    free(c);
}
