/* MIG profile tables of the GPUs the simulator knows (A100-40GB, H100-80GB).
 * Figures follow public `nvidia-smi mig -lgip` / `-lcip` listings. */
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
    unsigned max_devices, memory_slices;
    const struct sim_gi_profile *gis;
    unsigned n_gis;
};

/* Table for a device name, or NULL: not MIG capable. */
const struct sim_mig_table *sim_mig_table_for(const char *device_name);
const struct sim_gi_profile *sim_mig_gi_by_index(const struct sim_mig_table *t, unsigned index);
const struct sim_gi_profile *sim_mig_gi_by_id(const struct sim_mig_table *t, unsigned id);
const struct sim_gi_profile *sim_mig_gi_by_name(const struct sim_mig_table *t, const char *name);
/* Compute-instance profile `index` inside a GI of profile `gi`; false if the GI has none. */
bool sim_mig_ci_profile(const struct sim_gi_profile *gi, unsigned index, struct sim_ci_profile *out);
/* Resolve a CI profile name ("1c.2g.10gb", "2g.10gb", "1g.5gb+me") inside `gi`. */
bool sim_mig_ci_by_name(const struct sim_gi_profile *gi, const char *name, struct sim_ci_profile *out);
