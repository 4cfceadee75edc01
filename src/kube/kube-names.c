/* Naming helpers of the API client: which RBAC verb and resource a request needs and the
 * 403 line that says so (one error per verb and resource once it persists; a warning for
 * a run that ended while the authorizer may have been warming up), the Status message of
 * a response, percent-escaping. */
#include <stdio.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

struct segs {
    const char *seg[8];
    size_t len[8], n; /* path segments (before any query) */
    size_t res;       /* index of the resource segment (== n when there is none) */
};

static void split_path(const char *path, struct segs *s)
{
    s->n = 0;
    for (const char *p = path; *p && *p != '?' && s->n < ELEMENTSOF(s->seg);) {
        while (*p == '/')
            p++;
        if (!*p || *p == '?')
            break;
        s->seg[s->n] = p;
        s->len[s->n] = strcspn(p, "/?");
        p += s->len[s->n++];
    }
    size_t i = 0;
    if (s->n >= 2 && s->len[0] == 3 && memcmp(s->seg[0], "api", 3) == 0)
        i = 2;
    else if (s->n >= 3 && s->len[0] == 4 && memcmp(s->seg[0], "apis", 4) == 0)
        i = 3;
    /* namespaces/NS/RESOURCE...: the resource is what follows ("namespaces/NS" alone is
     * the namespace object itself). */
    if (s->n >= i + 3 && s->len[i] == 10 && memcmp(s->seg[i], "namespaces", 10) == 0)
        i += 2;
    s->res = u64_min(i, s->n);
}

const char *kube_verb(enum kube_method m, const char *path)
{
    struct segs s;
    split_path(path, &s);
    bool named = s.n >= s.res + 2;
    const char *q = strchr(path, '?');
    switch (m) {
    case KUBE_GET:
        if (q && (strstr(q, "watch=1") || strstr(q, "watch=true")))
            return "watch";
        return named ? "get" : "list";
    case KUBE_POST:
        return "create";
    case KUBE_PUT:
        return "update";
    case KUBE_DELETE:
        return named ? "delete" : "deletecollection";
    default:
        return "patch";
    }
}

void kube_path_resource(const char *path, char *resource, size_t rlen, char *group, size_t glen)
{
    struct segs s;
    split_path(path, &s);
    if (s.n >= 3 && s.len[0] == 4 && memcmp(s.seg[0], "apis", 4) == 0)
        snprintf(group, glen, "%.*s", (int)s.len[1], s.seg[1]);
    else
        snprintf(group, glen, "%s", "");
    size_t i = s.res;
    if (i >= s.n)
        snprintf(resource, rlen, "%s", "");
    else if (s.n >= i + 3)
        snprintf(resource, rlen, "%.*s/%.*s", (int)s.len[i], s.seg[i], (int)s.len[i + 2],
                 s.seg[i + 2]);
    else
        snprintf(resource, rlen, "%.*s", (int)s.len[i], s.seg[i]);
}

const char *kube_status_message(json_t *body)
{
    json_t *m = json_is_object(body) ? json_object_get(body, "message") : NULL;
    return json_is_string(m) ? json_string_value(m) : NULL;
}

char *kube_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s), cap;
    if (__builtin_mul_overflow(n, (size_t)3, &cap))
        oom();
    char *out = xmalloc(cap + 1), *p = out;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~') {
            *p++ = (char)*c;
        } else {
            *p++ = '%';
            *p++ = hex[*c >> 4];
            *p++ = hex[*c & 0xf];
        }
    }
    *p = '\0';
    return out;
}

static struct kube_forbidden *forbidden_entry(struct kube *k, const char *key, bool add)
{
    for (size_t i = 0; i < k->n_forbidden; i++)
        if (streq(k->forbidden[i].key, key))
            return &k->forbidden[i];
    if (!add)
        return NULL;
    k->forbidden = grow_array(k->forbidden, &k->alloc_forbidden, k->n_forbidden + 1,
                              sizeof(*k->forbidden));
    k->forbidden[k->n_forbidden] = (struct kube_forbidden){ .key = xstrdup(key) };
    return &k->forbidden[k->n_forbidden++];
}

void kube_rbac_seen(struct kube *k, enum kube_method m, const char *path, int status,
                    json_t *body)
{
    if (status != 403 && k->n_forbidden == 0)
        return; /* the common case: a success, and no 403 ever */
    char res[128], group[128];
    kube_path_resource(path, res, sizeof(res), group, sizeof(group));
    const char *verb = kube_verb(m, path);
    _cleanup_free_ char *key = xasprintf("%s %s %s", verb, group, res);
    struct kube_forbidden *e = forbidden_entry(k, key, status == 403);
    uint64_t now = loop_now_ms();
    if (status != 403) {
        if (e && e->in_a_row > 0 && !e->run_errored)
            log_warning("kube: RBAC: %u request(s) to %s %s%s%s%s were forbidden for %.1f s, "
                        "then allowed%s",
                        e->in_a_row, verb, res, *group ? " (API group " : "", group,
                        *group ? ")" : "", (double)(now - e->first_ms) / 1000.0,
                        e->warming ? ": right after connecting, while the API server's "
                                     "authorizer was warming up"
                                   : "");
        if (e) {
            e->in_a_row = e->warming = 0;
            e->run_errored = false;
        }
        return;
    }
    if (e->in_a_row++ == 0)
        e->first_ms = now;
    /* A restarted API server serves before its authorizer has synced: 403 for a few
     * seconds, then what RBAC really says. Right after a (re)connection (or the outage
     * spread that held the watches back) a 403 may be that: nothing is said yet. Past
     * that, a 403 that persists is one error, said once, and nothing else is said of
     * that run; a run that a success ends first is one warning then. */
    uint64_t since = k->conn.up_ms > k->conn.spread_until_ms ? k->conn.up_ms
                                                              : k->conn.spread_until_ms;
    bool warming = now < since + KUBE_RBAC_WARMUP_MS;
    int level = LOG_DEBUG;
    if (warming)
        e->warming++;
    else if (!e->errored && e->in_a_row >= KUBE_RBAC_ERROR_AFTER)
        level = LOG_ERROR;
    if (!warming && e->in_a_row >= KUBE_RBAC_ERROR_AFTER)
        e->run_errored = true; /* said now, or said before: no warning at its end */
    if (level == LOG_ERROR)
        e->errored = true;
    const char *msg = kube_status_message(body);
    size_t plen = strcspn(path, "?");
    log_full(level, "kube: RBAC: forbidden to %s %s (%.*s): grant verb \"%s\" on resource \"%s\"%s%s%s%s%s",
             verb, res, (int)plen, path, verb, res, *group ? " in API group \"" : "", group,
             *group ? "\"" : "", msg ? ": " : "", msg ? msg : "");
}
