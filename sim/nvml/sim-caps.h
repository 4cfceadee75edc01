/* The driver's grid of nvidia-caps minors for MIG (/proc/driver/nvidia-caps/mig-minors):
 * 1 is `config`, 2 is `monitor`, then every GPU minor owns 15 GI slots, each one GI entry
 * followed by 8 CI entries. One home for the formula: nvml-sim-render writes the table and
 * the /dev nodes with it, and the libcuda and nvidia-smi stand-ins (sim/cuda/) open
 * /dev/nvidia-caps/nvidia-cap<N> with it, so the three cannot disagree. */
#pragma once

#define SIM_CAP_GIS 15
#define SIM_CAP_CIS 8

static inline unsigned sim_cap_gi_minor(unsigned gpu_minor, unsigned gi)
{
    return 3 + gpu_minor * SIM_CAP_GIS * (1 + SIM_CAP_CIS) + gi * (1 + SIM_CAP_CIS);
}

static inline unsigned sim_cap_ci_minor(unsigned gpu_minor, unsigned gi, unsigned ci)
{
    return sim_cap_gi_minor(gpu_minor, gi) + 1 + ci;
}
