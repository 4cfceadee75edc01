/* The health monitor against a scripted NVML: the nvml_* functions health/monitor.c uses are
 * defined here, so the static library's nvml.o is never linked in. Runs the real loop
 * and the real wait thread. Waits are bounded by generous timeouts; nothing asserts
 * on timing. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>

#include "core/log.h"
#include "tests/common/check.h"
#include "core/loop.h"
#include "health/monitor.h"
#include "tests/health/health-load.h"
#include "nvml/nvml.h"

int test_failures;

/* ---- scripted NVML */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct nvml_event pending[64];
static size_t n_pending;
static int wait_errors_left;            /* -1: forever */
static char probe_fail_uuid[96];
static char register_enotsup_uuid[96];
static char register_fail_uuid[96];      /* fails until cleared */
static int registered;

static struct nvml_event_set_st {
    int dummy;
} the_set;
static int sets_created;

int nvml_event_set_create(nvml_event_set *set, struct error *err)
{
    sets_created++;
    *set = &the_set;
    return 0;
}

/* Handles are stable per UUID, as NVML's are while the library stays initialized. */
static char handles[32][96];

static nvml_device handle_of(const char *uuid)
{
    size_t i;
    pthread_mutex_lock(&mu);
    for (i = 0; i < ELEMENTSOF(handles) && handles[i][0]; i++)
        if (streq(handles[i], uuid))
            break;
    if (i == ELEMENTSOF(handles))
        abort();
    snprintf(handles[i], sizeof(handles[i]), "%s", uuid);
    pthread_mutex_unlock(&mu);
    return (nvml_device)(void *)handles[i];
}

void nvml_event_set_free(nvml_event_set set) {}

/* The monitor's thread takes its own library reference; nothing to count here. */
void nvml_ref(void) {}
void nvml_close(void) {}

/* A stopped monitor's thread stays in its wait (NVML cannot be interrupted) and only
 * exits when the wait returns. Tests that start another monitor first make the old
 * thread's wait return, so it cannot take events meant for the new one. */
static int waiters;
static bool interrupt_wait;

static void scripted_release_stopped_thread(void)
{
    pthread_mutex_lock(&mu);
    interrupt_wait = true;
    pthread_cond_broadcast(&cond);
    while (waiters > 0)
        pthread_cond_wait(&cond, &mu);
    interrupt_wait = false;
    pthread_mutex_unlock(&mu);
}

int nvml_device_by_uuid(const char *uuid, nvml_device *dev, struct error *err)
{
    pthread_mutex_lock(&mu);
    bool fail = streq(uuid, probe_fail_uuid);
    pthread_mutex_unlock(&mu);
    if (fail)
        return error_set(err, -ENODEV, "nvmlDeviceGetHandleByUUID: GPU is lost");
    /* the handle is a stable copy of the UUID: register_events reads it back */
    *dev = handle_of(uuid);
    return 0;
}

int nvml_device_supported_events(nvml_device dev, uint64_t *mask, struct error *err)
{
    *mask = NVML_EVT_XID_CRITICAL | NVML_EVT_DOUBLE_BIT_ECC | 0x100;
    return 0;
}

int nvml_device_register_events(nvml_device dev, uint64_t mask, nvml_event_set set,
                                struct error *err)
{
    const char *uuid = (const char *)dev;
    if (mask != (NVML_EVT_XID_CRITICAL | NVML_EVT_DOUBLE_BIT_ECC))
        return error_set(err, -EINVAL, "unexpected mask %#llx", (unsigned long long)mask);
    if (streq(uuid, register_enotsup_uuid))
        return error_set(err, -ENOTSUP, "nvmlDeviceRegisterEvents: Not Supported");
    pthread_mutex_lock(&mu);
    bool fail = streq(uuid, register_fail_uuid);
    pthread_mutex_unlock(&mu);
    if (fail)
        return error_set(err, -EIO, "nvmlDeviceRegisterEvents: Unknown Error");
    registered++;
    return 0;
}

