/* Small filesystem helpers. */
#pragma once

#include <sys/types.h>

/* mkdir -p: create path and its missing parents with mode. Returns 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);
