/* cdi-apply: build a container from CDI specs by hand, as a runtime (runc with the CDI
 * library) would, and run one command in it. For hosts that have the driver and nothing
 * else (scripts/gpu-smoke.sh section 8: no Python, no container runtime) and for the
 * tests that check our specs without containerd.
 *
 *   cdi-apply [-v] --spec FILE... --device KIND=NAME[,KIND=NAME]... --rootfs DIR
 *             [--bundle DIR] [--env NAME=VALUE]... [--bind-devices] [--] COMMAND [ARG]...
 *
 * In a new mount namespace (/ made rprivate: nothing leaks to the host, and every mount
 * goes when the process ends): the rootfs bound on itself, a tmpfs on its /dev with the
 * spec's device nodes made by mknod (or, where mknod is refused as under gVisor, or with
 * --bind-devices, the host's nodes bind-mounted), runc's default nodes, /dev/shm, proc and
 * (where the host allows) sysfs read-only; the spec's mounts in CDI's order, bind then
 * remounted with their flags, each destination made inside the rootfs without following a
 * link out of it; the prestart, createRuntime and createContainer hooks in that order, as
 * runc runs them (execve(path, args, env), the OCI state on stdin, <bundle>/config.json
 * with root.path; the bundle is the rootfs's parent unless --bundle says); chroot; the
 * startContainer hooks; the spec's additionalGids; exec of COMMAND with the env: a
 * runtime's default PATH, then --env, then the specs' (each replacing by name).
 *
 * Exit status: the command's; 2 bad usage; 3 this host will not let a container be built
 * (not root, no mount namespace, a mount or mknod and its fallback refused); 125 anything
 * else before the exec (the spec, a device not in it, a missing host file, a hook that
 * failed); 126/127 the command not runnable / not found. Every failure is one line
 * "cdi-apply: ..." on stderr naming the file or call; -v adds "cdi-apply| ..." lines. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cdi-apply.h"

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

bool verbose;

void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cdi-apply: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

void note(const char *fmt, ...)
{
    if (!verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("cdi-apply| ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void *xalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        die(EXIT_FAIL, "out of memory");
    return p;
}

char *xdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        die(EXIT_FAIL, "out of memory");
    return p;
}

char *strf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s;
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        die(EXIT_FAIL, "out of memory");
    return s;
}

/* What a host that cannot give us a container answers (gVisor, a container without
 * CAP_SYS_ADMIN, seccomp): not the spec's fault, and said apart by exit status 3. */
bool refused(int err)
{
    return err == EPERM || err == EACCES || err == ENOSYS || err == EOPNOTSUPP ||
           err == ENODEV || err == EINVAL;
}

void die_sys(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *what;
    if (vasprintf(&what, fmt, ap) < 0)
        what = (char *)fmt;
    va_end(ap);
    if (refused(err))
        die(EXIT_REFUSED, "%s: %s (refused by this host)", what, strerror(err));
    die(EXIT_FAIL, "%s: %s", what, strerror(err));
}

long long ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000LL + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

enum create { NO_CREATE, PARENTS, LAST_DIR, LAST_FILE };

/* root + path, path resolved as if root were / (securejoin's rule, as runc places mount
 * destinations): a link is followed, an absolute target starting again at root and ".."
 * stopping there, at most 40 of them; so no destination leads out of the rootfs. Missing
 * directories on the way are made (0755) unless NO_CREATE; the last component too, as a
 * directory or an empty file, for LAST_DIR/LAST_FILE. With PARENTS a last component that
 * is a link is not followed (the caller replaces it). */
