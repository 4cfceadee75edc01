/* DT_SONAME of an ELF object (see elf.h). One parser serves the buffer and the file: it
 * asks for byte ranges through get(), which checks each range against the object's size
 * and ELF_MAX_READ before it points into the buffer or preads the file, so the two entry
 * points accept and refuse exactly the same objects (the fuzz target checks that they
 * agree). Every value read from the object is at most 64 bits and is compared, never
 * added blindly: `off > size || n > size - off` is the one bounds test. */
#include <elf.h>
#include <sys/stat.h>

#include "elf.h"

/* More section or program headers than any linked object has (libcuda: ~30); the count
 * is a u16, so the cap mostly keeps the loops short on hostile input. */
#define MAX_HEADERS 4096u
/* Dynamic entries examined before DT_NULL (real objects: 30-60). */
#define MAX_DYN 4096u
/* The SONAME is read from its offset on, at most this much: a file name (NAME_MAX 255)
 * fits many times over, and the rest of the string table is never read. */
#define SONAME_WINDOW 4096u

struct obj {
    const uint8_t *data; /* elf_soname_buf: the whole object; NULL for a file */
    int fd;              /* elf_soname_fd: read piecewise */
    uint64_t size;       /* of the data or the file */
    bool is64, msb;
};

/* What the header tables say about the dynamic section and its string table. */
struct dynamic {
    uint64_t off, size;         /* the entries, in the file */
    bool have_str;
    uint64_t str_off, str_size; /* the string table, in the file: sh_link's, or DT_STRTAB's */
};

static uint64_t rd(const struct obj *o, const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = o->msb ? v << 8 | p[i] : v | (uint64_t)p[i] << (8 * i);
    return v;
}

/* A field of an ELF structure, in the object's class and byte order: the offsets and sizes
 * are <elf.h>'s, so no layout is written out by hand. */
