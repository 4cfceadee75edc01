/* The NFD local feature file (labels.h): "key=value" lines, replaced atomically
 * (core/fs.h) so node-feature-discovery's worker never reads half a file. */
#include <stdio.h>
#include <unistd.h>

#include "core/fs.h"
#include "labels/labels.h"

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
    /* A hidden temporary name beside it, which NFD skips (it reads every file of
     * features.d but dot-files); synced, the directory too: the rename itself must
     * survive a crash, or NFD may see the old labels after it. */
    if ((r = write_file_atomic(path, text, len, 0644, true)) < 0)
        return error_set(err, r, "writing labels to %s: %s", path, strerror(-r));
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
