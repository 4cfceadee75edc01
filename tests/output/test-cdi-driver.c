/* The driver's files in our CDI specs (node/driver-files.c, output/cdi-edits.c):
 *   - NVIDIA's own spec for a 1-GPU claim (tests/data/cdi/nvidia-claim-1gpu.json, written by
 *     its DRA driver on a host built the same way) is what dra_cdi_spec writes, field for
 *     field, for the same driver root;
 *   - a packaged-driver layout: SONAME links only where the host has them, vdpau, the
 *     update-ldcache folders, firmware, the persistenced socket, a Vulkan ICD moved to
 *     /etc, a binary reached through a symlink, links that lead out of the root resolved
 *     inside it;
 *   - the libraries found through the root's ld.so.cache when no fixed directory has them;
 *   - no hook binary: no hooks, each library also at its SONAME, one warning;
 *   - --cdi-disable-hooks, the nvidia-ctk hook form, no-additional-gids-for-device-nodes;
 *   - a root without the driver: one warning naming both files and every place looked.
 * Needs root for the device nodes (mknod) and ldconfig -r; skips (77) otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/macro.h"
#include "dra/dra-cdi.h"
#include "node/driver-files.h"
#include "fixtures.h"
#include "output/cdi-edits.h"
#include "output/cdi.h"
#include "tests/common/fixture.h"
#include "tests/common/scratch.h"

#define VER "550.163.01"
#define LIBDIR "/usr/lib/x86_64-linux-gnu"

static const char *sim_lib;    /* the simulated libnvidia-ml.so.1: an ELF with a SONAME */
static const char *soname_lib; /* an ELF whose SONAME is libcuda.so.1 */

static void put(const char *root, const char *path, const char *text, mode_t mode)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, path);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = 0;
    CHECK(mkdir_p(dir, 0755) == 0);
    CHECK(write_file_atomic(p, text, strlen(text), mode, false) == 0);
}

static void copy(const char *root, const char *path, const char *from)
{
    char *data = NULL;
    size_t len = 0;
    CHECK(read_file_bounded(from, 64u << 20, &data, &len, NULL) == 0);
    _cleanup_free_ char *p = xasprintf("%s%s", root, path);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = 0;
    CHECK(mkdir_p(dir, 0755) == 0);
    CHECK(write_file_atomic(p, data, len, 0755, false) == 0);
    free(data);
}

static void mkdir_in(const char *root, const char *path)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, path);
    CHECK(mkdir_p(p, 0755) == 0);
}

static void link_at(const char *root, const char *path, const char *target)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, path);
    CHECK(symlink(target, p) == 0);
}

static void node(const char *root, const char *path, unsigned maj, unsigned min, mode_t mode)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, path);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = 0;
    CHECK(mkdir_p(dir, 0755) == 0);
    CHECK(mknod(p, S_IFCHR | mode, makedev(maj, min)) == 0);
    CHECK(chmod(p, mode) == 0);
}

/* The text of j with every "<driver-root>" and "<dev-root>" made root. */
static json_t *placeholders(json_t *j, const char *root)
{
    _cleanup_free_ char *text = json_dumps(j, JSON_PRESERVE_ORDER);
    size_t cap = strlen(text) * 4 + strlen(root) * 64 + 1;
    _cleanup_free_ char *out = xcalloc(1, cap);
    for (const char *p = text; *p;) {
        if (startswith(p, "<driver-root>") || startswith(p, "<dev-root>")) {
            strcat(out, root);
            p = strchr(p, '>') + 1;
        } else {
            strncat(out, p++, 1);
        }
    }
    return json_loads(out, 0, NULL);
}

static void config_for(struct config *cfg, const char *root, const char *hook)
{
    fx_config(cfg, "/nonexistent-proc");
    free(cfg->driver_root);
    cfg->driver_root = xstrdup(root);
    free(cfg->dev_root);
    cfg->dev_root = xstrdup(root);
    free(cfg->driver_root_ctr_path);
    cfg->driver_root_ctr_path = xstrdup(root);
    free(cfg->nvidia_cdi_hook_path);
    cfg->nvidia_cdi_hook_path = xstrdup(hook);
}

