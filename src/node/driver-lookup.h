/* The searches under a driver root that node/driver-files.c is made of (internal to
 * src/node/driver-*.c). Paths are absolute paths inside the root; every hit is resolved
 * inside it (driver_resolve_in_root). Loop-free, not thread-safe only in what they return. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "node/driver-files.h"

struct lookup {
    const char *root;          /* "" for "/", no trailing slash */
    struct driver_files *out;
    size_t entries_read;       /* directory entries read so far, against the bound */
    bool files_capped;         /* a file was left out at DRIVER_FILES_MAX */
};

/* A list of unique strings in insertion order. */
struct strlist {
    char **v;
    size_t n, alloc;
};
bool strlist_has(const struct strlist *l, const char *s);
/* Takes s; false (s freed) when it was there already. */
bool strlist_add(struct strlist *l, char *s);
void strlist_clear(struct strlist *l);

/* The last component of path, and (malloc'd) all before it ("/" for "/x"). */
const char *lookup_base_of(const char *path);
char *lookup_dir_of(const char *path);

/* root + path (path absolute), malloc'd. */
char *lookup_host(const struct lookup *lk, const char *path);
/* path resolved inside the root when that is a file (no directory) with one of the mode
 * bits of need (0: any): the resolved path (malloc'd), else NULL. */
char *lookup_file(const struct lookup *lk, const char *path, mode_t need);
/* stat of path resolved inside the root: 0 or -errno. */
int lookup_stat(const struct lookup *lk, const char *path, struct stat *st);

/* Names in directory dir (inside the root, resolved there) that fnmatch pattern, sorted
 * bytewise as Go's filepath.Glob sorts them; each appended to hits as dir/name,
 * unresolved. Reads at most DRIVER_DIR_ENTRIES_MAX entries over the whole lookup. */
void lookup_glob(struct lookup *lk, const char *dir, const char *pattern, struct strlist *hits);

/* nvcdi's library locator: every file matching pattern in the fixed directory list,
 * resolved, unique, not a directory; only if none, the same over the root's
 * etc/ld.so.cache (each entry's symlink chain matched by base name). *cache_note is set
 * (malloc'd, may stay NULL) to why the cache could not be used, for the warning. */
void lookup_library(struct lookup *lk, const char *pattern, struct strlist *hits,
                    char **cache_note);
/* The fixed directory list, for the warning that names every place looked. */
extern const char *const lookup_library_dirs[];
extern const size_t lookup_n_library_dirs;

/* Appends a mount (strings taken); false (freed) when its src and dst were there. */
bool lookup_add_mount(struct lookup *lk, char *src, char *dst, bool ipc, bool library);

/* The graphics files nvcdi adds in its nvml mode (driver-graphics.c): the EGL/GBM/Wayland
 * libraries, the Xorg modules, the glvnd/EGL/X11/OptiX configs (under etc and each of
 * xdg's directories) and the Vulkan ICDs (seen at /etc/vulkan/... in the container),
 * with the links of their own create-symlinks hook. */
void lookup_graphics(struct lookup *lk, const char *version, const char *xdg);
