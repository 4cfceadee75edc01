/* The NFD local feature file (labels.h): "key=value" lines, replaced atomically so
 * node-feature-discovery's worker never reads half a file. */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <sys/stat.h>

#include "labels/labels.h"

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = RETRY_EINTR(write(fd, buf, len));
        if (n < 0)
            return -errno;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static char *render(const struct labels *l, size_t *len)
{
    size_t size = 1;
    for (size_t i = 0; i < l->n; i++)
        size += strlen(l->items[i].key) + strlen(l->items[i].value) + 2;
    char *buf = xmalloc(size);
    size_t off = 0;
    for (size_t i = 0; i < l->n; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s=%s\n", l->items[i].key,
                                l->items[i].value);
    *len = off;
    return buf;
}

int labels_write_feature_file(const struct labels *l, const char *path, struct error *err)
{
    size_t len;
    _cleanup_free_ char *text = render(l, &len);
    int r;
    if (!path || !*path) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
            return error_set(err, -EIO, "writing labels to stdout: %s", strerror(errno));
        return 0;
    }
    _cleanup_free_ char *copy = xstrdup(path);
    _cleanup_free_ char *dir = xstrdup(dirname(copy));
    /* A hidden name NFD skips (it reads every file of features.d), unique per writer. */
    _cleanup_free_ char *tmp = xasprintf("%s/.gfd-tmp.XXXXXX", dir);
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "writing labels: creating a temporary file in %s: %s", dir,
                         strerror(errno));
    if ((r = write_all(fd, text, len)) < 0 || (fchmod(fd, 0644) < 0 && (r = -errno)) ||
        (fsync(fd) < 0 && (r = -errno))) {
        unlink(tmp);
        return error_set(err, r, "writing labels to %s: %s", tmp, strerror(-r));
    }
    if (rename(tmp, path) < 0) {
        r = -errno;
        unlink(tmp);
        return error_set(err, r, "writing labels: renaming %s to %s: %s", tmp, path,
                         strerror(-r));
    }
    /* The rename itself must survive a crash, or NFD may see the old labels after it. */
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        (void)fsync(dfd);
    return 0;
}

int labels_remove_feature_file(const char *path)
{
    if (!path || !*path)
        return 0;
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}
