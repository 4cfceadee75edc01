/* TimeSlicing applied and reset (src/dra/dra-sharing.c, the claim engine's apply_config
 * and reset_config hooks) over the simulated NVML, with a recording stand-in for
 * nvidia-smi under a made-up driver root: the compute mode reaches the simulator (read
 * back through NVML and from its settings log), the tool gets NVIDIA's arguments, and
 * every failure (the tool's exit status, its timeout, its absence, NVML refusing) is an
 * error naming what failed. The tool runs on the loop: the hook returns while it runs,
 * and a cancel kills and reaps it. A reset puts back what an apply set: compute mode
 * DEFAULT, time slice 0; nothing for a MIG device, no sharing, or MPS. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/loop.h"
#include "dra/dra-sharing.h"
#include "nvml/nvml.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"

int test_failures;

#define UUID(n) "GPU-12345678-1234-1234-1234-12345678000" #n

/* Exit 4 with NVIDIA's words (as nvidia-smi without CAP_SYS_ADMIN) for GPU 2, hang for GPU 3, else record the arguments. */
static const char stand_in[] =
    "#!/bin/sh\n"
    "case \"$3\" in\n"
    "*0002) echo 'Insufficient Permissions'; exit 4;;\n"
    "*0003) exec sleep 30;;\n"
    "esac\n"
    "echo \"$*\" >> \"$(dirname \"$0\")/../../calls\"\n";

static struct loop *loop;

struct outcome {
    bool called;
    int r;
    struct error err;
};

static void on_done(void *userdata, int r, const struct error *err)
{
    struct outcome *o = userdata;
    o->called = true;
    o->r = r;
    o->err = *err;
    loop_quit(loop, 0);
}

typedef int hook_fn(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                    const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                    struct dra_apply_op **op, struct error *err);

/* A hook, its end waited for on the loop when it started a tool. */
static int run_hook(hook_fn *hook, struct dra_sharing_ctx *s, const struct inv_gpu *gpu,
                    const struct inv_mig *mig, const struct dra_config *cfg, struct error *err)
{
    struct outcome o = { 0 };
    struct dra_apply_op *op = NULL;
    int r = hook(s, gpu, mig, cfg, on_done, &o, &op, err);
    if (r <= 0)
        return r;
    CHECK(op != NULL && !o.called);
    CHECK(loop_run(loop) == 0 && o.called);
    *err = o.err;
    return o.r;
}

#define apply(s, gpu, mig, cfg, err) run_hook(dra_sharing_apply, s, gpu, mig, cfg, err)
#define reset(s, gpu, mig, cfg, err) run_hook(dra_sharing_reset, s, gpu, mig, cfg, err)

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    if (read_file_bounded(path, 1 << 20, &text, &len, NULL) < 0)
        return xstrdup("");
    return text;
}

static struct inv_gpu gpu(const char *uuid)
{
    struct inv_gpu g = { 0 };
    snprintf(g.uuid, sizeof(g.uuid), "%s", uuid);
    return g;
}

static enum nvml_compute_mode mode_of(const char *uuid)
{
    nvml_device dev;
    enum nvml_compute_mode m = (enum nvml_compute_mode)-1;
    struct error err = { 0 };
    if (nvml_device_by_uuid(uuid, &dev, &err) < 0 || nvml_device_compute_mode(dev, &m, &err) < 0)
        fprintf(stderr, "reading the compute mode of %s: %s\n", uuid, err.msg);
    return m;
}

static void set_mode(const char *uuid, enum nvml_compute_mode m)
{
    nvml_device dev;
    struct error err = { 0 };
    CHECK(nvml_device_by_uuid(uuid, &dev, &err) == 0 &&
          nvml_device_set_compute_mode(dev, m, &err) == 0);
}

/* One control command to the simulator, applied once its ack line is there. */
static void control(const char *dir, const char *line)
{
    _cleanup_free_ char *fifo = xasprintf("%s/ctl", dir), *ack = xasprintf("%s/ack", dir);
    _cleanup_close_ int fd = open(fifo, O_WRONLY | O_CLOEXEC);
    _cleanup_free_ char *msg = xasprintf("%s\n", line);
    CHECK(fd >= 0 && write(fd, msg, strlen(msg)) == (ssize_t)strlen(msg));
    for (int i = 0; i < 500; i++) {
        _cleanup_free_ char *text = slurp(ack);
        if (strstr(text, line))
            return;
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    }
    fprintf(stderr, "no ack for '%s'\n", line);
    test_failures++;
}

