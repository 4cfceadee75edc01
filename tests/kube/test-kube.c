/* kube: the pure parts of the API client. Kubeconfig files (good ones; every missing or
 * invalid field gives one line naming it; exec and auth-provider refused), in-cluster
 * credentials, server URLs, watch event lines, the RBAC verb and resource of a path,
 * escaping, the token file re-read. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "tests/common/check.h"
#include "tests/common/scratch.h"

#include "core/error.h"
#include "core/macro.h"
#include "kube/kube-internal.h"

int test_failures;

static const char *dir;

static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

/* A kubeconfig with one context "c", cluster "cl" and user "u", made of the given
 * cluster and user bodies (YAML flow mappings). */
static const char *kubeconfig(const char *cluster, const char *user)
{
    static char text[2048];
    snprintf(text, sizeof(text),
             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
             "contexts:\n- name: c\n  context: {cluster: cl, user: u}\n"
             "clusters:\n- name: cl\n  cluster: %s\n"
             "users:\n- name: u\n  user: %s\n",
             cluster, user);
    return write_file("config", text);
}

static int load(const char *path, struct kube_creds *c, struct error *err)
{
    *c = (struct kube_creds){ 0 };
    *err = (struct error){ 0 };
    return kube_creds_from_kubeconfig(c, path, err);
}

/* The kubeconfig fails and its one-line message contains `want`. */
static void check_bad(const char *cluster, const char *user, const char *want)
{
    struct kube_creds c;
    struct error err;
    int r = load(kubeconfig(cluster, user), &c, &err);
    CHECK(r < 0);
    CHECK_STR_CONTAINS(err.msg, want);
    CHECK(!strchr(err.msg, '\n'));
    kube_creds_clear(&c);
}

