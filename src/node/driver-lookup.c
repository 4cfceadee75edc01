/* Searching a driver root (driver-lookup.h): symlinks resolved inside it, globs, the
 * library locator with its ld.so.cache fallback. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "node/driver-lookup.h"
#include "node/ldcache.h"

/* nvcdi's library search directories, in its order. */
const char *const lookup_library_dirs[] = {
    "/",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu/nvidia/current",
    "/lib/aarch64-linux-gnu/nvidia/current",
};
const size_t lookup_n_library_dirs = ELEMENTSOF(lookup_library_dirs);

bool strlist_has(const struct strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (streq(l->v[i], s))
            return true;
    return false;
}

bool strlist_add(struct strlist *l, char *s)
{
    if (strlist_has(l, s)) {
        free(s);
        return false;
    }
    l->v = grow_array(l->v, &l->alloc, l->n + 2, sizeof(*l->v));
    l->v[l->n++] = s;
    l->v[l->n] = NULL;
    return true;
}

void strlist_clear(struct strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof(*l));
}

char *lookup_host(const struct lookup *lk, const char *path)
{
    return xasprintf("%s%s", lk->root, path);
}

int driver_resolve_in_root(const char *root, const char *path, char **out)
{
    char cur[PATH_MAX] = ""; /* resolved so far, "" being the root */
    size_t rl = root ? strlen(root) : 0;
    while (rl && root[rl - 1] == '/')
        rl--;
    _cleanup_free_ char *rest = xstrdup(path);
    const char *p = rest;
    unsigned hops = 0;

    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = strchrnul(p, '/');
        size_t n = (size_t)(e - p), cl = strlen(cur);
        if (n == 1 && p[0] == '.') {
            p = e;
            continue;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            /* ".." of the root is the root, as in a chroot. */
            char *s = strrchr(cur, '/');
            if (s)
                *s = 0;
            p = e;
            continue;
        }
        if (cl + 1 + n >= sizeof(cur) || rl + cl + 1 + n >= PATH_MAX)
            return -ENAMETOOLONG;
        cur[cl] = '/';
        memcpy(cur + cl + 1, p, n);
        cur[cl + 1 + n] = 0;
        char host[PATH_MAX];
        int hl = snprintf(host, sizeof(host), "%.*s%s", (int)rl, root ? root : "", cur);
        if (hl < 0 || (size_t)hl >= sizeof(host))
            return -ENAMETOOLONG; /* checked above; said again where the compiler sees it */
        struct stat st;
        if (lstat(host, &st) < 0)
            return -errno;
        if (S_ISLNK(st.st_mode)) {
            if (++hops > DRIVER_SYMLINK_HOPS)
                return -ELOOP;
            char target[PATH_MAX];
            ssize_t tl = readlink(host, target, sizeof(target) - 1);
            if (tl < 0)
                return -errno;
            if (tl == 0)
                return -ENOENT;
            target[tl] = 0;
            cur[cl] = 0; /* the link's own name goes: its target takes its place */
            if (target[0] == '/')
                cur[0] = 0;
            char *next = xasprintf("%s%s", target, e); /* e is "" or "/..." */
            free(rest);
            rest = next;
            p = rest;
            continue;
        }
        if (*e && !S_ISDIR(st.st_mode))
            return -ENOTDIR;
        p = e;
    }
    *out = xstrdup(*cur ? cur : "/");
    return 0;
}

