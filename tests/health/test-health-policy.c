/* Unit tests of the pure health policy: env semantics of the reference, Xid classes,
 * config errors (through config_load()), the recovery state machine and wait-error tracking. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>

#include "core/log.h"
#include "tests/common/check.h"
#include "policy/health.h"
#include "tests/health/health-load.h"

int test_failures;



static struct health_config *load(const char *yamlish_json, char **envp)
{
    struct error err = { 0 };
    struct health_config *hc = test_health_load(yamlish_json, envp, &err);
    if (!hc) {
        fprintf(stderr, "unexpected load error: %s\n", err.msg);
        test_failures++;
        return NULL;
    }
    return hc;
}

/* Returns the error message (static buffer) of a load that must fail. */
static const char *load_err(const char *json, char **envp)
{
    static struct error err;
    err = (struct error){ 0 };
    struct health_config *hc = test_health_load(json, envp, &err);
    int r = hc ? 0 : err.code;
    if (r >= 0) {
        test_health_free(hc);
        fprintf(stderr, "load of %s unexpectedly succeeded\n", json ? json : "(env)");
        test_failures++;
        return "";
    }
    CHECK(r == err.code);
    return err.msg;
}

static void test_defaults(void)
{
    char *env[] = { NULL };
    struct health_config *hc = load(NULL, env);
    CHECK(hc);
    if (!hc)
        return;
    CHECK(!hc->disabled);
    /* the reference's default-ignored Xids of HEAD */
    uint64_t ignored[] = { 13, 31, 43, 45, 68, 109 };
    for (size_t i = 0; i < ELEMENTSOF(ignored); i++)
        CHECK(health_classify(hc, ignored[i]) == HEALTH_IGNORE);
    CHECK(health_classify(hc, 48) == HEALTH_NEVER);
    CHECK(health_classify(hc, 95) == HEALTH_NEVER);
    CHECK(health_classify(hc, 79) == HEALTH_LOST);
    CHECK(health_classify(hc, 94) == HEALTH_RECOVER);
    CHECK(health_classify(hc, 12345) == HEALTH_RECOVER); /* unknown: default class */
    CHECK(hc->quiet_ms == HEALTH_DEFAULT_QUIET_MS);
    CHECK(hc->wait_error_threshold == HEALTH_DEFAULT_WAIT_ERROR_THRESHOLD);
    CHECK(hc->unattributed_probe_ms == HEALTH_DEFAULT_UNATTRIBUTED_PROBE_MS);
    CHECK(streq(health_xid_name(48), "double-bit ECC error"));
    test_health_free(hc);
}

