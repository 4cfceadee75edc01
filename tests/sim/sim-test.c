/* The simulator tests' shared helpers (sim-test.h). */
#include "sim-test.h"

#include "tests/common/scratch.h"

void *lib;
const char *tmpdir;

void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        FAIL("missing symbol %s", name);
    return p;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        FAIL("%s not set (run through meson test)", name);
    return v;
}

char *path_of(const char *base, const char *rel)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", env(base), rel);
    return p;
}

void load(void)
{
    lib = dlopen(path_of("GDP_BUILD_DIR", "sim/nvml/libnvidia-ml.so.1"), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        FAIL("dlopen: %s", dlerror());
}

const char *write_tmp(const char *name, const char *text)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "we");
    CHECK(f);
    fputs(text, f);
    fclose(f);
    return p;
}

nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d;
    OK(N(nvmlDeviceGetHandleByIndex_v2)(i, &d));
    return d;
}

nvmlDevice_t mig(nvmlDevice_t gpu, unsigned i)
{
    nvmlDevice_t m;
    OK(N(nvmlDeviceGetMigDeviceHandleByIndex)(gpu, i, &m));
    return m;
}

int sim_test_main(int argc, char **argv, const struct sim_case *cases, size_t n)
{
    if (argc != 2)
        FAIL("usage: %s <case>", argv[0]);
    tmpdir = scratch_dir("test-sim-");
    unsetenv("MOCK_NVML_CONTROL");
    unsetenv("MOCK_NVML_INIT_ERROR");
    size_t i;
    for (i = 0; i < n; i++)
        if (!strcmp(argv[1], cases[i].name))
            break;
    if (i == n)
        FAIL("unknown case %s", argv[1]);
    cases[i].fn();
    if (scratch_remove(tmpdir) < 0)
        FAIL("cleanup failed");
    return 0;
}
