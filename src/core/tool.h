/* Running an outside program (NVIDIA's tools: nvidia-smi, nvidia-cuda-mps-control) with a
 * bounded time and a bounded output, for the few places that change GPU settings NVML
 * has no public call for. It blocks its caller until the program exits or is killed at
 * the timeout: callers on the event loop say why that is acceptable where they call it. */
#pragma once

#include <stddef.h>

#include "core/error.h"

#define TOOL_OUTPUT_MAX 4096

/* Run argv (argv[0] searched on PATH unless it holds a '/') with envp, input (NULL:
 * none; small, it must fit the pipe) on its stdin; its stdout and stderr together, at
 * most out_size - 1 bytes, in out as one line. Killed past timeout_ms. 0 when it exited
 * 0, else -errno with err naming the tool and what it said: -ENOENT (not found),
 * -ETIMEDOUT, -EIO (a non-zero exit or a signal). */
int tool_run(char *const argv[], char *const envp[], const char *input, unsigned timeout_ms,
             char *out, size_t out_size, struct error *err);
