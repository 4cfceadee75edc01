/* Filesystem helpers declared in core/fs.h (mkdir -p with a mode, a bounded read, a file
 * moved aside, the atomic writers). */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "macro.h"

int mkdir_p(const char *path, mode_t mode)
{
    /* The whole path first: it nearly always exists (DRA's Prepare asks for the CDI
     * root on every claim), and then one syscall answers instead of one per component. */
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    if (errno != ENOENT)
        return -errno;
    _cleanup_free_ char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int read_fd_bounded(int fd, size_t hint, size_t max, char **out, size_t *len)
{
    /* Sized by the hint, not by the bound: a buffer of max bytes for a 200-byte file is
     * mmapped and freed by glibc, which then raises its mmap threshold to that size
     * (docs/benchmarks.md, "Memory"). Grown in doubling steps, never past max + 1. */
    size_t cap = (hint < max ? hint : max) + 1, n = 0;
    _cleanup_free_ char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max)
                return -EFBIG;
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = RETRY_EINTR(read(fd, buf + n, cap - n));
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max)
            return -EFBIG;
    }
    buf[n] = '\0';
    *out = TAKE_PTR(buf);
    *len = n;
    return 0;
}

int read_file_bounded(const char *path, size_t max, char **out, size_t *len, struct stat *st)
{
    return read_file_bounded_flags(path, 0, max, out, len, st);
}

int read_file_bounded_flags(const char *path, int flags, size_t max, char **out, size_t *len,
                            struct stat *st)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | flags);
    if (fd < 0)
        return -errno;
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return -errno;
    if (!S_ISREG(sb.st_mode))
        return -EINVAL;
    if (sb.st_size > (off_t)max)
        return -EFBIG;
    int r = read_fd_bounded(fd, (size_t)sb.st_size, max, out, len);
    if (r == 0 && st)
        *st = sb;
    return r;
}

const char *fs_type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symbolic link";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    default: return "a file of unknown type";
    }
}

int fs_move_aside(const char *path, const char *suffix, char **aside)
{
    for (int i = 0; i <= FS_ASIDE_MAX; i++) {
        _cleanup_free_ char *to = i ? xasprintf("%s%s.%d", path, suffix, i)
                                    : xasprintf("%s%s", path, suffix);
        if (rename(path, to) == 0) {
            *aside = TAKE_PTR(to);
            return 0;
        }
        /* Only a name blocked by a directory (or a file where a directory moves) takes
         * the next one; anything else fails the same way for every name. */
        if (errno != EISDIR && errno != ENOTDIR && errno != ENOTEMPTY && errno != EEXIST)
            return -errno;
    }
    return -ENOTEMPTY;
}

bool fs_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static char *dir_of(const char *path)
{
    char *copy = xstrdup(path);
    char *slash = strrchr(copy, '/');
    if (!slash)
        return strcpy(copy, ".");
    slash[slash == copy] = 0; /* "/file": the directory is "/" */
    return copy;
}

int fs_stage_open(struct fs_stage *s, const char *path)
{
    fs_stage_abort(s);
    _cleanup_free_ char *dir = dir_of(path);
    const char *slash = strrchr(path, '/');
    char *tmp = xasprintf("%s/.%s.XXXXXX", dir, slash ? slash + 1 : path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int r = -errno;
        free(tmp);
        return r;
    }
    *s = (struct fs_stage){ .fd = fd, .path = xstrdup(path), .tmp = tmp };
    return 0;
}

static void stage_close(struct fs_stage *s)
{
    close(s->fd);
    free(s->path);
    free(s->tmp);
    *s = (struct fs_stage){ 0 };
}

void fs_stage_abort(struct fs_stage *s)
{
    if (!s->tmp)
        return;
    (void)unlink(s->tmp);
    stage_close(s);
}

