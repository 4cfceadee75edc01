/* The only door to NVML. nvml.c dlopens libnvidia-ml.so.1 (resolved under the driver
 * root like the reference), resolves a typed symbol table (required vs optional
 * symbols), and turns NVML return codes into our error contract:
 *   0 on success, or a negative code: -ENOTSUP (NOT_SUPPORTED), -ENOENT (NOT_FOUND),
 *   -ENODEV (GPU_IS_LOST), -ETIMEDOUT (TIMEOUT), -ENOSYS (symbol missing),
 *   -ELIBACC (library not loadable), -EIO (anything else); err->msg then carries
 *   "<nvml function>: <nvmlErrorString text>".
 * No NVML type leaves this module: callers see only the plain types below.
 *
 * Thread rules: NVML itself is thread-safe; nvml_open/nvml_close must not race with
 * other calls. The health event thread uses the event-set functions while the loop
 * thread may call the query functions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Opaque device handle (GPU or MIG device). */
typedef struct nvml_device_st *nvml_device;
typedef struct nvml_event_set_st *nvml_event_set;

/* Load the library and nvmlInit_v2. `driver_root`: "/" or empty → plain
 * "libnvidia-ml.so.1"; else the first existing <root>/{usr/lib64,
 * usr/lib/x86_64-linux-gnu, usr/lib/aarch64-linux-gnu, lib64, lib/x86_64-linux-gnu,
 * lib/aarch64-linux-gnu}/libnvidia-ml.so.1, falling back to the plain name.
 * Reference counted: each successful nvml_open needs one nvml_close. */
int nvml_open(const char *driver_root, struct error *err);
void nvml_close(void);
/* Take one more reference on an already open library (for a thread that may outlive
 * its creator's nvml_close). Must only be called while a reference is held. */
void nvml_ref(void);
/* Path or name that was dlopen'ed (for logs). */
const char *nvml_library_path(void);

int nvml_system_driver_version(char *buf, size_t len, struct error *err);
int nvml_system_cuda_version(int *version, struct error *err); /* 12040 = 12.4 */

int nvml_device_count(unsigned *count, struct error *err);
int nvml_device_by_index(unsigned index, nvml_device *dev, struct error *err);
int nvml_device_by_uuid(const char *uuid, nvml_device *dev, struct error *err);
int nvml_device_name(nvml_device dev, char *buf, size_t len, struct error *err);
int nvml_device_uuid(nvml_device dev, char *buf, size_t len, struct error *err);
int nvml_device_minor(nvml_device dev, unsigned *minor, struct error *err);
/* PCI bus id as NVML gives it ("00000000:3B:00.0"). */
int nvml_device_pci_bus_id(nvml_device dev, char *buf, size_t len, struct error *err);
int nvml_device_memory_total(nvml_device dev, uint64_t *bytes, struct error *err);
int nvml_device_compute_capability(nvml_device dev, int *major, int *minor, struct error *err);
/* Brand and architecture as NVIDIA's tools spell them ("Nvidia", "Hopper", "Ada
 * Lovelace"); -ENOENT for a value NVML added after us. */
int nvml_device_brand(nvml_device dev, char *buf, size_t len, struct error *err);
int nvml_device_architecture(nvml_device dev, char *buf, size_t len, struct error *err);
/* How the GPU addresses system memory, as go-nvlib spells it ("HMM", "ATS", "None"): DRA's
 * addressingMode. -ENOTSUP: NVML reports no mode (before Turing, or not Linux); -ENOSYS:
 * a driver older than the call; -ENOENT: a mode NVML added after us. */
int nvml_device_addressing_mode(nvml_device dev, char *buf, size_t len, struct error *err);
/* Whether the GPU is a vGPU guest's (virtualization mode VGPU: a VM given a vGPU, not
 * passthrough), which NVIDIA's DRA driver leaves out of DynamicMIG. *guest is false on any
 * error; -ENOSYS: a driver without the call. */
int nvml_device_vgpu_guest(nvml_device dev, bool *guest, struct error *err);
/* -ENOTSUP / -ENOSYS: not MIG capable. */
int nvml_device_mig_mode(nvml_device dev, bool *enabled, struct error *err);

/* Compute mode (nvmlComputeMode_t's values). Setting it needs root (CAP_SYS_ADMIN: NVML
 * answers NO_PERMISSION, -EIO here, without it) and lasts until the next reboot. Callers
 * pass a GPU's handle (the mode is the GPU's). -ENOSYS: the driver's library lacks the call. */
