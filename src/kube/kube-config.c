/* Credentials of the API client: the in-cluster service account or a kubeconfig file
 * (its current context only), and the token file re-read when the kubelet rotates it.
 * Every failure is one line naming the file, variable or kubeconfig field at fault. */
#include <fcntl.h>
#include <mbedtls/base64.h>
#include <stdio.h>
#include <sys/stat.h>
#include <yaml.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/loop.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

const char *kube_sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";

void kube_creds_clear(struct kube_creds *c)
{
    free(c->host);
    free(c->port);
    free(c->authority);
    free(c->server_name);
    free(c->ca_pem);
    free(c->cert_pem);
    if (c->key_pem) {
        explicit_bzero(c->key_pem, c->key_len);
        free(c->key_pem);
    }
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    free(c->token_file);
    free(c->source);
    *c = (struct kube_creds){ 0 };
}

/* The whole file, NUL-terminated (*len excludes the NUL), at most KUBE_MAX_FILE_BYTES;
 * a FIFO or device named as a credential file is refused, never waited on. */
static int read_bounded(const char *path, char **out, size_t *len, struct stat *st,
                        struct error *err)
{
    int r = read_file_bounded(path, KUBE_MAX_FILE_BYTES, out, len, st);
    if (r == -EINVAL)
        return error_set(err, r, "%s: not a regular file", path);
    if (r == -EFBIG)
        return error_set(err, r, "%s: larger than %u bytes", path, KUBE_MAX_FILE_BYTES);
    if (r < 0)
        return error_set(err, r, "%s: %s", path, strerror(-r));
    return 0;
}

