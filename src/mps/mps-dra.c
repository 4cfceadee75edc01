/* The MPS control daemons of DRA claims (mps-dra.h). The file names are the plugin's
 * (src/dra/dra-mps.h, DRA_MPS_*): both sides are one binary of one version, and the
 * integration test dra-mps runs them against each other. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/digest.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/nvsmi.h"
#include "core/sockwatch.h"
#include "core/tool.h"
#include "mps/mps-dra-ns.h"
#include "mps/mps-dra.h"
#include "mps/mps.h"

#define DRIVER_DIR "gpu.nvidia.com"
#define DESIRED "desired.json"
#define RUNNING "running.json"
#define TRIGGER ".changed"
#define READY_MARKER "startup.log"
#define STATE_MAX (64u << 10)
#define IDS_MAX 4096

/* A desired state, as the plugin writes it (dra-mps.c, desired_json). */
struct desired {
    json_t *devices;     /* UUIDs, sorted */
    json_t *limits;      /* UUID -> MiB */
    json_int_t threads;  /* -1: unset */
    bool multi_user;
    bool v3;             /* "protocol": 3, a GPU share daemon's (mps-dra-ns.h) */
};

/* An id we started (or failed to), with the desired state it was started for. */
struct id {
    char *name, *text;
    bool ok;
};

struct mps_dra {
    struct loop *loop;
    char *root; /* <plugins dir>/gpu.nvidia.com/mps */
    struct sockwatch *watch;
    struct loop_timer *retry;
    struct id *ids;
    size_t n_ids;
};

static int parse(const char *text, struct desired *d, json_t **root)
{
    json_t *o = json_loads(text, 0, NULL);
    json_t *devs = json_object_get(o, "devices"), *lim = json_object_get(o, "pinnedDeviceMemoryLimitMiB"),
           *thr = json_object_get(o, "activeThreadPercentage"), *proto = json_object_get(o, "protocol");
    if (!json_is_array(devs) || !json_array_size(devs) || (lim && !json_is_object(lim)) ||
        (thr && !json_is_integer(thr)) ||
        (proto && (!json_is_integer(proto) || (json_integer_value(proto) != 2 && json_integer_value(proto) != 3)))) {
        json_decref(o);
        return -EINVAL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(devs, i, v)
        if (!json_is_string(v) || strchr(json_string_value(v), ',')) {
            json_decref(o);
            return -EINVAL;
        }
    *d = (struct desired){ .devices = devs, .limits = lim, .threads = thr ? json_integer_value(thr) : -1,
                           .multi_user = json_is_true(json_object_get(o, "multiUser")),
                           .v3 = proto && json_integer_value(proto) == 3 };
    *root = o;
    return 0;
}

static char *path_of(const struct mps_dra *m, const char *id, const char *file)
{
    return file ? xasprintf("%s/%s/%s", m->root, id, file) : xasprintf("%s/%s", m->root, id);
}

/* The daemon binds <pipe>/control (and its servers their sockets beside it), and a socket's
 * path must fit sun_path: under a long plugins directory (MicroK8s's is 45 bytes) the pipe
 * directory does not leave room. The daemon is then given a short name for it, a symlink
 * in a directory of ours (root's, 0700, checked not to be someone else's), as NVIDIA's
 * daemon sees its pipe at /driver-root/tmp/nvidia-mps in its own pod. The workloads see
 * the directory itself bind-mounted at /tmp/nvidia-mps. *out: the path to give the daemon
 * (malloc'd). */
#define SHORT_PIPES "/tmp/gpu-device-plugin-mps"
#define PIPE_SOCKET_ROOM sizeof("/control_privileged") /* the longest socket it makes there */
/* v3: a namespace's, "/<server>/<ns>/control" (the plugin's names: "s" and 16 hex) */
#define PIPE_SOCKET_ROOM_V3 sizeof("/" MPS_DRA_SERVER "/s0123456789abcdef/control")
static int pipe_for_daemon(const char *id, const char *pipe, bool v3, char **out, struct error *err)
{
    size_t room = v3 && PIPE_SOCKET_ROOM_V3 > PIPE_SOCKET_ROOM ? PIPE_SOCKET_ROOM_V3 : PIPE_SOCKET_ROOM;
    if (strlen(pipe) + room < sizeof(((struct sockaddr_un *)0)->sun_path)) {
        *out = xstrdup(pipe);
        return 0;
    }
    struct stat st;
    if (mkdir(SHORT_PIPES, 0700) < 0 && errno != EEXIST)
        return error_set(err, -errno, "creating %s: %s", SHORT_PIPES, strerror(errno));
    if (lstat(SHORT_PIPES, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 0077))
        return error_set(err, -EPERM, "%s is not a directory of ours alone (a link, another "
                         "owner, or open to others): not naming MPS pipes there", SHORT_PIPES);
    /* named after the directory itself: two runners (or two plugins directories) never
     * share a name */
    char hex[65];
    digest_sha256_hex(pipe, strlen(pipe), hex);
    _cleanup_free_ char *link = xasprintf(SHORT_PIPES "/%.12s", hex);
    _cleanup_free_ char *tmp = xasprintf(SHORT_PIPES "/.%.12s.tmp", hex);
    (void)unlink(tmp);
    if (symlink(pipe, tmp) < 0 || rename(tmp, link) < 0) {
        int e = errno;
        (void)unlink(tmp);
        return error_set(err, -e, "naming the MPS pipe directory of %s as %s: %s", id, link,
                         strerror(e));
    }
    *out = TAKE_PTR(link);
    return 0;
}

/* The short name of a pipe directory, if it got one, goes with the directory (only a
 * link to it: nothing else of that name is ours). */
static void drop_short_pipe(const char *pipe)
{
    char hex[65], target[PATH_MAX];
    digest_sha256_hex(pipe, strlen(pipe), hex);
    _cleanup_free_ char *link = xasprintf(SHORT_PIPES "/%.12s", hex);
    ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n > 0 && (target[n] = 0, streq(target, pipe)))
        (void)unlink(link);
}