enum nvml_compute_mode {
    NVML_COMPUTE_MODE_DEFAULT = 0,
    NVML_COMPUTE_MODE_PROHIBITED = 2,
    NVML_COMPUTE_MODE_EXCLUSIVE_PROCESS = 3,
};
int nvml_device_compute_mode(nvml_device dev, enum nvml_compute_mode *mode, struct error *err);
int nvml_device_set_compute_mode(nvml_device dev, enum nvml_compute_mode mode, struct error *err);

/* ---- per-cgroup device-memory limits (nvml-limits.c; driver r615+, cgroup v2, not MIG)
 * `cgroup_path`: the cgroup v2 directory's full path ("/sys/fs/cgroup/<path>"); bytes.
 * The hard limit is what the cgroup may allocate on the GPU (an allocation past it fails
 * with CUDA_ERROR_OUT_OF_MEMORY); the soft limit is the amount guaranteed (0: none).
 * Setting needs root. -ENOTSUP: NVML says NOT_SUPPORTED (driver before r615, a cgroup v1
 * host, a MIG device or a GPU in MIG mode, the root cgroup); -ENOSYS: the library lacks
 * the call (older NVML, or gpu-smoke's read-only build); -ENOENT: no such cgroup. */
#define NVML_MEMORY_LIMIT_NONE UINT64_MAX /* NVML_DEVICE_MEMORY_LIMIT_MAX: no hard limit */
int nvml_device_set_memory_limits(nvml_device dev, const char *cgroup_path, uint64_t soft,
                                  uint64_t hard, struct error *err);
/* NVIDIA's reset: soft 0, hard NVML_MEMORY_LIMIT_NONE (removes the cgroup's limits). */
int nvml_device_reset_memory_limits(nvml_device dev, const char *cgroup_path, struct error *err);
/* Read back (no privilege needed): soft 0 / hard NVML_MEMORY_LIMIT_NONE when none. */
int nvml_device_memory_limits(nvml_device dev, const char *cgroup_path, uint64_t *soft,
                              uint64_t *hard, struct error *err);

/* ---- MIG */
int nvml_device_max_mig_count(nvml_device dev, unsigned *count, struct error *err);
/* -ENOENT for an empty slot. */
int nvml_device_mig_by_index(nvml_device dev, unsigned index, nvml_device *mig, struct error *err);

/* Which variant of its slice count a GPU-instance profile is (NVML encodes it in the
 * profile index: REV1 = media extensions, ALL_ME, GFX, NO_ME); node/mig.c names it. */
enum nvml_gi_variant {
    NVML_GI_VARIANT_PLAIN,
    NVML_GI_VARIANT_ME,
    NVML_GI_VARIANT_ME_ALL,
    NVML_GI_VARIANT_GFX,
    NVML_GI_VARIANT_NO_ME,
};

struct nvml_mig_info {
    unsigned gi_id, ci_id;
    unsigned gi_profile_id, ci_profile_id;
    unsigned gi_slices, ci_slices;   /* from the profile infos */
    uint64_t memory_bytes;           /* attributes memorySizeMB * 2^20 */
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    enum nvml_gi_variant variant;    /* of the GPU-instance profile */
    unsigned placement_start, placement_size; /* the GPU instance's memory slices */
};
/* Everything the profile name and the device record need about one MIG device. */
int nvml_mig_info(nvml_device parent, nvml_device mig, struct nvml_mig_info *info,
                  struct error *err);

/* ---- MIG on demand (DynamicMIG, dra/dra-mig.c). The calls that change the GPU are left
 * out of gpu-smoke's read-only build (they answer -ENOSYS there). */
/* NVML's architecture number (nvmlDeviceArchitecture_t: 7 Ampere, 9 Hopper, 10 Blackwell):
 * MIG mode switches without a GPU reset from Hopper on. */
#define NVML_ARCH_ID_HOPPER 9u
int nvml_device_architecture_id(nvml_device dev, unsigned *arch, struct error *err);

#define NVML_MIG_MAX_PLACEMENTS 8u
struct nvml_placement {
    unsigned start, size;            /* memory slices */
};
/* One GPU-instance profile the GPU accepts, with the compute-instance profile that spans
 * it whole (the only kind DynamicMIG creates) and every placement it may take. */
struct nvml_gi_profile {
    unsigned index, id;              /* NVML_GPU_INSTANCE_PROFILE_* and its info.id */
    unsigned slices, instances;
    uint64_t memory_bytes;           /* memorySizeMB * 2^20 */
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    enum nvml_gi_variant variant;
    unsigned n_placements;
    struct nvml_placement placements[NVML_MIG_MAX_PLACEMENTS];
};
/* The GPU-instance profiles of dev (MIG capable, any mode), in profile-index order; a
 * profile NVML refuses (NOT_SUPPORTED / INVALID_ARGUMENT) is left out, as NVIDIA's driver
 * leaves it out. At most `max`; *n says how many. */
