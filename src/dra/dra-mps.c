/* MPS sharing of DRA claims, the plugin's half (dra-mps.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/backoff.h"
#include "core/digest.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/loop.h"
#include "dra/dra-mps.h"

#define PIPE_IN_CONTAINER "/tmp/nvidia-mps"
#define DESIRED_MAX (64u << 10)


void dra_mps_id(const char *uid, const char (*uuids)[DRA_MPS_KEY_MAX], size_t n,
                char out[DRA_MPS_ID_MAX])
{
    char joined[DRA_MPS_GROUP_MAX * DRA_MPS_KEY_MAX] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? "," : "", uuids[i]);
    unsigned char h[32];
    digest_sha256(joined, len, h);
    snprintf(out, DRA_MPS_ID_MAX, "%s-%02x%02x%x", uid, h[0], h[1], h[2] >> 4);
}

bool dra_mps_id_of(const char *id, const char *uid)
{
    size_t n = strlen(uid);
    if (strncmp(id, uid, n) != 0 || id[n] != '-' || strlen(id + n + 1) != 5)
        return false;
    for (const char *p = id + n + 1; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* ---- planning a claim's groups ----------------------------------------------------- */

static int cmp_uuid(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The UUID of a device of the set (NULL: a placement, or not a device of it). */
static const char *device_uuid(const struct inventory *inv, const struct dra_device_set *set,
                               const char *name, const struct inv_gpu **gpu)
{
    const struct dra_device *d = dra_devices_find(set, name);
    if (!d)
        return NULL;
    *gpu = &inv->gpus[d->gpu];
    return dra_device_uuid(inv, d);
}

/* Go's strconv.Atoi over a key, then the index's range (NVIDIA's messages). */
static int check_key(const struct dra_mps_config *m, const char *key, struct error *err)
{
    for (unsigned i = 0; i < m->n_group; i++)
        if (streq(m->group[i], key))
            return 0;
    char *end;
    errno = 0;
    long long idx = strtoll(key, &end, 10);
    if (!*key || *end || errno || key[0] == ' ' || key[0] == '\t' || key[0] == '\n')
        return error_set(err, -EINVAL, "error transforming DefaultPerDevicePinnedMemoryLimit "
                         "into string: invalid device: unable to parse key as an integer: %s", key);
    if (idx < 0 || idx >= (long long)m->n_group)
        return error_set(err, -EINVAL, "error transforming DefaultPerDevicePinnedMemoryLimit "
                         "into string: invalid device: invalid device index: %lld", idx);
    return 0;
}

/* multiUser needs Volta's compute capability on every full GPU (NVIDIA's
 * ensureCapability: the failures joined as Go's errors.Join joins them). */
static int check_multi_user(const struct dra_mps_config *m, const struct inventory *inv,
                            struct error *err)
{
    char msg[sizeof(err->msg)] = "";
    size_t len = 0;
    for (unsigned i = 0; i < m->n_group; i++) {
        const struct inv_gpu *g = NULL;
        for (size_t k = 0; k < inv->n_gpus && !g; k++)
            if (streq(inv->gpus[k].uuid, m->group[i]))
                g = &inv->gpus[k];
        if (!g) /* a MIG device: not checked, as NVIDIA checks only full GPUs */
            continue;
        if (g->cc_major >= 7)
            continue;
        if (g->cc_major <= 0)
            len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%scould not check gpu %s: "
                                    "missing gpu info (required >= \"7.0\")", len ? "\n" : "", g->uuid);
        else
            len += (size_t)snprintf(msg + len, sizeof(msg) - len, "%s%s has insufficient "
                                    "cudaComputeCapability \"%d.%d\", wanted >= \"7.0\"",
                                    len ? "\n" : "", g->uuid, g->cc_major, g->cc_minor);
        if (len >= sizeof(msg))
            len = sizeof(msg) - 1;
    }
    if (!len)
        return 0;
    return error_set(err, -EINVAL, "multiuser mode was requested but is not supported: %s", msg);
}

