/* The driver's user-space files under the driver root (driver-files.h). */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/fs.h"
#include "node/driver-files.h"
#include "node/driver-lookup.h"
#include "node/elf.h"

static void warn(struct driver_files *f, char *line)
{
    size_t n = 0;
    while (f->warnings && f->warnings[n])
        n++;
    f->warnings = xreallocarray(f->warnings, n + 2, sizeof(char *));
    f->warnings[n] = line;
    f->warnings[n + 1] = NULL;
}

/* ---- the version and the library directory -------------------------------------------- */

/* "libcuda.so.550.163.01" -> "550.163.01" from the first hit of prefix*.*. */
static char *version_from_files(struct lookup *lk)
{
    static const char *const prefixes[] = { "libcuda.so.", "libnvidia-ml.so." };
    for (size_t i = 0; i < ELEMENTSOF(prefixes); i++) {
        _cleanup_free_ char *pattern = xasprintf("%s*.*", prefixes[i]);
        struct strlist hits = { 0 };
        lookup_library(lk, pattern, &hits, NULL);
        char *v = hits.n ? xstrdup(lookup_base_of(hits.v[0]) + strlen(prefixes[i])) : NULL;
        strlist_clear(&hits);
        if (v && *v && !strchr(v, '*'))
            return v;
        free(v);
    }
    return NULL;
}

/* The fixed directories under the root, as one line for a warning. */
static char *places_looked(const struct lookup *lk)
{
    struct strlist where = { 0 };
    size_t cap = 1;
    for (size_t i = 0; i < lookup_n_library_dirs; i++) {
        const char *d = lookup_library_dirs[i];
        strlist_add(&where, xasprintf("%s%s", lk->root, streq(d, "/") && *lk->root ? "" : d));
        cap += strlen(where.v[where.n - 1]) + 2;
    }
    char *list = xcalloc(1, cap);
    for (size_t i = 0; i < where.n; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, where.v[i]);
    }
    strlist_clear(&where);
    return list;
}

static char *find_libdir(struct lookup *lk, const char *version)
{
    static const char *const names[] = { "libcuda.so.", "libnvidia-ml.so." };
    _cleanup_free_ char *cache_note = NULL;
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *name = xasprintf("%s%s", names[i], version);
        struct strlist hits = { 0 };
        lookup_library(lk, name, &hits, &cache_note);
        char *dir = hits.n ? lookup_dir_of(hits.v[0]) : NULL;
        strlist_clear(&hits);
        if (dir)
            return dir;
    }
    _cleanup_free_ char *list = places_looked(lk);
    warn(lk->out, xasprintf("driver libraries: neither libcuda.so.%s nor libnvidia-ml.so.%s "
                            "found: looked in %s and %s/etc/ld.so.cache (%s); the CDI specs "
                            "carry device nodes but no driver files", version, version, list,
                            lk->root, cache_note ? cache_note : "no match"));
    return NULL;
}

/* libcuda and libnvidia-ml are what a container needs of the driver: when one of them is
 * not among the libraries mounted, one warning names it and every place looked. */
static void check_essential(struct lookup *lk, const char *version, const char *libdir)
{
    static const char *const names[][2] = {
        { "libcuda.so.", "no CUDA program can run in a container" },
        { "libnvidia-ml.so.", "no NVML or nvidia-smi in a container" },
    };
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        _cleanup_free_ char *name = xasprintf("%s%s", names[i][0], version);
        bool mounted = false;
        for (size_t m = 0; m < lk->out->n_mounts && !mounted; m++)
            mounted = lk->out->mounts[m].library && streq(lookup_base_of(lk->out->mounts[m].dst), name);
        if (mounted)
            continue;
        _cleanup_free_ char *cache_note = NULL;
        struct strlist hits = { 0 };
        lookup_library(lk, name, &hits, &cache_note);
        if (hits.n) {
            warn(lk->out, xasprintf("driver libraries: %s is at %s%s, not in the library "
                                    "directory %s%s the specs mount libraries from (as nvcdi "
                                    "does): not mounted, %s", name, lk->root, hits.v[0],
                                    lk->root, libdir, names[i][1]));
        } else {
            _cleanup_free_ char *list = places_looked(lk);
            warn(lk->out, xasprintf("driver libraries: %s not found: looked in %s and "
                                    "%s/etc/ld.so.cache (%s); %s", name, list, lk->root,
                                    cache_note ? cache_note : "no match", names[i][1]));
        }
        strlist_clear(&hits);
    }
}

