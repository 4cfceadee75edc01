/* The edit distance and the closest-word search declared in core/suggest.h. */
#include <string.h>

#include "suggest.h"

size_t suggest_distance(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen > SUGGEST_MAX_LEN || blen > SUGGEST_MAX_LEN)
        return SUGGEST_FAR;
    /* d[i][j]: distance between the first i bytes of a and the first j of b (at most
     * SUGGEST_MAX_LEN, so a byte each: 4 KiB of stack). */
    unsigned char d[SUGGEST_MAX_LEN + 1][SUGGEST_MAX_LEN + 1];
    for (size_t i = 0; i <= alen; i++)
        d[i][0] = (unsigned char)i;
    for (size_t j = 0; j <= blen; j++)
        d[0][j] = (unsigned char)j;
    for (size_t i = 1; i <= alen; i++) {
        for (size_t j = 1; j <= blen; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1u;                /* deletion */
            if (d[i][j - 1] + 1u < v)
                v = d[i][j - 1] + 1u;                   /* insertion */
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;             /* substitution */
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1u < v)
                v = d[i - 2][j - 2] + 1u;               /* transposition */
            d[i][j] = (unsigned char)v;
        }
    }
    return d[alen][blen];
}

void suggest_init(struct suggest *s, const char *word, size_t len)
{
    *s = (struct suggest){ .word = word, .len = len, .best_dist = SUGGEST_FAR };
}

void suggest_offer(struct suggest *s, const char *candidate)
{
    if (!candidate)
        return;
    size_t limit = s->len / 3 > 2 ? s->len / 3 : 2;
    size_t dist = suggest_distance(s->word, s->len, candidate, strlen(candidate));
    if (dist <= limit && dist < s->len && dist < s->best_dist) {
        s->best = candidate;
        s->best_dist = dist;
    }
}

const char *suggest_best(const struct suggest *s) { return s->best; }
