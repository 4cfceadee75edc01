/* Unit tests of the cluster features' pure logic: per-node config selection (label
 * present / absent / unknown, default, every fallback, ConfigMap mount machinery),
 * the description of a selection (log, annotations, `list`),
 * Event aggregation and rate limiting, the Event delivery queue (retry window, bound,
 * merging), the Node label merge patch (only owned keys,
 * removals as null), the NodeFeature object and owner references, and the cluster
 * options of the config module. Runs in a scratch directory. */
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cluster/cluster-evcache.h"
#include "cluster/cluster-objects.h"
#include "cluster/cluster-select.h"
#include "common/check.h"
#include "common/scratch.h"
#include "config/config-load.h"
#include "core/error.h"

int test_failures;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static char *const NAMED_SINGLE[] = { "named", "single", NULL };

static void select_case(const char *dir, const char *label, const char *def,
                        char *const *fb, const char *want_name, const char *want_how,
                        bool want_note)
{
    struct cluster_selection s;
    struct error err = { 0 };
    int r = cluster_select_config(dir, label, "nvidia.com/device-plugin.config", def, fb, &s,
                                  &err);
    if (!want_how) {
        CHECK(r < 0);
        if (r >= 0)
            fprintf(stderr, "  unexpected selection %s\n", s.name ? s.name : "(empty)");
        cluster_selection_clear(&s);
        return;
    }
    CHECK(r == 0);
    if (r < 0) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    if (want_name)
        CHECK_STR(s.name, want_name);
    else
        CHECK(s.name == NULL && s.path == NULL);
    CHECK_STR(s.how, want_how);
    CHECK(want_note == (s.note != NULL));
    cluster_selection_clear(&s);
}

static void test_select(void)
{
    /* A ConfigMap mount: keys are symlinks into ..data -> ..<timestamp>/. */
    mkdir("cm", 0755);
    mkdir("cm/..2026_11_23_16_00_00.1", 0755);
    write_file("cm/..2026_11_23_16_00_00.1/default", "version: v1\n");
    write_file("cm/..2026_11_23_16_00_00.1/ts", "version: v1\n");
    CHECK(symlink("..2026_11_23_16_00_00.1", "cm/..data") == 0);
    CHECK(symlink("..data/default", "cm/default") == 0);
    CHECK(symlink("..data/ts", "cm/ts") == 0);
    CHECK(symlink("..data/gone", "cm/dangling") == 0);
    mkdir("cm/subdir", 0755);
    write_file("cm/..stray", "a file of the mount's machinery\n");

    struct error err = { 0 };
    _cleanup_free_ char *single = NULL;
    DIR *d = opendir("cm");
    CHECK(d != NULL);
    if (d) {
        CHECK(cluster_select_count(d, "cm", &single, &err) == 2);
        CHECK(single == NULL);
        closedir(d);
    }

    select_case("cm", "ts", NULL, NAMED_SINGLE, "ts", "node label", false);
    select_case("cm", NULL, NULL, NAMED_SINGLE, "default", "fallback named", false);
    select_case("cm", "", NULL, NAMED_SINGLE, "default", "fallback named", false);
    select_case("cm", NULL, "ts", NAMED_SINGLE, "ts", "default", false);
    /* unknown label: reported, then like an absent label */
    select_case("cm", "nope", NULL, NAMED_SINGLE, "default", "fallback named", true);
    select_case("cm", "nope", "ts", NAMED_SINGLE, "ts", "default", true);
    /* a default that does not exist is an error (config-manager's rule) */
    select_case("cm", NULL, "missing", NAMED_SINGLE, NULL, NULL, false);
    /* "single" needs exactly one file; "empty" always succeeds */
    select_case("cm", NULL, NULL, (char *const[]){ "single", NULL }, NULL, NULL, false);
    select_case("cm", NULL, NULL, (char *const[]){ "single", "empty", NULL }, NULL,
                "fallback empty", false);
    select_case("cm", NULL, NULL, (char *const[]){ NULL }, NULL, NULL, false);

    mkdir("one", 0755);
    write_file("one/mig", "version: v1\n");
    select_case("one", NULL, NULL, NAMED_SINGLE, "mig", "fallback single", false);
    select_case("one", NULL, NULL, (char *const[]){ "named", NULL }, NULL, NULL, false);

    /* Any number of files a ConfigMap can produce (issue 18, A5: over 256 turned
     * per-node config off): 10,000 files, the label's one and "default" among them. */
    mkdir("big", 0755);
    for (int i = 0; i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "big/c%05d", i);
        write_file(name, "version: v1\n");
    }
    write_file("big/default", "version: v1\n");
    select_case("big", "c09999", NULL, NAMED_SINGLE, "c09999", "node label", false);
    select_case("big", NULL, NULL, NAMED_SINGLE, "default", "fallback named", false);
    select_case("big", NULL, NULL, (char *const[]){ "single", NULL }, NULL, NULL, false);
    /* a label is one name in the directory, never a path out of it */
    select_case("cm", "../cm/ts", NULL, NAMED_SINGLE, "default", "fallback named", true);
    select_case("cm", "..data", NULL, NAMED_SINGLE, "default", "fallback named", true);

    mkdir("empty", 0755);
    select_case("empty", "x", NULL, NAMED_SINGLE, NULL, NULL, false);
    select_case("does-not-exist", NULL, NULL, NAMED_SINGLE, NULL, NULL, false);

    /* the error says what the label named */
    struct cluster_selection s;
    err = (struct error){ 0 };
    CHECK(cluster_select_config("one", "nope", "L", NULL, (char *const[]){ "named", NULL }, &s,
                                &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "config \"nope\" named by node label L does not exist in one");
    CHECK_STR_CONTAINS(err.msg, "all fallbacks failed");
}

