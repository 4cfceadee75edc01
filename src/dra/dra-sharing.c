/* Sharing configs applied to GPUs (dra-sharing.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/nvsmi.h"
#include "dra/dra-mps.h"
#include "dra/dra-sharing.h"
#include "nvml/nvml.h"

struct dra_sharing_ctx {
    struct loop *loop;
    char *driver_root; /* NULL: the container's own */
    unsigned timeout_ms;
    char *plugin_dir;  /* NULL: no MPS */
    unsigned mps_ready_ms, mps_stop_ms;
};

/* nvidia-smi running for a claim's device, or its MPS daemon waited for. */
struct dra_apply_op {
    struct tool_run *tool;
    struct dra_mps_wait *wait;
    char uuid[sizeof(((struct inv_gpu *)0)->uuid)]; /* a reload may free the inventory's */
    enum dra_ts_interval interval;
    dra_apply_done_fn done;
    void *userdata;
};

struct dra_sharing_ctx *dra_sharing_new(const struct dra_sharing_options *o)
{
    struct dra_sharing_ctx *s = xcalloc(1, sizeof(*s));
    s->loop = o->loop;
    const char *root = o->driver_root;
    if (root && *root && !streq(root, "/"))
        s->driver_root = xstrdup(root);
    s->timeout_ms = o->timeout_ms ? o->timeout_ms : DRA_SHARING_TOOL_TIMEOUT_MS;
    s->plugin_dir = o->plugin_dir ? xstrdup(o->plugin_dir) : NULL;
    s->mps_ready_ms = o->mps_ready_ms ? o->mps_ready_ms : DRA_MPS_READY_TIMEOUT_MS;
    s->mps_stop_ms = o->mps_stop_ms ? o->mps_stop_ms : DRA_MPS_STOP_TIMEOUT_MS;
    return s;
}

void dra_sharing_free(struct dra_sharing_ctx *s)
{
    if (!s)
        return;
    free(s->driver_root);
    free(s->plugin_dir);
    free(s);
}

static void nvml_unref(bool *opened)
{
    if (*opened)
        nvml_close();
}

static int set_compute_mode_default(const char *uuid, struct error *err)
{
    nvml_device dev;
    int r;
    if ((r = nvml_device_by_uuid(uuid, &dev, err)) < 0 ||
        (r = nvml_device_set_compute_mode(dev, NVML_COMPUTE_MODE_DEFAULT, err)) < 0)
        return error_prefix(err, "setting compute mode DEFAULT on %s", uuid);
    return 0;
}

static void timeslice_set(void *userdata, int r, const char *out, const struct error *err)
{
    struct dra_apply_op *op = userdata;
    struct error e = { 0 };
    if (r < 0) {
        e = *err;
        error_prefix(&e, "setting the time slice of %s to %s", op->uuid,
                     dra_ts_interval_name(op->interval));
    }
    op->done(op->userdata, r, &e);
    free(op);
}

/* Starts the tool (core/nvsmi.h: under the driver root, with its NVML preloaded): 1
 * (*opp set), or -errno. */
static int set_timeslice(const struct dra_sharing_ctx *s, const char *uuid,
                         enum dra_ts_interval interval, dra_apply_done_fn done, void *userdata,
                         struct dra_apply_op **opp, struct error *err)
{
    struct dra_apply_op *op = xcalloc(1, sizeof(*op));
    *op = (struct dra_apply_op){ .interval = interval, .done = done, .userdata = userdata };
    snprintf(op->uuid, sizeof(op->uuid), "%s", uuid);
    op->tool = nvsmi_set_timeslice(s->loop, s->driver_root, nvml_library_path(), uuid,
                                   (unsigned)interval, s->timeout_ms, timeslice_set, op, err);
    if (!op->tool) {
        free(op);
        return error_prefix(err, "setting the time slice of %s to %s", uuid,
                            dra_ts_interval_name(interval));
    }
    *opp = op;
    return 1;
}

void dra_sharing_cancel(void *sharing, struct dra_apply_op *op)
{
    tool_cancel(op->tool);
    dra_mps_wait_cancel(op->wait);
    free(op);
}

