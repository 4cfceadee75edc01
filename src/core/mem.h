/* The process's heap policy (mem.c): one malloc arena for every thread, blocks of 16 KiB
 * and more in mappings of their own, a heap that grows by what is asked, and handing the
 * pages freed by startup and reloads back to the kernel. */
#pragma once

/* Every thread allocates from the main arena; large blocks are mapped, not carved from
 * spare heap. Call before the first thread starts. */
void mem_single_arena(void);

/* Return the free heap pages (top and interior) to the kernel: after a state is built,
 * config parsing, NVML discovery and the replaced state have freed most of what they
 * used. */
void mem_release_free(void);