static void test_evcache(void)
{
    struct cluster_evcache c;
    cluster_evcache_init(&c);
    uint64_t t = 1000;
    struct cluster_ev_decision d =
        cluster_evcache_observe(&c, "Warning", "GPUUnhealthy", "GPU 0 Xid 48", t, "n.1", "T1");
    CHECK(d.action == CLUSTER_EV_CREATE && d.count == 1);
    CHECK_STR(d.name, "n.1");
    d = cluster_evcache_observe(&c, "Warning", "GPUUnhealthy", "GPU 0 Xid 48", t, "n.2", "T2");
    CHECK(d.action == CLUSTER_EV_PATCH && d.count == 2);
    CHECK_STR(d.name, "n.1");
    CHECK_STR(d.first_time, "T1");
    /* a different message is a different Event */
    d = cluster_evcache_observe(&c, "Warning", "GPUUnhealthy", "GPU 1 Xid 48", t, "n.3", "T3");
    CHECK(d.action == CLUSTER_EV_CREATE);
    CHECK_STR(d.name, "n.3");
    /* 25 at once, then dropped until 5 minutes passed */
    unsigned sent = 3, dropped = 0;
    for (int i = 0; i < 40; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "m%d", i);
        d = cluster_evcache_observe(&c, "Normal", "GPUHealthy", msg, t, msg, "T");
        if (d.action == CLUSTER_EV_DROP)
            dropped++;
        else
            sent++;
    }
    CHECK(sent == CLUSTER_EVCACHE_BURST);
    CHECK(dropped == 43 - CLUSTER_EVCACHE_BURST);
    CHECK(c.dropped == dropped);
    d = cluster_evcache_observe(&c, "Normal", "X", "y", t + CLUSTER_EVCACHE_REFILL_MS - 1, "a",
                                "T");
    CHECK(d.action == CLUSTER_EV_DROP);
    d = cluster_evcache_observe(&c, "Normal", "X", "y", t + CLUSTER_EVCACHE_REFILL_MS, "a", "T");
    CHECK(d.action == CLUSTER_EV_CREATE);
    d = cluster_evcache_observe(&c, "Normal", "X", "y", t + CLUSTER_EVCACHE_REFILL_MS, "b", "T");
    CHECK(d.action == CLUSTER_EV_DROP);
    /* after a long quiet time the bucket is full again, not more */
    uint64_t later = t + 1000 * (uint64_t)CLUSTER_EVCACHE_REFILL_MS;
    sent = 0;
    for (int i = 0; i < 30; i++)
        sent += cluster_evcache_observe(&c, "Normal", "X", "y", later, "c", "T").action !=
                CLUSTER_EV_DROP;
    CHECK(sent == CLUSTER_EVCACHE_BURST);
    cluster_evcache_clear(&c);

    /* forget: a PATCH that found no Event makes the next one a CREATE */
    cluster_evcache_init(&c);
    cluster_evcache_observe(&c, "Warning", "R", "m", 0, "e1", "T");
    cluster_evcache_forget(&c, "e1");
    d = cluster_evcache_observe(&c, "Warning", "R", "m", 0, "e2", "T");
    CHECK(d.action == CLUSTER_EV_CREATE);
    CHECK_STR(d.name, "e2");
    /* the LRU is bounded: the oldest entry goes */
    cluster_evcache_clear(&c);
    cluster_evcache_init(&c);
    for (int i = 0; i <= CLUSTER_EVCACHE_SIZE; i++) {
        char msg[32];
        snprintf(msg, sizeof(msg), "m%d", i);
        c.bucket.tokens = CLUSTER_EVCACHE_BURST; /* not testing the bucket here */
        cluster_evcache_observe(&c, "Normal", "R", msg, 0, msg, "T");
    }
    c.bucket.tokens = CLUSTER_EVCACHE_BURST;
    d = cluster_evcache_observe(&c, "Normal", "R", "m0", 0, "new", "T");
    CHECK(d.action == CLUSTER_EV_CREATE);
    c.bucket.tokens = CLUSTER_EVCACHE_BURST;
    d = cluster_evcache_observe(&c, "Normal", "R", "m2", 0, "new2", "T");
    CHECK(d.action == CLUSTER_EV_PATCH);
    cluster_evcache_clear(&c);
}

