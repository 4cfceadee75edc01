/* NVML return codes in the simulator (see sim-errors.h): their English text for
 * nvmlErrorString and the name/number parser used by profiles and the control FIFO. */

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/macro.h"
#include "sim-errors.h"

static const struct {
    nvmlReturn_t code;
    const char *name; /* without the NVML_ERROR_ prefix */
    const char *text;
} codes[] = {
    { NVML_SUCCESS, "SUCCESS", "Success" },
    { NVML_ERROR_UNINITIALIZED, "UNINITIALIZED", "Uninitialized" },
    { NVML_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid Argument" },
    { NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", "Not Supported" },
    { NVML_ERROR_NO_PERMISSION, "NO_PERMISSION", "Insufficient Permissions" },
    { NVML_ERROR_ALREADY_INITIALIZED, "ALREADY_INITIALIZED", "Already Initialized" },
    { NVML_ERROR_NOT_FOUND, "NOT_FOUND", "Not Found" },
    { NVML_ERROR_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE", "Insufficient Size" },
    { NVML_ERROR_INSUFFICIENT_POWER, "INSUFFICIENT_POWER", "Insufficient External Power" },
    { NVML_ERROR_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED", "Driver Not Loaded" },
    { NVML_ERROR_TIMEOUT, "TIMEOUT", "Timeout" },
    { NVML_ERROR_IRQ_ISSUE, "IRQ_ISSUE", "Interrupt request issue" },
    { NVML_ERROR_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found" },
    { NVML_ERROR_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND", "Function Not Found" },
    { NVML_ERROR_CORRUPTED_INFOROM, "CORRUPTED_INFOROM", "Corrupted infoROM" },
    { NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST", "GPU is lost" },
    { NVML_ERROR_RESET_REQUIRED, "RESET_REQUIRED", "GPU requires restart" },
    { NVML_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM", "The operating system has blocked the request" },
    { NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch" },
    { NVML_ERROR_IN_USE, "IN_USE", "In use by another client" },
    { NVML_ERROR_MEMORY, "MEMORY", "Insufficient Memory" },
    { NVML_ERROR_NO_DATA, "NO_DATA", "No data" },
    { NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "VGPU_ECC_NOT_SUPPORTED", "ECC is not supported on this vGPU" },
    { NVML_ERROR_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES", "Insufficient Resources" },
    { NVML_ERROR_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED", "Frequency not supported" },
    { NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH", "Argument version mismatch" },
    { NVML_ERROR_DEPRECATED, "DEPRECATED", "Deprecated" },
    { NVML_ERROR_NOT_READY, "NOT_READY", "Not ready" },
    { NVML_ERROR_GPU_NOT_FOUND, "GPU_NOT_FOUND", "GPU not found" },
    { NVML_ERROR_INVALID_STATE, "INVALID_STATE", "Invalid state" },
    { NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "RESET_TYPE_NOT_SUPPORTED", "Reset type not supported" },
    { NVML_ERROR_UNKNOWN, "UNKNOWN", "Unknown Error" },
};

const char *sim_return_text(nvmlReturn_t r)
{
    for (size_t i = 0; i < ELEMENTSOF(codes); i++)
        if (codes[i].code == r)
            return codes[i].text;
    return "Unknown Error";
}

int sim_parse_return(const char *s, nvmlReturn_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    if (s[0] >= '0' && s[0] <= '9') {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 0);
        if (errno || *end || v > 0xffffffffUL)
            return -EINVAL;
        *ret = (nvmlReturn_t)v;
        return 0;
    }
    if (strncasecmp(s, "NVML_ERROR_", 11) == 0)
        s += 11;
    else if (strncasecmp(s, "NVML_", 5) == 0)
        s += 5;
    for (size_t i = 0; i < ELEMENTSOF(codes); i++)
        if (strcasecmp(codes[i].name, s) == 0) {
            *ret = codes[i].code;
            return 0;
        }
    return -EINVAL;
}
