/* Filesystem helpers declared in core/fs.h (mkdir -p with a mode). */

#include <sys/stat.h>

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