int nvml_device_gi_profiles(nvml_device dev, struct nvml_gi_profile *out, unsigned max,
                            unsigned *n, struct error *err);
/* Pending and current MIG mode; -ENOTSUP: not MIG capable. */
int nvml_device_mig_modes(nvml_device dev, bool *current, bool *pending, struct error *err);
/* Switch MIG mode. -EAGAIN (err says so) when the switch waits for a GPU reset (Ampere). */
int nvml_device_set_mig_mode(nvml_device dev, bool enable, struct error *err);

/* A MIG device that exists: its instances, where it sits and its UUID. */
struct nvml_mig_live {
    unsigned gi_id, ci_id;
    unsigned gi_profile_id;
    struct nvml_placement placement;
    char uuid[96];                   /* "MIG-..."; "" when the GPU instance has no
                                      * compute instance (a half-made device) */
};
/* Create a GPU instance of profile `profile_index` at `placement`, then one compute
 * instance spanning it, and read the new device's UUID. A failure after the GPU instance
 * exists destroys it again, so nothing half-made is left. -EBUSY (NVML's
 * INSUFFICIENT_RESOURCES: a memory slice of the placement is taken) is the expected
 * failure of a placement in use. */
int nvml_mig_create(nvml_device dev, unsigned profile_index, struct nvml_placement placement,
                    struct nvml_mig_live *out, struct error *err);
/* Destroy the MIG device of GPU instance gi_id (its compute instances, then itself), but
 * only if it is `uuid` (NULL or "": any): a device someone else made in its place since
 * is not ours to destroy (-ESTALE). Already gone (or MIG mode off): 0. -EBUSY (IN_USE):
 * processes still run on it. */
int nvml_mig_destroy(nvml_device dev, unsigned gi_id, const char *uuid, struct error *err);
/* The MIG devices of dev that exist now (GPU instances; one with no compute instance is
 * listed with uuid ""). At most `max`. */
int nvml_device_mig_list(nvml_device dev, struct nvml_mig_live *out, unsigned max, unsigned *n,
                         struct error *err);

/* ---- topology */
/* NVML_TOPOLOGY_* level (0 internal .. 50 system). */
int nvml_device_common_ancestor(nvml_device a, nvml_device b, int *level, struct error *err);
/* Remote PCI bus ids (sysfs form, "0000:3b:00.0") of the enabled NVLinks of `dev`,
 * one entry per link, at most `max`. Links answering NOT_SUPPORTED / INVALID_ARGUMENT
 * are skipped (the GPU has fewer links). A remote that is not a GPU of this node is an
 * NVSwitch (or a CPU); the caller decides what that means. */
int nvml_device_nvlink_remotes(nvml_device dev, char (*remotes)[32], unsigned max,
                               unsigned *n, struct error *err);

/* Normalise an NVML bus id ("00000000:3B:00.0") to sysfs form ("0000:3b:00.0").
 * Returns 0 or -EINVAL. */
int nvml_bus_id_normalize(const char *in, char *out, size_t len);

/* ---- events (health) */
#define NVML_EVT_SINGLE_BIT_ECC 0x1ULL
#define NVML_EVT_DOUBLE_BIT_ECC 0x2ULL
#define NVML_EVT_XID_CRITICAL 0x8ULL
#define NVML_EVT_NO_INSTANCE 0xFFFFFFFFu

struct nvml_event {
    /* The device handle the event carries (NULL if none). It stays comparable with the
     * handle that was registered even when the GPU fell off the bus and can no longer
     * be named by UUID. */
    nvml_device device;
    char uuid[96];            /* UUID of the device the event names ("GPU-..."), "" if unknown */
    uint64_t type;            /* NVML_EVT_* */
    uint64_t data;            /* the Xid for XID_CRITICAL */
    unsigned gi_id, ci_id;    /* NVML_EVT_NO_INSTANCE when not attributable */
};

int nvml_event_set_create(nvml_event_set *set, struct error *err);
void nvml_event_set_free(nvml_event_set set);
int nvml_device_supported_events(nvml_device dev, uint64_t *mask, struct error *err);
/* -ENOTSUP: driver too old for events on this device. */
int nvml_device_register_events(nvml_device dev, uint64_t mask, nvml_event_set set,
                                struct error *err);
/* 0 with *ev filled, -ETIMEDOUT when nothing happened, other -errno on failure. */
int nvml_event_wait(nvml_event_set set, unsigned timeout_ms, struct nvml_event *ev,
                    struct error *err);