/* The delivery queue: an Event is retried for at least 2 minutes (client-go: 12 x 10 s)
 * and never waits more than the cap between tries; 10,000 Events while the API server
 * is down leave CLUSTER_EVQ_MAX queued, Warnings kept over Normals; an Event aggregated
 * while it waits is sent once with the latest count. */
static void test_evq(void)
{
    CHECK(CLUSTER_EVQ_GIVEUP_MS >= 120000u);
    CHECK(CLUSTER_EVQ_GIVEUP_TRIES >= 12u);
    CHECK(CLUSTER_EVQ_RETRY_MAX_MS <= 30000u);

    struct cluster_evcache c;
    cluster_evcache_init(&c);
    struct cluster_evq_item *dropped = NULL;
    struct cluster_evq_item *it = cluster_evq_push(&c.q, "n.1", "Warning", "GPUUnhealthy",
                                                   "Xid 48", 1, "T1", "T1", false, &dropped);
    CHECK(it && !dropped && c.q.n == 1);
    uint64_t now = 5000, next = 0;
    CHECK(cluster_evq_due(&c.q, now, &next) == it);
    /* always failing: retried until both the time and the tries are spent */
    uint64_t start = now, last_gap = 0;
    unsigned tries = 0;
    while (cluster_evq_failed(it, now)) {
        tries++;
        CHECK(it->next_ms > now);
        last_gap = it->next_ms - now;
        CHECK(last_gap <= CLUSTER_EVQ_RETRY_MAX_MS);
        CHECK(cluster_evq_due(&c.q, now, &next) == NULL && next == it->next_ms);
        now = it->next_ms;
        CHECK(cluster_evq_due(&c.q, now, NULL) == it);
        if (tries > 1000)
            break;
    }
    uint64_t window = now - start;
    printf("evq: gave up after %u tries over %llu ms (last gap %llu ms)\n", tries + 1,
           (unsigned long long)window, (unsigned long long)last_gap);
    CHECK(window >= 120000u && window >= CLUSTER_EVQ_GIVEUP_MS);
    CHECK(tries + 1 >= 12u);
    /* At most: the give-up time plus one capped gap, or, when the jitter drew long gaps,
     * the time the last of the required tries needs at full delays (1+2+...+30 s: 211 s). */
    uint64_t slowest = 0, gap = CLUSTER_EVQ_RETRY_FIRST_MS;
    for (unsigned i = 1; i < CLUSTER_EVQ_GIVEUP_TRIES; i++, gap *= 2)
        slowest += gap < CLUSTER_EVQ_RETRY_MAX_MS ? gap : CLUSTER_EVQ_RETRY_MAX_MS;
    CHECK(window <= CLUSTER_EVQ_GIVEUP_MS + CLUSTER_EVQ_RETRY_MAX_MS || window <= slowest);
    cluster_evq_remove(&c.q, it);
    cluster_evq_item_free(it);
    CHECK(c.q.n == 0);

    /* merging: the same Event name updates the waiting item */
    it = cluster_evq_push(&c.q, "n.2", "Warning", "R", "m", 1, "T1", "T1", false, NULL);
    CHECK(cluster_evq_push(&c.q, "n.2", "Warning", "R", "m", 7, "T1", "T7", true, NULL) == it);
    CHECK(c.q.n == 1 && it->count == 7 && !it->exists && !it->changed);
    CHECK_STR(it->last_time, "T7");
    it->req = (struct kube_req *)&c; /* in flight: a merge marks it to send again */
    cluster_evq_push(&c.q, "n.2", "Warning", "R", "m", 8, "T1", "T8", true, NULL);
    CHECK(it->changed && it->count == 8);

    /* the bound: 10,000 Events (a Warning every 10th) while nothing gets through */
    uint64_t drops = 0;
    for (int i = 0; i < 10000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "e.%d", i);
        cluster_evq_push(&c.q, name, i % 10 ? "Normal" : "Warning", "R", name, 1, "T", "T",
                         false, &dropped);
        if (dropped) {
            drops++;
            CHECK(dropped != it); /* never the one in flight */
            cluster_evq_item_free(dropped);
        }
        CHECK(c.q.n <= CLUSTER_EVQ_MAX);
    }
    unsigned warnings = 0;
    for (size_t i = 0; i < c.q.n; i++)
        warnings += streq(c.q.items[i]->type, "Warning");
    printf("evq: 10000 Events queued while down: %zu kept (%u Warnings), %llu dropped\n",
           c.q.n, warnings, (unsigned long long)drops);
    CHECK(c.q.n == CLUSTER_EVQ_MAX);
    CHECK(drops == c.q.dropped_full && drops == 10000 + 1 - CLUSTER_EVQ_MAX);
    /* the Warnings stay: the newest 62 of them and the one in flight, then one Normal */
    CHECK(warnings == CLUSTER_EVQ_MAX - 1);
    it->req = NULL;
    cluster_evcache_clear(&c);
    CHECK(c.q.n == 0);
}