static void test_kubeconfig(void)
{
    struct kube_creds c;
    struct error err;
    write_file("ca.crt", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    write_file("tok", "  secret-token\n");

    /* Relative paths are relative to the kubeconfig's directory. */
    CHECK(load(kubeconfig("{server: \"https://10.0.0.1:6443\", certificate-authority: ca.crt}",
                          "{token: abc}"), &c, &err) == 0);
    CHECK(c.tls);
    CHECK_STR(c.host, "10.0.0.1");
    CHECK_STR(c.port, "6443");
    CHECK_STR(c.authority, "10.0.0.1:6443");
    CHECK_STR(c.server_name, "10.0.0.1");
    CHECK_STR_CONTAINS(c.ca_pem, "BEGIN CERTIFICATE");
    CHECK(c.ca_len == strlen(c.ca_pem) + 1);
    CHECK_STR(c.token, "abc");
    kube_creds_clear(&c);

    /* base64 data, tls-server-name, tokenFile (trimmed), IPv6 host, default port. */
    CHECK(load(kubeconfig("{server: \"https://[fd00::1]\", certificate-authority-data: aGVsbG8=, tls-server-name: api.example}",
                          "{tokenFile: tok}"), &c, &err) == 0);
    CHECK_STR(c.host, "fd00::1");
    CHECK_STR(c.port, "443");
    CHECK_STR(c.authority, "[fd00::1]:443");
    CHECK_STR(c.server_name, "api.example");
    CHECK_STR(c.ca_pem, "hello");
    CHECK_STR(c.token, "secret-token");
    CHECK_STR_CONTAINS(c.token_file, "/tok");
    kube_creds_clear(&c);

    /* insecure without a CA; client certificate and key from data. */
    CHECK(load(kubeconfig("{server: \"https://h:1\", insecure-skip-tls-verify: true}",
                          "{client-certificate-data: Y2VydA==, client-key-data: a2V5}"), &c, &err) == 0);
    CHECK(c.insecure);
    CHECK_STR(c.cert_pem, "cert");
    CHECK_STR(c.key_pem, "key");
    CHECK(!c.token);
    kube_creds_clear(&c);

    /* plain http (h2c) needs no CA. */
    CHECK(load(kubeconfig("{server: \"http://127.0.0.1:8080/\"}", "{}"), &c, &err) == 0);
    CHECK(!c.tls);
    kube_creds_clear(&c);

    check_bad("{certificate-authority: ca.crt}", "{token: a}", "cluster \"cl\": server missing");
    check_bad("{server: \"ftp://x\", certificate-authority: ca.crt}", "{token: a}", "not an https:// or http:// URL");
    check_bad("{server: \"https://h:99999\", certificate-authority: ca.crt}", "{token: a}", "bad port");
    check_bad("{server: \"https://h/prefix\", certificate-authority: ca.crt}", "{token: a}", "path prefix");
    check_bad("{server: \"https://h\"}", "{token: a}", "neither certificate-authority nor certificate-authority-data");
    check_bad("{server: \"https://h\", certificate-authority: missing.crt}", "{token: a}", "certificate-authority: ");
    check_bad("{server: \"https://h\", certificate-authority: missing.crt}", "{token: a}", "missing.crt");
    check_bad("{server: \"https://h\", certificate-authority-data: \"!!\"}", "{token: a}", "certificate-authority-data is not valid base64");
    check_bad("{server: \"https://h\", insecure-skip-tls-verify: maybe}", "{token: a}", "insecure-skip-tls-verify \"maybe\"");
    check_bad("{server: \"https://h\", insecure-skip-tls-verify: true}", "{exec: {command: aws}}", "exec credential plugins are not supported");
    check_bad("{server: \"https://h\", insecure-skip-tls-verify: true}", "{auth-provider: {name: gcp}}", "auth-provider is not supported");
    check_bad("{server: \"https://h\", insecure-skip-tls-verify: true}", "{tokenFile: nope}", "user \"u\": tokenFile");
    check_bad("{server: \"https://h\", insecure-skip-tls-verify: true}", "{client-certificate-data: Y2VydA==}", "client-certificate without client-key");
    check_bad("{server: [1, 2]}", "{}", "server is not a string");

    /* Context-level faults. */
    const char *cases[][2] = {
        { "apiVersion: v1\n", "current-context missing" },
        { "current-context: x\ncontexts: []\n", "context \"x\" not found in contexts" },
        { "current-context: c\ncontexts:\n- name: c\n  context: {user: u}\n", "context \"c\": cluster missing" },
        { "current-context: c\ncontexts:\n- name: c\n  context: {cluster: nope}\nclusters: []\n", "cluster \"nope\" not found" },
        { "current-context: c\ncontexts: {a: b}\n", "contexts is not a list" },
        { "- a\n- b\n", "not a YAML mapping" },
        { "a: [\n", "line " },
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        CHECK(load(write_file("config", cases[i][0]), &c, &err) < 0);
        CHECK_STR_CONTAINS(err.msg, cases[i][1]);
        kube_creds_clear(&c);
    }
    /* A FIFO named as a credential file is refused at once, not waited on. */
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    check_bad("{server: \"https://h\", certificate-authority: fifo}", "{token: a}", "fifo: not a regular file");

    snprintf(err.msg, sizeof(err.msg), "%s", "");
    CHECK(load("/nonexistent/kubeconfig", &c, &err) == -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/kubeconfig");
}

static void test_in_cluster(void)
{
    struct kube_creds c = { 0 };
    struct error err = { 0 };
    char sa[128];
    snprintf(sa, sizeof(sa), "%s/sa", dir);
    mkdir(sa, 0700);
    unsetenv("KUBERNETES_SERVICE_HOST");
    CHECK(kube_creds_in_cluster(&c, sa, &err) == -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "KUBERNETES_SERVICE_HOST");
    setenv("KUBERNETES_SERVICE_HOST", "fd00::10", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK(kube_creds_in_cluster(&c, sa, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "sa/ca.crt");
    write_file("sa/ca.crt", "x");
    write_file("sa/token", "t1\n");
    CHECK(kube_creds_in_cluster(&c, sa, &err) == 0);
    CHECK_STR(c.authority, "[fd00::10]:443");
    CHECK_STR(c.server_name, "fd00::10");
    CHECK_STR(c.token, "t1");

    /* Rotation the kubelet's way: a new file renamed over the old one. Not looked at
     * again within a second unless forced (a 401). */
    write_file("sa/token.new", "t2\n");
    char a[160], b[160];
    snprintf(a, sizeof(a), "%s/sa/token.new", dir);
    snprintf(b, sizeof(b), "%s/sa/token", dir);
    CHECK(rename(a, b) == 0);
    CHECK(kube_creds_refresh_token(&c, false, &err) == 0);
    CHECK_STR(c.token, "t1");
    CHECK(kube_creds_refresh_token(&c, true, &err) == 1);
    CHECK_STR(c.token, "t2");
    CHECK(kube_creds_refresh_token(&c, true, &err) == 0);
    unlink(b);
    CHECK(kube_creds_refresh_token(&c, true, &err) < 0);
    CHECK_STR(c.token, "t2"); /* the old one is kept */
    kube_creds_clear(&c);
}

static void test_server_urls(void)
{
    struct kube_creds c = { 0 };
    struct error err = { 0 };
    CHECK(kube_parse_server(&c, "https://api.example:8443", &err) == 0);
    CHECK_STR(c.authority, "api.example:8443");
    CHECK(kube_parse_server(&c, "http://[::1]:80", &err) == 0 && !c.tls);
    CHECK_STR(c.host, "::1");
    CHECK(kube_parse_server(&c, "https://::1:443", &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "needs brackets");
    CHECK(kube_parse_server(&c, "https://[::1", &err) < 0);
    CHECK(kube_parse_server(&c, "https://u@h", &err) < 0);
    CHECK(kube_parse_server(&c, "https://h:", &err) < 0);
    CHECK(kube_parse_server(&c, "https://", &err) < 0);
    kube_creds_clear(&c);
}

static void test_watch_lines(void)
{
    json_t *ev, *obj;
    const char *type;
    struct error err = { 0 };
    const char ok[] = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"n\"}}}";
    CHECK(kube_watch_parse_line(ok, strlen(ok), &ev, &type, &obj, &err) == 0);
    CHECK_STR(type, "MODIFIED");
    CHECK(json_is_object(json_object_get(obj, "metadata")));
    json_decref(ev);
    const char *bad[] = { "{", "[]", "{\"type\":\"ADDED\"}", "{\"type\":\"WHAT\",\"object\":{}}",
                          "{\"type\":1,\"object\":{}}" };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        CHECK(kube_watch_parse_line(bad[i], strlen(bad[i]), &ev, &type, &obj, &err) == -EBADMSG);
    /* Only the given length is read (the stream buffer is not NUL-terminated). */
    char two[] = "{\"type\":\"BOOKMARK\",\"object\":{}}{garbage";
    CHECK(kube_watch_parse_line(two, strlen(two) - 8, &ev, &type, &obj, &err) == 0);
    CHECK_STR(type, "BOOKMARK");
    json_decref(ev);
}

static void check_name(enum kube_method m, const char *path, const char *verb, const char *res,
                       const char *group)
{
    char r[128], g[128];
    kube_path_resource(path, r, sizeof(r), g, sizeof(g));
    CHECK_STR(kube_verb(m, path), verb);
    CHECK_STR(r, res);
    CHECK_STR(g, group);
}

static void test_names(void)
{
    check_name(KUBE_PATCH_MERGE, "/api/v1/nodes/n1", "patch", "nodes", "");
    check_name(KUBE_GET, "/api/v1/nodes?fieldSelector=x", "list", "nodes", "");
    check_name(KUBE_GET, "/api/v1/nodes?watch=1&resourceVersion=5", "watch", "nodes", "");
    check_name(KUBE_GET, "/api/v1/nodes/n1", "get", "nodes", "");
    check_name(KUBE_PATCH_STRATEGIC, "/api/v1/nodes/n1/status", "patch", "nodes/status", "");
    check_name(KUBE_POST, "/api/v1/namespaces/kube-system/events", "create", "events", "");
    check_name(KUBE_GET, "/api/v1/namespaces/kube-system", "get", "namespaces", "");
    check_name(KUBE_DELETE, "/api/v1/namespaces/ns/pods", "deletecollection", "pods", "");
    check_name(KUBE_PUT, "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/ns/nodefeatures/f", "update",
               "nodefeatures", "nfd.k8s-sigs.io");

    _cleanup_free_ char *e = kube_escape("metadata.name=n 1/x~");
    CHECK_STR(e, "metadata.name%3Dn%201%2Fx~");
    json_t *st = json_pack("{s:s,s:s}", "kind", "Status", "message", "no");
    CHECK_STR(kube_status_message(st), "no");
    CHECK(!kube_status_message(NULL));
    json_decref(st);
}

/* Each watch request draws its timeoutSeconds afresh in [300, 600) (issue 18: a fixed
 * 300 s renewed a fleet's watches in lock-step): bounds, and spread over the range. */
static void test_watch_timeout(void)
{
    unsigned lo = UINT32_MAX, hi = 0, tenths[10] = { 0 };
    for (int i = 0; i < 3000; i++) {
        unsigned t = kube_watch_timeout_s();
        CHECK(t >= 300 && t < 600);
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
        tenths[t >= 300 && t < 600 ? (t - 300) / 30 : 0]++;
    }
    CHECK(lo < 310 && hi > 589);
    /* 300 expected per tenth; 200-400 fails by chance with p < 1e-8 */
    for (int i = 0; i < 10; i++)
        CHECK(tenths[i] >= 200 && tenths[i] <= 400);
}

int main(void)
{
    dir = scratch_dir("test-kube-");
    test_kubeconfig();
    test_in_cluster();
    test_server_urls();
    test_watch_lines();
    test_names();
    test_watch_timeout();
    if (scratch_remove(dir) < 0)
        test_failures++;
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
