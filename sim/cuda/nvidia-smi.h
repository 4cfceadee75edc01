/* nvidia-smi stand-in: the settings (nvidia-smi-set.c). Each returns the exit status. */
#pragma once

#define SMI_RECORD_ENV "MOCK_NVIDIA_SMI_LOG"

/* `[-i ids] -c mode`: ids NULL for every GPU; mode a name or 0..3. */
int smi_compute_mode(const char *ids, const char *mode);
/* `compute-policy [-i ids] --set-timeslice value` (recording mode only). */
int smi_timeslice(const char *ids, const char *value);