static void check_json(json_t *got, const char *want)
{
    json_error_t je;
    json_t *w = json_loads(want, 0, &je);
    CHECK(w != NULL);
    bool eq = got && w && json_equal(got, w);
    CHECK(eq);
    if (!eq) {
        char *s = got ? json_dumps(got, JSON_SORT_KEYS) : NULL;
        fprintf(stderr, "  got  %s\n  want %s\n", s ? s : "NULL", want);
        free(s);
    }
    json_decref(w);
}

static void test_node_patch(void)
{
    json_t *labels = json_pack("{s:s, s:s}", "nvidia.com/gpu.count", "8",
                               "nvidia.com/gpu.product", "A100");
    /* first time: everything set, the annotation written */
    json_t *p = cluster_node_labels_patch(labels, NULL, NULL);
    check_json(p, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.count\":\"8\","
                  "\"nvidia.com/gpu.product\":\"A100\"},\"annotations\":{"
                  "\"gpu-device-plugin.github.io/owned-labels\":"
                  "\"nvidia.com/gpu.count,nvidia.com/gpu.product\"}}}");
    json_decref(p);
    /* nothing changed: no patch */
    json_t *node_labels = json_pack("{s:s, s:s, s:s}", "nvidia.com/gpu.count", "8",
                                    "nvidia.com/gpu.product", "A100", "team", "a");
    json_t *ann = json_pack("{s:s}", "gpu-device-plugin.github.io/owned-labels",
                            "nvidia.com/gpu.count,nvidia.com/gpu.product");
    CHECK(cluster_node_labels_patch(labels, node_labels, ann) == NULL);
    /* a key we no longer produce is removed with null; others' labels untouched, also
     * one that looks like ours but that we never wrote */
    json_object_set_new(node_labels, "nvidia.com/gpu.family", json_string("ampere"));
    json_t *fewer = json_pack("{s:s}", "nvidia.com/gpu.count", "4");
    p = cluster_node_labels_patch(fewer, node_labels, ann);
    check_json(p, "{\"metadata\":{\"labels\":{\"nvidia.com/gpu.count\":\"4\","
                  "\"nvidia.com/gpu.product\":null},\"annotations\":{"
                  "\"gpu-device-plugin.github.io/owned-labels\":\"nvidia.com/gpu.count\"}}}");
    json_decref(p);
    /* an owned key someone already removed is not nulled again */
    json_object_del(node_labels, "nvidia.com/gpu.product");
    json_object_set_new(node_labels, "nvidia.com/gpu.count", json_string("4"));
    p = cluster_node_labels_patch(fewer, node_labels, ann);
    check_json(p, "{\"metadata\":{\"labels\":{},\"annotations\":{"
                  "\"gpu-device-plugin.github.io/owned-labels\":\"nvidia.com/gpu.count\"}}}");
    json_decref(p);
    json_decref(fewer);
    json_decref(labels);
    json_decref(node_labels);
    json_decref(ann);
}

