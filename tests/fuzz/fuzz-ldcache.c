/* Fuzz target: bytes as an ld.so.cache (src/node/ldcache.c; the cache is a file of the
 * driver root, written by whoever built the host image). Every string handed to the
 * callback is read whole, so a key or value that is not NUL-terminated inside the data
 * is a sanitizer report; a failure must say why in one line; a callback that stops the
 * walk must stop it. The input is copied into a buffer of its exact size, so that the
 * plain replay driver (tests/common/fuzz-main.c, whose buffer is larger) built with
 * AddressSanitizer catches reads past the end too.
 * Seeds (tests/fuzz/corpus/ldcache): caches `ldconfig -r` wrote over a root of three
 * libraries, in the new and the compat (old-format prefix) layouts, and hand-made ones
 * that reach the skips and the refusals. */
#include <stdio.h>

#include "core/error.h"
#include "node/ldcache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct walk {
    int n, stop_at;
    size_t bytes;
};

static int on_entry(void *userdata, const char *key, const char *value, bool is64)
{
    struct walk *w = userdata;
    if (!*key || !*value)
        abort(); /* empty strings are skipped */
    w->bytes += strlen(key) + strlen(value) + is64;
    if (++w->n == w->stop_at)
        return -ECANCELED;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = xmalloc(size ? size : 1);
    memcpy(copy, data, size);

    struct error err = { 0 };
    struct walk w = { 0 };
    int r = ldcache_parse(copy, size, on_entry, &w, &err);
    if (r >= 0 && r != w.n)
        abort();
    if (r < 0 && (err.code != r || !err.msg[0] || strchr(err.msg, '\n')))
        abort();
    /* again, stopped at the first entry: the callback's code comes back, nothing after */
    if (r > 0) {
        struct walk stop = { .stop_at = 1 };
        if (ldcache_parse(copy, size, on_entry, &stop, NULL) != -ECANCELED || stop.n != 1)
            abort();
    }
    free(copy);
    return 0;
}