/* ---- the libraries and their links ------------------------------------------------------ */

/* The SONAME of the file at src (inside the root): 1 with out set, 0 none, < 0 not ELF. */
static int read_soname(struct lookup *lk, const char *src, char *out, size_t len)
{
    _cleanup_free_ char *host = lookup_host(lk, src);
    _cleanup_close_ int fd = open(host, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return -EINVAL;
    return elf_soname_fd(fd, out, len, NULL);
}

static bool is_symlink(struct lookup *lk, const char *dir, const char *name)
{
    _cleanup_free_ char *host = xasprintf("%s%s/%s", lk->root, streq(dir, "/") ? "" : dir, name);
    struct stat st;
    return lstat(host, &st) == 0 && S_ISLNK(st.st_mode);
}

static void add_link(struct strlist *l, const char *target, const char *dir, const char *link)
{
    strlist_add(l, xasprintf("%s::%s/%s", target, streq(dir, "/") ? "" : dir, link));
}

/* The links nvcdi's create-symlinks hook makes for one library: fixed extras, then the
 * SONAME and the development name, each only where the host has that link. */
static void library_links(struct lookup *lk, struct driver_mount *m, struct strlist *links)
{
    const char *name = lookup_base_of(m->dst);
    _cleanup_free_ char *dir = lookup_dir_of(m->dst);
    if (fnmatch("libcuda.so.*.*", name, 0) == 0)
        add_link(links, "libcuda.so.1", dir, "libcuda.so");
    else if (fnmatch("libGLX_nvidia.so.*.*", name, 0) == 0)
        add_link(links, name, dir, "libGLX_indirect.so.0");
    else if (fnmatch("libnvidia-opticalflow.so.*.*", name, 0) == 0)
        add_link(links, "libnvidia-opticalflow.so.1", dir, "libnvidia-opticalflow.so");
    if (fnmatch("*.*.*", name, 0) != 0)
        return;
    char soname[256];
    int r = read_soname(lk, m->src, soname, sizeof(soname));
    if (r < 0)
        return; /* not ELF: nvcdi skips its links too */
    if (r == 0)
        snprintf(soname, sizeof(soname), "%s", lookup_base_of(m->src));
    _cleanup_free_ char *hostdir = lookup_dir_of(m->src);
    if (!streq(soname, name)) {
        m->soname = xstrdup(soname);
        if (is_symlink(lk, hostdir, soname))
            add_link(links, name, dir, soname);
    }
    /* libcuda.so.1 -> libcuda.so: strip ".<x>" parts until the name ends in ".so". */
    char dev[256];
    snprintf(dev, sizeof(dev), "%s", soname);
    size_t dl = strlen(dev);
    while (dl > 3 && strcmp(dev + dl - 3, ".so") != 0) {
        char *dot = strrchr(dev, '.');
        if (!dot || dot == dev)
            break;
        *dot = 0;
        dl = strlen(dev);
    }
    if (dl > 3 && strcmp(dev + dl - 3, ".so") == 0 && !streq(dev, soname) &&
        is_symlink(lk, hostdir, dev))
        add_link(links, soname, dir, dev);
}

/* Whether update-ldcache takes a library's directory: lib?*.so with nothing or ".<...>"
 * after the last ".so". */
static bool ldcache_name(const char *name)
{
    if (fnmatch("lib?*.so*", name, 0) != 0)
        return false;
    const char *so = NULL;
    for (const char *p = strstr(name, ".so"); p; p = strstr(p + 1, ".so"))
        so = p;
    return so && (so[3] == 0 || so[3] == '.');
}

static void find_libraries(struct lookup *lk, const char *version, const char *libdir)
{
    struct driver_files *f = lk->out;
    _cleanup_free_ char *pattern = xasprintf("*.so.%s", version);
    _cleanup_free_ char *vdpau = xasprintf("%s/vdpau", streq(libdir, "/") ? "" : libdir);
    struct strlist globbed = { 0 }, resolved = { 0 };
    lookup_glob(lk, libdir, pattern, &globbed);
    lookup_glob(lk, vdpau, pattern, &globbed);
    for (size_t i = 0; i < globbed.n; i++) {
        char *r = lookup_file(lk, globbed.v[i], 0);
        if (r)
            strlist_add(&resolved, r);
    }
    strlist_clear(&globbed);

    struct strlist links = { 0 }, folders = { 0 };
    for (size_t i = 0; i < resolved.n; i++) {
        if (!lookup_add_mount(lk, xstrdup(resolved.v[i]), xstrdup(resolved.v[i]), false, true))
            continue;
        struct driver_mount *m = &f->mounts[f->n_mounts - 1];
        library_links(lk, m, &links);
        if (ldcache_name(lookup_base_of(m->dst)))
            strlist_add(&folders, lookup_dir_of(m->dst));
    }
    strlist_clear(&resolved);
    f->links = links.v;
    f->n_links = links.n;
    f->folders = folders.v;
    f->n_folders = folders.n;
}

/* ---- graphics, binaries, firmware, sockets --------------------------------------------- */

static void find_binaries(struct lookup *lk, const char *path_env)
{
    static const char *const names[] = {
        "nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control",
        "nvidia-cuda-mps-server", "nvidia-imex", "nvidia-imex-ctl",
    };
    static const char *const defaults[] = {
        "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
    };
    struct strlist dirs = { 0 };
    _cleanup_free_ char *copy = xstrdup(path_env ? path_env : "");
    for (char *save = NULL, *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
        if (d[0] == '/')
            strlist_add(&dirs, xstrdup(d));
    for (size_t i = 0; i < ELEMENTSOF(defaults); i++)
        strlist_add(&dirs, xstrdup(defaults[i]));
    for (size_t n = 0; n < ELEMENTSOF(names); n++)
        for (size_t i = 0; i < dirs.n; i++) {
            _cleanup_free_ char *p = xasprintf("%s/%s", dirs.v[i], names[n]);
            char *r = lookup_file(lk, p, 0111);
            if (!r)
                continue;
            /* The container sees the name on $PATH; the mount's source is the file the
             * name leads to inside the root (a link would be followed on the host, maybe
             * out of the driver root). */
            lookup_add_mount(lk, r, xstrdup(p), false, false);
            break;
        }
    strlist_clear(&dirs);
}

static void find_firmware(struct lookup *lk, const char *version, const char *sysfs,
                          const char *release)
{
    struct strlist dirs = { 0 };
    _cleanup_free_ char *param = xasprintf("%s/module/firmware_class/parameters/path",
                                           sysfs && *sysfs ? sysfs : "/sys");
    _cleanup_free_ char *custom = NULL;
    size_t len = 0;
    if (read_file_bounded(param, 4096, &custom, &len, NULL) == 0) {
        custom[strcspn(custom, "\n")] = 0;
        if (custom[0] == '/')
            strlist_add(&dirs, xstrdup(custom));
    }
    strlist_add(&dirs, xasprintf("/lib/firmware/updates/%s", release));
    strlist_add(&dirs, xstrdup("/lib/firmware/updates"));
    strlist_add(&dirs, xasprintf("/lib/firmware/%s", release));
    strlist_add(&dirs, xstrdup("/lib/firmware"));
    for (size_t i = 0; i < dirs.n; i++) {
        _cleanup_free_ char *dir = xasprintf("%s/nvidia/%s", dirs.v[i], version);
        struct strlist hits = { 0 };
        lookup_glob(lk, dir, "gsp*.bin", &hits);
        for (size_t h = 0; h < hits.n; h++) {
            char *r = lookup_file(lk, hits.v[h], 0);
            if (r)
                lookup_add_mount(lk, r, xstrdup(r), false, false);
        }
        strlist_clear(&hits);
    }
    strlist_clear(&dirs);
}

static void find_sockets(struct lookup *lk)
{
    static const char *const groups[][2] = {
        { "/run/nvidia-persistenced/socket", "/var/run/nvidia-persistenced/socket" },
        { "/run/nvidia-fabricmanager/socket", "/var/run/nvidia-fabricmanager/socket" },
        { "/tmp/nvidia-mps", NULL },
    };
    for (size_t g = 0; g < ELEMENTSOF(groups); g++)
        for (size_t i = 0; i < 2 && groups[g][i]; i++) {
            char *r = lookup_file(lk, groups[g][i], 0);
            if (r) {
                lookup_add_mount(lk, r, xstrdup(r), true, false);
                break;
            }
        }
}

static void check_hook(struct lookup *lk, const char *hook)
{
    struct stat st;
    if (stat(hook, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
        return;
    if (*lk->root && lookup_stat(lk, hook, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111))
        return;
    lk->out->hook_missing = true;
    warn(lk->out, xasprintf("CDI hook %s: not found (looked at %s%s%s%s): the CDI specs carry "
                            "no hooks; each driver library is also mounted at its SONAME "
                            "(libcuda.so.1, ...) so programs load it by name, but the "
                            "container gets no ld.so.cache entry, no libcuda.so link, no "
                            "CUDA forward compatibility and no guard against NVML changing "
                            "device nodes", hook, hook, *lk->root ? " and " : "",
                            *lk->root ? lk->root : "", *lk->root ? hook : ""));
}

void driver_files_find(const struct driver_find_options *o, struct driver_files *out)
{
    _cleanup_free_ char *root = xstrdup(o->root ? o->root : "");
    size_t rl = strlen(root);
    while (rl && root[rl - 1] == '/')
        root[--rl] = 0;
    struct lookup lk = { .root = root, .out = out };

    out->version = o->version && *o->version ? xstrdup(o->version) : version_from_files(&lk);
    if (out->version && (!*out->version || strchr(out->version, '*'))) {
        free(out->version);
        out->version = NULL;
    }
    if (!out->version) {
        warn(out, xasprintf("driver libraries: the driver version is unknown (NVML gave none "
                            "and no libcuda.so.*.* or libnvidia-ml.so.*.* under %s): the CDI "
                            "specs carry device nodes but no driver files", *root ? root : "/"));
    } else if ((out->libcuda_dir = find_libdir(&lk, out->version))) {
        find_libraries(&lk, out->version, out->libcuda_dir);
        check_essential(&lk, out->version, out->libcuda_dir);
        const char *xdg = o->xdg_data_dirs ? o->xdg_data_dirs : getenv("XDG_DATA_DIRS");
        lookup_graphics(&lk, out->version, xdg && *xdg ? xdg : "/usr/local/share:/usr/share");
        find_binaries(&lk, o->path_env ? o->path_env : getenv("PATH"));
        struct utsname u;
        const char *release = o->kernel_release;
        if (!release)
            release = uname(&u) == 0 ? u.release : "";
        find_firmware(&lk, out->version, o->sysfs_root, release);
        if (!o->no_ipc)
            find_sockets(&lk);
    }
    if (lk.files_capped || lk.entries_read >= DRIVER_DIR_ENTRIES_MAX)
        warn(out, xasprintf("driver files under %s: more than the bound of %d files or %d "
                            "directory entries; the CDI specs carry the first %zu files",
                            *root ? root : "/", DRIVER_FILES_MAX, DRIVER_DIR_ENTRIES_MAX,
                            out->n_mounts));
    if (o->hook_path && *o->hook_path)
        check_hook(&lk, o->hook_path);
}

void driver_files_clear(struct driver_files *f)
{
    free(f->version);
    free(f->libcuda_dir);
    for (size_t i = 0; i < f->n_mounts; i++) {
        free(f->mounts[i].src);
        free(f->mounts[i].dst);
        free(f->mounts[i].soname);
    }
    free(f->mounts);
    struct strlist lists[] = {
        { .v = f->links, .n = f->n_links },
        { .v = f->graphics_links, .n = f->n_graphics_links },
        { .v = f->folders, .n = f->n_folders },
    };
    for (size_t i = 0; i < ELEMENTSOF(lists); i++)
        strlist_clear(&lists[i]);
    for (size_t i = 0; f->warnings && f->warnings[i]; i++)
        free(f->warnings[i]);
    free(f->warnings);
    memset(f, 0, sizeof(*f));
}