static void test_nodefeature(void)
{
    json_t *labels = json_pack("{s:s}", "nvidia.com/gpu.count", "2");
    json_t *pod = json_loads(
        "{\"metadata\":{\"name\":\"gdp-x\",\"uid\":\"u-pod\",\"ownerReferences\":["
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"gdp\",\"uid\":\"u-ds\","
        "\"controller\":true}]}}",
        0, NULL);
    json_t *refs = cluster_owner_refs_from_pod(pod);
    check_json(refs, "[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"name\":\"gdp\","
                     "\"uid\":\"u-ds\",\"controller\":true},{\"apiVersion\":\"v1\",\"kind\":"
                     "\"Pod\",\"name\":\"gdp-x\",\"uid\":\"u-pod\"}]");
    json_t *nf = cluster_nodefeature_build("node-1", "gpu", labels, refs);
    check_json(nf, "{\"apiVersion\":\"nfd.k8s-sigs.io/v1alpha1\",\"kind\":\"NodeFeature\","
                   "\"metadata\":{\"name\":\"nvidia-features-for-node-1\",\"namespace\":\"gpu\","
                   "\"labels\":{\"nfd.node.kubernetes.io/node-name\":\"node-1\"},"
                   "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\","
                   "\"name\":\"gdp\",\"uid\":\"u-ds\",\"controller\":true},{\"apiVersion\":"
                   "\"v1\",\"kind\":\"Pod\",\"name\":\"gdp-x\",\"uid\":\"u-pod\"}]},"
                   "\"spec\":{\"labels\":{\"nvidia.com/gpu.count\":\"2\"}}}");
    /* the server's copy has more fields: still the same */
    json_t *server = json_deep_copy(nf);
    json_object_set_new(json_object_get(server, "metadata"), "resourceVersion",
                        json_string("42"));
    CHECK(cluster_nodefeature_same(server, nf));
    json_object_set_new(json_object_get(json_object_get(server, "spec"), "labels"),
                        "nvidia.com/gpu.count", json_string("3"));
    CHECK(!cluster_nodefeature_same(server, nf));
    json_decref(server);
    /* a pod without a DaemonSet owner: no references */
    json_t *bare = json_loads("{\"metadata\":{\"name\":\"p\",\"uid\":\"u\"}}", 0, NULL);
    CHECK(cluster_owner_refs_from_pod(bare) == NULL);
    json_t *nf2 = cluster_nodefeature_build("node-1", "gpu", labels, NULL);
    CHECK(json_object_get(json_object_get(nf2, "metadata"), "ownerReferences") == NULL);
    json_decref(nf2);
    json_decref(bare);
    json_decref(nf);
    json_decref(refs);
    json_decref(pod);
    json_decref(labels);

    json_t *ev = cluster_event_build("node-1", "node-1.1a", "Warning", "GPUUnhealthy", "m", 1,
                                     "T0", "T0");
    CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "kind")),
              "Node");
    CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "metadata"), "namespace")),
              "default");
    json_decref(ev);
}

