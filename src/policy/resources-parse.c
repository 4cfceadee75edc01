/* The two inputs resources.c reads besides the inventory: the resources.gpus / .mig
 * name patterns (anchored, '*' wildcard, §3.3) and the MIG capability minors table
 * <proc_root>/driver/nvidia-caps/mig-minors, which maps a GPU / compute instance to its
 * /dev/nvidia-caps/nvidia-cap<N> (§4.7). Declared in resources-warn.h. */
#include <errno.h>
#include <stdio.h>

#include "policy/resources-warn.h"

bool rs_pattern_match(const char *p, const char *s)
{
    /* Iterative glob with one backtrack point: linear enough for names of < 64 chars. */
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            resume = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

int rs_mig_cap_minor(const char *proc_root, unsigned gpu_minor, unsigned gi, int ci,
                     struct error *err)
{
    _cleanup_free_ char *path =
        xasprintf("%s/driver/nvidia-caps/mig-minors", proc_root && *proc_root ? proc_root : "/proc");
    FILE *f = fopen(path, "re");
    if (!f)
        return error_set(err, -errno, "opening %s: %s", path, strerror(errno));

    char line[256];
    int found = -1;
    while (found < 0 && fgets(line, sizeof(line), f)) {
        unsigned g, i, c;
        int minor, n = 0;
        if (ci >= 0) {
            if (sscanf(line, "gpu%u/gi%u/ci%u/access %d%n", &g, &i, &c, &minor, &n) == 4 && n > 0 &&
                g == gpu_minor && i == gi && c == (unsigned)ci)
                found = minor;
        } else if (sscanf(line, "gpu%u/gi%u/access %d%n", &g, &i, &minor, &n) == 3 && n > 0 &&
                   g == gpu_minor && i == gi) {
            found = minor;
        }
        /* "config %d" / "monitor %d" lines are valid but not needed per device. */
    }
    fclose(f);
    if (found < 0) {
        if (ci >= 0)
            return error_set(err, -ENOENT, "%s: no entry for gpu%u/gi%u/ci%d/access", path,
                             gpu_minor, gi, ci);
        return error_set(err, -ENOENT, "%s: no entry for gpu%u/gi%u/access", path, gpu_minor, gi);
    }
    return found;
}
