/* MPS sharing of DRA claims, the plugin's half (src/dra/dra-mps.c) and mpsConfig's decoding
 * (src/dra/dra-config.c): NVIDIA's fields, units and messages; groups and their ids
 * (sha256 as NVIDIA's); the per-device keys and multiUser checked against the group; the
 * desired state written once; unprepare's half; the readiness and stop waits on the loop;
 * the CDI edits; the start-up sweep. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/loop.h"
#include "dra/dra-mps.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"

int test_failures;

#define CFG(mps) "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\"," \
                 "\"sharing\":{\"strategy\":\"MPS\"" mps "}}"
#define PREFIX "error transforming DefaultPerDevicePinnedMemoryLimit into string: "

static int decode(const char *text, struct dra_config *c, struct error *err)
{
    json_t *o = json_loads(text, 0, NULL);
    CHECK(o != NULL);
    *err = (struct error){ 0 };
    int r = dra_config_decode(o, c, err);
    json_decref(o);
    return r;
}

static void expect_error(const char *text, const char *msg)
{
    struct dra_config c;
    struct error err;
    CHECK(decode(text, &c, &err) < 0);
    CHECK_STR(err.msg, msg);
}

static void test_decode(void)
{
    struct dra_config c;
    struct error err;
    /* Normalize: no mpsConfig is an empty one, nothing set */
    CHECK(decode(CFG(""), &c, &err) == 0);
    CHECK(c.sharing == DRA_SHARING_MPS && c.mps.thread_pct == -1 && c.mps.pinned_mib == -1 &&
          !c.mps.multi_user && c.mps.n_limits == 0 && !c.mps.id[0]);
    /* bytes in, whole MiB out (value/1024/1024, rounded down), a number taken too */
    CHECK(decode(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":50,"
                     "\"defaultPinnedDeviceMemoryLimit\":\"10Gi\",\"multiUser\":true,"
                     "\"defaultPerDevicePinnedMemoryLimit\":{\"0\":\"1.5Gi\",\"GPU-b\":2097152,"
                     "\"1\":\"1500000\"}}"), &c, &err) == 0);
    CHECK(c.mps.thread_pct == 50 && c.mps.pinned_mib == 10240 && c.mps.multi_user);
    CHECK(c.mps.n_limits == 3);
    CHECK_STR(c.mps.limits[0].key, "0");
    CHECK(c.mps.limits[0].mib == 1536 && c.mps.limits[1].mib == 2 && c.mps.limits[2].mib == 1);
    CHECK(decode(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":0}"), &c, &err) == 0 &&
          c.mps.thread_pct == 0);
    CHECK(decode(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":null}"), &c, &err) == 0 &&
          c.mps.thread_pct == -1);

    /* NVIDIA's messages */
    expect_error(CFG(",\"timeSlicingConfig\":{}"),
                 "invalid GpuConfig: cannot use TimeSlicingConfig with the 'MPS' strategy");
    expect_error(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":-1}"),
                 "invalid GpuConfig: active thread percentage must not be negative");
    expect_error(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":101}"),
                 "invalid GpuConfig: active thread percentage must not be greater than 100");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":\"1023Ki\"}"),
                 "invalid GpuConfig: " PREFIX "invalid limit: default value set too low: 1023Ki");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":\"-1Gi\"}"),
                 "invalid GpuConfig: " PREFIX "invalid limit: default value set too low: -1Gi");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"GPU-a\":\"100\"}}"),
                 "invalid GpuConfig: " PREFIX "invalid limit: value set too low: GPU-a: 100");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"" 
                     "MIG-0123456789012345678901234567890123456789012345678901234\":\"1Gi\"}}"),
                 "invalid GpuConfig: " PREFIX "invalid device: unable to parse key as an integer: "
                 "MIG-0123456789012345678901234567890123456789012345678901234");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":\"ten\"}"),
                 "invalid GpuConfig: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: quantities "
                 "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":true}"),
                 "invalid GpuConfig: json: cannot unmarshal bool into field "
                 "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit of type Quantity");
    expect_error(CFG(",\"mpsConfig\":{\"multiUser\":\"yes\"}"),
                 "invalid GpuConfig: json: cannot unmarshal string into field "
                 "sharing.mpsConfig.multiUser of type bool");
    expect_error(CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":\"50\"}"),
                 "invalid GpuConfig: json: cannot unmarshal string into field "
                 "sharing.mpsConfig.defaultActiveThreadPercentage of type int");
    expect_error(CFG(",\"mpsConfig\":{\"extra\":1}"),
                 "invalid GpuConfig: strict decoding error: unknown field \"sharing.mpsConfig.extra\"");
    expect_error(CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"0\":\"1Gi\",\"1\":\"1Gi\","
                     "\"2\":\"1Gi\",\"3\":\"1Gi\",\"4\":\"1Gi\",\"5\":\"1Gi\",\"6\":\"1Gi\",\"7\":\"1Gi\","
                     "\"8\":\"1Gi\"}}"),
                 "invalid GpuConfig: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: more than "
                 "8 devices (this plugin's bound)");
    /* MigDeviceConfig takes MPS too, without timeSlicingConfig */
    CHECK(decode("{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"MigDeviceConfig\","
                 "\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"multiUser\":false}}}", &c, &err) == 0);
    CHECK(c.kind == DRA_CONFIG_MIG && c.sharing == DRA_SHARING_MPS);
}