/* A token file's content without surrounding whitespace; empty is an error. */
static int read_token(const char *path, char **out, struct stat *st, struct error *err)
{
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_bounded(path, &buf, &len, st, err);
    if (r < 0)
        return r;
    char *s = buf, *e = buf + len;
    while (s < e && strchr(" \t\r\n", *s))
        s++;
    while (e > s && strchr(" \t\r\n", e[-1]))
        e--;
    if (e == s)
        return error_set(err, -EINVAL, "%s: empty token", path);
    for (const char *p = s; p < e; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return error_set(err, -EINVAL, "%s: token has a byte that is not printable ASCII",
                             path);
    *out = xstrndup(s, (size_t)(e - s));
    explicit_bzero(buf, len);
    return 0;
}

static void token_stamp(struct kube_creds *c, const struct stat *st)
{
    c->token_dev = st->st_dev;
    c->token_ino = st->st_ino;
    c->token_mtime = st->st_mtim;
    c->token_size = st->st_size;
}

int kube_creds_refresh_token(struct kube_creds *c, bool force, struct error *err)
{
    if (!c->token_file)
        return 0;
    uint64_t now = loop_now_ms();
    if (!force && c->token && now - c->token_checked_ms < KUBE_TOKEN_CHECK_MS)
        return 0;
    c->token_checked_ms = now;
    struct stat st;
    /* stat follows the symlink the kubelet swaps atomically: a new token is a new inode. */
    if (!force && c->token && stat(c->token_file, &st) == 0 && st.st_dev == c->token_dev &&
        st.st_ino == c->token_ino && st.st_size == c->token_size &&
        st.st_mtim.tv_sec == c->token_mtime.tv_sec && st.st_mtim.tv_nsec == c->token_mtime.tv_nsec)
        return 0;
    char *tok = NULL;
    int r = read_token(c->token_file, &tok, &st, err);
    if (r < 0)
        return r;
    token_stamp(c, &st);
    bool changed = !c->token || !streq(c->token, tok);
    if (c->token) {
        explicit_bzero(c->token, strlen(c->token));
        free(c->token);
    }
    c->token = tok;
    return changed;
}

int kube_parse_server(struct kube_creds *c, const char *url, struct error *err)
{
    const char *p;
    /* Refused before any message quotes the URL: a control byte would break the one-line
     * error contract, and no valid URL has one or a space. */
    for (p = url; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return error_set(err, -EINVAL, "server URL: byte 0x%02x at offset %zu is not "
                             "allowed in a URL", (unsigned char)*p, (size_t)(p - url));
    if (startswith(url, "https://")) {
        c->tls = true;
        p = url + 8;
    } else if (startswith(url, "http://")) {
        c->tls = false;
        p = url + 7;
    } else {
        return error_set(err, -EINVAL, "server \"%s\": not an https:// or http:// URL", url);
    }
    size_t hlen = strcspn(p, "/?#");
    if (p[hlen] != '\0' && !streq(p + hlen, "/"))
        return error_set(err, -EINVAL, "server \"%s\": a path prefix is not supported", url);
    _cleanup_free_ char *hostport = xstrndup(p, hlen);
    if (strchr(hostport, '@'))
        return error_set(err, -EINVAL, "server \"%s\": user info is not supported", url);
    char *host = hostport, *port = NULL;
    if (host[0] == '[') {
        char *end = strchr(host, ']');
        if (!end || end == host + 1)
            return error_set(err, -EINVAL, "server \"%s\": unterminated [IPv6] host", url);
        *end = '\0';
        host++;
        if (end[1] == ':')
            port = end + 2;
        else if (end[1] != '\0')
            return error_set(err, -EINVAL, "server \"%s\": junk after ]", url);
    } else {
        char *colon = strchr(host, ':');
        if (colon) {
            if (strchr(colon + 1, ':'))
                return error_set(err, -EINVAL, "server \"%s\": an IPv6 host needs brackets",
                                 url);
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (!*host)
        return error_set(err, -EINVAL, "server \"%s\": no host", url);
    if (port) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(port, &end, 10);
        if (!*port || *end || errno || v == 0 || v > 65535)
            return error_set(err, -EINVAL, "server \"%s\": bad port \"%s\"", url, port);
    }
    free(c->host);
    free(c->port);
    free(c->authority);
    c->host = xstrdup(host);
    c->port = xstrdup(port ? port : c->tls ? "443" : "80");
    c->authority = strchr(host, ':') ? xasprintf("[%s]:%s", host, c->port)
                                     : xasprintf("%s:%s", host, c->port);
    return 0;
}

/* ------------------------------------------------------------------ kubeconfig */

struct kcfg {
    yaml_document_t doc;
    const char *path;
    char *dir; /* relative paths in the file are relative to it */
};

static yaml_node_t *map_get(struct kcfg *f, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && streq((const char *)k->data.scalar.value, key))
            return yaml_document_get_node(&f->doc, p->value);
    }
    return NULL;
}

/* A scalar field: *out is NULL when absent or empty. */
static int map_str(struct kcfg *f, yaml_node_t *map, const char *what, const char *key,
                   const char **out, struct error *err)
{
    yaml_node_t *n = map_get(f, map, key);
    *out = NULL;
    if (!n)
        return 0;
    if (n->type != YAML_SCALAR_NODE)
        return error_set(err, -EINVAL, "kubeconfig %s: %s: %s is not a string", f->path, what, key);
    const char *v = (const char *)n->data.scalar.value;
    *out = *v ? v : NULL;
    return 0;
}

/* The `key` section (cluster, user, context) of the entry named `name` in list `list`. */
static int find_named(struct kcfg *f, yaml_node_t *root, const char *list, const char *key,
                      const char *name, yaml_node_t **out, struct error *err)
{
    yaml_node_t *seq = map_get(f, root, list);
    if (seq && seq->type != YAML_SEQUENCE_NODE)
        return error_set(err, -EINVAL, "kubeconfig %s: %s is not a list", f->path, list);
    if (seq)
        for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++) {
            yaml_node_t *e = yaml_document_get_node(&f->doc, *i);
            yaml_node_t *n = map_get(f, e, "name");
            if (n && n->type == YAML_SCALAR_NODE && streq((const char *)n->data.scalar.value, name)) {
                *out = map_get(f, e, key);
                if (!*out || (*out)->type != YAML_MAPPING_NODE)
                    return error_set(err, -EINVAL, "kubeconfig %s: %s \"%s\" has no %s mapping",
                                     f->path, key, name, key);
                return 0;
            }
        }
    return error_set(err, -ENOENT, "kubeconfig %s: %s \"%s\" not found in %s", f->path, key,
                     name, list);
}

static char *resolve(struct kcfg *f, const char *p)
{
    return p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", f->dir, p);
}

/* A PEM/DER blob from `file_key` (a path) or `data_key` (base64), NUL-terminated
 * (*len counts the NUL, as mbedtls wants for PEM); both absent leaves *out NULL. */