static void mps_waited(void *userdata, int r, const struct error *err)
{
    struct dra_apply_op *op = userdata;
    op->done(op->userdata, r, err);
    free(op);
}

/* MPS of a device (dra-mps.h): its group's desired state (ready: made, else removed),
 * then its daemon waited for (ready, or stopped and its directory gone). A share with a v3
 * namespace: its namespace desired with the daemon and waited for (made, limits set), and
 * at reset deleted, with the daemon too unless ns_only (other shares use it). */
static int mps(const struct dra_sharing_ctx *s, const struct dra_config *cfg, bool ready,
               dra_apply_done_fn done, void *userdata, struct dra_apply_op **opp,
               struct error *err)
{
    if (!cfg->mps.id[0]) /* a reset of a record that never got one: nothing was started */
        return ready ? error_set(err, -EINVAL, "no MPS control daemon was planned for it") : 0;
    if (!s->plugin_dir)
        return error_set(err, -ENOTSUP, "MPS needs the plugin's directory (not given)");
    const char *ns = cfg->mps.ns[0] ? cfg->mps.ns : NULL;
    int r;
    if (ready) {
        r = dra_mps_desire(s->plugin_dir, &cfg->mps, err);
        if (r >= 0 && ns)
            r = dra_mps_ns_desire(s->plugin_dir, &cfg->mps, err);
    } else {
        r = ns ? dra_mps_ns_undesire(s->plugin_dir, cfg->mps.id, ns, err) : 0;
        if (r >= 0 && !cfg->mps.ns_only)
            r = dra_mps_undesire(s->plugin_dir, cfg->mps.id, err);
    }
    if (r < 0)
        return error_prefix(err, "MPS control daemon %s", cfg->mps.id);
    if (!ready && r == 0) /* nothing left, or nothing the runner took */
        return 0;
    /* the daemon's stop takes its namespaces with it: its directory is what goes */
    const char *wait_ns = ns && (ready || cfg->mps.ns_only) ? ns : NULL;
    struct dra_apply_op *op = xcalloc(1, sizeof(*op));
    *op = (struct dra_apply_op){ .done = done, .userdata = userdata };
    r = dra_mps_wait(s->loop, s->plugin_dir, cfg->mps.id, wait_ns, ready,
                     ready ? s->mps_ready_ms : s->mps_stop_ms, mps_waited, op, &op->wait);
    if (r <= 0) {
        free(op);
        return r;
    }
    *opp = op;
    return 1;
}

int dra_sharing_apply(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                      const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                      struct dra_apply_op **op, struct error *err)
{
    const struct dra_sharing_ctx *s = sharing;
    switch (cfg->sharing) {
    case DRA_SHARING_NONE:
        return 0;
    case DRA_SHARING_MPS:
        return mps(s, cfg, true, done, done_userdata, op, err);
    case DRA_SHARING_TIME_SLICING:
        break;
    }
    if (mig)
        return 0;
    /* A reference of our own: the daemon holds NVML open while it serves, so this only
     * counts; without it (an NVML failure at start, tolerated) the error says why. */
    _cleanup_(nvml_unref) bool opened = false;
    int r = nvml_open(s->driver_root, err);
    if (r < 0)
        return error_prefix(err, "setting compute mode DEFAULT on %s", gpu->uuid);
    opened = true;
    if ((r = set_compute_mode_default(gpu->uuid, err)) < 0)
        return r;
    return set_timeslice(s, gpu->uuid, cfg->interval, done, done_userdata, op, err);
}

int dra_sharing_reset(void *sharing, const struct inv_gpu *gpu, const struct inv_mig *mig,
                      const struct dra_config *cfg, dra_apply_done_fn done, void *done_userdata,
                      struct dra_apply_op **op, struct error *err)
{
    if (cfg->sharing == DRA_SHARING_MPS)
        return mps(sharing, cfg, false, done, done_userdata, op, err);
    /* TimeSlicing: on a MIG device nothing was set */
    if (cfg->sharing != DRA_SHARING_TIME_SLICING)
        return 0;
    struct dra_config defaults = *cfg;
    defaults.interval = DRA_TS_DEFAULT;
    return dra_sharing_apply(sharing, gpu, mig, &defaults, done, done_userdata, op, err);
}