/* Three GPUs: gpu-0 and gpu-1 Volta, gpu-2 Pascal (compute capability 6.0). */
static struct inv_gpu gpus[3];
static struct inventory inv = { .gpus = gpus, .n_gpus = 3 };

static void setup_inventory(struct dra_device_set *set)
{
    static const char *const uuids[] = { "GPU-cccc", "GPU-aaaa", "GPU-bbbb" };
    for (unsigned i = 0; i < 3; i++) {
        gpus[i] = (struct inv_gpu){ .index = i, .minor = i, .cc_major = i == 2 ? 6 : 7, .numa_node = -1 };
        snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "%s", uuids[i]);
        snprintf(gpus[i].name, sizeof(gpus[i].name), "Tesla");
    }
    struct error err = { 0 };
    CHECK(dra_devices_build(&inv, NULL, set, &err) == 0);
}

static struct dra_ckpt_device dev(const char *name, const char *mps)
{
    struct dra_config c;
    struct error err;
    if (mps)
        CHECK(decode(mps, &c, &err) == 0);
    else
        c = dra_config_default(DRA_CONFIG_GPU);
    return (struct dra_ckpt_device){ .device = (char *)name, .config = c };
}

static void test_plan(const struct dra_device_set *set)
{
    /* NVIDIA's id: sha256 of the sorted UUIDs joined by "," */
    char id[DRA_MPS_ID_MAX];
    const char two[][DRA_MPS_KEY_MAX] = { "GPU-a", "GPU-b" };
    dra_mps_id("uid-1", two, 2, id);
    CHECK_STR(id, "uid-1-95a93");
    CHECK(dra_mps_id_of(id, "uid-1") && !dra_mps_id_of(id, "uid") && !dra_mps_id_of("uid-1-95a9", "uid-1"));

    /* gpu-0 and gpu-1 ask for one daemon, gpu-2 for another, the plain one for none */
    const char *a = CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":30,"
                        "\"defaultPerDevicePinnedMemoryLimit\":{\"1\":\"2Gi\"}}");
    const char *b = CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":60}");
    struct dra_ckpt_device d[] = { dev("gpu-0", a), dev("gpu-3", NULL), dev("gpu-1", a), dev("gpu-2", b) };
    d[1].device = "gpu-2"; /* not MPS: no group, whatever its device */
    struct error err = { 0 };
    CHECK(dra_mps_plan("u", d, 4, &inv, set, &err) == 0);
    CHECK(d[0].config.mps.n_group == 2);
    CHECK_STR(d[0].config.mps.group[0], "GPU-aaaa");
    CHECK_STR(d[0].config.mps.group[1], "GPU-cccc");
    CHECK_STR(d[0].config.mps.id, d[2].config.mps.id);
    const char ac[][DRA_MPS_KEY_MAX] = { "GPU-aaaa", "GPU-cccc" };
    dra_mps_id("u", ac, 2, id);
    CHECK_STR(d[0].config.mps.id, id);
    CHECK(!d[1].config.mps.id[0]);
    CHECK(d[3].config.mps.n_group == 1 && strcmp(d[3].config.mps.id, d[0].config.mps.id) != 0);

    /* keys checked against the group: an index past it, a UUID not in it */
    struct dra_ckpt_device e[] = { dev("gpu-0", CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"1\":\"1Gi\"}}")) };
    CHECK(dra_mps_plan("u", e, 1, &inv, set, &err) == -EINVAL);
    CHECK_STR(err.msg, PREFIX "invalid device: invalid device index: 1");
    struct dra_ckpt_device f[] = { dev("gpu-0", CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"GPU-bbbb\":\"1Gi\"}}")) };
    CHECK(dra_mps_plan("u", f, 1, &inv, set, &err) == -EINVAL);
    CHECK_STR(err.msg, PREFIX "invalid device: unable to parse key as an integer: GPU-bbbb");
    struct dra_ckpt_device g[] = { dev("gpu-0", CFG(",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":{\"-1\":\"1Gi\"}}")) };
    CHECK(dra_mps_plan("u", g, 1, &inv, set, &err) == -EINVAL);
    CHECK_STR(err.msg, PREFIX "invalid device: invalid device index: -1");
    /* multiUser: compute capability 7.0 at least, on every full GPU */
    const char *mu = CFG(",\"mpsConfig\":{\"multiUser\":true}");
    struct dra_ckpt_device h[] = { dev("gpu-0", mu), dev("gpu-2", mu) };
    CHECK(dra_mps_plan("u", h, 2, &inv, set, &err) == -EINVAL);
    CHECK_STR(err.msg, "multiuser mode was requested but is not supported: GPU-bbbb has "
                       "insufficient cudaComputeCapability \"6.0\", wanted >= \"7.0\"");
    struct dra_ckpt_device k[] = { dev("gpu-0", mu), dev("gpu-1", mu) };
    CHECK(dra_mps_plan("u", k, 2, &inv, set, &err) == 0);
}