#define FIELD(o, p, type, f)                                                          \
    ((o)->is64 ? rd(o, (p) + offsetof(Elf64_##type, f), sizeof(((Elf64_##type *)0)->f)) \
               : rd(o, (p) + offsetof(Elf32_##type, f), sizeof(((Elf32_##type *)0)->f)))
#define SIZE(o, type) ((o)->is64 ? sizeof(Elf64_##type) : sizeof(Elf32_##type))

typedef unsigned long long ull; /* for the messages' %llu */

/* Bytes [off, off + n) of the object; `what` names them in messages. For the buffer a
 * pointer into it, for the file a pread into *buf (freed, then replaced; the caller
 * frees the last one). */
static int get(const struct obj *o, uint64_t off, uint64_t n, const char *what,
               const uint8_t **out, uint8_t **buf, struct error *err)
{
    if (n > ELF_MAX_READ)
        return error_set(err, -EINVAL,
                         "ELF: %s (%llu bytes at offset %llu) is larger than the %u bytes read",
                         what, (ull)n, (ull)off, ELF_MAX_READ);
    if (off > o->size || n > o->size - off)
        return error_set(err, -EINVAL,
                         "ELF: %s (%llu bytes at offset %llu) runs past the end (%llu bytes)",
                         what, (ull)n, (ull)off, (ull)o->size);
    if (o->data) {
        *out = o->data + off;
        return 0;
    }
    free(*buf);
    *buf = xmalloc(n ? n : 1);
    for (uint64_t got = 0; got < n;) {
        ssize_t k = RETRY_EINTR(pread(o->fd, *buf + got, n - got, (off_t)(off + got)));
        if (k < 0)
            return error_set(err, -errno, "ELF: reading %s at offset %llu: %s", what,
                             (ull)(off + got), strerror(errno));
        if (k == 0) /* shorter than fstat said: changed under us */
            return error_set(err, -EINVAL, "ELF: %s at offset %llu: file ends at %llu", what,
                             (ull)off, (ull)(off + got));
        got += (uint64_t)k;
    }
    *out = *buf;
    return 0;
}

/* The SHT_DYNAMIC section and the string table its sh_link names: 1 (*d set), 0 when
 * there is none. */
static int by_sections(const struct obj *o, uint64_t shoff, uint64_t shnum, uint64_t shentsize,
                       struct dynamic *d, struct error *err)
{
    if (shentsize < SIZE(o, Shdr))
        return error_set(err, -EINVAL, "ELF: section header size %llu, less than %zu",
                         (ull)shentsize, SIZE(o, Shdr));
    if (shnum > MAX_HEADERS)
        return error_set(err, -EINVAL, "ELF: %llu section headers, more than the %u examined",
                         (ull)shnum, MAX_HEADERS);
    _cleanup_free_ uint8_t *buf = NULL;
    const uint8_t *sh;
    int r = get(o, shoff, shnum * shentsize, "section header table", &sh, &buf, err);
    if (r < 0)
        return r;
    for (uint64_t i = 0; i < shnum; i++) {
        const uint8_t *s = sh + i * shentsize;
        if (FIELD(o, s, Shdr, sh_type) != SHT_DYNAMIC)
            continue;
        uint64_t link = FIELD(o, s, Shdr, sh_link);
        if (link >= shnum)
            return error_set(err, -EINVAL,
                             "ELF: dynamic section %llu links to section %llu, of %llu",
                             (ull)i, (ull)link, (ull)shnum);
        const uint8_t *l = sh + link * shentsize;
        if (FIELD(o, l, Shdr, sh_type) != SHT_STRTAB)
            return error_set(err, -EINVAL,
                             "ELF: dynamic section %llu links to section %llu, not a string "
                             "table (type %llu)",
                             (ull)i, (ull)link, (ull)FIELD(o, l, Shdr, sh_type));
        *d = (struct dynamic){
            .off = FIELD(o, s, Shdr, sh_offset),
            .size = FIELD(o, s, Shdr, sh_size),
            .have_str = true,
            .str_off = FIELD(o, l, Shdr, sh_offset),
            .str_size = FIELD(o, l, Shdr, sh_size),
        };
        return 1;
    }
    return 0;
}

/* The PT_DYNAMIC segment (its string table comes from DT_STRTAB, later), and the
 * program header table in *ph / *buf for mapping that address: 1, or 0 when none. */
static int by_segments(const struct obj *o, uint64_t phoff, uint64_t phnum, uint64_t phentsize,
                       const uint8_t **ph, uint8_t **buf, struct dynamic *d, struct error *err)
{
    if (phoff == 0 || phnum == 0)
        return 0;
    if (phentsize < SIZE(o, Phdr))
        return error_set(err, -EINVAL, "ELF: program header size %llu, less than %zu",
                         (ull)phentsize, SIZE(o, Phdr));
    /* PN_XNUM (0xffff, the count kept in section 0) lands here too: no object we read
     * has that many segments */
    if (phnum > MAX_HEADERS)
        return error_set(err, -EINVAL, "ELF: %llu program headers, more than the %u examined",
                         (ull)phnum, MAX_HEADERS);
    int r = get(o, phoff, phnum * phentsize, "program header table", ph, buf, err);
    if (r < 0)
        return r;
    for (uint64_t i = 0; i < phnum; i++) {
        const uint8_t *p = *ph + i * phentsize;
        if (FIELD(o, p, Phdr, p_type) != PT_DYNAMIC)
            continue;
        *d = (struct dynamic){ .off = FIELD(o, p, Phdr, p_offset),
                               .size = FIELD(o, p, Phdr, p_filesz) };
        return 1;
    }
    return 0;
}

/* DT_STRTAB's virtual address as a file range: the PT_LOAD segment holding it, and
 * DT_STRSZ (or, without it, the rest of that segment's file image). */
static int map_strtab(const struct obj *o, const uint8_t *ph, uint64_t phnum,
                      uint64_t phentsize, uint64_t addr, bool have_strsz, uint64_t strsz,
                      struct dynamic *d, struct error *err)
{
    for (uint64_t i = 0; i < phnum; i++) {
        const uint8_t *p = ph + i * phentsize;
        if (FIELD(o, p, Phdr, p_type) != PT_LOAD)
            continue;
        uint64_t vaddr = FIELD(o, p, Phdr, p_vaddr), filesz = FIELD(o, p, Phdr, p_filesz);
        if (addr < vaddr || addr - vaddr >= filesz)
            continue;
        uint64_t off = FIELD(o, p, Phdr, p_offset);
        if (off > o->size || filesz > o->size - off)
            return error_set(err, -EINVAL,
                             "ELF: segment %llu (%llu bytes at offset %llu) holding DT_STRTAB "
                             "runs past the end (%llu bytes)",
                             (ull)i, (ull)filesz, (ull)off, (ull)o->size);
        uint64_t left = filesz - (addr - vaddr);
        if (have_strsz && strsz > left)
            return error_set(err, -EINVAL,
                             "ELF: DT_STRSZ %llu runs past segment %llu (%llu bytes left)",
                             (ull)strsz, (ull)i, (ull)left);
        d->have_str = true;
        d->str_off = off + (addr - vaddr);
        d->str_size = have_strsz ? strsz : left;
        return 0;
    }
    return error_set(err, -EINVAL, "ELF: DT_STRTAB 0x%llx is in no PT_LOAD segment", (ull)addr);
}

/* The dynamic entries up to DT_NULL: *soname (its string offset) when there is exactly
 * one DT_SONAME, and DT_STRTAB / DT_STRSZ for the segment path. 1 with a SONAME, 0
 * without. */
static int scan_dynamic(const struct obj *o, const struct dynamic *d, uint64_t *soname,
                        uint64_t *strtab, bool *have_strtab, uint64_t *strsz, bool *have_strsz,
                        struct error *err)
{
    _cleanup_free_ uint8_t *buf = NULL;
    const uint8_t *dyn;
    int r = get(o, d->off, d->size, "dynamic section", &dyn, &buf, err);
    if (r < 0)
        return r;
    uint64_t n = d->size / SIZE(o, Dyn), found = 0;
    *have_strtab = *have_strsz = false;
    for (uint64_t i = 0; i < n; i++) {
        if (i == MAX_DYN)
            return error_set(err, -EINVAL, "ELF: no DT_NULL in the first %u dynamic entries",
                             MAX_DYN);
        const uint8_t *e = dyn + i * SIZE(o, Dyn);
        uint64_t tag = FIELD(o, e, Dyn, d_tag), val = FIELD(o, e, Dyn, d_un);
        if (tag == DT_NULL)
            break;
        if (tag == DT_SONAME) {
            /* which one would the loader use? nvcdi refuses to guess, and so do we */
            if (found++)
                return error_set(err, -EINVAL, "ELF: more than one DT_SONAME (entry %llu)",
                                 (ull)i);
            *soname = val;
        } else if (tag == DT_STRTAB) {
            *strtab = val;
            *have_strtab = true;
        } else if (tag == DT_STRSZ) {
            *strsz = val;
            *have_strsz = true;
        }
    }
    return found ? 1 : 0;
}

/* Copy the string at `off` in the string table into out. */
static int copy_soname(const struct obj *o, const struct dynamic *d, uint64_t off, char *out,
                       size_t outlen, struct error *err)
{
    if (d->str_off > o->size || d->str_size > o->size - d->str_off)
        return error_set(err, -EINVAL,
                         "ELF: string table (%llu bytes at offset %llu) runs past the end "
                         "(%llu bytes)",
                         (ull)d->str_size, (ull)d->str_off, (ull)o->size);
    if (off >= d->str_size)
        return error_set(err, -EINVAL,
                         "ELF: DT_SONAME at %llu is past its string table (%llu bytes)",
                         (ull)off, (ull)d->str_size);
    uint64_t n = u64_min(d->str_size - off, SONAME_WINDOW);
    _cleanup_free_ uint8_t *buf = NULL;
    const uint8_t *s;
    int r = get(o, d->str_off + off, n, "DT_SONAME string", &s, &buf, err);
    if (r < 0)
        return r;
    const uint8_t *nul = memchr(s, 0, (size_t)n);
    if (!nul)
        return error_set(err, -EINVAL, "ELF: DT_SONAME at %llu has no NUL in its %llu bytes",
                         (ull)off, (ull)n);
    size_t len = (size_t)(nul - s);
    if (len == 0)
        return error_set(err, -EINVAL, "ELF: DT_SONAME at %llu is empty", (ull)off);
    if (len >= outlen)
        return error_set(err, -E2BIG, "ELF: DT_SONAME \"%s\" (%zu bytes) does not fit in %zu",
                         (const char *)s, len, outlen);
    memcpy(out, s, len + 1);
    return 1;
}

static int soname(struct obj *o, char *out, size_t outlen, struct error *err)
{
    _cleanup_free_ uint8_t *hbuf = NULL, *phbuf = NULL;
    const uint8_t *h, *ph = NULL;
    if (o->size < EI_NIDENT)
        return error_set(err, -EINVAL, "ELF: not an ELF object (%llu bytes)", (ull)o->size);
    int r = get(o, 0, EI_NIDENT, "identification", &h, &hbuf, err);
    if (r < 0)
        return r;
    if (memcmp(h, ELFMAG, SELFMAG) != 0)
        return error_set(err, -EINVAL, "ELF: not an ELF object (bad magic)");
    if (h[EI_CLASS] != ELFCLASS32 && h[EI_CLASS] != ELFCLASS64)
        return error_set(err, -EINVAL, "ELF: unknown class %u", h[EI_CLASS]);
    if (h[EI_DATA] != ELFDATA2LSB && h[EI_DATA] != ELFDATA2MSB)
        return error_set(err, -EINVAL, "ELF: unknown byte order %u", h[EI_DATA]);
    if (h[EI_VERSION] != EV_CURRENT)
        return error_set(err, -EINVAL, "ELF: unknown version %u", h[EI_VERSION]);
    o->is64 = h[EI_CLASS] == ELFCLASS64;
    o->msb = h[EI_DATA] == ELFDATA2MSB;

    r = get(o, 0, SIZE(o, Ehdr), "header", &h, &hbuf, err);
    if (r < 0)
        return r;
    uint64_t shoff = FIELD(o, h, Ehdr, e_shoff), shnum = FIELD(o, h, Ehdr, e_shnum);
    uint64_t phoff = FIELD(o, h, Ehdr, e_phoff), phnum = FIELD(o, h, Ehdr, e_phnum);
    uint64_t shentsize = FIELD(o, h, Ehdr, e_shentsize);
    uint64_t phentsize = FIELD(o, h, Ehdr, e_phentsize);

    /* Section headers when there are any (they name the string table directly); a
     * stripped object (sstrip, some vendors' libraries) has only the program headers.
     * An object whose sections hold no SHT_DYNAMIC gets the segment path too: there is
     * nothing to lose by looking for PT_DYNAMIC. */
    struct dynamic d = { 0 };
    r = 0;
    if (shoff != 0 && shnum != 0)
        r = by_sections(o, shoff, shnum, shentsize, &d, err);
    if (r == 0)
        r = by_segments(o, phoff, phnum, phentsize, &ph, &phbuf, &d, err);
    if (r <= 0)
        return r; /* an error, or no dynamic section: an executable linked statically */

    uint64_t name = 0, strtab = 0, strsz = 0;
    bool have_strtab, have_strsz;
    r = scan_dynamic(o, &d, &name, &strtab, &have_strtab, &strsz, &have_strsz, err);
    if (r <= 0)
        return r;
    if (!d.have_str) {
        if (!have_strtab)
            return error_set(err, -EINVAL, "ELF: DT_SONAME without DT_STRTAB");
        r = map_strtab(o, ph, phnum, phentsize, strtab, have_strsz, strsz, &d, err);
        if (r < 0)
            return r;
    }
    return copy_soname(o, &d, name, out, outlen, err);
}

int elf_soname_buf(const uint8_t *data, size_t len, char *out, size_t outlen, struct error *err)
{
    struct obj o = { .data = data, .fd = -1, .size = len };
    return soname(&o, out, outlen, err);
}

int elf_soname_fd(int fd, char *out, size_t outlen, struct error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return error_set(err, -errno, "ELF: fstat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return error_set(err, -EINVAL, "ELF: not a regular file");
    struct obj o = { .fd = fd, .size = (uint64_t)st.st_size };
    return soname(&o, out, outlen, err);
}
