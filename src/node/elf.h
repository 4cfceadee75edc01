/* The one fact the CDI specs need from a driver library's ELF file: its DT_SONAME (the
 * name the dynamic loader looks it up by: libcuda.so.<version> says "libcuda.so.1").
 * ELFCLASS32 and ELFCLASS64, either byte order; the dynamic section found through the
 * section headers (SHT_DYNAMIC, its sh_link string table) or, when those are stripped
 * (e_shoff or e_shnum 0) or hold no SHT_DYNAMIC, the program headers (PT_DYNAMIC,
 * DT_STRTAB mapped through the PT_LOAD segments, bounded by DT_STRSZ or else by the end
 * of that segment). Every offset and size is checked against the data; nothing is
 * trusted. Refused as malformed: more than 4096 section or program headers (PN_XNUM
 * included), a dynamic section without DT_NULL in its first 4096 entries, a SONAME that
 * is empty or whose NUL is neither inside its string table nor in its first 4096 bytes.
 *
 * Pure over the bytes (fuzzed: tests/fuzz, target elf). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* A driver library is a few MiB to ~100 MiB (libcuda 580 is ~90 MiB); only its headers,
 * dynamic section and the SONAME's part of its string table are read, each bounded by
 * this. */
#define ELF_MAX_READ (1u << 20)

/* 1 with out set (NUL-terminated) to the DT_SONAME, 0 when the object has none, -EINVAL
 * (err set) when data is not a well-formed ELF object, -E2BIG (err set) when the SONAME
 * does not fit in outlen (or it has more than one DT_SONAME: -EINVAL, as nvcdi refuses it). */
int elf_soname_buf(const uint8_t *data, size_t len, char *out, size_t outlen, struct error *err);
/* The same for an open file (a regular file, else -EINVAL), with the same answers and
 * messages: reads (pread) only the ELF header, the header table used, the dynamic
 * section and the SONAME's bytes of the string table (at most 4096; the rest of the
 * table is only checked to lie inside the file), each at most ELF_MAX_READ bytes (a
 * larger table: -EINVAL). A read error: its -errno. */
int elf_soname_fd(int fd, char *out, size_t outlen, struct error *err);
