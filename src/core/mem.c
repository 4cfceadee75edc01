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

#include "loop.h"
#include "mem.h"

/* Quiet is 200 ms without an fd event: a burst's steps (a write, its answer, the watch
 * event) follow each other within milliseconds, and a trim costs a pass over the free
 * chunks and a madvise per free page run, a fraction of a millisecond, once per burst. */
#define MEM_QUIET_MS 200

void mem_single_arena(void)
{
    /* Fails only for an invalid parameter; the default policy is then kept. */
    (void)mallopt(M_ARENA_MAX, 1);
    /* Blocks of 16 KiB and more get their own mapping: the per-connection buffers sized
     * for a whole HTTP/2 frame or TLS record (nghttp2's 16 KiB frame buffer, mbedtls's
     * 16 KiB record buffers, the gRPC read buffer) are then resident only where written
     * instead of zeroed into the heap by calloc, and go back to the kernel with their
     * connection instead of leaving a hole. glibc's default threshold starts at 128 KiB
     * and rises to the largest block ever freed. glibc only maps a block when the heap's
     * free top cannot hold it, and by default every heap extension adds 128 KiB of spare
     * top (M_TOP_PAD): without it the heap grows by what is asked. No block this large
     * is allocated per RPC, and the heap does not grow while serving (docs/benchmarks.md,
     * "Memory": the figures, and strace of 1,200 Allocate calls). */
    (void)mallopt(M_MMAP_THRESHOLD, 16 * 1024);
    (void)mallopt(M_TOP_PAD, 0);
}

void mem_release_free(void)
{
    (void)malloc_trim(0);
}

static void on_quiet(struct loop *l, void *userdata)
{
    (void)l;
    (void)userdata;
    mem_release_free();
}

void mem_release_when_quiet(struct loop *l)
{
    loop_set_quiet(l, MEM_QUIET_MS, on_quiet, NULL);
}
