/* "Did you mean": the closest of a set of known words to one that is not known, for the
 * messages about an unknown flag or subcommand option. */
#pragma once

#include <stddef.h>

/* Edit distance between a[0..alen) and b[0..blen): insertions, deletions, substitutions
 * and transpositions of two neighbours, each 1 (Damerau-Levenshtein, optimal string
 * alignment). Words longer than SUGGEST_MAX_LEN count as SUGGEST_FAR from everything. */
#define SUGGEST_MAX_LEN 64u
#define SUGGEST_FAR ((size_t)-1)
size_t suggest_distance(const char *a, size_t alen, const char *b, size_t blen);

/* The search for the closest word: suggest_offer() each known word, then
 * suggest_best(). A word counts as close when its distance is at most max(2, len/3) of
 * the unknown word's length and less than that length (so "x" suggests nothing); ties
 * keep the first offered. */
struct suggest {
    const char *word;
    size_t len;
    const char *best;   /* NULL: nothing close so far */
    size_t best_dist;
};
void suggest_init(struct suggest *s, const char *word, size_t len);
void suggest_offer(struct suggest *s, const char *candidate);
/* The closest word offered, or NULL when none is close. */
const char *suggest_best(const struct suggest *s);
