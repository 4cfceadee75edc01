/* Process-wide state of the simulated library (see sim-state.h): nvmlInit/Shutdown
 * reference counting, loading the node profile once, and handle validation that turns
 * a stale or lost handle into the NVML error a real driver returns. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sim-env.h"
#include "sim-errors.h"
#include "sim-migstate.h"
#include "sim-state.h"

pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
struct sim_node *sim_node;
unsigned sim_refcount;
static bool control_started;

struct sim_node *sim_profile_default(char *err, size_t errlen)
{
    return sim_profile_parse("<built-in default profile>", sim_default_profile, sim_default_profile_len,
                             err, errlen);
}

static nvmlReturn_t init_locked(void)
{
    const char *inj = sim_env("MOCK_NVML_INIT_ERROR");
    if (inj && *inj) {
        nvmlReturn_t r;
        if (sim_parse_return(inj, &r) < 0) {
            fprintf(stderr, "MOCK_NVML_INIT_ERROR:1: unknown NVML return code '%s'\n", inj);
            return NVML_ERROR_UNKNOWN;
        }
        if (r != NVML_SUCCESS)
            return r;
    }
    if (!sim_node) {
        char err[512];
        const char *path = sim_env("MOCK_NVML_CONFIG");
        struct sim_node *nd = path && *path ? sim_profile_load(path, err, sizeof(err))
                                            : sim_profile_default(err, sizeof(err));
        if (!nd) {
            fprintf(stderr, "%s\n", err);
            return NVML_ERROR_UNKNOWN;
        }
        /* Run-time MIG state: the profile's instances, or MOCK_NVML_STATE's. */
        if (nd->init_error == NVML_SUCCESS && sim_ms_init(nd) != NVML_SUCCESS)
            return NVML_ERROR_UNKNOWN;
        /* Published once, never freed: handles must outlive init/shutdown cycles. */
        sim_node = nd;
    }
    if (sim_node->init_error != NVML_SUCCESS)
        return sim_node->init_error;
    sim_refcount++;
    if (!control_started) {
        control_started = true;
        const char *fifo = sim_env("MOCK_NVML_CONTROL");
        if (fifo && *fifo)
            sim_control_start(fifo, sim_env("MOCK_NVML_CONTROL_ACK"));
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t init(void)
{
    pthread_mutex_lock(&sim_lock);
    nvmlReturn_t r = init_locked();
    pthread_mutex_unlock(&sim_lock);
    return r;
}

_public_ nvmlReturn_t nvmlInit_v2(void) { return init(); }
_public_ nvmlReturn_t nvmlInit(void) { return init(); }
_public_ nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    if (flags & ~(unsigned)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH | NVML_INIT_FLAG_FORCE_INIT))
        return NVML_ERROR_INVALID_ARGUMENT;
    return init();
}

_public_ nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&sim_lock);
    if (sim_refcount > 0)
        sim_refcount--;
    pthread_mutex_unlock(&sim_lock);
    return NVML_SUCCESS;
}

_public_ const char *nvmlErrorString(nvmlReturn_t result) { return sim_return_text(result); }