static void find(struct inventory *inv, const struct config *cfg)
{
    struct driver_find_options o = {
        .root = cfg->driver_root_ctr_path, .version = VER, .path_env = "/usr/bin:/bin",
        .xdg_data_dirs = "", .sysfs_root = "/nonexistent-sys", .kernel_release = "6.1.0-test",
        .hook_path = cfg->nvidia_cdi_hook_path,
    };
    driver_files_clear(&inv->driver);
    driver_files_find(&o, &inv->driver);
}

static json_t *claim_spec(const struct config *cfg, const struct inventory *inv)
{
    struct dra_device dev = { .name = "gpu-0", .type = DRA_DEVICE_GPU, .gpu = 0 };
    const struct dra_device *devs[] = { &dev };
    struct error err = { 0 };
    json_t *spec = dra_cdi_spec(cfg, inv, "c1a1m000-0000-0000-0000-000000000001", devs, NULL, 1,
                                NULL, &err);
    CHECK(spec != NULL);
    json_object_set_new(spec, "cdiVersion", json_string(cdi_spec_version(spec)));
    return spec;
}

static bool same(json_t *got, json_t *want, const char *what)
{
    if (json_equal(got, want))
        return true;
    _cleanup_free_ char *g = json_dumps(got, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    _cleanup_free_ char *w = json_dumps(want, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fprintf(stderr, "%s differs\n--- got\n%s\n--- want\n%s\n", what, g, w);
    return false;
}

/* The host NVIDIA's fixture was written on. */
static void nvidia_fixture(const char *data)
{
    const char *root = scratch_dir("gdp-cdi-fixture-");
    put(root, "/usr/bin/nvidia-smi", "#!/bin/sh\n", 0755);
    put(root, LIBDIR "/libcuda.so." VER, "not an ELF file\n", 0755);
    copy(root, LIBDIR "/libnvidia-ml.so." VER, sim_lib);
    link_at(root, LIBDIR "/libnvidia-ml.so.1", "libnvidia-ml.so." VER);
    node(root, "/dev/nvidia0", 195, 0, 0644);
    node(root, "/dev/nvidia-modeset", 195, 252, 0644);
    node(root, "/dev/nvidia-uvm-tools", 195, 253, 0644);
    node(root, "/dev/nvidia-uvm", 195, 254, 0644);
    node(root, "/dev/nvidiactl", 195, 255, 0644);

    struct inventory inv;
    struct config cfg;
    fx_inventory(&inv, FX_A100, 1);
    config_for(&cfg, root, "/usr/bin/nvidia-cdi-hook");
    /* The fixture's harness set the hook path; we emit hooks only for a hook that exists,
     * looked for as it is, then under the root: put it where the second look finds it. */
    put(root, "/usr/bin/nvidia-cdi-hook", "#!/bin/sh\n", 0755);
    find(&inv, &cfg);
    CHECK(!inv.driver.hook_missing && !inv.driver.warnings);
    CHECK_STR(inv.driver.libcuda_dir, LIBDIR);

    json_t *spec = claim_spec(&cfg, &inv);
    json_t *raw = json_load_file(data, 0, NULL);
    CHECK(raw != NULL);
    json_t *want = placeholders(raw, root);
    CHECK(same(spec, want, "claim spec vs NVIDIA's"));
    json_decref(raw);
    json_decref(want);
    json_decref(spec);
    config_free(&cfg);
    fx_inventory_free(&inv);
    scratch_remove(root);
}

static json_t *common_of(json_t *spec)
{
    return json_object_get(spec, "containerEdits");
}

static bool has_string(json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
        if (streq(json_string_value(v), s))
            return true;
    return false;
}

static json_t *mount_at(json_t *spec, const char *ctr)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(common_of(spec), "mounts"), i, m)
        if (streq(json_string_value(json_object_get(m, "containerPath")), ctr))
            return m;
    return NULL;
}

static json_t *hook_args(json_t *spec, const char *name)
{
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(common_of(spec), "hooks"), i, h) {
        json_t *args = json_object_get(h, "args");
        if (has_string(args, name))
            return args;
    }
    return NULL;
}