static void test_dp_env(void)
{
    struct health_config *hc;

    /* disable all, any case, either spelling */
    char *e1[] = { "DP_DISABLE_HEALTHCHECKS=ALL", NULL };
    hc = load(NULL, e1);
    CHECK(hc && hc->disabled);
    test_health_free(hc);
    char *e2[] = { "DP_DISABLE_HEALTHCHECKS=13, Xids ,5", NULL };
    hc = load(NULL, e2);
    CHECK(hc && hc->disabled);
    test_health_free(hc);

    /* "xids" must be a whole item (HEAD), not a substring as in v0.13 */
    char *e3[] = { "DP_DISABLE_HEALTHCHECKS=noxids", NULL };
    hc = load(NULL, e3);
    CHECK(hc && !hc->disabled);
    test_health_free(hc);

    /* numeric disable items add to the ignored set, malformed ones are skipped */
    char *e4[] = { "DP_DISABLE_HEALTHCHECKS=48, 94,bogus,,-3", NULL };
    hc = load(NULL, e4);
    CHECK(hc && !hc->disabled);
    if (hc) {
        CHECK(health_classify(hc, 48) == HEALTH_IGNORE);
        CHECK(health_classify(hc, 94) == HEALTH_IGNORE);
        CHECK(health_classify(hc, 95) == HEALTH_NEVER);
    }
    test_health_free(hc);

    /* numeric enable items force default-ignored Xids to act */
    char *e5[] = { "DP_ENABLE_HEALTHCHECKS=13,31", NULL };
    hc = load(NULL, e5);
    if (hc) {
        CHECK(health_classify(hc, 13) == HEALTH_RECOVER);
        CHECK(health_classify(hc, 31) == HEALTH_RECOVER);
        CHECK(health_classify(hc, 43) == HEALTH_IGNORE);
    }
    test_health_free(hc);

    /* enable beats a numeric disable of the same Xid, keeping its own class */
    char *e6[] = { "DP_DISABLE_HEALTHCHECKS=48", "DP_ENABLE_HEALTHCHECKS=48", NULL };
    hc = load(NULL, e6);
    CHECK(hc && health_classify(hc, 48) == HEALTH_NEVER);
    test_health_free(hc);

    /* numeric enable items do not punch holes into disable-all */
    char *e7[] = { "DP_DISABLE_HEALTHCHECKS=all", "DP_ENABLE_HEALTHCHECKS=48,79", NULL };
    hc = load(NULL, e7);
    CHECK(hc && hc->disabled);
    test_health_free(hc);

    /* enable-all overrides disable-all and acts on every Xid */
    char *e8[] = { "DP_DISABLE_HEALTHCHECKS=all,48", "DP_ENABLE_HEALTHCHECKS=xids", NULL };
    hc = load(NULL, e8);
    CHECK(hc && !hc->disabled);
    if (hc) {
        CHECK(health_classify(hc, 13) == HEALTH_RECOVER);
        CHECK(health_classify(hc, 109) == HEALTH_RECOVER);
        CHECK(health_classify(hc, 48) == HEALTH_NEVER);
        CHECK(health_classify(hc, 7777) == HEALTH_RECOVER);
    }
    test_health_free(hc);

    /* the raw set parser */
    struct health_xid_set s = { 0 };
    unsigned bad = 0;
    config_xid_set_parse(&s, " 1, 18446744073709551615 ,18446744073709551616, x1,ALL", &bad);
    CHECK(s.all);
    CHECK(s.n == 2);
    CHECK(config_xid_set_has(&s, UINT64_MAX));
    CHECK(bad == 2);
    config_xid_set_clear(&s);
}

static void test_file_and_gdp_env(void)
{
    char *none[] = { NULL };
    struct health_config *hc = load("{\"quietPeriod\": \"250ms\", \"maxQuietPeriod\": \"2s\","
                                    " \"flapWindow\": 30, \"waitTimeout\": \"100ms\","
                                    " \"waitErrorThreshold\": \"3\","
                                    " \"unattributedProbeDelay\": \"500ms\","
                                    " \"xids\": {\"ignore\": [94, \"63\"], \"never\": [31],"
                                    " \"default\": \"never\"}}",
                                    none);
    if (hc) {
        CHECK(hc->quiet_ms == 250);
        CHECK(hc->max_quiet_ms == 2000);
        CHECK(hc->flap_window_ms == 30000);
        CHECK(hc->wait_timeout_ms == 100);
        CHECK(hc->wait_error_threshold == 3);
        CHECK(hc->unattributed_probe_ms == 500);
        CHECK(health_classify(hc, 94) == HEALTH_IGNORE);
        CHECK(health_classify(hc, 63) == HEALTH_IGNORE);
        CHECK(health_classify(hc, 31) == HEALTH_NEVER);
        CHECK(health_classify(hc, 4242) == HEALTH_NEVER);
    }
    test_health_free(hc);

    /* env beats file; a disable from the reference's variable beats both */
    char *env[] = { "GDP_HEALTH_QUIET_PERIOD=5s", "GDP_HEALTH_XIDS_RECOVER=48, 31",
                    "DP_DISABLE_HEALTHCHECKS=31", NULL };
    hc = load("{\"quietPeriod\": \"1s\", \"xids\": {\"never\": [48]}}", env);
    if (hc) {
        CHECK(hc->quiet_ms == 5000);
        CHECK(health_classify(hc, 48) == HEALTH_RECOVER);
        CHECK(health_classify(hc, 31) == HEALTH_IGNORE);
    }
    test_health_free(hc);

    /* a long quiet period alone lifts the default cap */
    char *env2[] = { "GDP_HEALTH_QUIET_PERIOD=2h", NULL };
    hc = load(NULL, env2);
    CHECK(hc && hc->max_quiet_ms == 2 * 3600 * 1000ULL);
    test_health_free(hc);
}

