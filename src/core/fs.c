/* Filesystem helpers declared in core/fs.h (mkdir -p with a mode, a bounded read). */

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "macro.h"

int mkdir_p(const char *path, mode_t mode)
{
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
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
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

bool fs_same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}
