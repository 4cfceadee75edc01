/* The NVIDIA driver's user-space files on this node, found under the driver root the way
 * NVIDIA's CDI generator (nvcdi, Container Toolkit 1.19) finds them, so that every CDI spec
 * we write gives a container the driver: a GPU's device nodes alone do not let a program
 * load libcuda.so.1.
 *
 * Found once per node state (start, SIGHUP) by driver_files_find(); the CDI writers
 * (output/cdi-edits.c) turn the result into mounts, hooks and env on every spec without
 * touching the filesystem again. What is looked for, in nvcdi's order:
 *   - the driver version: NVML's (the caller passes it), else the suffix of the first
 *     libcuda.so.*.* (then libnvidia-ml.so.*.*) the library search finds;
 *   - the library directory: the directory of libcuda.so.<version> (else
 *     libnvidia-ml.so.<version>) in a fixed list of eleven directories, else in the driver
 *     root's etc/ld.so.cache (node/ldcache.h);
 *   - the libraries: every *.so.<version> in that directory and its vdpau/, each with the
 *     SONAME its ELF header names (node/elf.h) and the links create-symlinks makes;
 *   - graphics: the EGL/GBM/Wayland libraries, the Xorg modules, the glvnd/EGL/X11/OptiX
 *     configs and the Vulkan ICDs;
 *   - the binaries (nvidia-smi, MPS, persistenced, IMEX) on $PATH and the usual sbin/bin;
 *   - GSP firmware under the firmware search path; the persistenced and fabricmanager
 *     sockets.
 * A missing optional file is skipped; a missing libcuda and libnvidia-ml is a warning
 * naming every place looked (the specs then carry device nodes only).
 *
 * Every symlink is resolved inside the root, as if it were "/": an absolute target means
 * the root's own file, ".." stops at the root, so no path we hand out leads outside it.
 * Bounded: DRIVER_FILES_MAX files, DRIVER_DIR_ENTRIES_MAX entries read per directory,
 * DRIVER_SYMLINK_HOPS links per path, LDCACHE_MAX_BYTES of cache, ELF_MAX_READ per ELF
 * part. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

#define DRIVER_FILES_MAX 1024
#define DRIVER_DIR_ENTRIES_MAX 65536
#define DRIVER_SYMLINK_HOPS 40
#define DRIVER_LDCACHE_ENTRIES_MAX 65536

struct driver_mount {
    char *src;      /* the file, as a path inside the driver root ("/usr/lib/.../x.so.V") */
    char *dst;      /* where the container sees it (src, but /etc/vulkan/... for the ICDs
                     * and the unresolved $PATH name of a binary) */
    char *soname;   /* a library's DT_SONAME when it differs from its file name; NULL */
    bool ipc;       /* a socket: mounted writable and noexec */
    bool library;   /* one of the *.so.<version> libraries (update-ldcache's folders) */
};

struct driver_files {
    char *version;          /* "550.163.01"; NULL: unknown, nothing else found */
    char *libcuda_dir;      /* container path of the library directory; NULL: not found */
    struct driver_mount *mounts; /* discovery order (the writers sort) */
    size_t n_mounts;
    char **links;           /* create-symlinks "<target>::<link>" of the driver libraries */
    char **graphics_links;  /* ... of the graphics libraries (a hook of their own) */
    char **folders;         /* update-ldcache --folder: the libraries' directories */
    size_t n_links, n_graphics_links, n_folders;
    bool hook_missing;      /* the hook binary was looked for and not found */
    char **warnings;        /* one line each, for the caller to log; NULL-terminated or NULL */
};

struct driver_find_options {
    const char *root;           /* the driver root as this process sees it; NULL, "", "/": / */
    const char *version;        /* NVML's driver version; NULL or "": from the file names */
    const char *path_env;       /* the binaries' search path; NULL: $PATH */
    const char *xdg_data_dirs;  /* NULL: $XDG_DATA_DIRS, else /usr/local/share:/usr/share */
    const char *sysfs_root;     /* for firmware_class's custom path; NULL: /sys */
    const char *kernel_release; /* for the firmware search path; NULL: uname -r */
    bool no_ipc;                /* feature flag disable-ipc-discoverer */
    /* The createContainer hook binary (--nvidia-cdi-hook-path), a host path: looked for
     * as it is, then under root. Missing: hook_missing and a warning. NULL: not checked. */
    const char *hook_path;
};

/* Fills out (zeroed by the caller). Never fails on what the root lacks: those are
 * warnings in out. -ENOMEM style failures abort (xmalloc). */
void driver_files_find(const struct driver_find_options *o, struct driver_files *out);
void driver_files_clear(struct driver_files *f);

/* Resolves path (absolute, inside root) with root as "/": 0 with *out the resolved
 * absolute path inside root (malloc'd), or -errno (-ELOOP past DRIVER_SYMLINK_HOPS). */
int driver_resolve_in_root(const char *root, const char *path, char **out);
