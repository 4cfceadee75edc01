/* Running an outside program (NVIDIA's tools: nvidia-smi, nvidia-cuda-mps-control) with a
 * bounded time and a bounded output, for the few places that change GPU settings NVML
 * has no public call for.
 *
 * tool_start runs it on the event loop: its output pipe (non-blocking) and a pidfd of the
 * process are watched, a timer kills it (SIGKILL) at the timeout, and it is always reaped
 * before its run is freed: no zombie, no fd left behind. tool_run is the same on a private
 * loop, blocking its caller, for callers with nothing else to serve meanwhile.
 *
 * Without pidfd_open (Linux < 5.3, or a seccomp profile refusing it) the end of the
 * process is seen by its output pipe's end, then looked for every TOOL_REAP_POLL_MS until
 * its deadline: the only polling here, and only on kernels that cannot say it. */
#pragma once

#include <stddef.h>

#include "core/error.h"

#define TOOL_OUTPUT_MAX 4096
#define TOOL_REAP_POLL_MS 10

struct loop;
struct tool_run;

/* Called once, from the loop, when the tool is done: r is 0 when it exited 0, else -errno
 * with err naming the tool and what it said: -ETIMEDOUT (killed at the timeout), -EIO (a
 * non-zero exit or a signal). out: its stdout and stderr together as one line, at most
 * TOOL_OUTPUT_MAX - 1 bytes, valid during the call. The run is freed when done returns. */
typedef void (*tool_done_fn)(void *userdata, int r, const char *out, const struct error *err);

/* Start argv (argv[0] searched on PATH unless it holds a '/') with envp, input (NULL:
 * none; small, it must fit the pipe) on its stdin, killed past timeout_ms. Loop-only.
 * Returns the run (done is called later from the loop, never from inside this function),
 * or NULL with err set when it could not start: -ENOENT (not found), or what pipe2 or
 * posix_spawn said. */
struct tool_run *tool_start(struct loop *l, char *const argv[], char *const envp[],
                            const char *input, unsigned timeout_ms, tool_done_fn done,
                            void *userdata, struct error *err);

/* Kill (SIGKILL) and reap a run in flight; done is not called. NULL is ignored. Not from
 * inside its done. */
void tool_cancel(struct tool_run *t);

/* tool_start on a private loop, waited for: 0 or -errno with err as for done (and the
 * start's errors); the output in out (at most out_size - 1 bytes). Blocks the caller until
 * the program exits or is killed: only for callers with no loop of their own to serve. */
int tool_run(char *const argv[], char *const envp[], const char *input, unsigned timeout_ms,
             char *out, size_t out_size, struct error *err);