/* The desired devices, comma-separated (parse refused commas in them), into buf. */
static int devices_joined(const char *id, const struct desired *d, char *buf, size_t size,
                          struct error *err)
{
    size_t len = 0, i;
    json_t *v;
    buf[0] = 0;
    json_array_foreach(d->devices, i, v)
        len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%s%s", i ? "," : "",
                                json_string_value(v));
    return len >= size ? error_set(err, -E2BIG, "CUDA_VISIBLE_DEVICES of %s: too long", id) : 0;
}

/* nvidia-cuda-mps-control for id's daemon: started (-d, -M for multiUser, -p 3 for v3),
 * or with command on its stdin; its output in out (NULL: not wanted). */
static int control(const struct mps_dra *m, const char *id, const struct desired *d,
                   bool start, const char *command, char *out, size_t out_len, struct error *err)
{
    _cleanup_free_ char *pipe = path_of(m, id, "pipe"), *log = path_of(m, id, "log");
    char visible[4096];
    int vr = devices_joined(id, d, visible, sizeof(visible), err);
    if (vr < 0)
        return vr;
    const char *path = getenv("PATH");
    _cleanup_free_ char *short_pipe = NULL;
    int pr = pipe_for_daemon(id, pipe, d->v3, &short_pipe, err);
    if (pr < 0)
        return pr;
    _cleanup_free_ char *e0 = xasprintf("CUDA_MPS_PIPE_DIRECTORY=%s", short_pipe);
    _cleanup_free_ char *e1 = xasprintf("CUDA_MPS_LOG_DIRECTORY=%s", log);
    _cleanup_free_ char *e2 = xasprintf("CUDA_VISIBLE_DEVICES=%s", visible);
    _cleanup_free_ char *e3 = xasprintf("PATH=%s", path ? path : "/usr/bin:/bin");
    char *envp[] = { e0, e1, e2, e3, NULL };
    char *argv[5] = { "nvidia-cuda-mps-control" };
    size_t n = 1;
    if (start)
        argv[n++] = "-d";
    if (start && d->multi_user)
        argv[n++] = "-M";
    if (start && d->v3) {
        argv[n++] = "-p";
        argv[n++] = "3";
    }
    char buf[TOOL_OUTPUT_MAX];
    int r = tool_run(argv, envp, command, MPS_TOOL_TIMEOUT_MS, out ? out : buf,
                     out ? out_len : sizeof(buf), err);
    if (r < 0 && command)
        return error_prefix(err, "sending \"%s\" to the MPS daemon %s", command, id);
    return r;
}

