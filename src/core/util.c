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

size_t escape_cntrl(char *dst, size_t cap, const char *src, bool backslash)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (!cap)
        return 0;
    for (; *src; src++) {
        unsigned char c = (unsigned char)*src;
        bool plain = c >= 0x20 && c != 0x7f && (c != '\\' || !backslash);
        size_t need = plain ? 1 : (c == '\n' || c == '\r' || c == '\t' || c == '\\') ? 2 : 4;
        if (n + need >= cap)
            break;
        if (plain) {
            dst[n++] = (char)c;
            continue;
        }
        dst[n++] = '\\';
        switch (c) {
        case '\\': dst[n++] = '\\'; break;
        case '\n': dst[n++] = 'n'; break;
        case '\r': dst[n++] = 'r'; break;
        case '\t': dst[n++] = 't'; break;
        default:
            dst[n++] = 'x';
            dst[n++] = hex[c >> 4];
            dst[n++] = hex[c & 15];
        }
    }
    dst[n] = 0;
    return n;
}

/* The one-line half of the error contract: a message often quotes a name someone else
 * chose (a kubeconfig context, a device ID, a file path) and travels on into a log line,
 * an Event and a grpc-message, so its control bytes are escaped here, once, rather than
 * trusted to every caller. A backslash stays as it is: the log escapes it again. */
int error_set(struct error *err, int code, const char *fmt, ...)
{
    if (code >= 0)
        code = -EINVAL;
    if (err) {
        char raw[sizeof(err->msg)];
        va_list ap;
        va_start(ap, fmt);
        if (vsnprintf(raw, sizeof(raw), fmt, ap) < 0)
            raw[0] = 0;
        va_end(ap);
        if (!escape_cntrl(err->msg, sizeof(err->msg), raw, false)) {
            const char *desc = strerrordesc_np(-code); /* unlike strerror(), thread-safe */
            snprintf(err->msg, sizeof(err->msg), "%s", desc ? desc : "unknown error");
        }
        err->code = code;
        err->hints = NULL;
    }
    return code;
}

int error_prefix(struct error *err, const char *fmt, ...)
{
    if (!err)
        return -EINVAL;
    char raw[256], prefix[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    if (n < 0)
        return err->code;
    size_t plen = escape_cntrl(prefix, sizeof(prefix), raw, false) + 2; /* "<prefix>: " */
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
