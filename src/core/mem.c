/* The heap policy declared in core/mem.h (docs/benchmarks.md, "Memory").
 *
 * glibc gives each thread that allocates while the main arena is busy an arena of its
 * own: 64 MiB of address space and at least a page or two resident, for the NVML event
 * thread (and NVML's own threads) that allocate a few bytes a minute. One arena costs
 * nothing here: the event loop is the only thread that allocates often.
 *
 * Startup parses the config, discovers the GPUs and (with the real NVML as with the
 * simulator) lets NVML build its tables; the peak is two to three times what stays in use.
 * glibc trims only the top of the heap and only past 128 KiB free, so without a
 * malloc_trim the freed middle stays resident for the life of the process. */

#include <malloc.h>

#include "mem.h"

void mem_single_arena(void)
{
    /* Fails only for an invalid parameter; the default policy is then kept. */
    (void)mallopt(M_ARENA_MAX, 1);
}

void mem_release_free(void)
{
    (void)malloc_trim(0);
}