/* Each full GPU (MIG UUIDs are not touched, as NVIDIA's). */
static int compute_mode(const struct desired *d, const char *mode, struct error *err)
{
    size_t i;
    json_t *v;
    json_array_foreach(d->devices, i, v) {
        const char *uuid = json_string_value(v);
        int r;
        if (startswith(uuid, "GPU-") &&
            (r = nvsmi_set_compute_mode(NULL, NULL, uuid, mode, MPS_TOOL_TIMEOUT_MS, err)) < 0)
            return r;
    }
    return 0;
}

/* NVIDIA's size: half of MemTotal, or 65536k when it cannot be read. */
static void shm_size(char *out, size_t len)
{
    snprintf(out, len, "size=65536k");
    FILE *f = fopen("/proc/meminfo", "re");
    char line[256];
    unsigned long long kib;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
            snprintf(out, len, "size=%lluk", kib / 2);
            break;
        }
    if (f)
        fclose(f);
}

static int mount_shm(const char *dir, const char *shm, struct error *err)
{
    struct stat a, b;
    if (stat(dir, &a) == 0 && stat(shm, &b) == 0 && a.st_dev != b.st_dev)
        return 0; /* mounted by our earlier run: its clients' files are there */
    char opts[64];
    shm_size(opts, sizeof(opts));
    if (mount("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME, opts) < 0)
        return error_set(err, -errno, "error mounting %s as tmpfs: %s", shm, strerror(errno));
    return 0;
}

static int write_text(const char *path, const char *text, struct error *err)
{
    int r = write_file_atomic(path, text, strlen(text), 0644, false);
    return r < 0 ? error_set(err, r, "writing %s: %s", path, strerror(-r)) : 0;
}

/* A control command of a running daemon, for mps-dra-ns.c. */
struct send_ctx {
    const struct mps_dra *m;
    const char *id;
    const struct desired *d;
};

static int send_command(void *ctx, const char *command, char *out, size_t out_len, struct error *err)
{
    const struct send_ctx *c = ctx;
    return control(c->m, c->id, c->d, false, command, out, out_len, err);
}

static int start_daemon(const struct mps_dra *m, const char *id, const char *text,
                        const struct desired *d, struct error *err)
{
    _cleanup_free_ char *dir = path_of(m, id, NULL), *running = path_of(m, id, RUNNING);
    _cleanup_free_ char *shm = path_of(m, id, "shm");
    _cleanup_free_ char *ready = xasprintf("%s/log/" READY_MARKER, dir);
    int r = write_text(running, text, err);
    if (r < 0)
        return r;
    static const char *const dirs[] = { "pipe", "log", "shm" };
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        _cleanup_free_ char *sub = path_of(m, id, dirs[i]);
        if ((r = mkdir_p(sub, 0755)) < 0)
            return error_set(err, r, "error creating directory %s: %s", sub, strerror(-r));
    }
    if (unlink(ready) < 0 && errno != ENOENT)
        return error_set(err, -errno, "removing %s: %s", ready, strerror(errno));
    if ((r = mount_shm(dir, shm, err)) < 0 || (r = compute_mode(d, "EXCLUSIVE_PROCESS", err)) < 0)
        return r;
    log_info("Starting MPS control daemon %s (%zu devices%s)", id, json_array_size(d->devices),
             d->multi_user ? ", multi-user" : "");
    if ((r = control(m, id, d, true, NULL, NULL, 0, err)) < 0)
        return r;
    if (d->v3) {
        /* its namespaces are made once it is ready (mps_dra_ns_reconcile) */
        mps_dra_ns_forget(dir);
        struct send_ctx c = { m, id, d };
        char devices[4096];
        if ((r = devices_joined(id, d, devices, sizeof(devices), err)) < 0 ||
            (r = mps_dra_ns_server(devices, send_command, &c, err)) < 0)
            return r;
    }
    if (d->threads >= 0) {
        _cleanup_free_ char *cmd = xasprintf("set_default_active_thread_percentage %lld",
                                             (long long)d->threads);
        if ((r = control(m, id, d, false, cmd, NULL, 0, err)) < 0)
            return r;
    }
    size_t i;
    json_t *v;
    json_array_foreach(d->devices, i, v) {
        json_t *mib = json_object_get(d->limits, json_string_value(v));
        if (!json_is_integer(mib))
            continue;
        _cleanup_free_ char *cmd = xasprintf("set_default_device_pinned_mem_limit %s %lldM",
                                             json_string_value(v), (long long)json_integer_value(mib));
        if ((r = control(m, id, d, false, cmd, NULL, 0, err)) < 0)
            return r;
    }
    return write_text(ready, "startup complete\n", err);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* The daemon told to quit exits on its own time, unlinking its sockets and writing its
 * last line to log/control.log meanwhile: a removal that meets a file made after it passed
 * ("Directory not empty") is tried again for a moment. Left for the 30 s retry, the plugin's
 * Unprepare waiting for the directory to go timed out (dra-shares-race). 0 or -errno. */
#define REMOVE_TRIES 50
#define REMOVE_WAIT_US 10000
static int remove_tree(const char *dir)
{
    for (int i = 0;; i++) {
        if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 || errno == ENOENT)
            return 0;
        if ((errno != ENOTEMPTY && errno != EEXIST) || i == REMOVE_TRIES)
            return -errno;
        usleep(REMOVE_WAIT_US);
    }
}

/* The daemon of id told to quit; with teardown also what its start changed, and its
 * directory removed (its desired state is gone). */
static int stop_daemon(const struct mps_dra *m, const char *id, bool teardown, struct error *err)
{
    _cleanup_free_ char *running = path_of(m, id, RUNNING), *text = NULL;
    size_t len;
    struct desired d;
    json_t *root = NULL;
    if (read_file_bounded_flags(running, O_NOFOLLOW, STATE_MAX, &text, &len, NULL) < 0 ||
        parse(text, &d, &root) < 0) {
        if (!teardown)
            return 0;
        d = (struct desired){ .devices = NULL }; /* never started: only the directory */
    }
    struct error e = { 0 };
    if (root && control(m, id, &d, false, "quit", NULL, 0, &e) < 0)
        log_warning("MPS control daemon %s: %s, ignoring (it may have ended already)", id, e.msg);
    int r = 0;
    if (teardown) {
        _cleanup_free_ char *dir = path_of(m, id, NULL), *shm = path_of(m, id, "shm"),
                            *pipe = path_of(m, id, "pipe");
        if (root)
            r = compute_mode(&d, "DEFAULT", err);
        if (r >= 0 && umount2(shm, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
            r = error_set(err, -errno, "error unmounting %s: %s", shm, strerror(errno));
        int rr = r >= 0 ? remove_tree(dir) : 0;
        if (rr < 0)
            r = error_set(err, rr, "removing %s: %s", dir, strerror(-rr));
        if (r >= 0) {
            drop_short_pipe(pipe);
            log_info("Stopped MPS control daemon %s (its claim was unprepared)", id);
        }
    }
    json_decref(root);
    return r;
}

static struct id *find(struct mps_dra *m, const char *name)
{
    for (size_t i = 0; i < m->n_ids; i++)
        if (streq(m->ids[i].name, name))
            return &m->ids[i];
    return NULL;
}

static void forget(struct mps_dra *m, struct id *x)
{
    free(x->name);
    free(x->text);
    *x = m->ids[--m->n_ids];
}

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata);

/* A v3 daemon's namespaces as its ns/ desires (mps-dra-ns.h). */
static int namespaces(const struct mps_dra *m, const char *id, const struct desired *d)
{
    _cleanup_free_ char *dir = path_of(m, id, NULL);
    struct send_ctx c = { m, id, d };
    return mps_dra_ns_reconcile(dir, id, send_command, &c);
}

/* One id as the disk says: 0, or -errno when something failed (said here). */
static int reconcile_one(struct mps_dra *m, const char *name)
{
    _cleanup_free_ char *desired = path_of(m, name, DESIRED), *running = path_of(m, name, RUNNING);
    _cleanup_free_ char *text = NULL;
    size_t len;
    struct error err = { 0 };
    struct id *x = find(m, name);
    struct stat st;
    int r = read_file_bounded_flags(desired, O_NOFOLLOW, STATE_MAX, &text, &len, NULL);
    if (r == -ENOENT) {
        /* not ours unless we took it: the plugin removes what we never took */
        if (!x && lstat(running, &st) < 0)
            return 0;
        if ((r = stop_daemon(m, name, true, &err)) < 0) {
            log_error("Stopping MPS control daemon %s: %s", name, err.msg);
            return r;
        }
        if (x)
            forget(m, x);
        return 0;
    }
    struct desired d;
    json_t *root = NULL;
    if (r < 0 || parse(text, &d, &root) < 0) {
        log_error("MPS control daemon %s: %s cannot be used: %s", name, desired,
                  r < 0 ? strerror(-r) : "not a desired state");
        return r < 0 ? r : -EINVAL;
    }
    if (x && x->ok && streq(x->text, text)) {
        r = d.v3 ? namespaces(m, name, &d) : 0;
        json_decref(root);
        return r;
    }
    /* a daemon of an earlier try, or of our earlier run, goes first */
    if (x || lstat(running, &st) == 0)
        (void)stop_daemon(m, name, false, &err);
    if (!x) {
        if (m->n_ids == IDS_MAX) {
            json_decref(root);
            log_error("MPS: more than %d control daemons, not starting %s", IDS_MAX, name);
            return -E2BIG;
        }
        m->ids = xrealloc(m->ids, (m->n_ids + 1) * sizeof(*m->ids));
        x = &m->ids[m->n_ids++];
        *x = (struct id){ .name = xstrdup(name) };
    }
    free(x->text);
    x->text = xstrdup(text);
    r = start_daemon(m, name, text, &d, &err);
    x->ok = r >= 0;
    if (r < 0)
        log_error("Failed to start MPS control daemon %s: %s", name, err.msg);
    else if (d.v3)
        r = namespaces(m, name, &d);
    json_decref(root);
    return r;
}

static void reconcile(struct mps_dra *m)
{
    DIR *dir = opendir(m->root);
    bool failed = false;
    for (struct dirent *e; dir && (e = readdir(dir));)
        if (e->d_name[0] != '.' && strlen(e->d_name) <= 160 && reconcile_one(m, e->d_name) < 0)
            failed = true;
    if (dir)
        closedir(dir);
    /* ids whose directory went: someone else removed it, nothing of ours is left there */
    for (size_t i = 0; i < m->n_ids;) {
        _cleanup_free_ char *p = path_of(m, m->ids[i].name, NULL);
        struct stat st;
        if (lstat(p, &st) < 0 && errno == ENOENT)
            forget(m, &m->ids[i]);
        else
            i++;
    }
    if (failed && !m->retry) {
        log_info("Retrying the MPS control daemons that failed in %us...", MPS_DRA_RETRY_MS / 1000u);
        m->retry = loop_timer_add(m->loop, MPS_DRA_RETRY_MS, on_retry, m);
    }
}

static void on_retry(struct loop *l, struct loop_timer *t, void *userdata)
{
    struct mps_dra *m = userdata;
    m->retry = NULL;
    reconcile(m);
}

static void on_change(void *userdata)
{
    reconcile(userdata);
}

int mps_dra_start(struct loop *l, const char *plugins_dir, struct mps_dra **out, struct error *err)
{
    struct mps_dra *m = xcalloc(1, sizeof(*m));
    m->loop = l;
    m->root = xasprintf("%s/" DRIVER_DIR "/mps", plugins_dir);
    int r = mkdir_p(m->root, 0755);
    if (r < 0) {
        error_set(err, r, "creating %s: %s", m->root, strerror(-r));
        mps_dra_stop(m);
        return r;
    }
    _cleanup_free_ char *trigger = xasprintf("%s/" TRIGGER, m->root);
    if ((r = sockwatch_new_flags(l, trigger, SOCKWATCH_ANY_CHANGE, on_change, m, &m->watch, err)) < 0) {
        mps_dra_stop(m);
        return r;
    }
    log_info("DRA: running the MPS control daemons of claims as desired in %s", m->root);
    reconcile(m);
    *out = m;
    return 0;
}

void mps_dra_stop(struct mps_dra *m)
{
    if (!m)
        return;
    sockwatch_free(m->watch);
    loop_timer_cancel(m->loop, m->retry);
    for (size_t i = 0; i < m->n_ids; i++) {
        struct error err = { 0 };
        if (m->ids[i].ok && stop_daemon(m, m->ids[i].name, false, &err) < 0)
            log_error("Stopping MPS control daemon %s: %s", m->ids[i].name, err.msg);
        free(m->ids[i].name);
        free(m->ids[i].text);
    }
    free(m->ids);
    free(m->root);
    free(m);
}