static int load_blob(struct kcfg *f, yaml_node_t *map, const char *what, const char *file_key,
                     const char *data_key, char **out, size_t *len, struct error *err)
{
    const char *file, *data;
    int r = map_str(f, map, what, file_key, &file, err);
    if (r < 0 || (r = map_str(f, map, what, data_key, &data, err)) < 0)
        return r;
    if (data) {
        size_t n = 0, dlen = strlen(data);
        (void)mbedtls_base64_decode(NULL, 0, &n, (const unsigned char *)data, dlen);
        _cleanup_free_ unsigned char *buf = xmalloc(n + 1);
        if (mbedtls_base64_decode(buf, n, &n, (const unsigned char *)data, dlen) != 0 || n == 0)
            return error_set(err, -EINVAL, "kubeconfig %s: %s: %s is not valid base64", f->path,
                             what, data_key);
        buf[n] = '\0';
        *out = (char *)TAKE_PTR(buf);
        *len = n + 1;
        return 0;
    }
    if (file) {
        _cleanup_free_ char *p = resolve(f, file);
        size_t n;
        r = read_bounded(p, out, &n, NULL, err);
        if (r < 0)
            return error_prefix(err, "kubeconfig %s: %s: %s", f->path, what, file_key);
        *len = n + 1;
    }
    return 0;
}

static int kcfg_cluster(struct kcfg *f, yaml_node_t *cl, const char *what, struct kube_creds *c,
                        struct error *err)
{
    const char *server, *tls_name, *insecure;
    int r = map_str(f, cl, what, "server", &server, err);
    if (r < 0 || (r = map_str(f, cl, what, "tls-server-name", &tls_name, err)) < 0 ||
        (r = map_str(f, cl, what, "insecure-skip-tls-verify", &insecure, err)) < 0)
        return r;
    if (!server)
        return error_set(err, -EINVAL, "kubeconfig %s: %s: server missing", f->path, what);
    if ((r = kube_parse_server(c, server, err)) < 0)
        return error_prefix(err, "kubeconfig %s: %s", f->path, what);
    if (insecure && !streq(insecure, "true") && !streq(insecure, "false"))
        return error_set(err, -EINVAL, "kubeconfig %s: %s: insecure-skip-tls-verify \"%s\" is not true or false",
                         f->path, what, insecure);
    c->insecure = insecure && streq(insecure, "true");
    c->server_name = xstrdup(tls_name ? tls_name : c->host);
    r = load_blob(f, cl, what, "certificate-authority", "certificate-authority-data", &c->ca_pem,
                  &c->ca_len, err);
    if (r < 0)
        return r;
    if (c->tls && !c->insecure && !c->ca_pem)
        return error_set(err, -EINVAL, "kubeconfig %s: %s: neither certificate-authority nor certificate-authority-data (nor insecure-skip-tls-verify)",
                         f->path, what);
    return 0;
}

static int kcfg_user(struct kcfg *f, yaml_node_t *u, const char *what, struct kube_creds *c,
                     struct error *err)
{
    if (map_get(f, u, "exec"))
        return error_set(err, -ENOTSUP, "kubeconfig %s: %s: exec credential plugins are not supported (use a token, tokenFile or client certificate)",
                         f->path, what);
    if (map_get(f, u, "auth-provider"))
        return error_set(err, -ENOTSUP, "kubeconfig %s: %s: auth-provider is not supported (use a token, tokenFile or client certificate)",
                         f->path, what);
    if (map_get(f, u, "username") || map_get(f, u, "password"))
        return error_set(err, -ENOTSUP, "kubeconfig %s: %s: basic authentication (username/password) is not supported",
                         f->path, what);
    const char *token, *token_file;
    int r = map_str(f, u, what, "token", &token, err);
    if (r < 0 || (r = map_str(f, u, what, "tokenFile", &token_file, err)) < 0)
        return r;
    if (token) {
        c->token = xstrdup(token);
    } else if (token_file) {
        c->token_file = resolve(f, token_file);
        r = kube_creds_refresh_token(c, true, err);
        if (r < 0)
            return error_prefix(err, "kubeconfig %s: %s: tokenFile", f->path, what);
    }
    r = load_blob(f, u, what, "client-certificate", "client-certificate-data", &c->cert_pem,
                  &c->cert_len, err);
    if (r < 0 || (r = load_blob(f, u, what, "client-key", "client-key-data", &c->key_pem,
                                &c->key_len, err)) < 0)
        return r;
    if (!c->cert_pem != !c->key_pem)
        return error_set(err, -EINVAL, "kubeconfig %s: %s: %s without %s", f->path, what,
                         c->cert_pem ? "client-certificate" : "client-key",
                         c->cert_pem ? "client-key" : "client-certificate");
    return 0;
}

