/* Where the C tests find their fixture files: $GDP_TEST_DATA (tests/data) or
 * $GDP_SOURCE_DIR, both set by tests/meson.build. A missing fixture is a broken checkout,
 * not an unsupported host: the test stops before it starts, with one line naming the
 * file and exit status 1 (never 77, which meson counts as a skip). */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* path itself if it exists; otherwise "<program>: missing fixture <path>" and exit(1). */
static inline const char *fixture_check(const char *path)
{
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "%s: missing fixture %s\n", program_invocation_short_name, path);
        exit(1);
    }
    return path;
}

/* fixture_check of "<dir>/<file>": a folder's fixtures checked before any is used. */
static inline void fixture_check_in(const char *dir, const char *file)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, file) < 0)
        abort();
    fixture_check(p);
    free(p);
}

/* "$<env>/<rel>" (malloc'd), checked with fixture_check. */
static inline char *fixture_path(const char *env, const char *rel)
{
    const char *base = getenv(env);
    char *p;
    if (!base) {
        fprintf(stderr, "%s: %s is not set (run it through meson test)\n",
                program_invocation_short_name, env);
        exit(1);
    }
    if (asprintf(&p, "%s/%s", base, rel) < 0)
        abort();
    fixture_check(p);
    return p;
}