static void test_options(void)
{
    struct config c;
    struct error err = { 0 };
    char *argv[] = { (char *)"gdp", NULL };
    CHECK(config_load(&c, 1, argv, NULL, NULL, &err) == 0);
    CHECK_STR(c.cluster.namespace, "default");
    CHECK_STR(c.cluster.config_node_label, "nvidia.com/device-plugin.config");
    CHECK(c.cluster.kube_api_qps == 5 && c.cluster.kube_api_burst == 10);
    CHECK_STR(c.cluster.config_fallback_strategies[0], "named");
    CHECK_STR(c.cluster.config_fallback_strategies[1], "single");
    CHECK(c.cluster.config_fallback_strategies[2] == NULL);
    CHECK(c.cluster.node_name && !*c.cluster.node_name);
    config_free(&c);

    char *env[] = { (char *)"NODE_NAME=n1", (char *)"CONFIG_FILE_SRCDIR=/cfgs",
                    (char *)"NODE_LABEL=x/y", (char *)"DEFAULT_CONFIG=d",
                    (char *)"FALLBACK_STRATEGIES=empty", (char *)"KUBE_API_QPS=2.5", NULL };
    CHECK(config_load(&c, 1, argv, env, NULL, &err) == 0);
    CHECK_STR(c.cluster.node_name, "n1");
    CHECK_STR(c.cluster.config_dir, "/cfgs");
    CHECK_STR(c.cluster.config_node_label, "x/y");
    CHECK_STR(c.cluster.config_default, "d");
    CHECK_STR(c.cluster.config_fallback_strategies[0], "empty");
    CHECK(c.cluster.kube_api_qps == 2.5);
    config_free(&c);

    char *bad[] = { (char *)"gdp", (char *)"--config-fallback-strategies=named,sngle", NULL };
    CHECK(config_load(&c, 2, bad, NULL, NULL, &err) < 0);
    CHECK_STR_CONTAINS(err.msg, "unknown fallback strategy: sngle");
    config_free(&c);

    /* the per-node file replaces --config-file; "" is the empty config */
    write_file("base.yaml", "version: v1\nflags:\n  migStrategy: single\n");
    write_file("picked.yaml", "version: v1\nflags:\n  migStrategy: mixed\n");
    char *withfile[] = { (char *)"gdp", (char *)"--config-file=base.yaml", NULL };
    CHECK(config_load_with_file(&c, 2, withfile, NULL, NULL, "picked.yaml", &err) == 0);
    CHECK(c.mig_strategy == MIG_STRATEGY_MIXED);
    config_free(&c);
    CHECK(config_load_with_file(&c, 2, withfile, NULL, NULL, "", &err) == 0);
    CHECK(c.mig_strategy == MIG_STRATEGY_NONE && c.config_file == NULL);
    config_free(&c);
}

/* The words serve's log, the annotations and `list` share. */
static void test_describe(void)
{
    const char *key = "nvidia.com/device-plugin.config";
    struct cluster_selection s = { .name = "ts", .path = "d/ts", .how = "node label" };
    char *t = cluster_selection_source(&s, key);
    CHECK_STR(t, "node label nvidia.com/device-plugin.config=ts");
    free(t);
    t = cluster_selection_describe(&s, key, true);
    CHECK_STR(t, "ts (node label nvidia.com/device-plugin.config=ts)");
    free(t);

    s = (struct cluster_selection){ .name = "default", .how = "fallback named",
                                    .note = "config \"x\" named by node label L does not exist" };
    t = cluster_selection_source(&s, key);
    CHECK_STR(t, "fallback named");
    free(t);
    t = cluster_selection_describe(&s, key, true);
    CHECK_STR(t, "default (fallback named; config \"x\" named by node label L does not exist)");
    free(t);
    t = cluster_selection_describe(&s, key, false);
    CHECK_STR(t, "default (fallback named)");
    free(t);

    s = (struct cluster_selection){ .how = "fallback empty" };
    t = cluster_selection_describe(&s, key, true);
    CHECK_STR(t, "(empty config) (fallback empty)");
    free(t);
}

int main(void)
{
    const char *dir = scratch_dir("gdp-test-cluster-");
    if (chdir(dir) < 0) {
        perror(dir);
        return 1;
    }
    test_select();
    test_describe();
    test_evcache();
    test_evq();
    test_node_patch();
    test_nodefeature();
    test_options();
    if (chdir("/") < 0 || scratch_remove(dir) < 0) {
        fprintf(stderr, "could not remove the scratch directory\n");
        test_failures++;
    }
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