static void test_config_errors(void)
{
    char *none[] = { NULL };
    const char *m;

    m = load_err("{\"xids\": {\"recover\": [48, \"x\"]}}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.xids.recover: item 2: not an Xid number: \"x\"");
    m = load_err("{\"xids\": {\"recover\": 48}}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.xids.recover: expected a list");
    m = load_err("{\"xids\": {\"recover\": [48], \"never\": [48]}}", none);
    CHECK_STR_CONTAINS(m, "health.xids.never: Xid 48 is also listed under \"recover\"");
    m = load_err("{\"xids\": {\"sometimes\": [1]}}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.xids.sometimes: unknown key");
    m = load_err("{\"xids\": {\"default\": \"maybe\"}}", none);
    CHECK_STR_CONTAINS(m, "health.xids.default: expected one of");
    m = load_err("{\"quietPeriod\": \"soon\"}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.quietPeriod: invalid duration \"soon\"");
    m = load_err("{\"quietPeriod\": 0}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.quietPeriod: must be greater than zero");
    m = load_err("{\"quietPeriod\": \"10s\", \"maxQuietPeriod\": \"5s\"}", none);
    CHECK_STR_CONTAINS(m, "health.maxQuietPeriod: 5000ms is shorter than quietPeriod");
    m = load_err("{\"waitErrorThreshold\": 0}", none);
    CHECK_STR_CONTAINS(m, "health.waitErrorThreshold: must be at least 1");
    m = load_err("{\"waitTimeout\": \"25h\"}", none);
    CHECK_STR_CONTAINS(m, "health.waitTimeout: must be between 10ms and 24h");
    m = load_err("{\"quitePeriod\": 1}", none);
    CHECK_STR_CONTAINS(m, "health.quitePeriod: unknown key");
    m = load_err("[1]", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health: expected a map");

    char *e1[] = { "GDP_HEALTH_QUIET_PERIOD=10x", NULL };
    m = load_err(NULL, e1);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_QUIET_PERIOD: invalid duration \"10x\"");
    char *e2[] = { "GDP_HEALTH_XIDS_NEVER=48,abc", NULL };
    m = load_err(NULL, e2);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_XIDS_NEVER: not an Xid number: \"abc\"");
    char *e3[] = { "GDP_HEALTH_XIDS_NEVER=48", "GDP_HEALTH_XIDS_IGNORE=48", NULL };
    m = load_err(NULL, e3);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_XIDS_NEVER: Xid 48 is also listed as \"ignore\"");
    char *e4[] = { "GDP_HEALTH_XIDS_DEFAULT=often", NULL };
    m = load_err(NULL, e4);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_XIDS_DEFAULT");
    m = load_err("{\"unattributedProbeDelay\": 0}", none);
    CHECK_STR_CONTAINS(m, "config.yaml:7: health.unattributedProbeDelay: must be greater than zero");
    char *e6[] = { "GDP_HEALTH_UNATTRIBUTED_PROBE_DELAY=0s", NULL };
    m = load_err(NULL, e6);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_UNATTRIBUTED_PROBE_DELAY: must be greater than zero");
    char *e5[] = { "GDP_HEALTH_WAIT_ERROR_THRESHOLD=0", NULL };
    m = load_err("{\"waitErrorThreshold\": 3}", e5);
    CHECK_STR_CONTAINS(m, "GDP_HEALTH_WAIT_ERROR_THRESHOLD: must be at least 1");
}

static struct health_config *policy(uint64_t quiet, uint64_t max, uint64_t flap)
{
    char q[64], mx[64], f[64];
    snprintf(q, sizeof(q), "GDP_HEALTH_QUIET_PERIOD=%" PRIu64 "ms", quiet);
    snprintf(mx, sizeof(mx), "GDP_HEALTH_MAX_QUIET_PERIOD=%" PRIu64 "ms", max);
    snprintf(f, sizeof(f), "GDP_HEALTH_FLAP_WINDOW=%" PRIu64 "ms", flap);
    char *env[] = { q, mx, f, "GDP_HEALTH_WAIT_ERROR_THRESHOLD=3", NULL };
    return load(NULL, env);
}

