/* The health monitor against a scripted NVML: the nvml_* functions events.c uses are
 * defined here, so the static library's nvml.o is never linked in. Runs the real loop
 * and the real wait thread. Waits are bounded by generous timeouts; nothing asserts
 * on timing. */
#include <pthread.h>
#include <stdio.h>

#include "core/log.h"
#include "tests/common/check.h"
#include "core/loop.h"
#include "node/events.h"
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

int nvml_event_set_create(nvml_event_set *set, struct error *err)
{
    *set = &the_set;
    return 0;
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
    /* the handle is the UUID string itself: register_events reads it back */
    *dev = (nvml_device)(uintptr_t)uuid;
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

static void inject(const char *uuid, uint64_t xid, unsigned gi, unsigned ci)
{
    pthread_mutex_lock(&mu);
    struct nvml_event *e = &pending[n_pending++];
    *e = (struct nvml_event){ .type = NVML_EVT_XID_CRITICAL, .data = xid, .gi_id = gi, .ci_id = ci };
    snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
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

int main(void)
{
    struct error err = { 0 };
    struct health_config *hc = NULL;
    struct health_counters c;

    log_set_level(getenv("GDP_TEST_VERBOSE") ? LOG_DEBUG : LOG_ERROR);
    char *env[] = { "GDP_HEALTH_QUIET_PERIOD=50ms", "GDP_HEALTH_MAX_QUIET_PERIOD=400ms",
                    "GDP_HEALTH_WAIT_TIMEOUT=50ms", "GDP_HEALTH_WAIT_ERROR_THRESHOLD=3", NULL };
    if (health_config_load(&hc, NULL, 0, NULL, env, &err) < 0) {
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
    health_config_free(hc);

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

    health_monitor_stop(mon);
    scripted_release_stopped_thread();
    loop_free(loop);

    /* disabled: no thread, no NVML, all Healthy */
    char *env_off[] = { "DP_DISABLE_HEALTHCHECKS=all", NULL };
    CHECK(health_config_load(&hc, NULL, 0, NULL, env_off, &err) == 0);
    registered = 0;
    CHECK(loop_new(&loop) == 0);
    CHECK(health_monitor_start(loop, &inv, hc, on_changed, NULL, &mon, &err) == 0);
    CHECK(registered == 0);
    CHECK(healthy(3, -1));
    health_monitor_stop(mon);
    scripted_release_stopped_thread();
    health_config_free(hc);
    loop_free(loop);

    if (test_failures) {
        fprintf(stderr, "%d check(s) failed\n", test_failures);
        return 1;
    }
    printf("all health monitor checks passed\n");
    return 0;
}