int lookup_stat(const struct lookup *lk, const char *path, struct stat *st)
{
    _cleanup_free_ char *resolved = NULL;
    int r = driver_resolve_in_root(lk->root, path, &resolved);
    if (r < 0)
        return r;
    _cleanup_free_ char *host = lookup_host(lk, resolved);
    return stat(host, st) < 0 ? -errno : 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void lookup_glob(struct lookup *lk, const char *dir, const char *pattern, struct strlist *hits)
{
    _cleanup_free_ char *rdir = NULL;
    if (driver_resolve_in_root(lk->root, dir, &rdir) < 0)
        return;
    _cleanup_free_ char *host = lookup_host(lk, streq(rdir, "/") ? "" : rdir);
    DIR *d = opendir(*host ? host : "/");
    if (!d)
        return;
    struct strlist names = { 0 };
    for (struct dirent *e; lk->entries_read < DRIVER_DIR_ENTRIES_MAX && (e = readdir(d));) {
        lk->entries_read++;
        if (e->d_name[0] != '.' && fnmatch(pattern, e->d_name, FNM_PERIOD) == 0)
            strlist_add(&names, xstrdup(e->d_name));
    }
    closedir(d);
    if (names.n)
        qsort(names.v, names.n, sizeof(*names.v), cmp_str);
    /* The unresolved directory, as the glob would print it. */
    for (size_t i = 0; i < names.n; i++)
        strlist_add(hits, xasprintf("%s/%s", streq(dir, "/") ? "" : dir, names.v[i]));
    strlist_clear(&names);
}

char *lookup_file(const struct lookup *lk, const char *path, mode_t need)
{
    char *resolved = NULL;
    if (driver_resolve_in_root(lk->root, path, &resolved) < 0)
        return NULL;
    _cleanup_free_ char *host = lookup_host(lk, resolved);
    struct stat st;
    if (stat(host, &st) < 0 || S_ISDIR(st.st_mode) || (need && !(st.st_mode & need))) {
        free(resolved);
        return NULL;
    }
    return resolved;
}

/* path resolved, kept when it is no directory. */
static void add_resolved_file(struct lookup *lk, const char *path, struct strlist *hits)
{
    char *resolved = lookup_file(lk, path, 0);
    if (resolved)
        strlist_add(hits, resolved);
}

struct cache_walk {
    struct lookup *lk;
    const char *pattern;
    struct strlist *hits;
    size_t entries;
};

const char *lookup_base_of(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

char *lookup_dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return xstrdup(".");
    return s == path ? xstrdup("/") : xstrndup(path, (size_t)(s - path));
}

/* Every link of an entry's chain and its final file is matched by base name: a cache
 * names libcuda.so.1, whose target is libcuda.so.<version>. */
static int cache_entry(void *userdata, const char *key, const char *value, bool is64)
{
    (void)key;
    struct cache_walk *w = userdata;
    if (!is64 || value[0] != '/')
        return 0;
    if (++w->entries > DRIVER_LDCACHE_ENTRIES_MAX)
        return -E2BIG;
    _cleanup_free_ char *cur = xstrdup(value);
    for (unsigned hop = 0; hop <= DRIVER_SYMLINK_HOPS; hop++) {
        if (fnmatch(w->pattern, lookup_base_of(cur), FNM_PERIOD) == 0)
            add_resolved_file(w->lk, cur, w->hits);
        _cleanup_free_ char *host = lookup_host(w->lk, cur);
        char target[PATH_MAX];
        ssize_t tl = readlink(host, target, sizeof(target) - 1);
        if (tl <= 0)
            break;
        target[tl] = 0;
        char *next;
        if (target[0] == '/') {
            next = xstrdup(target);
        } else {
            size_t dl = (size_t)(lookup_base_of(cur) - cur);
            next = xasprintf("%.*s%s", (int)dl, cur, target);
        }
        free(cur);
        cur = next;
    }
    return 0;
}

void lookup_library(struct lookup *lk, const char *pattern, struct strlist *hits,
                    char **cache_note)
{
    struct strlist found = { 0 };
    for (size_t i = 0; i < lookup_n_library_dirs; i++)
        lookup_glob(lk, lookup_library_dirs[i], pattern, &found);
    size_t before = hits->n;
    for (size_t i = 0; i < found.n; i++)
        add_resolved_file(lk, found.v[i], hits);
    strlist_clear(&found);
    if (hits->n > before)
        return;

    _cleanup_free_ char *cache = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = driver_resolve_in_root(lk->root, "/etc/ld.so.cache", &cache);
    if (r >= 0) {
        _cleanup_free_ char *host = lookup_host(lk, cache);
        r = read_file_bounded(host, LDCACHE_MAX_BYTES, &data, &len, NULL);
    }
    if (r < 0) {
        if (cache_note && !*cache_note)
            *cache_note = xstrdup(r == -EFBIG ? "larger than its bound" : strerror(-r));
        return;
    }
    struct cache_walk w = { .lk = lk, .pattern = pattern, .hits = hits };
    struct error err = { 0 };
    r = ldcache_parse((const uint8_t *)data, len, cache_entry, &w, &err);
    if (r < 0 && cache_note && !*cache_note)
        *cache_note = xstrdup(r == -E2BIG ? "more entries than its bound" : err.msg);
}

bool lookup_add_mount(struct lookup *lk, char *src, char *dst, bool ipc, bool library)
{
    struct driver_files *f = lk->out;
    for (size_t i = 0; i < f->n_mounts; i++)
        if (streq(f->mounts[i].src, src) && streq(f->mounts[i].dst, dst)) {
            free(src);
            free(dst);
            return false;
        }
    if (f->n_mounts >= DRIVER_FILES_MAX) {
        lk->files_capped = true;
        free(src);
        free(dst);
        return false;
    }
    f->mounts = xreallocarray(f->mounts, f->n_mounts + 1, sizeof(*f->mounts));
    f->mounts[f->n_mounts++] = (struct driver_mount){
        .src = src, .dst = dst, .ipc = ipc, .library = library,
    };
    return true;
}