int dra_mps_plan(const char *uid, struct dra_ckpt_device *devs, size_t n,
                 const struct inventory *inv, const struct dra_device_set *set, struct error *err)
{
    for (size_t i = 0; i < n; i++) {
        struct dra_config *lead = &devs[i].config;
        const struct inv_gpu *gpu;
        if (lead->sharing != DRA_SHARING_MPS || lead->mps.id[0] ||
            !device_uuid(inv, set, devs[i].device, &gpu))
            continue;
        struct dra_mps_config m = lead->mps;
        m.n_group = 0;
        for (size_t j = i; j < n; j++) {
            const struct dra_config *c = &devs[j].config;
            const char *u;
            if (c->sharing != DRA_SHARING_MPS || c->kind != lead->kind ||
                !dra_mps_config_same(&c->mps, &lead->mps) ||
                !(u = device_uuid(inv, set, devs[j].device, &gpu)))
                continue;
            bool seen = false; /* an admin-access result may name a device twice */
            for (unsigned k = 0; k < m.n_group && !seen; k++)
                seen = streq(m.group[k], u);
            if (seen)
                continue;
            if (m.n_group == DRA_MPS_GROUP_MAX || strlen(u) >= DRA_MPS_KEY_MAX)
                return error_set(err, -E2BIG, "an MPS control daemon serves at most %d devices "
                                 "here (this plugin's bound)", DRA_MPS_GROUP_MAX);
            snprintf(m.group[m.n_group++], DRA_MPS_KEY_MAX, "%s", u);
        }
        qsort(m.group, m.n_group, sizeof(m.group[0]), cmp_uuid);
        dra_mps_id(uid, (const char (*)[DRA_MPS_KEY_MAX])m.group, m.n_group, m.id);
        int r = 0;
        for (unsigned k = 0; k < m.n_limits && r >= 0; k++)
            r = check_key(&m, m.limits[k].key, err);
        if (r >= 0 && m.multi_user)
            r = check_multi_user(&m, inv, err);
        if (r < 0)
            return r;
        for (size_t j = i; j < n; j++) {
            struct dra_config *c = &devs[j].config;
            if (c->sharing == DRA_SHARING_MPS && c->kind == lead->kind && !c->mps.id[0] &&
                dra_mps_config_same(&c->mps, &m) && device_uuid(inv, set, devs[j].device, &gpu))
                c->mps = m;
        }
    }
    return 0;
}

/* ---- the container's edits ---------------------------------------------------------- */

static json_t *bind_mount(const char *host, const char *ctr)
{
    return json_pack("{s:s, s:s, s:[s,s,s,s]}", "hostPath", host, "containerPath", ctr, "options",
                     "rw", "nosuid", "nodev", "bind");
}

static json_t *array_at(json_t *obj, const char *key)
{
    json_t *a = json_object_get(obj, key);
    if (!json_is_array(a)) {
        a = json_array();
        json_object_set_new(obj, key, a);
    }
    return a;
}

void dra_mps_cdi_edits(json_t *spec, const char *uid, const struct dra_ckpt_device *devs,
                       size_t n, const char *plugin_dir)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(spec, "devices"), i, d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        const struct dra_config *c = NULL;
        /* a device's CDI name, a share's with its shareID (dra_shares_spec names them
         * first): two shares of one device, each with its own namespace, are two entries */
        for (size_t k = 0; k < n && !c && name; k++) {
            _cleanup_free_ char *want = devs[k].share_id
                                            ? xasprintf("%s-%s-%s", uid, devs[k].device, devs[k].share_id)
                                            : xasprintf("%s-%s", uid, devs[k].device);
            if (streq(name, want) && devs[k].config.sharing == DRA_SHARING_MPS && devs[k].config.mps.id[0])
                c = &devs[k].config;
        }
        if (!c)
            continue;
        json_t *edits = json_object_get(d, "containerEdits");
        json_array_append_new(array_at(edits, "env"),
                              json_string("CUDA_MPS_PIPE_DIRECTORY=" PIPE_IN_CONTAINER));
        _cleanup_free_ char *shm = xasprintf("%s/" DRA_MPS_SUBDIR "/%s/shm", plugin_dir, c->mps.id);
        /* a share's v3 namespace: its directory alone, so the container reaches no other
         * share's namespace (nor the server's default one, which has no limits) */
        _cleanup_free_ char *pipe = c->mps.ns[0]
            ? xasprintf("%s/" DRA_MPS_SUBDIR "/%s/pipe/" DRA_MPS_SERVER "/%s", plugin_dir, c->mps.id,
                        c->mps.ns)
            : xasprintf("%s/" DRA_MPS_SUBDIR "/%s/pipe", plugin_dir, c->mps.id);
        json_t *mounts = array_at(edits, "mounts");
        json_array_append_new(mounts, bind_mount(shm, "/dev/shm"));
        json_array_append_new(mounts, bind_mount(pipe, PIPE_IN_CONTAINER));
    }
}

/* ---- desired states ------------------------------------------------------------------ */