int nvml_device_name(nvml_device dev, char *buf, size_t len, struct error *err)
{
    snprintf(buf, len, "NVIDIA A100-SXM4-40GB");
    return 0;
}

int nvml_device_memory_total(nvml_device dev, uint64_t *bytes, struct error *err)
{
    *bytes = 40ULL << 30;
    return 0;
}

int nvml_event_wait(nvml_event_set set, unsigned timeout_ms, struct nvml_event *ev,
                    struct error *err)
{
    struct timespec ts;
    int r = -ETIMEDOUT;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&mu);
    waiters++;
    while (n_pending == 0 && wait_errors_left == 0 && !interrupt_wait)
        if (pthread_cond_timedwait(&cond, &mu, &ts) != 0)
            break;
    waiters--;
    pthread_cond_broadcast(&cond);
    if (interrupt_wait) {
        r = -ETIMEDOUT;
    } else if (wait_errors_left != 0) {
        if (wait_errors_left > 0)
            wait_errors_left--;
        r = error_set(err, -EIO, "nvmlEventSetWait_v2: Unknown Error");
    } else if (n_pending > 0) {
        *ev = pending[0];
        memmove(pending, pending + 1, --n_pending * sizeof(*pending));
        r = 0;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

/* An event carrying handle dev (may be NULL) and naming uuid ("" if NVML cannot). */
static void inject_raw(nvml_device dev, const char *uuid, uint64_t xid, unsigned gi, unsigned ci)
{
    pthread_mutex_lock(&mu);
    struct nvml_event *e = &pending[n_pending++];
    *e = (struct nvml_event){
        .device = dev, .type = NVML_EVT_XID_CRITICAL, .data = xid, .gi_id = gi, .ci_id = ci
    };
    snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void inject(const char *uuid, uint64_t xid, unsigned gi, unsigned ci)
{
    inject_raw(handle_of(uuid), uuid, xid, gi, ci);
}

static void set_wait_errors(int n)
{
    pthread_mutex_lock(&mu);
    wait_errors_left = n;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}

static void set_str(char *dst, const char *v)
{
    pthread_mutex_lock(&mu);
    snprintf(dst, 96, "%s", v);
    pthread_mutex_unlock(&mu);
}

/* ---- loop helpers */

static struct loop *loop;
static struct health_monitor *mon;
static unsigned changes;

static void on_changed(void *userdata)
{
    changes++;
    loop_quit(loop, 0);
}

static void on_guard(struct loop *l, struct loop_timer *t, void *userdata)
{
    *(struct loop_timer **)userdata = NULL;
    loop_quit(l, -ETIMEDOUT);
}

/* Run the loop until the health changes once more, or `ms` pass (returns -ETIMEDOUT). */
static int run_until_change(uint64_t ms)
{
    struct loop_timer *guard = NULL;
    guard = loop_timer_add(loop, ms, on_guard, &guard);
    int r = loop_run(loop);
    loop_timer_cancel(loop, guard);
    return r;
}

/* Run the loop until pred() holds (checked at least every 10 ms), or ms pass. */
static int run_until(bool (*pred)(void), uint64_t ms)
{
    uint64_t end = loop_now_ms() + ms;
    while (!pred()) {
        uint64_t now = loop_now_ms();
        if (now >= end)
            return -ETIMEDOUT;
        run_until_change(u64_min(end - now, 10));
    }
    return 0;
}

static uint64_t want_ignored;

static bool ignored_reached(void)
{
    struct health_counters c;
    health_monitor_counters(mon, &c);
    return c.ignored >= want_ignored;
}

static size_t count_dir(const char *path)
{
    size_t n = 0;
    DIR *d = opendir(path);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static bool healthy(int gpu, int mig)
{
    return health_monitor_healthy(mon, gpu, mig, NULL);
}

static const char *reason(int gpu, int mig)
{
    const char *r = NULL;
    health_monitor_healthy(mon, gpu, mig, &r);
    return r;
}

static struct health_config *load(char **env)
{
    struct error err = { 0 };
    struct health_config *hc = test_health_load(NULL, env, &err);
    if (!hc) {
        fprintf(stderr, "config: %s\n", err.msg);
        exit(1);
    }
    return hc;
}

static char *fast_env[] = { "GDP_HEALTH_QUIET_PERIOD=50ms", "GDP_HEALTH_MAX_QUIET_PERIOD=400ms",
                            "GDP_HEALTH_WAIT_TIMEOUT=50ms", "GDP_HEALTH_WAIT_ERROR_THRESHOLD=3",
                            NULL };

/* A reload: the same monitor, thread and event set follow a new inventory and config. */
static void retarget_checks(const struct inventory *old_inv)
{
    struct error err = { 0 };
    struct health_counters c;
    struct health_config *hc = load(fast_env);
    struct health_config *off = load((char *[]){ "DP_DISABLE_HEALTHCHECKS=all", NULL });

    /* GPU-0000 is out (Xid 48). Also MIG-bbbb (GI 2): its health must follow its UUID. */
    inject("GPU-1111", 48, 2, 0);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(1, 1) && healthy(1, 0));

    /* GPU-0000 removed; GPU-1111 moves to index 0 with its MIG devices swapped; GPU-4444
     * is new; GPU-5555 is new and lost (carried over by discovery, NVML cannot read it) */
    struct inv_mig migs[2] = {
        { .uuid = "MIG-bbbb", .gi_id = 2, .ci_id = 0 },
        { .uuid = "MIG-aaaa", .gi_id = 1, .ci_id = 0 },
    };
    struct inv_gpu gpus[4] = {
        { .uuid = "GPU-1111", .mig_enabled = true, .migs = migs, .n_migs = 2 },
        { .uuid = "GPU-4444" },
        { .uuid = "GPU-2222" },
        { .uuid = "GPU-5555", .lost = true },
    };
    struct inventory inv = { .gpus = gpus, .n_gpus = 4 };
    size_t tasks = count_dir("/proc/self/task"), fds = count_dir("/proc/self/fd");
    int regs = registered, sets = sets_created;

    set_str(probe_fail_uuid, "GPU-5555");
    CHECK(health_monitor_retarget(mon, &inv, hc, &err) == 0);
    CHECK(sets_created == sets);                  /* the same event set */
    CHECK(registered == regs + 1);                /* GPU-4444 only */
    CHECK(healthy(0, -1) && !healthy(0, 0) && healthy(0, 1));
    CHECK(strstr(reason(0, 0), "Xid 48"));
    CHECK(healthy(1, -1) && healthy(2, -1));
    CHECK(!healthy(3, -1) && strstr(reason(3, -1), "lost"));
    CHECK(!healthy(4, -1));                       /* indices follow the new inventory */

    /* events reach the new GPU; the removed one's are recognised and ignored */
    health_monitor_counters(mon, &c);
    want_ignored = c.ignored + 1;
    inject("GPU-0000", 94, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until(ignored_reached, 5000) == 0);
    inject("GPU-4444", 48, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(1, -1) && healthy(2, -1) && healthy(0, -1));

    /* the lost GPU is registered once NVML sees it again */
    set_str(probe_fail_uuid, "");
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(3, -1));
    CHECK(registered == regs + 2);

    /* many reloads: no thread, no fd, no registration more */
    for (int i = 0; i < 100; i++)
        CHECK(health_monitor_retarget(mon, &inv, hc, &err) == 0);
    CHECK(count_dir("/proc/self/task") == tasks);
    CHECK(count_dir("/proc/self/fd") == fds);
    CHECK(registered == regs + 2 && sets_created == sets);
    CHECK(!healthy(1, -1) && !healthy(0, 0));     /* health kept throughout */

    /* checks off: all Healthy, events ignored; back on: from Healthy, events count */
    CHECK(health_monitor_retarget(mon, &inv, off, &err) == 0);
    CHECK(healthy(1, -1) && healthy(0, 0));
    health_monitor_counters(mon, &c);
    want_ignored = c.ignored + 1;
    inject("GPU-2222", 48, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until(ignored_reached, 5000) == 0);
    CHECK(healthy(2, -1));
    CHECK(health_monitor_retarget(mon, &inv, hc, &err) == 0);
    CHECK(healthy(1, -1) && healthy(2, -1));
    inject("GPU-2222", 48, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(2, -1) && healthy(1, -1));
    CHECK(count_dir("/proc/self/task") == tasks && sets_created == sets);

    /* back to the first inventory for the rest of the test */
    CHECK(health_monitor_retarget(mon, old_inv, hc, &err) == 0);
    test_health_free(hc);
    test_health_free(off);
}

static bool all_but_gpu0_healthy(void)
{
    return healthy(1, -1) && healthy(1, 0) && healthy(1, 1) && healthy(2, -1) &&
           healthy(3, -1);
}

/* The plugin's defaults: 60 s quiet period, 1 h wait timeout. Nothing here may wait
 * for either. */
static void default_config_checks(const struct inventory *inv)
{
    struct error err = { 0 };
    struct health_config *hc = load((char *[]){ NULL });

    CHECK(hc->quiet_ms == HEALTH_DEFAULT_QUIET_MS);
    CHECK(hc->wait_timeout_ms == HEALTH_DEFAULT_WAIT_TIMEOUT_MS);
    CHECK(loop_new(&loop) == 0);
    set_str(register_fail_uuid, "");
    CHECK(health_monitor_start(loop, inv, hc, on_changed, NULL, &mon, &err) == 0);
    CHECK(healthy(0, -1) && all_but_gpu0_healthy());

    /* GPU0 falls off the bus: NVML cannot name it, the event carries its handle */
    set_str(probe_fail_uuid, "GPU-0000");
    inject_raw(handle_of("GPU-0000"), "", 79, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(0, -1) && strstr(reason(0, -1), "Xid 79"));
    CHECK(all_but_gpu0_healthy());

    /* an event nobody can be blamed for (no handle, no name), even a never-class one:
     * everything goes, the devices that answer a probe are back within seconds (not
     * the 60 s quiet period), GPU0 (still gone) stays */
    inject_raw(NULL, "", 48, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(1, -1) && !healthy(1, 0) && !healthy(2, -1) && !healthy(3, -1));
    CHECK(strstr(reason(2, -1), "could not name"));
    CHECK(run_until(all_but_gpu0_healthy, 15000) == 0);
    CHECK(!healthy(0, -1));

    /* a handle we never registered and no name: just as unattributable */
    inject_raw((nvml_device)(void *)&the_set, "", 94, NVML_EVT_NO_INSTANCE,
               NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(2, -1));
    CHECK(run_until(all_but_gpu0_healthy, 15000) == 0);

    /* persistent wait errors while the thread sits in a 1 h wait: all go; once they
     * stop, a short wait proves it and everything is back to its own health */
    set_wait_errors(-1);
    CHECK(run_until_change(15000) == 0);
    CHECK(!healthy(2, -1) && strstr(reason(2, -1), "NVML event wait failing"));
    set_wait_errors(0);
    CHECK(run_until(all_but_gpu0_healthy, 15000) == 0);
    CHECK(!healthy(0, -1));

    /* an Xid is still seen at once with the 1 h wait timeout */
    inject("GPU-2222", 94, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(2, -1) && strstr(reason(2, -1), "probe after 60s quiet"));

    /* stop does not wait for the 1 h wait */
    health_monitor_stop(mon);
    scripted_release_stopped_thread();
    loop_free(loop);
    set_str(probe_fail_uuid, "");
    test_health_free(hc);
}

int main(void)
{
    struct error err = { 0 };
    struct health_config *hc = NULL;
    struct health_counters c;

    log_set_level(getenv("GDP_TEST_VERBOSE") ? LOG_DEBUG : LOG_ERROR);
    char *env[] = { "GDP_HEALTH_QUIET_PERIOD=50ms", "GDP_HEALTH_MAX_QUIET_PERIOD=400ms",
                    "GDP_HEALTH_WAIT_TIMEOUT=50ms", "GDP_HEALTH_WAIT_ERROR_THRESHOLD=3", NULL };
    if (!(hc = test_health_load(NULL, env, &err))) {
        fprintf(stderr, "config: %s\n", err.msg);
        return 1;
    }

    /* GPU0 plain, GPU1 with two MIG devices, GPU2 "too old", GPU3 registration fails */
    struct inv_mig migs[2] = {
        { .uuid = "MIG-aaaa", .gi_id = 1, .ci_id = 0 },
        { .uuid = "MIG-bbbb", .gi_id = 2, .ci_id = 0 },
    };
    struct inv_gpu gpus[4] = {
        { .uuid = "GPU-0000" },
        { .uuid = "GPU-1111", .mig_enabled = true, .migs = migs, .n_migs = 2 },
        { .uuid = "GPU-2222" },
        { .uuid = "GPU-3333" },
    };
    struct inventory inv = { .gpus = gpus, .n_gpus = 4 };
    snprintf(register_enotsup_uuid, sizeof(register_enotsup_uuid), "GPU-2222");
    snprintf(register_fail_uuid, sizeof(register_fail_uuid), "GPU-3333");

    if (loop_new(&loop) < 0)
        return 1;
    if (health_monitor_start(loop, &inv, hc, on_changed, NULL, &mon, &err) < 0) {
        fprintf(stderr, "start: %s\n", err.msg);
        return 1;
    }
    /* the config may go away: the monitor has its own copy */
    test_health_free(hc);

    CHECK(registered == 2);
    CHECK(healthy(0, -1) && healthy(1, -1) && healthy(1, 0) && healthy(1, 1));
    CHECK(healthy(2, -1));              /* NOT_SUPPORTED: too old, stays Healthy */
    CHECK(!healthy(3, -1));             /* registration failed */
    CHECK(strstr(reason(3, -1), "event registration failed"));
    CHECK(!healthy(7, -1) && !healthy(1, 5) && !healthy(0, 0));

    /* registration is retried after a good probe: once it works, GPU3 is back */
    set_str(register_fail_uuid, "");
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(3, -1));

    /* never-class Xid on GPU0: only GPU0 */
    inject("GPU-0000", 48, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(0, -1));
    CHECK(strstr(reason(0, -1), "Xid 48 (double-bit ECC error), never auto-recovers"));
    CHECK(healthy(1, -1) && healthy(1, 0) && healthy(1, 1) && healthy(2, -1));

    /* attributed Xid on GPU1 GI 2 CI 0: exactly MIG-bbbb */
    inject("GPU-1111", 94, 2, 0);
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(1, -1) && healthy(1, 0) && !healthy(1, 1));
    /* ...and it recovers after the quiet period with a good probe */
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(1, 1));
    CHECK(!healthy(0, -1)); /* never stays out */

    /* ignored Xids change nothing; an unknown device neither */
    health_monitor_counters(mon, &c);
    uint64_t ignored_before = c.ignored;
    inject("GPU-0000", 13, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    inject("GPU-ffff", 94, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    /* unattributed on the MIG GPU: the GPU and both MIG devices; the probe fails */
    set_str(probe_fail_uuid, "GPU-1111");
    inject("GPU-1111", 94, NVML_EVT_NO_INSTANCE, NVML_EVT_NO_INSTANCE);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(1, -1) && !healthy(1, 0) && !healthy(1, 1));
    health_monitor_counters(mon, &c);
    CHECK(c.ignored == ignored_before + 2);
    /* the MIG devices probe fine and come back; the GPU itself does not */
    while (!healthy(1, 0) || !healthy(1, 1))
        if (run_until_change(5000) != 0)
            break;
    CHECK(healthy(1, 0) && healthy(1, 1));
    CHECK(run_until_change(300) == -ETIMEDOUT);
    CHECK(!healthy(1, -1));
    CHECK(strstr(reason(1, -1), "probe failed"));
    set_str(probe_fail_uuid, "");
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(1, -1));

    /* transient wait errors (2 < threshold 3): nothing changes */
    set_wait_errors(2);
    CHECK(run_until_change(1500) == -ETIMEDOUT);
    CHECK(healthy(1, -1) && healthy(2, -1));
    health_monitor_counters(mon, &c);
    CHECK(c.wait_errors == 2);

    /* persistent: everything goes, and comes back when waits work */
    set_wait_errors(-1);
    CHECK(run_until_change(5000) == 0);
    CHECK(!healthy(1, -1) && !healthy(1, 0) && !healthy(2, -1) && !healthy(3, -1));
    CHECK(strstr(reason(2, -1), "NVML event wait failing"));
    set_wait_errors(0);
    CHECK(run_until_change(10000) == 0);
    CHECK(healthy(1, -1) && healthy(1, 0) && healthy(2, -1) && healthy(3, -1));
    CHECK(!healthy(0, -1)); /* its own health: still the DBE */

    health_monitor_counters(mon, &c);
    CHECK(c.events == 5);
    CHECK(c.recoveries >= 5);
    CHECK(c.unhealthy_transitions >= 6);

    /* DynamicMIG: GPU3 gets two MIG devices made after discovery; an Xid NVML attributes
     * to one (GI 9, CI 0) takes exactly it out, and it recovers; a later list keeps the
     * health of those it still has and forgets the destroyed one */
    struct inv_mig dyn[2] = {
        { .uuid = "MIG-dyn1", .gi_id = 7, .ci_id = 0 },
        { .uuid = "MIG-dyn2", .gi_id = 9, .ci_id = 0 },
    };
    CHECK(health_monitor_set_migs(mon, 3, dyn, 2) == 0);
    CHECK(health_monitor_set_migs(mon, 9, dyn, 2) == -ENOENT);
    int d1 = health_monitor_mig_index(mon, 3, "MIG-dyn1"), d2 = health_monitor_mig_index(mon, 3, "MIG-dyn2");
    CHECK(d1 == 0 && d2 == 1 && health_monitor_mig_index(mon, 3, "MIG-none") == -1);
    CHECK(healthy(3, d1) && healthy(3, d2));
    inject("GPU-3333", 94, 9, 0);
    CHECK(run_until_change(5000) == 0);
    CHECK(healthy(3, -1) && healthy(3, d1) && !healthy(3, d2));
    CHECK(health_monitor_last_xid(mon, 3, d2) == 94);
    struct inv_mig later[2] = { { .uuid = "MIG-dyn3", .gi_id = 1, .ci_id = 0 },
                                { .uuid = "MIG-dyn2", .gi_id = 9, .ci_id = 0 } };
    CHECK(health_monitor_set_migs(mon, 3, later, 2) == 0);
    CHECK(healthy(3, 0) && !healthy(3, 1)); /* dyn2 keeps its health by UUID */
    CHECK(run_until_change(5000) == 0);     /* ...and recovers */
    CHECK(healthy(3, 1));
    CHECK(health_monitor_set_migs(mon, 3, NULL, 0) == 0);
    CHECK(health_monitor_mig_index(mon, 3, "MIG-dyn2") == -1);

    retarget_checks(&inv);

    health_monitor_stop(mon);
    scripted_release_stopped_thread();
    loop_free(loop);

    default_config_checks(&inv);

    /* disabled: no thread, no NVML, all Healthy */
    char *env_off[] = { "DP_DISABLE_HEALTHCHECKS=all", NULL };
    CHECK((hc = test_health_load(NULL, env_off, &err)) != NULL);
    registered = 0;
    CHECK(loop_new(&loop) == 0);
    CHECK(health_monitor_start(loop, &inv, hc, on_changed, NULL, &mon, &err) == 0);
    CHECK(registered == 0);
    CHECK(healthy(3, -1));
    health_monitor_stop(mon);
    scripted_release_stopped_thread();
    test_health_free(hc);
    loop_free(loop);

    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all health monitor checks passed\n");
    return 0;
}