/* A driver as the distribution packages it, and the ways a root can mislead. */
static void packaged(void)
{
    const char *root = scratch_dir("gdp-cdi-pkg-");
    copy(root, LIBDIR "/libcuda.so." VER, soname_lib);
    link_at(root, LIBDIR "/libcuda.so.1", "libcuda.so." VER);
    link_at(root, LIBDIR "/libcuda.so", "libcuda.so.1");
    copy(root, LIBDIR "/libnvidia-ml.so." VER, sim_lib);
    link_at(root, LIBDIR "/libnvidia-ml.so.1", "libnvidia-ml.so." VER);
    copy(root, LIBDIR "/vdpau/libvdpau_nvidia.so." VER, sim_lib);
    /* A library whose link leads out of the root: resolved inside it, where it is absent. */
    link_at(root, LIBDIR "/libnvidia-escape.so." VER, "../../../../../../../../etc/hostname");
    /* Ubuntu's usr-merge with an absolute link: nvcdi would leave the root here. */
    put(root, "/opt/nvidia/bin/nvidia-smi", "#!/bin/sh\n", 0755);
    mkdir_in(root, "/usr/bin");
    link_at(root, "/usr/bin/nvidia-smi", "/opt/nvidia/bin/nvidia-smi");
    put(root, "/lib/firmware/nvidia/" VER "/gsp_ga10x.bin", "fw", 0644);
    put(root, "/usr/share/vulkan/icd.d/nvidia_icd.json", "{}", 0644);
    put(root, "/usr/share/glvnd/egl_vendor.d/10_nvidia.json", "{}", 0644);
    /* Bound by its name inside its directory: under a long $TMPDIR the whole path is longer
     * than sun_path. */
    mkdir_in(root, "/run/nvidia-persistenced");
    _cleanup_free_ char *sock_dir = xasprintf("%s/run/nvidia-persistenced", root);
    int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "socket" };
    CHECK(cwd >= 0 && fd >= 0 && chdir(sock_dir) == 0);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(fchdir(cwd) == 0);
    close(fd);
    close(cwd);
    node(root, "/dev/nvidia0", 195, 0, 0666);
    node(root, "/dev/nvidiactl", 195, 255, 0666);
    node(root, "/dev/dri/renderD128", 226, 128, 0660);
    _cleanup_free_ char *render = xasprintf("%s/dev/dri/renderD128", root);
    CHECK(chown(render, 0, 109) == 0);
    node(root, "/dev/dri/card1", 226, 1, 0660);
    _cleanup_free_ char *card = xasprintf("%s/dev/dri/card1", root);
    CHECK(chown(card, 0, 44) == 0);
    mkdir_in(root, "/dev/dri/by-path");
    link_at(root, "/dev/dri/by-path/pci-0000:10:00.0-card", "../card1");
    link_at(root, "/dev/dri/by-path/pci-0000:10:00.0-render", "../renderD128");
    link_at(root, "/dev/dri/by-path/pci-0000:99:00.0-card", "../card9"); /* another GPU's */
    put(root, "/sys/bus/pci/devices/0000:10:00.0/drm/card1/dev", "226:1\n", 0644);
    put(root, "/sys/bus/pci/devices/0000:10:00.0/drm/renderD128/dev", "226:128\n", 0644);
    put(root, "/usr/bin/nvidia-ctk", "#!/bin/sh\n", 0755);

    struct inventory inv;
    struct config cfg;
    fx_inventory(&inv, FX_A100, 1);
    config_for(&cfg, root, "/usr/bin/nvidia-ctk");
    free(cfg.sysfs_root);
    cfg.sysfs_root = xasprintf("%s/sys", root);
    find(&inv, &cfg);
    json_t *spec = claim_spec(&cfg, &inv);

    /* The GPU's DRM nodes, their groups, and the by-path links of this GPU only. */
    json_t *dev = json_object_get(json_array_get(json_object_get(spec, "devices"), 0), "containerEdits");
    json_t *paths = json_array();
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(dev, "deviceNodes"), i, n)
        json_array_append(paths, json_object_get(n, "path"));
    json_t *want_paths = json_pack("[sss]", "/dev/nvidia0", "/dev/dri/card1", "/dev/dri/renderD128");
    CHECK(same(paths, want_paths, "GPU device nodes"));
    json_t *want_gids = json_pack("[ii]", 44, 109);
    CHECK(same(json_object_get(dev, "additionalGids"), want_gids, "additionalGids"));
    json_t *want_hooks = json_pack("[{s:s, s:s, s:[sssssss], s:[s]}]", "hookName", "createContainer",
                                   "path", "/usr/bin/nvidia-ctk", "args", "nvidia-ctk", "hook",
                                   "create-symlinks", "--link",
                                   "../card1::/dev/dri/by-path/pci-0000:10:00.0-card", "--link",
                                   "../renderD128::/dev/dri/by-path/pci-0000:10:00.0-render",
                                   "env", "NVIDIA_CTK_DEBUG=false");
    CHECK(same(json_object_get(dev, "hooks"), want_hooks, "by-path hook"));
    CHECK_STR(cdi_spec_version(spec), "0.7.0");
    json_decref(paths);
    json_decref(want_paths);
    json_decref(want_gids);
    json_decref(want_hooks);
    json_t *links = hook_args(spec, "create-symlinks");
    CHECK(links != NULL);
    if (links) {
        CHECK_STR(json_string_value(json_array_get(links, 0)), "nvidia-ctk");
        CHECK_STR(json_string_value(json_array_get(links, 1)), "hook");
        CHECK(has_string(links, "libcuda.so.1::" LIBDIR "/libcuda.so"));
        CHECK(has_string(links, "libcuda.so." VER "::" LIBDIR "/libcuda.so.1"));
        CHECK(has_string(links, "libnvidia-ml.so." VER "::" LIBDIR "/libnvidia-ml.so.1"));
        /* vdpau's SONAME link is not on the host: ldconfig makes it, not the hook. */
        CHECK(!has_string(links, "libvdpau_nvidia.so." VER "::" LIBDIR "/vdpau/libnvidia-ml.so.1"));
    }
    json_t *ld = hook_args(spec, "update-ldcache");
    CHECK(ld && has_string(ld, LIBDIR) && has_string(ld, LIBDIR "/vdpau"));
    CHECK(hook_args(spec, "enable-cuda-compat") &&
          has_string(hook_args(spec, "enable-cuda-compat"), "--host-driver-version=" VER));
    CHECK(hook_args(spec, "disable-device-node-modification") != NULL);
    CHECK(mount_at(spec, LIBDIR "/libcuda.so." VER) && mount_at(spec, LIBDIR "/vdpau/libvdpau_nvidia.so." VER));
    CHECK(!mount_at(spec, LIBDIR "/libnvidia-escape.so." VER) && !mount_at(spec, "/etc/hostname"));
    json_t *smi = mount_at(spec, "/usr/bin/nvidia-smi");
    _cleanup_free_ char *smi_host = xasprintf("%s/opt/nvidia/bin/nvidia-smi", root);
    CHECK(smi && streq(json_string_value(json_object_get(smi, "hostPath")), smi_host));
    CHECK(mount_at(spec, "/lib/firmware/nvidia/" VER "/gsp_ga10x.bin") != NULL);
    CHECK(mount_at(spec, "/etc/vulkan/icd.d/nvidia_icd.json") != NULL);
    CHECK(mount_at(spec, "/usr/share/glvnd/egl_vendor.d/10_nvidia.json") != NULL);
    json_t *ipc = mount_at(spec, "/run/nvidia-persistenced/socket");
    CHECK(ipc && !has_string(json_object_get(ipc, "options"), "ro") &&
          has_string(json_object_get(ipc, "options"), "noexec"));
    json_decref(spec);

    /* A group-only node: its gid, the edits' additionalGids and version 0.7.0; not with
     * no-additional-gids-for-device-nodes. */
    json_t *edits = cdi_device_edits(&cfg, (char *[]){ "/dev/nvidia0", "/dev/dri/renderD128", NULL });
    json_t *gids = json_pack("[i]", 109);
    CHECK(json_equal(json_object_get(edits, "additionalGids"), gids));
    json_decref(gids);
    json_decref(edits);
    char *flags[] = { "no-additional-gids-for-device-nodes", NULL };
    char **saved = cfg.cdi_feature_flags;
    cfg.cdi_feature_flags = flags;
    edits = cdi_device_edits(&cfg, (char *[]){ "/dev/dri/renderD128", NULL });
    CHECK(!json_object_get(edits, "additionalGids"));
    json_decref(edits);
    cfg.cdi_feature_flags = saved;

    /* --cdi-disable-hooks: by name, and all. */
    char *off[] = { "update-ldcache", NULL };
    char **saved_off = cfg.cdi_disable_hooks;
    cfg.cdi_disable_hooks = off;
    spec = claim_spec(&cfg, &inv);
    CHECK(!hook_args(spec, "update-ldcache") && hook_args(spec, "create-symlinks"));
    json_decref(spec);
    char *all[] = { "all", NULL };
    cfg.cdi_disable_hooks = all;
    spec = claim_spec(&cfg, &inv);
    CHECK(!json_object_get(common_of(spec), "hooks") || !json_array_size(json_object_get(common_of(spec), "hooks")));
    CHECK(!mount_at(spec, LIBDIR "/libcuda.so.1")); /* disabled is not missing */
    json_decref(spec);
    cfg.cdi_disable_hooks = saved_off;

    /* No hook binary: no hooks; the libraries also at their SONAMEs; one warning. */
    free(cfg.nvidia_cdi_hook_path);
    cfg.nvidia_cdi_hook_path = xstrdup("/nonexistent/nvidia-cdi-hook");
    find(&inv, &cfg);
    CHECK(inv.driver.hook_missing && inv.driver.warnings && !inv.driver.warnings[1]);
    CHECK(inv.driver.warnings && strstr(inv.driver.warnings[0], "/nonexistent/nvidia-cdi-hook"));
    spec = claim_spec(&cfg, &inv);
    CHECK(!json_object_get(common_of(spec), "hooks"));
    json_t *by_soname = mount_at(spec, LIBDIR "/libcuda.so.1");
    _cleanup_free_ char *cuda_host = xasprintf("%s" LIBDIR "/libcuda.so." VER, root);
    CHECK(by_soname && streq(json_string_value(json_object_get(by_soname, "hostPath")), cuda_host));
    CHECK(mount_at(spec, LIBDIR "/libnvidia-ml.so.1") != NULL);
    json_decref(spec);

    config_free(&cfg);
    fx_inventory_free(&inv);
    scratch_remove(root);
}

