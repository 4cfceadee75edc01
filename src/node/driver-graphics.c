/* The graphics files of the driver (driver-lookup.h, lookup_graphics): nvcdi adds them to
 * every spec in its nvml mode, whatever the container asks for, so ours do too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "node/driver-lookup.h"

static void graphics_link(struct lookup *lk, struct strlist *links, const char *target,
                          const char *lib, const char *link)
{
    _cleanup_free_ char *dir = lookup_dir_of(lib);
    (void)lk;
    strlist_add(links, xasprintf("%s::%s/%s", target, streq(dir, "/") ? "" : dir, link));
}

static void libraries(struct lookup *lk, const char *version, struct strlist *links)
{
    static const char *const any_version[] = {
        "libnvidia-egl-gbm.so.*.*", "libnvidia-egl-wayland.so.*.*",
        "libnvidia-egl-wayland2.so.*.*",
    };
    for (size_t i = 0; i < ELEMENTSOF(any_version); i++) {
        struct strlist hits = { 0 };
        lookup_library(lk, any_version[i], &hits, NULL);
        for (size_t h = 0; h < hits.n; h++)
            lookup_add_mount(lk, xstrdup(hits.v[h]), xstrdup(hits.v[h]), false, false);
        strlist_clear(&hits);
    }
    /* The allocator is among the versioned libraries already; it only drives the GBM
     * backend's link. */
    _cleanup_free_ char *alloc = xasprintf("libnvidia-allocator.so.%s", version);
    struct strlist hits = { 0 };
    lookup_library(lk, alloc, &hits, NULL);
    for (size_t h = 0; h < hits.n; h++)
        graphics_link(lk, links, "../libnvidia-allocator.so.1", hits.v[h], "gbm/nvidia-drm_gbm.so");
    strlist_clear(&hits);

    _cleanup_free_ char *producer = xasprintf("libnvidia-vulkan-producer.so.%s", version);
    lookup_library(lk, producer, &hits, NULL);
    for (size_t h = 0; h < hits.n; h++) {
        lookup_add_mount(lk, xstrdup(hits.v[h]), xstrdup(hits.v[h]), false, false);
        graphics_link(lk, links, producer, hits.v[h], "libnvidia-vulkan-producer.so");
    }
    strlist_clear(&hits);
}

static void xorg(struct lookup *lk, const char *version, const char *libdir,
                 struct strlist *links)
{
    static const char *const subdirs[] = {
        "modules/drivers", "modules/extensions", "modules/updates/drivers",
        "modules/updates/extensions",
    };
    static const char *const bases[] = {
        "/usr/lib/xorg", "/usr/lib64/xorg", "/usr/X11R6/lib", "/usr/X11R6/lib64",
    };
    struct strlist dirs = { 0 };
    const char *ld = streq(libdir, "/") ? "" : libdir;
    strlist_add(&dirs, xasprintf("%s/nvidia/xorg", ld));
    for (size_t s = 0; s < ELEMENTSOF(subdirs); s++)
        strlist_add(&dirs, xasprintf("%s/xorg/%s", ld, subdirs[s]));
    for (size_t b = 0; b < ELEMENTSOF(bases); b++)
        for (size_t s = 0; s < ELEMENTSOF(subdirs); s++)
            strlist_add(&dirs, xasprintf("%s/%s", bases[b], subdirs[s]));

    _cleanup_free_ char *glx = xasprintf("libglxserver_nvidia.so.%s", version);
    const char *names[] = { "nvidia_drv.so", glx };
    for (size_t n = 0; n < ELEMENTSOF(names); n++)
        for (size_t d = 0; d < dirs.n; d++) {
            _cleanup_free_ char *p = xasprintf("%s/%s", dirs.v[d], names[n]);
            char *r = lookup_file(lk, p, 0);
            if (!r)
                continue;
            if (n == 1)
                graphics_link(lk, links, glx, r, "libglxserver_nvidia.so");
            lookup_add_mount(lk, r, xstrdup(r), false, false);
            break;
        }
    strlist_clear(&dirs);
}

static void configs(struct lookup *lk, const char *xdg)
{
    static const char *const files[] = {
        "glvnd/egl_vendor.d/10_nvidia.json",
        "egl/egl_external_platform.d/15_nvidia_gbm.json",
        "egl/egl_external_platform.d/10_nvidia_wayland.json",
        "egl/egl_external_platform.d/09_nvidia_wayland2.json",
        "nvidia/nvoptix.bin",
        "X11/xorg.conf.d/10-nvidia.conf",
        "X11/xorg.conf.d/nvidia-drm-outputclass.conf",
    };
    static const char *const vulkan[] = {
        "vulkan/icd.d/nvidia_icd.json",
        "vulkan/icd.d/nvidia_layers.json",
        "vulkan/implicit_layer.d/nvidia_layers.json",
#if defined(__aarch64__)
        "vulkan/icd.d/nvidia_icd.aarch64.json",
#else
        "vulkan/icd.d/nvidia_icd.x86_64.json",
#endif
    };
    struct strlist dirs = { 0 };
    strlist_add(&dirs, xstrdup("/etc"));
    _cleanup_free_ char *copy = xstrdup(xdg);
    for (char *save = NULL, *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
        if (d[0] == '/')
            strlist_add(&dirs, xstrdup(d));
    for (size_t f = 0; f < ELEMENTSOF(files); f++)
        for (size_t d = 0; d < dirs.n; d++) {
            _cleanup_free_ char *p = xasprintf("%s/%s", dirs.v[d], files[f]);
            char *r = lookup_file(lk, p, 0);
            if (r)
                lookup_add_mount(lk, r, xstrdup(r), false, false);
        }
    /* Vulkan's loader reads /etc/vulkan in every distribution: the ICDs land there in the
     * container wherever the host keeps them. */
    for (size_t f = 0; f < ELEMENTSOF(vulkan); f++) {
        char *r = NULL;
        for (size_t d = 0; d <= dirs.n && !r; d++) {
            _cleanup_free_ char *p = d < dirs.n ? xasprintf("%s/%s", dirs.v[d], vulkan[f])
                                                : xasprintf("/%s", vulkan[f]);
            r = lookup_file(lk, p, 0);
        }
        if (r)
            lookup_add_mount(lk, r, xasprintf("/etc/%s", vulkan[f]), false, false);
    }
    strlist_clear(&dirs);
}

void lookup_graphics(struct lookup *lk, const char *version, const char *xdg)
{
    struct strlist links = { 0 };
    libraries(lk, version, &links);
    xorg(lk, version, lk->out->libcuda_dir, &links);
    configs(lk, xdg);
    lk->out->graphics_links = links.v;
    lk->out->n_graphics_links = links.n;
}
