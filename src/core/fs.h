/* Small filesystem helpers. */
#pragma once

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* mkdir -p: create path and its missing parents with mode. Returns 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);

/* The whole of a regular file, NUL-terminated (*len excludes the NUL), at most max bytes.
 * Opened non-blocking, so a FIFO or device named by someone else fails the regular-file
 * check (-EINVAL) instead of blocking the loop; -EFBIG past max. st (optional) gets the
 * file's stat. Returns 0 or -errno. */
int read_file_bounded(const char *path, size_t max, char **out, size_t *len, struct stat *st);
