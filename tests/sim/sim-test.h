/* Shared by the tests of the simulated libnvidia-ml.so.1 (test-sim.c: profiles, init,
 * buffers, events, faults, malformed input, exports, render; test-sim-topo.c: MIG and
 * topology). The library is loaded with dlopen exactly like a client would, one case per
 * process (`test-sim <case>`): it keeps its node for the life of the process, so each
 * profile needs a fresh one. */
#pragma once

#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nvml/nvml-abi.h"

extern void *lib;
/* The case's scratch directory (tests/common/scratch.h): removed at exit, FAIL included. */
extern const char *tmpdir;

#define FAIL(...)                                                                     \
    do {                                                                              \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                               \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                          \
        exit(1);                                                                      \
    } while (0)
#define CHECK(c)                                                                      \
    do {                                                                              \
        if (!(c))                                                                     \
            FAIL("check failed: %s", #c);                                             \
    } while (0)
#define RET(expr, want)                                                               \
    do {                                                                              \
        nvmlReturn_t r_ = (expr);                                                     \
        if (r_ != (want))                                                             \
            FAIL("%s returned %d, want %d", #expr, r_, (want));                       \
    } while (0)
#define OK(expr) RET(expr, NVML_SUCCESS)
#define STREQ(a, b)                                                                   \
    do {                                                                              \
        if (strcmp((a), (b)))                                                         \
            FAIL("'%s' != '%s'", (a), (b));                                           \
    } while (0)

void *sym(const char *name);
/* Typed call through dlsym: N(nvmlInit_v2)(). */
#define N(name) ((__typeof__(&name))sym(#name))

/* $base/rel, base an environment variable meson sets (one of 8 rotating buffers). */
char *path_of(const char *base, const char *rel);
/* dlopen the simulator from the build directory into `lib`. */
void load(void);
/* Write text to tmpdir/name; the path (a static buffer). */
const char *write_tmp(const char *name, const char *text);
nvmlDevice_t dev(unsigned i);
/* MIG device i of gpu. */
nvmlDevice_t mig(nvmlDevice_t gpu, unsigned i);

struct sim_case {
    const char *name;
    void (*fn)(void);
};
/* Run the case argv[1] names in a fresh tmpdir; exits non-zero on the first failure. */
int sim_test_main(int argc, char **argv, const struct sim_case *cases, size_t n);
