/* Allocation that aborts on OOM (x* wrappers, grow_array) and the error object's
 * setters error_set()/error_prefix(), all declared in core/macro.h and core/error.h. */

#include <stdio.h>

#include "error.h"
#include "macro.h"

void oom(void)
{
    static const char msg[] = "F out of memory, aborting\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total))
        oom();
    return xrealloc(p, total);
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        oom();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return s;
}

void *grow_array(void *array, size_t *alloc, size_t need, size_t size)
{
    if (need <= *alloc)
        return array;
    size_t n = *alloc ? *alloc : 4;
    while (n < need) {
        if (__builtin_mul_overflow(n, (size_t)2, &n))
            oom();
    }
    array = xreallocarray(array, n, size);
    memset((char *)array + *alloc * size, 0, (n - *alloc) * size);
    *alloc = n;
    return array;
}

int error_set(struct error *err, int code, const char *fmt, ...)
{
    if (code >= 0)
        code = -EINVAL;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int error_prefix(struct error *err, const char *fmt, ...)
{
    if (!err)
        return -EINVAL;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    if (n < 0)
        return err->code;
    size_t plen = strnlen(prefix, sizeof(prefix) - 1) + 2; /* "<prefix>: " */
    size_t cap = sizeof(err->msg);
    if (plen >= cap)
        plen = cap - 1;
    size_t mlen = strnlen(err->msg, cap - 1);
    if (plen + mlen >= cap)
        mlen = cap - 1 - plen; /* truncate the tail, keep the context */
    memmove(err->msg + plen, err->msg, mlen);
    err->msg[plen + mlen] = 0;
    memcpy(err->msg, prefix, plen - 2);
    err->msg[plen - 2] = ':';
    err->msg[plen - 1] = ' ';
    return err->code;
}
