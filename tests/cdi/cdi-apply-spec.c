/* cdi-apply: the spec files read (JSON, as we write them; bounded) and the edits of the
 * devices asked for merged as the CDI library merges them before a runtime applies them
 * (container-edits.go): a spec's top-level containerEdits once, ahead of its first
 * device's, then each device's in the order asked; env replaces a variable of the same
 * name, a device node or mount one at the same path, hooks and additionalGids append;
 * at the end mounts are stable-sorted by the number of components of their container
 * path, then by the path (CDI's orderedMounts). Nothing here is freed: the process ends
 * in exec or exit. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi-apply.h"

struct spec {
    const char *file;
    json_t *root;
    const char *kind;
    bool applied; /* its top-level edits are in */
};

/* Where a field sits, for the error line: "<file>: devices[2].containerEdits.mounts[0]". */
struct at {
    const char *file;
    char where[192];
};

static json_t *load(const char *file)
{
    _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die(EXIT_FAIL, "%s: open: %s", file, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        die(EXIT_FAIL, "%s: fstat: %s", file, strerror(errno));
    if (!S_ISREG(st.st_mode))
        die(EXIT_FAIL, "%s: not a regular file", file);
    if (st.st_size > (off_t)MAX_SPEC_BYTES)
        die(EXIT_FAIL, "%s: %lld bytes, more than the %u a spec may have here", file,
            (long long)st.st_size, MAX_SPEC_BYTES);
    /* Read to the cap whatever fstat said: the file may grow under us. */
    _cleanup_free_ char *buf = xalloc(MAX_SPEC_BYTES + 1);
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, MAX_SPEC_BYTES + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die(EXIT_FAIL, "%s: read: %s", file, strerror(errno));
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > MAX_SPEC_BYTES)
            die(EXIT_FAIL, "%s: more than the %u bytes a spec may have here", file, MAX_SPEC_BYTES);
    }
    json_error_t je;
    json_t *j = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        die(EXIT_FAIL, "%s: not a JSON CDI spec (line %d, column %d: %s); YAML is not read", file,
            je.line, je.column, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        die(EXIT_FAIL, "%s: not a JSON object", file);
    }
    return j;
}

static const char *str_at(const struct at *a, json_t *o, const char *key, bool required)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (required)
            die(EXIT_FAIL, "%s: %s%s%s: missing", a->file, a->where, *a->where ? "." : "", key);
        return NULL;
    }
    if (!json_is_string(v))
        die(EXIT_FAIL, "%s: %s%s%s: not a string", a->file, a->where, *a->where ? "." : "", key);
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v) || strlen(s) >= MAX_STR)
        die(EXIT_FAIL, "%s: %s.%s: holds a NUL or is longer than %d bytes", a->file, a->where,
            key, MAX_STR - 1);
    return s;
}

static const char *path_at(const struct at *a, json_t *o, const char *key, bool required)
{
    const char *s = str_at(a, o, key, required);
    if (s && s[0] != '/')
        die(EXIT_FAIL, "%s: %s.%s: \"%s\" is not an absolute path", a->file, a->where, key, s);
    return s;
}

/* An integer field, or dflt when absent; dies outside [min, max]. */
static long long int_at(const struct at *a, json_t *o, const char *key, long long dflt,
                        long long min, long long max)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return dflt;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        die(EXIT_FAIL, "%s: %s.%s: not an integer from %lld to %lld", a->file, a->where, key,
            min, max);
    return json_integer_value(v);
}

/* An array field (NULL when absent) of at most max elements. */
static json_t *array_at(const struct at *a, json_t *o, const char *key, size_t max)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_array(v))
        die(EXIT_FAIL, "%s: %s.%s: not an array", a->file, a->where, key);
    if (json_array_size(v) > max)
        die(EXIT_FAIL, "%s: %s.%s: %zu entries, more than %zu", a->file, a->where, key,
            json_array_size(v), max);
    return v;
}

