/* nvml-sim-render --driver-root: what NVIDIA's packages put on a host, for the driver
 * version of the profile, laid out as Debian/Ubuntu install it (or with --libdir as RHEL
 * does): the versioned libraries with their SONAME links, nvidia-smi, GSP firmware and the
 * persistenced socket. The CDI code locates these by name and version and bind-mounts them
 * into containers, so each is a real file of its own (a copy, never a link into the build
 * directory) and the libraries are real ELF objects with the real SONAMEs: ldconfig and
 * the loader inside a container treat them as they treat NVIDIA's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "core/fs.h"
#include "core/macro.h"
#include "render-driver.h"
#include "sim-env.h"

static int fail(const char *call, const char *path, int err)
{
    fprintf(stderr, "nvml-sim-render: %s %s: %s\n", call, path, strerror(err));
    return -err;
}

static int make_parent(const char *path)
{
    _cleanup_free_ char *parent = xstrdup(path);
    *strrchr(parent, '/') = 0;
    int r = mkdir_p(parent, 0755);
    return r < 0 ? fail("mkdir", parent, -r) : 0;
}

/* Whatever a previous render left at path goes first (a link where a file is wanted, or
 * the reverse, or a socket). */
static int remove_old(const char *path)
{
    return unlink(path) < 0 && errno != ENOENT ? fail("unlink", path, errno) : 0;
}

static int copy_file(const char *src, const char *dst, mode_t mode)
{
    int r = make_parent(dst);
    if (r < 0 || (r = remove_old(dst)) < 0)
        return r;
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return fail("open", src, errno);
    _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (out < 0)
        return fail("create", dst, errno);
    char buf[65536];
    for (;;) {
        ssize_t n = RETRY_EINTR(read(in, buf, sizeof(buf)));
        if (n < 0)
            return fail("read", src, errno);
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = RETRY_EINTR(write(out, buf + off, (size_t)(n - off)));
            if (w < 0)
                return fail("write", dst, errno);
            off += w;
        }
    }
    /* The mode as a package installs it, whatever the umask. */
    if (fchmod(out, mode) < 0)
        return fail("fchmod", dst, errno);
    return 0;
}

static int link_or_remove(const char *target, const char *path, bool want)
{
    int r = remove_old(path);
    if (r < 0 || !want)
        return r;
    return symlink(target, path) < 0 ? fail("symlink", path, errno) : 0;
}

/* A listening-capable AF_UNIX socket inode, as nvidia-persistenced leaves one: bound, then
 * closed (the inode stays). Bound by its name inside its directory: the path may be
 * longer than sun_path. */
static int make_socket(const char *path)
{
    int r = make_parent(path);
    if (r < 0 || (r = remove_old(path)) < 0)
        return r;
    _cleanup_free_ char *dir = xstrdup(path);
    char *base = strrchr(dir, '/');
    *base++ = 0;
    _cleanup_close_ int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0)
        return fail("open", ".", errno);
    if (chdir(dir) < 0)
        return fail("chdir", dir, errno);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", base);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int err = fd < 0 ? errno : bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? errno : 0;
    if (fchdir(cwd) < 0 && !err)
        err = errno;
    return err ? fail("bind", path, err) : 0;
}

/* Relative and without "..": the libdir stays inside the driver root. */
static bool safe_relative(const char *p)
{
    if (!*p || *p == '/')
        return false;
    for (const char *c = p;;) {
        if (startswith(c, "../") || streq(c, ".."))
            return false;
        if (!(c = strchr(c, '/')))
            return true;
        c++;
    }
}

/* The settings file (sim-env.h): one "NAME=VALUE" line each, or no file at all, so that a
 * render without settings leaves no earlier render's behind. */
static int write_sim_env(const char *lib, const struct driver_root_opts *o)
{
    _cleanup_free_ char *path = xasprintf("%s/" SIM_ENV_FILE, lib);
    if (o->n_sim_env == 0)
        return remove_old(path);
    _cleanup_free_ char *text = xstrdup("# the simulator's settings (sim/nvml/sim-env.h): a variable set in\n"
                                        "# the environment of the process that loads the library wins\n");
    for (unsigned i = 0; i < o->n_sim_env; i++) {
        const char *kv = o->sim_env[i], *eq = strchr(kv, '=');
        if (!startswith(kv, "MOCK_") || !eq || strchr(kv, '\n')) {
            fprintf(stderr, "nvml-sim-render: --sim-env %s: want MOCK_<NAME>=<value> on one line\n", kv);
            return -EINVAL;
        }
        char *next = xasprintf("%s%s\n", text, kv);
        free(text);
        text = next;
    }
    int r = write_file_atomic(path, text, strlen(text), 0644, false);
    return r < 0 ? fail("write", path, -r) : 0;
}

int render_driver_root(const char *version, const struct driver_root_opts *o)
{
    if (!*version || strchr(version, '/') || streq(version, "..")) {
        fprintf(stderr, "nvml-sim-render: driver version '%s' cannot name files\n", version);
        return -EINVAL;
    }
    if (!safe_relative(o->libdir)) {
        fprintf(stderr, "nvml-sim-render: --libdir %s: want a path relative to the driver root\n", o->libdir);
        return -EINVAL;
    }
    _cleanup_free_ char *lib = xasprintf("%s/%s", o->root, o->libdir);
    _cleanup_free_ char *cuda = xasprintf("%s/libcuda.so.%s", lib, version);
    _cleanup_free_ char *cuda1 = xasprintf("%s/libcuda.so.1", lib);
    _cleanup_free_ char *cuda_dev = xasprintf("%s/libcuda.so", lib);
    _cleanup_free_ char *ml = xasprintf("%s/libnvidia-ml.so.%s", lib, version);
    _cleanup_free_ char *ml1 = xasprintf("%s/libnvidia-ml.so.1", lib);
    _cleanup_free_ char *cuda_name = xasprintf("libcuda.so.%s", version);
    _cleanup_free_ char *ml_name = xasprintf("libnvidia-ml.so.%s", version);
    _cleanup_free_ char *smi = xasprintf("%s/usr/bin/nvidia-smi", o->root);
    _cleanup_free_ char *mps = xasprintf("%s/usr/bin/nvidia-cuda-mps-control", o->root);
    _cleanup_free_ char *fw = xasprintf("%s/lib/firmware/nvidia/%s/gsp_ga10x.bin", o->root, version);
    _cleanup_free_ char *sock = xasprintf("%s/run/nvidia-persistenced/socket", o->root);
    int r;
    if ((r = copy_file(o->libcuda, cuda, 0644)) < 0 || (r = copy_file(o->libnvidia_ml, ml, 0644)) < 0 ||
        (r = link_or_remove(cuda_name, cuda1, o->host_links)) < 0 ||
        (r = link_or_remove("libcuda.so.1", cuda_dev, o->host_links)) < 0 ||
        (r = link_or_remove(ml_name, ml1, o->host_links)) < 0 || (r = copy_file(o->nvidia_smi, smi, 0755)) < 0 ||
        (r = copy_file(o->mps_control, mps, 0755)) < 0 || (r = write_sim_env(lib, o)) < 0)
        return r;
    /* Firmware is only located and mounted, never read: its content does not matter. */
    _cleanup_free_ char *fw_text = xasprintf("simulated GSP firmware, driver %s\n", version);
    r = make_parent(fw);
    if (r < 0 || (r = remove_old(fw)) < 0)
        return r;
    r = write_file_atomic(fw, fw_text, strlen(fw_text), 0644, false);
    if (r < 0)
        return fail("write", fw, -r);
    return make_socket(sock);
}
