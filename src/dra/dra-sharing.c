/* Sharing configs applied to GPUs (dra-sharing.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/nvsmi.h"
#include "dra/dra-sharing.h"
#include "nvml/nvml.h"

struct dra_sharing_ctx {
    struct loop *loop;
    char *driver_root; /* NULL: the container's own */
    unsigned timeout_ms;
};

/* nvidia-smi running for a claim's device. */
struct dra_apply_op {
    struct tool_run *tool;
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
    return s;
}

void dra_sharing_free(struct dra_sharing_ctx *s)
{
    if (!s)
        return;
    free(s->driver_root);
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
    free(op);
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
        return error_set(err, -ENOTSUP, "MPS sharing per claim is not supported by this "
                         "plugin (docs/compatibility.md)");
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
    /* Only TimeSlicing was ever applied (MPS is refused), and on a MIG device nothing. */
    if (cfg->sharing != DRA_SHARING_TIME_SLICING)
        return 0;
    struct dra_config defaults = *cfg;
    defaults.interval = DRA_TS_DEFAULT;
    return dra_sharing_apply(sharing, gpu, mig, &defaults, done, done_userdata, op, err);
}
