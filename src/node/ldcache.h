/* glibc's ld.so.cache, read the way NVIDIA's nvcdi reads it (its internal/ldcache):
 * an optional old-format ("ld.so-1.7.0") prefix skipped, then the new format
 * ("glibc-ld.so.cache" "1.1"): a 48-byte header, nlibs 24-byte entries (flags, key,
 * value, osversion, hwcap; little-endian), key and value offsets relative to the start of
 * the new-format header. Only ELF/libc6 entries ((flags & 0xff) & 1) whose arch
 * (flags & 0xff00) is known are kept: 0x0300 x86-64, 0x0a00 AArch64, 0x0500 ppc64le are
 * 64-bit; 0x0800 x32, 0x0900 ARM hard-float, 0x0000 i386 are 32-bit. An entry whose
 * offsets point outside the data, or at an empty or unterminated string, is skipped.
 *
 * Pure over the bytes (fuzzed: tests/fuzz, target ldcache); the file is read by the
 * caller (it is a file of the driver root, an input we do not trust). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* No cache is this big (a full desktop's is ~100 KiB); a larger file is refused. */
#define LDCACHE_MAX_BYTES (16u << 20)

/* key: the library's name ("libcuda.so.1"); value: its path ("/usr/lib/.../libcuda.so.1");
 * both NUL-terminated, borrowed for the call. Returns 0 to go on, < 0 to stop (returned
 * by ldcache_parse as it is). */
typedef int (*ldcache_entry_fn)(void *userdata, const char *key, const char *value, bool is64);

/* Calls fn for every kept entry, in file order. The number of entries delivered, or
 * -EINVAL with err saying what is wrong (too short, bad magic or version, the entry table
 * past the end), -EFBIG (err set) when len exceeds LDCACHE_MAX_BYTES, or fn's own negative
 * return (err untouched). */
int ldcache_parse(const uint8_t *data, size_t len, ldcache_entry_fn fn, void *userdata,
                  struct error *err);
