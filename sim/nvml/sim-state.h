/* Process-wide state of the simulated library: the node (loaded at the first
 * successful nvmlInit and kept for the life of the process so handles stay valid),
 * the init reference count, event sets and fault-injection switches.
 *
 * Locking: sim_lock guards the refcount, the fault flags of devices, event sets,
 * the wait-error switch and the run-time MIG state (sim-migstate.h). The node's other fields never change after publication and
 * are read without the lock. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "core/macro.h"
#include "nvml/nvml-abi.h"
#include "sim-model.h"

extern pthread_mutex_t sim_lock;
extern struct sim_node *sim_node;
extern unsigned sim_refcount;

/* Handle checks, each taking sim_lock briefly. */
enum {
    SIM_ANY = 0,
    SIM_QUERY = 1 << 0,    /* probe-fail makes it fail with UNKNOWN */
    SIM_GPU_ONLY = 1 << 1, /* a MIG handle is INVALID_ARGUMENT */
};
nvmlReturn_t sim_dev(nvmlDevice_t h, unsigned flags, struct sim_device **out);
nvmlReturn_t sim_gi(nvmlGpuInstance_t h, struct sim_gi **out);
nvmlReturn_t sim_ci(nvmlComputeInstance_t h, struct sim_ci **out);
nvmlReturn_t sim_initialized(void);
/* Same checks as sim_dev for a device already resolved (e.g. by lookup). */
nvmlReturn_t sim_dev_usable(struct sim_device *d, unsigned flags);

/* GPU or MIG device by UUID (case-insensitive; also "MIG-GPU-<uuid>/<gi>/<ci>"): without
 * sim_lock, and with it held (the control thread). */
struct sim_device *sim_find_uuid(const char *uuid);
struct sim_device *sim_find_uuid_locked(const char *uuid);

/* Copy s into a caller buffer of `len` bytes, NVML style. */
nvmlReturn_t sim_put_str(char *buf, unsigned len, const char *s);

/* Events (sim-events.c). Queue one event for every set that registered `gpu` for
 * `type`. gi/ci 0xFFFFFFFF when not attributed. Caller holds sim_lock. */
void sim_events_post_locked(struct sim_device *gpu, unsigned long long type, unsigned long long data,
                            unsigned gi, unsigned ci);
/* An event whose device NVML cannot name (device NULL), to every set that registered
 * any GPU for `type`: what a driver reports when it cannot tell which GPU failed. */
void sim_events_post_unattributed_locked(unsigned long long type, unsigned long long data);
/* Wake every waiter (after the wait-error switch changed). Caller holds sim_lock. */
void sim_events_wake_all_locked(void);
/* wait-error switch: remaining count (-1 forever, 0 off) and code. Under sim_lock. */
extern long sim_wait_error_count;
extern nvmlReturn_t sim_wait_error_code;

/* Control FIFO (sim-control.c): start the reader thread once per process. */
void sim_control_start(const char *fifo, const char *ack);

/* Built-in profile text (generated from default-node.yaml). */
extern const unsigned char sim_default_profile[];
extern const size_t sim_default_profile_len;

#define SIM_UNATTRIBUTED 0xFFFFFFFFu

/* For the API files: resolve handle h (checking it against `flags`) into `d`, or return
 * the NVML error; reject a NULL out-pointer. */
#define DEV(h, flags)                                                                 \
    struct sim_device *d;                                                             \
    do {                                                                              \
        nvmlReturn_t r_ = sim_dev(h, flags, &d);                                      \
        if (r_ != NVML_SUCCESS)                                                       \
            return r_;                                                                \
    } while (0)

#define NONNULL(p)                                                                    \
    do {                                                                              \
        if (!(p))                                                                     \
            return NVML_ERROR_INVALID_ARGUMENT;                                       \
    } while (0)

/* Resolve a GPU instance / compute instance handle into `gi` / `ci` (a destroyed one:
 * NOT_FOUND, not ours: INVALID_ARGUMENT). */
#define GI(h)                                                                         \
    struct sim_gi *gi;                                                                \
    do {                                                                              \
        nvmlReturn_t r_ = sim_gi(h, &gi);                                             \
        if (r_ != NVML_SUCCESS)                                                       \
            return r_;                                                                \
    } while (0)
#define CI(h)                                                                         \
    struct sim_ci *ci;                                                                \
    do {                                                                              \
        nvmlReturn_t r_ = sim_ci(h, &ci);                                             \
        if (r_ != NVML_SUCCESS)                                                       \
            return r_;                                                                \
    } while (0)

/* Append "<function> <GPU uuid> <value>" to MOCK_NVML_SETTINGS_LOG (api-device.c). */
void sim_settings_log(const char *fn, const struct sim_device *d, unsigned value);
/* A MIG-capable GPU with MIG mode on: returns with sim_lock held and the MIG view
 * refreshed, or the error (MIG off: NOT_SUPPORTED) without the lock (api-mig.c). */
nvmlReturn_t sim_mig_gpu_enter(nvmlDevice_t device, struct sim_device **out);
/* Control commands (api-mig-create.c), under sim_lock: mark a MIG device (its CI) or a GPU
 * busy; apply a GPU's pending MIG mode (a GPU reset). NULL or why not. */
const char *sim_mig_set_busy_locked(struct sim_device *d, bool busy);
const char *sim_mig_reset_locked(struct sim_device *gpu);
