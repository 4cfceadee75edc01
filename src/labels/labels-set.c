/* The label set (labels.h): a sorted array of key/value pairs, and the two value
 * helpers GFD applies to hardware strings (sanitiser, architecture family). */
#include <stdio.h>

#include "labels/labels.h"

struct labels *labels_new(void)
{
    return xcalloc(1, sizeof(struct labels));
}

void labels_free(struct labels *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    free(l);
}

/* Position of key, or where it would go (*found false). */
static size_t find(const struct labels *l, const char *key, bool *found)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->items[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

void labels_set(struct labels *l, const char *key, const char *value)
{
    bool found;
    size_t at = find(l, key, &found);
    if (found) {
        free(l->items[at].value);
        l->items[at].value = xstrdup(value);
        return;
    }
    l->items = grow_array(l->items, &l->alloc, l->n + 1, sizeof(*l->items));
    memmove(&l->items[at + 1], &l->items[at], (l->n - at) * sizeof(*l->items));
    l->items[at] = (struct label){ .key = xstrdup(key), .value = xstrdup(value) };
    l->n++;
}

const char *labels_get(const struct labels *l, const char *key)
{
    bool found;
    size_t at = find(l, key, &found);
    return found ? l->items[at].value : NULL;
}

bool labels_equal(const struct labels *a, const struct labels *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!streq(a->items[i].key, b->items[i].key) ||
            !streq(a->items[i].value, b->items[i].value))
            return false;
    return true;
}

char *labels_sanitise(const char *in)
{
    size_t len = strlen(in);
    char *out = xmalloc(len + 1);
    size_t k = 0;
    bool pending_space = false;
    for (const unsigned char *s = (const unsigned char *)in; *s; s++) {
        unsigned char c = *s;
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
        if (c == ' ') {
            pending_space = k > 0; /* leading spaces vanish, a run becomes one '-' */
            continue;
        }
        if (!keep)
            continue; /* dropped before spaces are joined: "A (B)" -> "A-B" */
        if (pending_space)
            out[k++] = '-';
        pending_space = false;
        out[k++] = (char)c;
    }
    out[k] = 0;
    return out;
}

const char *labels_arch_family(int major, int minor)
{
    switch (major) {
    case 1: return "tesla";
    case 2: return "fermi";
    case 3: return "kepler";
    case 5: return "maxwell";
    case 6: return "pascal";
    case 7: return minor < 5 ? "volta" : "turing";
    case 8: return minor < 9 ? "ampere" : "ada-lovelace";
    case 9: return "hopper";
    case 10:
    case 12: return "blackwell"; /* data-centre and consumer Blackwell */
    case 13: return "rubin";
    default: return "undefined";
    }
}
