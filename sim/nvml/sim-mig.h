/* MIG profile tables of the GPUs the simulator knows (A100-40GB, A100-80GB, A30, H100-80GB,
 * H200, B200). Figures follow public `nvidia-smi mig -lgip` / `-lcip` listings and NVIDIA's
 * MIG user guide; those of the models added later are unverified (see sim-mig.c). */
#pragma once

#include <stdbool.h>

struct sim_gi_profile {
    unsigned index; /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;    /* device-specific profile id (info.id) */
    const char *name; /* "1g.5gb+me" (without the "MIG " prefix) */
    unsigned slices, instances, memory_mb, sms;
    unsigned ce, dec, enc, jpeg, ofa;
    unsigned placement_size; /* in memory slices */
};

struct sim_ci_profile {
    unsigned index; /* NVML_COMPUTE_INSTANCE_PROFILE_*; equals the id */
    unsigned id;
    unsigned slices, instances, sms;
    char name[64]; /* "1c.2g.10gb" or "2g.10gb" */
};

struct sim_mig_table {
    const char *gpu; /* for messages */
    unsigned max_devices; /* compute slices = most MIG devices */
    unsigned memory_slices;
    const struct sim_gi_profile *gis;
    unsigned n_gis;
    unsigned arch; /* NVML_DEVICE_ARCH_* of the model, when the profile names none */
};

/* Table for a device name, or NULL: not MIG capable. */
const struct sim_mig_table *sim_mig_table_for(const char *device_name);
/* Table i (0, 1, ...), NULL past the end: for tests and tools. */
const struct sim_mig_table *sim_mig_table_at(unsigned i);
/* Is {start, placement_size} a valid GI placement of `p` on this model? */
bool sim_mig_placement_ok(const struct sim_mig_table *t, const struct sim_gi_profile *p, unsigned start);
/* The GI id the hardware gives a GI of `p` at `start` (its swizzle id, 0..14). */
unsigned sim_mig_gi_id_for(const struct sim_mig_table *t, const struct sim_gi_profile *p, unsigned start);
/* Is `start` a valid placement of a CI of ci_slices compute slices in a GI of gi_slices? */
bool sim_mig_ci_placement_ok(unsigned gi_slices, unsigned ci_slices, unsigned start);
const struct sim_gi_profile *sim_mig_gi_by_index(const struct sim_mig_table *t, unsigned index);
const struct sim_gi_profile *sim_mig_gi_by_id(const struct sim_mig_table *t, unsigned id);
const struct sim_gi_profile *sim_mig_gi_by_name(const struct sim_mig_table *t, const char *name);
/* Compute-instance profile `index` inside a GI of profile `gi`; false if the GI has none. */
bool sim_mig_ci_profile(const struct sim_gi_profile *gi, unsigned index, struct sim_ci_profile *out);
/* Resolve a CI profile name ("1c.2g.10gb", "2g.10gb", "1g.5gb+me") inside `gi`. */
bool sim_mig_ci_by_name(const struct sim_gi_profile *gi, const char *name, struct sim_ci_profile *out);