/* child = parent's place, then ".<what>" (a long one is cut: it only names a place) */
_printf_(3, 4) static void place(struct at *child, const struct at *parent, const char *fmt, ...)
{
    char what[sizeof(child->where)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    char *w = child->where;
    size_t n = sizeof(child->where), len = strnlen(parent->where, n - 1);
    memmove(w, parent->where, len);
    if (len && len < n - 1)
        w[len++] = '.';
    w[len] = '\0';
    strncat(w, what, n - 1 - len);
    child->file = parent->file;
}

/* A string array field as a NULL-terminated copy; env entries must be NAME=VALUE. */
static char **strings_at(const struct at *a, json_t *o, const char *key, bool env)
{
    json_t *arr = array_at(a, o, key, env ? MAX_ENV : MAX_ARGS);
    size_t n = arr ? json_array_size(arr) : 0;
    char **v = xalloc((n + 1) * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(arr, i);
        const char *t = json_is_string(s) ? json_string_value(s) : NULL;
        if (!t || strlen(t) != json_string_length(s) || strlen(t) >= MAX_STR)
            die(EXIT_FAIL, "%s: %s.%s[%zu]: not a string (or too long, or holds a NUL)",
                a->file, a->where, key, i);
        if (env && (!strchr(t, '=') || t[0] == '='))
            die(EXIT_FAIL, "%s: %s.%s[%zu]: \"%s\" is not NAME=VALUE", a->file, a->where, key,
                i, t);
        v[i] = xdup(t);
    }
    v[n] = NULL;
    return v;
}

void env_set(struct edits *e, const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (size_t i = 0; i < e->n_env; i++) {
        if (strncmp(e->env[i], entry, len) == 0 && e->env[i][len] == '=') {
            e->env[i] = xdup(entry);
            return;
        }
    }
    if (e->n_env == MAX_ENV)
        die(EXIT_FAIL, "more than %d environment variables", MAX_ENV);
    e->env = realloc(e->env, (e->n_env + 2) * sizeof(*e->env));
    if (!e->env)
        die(EXIT_FAIL, "out of memory");
    e->env[e->n_env++] = xdup(entry);
    e->env[e->n_env] = NULL;
}

/* The container path as CDI compares and sorts it (filepath.Clean without ".."). */
static char *clean(const char *p)
{
    char *out = xalloc(strlen(p) + 2), *w = out;
    for (const char *s = p; *s;) {
        while (*s == '/')
            s++;
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.')) {
            s += n;
            continue;
        }
        *w++ = '/';
        memcpy(w, s, n);
        w += n;
        s += n;
    }
    if (w == out)
        *w++ = '/';
    *w = '\0';
    return out;
}

static void add_node(struct edits *e, const struct at *a, json_t *o)
{
    struct node n = {
        .path = xdup(path_at(a, o, "path", true)),
        .major = int_at(a, o, "major", 0, 0, 0xfff),
        .minor = int_at(a, o, "minor", 0, 0, 0xfffff),
        .mode = int_at(a, o, "fileMode", -1, 0, 07777),
        .uid = int_at(a, o, "uid", -1, 0, 0x7fffffff),
        .gid = int_at(a, o, "gid", -1, 0, 0x7fffffff),
    };
    const char *host = path_at(a, o, "hostPath", false);
    n.host_path = host ? xdup(host) : NULL;
    const char *type = str_at(a, o, "type", false);
    if (type && *type) {
        if (strlen(type) != 1 || !strchr("cubp", type[0]))
            die(EXIT_FAIL, "%s: %s.type: \"%s\" is not c, u, b or p", a->file, a->where, type);
        n.type = type[0];
    }
    for (size_t i = 0; i < e->n_nodes; i++) {
        if (strcmp(e->nodes[i].path, n.path) == 0) {
            e->nodes[i] = n;
            return;
        }
    }
    if (e->n_nodes == MAX_NODES)
        die(EXIT_FAIL, "%s: more than %d device nodes in all", a->file, MAX_NODES);
    e->nodes = realloc(e->nodes, (e->n_nodes + 1) * sizeof(*e->nodes));
    if (!e->nodes)
        die(EXIT_FAIL, "out of memory");
    e->nodes[e->n_nodes++] = n;
}

