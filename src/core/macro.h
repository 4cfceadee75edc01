/* Small helpers every module uses: cleanup attributes, ownership hand-off,
 * checked allocation.
 *
 * Error contract (the whole project follows it):
 *   - A fallible function returns int: 0 (or a count) on success, -errno on failure;
 *     or a pointer that is NULL on failure.
 *   - If it takes a `struct error *err`, it fills it only on failure, with a one-line
 *     message that names the file / field / ID involved; callers wrap context on the way
 *     up with error_prefix(). Both setters escape control bytes, so quoting a name
 *     someone else chose cannot break the line.
 *   - A function either logs an error or returns it, never both. Low layers return; the
 *     top of each request or event logs once.
 *   - Allocation failure aborts (xmalloc & co.): a device plugin that cannot allocate a
 *     few bytes cannot do anything useful, and the kubelet will restart it.
 */
#pragma once

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _public_ __attribute__((visibility("default")))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* Hand a pointer out of a _cleanup_ variable without it being freed. */
#define TAKE_PTR(p)                                                                   \
    ({                                                                                \
        __typeof__(p) _tp = (p);                                                      \
        (p) = NULL;                                                                   \
        _tp;                                                                          \
    })
#define TAKE_FD(fd)                                                                   \
    ({                                                                                \
        int _tf = (fd);                                                               \
        (fd) = -1;                                                                    \
        _tf;                                                                          \
    })

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Define a NULL-safe `name##p` cleanup wrapper around a free function. */
#define DEFINE_CLEANUP_FUNC(type, func)                                               \
    static inline void func##p(type **p)                                              \
    {                                                                                 \
        if (*p)                                                                       \
            func(*p);                                                                 \
    }

_noreturn_ void oom(void);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* realloc to n elements of size bytes; aborts on overflow. */
void *xreallocarray(void *p, size_t n, size_t size);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
_printf_(1, 2) char *xasprintf(const char *fmt, ...);

/* Copy src into dst (cap bytes, NUL included) with every control byte and DEL spelled
 * \n, \r, \t or \xNN, and with `backslash` a backslash as \\ too (so that the escaping
 * cannot be faked). Stops before an escape that would not fit whole. Returns the length.
 * The one home of the rule that text quoting someone else's bytes stays one line: used
 * by the error setters and by the text log. */
size_t escape_cntrl(char *dst, size_t cap, const char *src, bool backslash);

/* Grow *array (of *alloc elements of `size` bytes) so that it holds at least `need`. */
void *grow_array(void *array, size_t *alloc, size_t need, size_t size);

/* Retry-on-EINTR wrapper for syscalls returning -1/errno. */
#define RETRY_EINTR(expr)                                                             \
    ({                                                                                \
        __typeof__(expr) _r;                                                          \
        do {                                                                          \
            _r = (expr);                                                              \
        } while (_r < 0 && errno == EINTR);                                           \
        _r;                                                                           \
    })

static inline uint64_t u64_min(uint64_t a, uint64_t b) { return a < b ? a : b; }

static inline int streq(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* The name a program was started as (argv[0] without its directory): NVIDIA's image runs
 * each of its programs by name, ours are links to one binary that picks its mode from it. */
static inline const char *program_name(const char *argv0)
{
    const char *slash = argv0 ? strrchr(argv0, '/') : NULL;
    return slash ? slash + 1 : argv0 ? argv0 : "";
}
/* Both NULL, or equal strings. */
static inline int streq_ptr(const char *a, const char *b) { return a && b ? streq(a, b) : a == b; }
static inline int startswith(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}