static char *resolve(const char *root, const char *path, enum create create)
{
    char done[PATH_MAX] = "", rest[PATH_MAX], cand[PATH_MAX], full[PATH_MAX];
    if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
        die(EXIT_FAIL, "%s: path too long", path);
    int links = 0;
    for (char *p = rest;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchrnul(p, '/');
        int len = (int)(end - p);
        bool last = !end[strspn(end, "/")];
        if (len == 1 && p[0] == '.') {
            p = end;
            continue;
        }
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            char *s = strrchr(done, '/');
            if (s)
                *s = '\0';
            p = end;
            continue;
        }
        if (snprintf(cand, sizeof(cand), "%s/%.*s", done, len, p) >= (int)sizeof(cand) ||
            snprintf(full, sizeof(full), "%s%s", root, cand) >= (int)sizeof(full))
            die(EXIT_FAIL, "%s: path too long inside %s", path, root);
        struct stat st;
        if (lstat(full, &st) < 0) {
            if (errno != ENOENT || create == NO_CREATE)
                die_sys(errno, "%s: lstat %s", path, full);
            if (last && create == PARENTS)
                return xdup(full);
            if (!last || create == LAST_DIR) {
                if (mkdir(full, 0755) < 0)
                    die_sys(errno, "%s: mkdir %s", path, full);
            } else {
                int fd = open(full, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd < 0)
                    die_sys(errno, "%s: creating %s", path, full);
                close(fd);
            }
        } else if (S_ISLNK(st.st_mode) && !(last && create == PARENTS)) {
            if (++links > 40)
                die(EXIT_FAIL, "%s: more than 40 symbolic links inside %s", path, root);
            char target[PATH_MAX], next[PATH_MAX];
            ssize_t n = readlink(full, target, sizeof(target) - 1);
            if (n < 0)
                die_sys(errno, "%s: readlink %s", path, full);
            target[n] = '\0';
            if (snprintf(next, sizeof(next), "%s/%s", target, end) >= (int)sizeof(next))
                die(EXIT_FAIL, "%s: path too long inside %s", path, root);
            if (target[0] == '/')
                done[0] = '\0';
            memcpy(rest, next, sizeof(rest));
            p = rest;
            continue;
        }
        memcpy(done, cand, sizeof(done));
        p = end;
    }
    return strf("%s%s", root, done);
}

/* ---- mounts ------------------------------------------------------------------------ */

struct flag {
    const char *name;
    unsigned long set, clear;
};
static const struct flag mount_flags[] = {
    { "ro", MS_RDONLY, 0 }, { "rw", 0, MS_RDONLY }, { "nosuid", MS_NOSUID, 0 },
    { "suid", 0, MS_NOSUID }, { "nodev", MS_NODEV, 0 }, { "dev", 0, MS_NODEV },
    { "noexec", MS_NOEXEC, 0 }, { "exec", 0, MS_NOEXEC }, { "noatime", MS_NOATIME, 0 },
    { "atime", 0, MS_NOATIME }, { "nodiratime", MS_NODIRATIME, 0 },
    { "diratime", 0, MS_NODIRATIME }, { "relatime", MS_RELATIME, 0 },
    { "norelatime", 0, MS_RELATIME }, { "strictatime", MS_STRICTATIME, 0 },
    { "sync", MS_SYNCHRONOUS, 0 }, { "async", 0, MS_SYNCHRONOUS }, { "dirsync", MS_DIRSYNC, 0 },
};
static const struct flag propagation[] = {
    { "private", MS_PRIVATE, 0 }, { "rprivate", MS_PRIVATE | MS_REC, 0 },
    { "slave", MS_SLAVE, 0 }, { "rslave", MS_SLAVE | MS_REC, 0 },
    { "shared", MS_SHARED, 0 }, { "rshared", MS_SHARED | MS_REC, 0 },
    { "unbindable", MS_UNBINDABLE, 0 }, { "runbindable", MS_UNBINDABLE | MS_REC, 0 },
};

static const struct flag *find_flag(const struct flag *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

/* A bind mount's flags take effect on a remount. Where the source's own flags are locked
 * (a user namespace, gVisor) the kernel wants them kept: retry with them added. */
static int remount_bind(const char *dst, unsigned long flags)
{
    if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | flags, NULL) == 0)
        return 0;
    int err = errno;
    struct statvfs sv;
    if (err != EPERM || statvfs(dst, &sv) < 0)
        return errno = err, -1;
    static const struct { unsigned long st, ms; } keep[] = {
        { ST_RDONLY, MS_RDONLY }, { ST_NOSUID, MS_NOSUID }, { ST_NODEV, MS_NODEV },
        { ST_NOEXEC, MS_NOEXEC }, { ST_NOATIME, MS_NOATIME }, { ST_NODIRATIME, MS_NODIRATIME },
        { ST_RELATIME, MS_RELATIME },
    };
    for (size_t i = 0; i < ELEMENTSOF(keep); i++)
        if (sv.f_flag & keep[i].st)
            flags |= keep[i].ms;
    return mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | flags, NULL);
}

