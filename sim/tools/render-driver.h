/* nvml-sim-render --driver-root: a packaged driver's user-space files for the profile's
 * driver version (render-driver.c). */
#pragma once

#include <stdbool.h>

struct driver_root_opts {
    const char *root;      /* the directory to fill */
    const char *libdir;    /* relative to root: usr/lib/x86_64-linux-gnu, usr/lib64, ... */
    bool host_links;       /* the SONAME and dev symlinks a driver package installs */
    const char *libcuda;   /* the stand-in files copied in */
    const char *libnvidia_ml;
    const char *nvidia_smi;
    const char *mps_control; /* nvidia-cuda-mps-control */
    /* --sim-env NAME=VALUE: the simulator's settings written beside the libraries
     * (sim/nvml/sim-env.h), for what loads them without the test's environment */
    const char **sim_env;
    unsigned n_sim_env;
};

/* Returns 0, or -errno after one line on stderr naming the file and the call. */
int render_driver_root(const char *version, const struct driver_root_opts *o);