static bool has_warning(const struct inventory *inv, const char *text)
{
    for (char **w = inv->driver.warnings; w && *w; w++)
        if (strstr(*w, text))
            return true;
    return false;
}

/* Libraries in a directory of no fixed list: found through the root's ld.so.cache. */
static void through_ldcache(void)
{
    const char *root = scratch_dir("gdp-cdi-cache-");
    copy(root, "/opt/nv/lib/libcuda.so." VER, soname_lib);
    link_at(root, "/opt/nv/lib/libcuda.so.1", "libcuda.so." VER);
    put(root, "/etc/ld.so.conf", "/opt/nv/lib\n", 0644);
    _cleanup_free_ char *cmd = xasprintf("/sbin/ldconfig -r '%s' 2>&1", root);
    CHECK(system(cmd) == 0);
    struct inventory inv;
    struct config cfg;
    fx_inventory(&inv, FX_A100, 1);
    config_for(&cfg, root, "/bin/sh");
    find(&inv, &cfg);
    CHECK_STR(inv.driver.libcuda_dir, "/opt/nv/lib");
    /* libcuda without libnvidia-ml: one warning names the missing one and where it looked. */
    CHECK(inv.driver.warnings && !inv.driver.warnings[1] &&
          has_warning(&inv, "libnvidia-ml.so." VER " not found: looked in") &&
          has_warning(&inv, "/etc/ld.so.cache"));
    /* A driver root without a dev/: nvcdi's dev root is "/", so the host path is the plain
     * one; with --dev-root given apart from the driver root, under it. */
    json_t *node = cdi_device_node(&cfg, "/dev/nvidia0");
    CHECK_STR(json_string_value(json_object_get(node, "hostPath")), "/dev/nvidia0");
    json_decref(node);
    free(cfg.dev_root);
    cfg.dev_root = xstrdup("/run/dev-root");
    node = cdi_device_node(&cfg, "/dev/nvidia0");
    CHECK_STR(json_string_value(json_object_get(node, "hostPath")), "/run/dev-root/dev/nvidia0");
    json_decref(node);
    json_t *spec = claim_spec(&cfg, &inv);
    CHECK(mount_at(spec, "/opt/nv/lib/libcuda.so." VER) != NULL);
    CHECK(has_string(json_object_get(common_of(spec), "env"), "NVIDIA_CTK_LIBCUDA_DIR=/opt/nv/lib"));
    json_decref(spec);

    /* Nothing of the driver: one warning naming both files and where it looked. */
    _cleanup_free_ char *lib = xasprintf("%s/opt/nv/lib/libcuda.so." VER, root);
    CHECK(unlink(lib) == 0);
    find(&inv, &cfg);
    CHECK(!inv.driver.libcuda_dir && inv.driver.warnings);
    if (inv.driver.warnings) {
        const char *w = inv.driver.warnings[0];
        CHECK(strstr(w, "libcuda.so." VER) && strstr(w, "libnvidia-ml.so." VER));
        _cleanup_free_ char *looked = xasprintf("%s/usr/lib/x86_64-linux-gnu", root);
        CHECK(strstr(w, looked) && strstr(w, "/etc/ld.so.cache"));
    }
    spec = claim_spec(&cfg, &inv);
    CHECK(!json_object_get(common_of(spec), "mounts") && !json_object_get(common_of(spec), "hooks"));
    json_decref(spec);
    config_free(&cfg);
    fx_inventory_free(&inv);
    scratch_remove(root);
}