static void test_recovery(void)
{
    struct health_config *hc = policy(1000, 8000, 60000);
    if (!hc)
        return;
    struct health_unit u = { 0 };

    CHECK(health_unit_healthy(&u));
    CHECK(health_unit_deadline(&u) == UINT64_MAX);
    /* ignore never changes anything */
    CHECK(!health_unit_fail(hc, &u, HEALTH_IGNORE, 13, "Xid 13", 100));
    CHECK(health_unit_healthy(&u));

    /* recover: out now, probe only after the quiet period */
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94 (contained ECC error)", 1000));
    CHECK(!health_unit_healthy(&u));
    CHECK_STR_CONTAINS(u.reason, "Xid 94 (contained ECC error), probe after 1s quiet");
    CHECK(!health_unit_probe_due(&u, 1999));
    CHECK(health_unit_probe_due(&u, 2000));
    CHECK(health_unit_deadline(&u) == 2000);

    /* a second event while out restarts the quiet period; not a new transition */
    CHECK(!health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 1500));
    CHECK(!health_unit_probe_due(&u, 2000));
    CHECK(health_unit_probe_due(&u, 2500));

    /* probe fails: stays out, backoff doubles */
    CHECK(!health_unit_probe_result(hc, &u, false, false, "nvmlDeviceGetName: Unknown Error", 2500));
    CHECK(!health_unit_healthy(&u));
    CHECK(u.quiet_ms == 2000);
    CHECK(health_unit_deadline(&u) == 4500);
    CHECK_STR_CONTAINS(u.reason, "Xid 94; probe failed (nvmlDeviceGetName: Unknown Error)");

    /* probe succeeds: healthy, reason cleared */
    CHECK(health_unit_probe_result(hc, &u, true, false, NULL, 4500));
    CHECK(health_unit_healthy(&u));
    CHECK(u.reason[0] == '\0');
    CHECK(health_unit_deadline(&u) == UINT64_MAX);

    /* flapping: failing again within the window doubles the previous quiet period */
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 5000));
    CHECK(u.quiet_ms == 4000);
    CHECK(health_unit_probe_result(hc, &u, true, false, NULL, 9000));
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 9100));
    CHECK(u.quiet_ms == 8000);
    CHECK(health_unit_probe_result(hc, &u, true, false, NULL, 17100));
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 17200));
    CHECK(u.quiet_ms == 8000); /* capped */
    CHECK(health_unit_probe_result(hc, &u, true, false, NULL, 25200));
    /* outside the window: back to the base quiet period */
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 25200 + 60000));
    CHECK(u.quiet_ms == 1000);

    /* escalation to never: no probe ever, and probe results are ignored */
    CHECK(!health_unit_fail(hc, &u, HEALTH_NEVER, 48, "Xid 48 (double-bit ECC error)", 90000));
    CHECK(u.cls == HEALTH_NEVER);
    CHECK_STR_CONTAINS(u.reason, "Xid 48 (double-bit ECC error), never auto-recovers");
    CHECK(!health_unit_probe_due(&u, UINT64_MAX - 1));
    CHECK(health_unit_deadline(&u) == UINT64_MAX);
    CHECK(!health_unit_probe_result(hc, &u, true, false, NULL, 999999));
    CHECK(!health_unit_healthy(&u));
    /* a milder failure does not downgrade it */
    CHECK(!health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 1000000));
    CHECK(u.cls == HEALTH_NEVER);
    CHECK(u.xid == 48);

    /* lost: probes find it gone (stays lost) until NVML sees it again */
    struct health_unit l = { 0 };
    CHECK(health_unit_fail(hc, &l, HEALTH_RECOVER, 31, "Xid 31", 0));
    CHECK(!health_unit_probe_result(hc, &l, false, true, "GPU is lost", 1000));
    CHECK(l.cls == HEALTH_LOST);
    CHECK(health_unit_probe_due(&l, 3000));
    CHECK(health_unit_probe_result(hc, &l, true, false, NULL, 3000));
    CHECK(health_unit_healthy(&l));

    test_health_free(hc);
}

