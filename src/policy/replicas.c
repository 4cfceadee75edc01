/* Preferred allocation for replicated and MIG resources (see replicas.h). */
#include <errno.h>

#include "policy/replicas.h"

struct group {
    size_t *pos;      /* candidate positions in r->devices, device order */
    size_t n, next;   /* candidates, and how many already picked */
    int total;        /* replicas of this physical device in the resource */
    size_t first;     /* device-order tie-break */
};

static bool in_list(const char *const *list, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (streq(list[i], id))
            return true;
    return false;
}

/* Marks r's devices named in available and not in must; returns how many. Duplicates
 * and IDs of other resources are ignored, as the reference's set intersection. */
static size_t mark_candidates(const struct rs_resource *r, const char *const *available,
                              size_t n_available, const char *const *must, size_t n_must,
                              bool *mark)
{
    size_t n = 0;
    for (size_t i = 0; i < n_available; i++) {
        const struct rs_device *d = resources_find_device(r, available[i]);
        if (!d)
            continue;
        size_t p = (size_t)(d - r->devices);
        if (mark[p] || in_list(must, n_must, d->id))
            continue;
        mark[p] = true;
        n++;
    }
    return n;
}

static int cmp_by_base(const void *a, const void *b, void *devices)
{
    const struct rs_device *dv = devices;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(dv[x].base_id, dv[y].base_id);
    if (c)
        return c;
    return x < y ? -1 : x > y;
}

static const struct group *pick_group(const struct group *g, size_t n, enum shared_alloc_policy policy)
{
    const struct group *best = NULL;
    long best_alloc = 0;
    for (size_t i = 0; i < n; i++) {
        if (g[i].next >= g[i].n)
            continue;
        long allocated = (long)g[i].total - (long)(g[i].n - g[i].next);
        if (best) {
            if (allocated != best_alloc) {
                bool better = policy == SHARED_ALLOC_PACKED ? allocated > best_alloc
                                                            : allocated < best_alloc;
                if (!better)
                    continue;
            } else if (g[i].next != best->next) {
                if (g[i].next > best->next)
                    continue;
            } else if (g[i].first > best->first) {
                continue;
            }
        }
        best = &g[i];
        best_alloc = allocated;
    }
    return best;
}

int replicas_preferred(const struct rs_resource *r, enum shared_alloc_policy policy,
                       const char *const *available, size_t n_available,
                       const char *const *must, size_t n_must, int size,
                       const char ***out, size_t *n_out, struct error *err)
{
    size_t needed = size > 0 && (size_t)size > n_must ? (size_t)size - n_must : 0;
    _cleanup_free_ bool *mark = xcalloc(r->n_devices, sizeof(bool));
    size_t n_cand = mark_candidates(r, available, n_available, must, n_must, mark);
    if (n_cand < needed)
        return error_set(err, -ENOSPC, "not enough available devices to satisfy allocation");

    const char **res = xcalloc(n_must + needed + 1, sizeof(char *));
    size_t n_res = 0;
    for (size_t i = 0; i < n_must; i++)
        res[n_res++] = must[i];

    if (needed > 0) {
        /* Candidates grouped by physical device (base ID), each group in device order. */
        _cleanup_free_ size_t *pos = xreallocarray(NULL, n_cand, sizeof(size_t));
        size_t k = 0;
        for (size_t i = 0; i < r->n_devices; i++)
            if (mark[i])
                pos[k++] = i;
        qsort_r(pos, n_cand, sizeof(size_t), cmp_by_base, r->devices);

        _cleanup_free_ struct group *groups = xcalloc(n_cand, sizeof(struct group));
        size_t n_groups = 0;
        for (size_t i = 0; i < n_cand; i++) {
            if (n_groups == 0 ||
                !streq(r->devices[pos[i]].base_id, r->devices[groups[n_groups - 1].pos[0]].base_id)) {
                const struct rs_device *d = &r->devices[pos[i]];
                groups[n_groups++] = (struct group){
                    .pos = &pos[i],
                    .total = d->replicas > 0 ? d->replicas : 1,
                    .first = pos[i],
                };
            }
            groups[n_groups - 1].n++;
        }

        for (size_t i = 0; i < needed; i++) {
            struct group *g = (struct group *)pick_group(groups, n_groups, policy);
            res[n_res++] = r->devices[g->pos[g->next++]].id;
        }
    }

    *out = res;
    *n_out = n_res;
    return 0;
}

int replicas_first_fit(const struct rs_resource *r,
                       const char *const *available, size_t n_available,
                       const char *const *must, size_t n_must, int size,
                       const char ***out, size_t *n_out, struct error *err)
{
    /* No answer can hold more devices than the resource has: bound the peer's size
     * before it sizes anything. */
    size_t want = size > 0 && (size_t)size <= r->n_devices ? (size_t)size : 0;
    const char **res = xcalloc(want + 1, sizeof(char *));
    size_t n_res = 0;
    if (want > 0 && n_available >= want && n_must <= want) {
        _cleanup_free_ bool *mark = xcalloc(r->n_devices, sizeof(bool));
        mark_candidates(r, available, n_available, must, n_must, mark);
        for (size_t i = 0; i < n_must; i++)
            res[n_res++] = must[i];
        for (size_t i = 0; i < r->n_devices && n_res < want; i++)
            if (mark[i])
                res[n_res++] = r->devices[i].id;
        if (n_res < want)
            n_res = 0; /* cannot satisfy: no preference */
    }
    *out = res;
    *n_out = n_res;
    return 0;
}