static void resolve_case(const char *root, const char *path, int want_r, const char *want)
{
    char *out = NULL;
    int r = driver_resolve_in_root(root, path, &out);
    if (r != want_r || (want && (!out || !streq(out, want))))
        fprintf(stderr, "resolve %s: %d %s, want %d %s\n", path, r, out ? out : "-", want_r,
                want ? want : "-");
    CHECK(r == want_r);
    if (want)
        CHECK_STR(out, want);
    free(out);
}

/* Symlinks resolved with the root as "/": absolute targets and ".." stay inside it. */
static void resolve(void)
{
    const char *root = scratch_dir("gdp-cdi-resolve-");
    put(root, "/usr/lib/real.so", "x", 0644);
    link_at(root, "/lib", "/usr/lib");
    link_at(root, "/usr/lib/abs.so", "/usr/lib/real.so");
    link_at(root, "/usr/lib/up.so", "../../../../../usr/lib/real.so");
    link_at(root, "/usr/lib/out.so", "/etc/passwd");
    link_at(root, "/usr/lib/loop.so", "loop.so");
    link_at(root, "/usr/lib/dir", "/usr");
    resolve_case(root, "/lib/real.so", 0, "/usr/lib/real.so");
    resolve_case(root, "/lib/abs.so", 0, "/usr/lib/real.so");
    resolve_case(root, "/usr/lib/up.so", 0, "/usr/lib/real.so");
    resolve_case(root, "/usr/lib/dir/lib/./real.so", 0, "/usr/lib/real.so");
    resolve_case(root, "/usr/lib/out.so", -ENOENT, NULL); /* the root's /etc/passwd: none */
    resolve_case(root, "/usr/lib/loop.so", -ELOOP, NULL);
    resolve_case(root, "/usr/lib/real.so/x", -ENOTDIR, NULL);
    resolve_case(root, "/..", 0, "/");
    scratch_remove(root);
}