/* The runner rescans on any change of this one file (its watch, core/sockwatch). */
static int tell_runner(const char *plugin_dir, const char *id, struct error *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" DRA_MPS_SUBDIR "/" DRA_MPS_TRIGGER, plugin_dir);
    _cleanup_free_ char *line = xasprintf("%s\n", id);
    int r = write_file_atomic(path, line, strlen(line), 0644, false);
    return r < 0 ? error_set(err, r, "writing %s: %s", path, strerror(-r)) : 0;
}

static json_t *desired_json(const struct dra_mps_config *m)
{
    json_t *devs = json_array(), *limits = json_object();
    for (unsigned i = 0; i < m->n_group; i++) {
        json_array_append_new(devs, json_string(m->group[i]));
        int64_t mib = m->pinned_mib;
        /* a key by UUID or by index into the sorted UUIDs overrides the default */
        for (unsigned k = 0; k < m->n_limits; k++) {
            const char *key = m->limits[k].key;
            if (streq(key, m->group[i]) || (strtoll(key, NULL, 10) == (long long)i &&
                                           key[strspn(key, "+-0123456789")] == '\0' && *key))
                mib = m->limits[k].mib;
        }
        if (mib > 0)
            json_object_set_new(limits, m->group[i], json_integer(mib));
    }
    json_t *o = json_pack("{s:i, s:s, s:o, s:o, s:b}", "version", 1, "id", m->id, "devices", devs,
                          "pinnedDeviceMemoryLimitMiB", limits, "multiUser", m->multi_user);
    if (m->thread_pct >= 0)
        json_object_set_new(o, "activeThreadPercentage", json_integer(m->thread_pct));
    /* a share's: the daemon runs MPS v3 with one server its namespaces live in (the same
     * for every share of the GPU, so a later share's Prepare leaves the daemon be) */
    if (m->ns[0])
        json_object_set_new(o, "protocol", json_integer(3));
    return o;
}

/* text at path (in dir), and the runner told; nothing when it is there already (a retried
 * Prepare finds it: the daemon, or the namespace, is the one it asked for). */
static int write_desired(const char *plugin_dir, const char *id, const char *dir, const char *path,
                         const char *text, struct error *err)
{
    _cleanup_free_ char *old = NULL;
    size_t len;
    if (read_file_bounded_flags(path, O_NOFOLLOW, DESIRED_MAX, &old, &len, NULL) == 0 &&
        streq(old, text))
        return 0;
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return error_set(err, r, "creating %s: %s", dir, strerror(-r));
    if ((r = write_file_atomic(path, text, strlen(text), 0644, false)) < 0)
        return error_set(err, r, "writing %s: %s", path, strerror(-r));
    return tell_runner(plugin_dir, id, err);
}

int dra_mps_desire(const char *plugin_dir, const struct dra_mps_config *m, struct error *err)
{
    _cleanup_free_ char *dir = xasprintf("%s/" DRA_MPS_SUBDIR "/%s", plugin_dir, m->id);
    _cleanup_free_ char *path = xasprintf("%s/" DRA_MPS_DESIRED, dir);
    json_t *o = desired_json(m);
    _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return write_desired(plugin_dir, m->id, dir, path, text, err);
}

/* The namespace files of a daemon directory the runner never took: only ours (*.json)
 * can be there, the runner's come once it has. */
