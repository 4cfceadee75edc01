/* Which named config applies to this node (see cluster-select.h). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cluster/cluster-select.h"
#include "core/error.h"

static void dirp_close(DIR **d)
{
    if (*d)
        closedir(*d);
}

/* A config file of the directory: a regular file (symlinks followed, as a ConfigMap
 * mount's entries are symlinks into ..data), by a name that is one path component and
 * not the mount's own machinery ("..data", "..2024_..."). A name that came from a node
 * label is checked the same way, so "../x" or "a/b" never leaves the directory. */
static bool is_config(DIR *d, const char *name)
{
    struct stat st;
    if (!*name || streq(name, ".") || startswith(name, "..") || strchr(name, '/'))
        return false;
    /* A dangling link during a ConfigMap update, a directory: not a config. */
    return fstatat(dirfd(d), name, &st, 0) == 0 && S_ISREG(st.st_mode);
}

/* Counts rather than lists: a ConfigMap can hold thousands of keys, and the rules only
 * ask whether a name exists and whether there is exactly one file, so nothing but the
 * first name is kept whatever the directory's size. */
int cluster_select_count(DIR *d, const char *dir, char **single_out, struct error *err)
{
    _cleanup_free_ char *first = NULL;
    int n = 0;
    struct dirent *e;
    rewinddir(d);
    while ((errno = 0, e = readdir(d))) {
        if (!is_config(d, e->d_name))
            continue;
        if (n == 0)
            first = xstrdup(e->d_name);
        if (n < INT_MAX)
            n++;
    }
    if (errno)
        return error_set(err, -errno, "reading config directory %s: %s", dir, strerror(errno));
    if (single_out)
        *single_out = n == 1 ? TAKE_PTR(first) : NULL;
    return n;
}

static int pick(struct cluster_selection *out, const char *dir, const char *name,
                const char *how)
{
    out->name = name ? xstrdup(name) : NULL;
    out->path = name ? xasprintf("%s/%s", dir, name) : NULL;
    out->how = xstrdup(how);
    return 0;
}

int cluster_select_config(const char *dir, const char *label, const char *label_key,
                          const char *default_name, char *const *fallbacks,
                          struct cluster_selection *out, struct error *err)
{
    *out = (struct cluster_selection){ 0 };
    DIR *d __attribute__((cleanup(dirp_close))) = opendir(dir);
    if (!d)
        return error_set(err, -errno, "reading config directory %s: %s", dir, strerror(errno));
    _cleanup_free_ char *single = NULL;
    int n = cluster_select_count(d, dir, &single, err);
    if (n < 0)
        return n;
    int r;
    if (n == 0) {
        r = error_set(err, -ENOENT, "no configuration files available in %s", dir);
        goto out;
    }
    if (label && *label) {
        if (is_config(d, label)) {
            r = pick(out, dir, label, "node label");
            goto out;
        }
        out->note = xasprintf("config \"%s\" named by node label %s does not exist in %s",
                              label, label_key, dir);
    }
    if (default_name && *default_name) {
        if (!is_config(d, default_name)) {
            r = error_set(err, -ENOENT, "default config \"%s\" does not exist in %s",
                          default_name, dir);
            goto out;
        }
        r = pick(out, dir, default_name, "default");
        goto out;
    }
    for (char *const *f = fallbacks; f && *f; f++) {
        if (streq(*f, "named") && is_config(d, "default")) {
            r = pick(out, dir, "default", "fallback named");
            goto out;
        }
        if (streq(*f, "single") && single) {
            r = pick(out, dir, single, "fallback single");
            goto out;
        }
        if (streq(*f, "empty")) {
            r = pick(out, dir, NULL, "fallback empty");
            goto out;
        }
        if (!streq(*f, "named") && !streq(*f, "single")) {
            r = error_set(err, -EINVAL, "unknown fallback strategy: %s", *f);
            goto out;
        }
    }
    r = error_set(err, -ENOENT,
                  "no config was set, no default was provided, and all fallbacks failed "
                  "(%d configs in %s)",
                  n, dir);
out:
    if (r < 0 && out->note)
        error_prefix(err, "%s, and", out->note);
    if (r < 0)
        cluster_selection_clear(out);
    return r;
}

void cluster_selection_clear(struct cluster_selection *s)
{
    free(s->name);
    free(s->path);
    free(s->how);
    free(s->note);
    *s = (struct cluster_selection){ 0 };
}

char *cluster_selection_source(const struct cluster_selection *s, const char *label_key)
{
    if (s->name && s->how && streq(s->how, "node label"))
        return xasprintf("node label %s=%s", label_key, s->name);
    return xstrdup(s->how ? s->how : "");
}

char *cluster_selection_describe(const struct cluster_selection *s, const char *label_key,
                                 bool with_note)
{
    _cleanup_free_ char *source = cluster_selection_source(s, label_key);
    bool note = with_note && s->note && *s->note;
    return xasprintf("%s (%s%s%s)", s->name ? s->name : "(empty config)", source,
                     note ? "; " : "", note ? s->note : "");
}
