/* Tests of the simulated libnvidia-ml.so.1, continued: the per-GPU modes a profile sets,
 * nvmlDeviceGetAddressingMode from addressing_mode (tests/sim/profiles/addressing-modes.yaml)
 * and nvmlDeviceGetVirtualizationMode from virtualization.mode
 * (tests/sim/profiles/virtualization-modes.yaml). sim-test.h has the helpers. */
#include "sim-test.h"

static nvmlReturn_t mode_of(nvmlDevice_t d, unsigned *value)
{
    nvmlDeviceAddressingMode_t m = { .version = nvmlDeviceAddressingMode_v1, .value = 12345 };
    nvmlReturn_t r = N(nvmlDeviceGetAddressingMode)(d, &m);
    *value = m.value;
    return r;
}

static void case_addressing(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "tests/sim/profiles/addressing-modes.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    unsigned v;
    OK(mode_of(dev(0), &v)); /* Hopper without the key: HMM */
    CHECK(v == NVML_DEVICE_ADDRESSING_MODE_HMM);
    OK(mode_of(dev(1), &v));
    CHECK(v == NVML_DEVICE_ADDRESSING_MODE_ATS);
    OK(mode_of(dev(2), &v));
    CHECK(v == NVML_DEVICE_ADDRESSING_MODE_NONE);
    RET(mode_of(dev(3), &v), NVML_ERROR_NOT_SUPPORTED);
    CHECK(v == 12345); /* nothing written */
    OK(mode_of(dev(4), &v)); /* a number passes through */
    CHECK(v == 7);
    RET(mode_of(dev(5), &v), NVML_ERROR_NOT_SUPPORTED); /* Volta without the key */
    /* "None" in any case; the MIG device answers its GPU's mode */
    OK(mode_of(dev(6), &v));
    CHECK(v == NVML_DEVICE_ADDRESSING_MODE_NONE);
    OK(mode_of(mig(dev(6), 0), &v));
    CHECK(v == NVML_DEVICE_ADDRESSING_MODE_NONE);
    /* the version check comes first, also where the answer is NOT_SUPPORTED */
    nvmlDeviceAddressingMode_t old = { .version = 1 };
    RET(N(nvmlDeviceGetAddressingMode)(dev(3), &old), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    RET(N(nvmlDeviceGetAddressingMode)(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

/* NVIDIA's T4 profile says nothing: Turing, the first architecture with the call, answers
 * HMM. */
static void case_addressing_turing(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_TEST_DATA", "nvml-mock-profiles/t4.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    unsigned n = 0, v;
    OK(N(nvmlDeviceGetCount_v2)(&n));
    CHECK(n == 4);
    for (unsigned i = 0; i < n; i++) {
        OK(mode_of(dev(i), &v));
        CHECK(v == NVML_DEVICE_ADDRESSING_MODE_HMM);
    }
    OK(N(nvmlShutdown)());
}

static unsigned virt_of(nvmlDevice_t d)
{
    nvmlGpuVirtualizationMode_t m = 12345;
    OK(N(nvmlDeviceGetVirtualizationMode)(d, &m));
    return (unsigned)m;
}

static void case_virtualization(void)
{
    setenv("MOCK_NVML_CONFIG", path_of("GDP_SOURCE_DIR", "tests/sim/profiles/virtualization-modes.yaml"), 1);
    load();
    OK(N(nvmlInit_v2)());
    CHECK(virt_of(dev(0)) == NVML_GPU_VIRTUALIZATION_MODE_NONE); /* without the key */
    CHECK(virt_of(dev(1)) == NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH);
    CHECK(virt_of(dev(2)) == NVML_GPU_VIRTUALIZATION_MODE_VGPU);
    CHECK(virt_of(dev(3)) == NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU);
    CHECK(virt_of(dev(4)) == NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA);
    CHECK(virt_of(dev(5)) == 9); /* a number passes through */
    CHECK(virt_of(dev(6)) == NVML_GPU_VIRTUALIZATION_MODE_VGPU);
    CHECK(virt_of(mig(dev(6), 0)) == NVML_GPU_VIRTUALIZATION_MODE_VGPU); /* its GPU's */
    RET(N(nvmlDeviceGetVirtualizationMode)(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    OK(N(nvmlShutdown)());
}

/* An unknown name fails init (a case of its own: the library keeps the first profile it
 * read). NVIDIA's own profiles say "none" and load (sim-profile-a100). */
static void case_virtualization_bad(void)
{
    load();
    setenv("MOCK_NVML_CONFIG", write_tmp("bad-virt.yaml", "devices:\n  - {uuid: GPU-1, name: T4, "
                                         "compute_capability: {major: 7},\n     virtualization: "
                                         "{mode: sometimes}}\n"), 1);
    RET(N(nvmlInit_v2)(), NVML_ERROR_UNKNOWN);
}

int main(int argc, char **argv)
{
    static const struct sim_case cases[] = {
        { "addressing", case_addressing },
        { "addressing-turing", case_addressing_turing },
        { "virtualization", case_virtualization },
        { "virtualization-bad", case_virtualization_bad },
    };
    return sim_test_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
