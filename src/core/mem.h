/* The process's heap policy (mem.c): one malloc arena for every thread, blocks of 16 KiB
 * and more in mappings of their own, a heap that grows by what is asked, and handing the
 * pages freed by startup and reloads back to the kernel. */
#pragma once

struct loop;

/* Every thread allocates from the main arena; large blocks are mapped, not carved from
 * spare heap. Call before the first thread starts. */
void mem_single_arena(void);

/* Return the free heap pages (top and interior) to the kernel: after a state is built,
 * config parsing, NVML discovery and the replaced state have freed most of what they
 * used. */
void mem_release_free(void);

/* Release the free heap pages each time loop l has gone quiet after a burst of work.
 * Startup and a publish are not over when their last step returns: the API server's
 * watch echoes every slice written (parsed, kept as a record, the tree freed) and the
 * kubelet registers, both after the trim at convergence, and their freed pages stay
 * resident (~270 KiB of heap for 8 H100s carved by DynamicMIG, docs/benchmarks.md). */
void mem_release_when_quiet(struct loop *l);
