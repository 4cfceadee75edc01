/* MPS control daemons (mps.h): NVIDIA's tools run with a bounded time and output. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/log.h"
#include "core/nvsmi.h"
#include "core/tool.h"
#include "mps/mps.h"

/* Every tool run of this entrypoint, bounded by MPS_TOOL_TIMEOUT_MS. */
static int run_tool(char *const argv[], char *const envp[], const char *input, char *out,
                    size_t out_size, struct error *err)
{
    return tool_run(argv, envp, input, MPS_TOOL_TIMEOUT_MS, out, out_size, err);
}

/* Each GPU of res once (it has several replicas), through core/nvsmi.h: NVIDIA's very
 * `nvidia-smi -i <uuid> -c <mode>`, the tool on PATH. */
static int set_compute_mode(const struct rs_resource *res, const char *mode, struct error *err)
{
    for (size_t i = 0; i < res->n_devices; i++) {
        const char *uuid = res->devices[i].uuid;
        bool done = false;
        for (size_t j = 0; j < i && !done; j++)
            done = streq(res->devices[j].uuid, uuid);
        if (done)
            continue;
        int r = nvsmi_set_compute_mode(NULL, NULL, uuid, mode, MPS_TOOL_TIMEOUT_MS, err);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The daemon's environment: its pipe and log directories under the root, and PATH. */
struct mps_env {
    char *vars[3];
    char *envp[4];
};

static void mps_env_init(struct mps_env *e, const char *root, const struct rs_resource *res)
{
    const char *path = getenv("PATH");
    e->vars[0] = xasprintf("CUDA_MPS_PIPE_DIRECTORY=%s/%s/pipe", root, res->name);
    e->vars[1] = xasprintf("CUDA_MPS_LOG_DIRECTORY=%s/%s/log", root, res->name);
    e->vars[2] = xasprintf("PATH=%s", path ? path : "/usr/bin:/bin");
    for (size_t i = 0; i < 3; i++)
        e->envp[i] = e->vars[i];
    e->envp[3] = NULL;
}

static void mps_env_clear(struct mps_env *e)
{
    for (size_t i = 0; i < 3; i++)
        free(e->vars[i]);
}

/* Run nvidia-cuda-mps-control for res's daemon: with args (NULL: none), or command on
 * its stdin. */
static int control(const char *root, const struct rs_resource *res, const char *arg,
                   const char *command, struct error *err)
{
    _cleanup_(mps_env_clear) struct mps_env e;
    mps_env_init(&e, root, res);
    char *argv[] = { "nvidia-cuda-mps-control", (char *)arg, NULL };
    char out[TOOL_OUTPUT_MAX];
    int r = run_tool(argv, e.envp, command, out, sizeof(out), err);
    if (r < 0 && command)
        return error_prefix(err, "sending \"%s\" to the MPS daemon of %s", command, res->name);
    return r;
}

int mps_daemon_start(const char *root, const struct rs_resource *res, struct error *err)
{
    int r = set_compute_mode(res, "EXCLUSIVE_PROCESS", err);
    if (r < 0)
        return r;
    log_info("Starting MPS daemon for %s (%zu devices)", res->name, res->n_devices);
    static const char *const dirs[] = { "pipe", "log" };
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        _cleanup_free_ char *d = xasprintf("%s/%s/%s", root, res->name, dirs[i]);
        if ((r = mkdir_p(d, 0755)) < 0)
            return error_set(err, r, "error creating directory %s: %s", d, strerror(-r));
    }
    if ((r = control(root, res, "-d", NULL, err)) < 0)
        return r;
    /* Each GPU's pinned memory split between its replicas; the threads likewise. */
    size_t gpus = 0;
    for (size_t i = 0; i < res->n_devices; i++) {
        const struct rs_device *d = &res->devices[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = streq(res->devices[j].index, d->index);
        if (seen)
            continue;
        gpus++;
        if (!d->memory_bytes || d->replicas < 1)
            continue;
        _cleanup_free_ char *cmd = xasprintf(
            "set_default_device_pinned_mem_limit %s %lluM", d->index,
            (unsigned long long)(d->memory_bytes / (uint64_t)d->replicas / 1024 / 1024));
        if ((r = control(root, res, NULL, cmd, err)) < 0)
            return r;
    }
    if (gpus) {
        _cleanup_free_ char *cmd = xasprintf("set_default_active_thread_percentage %zu",
                                             100 / (res->n_devices / gpus));
        if ((r = control(root, res, NULL, cmd, err)) < 0)
            return r;
    }
    _cleanup_free_ char *started = xasprintf("%s/%s/.started", root, res->name);
    _cleanup_close_ int fd = open(started, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return error_set(err, -errno, "creating %s: %s", started, strerror(errno));
    return 0;
}

int mps_daemon_stop(const char *root, const struct rs_resource *res, struct error *err)
{
    int r = control(root, res, NULL, "quit", err);
    if (r < 0)
        return r;
    log_info("Shut down the MPS daemon of %s", res->name);
    if ((r = set_compute_mode(res, "DEFAULT", err)) < 0)
        return r;
    _cleanup_free_ char *started = xasprintf("%s/%s/.started", root, res->name);
    if (unlink(started) < 0 && errno != ENOENT)
        return error_set(err, -errno, "removing %s: %s", started, strerror(errno));
    return 0;
}

int mps_mount_shm(const char *root, struct error *err)
{
    _cleanup_free_ char *shm = xasprintf("%s/shm", root);
    if (umount2(shm, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
        return error_set(err, -errno, "error unmounting %s: %s", shm, strerror(errno));
    int r = mkdir_p(shm, 0755);
    if (r < 0)
        return error_set(err, r, "error creating directory %s: %s", shm, strerror(-r));
    if (mount("shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME,
              "size=65536k") < 0)
        return error_set(err, -errno, "error mounting %s as tmpfs: %s", shm, strerror(errno));
    return 0;
}