static void apply_mount(const char *root, const struct mnt *m)
{
    unsigned long flags = 0, prop = 0, bind = 0;
    char data[MAX_STR] = "";
    /* no type: a bind mount of a host path, as the CDI specs NVIDIA and we write mean */
    bool is_bind = !m->type || strcmp(m->type, "bind") == 0;
    for (size_t k = 0; k < m->n_opts; k++) {
        const char *o = m->opts[k];
        const struct flag *f = find_flag(mount_flags, ELEMENTSOF(mount_flags), o);
        const struct flag *p = find_flag(propagation, ELEMENTSOF(propagation), o);
        if (f) {
            flags = (flags | f->set) & ~f->clear;
        } else if (p) {
            prop = p->set;
        } else if (strcmp(o, "bind") == 0 || strcmp(o, "rbind") == 0) {
            is_bind = true;
            bind = MS_BIND | (o[0] == 'r' ? MS_REC : 0);
        } else {
            size_t len = strlen(data);
            if (len + strlen(o) + 2 > sizeof(data))
                die(EXIT_FAIL, "mount %s: options too long", m->ctr);
            snprintf(data + len, sizeof(data) - len, "%s%s", len ? "," : "", o);
        }
    }
    if (is_bind && *data)
        die(EXIT_FAIL, "mount %s: option(s) \"%s\" mean nothing to a bind mount", m->ctr, data);
    if (is_bind && m->host[0] != '/')
        die(EXIT_FAIL, "mount %s: hostPath \"%s\" is not an absolute path", m->ctr, m->host);
    enum create kind = LAST_DIR;
    struct stat st;
    if (is_bind) {
        if (stat(m->host, &st) < 0)
            die(EXIT_FAIL, "mount %s: hostPath %s: %s", m->ctr, m->host, strerror(errno));
        kind = S_ISDIR(st.st_mode) ? LAST_DIR : LAST_FILE;
    }
    _cleanup_free_ char *dst = resolve(root, m->ctr, kind);
    if (is_bind) {
        if (mount(m->host, dst, NULL, bind ? bind : MS_BIND, NULL) < 0)
            die_sys(errno, "mount %s: bind %s on %s", m->ctr, m->host, dst);
        if (flags && remount_bind(dst, flags) < 0)
            die_sys(errno, "mount %s: remount of the bind with its options", m->ctr);
    } else if (mount(m->host, dst, m->type, flags, *data ? data : NULL) < 0) {
        die_sys(errno, "mount %s: %s of type %s", m->ctr, m->host, m->type);
    }
    if (prop && mount(NULL, dst, NULL, prop, NULL) < 0)
        die_sys(errno, "mount %s: propagation", m->ctr);
}

/* ---- /dev, /proc, /sys ------------------------------------------------------------- */