int main(void)
{
    const char *dir = scratch_dir("dra-sharing-");
    _cleanup_free_ char *bin = xasprintf("%s/root/usr/bin", dir);
    _cleanup_free_ char *tool = xasprintf("%s/nvidia-smi", bin);
    _cleanup_free_ char *calls = xasprintf("%s/root/calls", dir);
    _cleanup_free_ char *settings = xasprintf("%s/settings", dir);
    _cleanup_free_ char *root = xasprintf("%s/root", dir);
    _cleanup_free_ char *ctl = xasprintf("%s/ctl", dir), *ack = xasprintf("%s/ack", dir);
    CHECK(mkdir_p(bin, 0755) == 0);
    CHECK(write_file_atomic(tool, stand_in, strlen(stand_in), 0755, false) == 0);
    setenv("MOCK_NVML_SETTINGS_LOG", settings, 1);
    setenv("MOCK_NVML_CONTROL", ctl, 1);
    setenv("MOCK_NVML_CONTROL_ACK", ack, 1);

    struct error err = { 0 };
    /* The daemon's own reference, as while it serves. */
    if (nvml_open("/", &err) < 0) {
        fprintf(stderr, "nvml_open: %s\n", err.msg);
        return 1;
    }
    CHECK(loop_new(&loop) == 0);
    struct dra_sharing_ctx *s = dra_sharing_new(&(struct dra_sharing_options){
        .loop = loop, .driver_root = root });
    struct dra_config ts = { .kind = DRA_CONFIG_GPU, .sharing = DRA_SHARING_TIME_SLICING,
                             .interval = DRA_TS_MEDIUM };

    /* An earlier MPS user left the GPU exclusive: TimeSlicing makes it DEFAULT. */
    set_mode(UUID(0), NVML_COMPUTE_MODE_EXCLUSIVE_PROCESS);
    CHECK(mode_of(UUID(0)) == NVML_COMPUTE_MODE_EXCLUSIVE_PROCESS);
    struct inv_gpu g0 = gpu(UUID(0)), g1 = gpu(UUID(1)), g2 = gpu(UUID(2)), g3 = gpu(UUID(3)),
                   g4 = gpu(UUID(4));
    CHECK(apply(s, &g0, NULL, &ts, &err) == 0);
    CHECK(mode_of(UUID(0)) == NVML_COMPUTE_MODE_DEFAULT);
    /* Default is set too: an earlier claim may have left a longer slice. */
    ts.interval = DRA_TS_DEFAULT;
    CHECK(apply(s, &g1, NULL, &ts, &err) == 0);
    ts.interval = DRA_TS_LONG;
    CHECK(apply(s, &g1, NULL, &ts, &err) == 0);
    {
        _cleanup_free_ char *text = slurp(calls);
        CHECK_STR(text, "compute-policy -i " UUID(0) " --set-timeslice 2\n"
                        "compute-policy -i " UUID(1) " --set-timeslice 0\n"
                        "compute-policy -i " UUID(1) " --set-timeslice 3\n");
        _cleanup_free_ char *log = slurp(settings);
        CHECK_STR(log, "nvmlDeviceSetComputeMode " UUID(0) " 3\n"
                       "nvmlDeviceSetComputeMode " UUID(0) " 0\n"
                       "nvmlDeviceSetComputeMode " UUID(1) " 0\n"
                       "nvmlDeviceSetComputeMode " UUID(1) " 0\n");
    }

    /* Nothing to do: no sharing, or a MIG device (no interval; the mode is its GPU's). */
    struct dra_config none = { .kind = DRA_CONFIG_GPU, .sharing = DRA_SHARING_NONE };
    struct dra_config mig_ts = { .kind = DRA_CONFIG_MIG, .sharing = DRA_SHARING_TIME_SLICING };
    struct inv_mig m = { 0 };
    CHECK(apply(s, &g0, NULL, &none, &err) == 0);
    CHECK(apply(s, &g0, &m, &mig_ts, &err) == 0);
    struct dra_config mps = { .kind = DRA_CONFIG_GPU, .sharing = DRA_SHARING_MPS };
    /* MPS never planned (dra_mps_plan gives it its daemon: test-dra-mps.c) */
    CHECK(apply(s, &g0, NULL, &mps, &err) == -EINVAL);
    CHECK_STR_CONTAINS(err.msg, "no MPS control daemon was planned for it");
    {
        _cleanup_free_ char *text = slurp(calls);
        CHECK(strlen(text) == 3 * strlen("compute-policy -i " UUID(0) " --set-timeslice 2\n"));
    }

    /* Reset: what the apply set put back, whatever interval it had: compute mode DEFAULT
     * (an MPS user may have changed it meanwhile), then the time slice 0. */
    set_mode(UUID(1), NVML_COMPUTE_MODE_EXCLUSIVE_PROCESS);
    CHECK(truncate(calls, 0) == 0 && truncate(settings, 0) == 0);
    CHECK(reset(s, &g1, NULL, &ts, &err) == 0);
    CHECK(mode_of(UUID(1)) == NVML_COMPUTE_MODE_DEFAULT);
    /* Nothing for no sharing, a MIG device, or MPS (never applied). */
    CHECK(reset(s, &g0, NULL, &none, &err) == 0);
    CHECK(reset(s, &g0, &m, &mig_ts, &err) == 0);
    CHECK(reset(s, &g0, NULL, &mps, &err) == 0);
    {
        _cleanup_free_ char *text = slurp(calls);
        CHECK_STR(text, "compute-policy -i " UUID(1) " --set-timeslice 0\n");
        _cleanup_free_ char *log = slurp(settings);
        CHECK_STR(log, "nvmlDeviceSetComputeMode " UUID(1) " 0\n");
    }

    /* The tool fails: its exit status and words. */
    ts.interval = DRA_TS_SHORT;
    CHECK(apply(s, &g2, NULL, &ts, &err) == -EIO);
    CHECK_STR_CONTAINS(err.msg, "setting the time slice of " UUID(2) " to Short: ");
    CHECK_STR_CONTAINS(err.msg, "/usr/bin/nvidia-smi failed (exit status 4): Insufficient Permissions");
    CHECK(reset(s, &g2, NULL, &ts, &err) == -EIO);
    CHECK_STR_CONTAINS(err.msg, "setting the time slice of " UUID(2) " to Default: ");
    CHECK_STR_CONTAINS(err.msg, "/usr/bin/nvidia-smi failed (exit status 4): Insufficient Permissions");
    /* ... or hangs: killed at the timeout. */
    struct dra_sharing_ctx *quick = dra_sharing_new(&(struct dra_sharing_options){
        .loop = loop, .driver_root = root, .timeout_ms = 300 });
    CHECK(apply(quick, &g3, NULL, &ts, &err) == -ETIMEDOUT);
    CHECK_STR_CONTAINS(err.msg, "nvidia-smi did not finish within 300 ms");
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD); /* reaped */
    /* ... or is cancelled while it hangs: killed and reaped, done never called. */
    struct outcome never = { 0 };
    struct dra_apply_op *op = NULL;
    CHECK(dra_sharing_apply(quick, &g3, NULL, &ts, on_done, &never, &op, &err) == 1);
    dra_sharing_cancel(quick, op);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
    CHECK(!never.called);
    /* ... the same for a reset. */
    CHECK(reset(quick, &g3, NULL, &ts, &err) == -ETIMEDOUT);
    CHECK_STR_CONTAINS(err.msg, "setting the time slice of " UUID(3) " to Default: ");
    op = NULL;
    CHECK(dra_sharing_reset(quick, &g3, NULL, &ts, on_done, &never, &op, &err) == 1 && op);
    dra_sharing_cancel(quick, op);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
    CHECK(!never.called);
    dra_sharing_free(quick);
    /* NVML refuses (no privilege): named, and the tool is not run. */
    control(dir, "settings-error " UUID(4) " NO_PERMISSION");
    CHECK(apply(s, &g4, NULL, &ts, &err) == -EIO);
    CHECK_STR_CONTAINS(err.msg, "setting compute mode DEFAULT on " UUID(4) ": nvmlDeviceSetComputeMode: ");
    CHECK(reset(s, &g4, NULL, &ts, &err) == -EIO);
    CHECK_STR_CONTAINS(err.msg, "setting compute mode DEFAULT on " UUID(4) ": nvmlDeviceSetComputeMode: ");
    control(dir, "settings-ok " UUID(4));
    CHECK(apply(s, &g4, NULL, &ts, &err) == 0);
    struct inv_gpu gone = gpu("GPU-00000000-0000-0000-0000-000000000099");
    CHECK(apply(s, &gone, NULL, &ts, &err) == -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "nvmlDeviceGetHandleByUUID");
    dra_sharing_free(s);

    /* No driver root: the tool is looked for on PATH, and its absence is named. */
    s = dra_sharing_new(&(struct dra_sharing_options){ .loop = loop, .driver_root = "/" });
    setenv("PATH", dir, 1);
    CHECK(apply(s, &g0, NULL, &ts, &err) == -ENOENT);
    CHECK_STR_CONTAINS(err.msg, "running nvidia-smi: No such file or directory (not on PATH");
    dra_sharing_free(s);

    nvml_close();
    loop_free(loop);
    if (test_failures)
        fprintf(stderr, "%d check(s) failed\n", test_failures);
    return test_failures ? 1 : 0;
}