static void add_mount(struct edits *e, const struct at *a, json_t *o)
{
    static size_t seq;
    struct mnt m = {
        .host = xdup(str_at(a, o, "hostPath", true)),
        .ctr = clean(path_at(a, o, "containerPath", true)),
        .seq = seq++,
    };
    const char *type = str_at(a, o, "type", false);
    m.type = type && *type ? xdup(type) : NULL;
    m.opts = strings_at(a, o, "options", false);
    while (m.opts[m.n_opts])
        m.n_opts++;
    /* the CDI library removes a mount at the same path before adding this one */
    for (size_t i = 0; i < e->n_mounts; i++) {
        if (strcmp(e->mounts[i].ctr, m.ctr) == 0) {
            memmove(&e->mounts[i], &e->mounts[i + 1], (e->n_mounts - i - 1) * sizeof(m));
            e->n_mounts--;
            break;
        }
    }
    if (e->n_mounts == MAX_MOUNTS)
        die(EXIT_FAIL, "%s: more than %d mounts in all", a->file, MAX_MOUNTS);
    e->mounts = realloc(e->mounts, (e->n_mounts + 1) * sizeof(*e->mounts));
    if (!e->mounts)
        die(EXIT_FAIL, "out of memory");
    e->mounts[e->n_mounts++] = m;
}

static void add_hook(struct edits *e, const struct at *a, json_t *o)
{
    static const char *const kinds[] = {
        [HOOK_PRESTART] = "prestart",
        [HOOK_CREATE_RUNTIME] = "createRuntime",
        [HOOK_CREATE_CONTAINER] = "createContainer",
        [HOOK_START_CONTAINER] = "startContainer",
    };
    const char *name = str_at(a, o, "hookName", true);
    struct hook h = { .kind = HOOK_PRESTART };
    while (h.kind < ELEMENTSOF(kinds) && strcmp(kinds[h.kind], name) != 0)
        h.kind++;
    /* poststart/poststop run after the process starts or ends, where this applier has
     * exec'd it and is gone: a spec may carry them (a GPU share's reset), they are skipped */
    if (h.kind == ELEMENTSOF(kinds) && (strcmp(name, "poststart") == 0 || strcmp(name, "poststop") == 0)) {
        fprintf(stderr, "cdi-apply-spec: %s: %s: a %s hook is not run here, skipped\n", a->file,
                a->where, name);
        return;
    }
    if (h.kind == ELEMENTSOF(kinds))
        die(EXIT_FAIL, "%s: %s.hookName: \"%s\" is no OCI hook (prestart, createRuntime, "
            "createContainer, startContainer, poststart, poststop)", a->file, a->where, name);
    h.path = xdup(path_at(a, o, "path", true));
    h.args = strings_at(a, o, "args", false);
    h.env = strings_at(a, o, "env", true);
    h.timeout = int_at(a, o, "timeout", 0, 1, 3600);
    if (e->n_hooks == MAX_HOOKS)
        die(EXIT_FAIL, "%s: more than %d hooks in all", a->file, MAX_HOOKS);
    e->hooks = realloc(e->hooks, (e->n_hooks + 1) * sizeof(*e->hooks));
    if (!e->hooks)
        die(EXIT_FAIL, "out of memory");
    e->hooks[e->n_hooks++] = h;
}

static void merge(struct edits *e, const struct at *parent, json_t *edits)
{
    if (!edits || json_is_null(edits))
        return;
    struct at a;
    place(&a, parent, "containerEdits");
    if (!json_is_object(edits))
        die(EXIT_FAIL, "%s: %s: not an object", a.file, a.where);
    static const char *const unsupported[] = { "intelRdt", "netDevices" };
    for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
        if (json_object_get(edits, unsupported[i]))
            die(EXIT_FAIL, "%s: %s.%s: not applied here", a.file, a.where, unsupported[i]);
    char **env = strings_at(&a, edits, "env", true);
    for (char **v = env; *v; v++)
        env_set(e, *v);
    struct {
        const char *key;
        size_t max;
        void (*add)(struct edits *, const struct at *, json_t *);
    } lists[] = {
        { "deviceNodes", MAX_NODES, add_node },
        { "mounts", MAX_MOUNTS, add_mount },
        { "hooks", MAX_HOOKS, add_hook },
    };
    for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
        json_t *arr = array_at(&a, edits, lists[l].key, lists[l].max);
        for (size_t i = 0; arr && i < json_array_size(arr); i++) {
            struct at item;
            place(&item, &a, "%s[%zu]", lists[l].key, i);
            json_t *o = json_array_get(arr, i);
            if (!json_is_object(o))
                die(EXIT_FAIL, "%s: %s: not an object", item.file, item.where);
            lists[l].add(e, &item, o);
        }
    }
    json_t *gids = array_at(&a, edits, "additionalGids", MAX_GIDS);
    for (size_t i = 0; gids && i < json_array_size(gids); i++) {
        json_t *g = json_array_get(gids, i);
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) > 0x7fffffff)
            die(EXIT_FAIL, "%s: %s.additionalGids[%zu]: not a group id", a.file, a.where, i);
        gid_t gid = (gid_t)json_integer_value(g);
        size_t k = 0;
        while (k < e->n_gids && e->gids[k] != gid)
            k++;
        if (k == e->n_gids) {
            if (e->n_gids == MAX_GIDS)
                die(EXIT_FAIL, "%s: more than %d additional groups", a.file, MAX_GIDS);
            e->gids[e->n_gids++] = gid;
        }
    }
}

