/* Which named config applies to this node (see cluster-select.h). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cluster/cluster-select.h"
#include "core/error.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

static void dirp_close(DIR **d)
{
    if (*d)
        closedir(*d);
}

int cluster_select_list(const char *dir, char ***names_out, struct error *err)
{
    DIR *d __attribute__((cleanup(dirp_close))) = opendir(dir);
    if (!d)
        return error_set(err, -errno, "reading config directory %s: %s", dir, strerror(errno));
    char **v = xcalloc(1, sizeof(char *));
    size_t n = 0, alloc = 1;
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        /* ".", ".." and a ConfigMap mount's "..data", "..2024_..." entries. */
        if (startswith(e->d_name, ".."))
            continue;
        if (streq(e->d_name, "."))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
            continue; /* a dangling link during a ConfigMap update, a directory */
        if (n == CLUSTER_SELECT_MAX_FILES) {
            names_free(v);
            return error_set(err, -E2BIG, "config directory %s: more than %d files", dir,
                             CLUSTER_SELECT_MAX_FILES);
        }
        v = grow_array(v, &alloc, n + 2, sizeof(char *));
        v[n++] = xstrdup(e->d_name);
        v[n] = NULL;
    }
    if (errno) {
        int r = -errno;
        names_free(v);
        return error_set(err, r, "reading config directory %s: %s", dir, strerror(-r));
    }
    qsort(v, n, sizeof(char *), cmp_str);
    *names_out = v;
    return (int)n;
}

static bool has(char *const *names, const char *name)
{
    for (; *names; names++)
        if (streq(*names, name))
            return true;
    return false;
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
    char **names = NULL;
    int n = cluster_select_list(dir, &names, err);
    if (n < 0)
        return n;
    int r;
    if (n == 0) {
        r = error_set(err, -ENOENT, "no configuration files available in %s", dir);
        goto out;
    }
    if (label && *label) {
        if (has(names, label)) {
            r = pick(out, dir, label, "node label");
            goto out;
        }
        out->note = xasprintf("config \"%s\" named by node label %s does not exist in %s",
                              label, label_key, dir);
    }
    if (default_name && *default_name) {
        if (!has(names, default_name)) {
            r = error_set(err, -ENOENT, "default config \"%s\" does not exist in %s",
                          default_name, dir);
            goto out;
        }
        r = pick(out, dir, default_name, "default");
        goto out;
    }
    for (char *const *f = fallbacks; f && *f; f++) {
        if (streq(*f, "named") && has(names, "default")) {
            r = pick(out, dir, "default", "fallback named");
            goto out;
        }
        if (streq(*f, "single") && n == 1) {
            r = pick(out, dir, names[0], "fallback single");
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
    names_free(names);
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
