/* The simulator's settings (docs/simulator.md, "Environment variables" and "Driver root"):
 * the process's environment, else the settings file of the driver root the library was
 * loaded from. Plain libc, linked into the simulated NVML and the libcuda stand-in.
 *
 * Why a file: a container runtime gives an OCI hook only the environment its spec entry
 * lists (none, for the share hook of a GPU share's CDI spec), so a library the hook loads
 * from a driver root never sees the test's MOCK_* variables. `nvml-sim-render --driver-root
 * DIR --sim-env NAME=VALUE` writes them to SIM_ENV_FILE beside the libraries it copies in;
 * the library finds that file from its own path (dladdr), the way it finds nothing else:
 * the program that loads it passes nothing and cannot tell. */
#pragma once

#define SIM_ENV_FILE "nvml-sim.env" /* in the directory of the loaded library */

/* The value of `name` (a MOCK_* name): the environment's when set there (an empty value
 * included: set is set), else the settings file's, else NULL. The file is read once per
 * process; its lines are "NAME=VALUE", "#" comments and blank lines, names not starting
 * with MOCK_ are ignored. */
const char *sim_env(const char *name);