static size_t depth(const char *clean_path)
{
    size_t n = 0;
    for (const char *s = clean_path; *s; s++)
        n += *s == '/';
    return n;
}

static int mount_order(const void *pa, const void *pb)
{
    const struct mnt *a = pa, *b = pb;
    size_t da = depth(a->ctr), db = depth(b->ctr);
    if (da != db)
        return da < db ? -1 : 1;
    int c = strcmp(a->ctr, b->ctr);
    if (c)
        return c;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void check_spec(struct spec *s)
{
    struct at a = { .file = s->file };
    const char *version = str_at(&a, s->root, "cdiVersion", true);
    if (strncmp(version, "0.", 2) != 0 && strncmp(version, "1.", 2) != 0)
        die(EXIT_FAIL, "%s: cdiVersion \"%s\" is not one this reads", s->file, version);
    s->kind = str_at(&a, s->root, "kind", true);
    const char *slash = strchr(s->kind, '/');
    if (!slash || slash == s->kind || !slash[1] || strchr(s->kind, '='))
        die(EXIT_FAIL, "%s: kind \"%s\" is not vendor/class", s->file, s->kind);
    if (!array_at(&a, s->root, "devices", 65536))
        die(EXIT_FAIL, "%s: devices: missing", s->file);
}

void edits_load(struct edits *e, char *const *files, size_t n_specs, char *const *ids,
                size_t n_ids)
{
    struct spec specs[MAX_SPECS];
    for (size_t i = 0; i < n_specs; i++) {
        specs[i] = (struct spec){ .file = files[i], .root = load(files[i]) };
        check_spec(&specs[i]);
    }
    for (size_t d = 0; d < n_ids; d++) {
        bool again = false;
        for (size_t k = 0; k < d; k++)
            again |= strcmp(ids[k], ids[d]) == 0;
        if (again) /* asked twice: applied once, as the CDI library dedups */
            continue;
        const char *eq = strchr(ids[d], '=');
        size_t kind_len = (size_t)(eq - ids[d]);
        struct spec *s = NULL;
        json_t *dev = NULL;
        struct at a;
        size_t of_kind = 0;
        /* a kind's devices may be spread over several files, as in a CDI registry */
        for (size_t k = 0; k < n_specs && !dev; k++) {
            if (strlen(specs[k].kind) != kind_len || strncmp(specs[k].kind, ids[d], kind_len))
                continue;
            of_kind++;
            json_t *devices = json_object_get(specs[k].root, "devices");
            for (size_t i = 0; i < json_array_size(devices) && !dev; i++) {
                json_t *o = json_array_get(devices, i);
                place(&a, &(struct at){ .file = specs[k].file }, "devices[%zu]", i);
                if (!json_is_object(o))
                    die(EXIT_FAIL, "%s: %s: not an object", a.file, a.where);
                if (strcmp(str_at(&a, o, "name", true), eq + 1) == 0) {
                    dev = o;
                    s = &specs[k];
                }
            }
        }
        if (!dev)
            die(EXIT_FAIL, "device %s: not in the %zu spec(s) of kind %.*s given", ids[d],
                of_kind, (int)kind_len, ids[d]);
        if (!s->applied) {
            merge(e, &(struct at){ .file = s->file }, json_object_get(s->root, "containerEdits"));
            s->applied = true;
        }
        merge(e, &a, json_object_get(dev, "containerEdits"));
    }
    if (e->n_mounts) /* qsort wants an array, even of none */
        qsort(e->mounts, e->n_mounts, sizeof(*e->mounts), mount_order);
}
