/* MPS v3 namespaces of a GPU share daemon (mps-dra-ns.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/log.h"
#include "mps/mps-dra-ns.h"

/* The plugin's names (src/dra/dra-mps.h, DRA_MPS_NS_*): one binary, one version. */
#define NS_DIR "ns"
#define DESIRED ".json"
#define READY ".ready"
#define FAILED ".failed"
#define NS_NAME_MAX 64
#define TEXT_MAX 4096u

int mps_dra_ns_server(const char *devices, mps_dra_send_fn send, void *ctx, struct error *err)
{
    char out[1024];
    _cleanup_free_ char *create = xasprintf("server create " MPS_DRA_SERVER " --allowed-devices=%s", devices);
    int r = send(ctx, create, out, sizeof(out), err);
    if (r < 0)
        return r;
    /* made is not serving: a server that cannot open its device leaves the list */
    if ((r = send(ctx, "server list " MPS_DRA_SERVER " --format=csv,noheader", out, sizeof(out), err)) < 0)
        return r;
    if (strncmp(out, MPS_DRA_SERVER ",", strlen(MPS_DRA_SERVER) + 1) != 0)
        return error_set(err, -ESRCH, "MPS server " MPS_DRA_SERVER " was created but is not listed "
                         "(\"%s\"): it ended (are its devices %s on this node? see its server.log)",
                         out, devices);
    return 0;
}

static void drop(const char *dir, const char *suffix)
{
    _cleanup_free_ char *ns = xasprintf("%s/" NS_DIR, dir);
    DIR *d = opendir(ns);
    size_t sl = strlen(suffix);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > sl && streq(e->d_name + n - sl, suffix))
            (void)unlinkat(dirfd(d), e->d_name, 0);
    }
    if (d)
        closedir(d);
}

void mps_dra_ns_forget(const char *dir)
{
    drop(dir, READY);
    drop(dir, FAILED);
}

/* Lower-case letters, digits and '_', at most 64 (the tool's rule), not the server's own
 * "default": anything else in ns/ is not the plugin's and is left alone. */
static bool name_valid(const char *ns, size_t n)
{
    if (n == 0 || n > NS_NAME_MAX || (n == 7 && strncmp(ns, "default", 7) == 0))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') || ns[i] == '_'))
            return false;
    return true;
}

/* "8192M", "8G", "8589934592": bytes, or -1. */
static long long size_of(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    int shift = *end == 'K' ? 10 : *end == 'M' ? 20 : *end == 'G' ? 30 : *end == 'T' ? 40 : 0;
    if (shift)
        end++;
    if (*end == 'B')
        end++;
    return *end ? -1 : v << shift;
}

/* The namespace's row read back has exactly the limits set, and its socket is there. */
static int check(const char *dir, const char *ns, long long mib, long long pct, const char *row,
                 struct error *err)
{
    /* name,server,server-status,pinned-memory-limit,active-thread-percentage,... */
    char f[5][128] = { "" };
    const char *p = row;
    for (int i = 0; i < 5 && p; i++) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        snprintf(f[i], sizeof(f[i]), "%.*s", (int)(n < sizeof(f[i]) ? n : sizeof(f[i]) - 1), p);
        p = c ? c + 1 : NULL;
    }
    if (!streq(f[0], ns) || !streq(f[1], MPS_DRA_SERVER))
        return error_set(err, -ESRCH, "MPS namespace %s is not listed after its creation (\"%s\")",
                         ns, row);
    if (size_of(f[3]) != mib << 20 || strtod(f[4], NULL) != (double)pct)
        return error_set(err, -EIO, "MPS namespace %s holds pinned memory %s and active thread "
                         "percentage %s, not the %lldM and %lld set", ns, f[3], f[4], mib, pct);
    _cleanup_free_ char *sock = xasprintf("%s/pipe/" MPS_DRA_SERVER "/%s/control", dir, ns);
    struct stat st;
    if (lstat(sock, &st) < 0 || !S_ISSOCK(st.st_mode))
        return error_set(err, -ENOENT, "MPS namespace %s has no socket %s: its clients would run "
                         "without MPS and without limits", ns, sock);
    return 0;
}