/* An event nobody can be blamed for: a quick probe, no flap history, and a real
 * failure (or a failed probe) replaces the suspicion. */
static void test_suspect(void)
{
    struct health_config *hc = policy(60000, 600000, 600000);
    if (!hc)
        return;
    struct health_unit u = { 0 }, v = { 0 }, w = { 0 };

    /* capped at recover, probed after unattributedProbeDelay (2 s default) */
    CHECK(health_unit_suspect(hc, &u, HEALTH_NEVER, 48, "Xid 48", 1000));
    CHECK(!health_unit_healthy(&u) && u.cls == HEALTH_RECOVER && u.suspect);
    CHECK(health_unit_deadline(&u) == 1000 + HEALTH_DEFAULT_UNATTRIBUTED_PROBE_MS);
    CHECK_STR_CONTAINS(u.reason, "could not name");
    CHECK(health_unit_probe_result(hc, &u, true, false, NULL, 3000));
    CHECK(health_unit_healthy(&u) && !u.suspect);
    /* it was no failure: a real one soon after gets the plain quiet period */
    CHECK(health_unit_fail(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 4000));
    CHECK(health_unit_deadline(&u) == 4000 + 60000);
    /* an already Unhealthy unit is left alone */
    CHECK(!health_unit_suspect(hc, &u, HEALTH_RECOVER, 94, "Xid 94", 5000));
    CHECK(health_unit_deadline(&u) == 4000 + 60000 && !u.suspect);

    /* no answer: from then on a plain failure (lost, here) */
    CHECK(health_unit_suspect(hc, &v, HEALTH_RECOVER, 94, "Xid 94", 0));
    CHECK(!health_unit_probe_result(hc, &v, false, true, "GPU is lost", 2000));
    CHECK(v.cls == HEALTH_LOST && !v.suspect);
    CHECK(health_unit_deadline(&v) == 2000 + 60000);

    /* a real event while suspect: the real one counts, with its own class */
    CHECK(health_unit_suspect(hc, &w, HEALTH_RECOVER, 94, "Xid 94", 0));
    CHECK(health_unit_fail(hc, &w, HEALTH_NEVER, 48, "Xid 48", 100));
    CHECK(w.cls == HEALTH_NEVER && !w.suspect && health_unit_deadline(&w) == UINT64_MAX);

    /* the delay never exceeds the quiet period */
    test_health_free(hc);
    hc = policy(500, 1000, 1000);
    struct health_unit x = { 0 };
    CHECK(hc && health_unit_suspect(hc, &x, HEALTH_RECOVER, 94, "Xid 94", 0));
    CHECK(health_unit_deadline(&x) == 500);
    test_health_free(hc);
}

static void test_wait_errors(void)
{
    struct health_config *hc = policy(1000, 8000, 60000);
    if (!hc)
        return;
    struct health_wait_state ws = { 0 };

    /* transient: two failures then success, never reaches the threshold of 3 */
    CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_SAME);
    CHECK(ws.backoff_ms == 100);
    CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_SAME);
    CHECK(ws.backoff_ms == 200);
    CHECK(health_wait_result(hc, &ws, true) == HEALTH_WAIT_SAME);
    CHECK(ws.backoff_ms == 0 && ws.consecutive == 0 && !ws.failing);

    /* persistent: the third in a row marks everything, once */
    CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_SAME);
    CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_SAME);
    CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_NOW_FAILING);
    for (int i = 0; i < 10; i++)
        CHECK(health_wait_result(hc, &ws, false) == HEALTH_WAIT_SAME);
    CHECK(ws.backoff_ms == 5000); /* capped */
    /* and recovers with the first wait that works */
    CHECK(health_wait_result(hc, &ws, true) == HEALTH_WAIT_NOW_OK);
    CHECK(!ws.failing);
    test_health_free(hc);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    test_defaults();
    test_dp_env();
    test_file_and_gdp_env();
    test_config_errors();
    test_recovery();
    test_suspect();
    test_wait_errors();
    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all health policy checks passed\n");
    return 0;
}
