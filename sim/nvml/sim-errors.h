/* NVML return codes: English text (nvmlErrorString) and parsing of names/numbers
 * used by profiles, MOCK_NVML_INIT_ERROR and the control FIFO. */
#pragma once

#include "nvml/nvml-abi.h"

const char *sim_return_text(nvmlReturn_t r);
/* "DRIVER_NOT_LOADED", "NVML_ERROR_DRIVER_NOT_LOADED" (any case) or a number. */
int sim_parse_return(const char *s, nvmlReturn_t *ret);