/* Namespace ns made with the limits of text (its .json). */
static int make(const char *dir, const char *ns, const char *text, mps_dra_send_fn send, void *ctx,
                struct error *err)
{
    json_t *o = json_loads(text, 0, NULL);
    json_t *mib = json_object_get(o, "pinnedMemoryLimitMiB"), *pct = json_object_get(o, "activeThreadPercentage");
    long long m = json_is_integer(mib) ? json_integer_value(mib) : -1,
              p = json_is_integer(pct) ? json_integer_value(pct) : -1;
    json_decref(o);
    if (m < 1 || m > (1LL << 40) || p < 1 || p > 100)
        return error_set(err, -EINVAL, "MPS namespace %s: %s is not a namespace's desired state", ns, text);
    char out[1024];
    _cleanup_free_ char *create = xasprintf("namespace create %s --server=" MPS_DRA_SERVER, ns);
    _cleanup_free_ char *set = xasprintf("namespace set %s --server=" MPS_DRA_SERVER
                                         " --pinned-memory-limit=%lldM --active-thread-percentage=%lld",
                                         ns, m, p);
    _cleanup_free_ char *list = xasprintf("namespace list %s --server=" MPS_DRA_SERVER
                                          " --format=csv,noheader", ns);
    struct error e = { 0 };
    /* one left by an earlier try of ours is there already: its row says so below */
    (void)send(ctx, create, out, sizeof(out), &e);
    int r = send(ctx, list, out, sizeof(out), err);
    if (r < 0)
        return r;
    if (strncmp(out, ns, strlen(ns)) != 0 || out[strlen(ns)] != ',')
        return error_set(err, -EIO, "%s", e.code ? e.msg : "MPS namespace not made");
    /* both limits on every namespace: one without them has the whole GPU */
    if ((r = send(ctx, set, out, sizeof(out), err)) < 0 || (r = send(ctx, list, out, sizeof(out), err)) < 0)
        return r;
    return check(dir, ns, m, p, out, err);
}

static int write_mark(const char *path, const char *text, struct error *err)
{
    int r = write_file_atomic(path, text, strlen(text), 0644, false);
    return r < 0 ? error_set(err, r, "writing %s: %s", path, strerror(-r)) : 0;
}

/* One name of ns/: made, kept, or deleted. */
static int one(const char *dir, const char *id, const char *ns, mps_dra_send_fn send, void *ctx)
{
    _cleanup_free_ char *want = xasprintf("%s/" NS_DIR "/%s" DESIRED, dir, ns);
    _cleanup_free_ char *ready = xasprintf("%s/" NS_DIR "/%s" READY, dir, ns);
    _cleanup_free_ char *failed = xasprintf("%s/" NS_DIR "/%s" FAILED, dir, ns);
    _cleanup_free_ char *text = NULL, *have = NULL;
    size_t len;
    struct error err = { 0 };
    int r = read_file_bounded_flags(want, O_NOFOLLOW, TEXT_MAX, &text, &len, NULL);
    if (r == -ENOENT) {
        if (read_file_bounded_flags(ready, O_NOFOLLOW, TEXT_MAX, &have, &len, NULL) < 0) {
            (void)unlink(failed);
            return 0;
        }
        char out[1024];
        _cleanup_free_ char *del = xasprintf("namespace delete %s --server=" MPS_DRA_SERVER " --force", ns);
        if ((r = send(ctx, del, out, sizeof(out), &err)) < 0) {
            log_error("MPS control daemon %s: deleting namespace %s: %s", id, ns, err.msg);
            return r;
        }
        if (unlink(ready) < 0 && errno != ENOENT) {
            log_error("MPS control daemon %s: removing %s: %s", id, ready, strerror(errno));
            return -errno;
        }
        log_info("MPS control daemon %s: namespace %s deleted (its share was unprepared)", id, ns);
        return 0;
    }
    if (r < 0) {
        log_error("MPS control daemon %s: reading %s: %s", id, want, strerror(-r));
        return r;
    }
    if (read_file_bounded_flags(ready, O_NOFOLLOW, TEXT_MAX, &have, &len, NULL) == 0 && streq(have, text))
        return 0;
    if ((r = make(dir, ns, text, send, ctx, &err)) < 0 || (r = write_mark(ready, text, &err)) < 0) {
        log_error("MPS control daemon %s: namespace %s: %s", id, ns, err.msg);
        (void)write_mark(failed, err.msg, &(struct error){ 0 });
        return r;
    }
    (void)unlink(failed);
    log_info("MPS control daemon %s: namespace %s made (%s)", id, ns, text);
    return 0;
}

int mps_dra_ns_reconcile(const char *dir, const char *id, mps_dra_send_fn send, void *ctx)
{
    _cleanup_free_ char *nsdir = xasprintf("%s/" NS_DIR, dir);
    DIR *d = opendir(nsdir);
    int ret = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        /* each name once: by its .json, or by its .ready where the .json is gone */
        size_t sl = n > strlen(DESIRED) && streq(e->d_name + n - strlen(DESIRED), DESIRED) ? strlen(DESIRED)
                    : n > strlen(READY) && streq(e->d_name + n - strlen(READY), READY) ? strlen(READY) : 0;
        if (!sl || !name_valid(e->d_name, n - sl))
            continue;
        char ns[NS_NAME_MAX + 1];
        snprintf(ns, sizeof(ns), "%.*s", (int)(n - sl), e->d_name);
        _cleanup_free_ char *want = xasprintf("%s/%s" DESIRED, nsdir, ns);
        struct stat st;
        if (sl == strlen(READY) && lstat(want, &st) == 0)
            continue;
        int r = one(dir, id, ns, send, ctx);
        if (r < 0)
            ret = r;
    }
    if (d)
        closedir(d);
    return ret;
}