/* A root that tries to make the search big: files past DRIVER_FILES_MAX are left out. */
static void bounds(void)
{
    const char *root = scratch_dir("gdp-cdi-bounds-");
    copy(root, LIBDIR "/libcuda.so." VER, soname_lib);
    for (int i = 0; i < DRIVER_FILES_MAX + 50; i++) {
        char name[64];
        snprintf(name, sizeof(name), LIBDIR "/libx%04d.so." VER, i);
        put(root, name, "", 0644);
    }
    struct inventory inv;
    struct config cfg;
    fx_inventory(&inv, FX_A100, 1);
    config_for(&cfg, root, "/bin/sh");
    find(&inv, &cfg);
    CHECK(inv.driver.n_mounts == DRIVER_FILES_MAX);
    CHECK(has_warning(&inv, "bound of 1024 files"));
    CHECK_STR(inv.driver.libcuda_dir, LIBDIR);
    config_free(&cfg);
    fx_inventory_free(&inv);
    scratch_remove(root);
}

int main(void)
{
    _cleanup_free_ char *data = fixture_path("GDP_TEST_DATA", "cdi/nvidia-claim-1gpu.json");
    sim_lib = getenv("GDP_SIM_NVML_LIB");
    soname_lib = getenv("GDP_SONAME_LIB");
    if (!sim_lib || !soname_lib) {
        fprintf(stderr, "GDP_SIM_NVML_LIB / GDP_SONAME_LIB not set (run it through meson test)\n");
        return 1;
    }
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: needs root (mknod, ldconfig -r)\n");
        return 77;
    }
    resolve();
    nvidia_fixture(data);
    packaged();
    through_ldcache();
    bounds();
    if (test_failures)
        fprintf(stderr, "%d failures\n", test_failures);
    return test_failures ? 1 : 0;
}