static void drop_ns_files(const char *dir)
{
    _cleanup_free_ char *nsdir = xasprintf("%s/" DRA_MPS_NS_DIR, dir);
    DIR *d = opendir(nsdir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.')
            (void)unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
    (void)rmdir(nsdir);
}

static char *ns_path(const char *plugin_dir, const char *id, const char *ns, const char *suffix)
{
    return xasprintf("%s/" DRA_MPS_SUBDIR "/%s/" DRA_MPS_NS_DIR "/%s%s", plugin_dir, id, ns, suffix);
}

int dra_mps_ns_desire(const char *plugin_dir, const struct dra_mps_config *m, struct error *err)
{
    _cleanup_free_ char *dir = xasprintf("%s/" DRA_MPS_SUBDIR "/%s/" DRA_MPS_NS_DIR, plugin_dir, m->id);
    _cleanup_free_ char *path = ns_path(plugin_dir, m->id, m->ns, DRA_MPS_NS_DESIRED);
    _cleanup_free_ char *text = xasprintf("{\"activeThreadPercentage\":%d,\"pinnedMemoryLimitMiB\":%lld}",
                                          m->ns_pct, (long long)m->ns_mib);
    return write_desired(plugin_dir, m->id, dir, path, text, err);
}

int dra_mps_ns_undesire(const char *plugin_dir, const char *id, const char *ns, struct error *err)
{
    _cleanup_free_ char *path = ns_path(plugin_dir, id, ns, DRA_MPS_NS_DESIRED);
    _cleanup_free_ char *made = ns_path(plugin_dir, id, ns, DRA_MPS_NS_READY);
    struct stat st;
    if (unlink(path) < 0 && errno != ENOENT)
        return error_set(err, -errno, "removing %s: %s", path, strerror(errno));
    if (lstat(made, &st) < 0 && errno == ENOENT)
        return 0; /* never created: nothing for the runner to delete */
    int r = tell_runner(plugin_dir, id, err);
    return r < 0 ? r : 1;
}

int dra_mps_undesire(const char *plugin_dir, const char *id, struct error *err)
{
    _cleanup_free_ char *dir = xasprintf("%s/" DRA_MPS_SUBDIR "/%s", plugin_dir, id);
    _cleanup_free_ char *path = xasprintf("%s/" DRA_MPS_DESIRED, dir);
    _cleanup_free_ char *running = xasprintf("%s/" DRA_MPS_RUNNING, dir);
    struct stat st;
    if (lstat(dir, &st) < 0 && errno == ENOENT)
        return 0; /* never desired, or stopped already: NVIDIA's idempotent unprepare */
    if (unlink(path) < 0 && errno != ENOENT)
        return error_set(err, -errno, "removing %s: %s", path, strerror(errno));
    /* Not taken by the runner (none runs, or not yet): ours to remove, with the namespaces
     * desired in it. rmdir fails when the runner took it meanwhile (running.json, or its
     * temporary file, is there). */
    int owned = lstat(running, &st) == 0;
    if (!owned)
        drop_ns_files(dir);
    owned = owned || (rmdir(dir) < 0 && errno != ENOENT);
    int r = tell_runner(plugin_dir, id, err);
    return r < 0 ? r : owned;
}

/* ---- waiting ------------------------------------------------------------------------- */

struct dra_mps_wait {
    struct loop *loop;
    struct loop_timer *timer;
    char *path, *id, *failed; /* failed: the runner's reason a namespace was not made */
    bool ready, ns;
    uint64_t deadline_ms;
    struct backoff backoff;
    dra_mps_wait_fn done;
    void *userdata;
};

static bool reached(const struct dra_mps_wait *w)
{
    struct stat st;
    bool there = lstat(w->path, &st) == 0;
    return w->ready ? there && S_ISREG(st.st_mode) : !there && errno == ENOENT;
}

static void wait_free(struct dra_mps_wait *w)
{
    free(w->path);
    free(w->id);
    free(w->failed);
    free(w);
}

static void on_check(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct dra_mps_wait *w = userdata;
    w->timer = NULL;
    struct error err = { 0 };
    int r = 0;
    _cleanup_free_ char *why = NULL;
    size_t len;
    if (w->failed && !reached(w) &&
        read_file_bounded_flags(w->failed, O_NOFOLLOW, DESIRED_MAX, &why, &len, NULL) == 0) {
        r = error_set(&err, -EIO, "%s", why);
    } else if (!reached(w)) {
        uint64_t now = loop_now_ms();
        if (now < w->deadline_ms) {
            uint64_t delay = backoff_next(&w->backoff);
            w->timer = loop_timer_add(l, delay < w->deadline_ms - now ? delay : w->deadline_ms - now,
                                      on_check, w);
            return;
        }
        r = w->ready && w->ns ? error_set(&err, -EINPROGRESS, DRA_MPS_NOT_READY " (namespace %s)",
                                          w->id)
            : w->ready ? error_set(&err, -EINPROGRESS, DRA_MPS_NOT_READY)
            : w->ns ? error_set(&err, -ETIMEDOUT, "the MPS namespace of %s was not deleted within "
                                "%u s (mps-control-daemon removes %s when it has): is the "
                                "mps-control-daemon DaemonSet running on this node with --dra? try "
                                "again", w->id, (unsigned)(DRA_MPS_STOP_TIMEOUT_MS / 1000), w->path)
                     : error_set(&err, -ETIMEDOUT, "the MPS control daemon %s was not stopped "
                                 "within %u s (mps-control-daemon removes %s when it has): is "
                                 "the mps-control-daemon DaemonSet running on this node with "
                                 "--dra? try again", w->id,
                                 (unsigned)(DRA_MPS_STOP_TIMEOUT_MS / 1000), w->path);
    }
    w->done(w->userdata, r, &err);
    wait_free(w);
}

int dra_mps_wait(struct loop *l, const char *plugin_dir, const char *id, const char *ns,
                 bool ready, unsigned timeout_ms, dra_mps_wait_fn done, void *userdata,
                 struct dra_mps_wait **out)
{
    struct dra_mps_wait *w = xcalloc(1, sizeof(*w));
    *w = (struct dra_mps_wait){ .loop = l, .ready = ready, .done = done, .userdata = userdata,
                                .deadline_ms = loop_now_ms() + timeout_ms,
                                .backoff = BACKOFF_INIT(20, 1000, 0, false) };
    if (ns) {
        w->ns = true;
        w->id = xasprintf("%s (namespace %s)", id, ns);
        w->path = ns_path(plugin_dir, id, ns, DRA_MPS_NS_READY);
        w->failed = ready ? ns_path(plugin_dir, id, ns, DRA_MPS_NS_FAILED) : NULL;
    } else {
        w->id = xstrdup(id);
        w->path = ready ? xasprintf("%s/" DRA_MPS_SUBDIR "/%s/" DRA_MPS_READY_MARKER, plugin_dir, id)
                        : xasprintf("%s/" DRA_MPS_SUBDIR "/%s", plugin_dir, id);
    }
    if (reached(w)) {
        wait_free(w);
        return 0;
    }
    w->timer = loop_timer_add(l, backoff_next(&w->backoff), on_check, w);
    *out = w;
    return 1;
}

void dra_mps_wait_cancel(struct dra_mps_wait *w)
{
    if (!w)
        return;
    loop_timer_cancel(w->loop, w->timer);
    wait_free(w);
}

/* ---- the start-up sweep -------------------------------------------------------------- */

/* Whether the checkpoint holds a share with namespace ns of daemon id. */
static bool ns_recorded(const struct dra_checkpoint *ck, const char *id, const char *ns)
{
    for (size_t i = 0; i < ck->n_claims; i++)
        for (size_t j = 0; j < ck->claims[i].n_devices; j++) {
            const struct dra_mps_config *m = &ck->claims[i].devices[j].config.mps;
            if (ck->claims[i].devices[j].config.sharing == DRA_SHARING_MPS && streq(m->id, id) &&
                streq(m->ns, ns))
                return true;
        }
    return false;
}

/* The namespaces desired in daemon id for shares the checkpoint does not hold (unprepared
 * while the plugin was down, or a Prepare that died before its record): removed, so the
 * runner deletes them. The number removed. */
static int sweep_ns(const char *plugin_dir, const char *id, const struct dra_checkpoint *ck)
{
    _cleanup_free_ char *dir = xasprintf("%s/" DRA_MPS_SUBDIR "/%s/" DRA_MPS_NS_DIR, plugin_dir, id);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name), sl = strlen(DRA_MPS_NS_DESIRED);
        if (e->d_name[0] == '.' || len <= sl || len - sl >= DRA_MPS_NS_MAX ||
            !streq(e->d_name + len - sl, DRA_MPS_NS_DESIRED))
            continue;
        char ns[DRA_MPS_NS_MAX];
        snprintf(ns, sizeof(ns), "%.*s", (int)(len - sl), e->d_name);
        if (ns_recorded(ck, id, ns))
            continue;
        struct error err = { 0 };
        if (dra_mps_ns_undesire(plugin_dir, id, ns, &err) < 0)
            log_warning("MPS: removing namespace %s of %s, whose share is not prepared: %s, "
                        "ignoring", ns, id, err.msg);
        else {
            log_info("MPS: the share of namespace %s of control daemon %s is not prepared: its "
                     "desired state removed", ns, id);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

int dra_mps_sweep(const char *plugin_dir, const struct dra_checkpoint *ck)
{
    _cleanup_free_ char *root = xasprintf("%s/" DRA_MPS_SUBDIR, plugin_dir);
    DIR *d = opendir(root);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        /* a GPU share daemon's directory: "share-" and 16 hex (dra-shares.h) */
        if (strncmp(e->d_name, "share-", 6) == 0 && len == 22) {
            n += sweep_ns(plugin_dir, e->d_name, ck);
            continue;
        }
        if (e->d_name[0] == '.' || len <= 6 || len - 6 > DRA_CLAIM_UID_MAX)
            continue;
        char uid[DRA_CLAIM_UID_MAX + 1];
        memcpy(uid, e->d_name, len - 6);
        uid[len - 6] = '\0';
        if (!dra_mps_id_of(e->d_name, uid) || dra_checkpoint_find(ck, uid))
            continue;
        struct error err = { 0 };
        int r = dra_mps_undesire(plugin_dir, e->d_name, &err);
        if (r < 0)
            log_warning("MPS: removing the desired state of %s, whose claim is not prepared: %s, "
                        "ignoring", e->d_name, err.msg);
        else {
            log_info("MPS: the claim of control daemon %s is not prepared (unprepared while the "
                     "plugin was down): its desired state removed", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}