/* The host's node bind-mounted where mknod was refused (gVisor) or not wanted. */
static void bind_node(const char *dst, const char *host, const char *ctr, int mknod_err,
                      bool report)
{
    struct stat st;
    if (stat(host, &st) < 0)
        die(EXIT_FAIL, "device node %s: %s%s%sno host node %s to bind: %s", ctr,
            mknod_err ? "mknod: " : "", mknod_err ? strerror(mknod_err) : "",
            mknod_err ? "; " : "", host, strerror(errno));
    int fd = open(dst, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        die_sys(errno, "device node %s: creating %s", ctr, dst);
    close(fd);
    if (mount(host, dst, NULL, MS_BIND, NULL) < 0) {
        int err = errno;
        if (mknod_err)
            die_sys(err, "device node %s: mknod: %s; bind-mount of the host's %s", ctr,
                    strerror(mknod_err), host);
        die_sys(err, "device node %s: bind-mount of the host's %s", ctr, host);
    }
    if (report)
        note("device %s: the host's %s bound%s%s%s", ctr, host, mknod_err ? " (mknod: " : "",
             mknod_err ? strerror(mknod_err) : "", mknod_err ? ")" : "");
}

/* As runc makes a node (and the CDI library completes one first): type and numbers from
 * the spec when it gives a type and a major, else from an lstat of hostPath (the path
 * when there is none); fileMode from the spec, else the host node's, else 0666. */
static void make_node(const char *root, const struct node *n, bool bind_only, bool report)
{
    const char *host = n->host_path ? n->host_path : n->path;
    char type = n->type;
    long long major = n->major, minor = n->minor, mode = n->mode;
    if (!(type && (major != 0 || type == 'p'))) {
        struct stat st;
        if (lstat(host, &st) < 0)
            die(EXIT_FAIL, "device node %s: lstat %s: %s", n->path, host, strerror(errno));
        char t = S_ISCHR(st.st_mode)    ? 'c'
                 : S_ISBLK(st.st_mode)  ? 'b'
                 : S_ISFIFO(st.st_mode) ? 'p'
                                        : 0;
        if (!t)
            die(EXIT_FAIL, "device node %s: %s is not a device", n->path, host);
        if (type && type != t && !(type == 'u' && t == 'c'))
            die(EXIT_FAIL, "device node %s: type %c in the spec, the host's %s is %c", n->path,
                type, host, t);
        type = t;
        if (major == 0 && type != 'p') {
            major = major(st.st_rdev);
            minor = minor(st.st_rdev);
        }
        if (mode < 0)
            mode = st.st_mode & 07777;
    }
    if (mode < 0)
        mode = 0666;
    _cleanup_free_ char *dst = resolve(root, n->path, PARENTS);
    if (unlink(dst) < 0 && errno != ENOENT)
        die_sys(errno, "device node %s: unlink %s", n->path, dst);
    int mknod_err = 0;
    if (!bind_only) {
        mode_t fmt = type == 'b' ? S_IFBLK : type == 'p' ? S_IFIFO : S_IFCHR;
        if (mknod(dst, fmt | (mode_t)(mode & 0777), makedev(major, minor)) == 0) {
            if (chmod(dst, (mode_t)mode) < 0 ||
                chown(dst, n->uid >= 0 ? (uid_t)n->uid : 0, n->gid >= 0 ? (gid_t)n->gid : 0) < 0)
                die_sys(errno, "device node %s: chmod/chown %s", n->path, dst);
            if (report)
                note("device %s: mknod %c %lld:%lld %04llo", n->path, type, major, minor, mode);
            return;
        }
        mknod_err = errno;
        if (!refused(mknod_err))
            die_sys(mknod_err, "device node %s: mknod %s", n->path, dst);
    }
    bind_node(dst, host, n->path, mknod_err, report);
}

static void setup_dev_proc_sys(const char *root, const struct edits *e, bool bind_devices)
{
    /* Only the mode as option: a sandbox's tmpfs (gVisor) may know no other. */
    _cleanup_free_ char *dev = resolve(root, "/dev", LAST_DIR);
    if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") < 0)
        die_sys(errno, "mount tmpfs on %s", dev);
    /* /dev/shm as runc makes it; CUDA's IPC uses it, a 1 MiB cuMemAlloc does not */
    _cleanup_free_ char *shm = resolve(root, "/dev/shm", LAST_DIR);
    if (mount("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777") < 0)
        note("no /dev/shm tmpfs in the container: %s", strerror(errno));
    _cleanup_free_ char *proc = resolve(root, "/proc", LAST_DIR);
    if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        die_sys(errno, "mount proc on %s", proc);
    /* sysfs as runc mounts it; not needed for cuInit (docs: the smallest working set), so
     * a host that refuses it gets a container without it rather than none. */
    _cleanup_free_ char *sys = resolve(root, "/sys", LAST_DIR);
    if (mount("sysfs", sys, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        note("no sysfs in the container: mount sysfs: %s", strerror(errno));
    for (size_t i = 0; i < e->n_nodes; i++)
        make_node(root, &e->nodes[i], bind_devices, true);
    /* runc's default devices and links, where the spec did not put a node */
    static const struct { const char *path; int major, minor; } defaults[] = {
        { "/dev/null", 1, 3 }, { "/dev/zero", 1, 5 }, { "/dev/full", 1, 7 },
        { "/dev/random", 1, 8 }, { "/dev/urandom", 1, 9 }, { "/dev/tty", 5, 0 },
    };
    for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
        _cleanup_free_ char *p = strf("%s%s", root, defaults[i].path);
        struct stat st;
        if (lstat(p, &st) == 0)
            continue;
        struct node n = { .path = (char *)defaults[i].path, .type = 'c', .major = defaults[i].major,
                          .minor = defaults[i].minor, .mode = 0666, .uid = -1, .gid = -1 };
        make_node(root, &n, bind_devices, false);
    }
    static const char *const links[][2] = {
        { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
        { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
    };
    for (size_t i = 0; i < ELEMENTSOF(links); i++) {
        _cleanup_free_ char *p = strf("%s/%s", dev, links[i][1]);
        if (symlink(links[i][0], p) < 0 && errno != EEXIST)
            die_sys(errno, "symlink %s", p);
    }
}

/* ---- main -------------------------------------------------------------------------- */

_noreturn_ static void exec_command(char **argv, char **envp)
{
    if (strchr(argv[0], '/')) {
        execve(argv[0], argv, envp);
        die(errno == ENOENT ? 127 : 126, "exec %s in the container: %s", argv[0], strerror(errno));
    }
    const char *path = &DEFAULT_PATH[5]; /* after "PATH=" */
    for (char **v = envp; *v; v++)
        if (strncmp(*v, "PATH=", 5) == 0)
            path = *v + 5;
    int err = ENOENT;
    for (const char *d = path; *d;) {
        size_t n = strcspn(d, ":");
        _cleanup_free_ char *cand = strf("%.*s/%s", n ? (int)n : 1, n ? d : ".", argv[0]);
        execve(cand, argv, envp);
        if (errno != ENOENT && errno != ENOTDIR)
            err = errno;
        d += n + (d[n] == ':');
    }
    die(err == ENOENT ? 127 : 126, "exec %s in the container (PATH=%s): %s", argv[0], path,
        strerror(err));
}

static const char usage[] =
    "usage: cdi-apply [-v] --spec FILE... --device KIND=NAME[,KIND=NAME]... --rootfs DIR\n"
    "                 [--bundle DIR] [--env NAME=VALUE]... [--bind-devices] [--] COMMAND [ARG]...";

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "spec", required_argument, NULL, 's' }, { "device", required_argument, NULL, 'd' },
        { "rootfs", required_argument, NULL, 'r' }, { "bundle", required_argument, NULL, 'b' },
        { "env", required_argument, NULL, 'e' }, { "bind-devices", no_argument, NULL, 'B' },
        { "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' }, { 0 },
    };
    char *specs[MAX_SPECS], *ids[MAX_DEVICES];
    size_t n_specs = 0, n_ids = 0;
    const char *rootfs_arg = NULL, *bundle_arg = NULL;
    bool bind_devices = false;
    struct edits e = { 0 };
    umask(022);
    env_set(&e, DEFAULT_PATH); /* a runtime's default, before the image's and the spec's */
    for (int c; (c = getopt_long(argc, argv, "+s:d:r:b:e:Bvh", opts, NULL)) != -1;) {
        switch (c) {
        case 's':
            if (n_specs == MAX_SPECS)
                die(EXIT_USAGE, "more than %d --spec", MAX_SPECS);
            specs[n_specs++] = optarg;
            break;
        case 'd':
            for (char *save = NULL, *id = strtok_r(optarg, ",", &save); id;
                 id = strtok_r(NULL, ",", &save)) {
                if (!strchr(id, '=') || id[0] == '=' || !strchr(id, '/'))
                    die(EXIT_USAGE, "--device %s: not a CDI device name (vendor/class=name)", id);
                if (n_ids == MAX_DEVICES)
                    die(EXIT_USAGE, "more than %d devices", MAX_DEVICES);
                ids[n_ids++] = id;
            }
            break;
        case 'r': rootfs_arg = optarg; break;
        case 'b': bundle_arg = optarg; break;
        case 'e':
            if (!strchr(optarg, '=') || optarg[0] == '=' || strlen(optarg) >= MAX_STR)
                die(EXIT_USAGE, "--env %s: not NAME=VALUE", optarg);
            env_set(&e, optarg);
            break;
        case 'B': bind_devices = true; break;
        case 'v': verbose = true; break;
        case 'h': puts(usage); return 0;
        default: die(EXIT_USAGE, "%s", usage);
        }
    }
    char **cmd = argv + optind;
    if (!n_specs || !n_ids || !rootfs_arg || !*cmd)
        die(EXIT_USAGE, "--spec, --device, --rootfs and a command are needed\n%s", usage);

    /* Everything that can be checked without privileges first: a bad spec says so the
     * same way for everyone. */
    edits_load(&e, specs, n_specs, ids, n_ids);
    char *rootfs = realpath(rootfs_arg, NULL);
    struct stat st;
    if (!rootfs || stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
        die(EXIT_FAIL, "--rootfs %s: not a directory%s%s", rootfs_arg, rootfs ? "" : ": ",
            rootfs ? "" : strerror(errno));
    if (strcmp(rootfs, "/") == 0)
        die(EXIT_USAGE, "--rootfs /: refusing the host's own root");
    char *bundle = bundle_arg ? realpath(bundle_arg, NULL) : strf("%.*s",
                   (int)(strrchr(rootfs, '/') - rootfs), rootfs);
    if (!bundle || !*bundle)
        die(EXIT_FAIL, "--bundle %s: %s", bundle_arg ? bundle_arg : "(the rootfs's parent)",
            bundle ? "is /" : strerror(errno));
    note("%zu device(s), %zu env, %zu device node(s), %zu mount(s), %zu hook(s); rootfs %s",
         n_ids, e.n_env, e.n_nodes, e.n_mounts, e.n_hooks, rootfs);
    if (geteuid() != 0)
        die(EXIT_REFUSED, "building a container needs root (unshare, mount, mknod, chroot); "
            "running as uid %u", (unsigned)geteuid());
    if (e.n_hooks)
        write_config(bundle, rootfs, &e, cmd);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (unshare(CLONE_NEWNS) < 0)
        die_sys(errno, "unshare(CLONE_NEWNS)");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die_sys(errno, "making / rprivate in the new mount namespace");
    /* The rootfs a mount of its own, and without the nosuid/nodev/noexec of the mount it
     * lies on ($TMPDIR often has them); a host that will not drop them keeps them, and a
     * later exec or open says so. */
    if (mount(rootfs, rootfs, NULL, MS_BIND | MS_REC, NULL) < 0)
        die_sys(errno, "bind-mounting %s on itself", rootfs);
    if (mount(NULL, rootfs, NULL, MS_BIND | MS_REMOUNT, NULL) < 0)
        note("the rootfs keeps its mount's flags: remount: %s", strerror(errno));
    setup_dev_proc_sys(rootfs, &e, bind_devices);
    for (size_t i = 0; i < e.n_mounts; i++)
        apply_mount(rootfs, &e.mounts[i]);
    note("mounts and device nodes in place, %lld ms", ms_since(&t0));
    run_hooks(&e, HOOK_PRESTART, HOOK_CREATE_CONTAINER, bundle, bundle);
    if (chdir(rootfs) < 0 || chroot(".") < 0 || chdir("/") < 0)
        die_sys(errno, "chroot %s", rootfs);
    run_hooks(&e, HOOK_START_CONTAINER, HOOK_START_CONTAINER, bundle, "/");
    if (e.n_gids && setgroups(e.n_gids, e.gids) < 0)
        die_sys(errno, "setgroups (the spec's additionalGids)");
    note("exec %s, %lld ms after unshare", cmd[0], ms_since(&t0));
    exec_command(cmd, e.env);
}
