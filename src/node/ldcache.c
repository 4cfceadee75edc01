/* glibc's ld.so.cache (see ldcache.h), parsed the way nvcdi's internal/ldcache reads it.
 * The layout is glibc's elf/cache.c and sysdeps/generic/ldconfig.h. Every count and
 * offset comes from the file, so all arithmetic is done in uint64_t on values that are
 * at most 32 bits wide (no sum or product can wrap) and compared with the length before
 * anything is read. */
#include "ldcache.h"

/* The old format (libc5 days, still written by `ldconfig -c compat`): the magic with its
 * NUL, a u32 count, then count 12-byte entries (flags, key, value) we do not read. */
#define OLD_MAGIC "ld.so-1.7.0"
#define OLD_HEADER 16u          /* sizeof(OLD_MAGIC) == 12, + u32 nlibs */
#define OLD_ENTRY 12u
/* The new format: magic and version without NULs, nlibs, the string table's length, then
 * 20 bytes (flags, extension offset, unused) that nvcdi does not read either. */
#define NEW_MAGIC "glibc-ld.so.cache"
#define NEW_VERSION "1.1"
#define NEW_HEADER 48u
#define NEW_ENTRY 24u
/* glibc aligns the new header in a compat file to its own alignment (uint64_t hwcap). */
#define NEW_ALIGN 8u

/* ldconfig.h's flags: the low byte the library type, the next one its architecture. */
#define FLAG_TYPE_MASK 0x00ff
#define FLAG_ELF 0x0001         /* FLAG_ELF and FLAG_ELF_LIBC6 (3); not FLAG_ELF_LIBC5 (2) */
#define FLAG_ARCH_MASK 0xff00

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Whether an entry is kept, and its word size: nvcdi's list of architectures. Anything
 * else (SPARC, S390, MIPS, RISC-V, a future one) is not a library we can mount. */
static bool arch_known(uint32_t flags, bool *is64)
{
    switch (flags & FLAG_ARCH_MASK) {
    case 0x0300: /* x86-64 */
    case 0x0a00: /* AArch64 */
    case 0x0500: /* ppc64le */
        *is64 = true;
        return true;
    case 0x0800: /* x32 */
    case 0x0900: /* ARM hard-float */
    case 0x0000: /* i386 */
        *is64 = false;
        return true;
    default:
        return false;
    }
}

/* The NUL-terminated, non-empty string at `off` in base[0..len), or NULL. */
static const char *string_at(const uint8_t *base, size_t len, uint32_t off)
{
    if (off >= len || base[off] == 0)
        return NULL;
    return memchr(base + off, 0, len - off) ? (const char *)base + off : NULL;
}

int ldcache_parse(const uint8_t *data, size_t len, ldcache_entry_fn fn, void *userdata,
                  struct error *err)
{
    /* The caller reads at most this much; refusing more here keeps the entry count (at
     * most len / 24) far inside the int we return. */
    if (len > LDCACHE_MAX_BYTES)
        return error_set(err, -EFBIG, "ld.so.cache: %zu bytes, more than the %u accepted", len,
                         LDCACHE_MAX_BYTES);

    uint64_t start = 0;
    if (len >= sizeof(OLD_MAGIC) && memcmp(data, OLD_MAGIC, sizeof(OLD_MAGIC)) == 0) {
        if (len < OLD_HEADER)
            return error_set(err, -EINVAL,
                             "ld.so.cache: old-format header cut short (%zu of %u bytes)", len,
                             OLD_HEADER);
        uint32_t nold = le32(data + sizeof(OLD_MAGIC));
        start = OLD_HEADER + (uint64_t)nold * OLD_ENTRY;
        start = (start + NEW_ALIGN - 1) / NEW_ALIGN * NEW_ALIGN;
        if (start > len)
            return error_set(err, -EINVAL,
                             "ld.so.cache: old-format entry table (%u entries) runs past the "
                             "end (%zu bytes)",
                             nold, len);
    }

    /* From here on every offset is relative to the new header, as the file's are. */
    const uint8_t *base = data + start;
    size_t blen = len - (size_t)start;
    if (blen < NEW_HEADER)
        return error_set(err, -EINVAL,
                         "ld.so.cache: header cut short (%zu of %u bytes at offset %llu)", blen,
                         NEW_HEADER, (unsigned long long)start);
    if (memcmp(base, NEW_MAGIC, strlen(NEW_MAGIC)) != 0)
        return error_set(err, -EINVAL,
                         "ld.so.cache: bad magic at offset %llu (not \"" NEW_MAGIC "\")",
                         (unsigned long long)start);
    if (memcmp(base + strlen(NEW_MAGIC), NEW_VERSION, strlen(NEW_VERSION)) != 0)
        return error_set(err, -EINVAL, "ld.so.cache: version \"%.3s\", not \"" NEW_VERSION "\"",
                         (const char *)base + strlen(NEW_MAGIC));

    uint32_t nlibs = le32(base + 20);
    /* u32 * 24 + 48 < 2^38: no wrap in 64 bits, whatever nlibs says */
    if (NEW_HEADER + (uint64_t)nlibs * NEW_ENTRY > blen)
        return error_set(err, -EINVAL,
                         "ld.so.cache: entry table (%u entries) runs past the end (%zu bytes)",
                         nlibs, len);

    int kept = 0;
    for (uint32_t i = 0; i < nlibs; i++) {
        const uint8_t *e = base + NEW_HEADER + (size_t)i * NEW_ENTRY;
        uint32_t flags = le32(e); /* an i32 in the file; only its low 16 bits matter */
        bool is64;
        if (!((flags & FLAG_TYPE_MASK) & FLAG_ELF) || !arch_known(flags, &is64))
            continue;
        /* Unusable entries are skipped, not fatal: nvcdi does the same, and one bad
         * entry should not hide every driver library from the plugin. */
        const char *key = string_at(base, blen, le32(e + 4));
        const char *value = string_at(base, blen, le32(e + 8));
        if (!key || !value)
            continue;
        int r = fn(userdata, key, value, is64);
        if (r < 0)
            return r;
        kept++;
    }
    return kept;
}