nvmlReturn_t sim_initialized(void)
{
    pthread_mutex_lock(&sim_lock);
    bool up = sim_refcount > 0;
    pthread_mutex_unlock(&sim_lock);
    return up ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static bool known_device(struct sim_device *p)
{
    for (unsigned i = 0; i < sim_node->n_devs; i++)
        if (p == &sim_node->devs[i])
            return true;
    /* A MIG device: live in the state as it is now (another process may have destroyed it). */
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    bool live = sim_ms_mig_of(p, NULL) != NULL;
    pthread_mutex_unlock(&sim_lock);
    return live;
}

nvmlReturn_t sim_dev_usable(struct sim_device *d, unsigned flags)
{
    if ((flags & SIM_GPU_ONLY) && d->is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct sim_device *gpu = d->is_mig ? d->parent : d;
    pthread_mutex_lock(&sim_lock);
    nvmlReturn_t r = NVML_SUCCESS;
    if (gpu->lost)
        r = NVML_ERROR_GPU_IS_LOST;
    else if ((flags & SIM_QUERY) && gpu->probe_fail)
        r = NVML_ERROR_UNKNOWN;
    pthread_mutex_unlock(&sim_lock);
    return r;
}

nvmlReturn_t sim_dev(nvmlDevice_t h, unsigned flags, struct sim_device **out)
{
    nvmlReturn_t r = sim_initialized();
    if (r != NVML_SUCCESS)
        return r;
    struct sim_device *d = (struct sim_device *)(void *)h;
    if (!d || !known_device(d))
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((r = sim_dev_usable(d, flags)) != NVML_SUCCESS)
        return r;
    *out = d;
    return NVML_SUCCESS;
}

nvmlReturn_t sim_gi(nvmlGpuInstance_t h, struct sim_gi **out)
{
    nvmlReturn_t r = sim_initialized();
    if (r != NVML_SUCCESS)
        return r;
    bool ours;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    struct sim_gi *p = sim_ms_gi_of(h, &ours);
    pthread_mutex_unlock(&sim_lock);
    if (!ours)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!p) /* destroyed (here or by another process) */
        return NVML_ERROR_NOT_FOUND;
    if ((r = sim_dev_usable(p->parent, SIM_QUERY)) != NVML_SUCCESS)
        return r;
    *out = p;
    return NVML_SUCCESS;
}

nvmlReturn_t sim_ci(nvmlComputeInstance_t h, struct sim_ci **out)
{
    nvmlReturn_t r = sim_initialized();
    if (r != NVML_SUCCESS)
        return r;
    bool ours;
    pthread_mutex_lock(&sim_lock);
    sim_ms_refresh();
    struct sim_ci *p = sim_ms_ci_of(h, &ours);
    pthread_mutex_unlock(&sim_lock);
    if (!ours)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!p)
        return NVML_ERROR_NOT_FOUND;
    if ((r = sim_dev_usable(p->gi->parent, SIM_QUERY)) != NVML_SUCCESS)
        return r;
    *out = p;
    return NVML_SUCCESS;
}

struct sim_device *sim_find_uuid_locked(const char *uuid)
{
    if (!sim_node)
        return NULL;
    for (unsigned i = 0; i < sim_node->n_devs; i++)
        if (!strcasecmp(sim_node->devs[i].uuid, uuid))
            return &sim_node->devs[i];
    sim_ms_refresh();
    struct sim_device *m = sim_ms_find_mig_uuid(uuid);
    if (m)
        return m;
    /* Legacy MIG naming: MIG-GPU-<uuid>/<gi>/<ci>. */
    if (strncasecmp(uuid, "MIG-GPU-", 8) == 0) {
        const char *slash = strchr(uuid, '/');
        unsigned gi, ci;
        char tail;
        if (!slash || sscanf(slash, "/%u/%u%c", &gi, &ci, &tail) != 2)
            return NULL;
        for (unsigned i = 0; i < sim_node->n_devs; i++) {
            struct sim_device *d = &sim_node->devs[i];
            if (strlen(d->uuid) != (size_t)(slash - uuid - 4) || strncasecmp(d->uuid, uuid + 4, (size_t)(slash - uuid - 4)))
                continue;
            return sim_ms_find_mig_ids(d, gi, ci);
        }
    }
    return NULL;
}

struct sim_device *sim_find_uuid(const char *uuid)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_device *d = sim_find_uuid_locked(uuid);
    pthread_mutex_unlock(&sim_lock);
    return d;
}

nvmlReturn_t sim_put_str(char *buf, unsigned len, const char *s)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strlen(s);
    if (n + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, n + 1);
    return NVML_SUCCESS;
}