int fs_stage_commit(struct fs_stage *s, const void *data, size_t len, mode_t mode, bool sync)
{
    if (!s->tmp)
        return -EBADF;
    int r = 0;
    for (const char *p = data; len > 0;) {
        ssize_t n = RETRY_EINTR(write(s->fd, p, len));
        if (n < 0) {
            r = -errno;
            break;
        }
        p += n;
        len -= (size_t)n;
    }
    if (r == 0 && (fchmod(s->fd, mode) < 0 || (sync && fsync(s->fd) < 0) || rename(s->tmp, s->path) < 0))
        r = -errno;
    if (r < 0) {
        fs_stage_abort(s);
        return r;
    }
    _cleanup_free_ char *dir = sync ? dir_of(s->path) : NULL;
    stage_close(s);
    if (dir) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
            (void)fsync(dfd);
    }
    return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync)
{
    struct fs_stage s = { 0 };
    int r = fs_stage_open(&s, path);
    return r < 0 ? r : fs_stage_commit(&s, data, len, mode, sync);
}

int fs_aside_irregular(const char *path, const char *suffix, const char **what, char **aside)
{
    struct stat st;
    if (lstat(path, &st) < 0 || S_ISREG(st.st_mode))
        return 0;
    *what = fs_type_name(st.st_mode);
    int r = fs_move_aside(path, suffix, aside);
    return r < 0 ? r : 1;
}

/* fs_aside_irregular during a write: told to the owner, and the write goes on. */
static int exchange_aside(const struct fs_exchange *x, const char *path, struct error *err)
{
    const char *what = NULL;
    _cleanup_free_ char *aside = NULL;
    int r = fs_aside_irregular(path, x->aside_suffix, &what, &aside);
    if (r < 0)
        return error_set(err, r, "%s %s is %s, not a regular file, and moving it aside failed: %s",
                         x->noun, path, what, strerror(-r));
    if (r > 0 && x->on_aside)
        x->on_aside(path, what, aside, x->userdata);
    return r;
}

/* The spare, opened to be written: without blocking (O_NONBLOCK: a FIFO without a reader
 * fails with ENXIO instead of waiting for one, forever, on the loop) or following a symlink,
 * and a regular file (checked after the open: a FIFO with a reader opens). Anything else is
 * set aside and the spare made anew, once. An fd, or -errno (err). */
static int open_spare(const struct fs_exchange *x, struct error *err)
{
    for (int tries = 0;; tries++) {
        int fd = open(x->spare, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                      O_CLOEXEC | (tries ? O_EXCL : 0), x->mode);
        struct stat st;
        int r = fd < 0 || fstat(fd, &st) < 0 ? -errno : 0;
        if (r == 0 && S_ISREG(st.st_mode))
            return fd;
        if (fd >= 0)
            close(fd);
        int moved = tries == 0 ? exchange_aside(x, x->spare, err) : 0;
        if (moved < 0)
            return moved;
        if (moved == 0)
            return error_set(err, r < 0 ? r : -EINVAL, "writing %s %s: %s", x->noun, x->spare,
                             strerror(r < 0 ? -r : EINVAL));
    }
}

int fs_write_exchange(const struct fs_exchange *x, const void *data, size_t len, struct error *err)
{
    int r;
    _cleanup_close_ int fd = open_spare(x, err);
    if (fd < 0)
        return fd;
    if (fchmod(fd, x->mode) < 0)
        goto fail;
    for (const char *p = data, *end = p + len; p < end;) {
        ssize_t n = RETRY_EINTR(write(fd, p, (size_t)(end - p)));
        if (n < 0)
            goto fail;
        p += n;
    }
    /* Shorter than what the spare held: the rest goes (never to size 0, which would make
     * ext4 flush it at close). */
    if (ftruncate(fd, (off_t)len) < 0)
        goto fail;
    if ((r = exchange_aside(x, x->path, err)) < 0)
        return r;
    if (renameat2(AT_FDCWD, x->spare, AT_FDCWD, x->path, RENAME_EXCHANGE) == 0)
        return 0;
    if ((errno != ENOENT && errno != EINVAL && errno != ENOSYS) || rename(x->spare, x->path) < 0)
        goto fail;
    return 0;
fail:
    return error_set(err, -errno, "writing %s %s: %s", x->noun, x->path, strerror(errno));
}