static char *slurp(const char *path)
{
    char *text = NULL;
    size_t len;
    return read_file_bounded(path, 1 << 20, &text, &len, NULL) == 0 ? text : xstrdup("(missing)");
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    close(fd);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

struct waited {
    int r, calls;
    char msg[512];
};

static void on_waited(void *userdata, int r, const struct error *err)
{
    struct waited *w = userdata;
    w->r = r;
    w->calls++;
    snprintf(w->msg, sizeof(w->msg), "%s", r < 0 ? err->msg : "");
}

static void on_stop(struct loop *l, struct loop_timer *t, void *userdata)
{
    loop_quit(l, 0);
}

static void on_remove(struct loop *l, struct loop_timer *t, void *userdata)
{
    rmdir(userdata);
}

static void test_files(const struct dra_device_set *set)
{
    const char *dir = scratch_dir("dra-mps-");
    const char *cfg = CFG(",\"mpsConfig\":{\"defaultActiveThreadPercentage\":25,"
                          "\"defaultPinnedDeviceMemoryLimit\":\"1Gi\",\"defaultPerDevicePinnedMemoryLimit\":"
                          "{\"GPU-cccc\":\"3Gi\"}}");
    struct dra_ckpt_device d[] = { dev("gpu-0", cfg), dev("gpu-1", cfg) };
    struct error err = { 0 };
    CHECK(dra_mps_plan("claim-1", d, 2, &inv, set, &err) == 0);
    const struct dra_mps_config *m = &d[0].config.mps;
    CHECK(dra_mps_desire(dir, m, &err) == 0);
    _cleanup_free_ char *desired = xasprintf("%s/mps/%s/desired.json", dir, m->id);
    _cleanup_free_ char *trigger = xasprintf("%s/mps/.changed", dir);
    _cleanup_free_ char *text = slurp(desired);
    _cleanup_free_ char *want = xasprintf(
        "{\"activeThreadPercentage\":25,\"devices\":[\"GPU-aaaa\",\"GPU-cccc\"],\"id\":\"%s\","
        "\"multiUser\":false,\"pinnedDeviceMemoryLimitMiB\":{\"GPU-aaaa\":1024,\"GPU-cccc\":3072},"
        "\"version\":1}", m->id);
    CHECK_STR(text, want);
    _cleanup_free_ char *told = slurp(trigger);
    _cleanup_free_ char *told_want = xasprintf("%s\n", m->id);
    CHECK_STR(told, told_want);
    /* a retry finds the same: not written again, the runner not told again */
    struct stat a, b;
    CHECK(stat(desired, &a) == 0);
    unlink(trigger);
    CHECK(dra_mps_desire(dir, m, &err) == 0);
    CHECK(stat(desired, &b) == 0 && a.st_ino == b.st_ino && !exists(trigger));

    /* the CDI edits of the group's devices */
    json_t *spec = json_pack("{s:[{s:s, s:{s:[]}}, {s:s, s:{}}]}", "devices", "name", "claim-1-gpu-0",
                             "containerEdits", "deviceNodes", "name", "claim-1-gpu-7", "containerEdits");
    dra_mps_cdi_edits(spec, "claim-1", d, 2, "/var/lib/kubelet/plugins/gpu.nvidia.com");
    _cleanup_free_ char *edits = json_dumps(json_array_get(json_object_get(spec, "devices"), 0),
                                            JSON_COMPACT | JSON_SORT_KEYS);
    _cleanup_free_ char *edits_want = xasprintf(
        "{\"containerEdits\":{\"deviceNodes\":[],\"env\":[\"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps\"],"
        "\"mounts\":[{\"containerPath\":\"/dev/shm\",\"hostPath\":\"/var/lib/kubelet/plugins/gpu.nvidia.com/mps/%s/shm\","
        "\"options\":[\"rw\",\"nosuid\",\"nodev\",\"bind\"]},{\"containerPath\":\"/tmp/nvidia-mps\","
        "\"hostPath\":\"/var/lib/kubelet/plugins/gpu.nvidia.com/mps/%s/pipe\",\"options\":[\"rw\",\"nosuid\","
        "\"nodev\",\"bind\"]}]},\"name\":\"claim-1-gpu-0\"}", m->id, m->id);
    CHECK_STR(edits, edits_want);
    CHECK(json_object_size(json_object_get(json_array_get(json_object_get(spec, "devices"), 1),
                                           "containerEdits")) == 0);
    json_decref(spec);

    /* waits: not ready -> NVIDIA's message at the bound; ready -> at once */
    struct loop *l;
    CHECK(loop_new(&l) == 0);
    struct waited w = { 0 };
    struct dra_mps_wait *op = NULL;
    CHECK(dra_mps_wait(l, dir, m->id, NULL, true, 150, on_waited, &w, &op) == 1);
    loop_timer_add(l, 400, on_stop, NULL);
    loop_run(l);
    CHECK(w.calls == 1 && w.r == -EINPROGRESS);
    CHECK_STR(w.msg, "MPS control daemon is not yet ready: waiting for MPS control daemon to come online");
    _cleanup_free_ char *log = xasprintf("%s/mps/%s/log", dir, m->id);
    _cleanup_free_ char *marker = xasprintf("%s/startup.log", log);
    CHECK(mkdir_p(log, 0755) == 0);
    touch(marker);
    CHECK(dra_mps_wait(l, dir, m->id, NULL, true, 150, on_waited, &w, &op) == 0);
    /* cancelled: never called */
    unlink(marker);
    CHECK(dra_mps_wait(l, dir, m->id, NULL, true, 50, on_waited, &w, &op) == 1);
    dra_mps_wait_cancel(op);

    /* unprepare's half: the runner took it (running.json): desired.json goes, we wait for
     * the directory, which the runner removes */
    _cleanup_free_ char *iddir = xasprintf("%s/mps/%s", dir, m->id);
    _cleanup_free_ char *running = xasprintf("%s/running.json", iddir);
    touch(running);
    CHECK(dra_mps_undesire(dir, m->id, &err) == 1);
    CHECK(!exists(desired) && exists(iddir) && exists(trigger));
    w = (struct waited){ 0 };
    CHECK(dra_mps_wait(l, dir, m->id, NULL, false, 2000, on_waited, &w, &op) == 1);
    unlink(running);
    unlink(marker);
    rmdir(log);
    loop_timer_add(l, 60, on_remove, iddir);
    loop_timer_add(l, 1500, on_stop, NULL);
    loop_run(l);
    CHECK(w.calls == 1 && w.r == 0);
    /* gone: nothing to do (NVIDIA's idempotent unprepare) */
    CHECK(dra_mps_undesire(dir, m->id, &err) == 0);
    /* never taken by a runner: removed here */
    CHECK(dra_mps_desire(dir, m, &err) == 0);
    CHECK(dra_mps_undesire(dir, m->id, &err) == 0 && !exists(iddir));
    loop_free(l);

    /* the start-up sweep: claim-1 is prepared, claim-2 is not */
    struct dra_ckpt_device d2[] = { dev("gpu-2", CFG("")) };
    CHECK(dra_mps_plan("claim-2", d2, 1, &inv, set, &err) == 0);
    CHECK(dra_mps_desire(dir, m, &err) == 0 && dra_mps_desire(dir, &d2[0].config.mps, &err) == 0);
    struct dra_ckpt_claim keep = { .uid = "claim-1" };
    struct dra_checkpoint ck = { .claims = &keep, .n_claims = 1 };
    CHECK(dra_mps_sweep(dir, &ck) == 1);
    CHECK(exists(desired));
    _cleanup_free_ char *other = xasprintf("%s/mps/%s", dir, d2[0].config.mps.id);
    CHECK(!exists(other));
}

int main(void)
{
    struct dra_device_set set = { 0 };
    test_decode();
    setup_inventory(&set);
    test_plan(&set);
    test_files(&set);
    dra_device_set_clear(&set);
    return test_failures ? 1 : 0;
}