static int kcfg_load(struct kcfg *f, struct kube_creds *c, struct error *err)
{
    yaml_node_t *root = yaml_document_get_root_node(&f->doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return error_set(err, -EINVAL, "kubeconfig %s: not a YAML mapping", f->path);
    const char *cur, *cl_name, *user_name;
    int r = map_str(f, root, "top level", "current-context", &cur, err);
    if (r < 0)
        return r;
    if (!cur)
        return error_set(err, -EINVAL, "kubeconfig %s: current-context missing", f->path);
    yaml_node_t *ctx, *cl, *u;
    char what[160];
    snprintf(what, sizeof(what), "context \"%s\"", cur);
    if ((r = find_named(f, root, "contexts", "context", cur, &ctx, err)) < 0 ||
        (r = map_str(f, ctx, what, "cluster", &cl_name, err)) < 0 ||
        (r = map_str(f, ctx, what, "user", &user_name, err)) < 0)
        return r;
    if (!cl_name)
        return error_set(err, -EINVAL, "kubeconfig %s: %s: cluster missing", f->path, what);
    if ((r = find_named(f, root, "clusters", "cluster", cl_name, &cl, err)) < 0)
        return r;
    snprintf(what, sizeof(what), "cluster \"%s\"", cl_name);
    if ((r = kcfg_cluster(f, cl, what, c, err)) < 0)
        return r;
    if (user_name) {
        if ((r = find_named(f, root, "users", "user", user_name, &u, err)) < 0)
            return r;
        snprintf(what, sizeof(what), "user \"%s\"", user_name);
        if ((r = kcfg_user(f, u, what, c, err)) < 0)
            return r;
    }
    return 0;
}

int kube_creds_from_kubeconfig(struct kube_creds *c, const char *path, struct error *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = read_bounded(path, &text, &len, NULL, err);
    if (r < 0)
        return error_prefix(err, "kubeconfig");
    struct kcfg f = { .path = path };
    const char *slash = strrchr(path, '/');
    f.dir = slash ? xstrndup(path, slash == path ? 1 : (size_t)(slash - path)) : xstrdup(".");
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        oom();
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &f.doc)) {
        r = error_set(err, -EINVAL, "kubeconfig %s: line %zu: %s", path,
                      parser.problem_mark.line + 1, parser.problem ? parser.problem : "bad YAML");
        yaml_parser_delete(&parser);
        free(f.dir);
        return r;
    }
    yaml_parser_delete(&parser);
    r = kcfg_load(&f, c, err);
    yaml_document_delete(&f.doc);
    free(f.dir);
    if (r < 0) {
        kube_creds_clear(c);
        return r;
    }
    c->source = xasprintf("kubeconfig %s", path);
    return 0;
}

int kube_creds_in_cluster(struct kube_creds *c, const char *sa_dir, struct error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return error_set(err, -ENOENT, "no kubeconfig given and KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set (not running in a pod?)");
    _cleanup_free_ char *url = strchr(host, ':') ? xasprintf("https://[%s]:%s", host, port)
                                                 : xasprintf("https://%s:%s", host, port);
    int r = kube_parse_server(c, url, err);
    if (r < 0)
        return error_prefix(err, "KUBERNETES_SERVICE_HOST/PORT");
    c->server_name = xstrdup(c->host);
    _cleanup_free_ char *ca = xasprintf("%s/ca.crt", sa_dir);
    size_t n;
    if ((r = read_bounded(ca, &c->ca_pem, &n, NULL, err)) < 0)
        goto fail;
    c->ca_len = n + 1;
    c->token_file = xasprintf("%s/token", sa_dir);
    if ((r = kube_creds_refresh_token(c, true, err)) < 0)
        goto fail;
    c->source = xstrdup("in-cluster config");
    return 0;
fail:
    kube_creds_clear(c);
    return error_prefix(err, "in-cluster config");
}
