/* node/ldcache and node/elf: the two parsers the CDI specs read driver files with.
 * ldcache: this machine's /etc/ld.so.cache has a 64-bit libc.so.6 that exists; a cache
 * ldconfig writes (new and compat format) over a scratch dir lists the library copied
 * there; hand-made caches show the entry filter (arch, libc5), the skipped entries (an
 * offset past the end, an unterminated or empty string) and the refusals (short, magic,
 * version, a count whose table cannot fit, however large).
 * elf: the real libc says "libc.so.6" from the file and from its bytes, also with its
 * section headers zeroed (the program-header path); /bin/true has no SONAME; cut files
 * are refused; hand-made objects of both classes and byte orders, through both paths,
 * with two DT_SONAME, a small buffer, bad links and oversized tables. */
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"
#include "node/elf.h"
#include "node/ldcache.h"
#include "tests/common/check.h"
#include "tests/common/scratch.h"

int test_failures;

#define LIBDIR "/lib/x86_64-linux-gnu"

/* ---- ld.so.cache ---------------------------------------------------------------- */

struct seen {
    int n;
    char key[16][64], value[16][256];
    bool is64[16];
    int stop_after; /* > 0: return -ECANCELED at that entry */
    /* the real caches: the entry asked for */
    const char *want_key, *want_value;
    bool found64;
    char found_value[4096];
};

static int collect(void *userdata, const char *key, const char *value, bool is64)
{
    struct seen *s = userdata;
    if (s->want_key && strcmp(key, s->want_key) == 0 &&
        (!s->want_value || strcmp(value, s->want_value) == 0) && is64 && !s->found64) {
        s->found64 = true;
        snprintf(s->found_value, sizeof(s->found_value), "%s", value);
    }
    if (s->n < 16) {
        snprintf(s->key[s->n], sizeof(s->key[0]), "%s", key);
        snprintf(s->value[s->n], sizeof(s->value[0]), "%s", value);
        s->is64[s->n] = is64;
    }
    s->n++;
    if (s->stop_after && s->n == s->stop_after)
        return -ECANCELED;
    return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

struct ent {
    uint32_t flags;
    const char *key, *value;
};

/* A cache as glibc lays it out: with nold >= 0 an old-format prefix of nold entries
 * first (padded to 8), then the new header, the entries and the strings. Returns the
 * length; *start gets the new header's offset. */
static size_t build_cache(uint8_t *buf, size_t cap, int nold, const struct ent *e, unsigned n,
                          size_t *start)
{
    size_t pos = 0;
    memset(buf, 0, cap);
    if (nold >= 0) {
        memcpy(buf, "ld.so-1.7.0", 12);
        put32(buf + 12, (uint32_t)nold);
        pos = (16 + 12 * (size_t)nold + 7) / 8 * 8;
    }
    *start = pos;
    uint8_t *h = buf + pos;
    memcpy(h, "glibc-ld.so.cache1.1", 20);
    put32(h + 20, n);
    size_t str = 48 + 24 * (size_t)n, str0 = str;
    for (unsigned i = 0; i < n; i++) {
        uint8_t *x = h + 48 + 24 * i;
        put32(x, e[i].flags);
        put32(x + 4, (uint32_t)str);
        str += (size_t)sprintf((char *)h + str, "%s", e[i].key) + 1;
        put32(x + 8, (uint32_t)str);
        str += (size_t)sprintf((char *)h + str, "%s", e[i].value) + 1;
    }
    put32(h + 24, (uint32_t)(str - str0));
    CHECK(pos + str <= cap);
    return pos + str;
}

/* ldcache_parse over buf fails with `want`, its message one line holding `sub` */
#define EXPECT_CACHE(buf, len, want, sub)                                             \
    do {                                                                              \
        struct error _e = { 0 };                                                      \
        struct seen _w = { 0 };                                                       \
        CHECK(ldcache_parse(buf, len, collect, &_w, &_e) == (want));                  \
        CHECK(_e.code == (want) && _w.n == 0 && !strchr(_e.msg, '\n'));              \
        CHECK_STR_CONTAINS(_e.msg, sub);                                              \
    } while (0)

static void test_ldcache_handmade(void)
{
    static uint8_t buf[4096];
    size_t start, len;
    struct error err = { 0 };
    static const struct ent ents[] = {
        { 0x0303, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1" },  /* x86-64 */
        { 0x0003, "libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1" },    /* i386 */
        { 0x0302, "libold.so.5", "/lib/libold.so.5" },                          /* libc5 */
        { 0x0103, "libsparc.so.1", "/lib64/libsparc.so.1" },                    /* sparc64 */
        { 0x0a01, "libnvidia-ml.so.1", "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1" },
        { 0x0903, "libarm.so.1", "/usr/lib/arm-linux-gnueabihf/libarm.so.1" },
        { 0x0503, "libppc.so.1", "/usr/lib64/libppc.so.1" },
        { 0x0803, "libx32.so.1", "/usr/libx32/libx32.so.1" },
    };
    unsigned n = ELEMENTSOF(ents);

    /* both layouts deliver the same: x86-64, i386 (as 32-bit, so a caller after 64-bit
     * libraries drops it), AArch64, ARM hf, ppc64le, x32; not libc5, not SPARC */
    for (int nold = -1; nold <= 3; nold += 2) {
        len = build_cache(buf, sizeof(buf), nold, ents, n, &start);
        /* 16 + 12 == 28, padded to 32; 16 + 36 == 52, to 56 */
        CHECK(start == (nold < 0 ? 0u : nold == 1 ? 32u : 56u));
        struct seen s = { 0 };
        CHECK(ldcache_parse(buf, len, collect, &s, &err) == 6);
        CHECK(s.n == 6);
        static const int kept[] = { 0, 1, 4, 5, 6, 7 }; /* indexes into ents */
        static const bool is64[] = { true, false, true, false, true, false };
        for (int i = 0; i < 6; i++) {
            CHECK_STR(s.key[i], ents[kept[i]].key);
            CHECK_STR(s.value[i], ents[kept[i]].value);
            CHECK(s.is64[i] == is64[i]);
        }
    }
    struct seen s;

    /* the callback's own error stops the walk and comes back as it is */
    len = build_cache(buf, sizeof(buf), -1, ents, n, &start);
    s = (struct seen){ .stop_after = 2 };
    CHECK(ldcache_parse(buf, len, collect, &s, &err) == -ECANCELED);
    CHECK(s.n == 2);

    /* an offset past the end, at it, far past it, or at a NUL (an empty key): that entry
     * is skipped, the rest kept */
    const uint32_t bad[] = { (uint32_t)len + 100, (uint32_t)len, 0xffffffff, (uint32_t)len - 1 };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        put32(buf + 48 + 4, bad[i]);
        s = (struct seen){ 0 };
        CHECK(ldcache_parse(buf, len, collect, &s, &err) == 5);
        CHECK_STR(s.value[0], "/usr/lib/i386-linux-gnu/libcuda.so.1");
    }

    /* unterminated: the last entry's value runs to the end without its NUL */
    len = build_cache(buf, sizeof(buf), -1, ents, n, &start);
    s = (struct seen){ 0 };
    CHECK(ldcache_parse(buf, len - 1, collect, &s, &err) == 5);
    CHECK(s.n == 5 && strcmp(s.key[4], "libppc.so.1") == 0);

    /* a header cut short: refused, with and without the old prefix */
    for (size_t cut = 0; cut < 48; cut += 47)
        EXPECT_CACHE(buf, cut, -EINVAL, "cut short");
    len = build_cache(buf, sizeof(buf), 1, ents, n, &start);
    EXPECT_CACHE(buf, 14, -EINVAL, "old-format header cut short");
    EXPECT_CACHE(buf, start + 40, -EINVAL, "header cut short (40 of 48 bytes at offset 32)");

    /* bad magic, bad version */
    len = build_cache(buf, sizeof(buf), -1, ents, n, &start);
    buf[3] = 'X';
    EXPECT_CACHE(buf, len, -EINVAL, "bad magic");
    buf[3] = 'b';
    buf[19] = '0';
    EXPECT_CACHE(buf, len, -EINVAL, "version \"1.0\"");
    buf[19] = '1';

    /* counts whose table cannot fit: one too many, and the largest (24 * 2^32 would wrap
     * a 32-bit product) */
    put32(buf + 20, n + (uint32_t)(len - 48 - 24 * n) / 24 + 1);
    EXPECT_CACHE(buf, len, -EINVAL, "runs past the end");
    put32(buf + 20, 0xffffffff);
    EXPECT_CACHE(buf, len, -EINVAL, "entry table (4294967295 entries) runs past the end");
    put32(buf + 20, 0x0aaaaaab); /* * 24 == 2^32 + 8: 8 if the product were 32-bit */
    EXPECT_CACHE(buf, len, -EINVAL, "runs past the end");
    /* an old-format count that puts the new header past the end */
    len = build_cache(buf, sizeof(buf), 1, ents, n, &start);
    put32(buf + 12, 0xffffffff);
    EXPECT_CACHE(buf, len, -EINVAL, "old-format entry table (4294967295 entries)");
    /* no entries at all is a valid, empty cache */
    len = build_cache(buf, sizeof(buf), -1, ents, 0, &start);
    CHECK(ldcache_parse(buf, len, collect, &(struct seen){ 0 }, &err) == 0);
    /* more than the caller would ever read: refused before any byte is looked at */
    EXPECT_CACHE(buf, (size_t)LDCACHE_MAX_BYTES + 1, -EFBIG, "more than the");
}

static int parse_file(const char *path, struct seen *s)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    struct error err = { 0 };
    int r = read_file_bounded(path, LDCACHE_MAX_BYTES, &data, &len, NULL);
    if (r < 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(-r));
        return r;
    }
    r = ldcache_parse((const uint8_t *)data, len, collect, s, &err);
    if (r < 0)
        fprintf(stderr, "%s: %s\n", path, err.msg);
    return r;
}

static void test_ldcache_system(void)
{
    struct seen s = { .want_key = "libc.so.6" };
    CHECK(parse_file("/etc/ld.so.cache", &s) > 0);
    CHECK(s.found64);
    CHECK(s.found_value[0] == '/' && access(s.found_value, F_OK) == 0);
    fprintf(stderr, "/etc/ld.so.cache: %d entries, libc.so.6 -> %s\n", s.n, s.found_value);
}

static int run(char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 2); /* ldconfig's warnings about the system's directories */
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int copy_file(const char *from, const char *to)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = read_file_bounded(from, 64u << 20, &data, &len, NULL);
    return r < 0 ? r : write_file_atomic(to, data, len, 0755, false);
}

/* ldconfig over a scratch directory holding a copy of libz: the cache it writes (in
 * both of its formats) lists the copy under its SONAME, and that copy's DT_SONAME is the
 * cache's key. -X and -i: no links are made and the system's auxiliary cache is not
 * touched, so the test changes nothing outside its directory, even as root. */
static void test_ldcache_ldconfig(const char *root)
{
    const char *ldconfig = access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig"
                                                                 : "/usr/sbin/ldconfig";
    char lib[4200], libdir[4200], conf[4200], cache[4200];
    snprintf(libdir, sizeof(libdir), "%s/lib", root);
    snprintf(lib, sizeof(lib), "%s/lib/libz.so.1", root);
    snprintf(conf, sizeof(conf), "%s/ld.so.conf", root);
    snprintf(cache, sizeof(cache), "%s/ld.so.cache", root);
    CHECK(mkdir(libdir, 0755) == 0);
    CHECK(copy_file(LIBDIR "/libz.so.1", lib) == 0);
    char line[4300];
    int n = snprintf(line, sizeof(line), "%s\n", libdir);
    CHECK(write_file_atomic(conf, line, (size_t)n, 0644, false) == 0);

    for (int compat = 0; compat <= 1; compat++) {
        char *argv[] = { (char *)ldconfig, "-X", "-i", "-c", compat ? "compat" : "new",
                         "-C", cache, "-f", conf, NULL };
        CHECK(run(argv) == 0);
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        CHECK(read_file_bounded(cache, LDCACHE_MAX_BYTES, &data, &len, NULL) == 0);
        CHECK(data && (compat ? memcmp(data, "ld.so-1.7.0", 12) == 0
                              : memcmp(data, "glibc-ld.so.cache", 17) == 0));
        struct seen s = { .want_key = "libz.so.1", .want_value = lib };
        CHECK(parse_file(cache, &s) > 0);
        CHECK(s.found64);
        CHECK(unlink(cache) == 0);
    }

    char name[256];
    struct error err = { 0 };
    int fd = open(lib, O_RDONLY | O_CLOEXEC);
    CHECK(elf_soname_fd(fd, name, sizeof(name), &err) == 1);
    CHECK_STR(name, "libz.so.1");
    close(fd);
}

/* ---- ELF -------------------------------------------------------------------------- */

static void put(uint8_t *p, size_t n, bool msb, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        p[msb ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

#define PUT(m, p, type, f, v)                                                         \
    ((m)->is64 ? put((p) + offsetof(Elf64_##type, f), sizeof(((Elf64_##type *)0)->f),  \
                     (m)->msb, v)                                                     \
               : put((p) + offsetof(Elf32_##type, f), sizeof(((Elf32_##type *)0)->f),  \
                     (m)->msb, v))
#define SZ(m, type) ((m)->is64 ? sizeof(Elf64_##type) : sizeof(Elf32_##type))

struct mk {
    bool is64, msb;
    int nsoname; /* DT_SONAME entries */
};

enum { PHOFF = 64, DYNOFF = 192, STROFF = 288, SHOFF = 352, ELF_LEN = 544 };
#define VBASE 0x400000u
static const char strtab[] = "\0libdemo.so.7\0libother.so.1";

/* A minimal shared object: two program headers (a PT_LOAD over the whole file, the
 * PT_DYNAMIC), three section headers (null, .dynamic, .dynstr), the dynamic entries
 * and the strings, in the class and byte order asked for. */
static size_t make_elf(uint8_t *b, const struct mk *m)
{
    memset(b, 0, ELF_LEN);
    memcpy(b, ELFMAG, SELFMAG);
    b[EI_CLASS] = m->is64 ? ELFCLASS64 : ELFCLASS32;
    b[EI_DATA] = m->msb ? ELFDATA2MSB : ELFDATA2LSB;
    b[EI_VERSION] = EV_CURRENT;
    PUT(m, b, Ehdr, e_type, ET_DYN);
    PUT(m, b, Ehdr, e_version, EV_CURRENT);
    PUT(m, b, Ehdr, e_phoff, PHOFF);
    PUT(m, b, Ehdr, e_shoff, SHOFF);
    PUT(m, b, Ehdr, e_ehsize, SZ(m, Ehdr));
    PUT(m, b, Ehdr, e_phentsize, SZ(m, Phdr));
    PUT(m, b, Ehdr, e_phnum, 2);
    PUT(m, b, Ehdr, e_shentsize, SZ(m, Shdr));
    PUT(m, b, Ehdr, e_shnum, 3);

    /* dynamic entries: the SONAMEs ("libdemo.so.7", then "libother.so.1"), then
     * DT_STRTAB, DT_STRSZ, DT_NULL */
    uint8_t *d = b + DYNOFF;
    size_t dsz = SZ(m, Dyn), nd = 0;
    for (int i = 0; i < m->nsoname; i++, nd++) {
        PUT(m, d + nd * dsz, Dyn, d_tag, DT_SONAME);
        PUT(m, d + nd * dsz, Dyn, d_un, i == 0 ? 1 : 14);
    }
    PUT(m, d + nd * dsz, Dyn, d_tag, DT_STRTAB);
    PUT(m, d + nd++ * dsz, Dyn, d_un, VBASE + STROFF);
    PUT(m, d + nd * dsz, Dyn, d_tag, DT_STRSZ);
    PUT(m, d + nd++ * dsz, Dyn, d_un, sizeof(strtab));
    nd++; /* DT_NULL */
    memcpy(b + STROFF, strtab, sizeof(strtab));

    uint8_t *p = b + PHOFF;
    PUT(m, p, Phdr, p_type, PT_LOAD);
    PUT(m, p, Phdr, p_vaddr, VBASE);
    PUT(m, p, Phdr, p_filesz, ELF_LEN);
    PUT(m, p, Phdr, p_memsz, ELF_LEN);
    p += SZ(m, Phdr);
    PUT(m, p, Phdr, p_type, PT_DYNAMIC);
    PUT(m, p, Phdr, p_offset, DYNOFF);
    PUT(m, p, Phdr, p_vaddr, VBASE + DYNOFF);
    PUT(m, p, Phdr, p_filesz, nd * dsz);

    uint8_t *s = b + SHOFF + SZ(m, Shdr);
    PUT(m, s, Shdr, sh_type, SHT_DYNAMIC);
    PUT(m, s, Shdr, sh_offset, DYNOFF);
    PUT(m, s, Shdr, sh_size, nd * dsz);
    PUT(m, s, Shdr, sh_link, 2);
    s += SZ(m, Shdr);
    PUT(m, s, Shdr, sh_type, SHT_STRTAB);
    PUT(m, s, Shdr, sh_offset, STROFF);
    PUT(m, s, Shdr, sh_size, sizeof(strtab));
    return ELF_LEN;
}

static void no_sections(uint8_t *b, const struct mk *m)
{
    PUT(m, b, Ehdr, e_shoff, 0);
    PUT(m, b, Ehdr, e_shnum, 0);
}

static int soname_of(const uint8_t *b, size_t len, char *out, size_t outlen, struct error *err)
{
    *err = (struct error){ 0 };
    out[0] = 0;
    return elf_soname_buf(b, len, out, outlen, err);
}

/* elf_soname_buf over b fails with `want`, its message holding `sub` */
#define EXPECT_ELF(b, len, want, sub)                                                 \
    do {                                                                              \
        char _n[64];                                                                  \
        struct error _e;                                                              \
        CHECK(soname_of(b, len, _n, sizeof(_n), &_e) == (want));                      \
        CHECK_STR_CONTAINS(_e.msg, sub);                                              \
    } while (0)

static void test_elf_handmade(void)
{
    static uint8_t b[ELF_LEN];
    char name[64];
    struct error err;
    for (int cls = 0; cls < 2; cls++)
        for (int msb = 0; msb < 2; msb++) {
            struct mk m = { .is64 = cls, .msb = msb, .nsoname = 1 };
            fprintf(stderr, "hand-made ELF: %d-bit %s\n", cls ? 64 : 32, msb ? "MSB" : "LSB");
            size_t len = make_elf(b, &m);
            /* section headers; program headers only */
            for (int path = 0; path < 2; path++, no_sections(b, &m)) {
                CHECK(soname_of(b, len, name, sizeof(name), &err) == 1);
                CHECK_STR(name, "libdemo.so.7");
            }
            /* just fits; one byte short */
            CHECK(soname_of(b, len, name, 13, &err) == 1);
            CHECK(soname_of(b, len, name, 12, &err) == -E2BIG && err.code == -E2BIG);
            /* no DT_SONAME: 0; two: refused; on both paths */
            for (m.nsoname = 0; m.nsoname <= 2; m.nsoname += 2) {
                len = make_elf(b, &m);
                for (int path = 0; path < 2; path++, no_sections(b, &m)) {
                    if (m.nsoname == 0)
                        CHECK(soname_of(b, len, name, sizeof(name), &err) == 0);
                    else /* two: refused */
                        EXPECT_ELF(b, len, -EINVAL, "more than one DT_SONAME");
                }
            }

            m.nsoname = 1;
            len = make_elf(b, &m);
            uint8_t *dyn_sh = b + SHOFF + SZ(&m, Shdr), *str_sh = dyn_sh + SZ(&m, Shdr);
            uint8_t *load = b + PHOFF, *dyn = b + DYNOFF;
            /* .dynamic linked to a section that is not there, or not a string table */
            PUT(&m, dyn_sh, Shdr, sh_link, 3);
            EXPECT_ELF(b, len, -EINVAL, "links to section 3, of 3");
            PUT(&m, dyn_sh, Shdr, sh_link, 1);
            EXPECT_ELF(b, len, -EINVAL, "not a string table");
            PUT(&m, dyn_sh, Shdr, sh_link, 2);
            /* the SONAME's offset past its table; its string unterminated in the table */
            PUT(&m, dyn, Dyn, d_un, sizeof(strtab));
            EXPECT_ELF(b, len, -EINVAL, "past its string table");
            PUT(&m, dyn, Dyn, d_un, 1);
            PUT(&m, str_sh, Shdr, sh_size, 5);
            EXPECT_ELF(b, len, -EINVAL, "no NUL");
            /* an empty SONAME */
            PUT(&m, dyn, Dyn, d_un, 0);
            EXPECT_ELF(b, len, -EINVAL, "empty");
            /* the string table past the end of the file; a huge one */
            len = make_elf(b, &m);
            PUT(&m, str_sh, Shdr, sh_offset, ELF_LEN - 4);
            EXPECT_ELF(b, len, -EINVAL, "string table (28 bytes at offset 540) runs past the end");
            /* offsets whose sum with the size wraps 64 bits */
            if (m.is64) {
                len = make_elf(b, &m);
                PUT(&m, dyn_sh, Shdr, sh_offset, UINT64_MAX - 7);
                EXPECT_ELF(b, len, -EINVAL, "dynamic section (64 bytes at offset "
                                            "18446744073709551608) runs past the end");
                len = make_elf(b, &m);
                PUT(&m, str_sh, Shdr, sh_offset, UINT64_MAX - 3);
                EXPECT_ELF(b, len, -EINVAL, "string table (28 bytes at offset");
                no_sections(b, &m);
                PUT(&m, load, Phdr, p_offset, UINT64_MAX - 100);
                EXPECT_ELF(b, len, -EINVAL, "holding DT_STRTAB runs past the end");
            }
            /* the dynamic section larger than what is read */
            len = make_elf(b, &m);
            PUT(&m, dyn_sh, Shdr, sh_size, 2u << 20);
            EXPECT_ELF(b, len, -EINVAL, "dynamic section (2097152 bytes at offset 192) is "
                                        "larger than the 1048576 bytes read");
            /* section headers: too small an entry, too many, a table past the end */
            len = make_elf(b, &m);
            PUT(&m, b, Ehdr, e_shentsize, SZ(&m, Shdr) - 1);
            EXPECT_ELF(b, len, -EINVAL, "section header size");
            PUT(&m, b, Ehdr, e_shentsize, SZ(&m, Shdr));
            PUT(&m, b, Ehdr, e_shnum, 0xffff);
            EXPECT_ELF(b, len, -EINVAL, "65535 section headers");
            PUT(&m, b, Ehdr, e_shnum, 6);
            EXPECT_ELF(b, len, -EINVAL, "section header table");

            /* program headers only: DT_STRTAB in no PT_LOAD; DT_STRSZ past its segment;
             * no DT_STRSZ: bounded by the segment; PN_XNUM */
            len = make_elf(b, &m);
            no_sections(b, &m);
            PUT(&m, load, Phdr, p_vaddr, 0x800000);
            EXPECT_ELF(b, len, -EINVAL, "in no PT_LOAD segment");
            PUT(&m, load, Phdr, p_vaddr, VBASE);
            PUT(&m, load, Phdr, p_filesz, STROFF + 4);
            EXPECT_ELF(b, len, -EINVAL, "DT_STRSZ");
            PUT(&m, load, Phdr, p_filesz, ELF_LEN + 1);
            EXPECT_ELF(b, len, -EINVAL, "holding DT_STRTAB runs past the end");
            PUT(&m, load, Phdr, p_filesz, ELF_LEN);
            PUT(&m, dyn + 2 * SZ(&m, Dyn), Dyn, d_tag, DT_NULL); /* DT_STRSZ gone */
            CHECK(soname_of(b, len, name, sizeof(name), &err) == 1);
            CHECK_STR(name, "libdemo.so.7");
            PUT(&m, dyn + SZ(&m, Dyn), Dyn, d_tag, DT_NULL); /* DT_STRTAB gone */
            EXPECT_ELF(b, len, -EINVAL, "without DT_STRTAB");
            PUT(&m, b, Ehdr, e_phnum, PN_XNUM);
            EXPECT_ELF(b, len, -EINVAL, "65535 program headers");
            /* neither table: no dynamic section, no SONAME */
            PUT(&m, b, Ehdr, e_phnum, 0);
            CHECK(soname_of(b, len, name, sizeof(name), &err) == 0);

            /* every prefix of the object up to the end of its section header table:
             * refused (a table runs past the end), never read past it */
            len = make_elf(b, &m);
            for (size_t cut = 0; cut < SHOFF + 3 * SZ(&m, Shdr); cut++) {
                _cleanup_free_ uint8_t *copy = xmalloc(cut + 1);
                memcpy(copy, b, cut);
                CHECK(soname_of(copy, cut, name, sizeof(name), &err) == -EINVAL);
            }
        }
    /* not ELF; an unknown class or byte order */
    struct mk m = { .is64 = true, .nsoname = 1 };
    size_t len = make_elf(b, &m);
    b[EI_CLASS] = 3;
    EXPECT_ELF(b, len, -EINVAL, "unknown class 3");
    b[EI_CLASS] = ELFCLASS64;
    b[EI_DATA] = 0;
    EXPECT_ELF(b, len, -EINVAL, "unknown byte order 0");
    b[0] = 'x';
    EXPECT_ELF(b, len, -EINVAL, "bad magic");
    EXPECT_ELF(b, 0, -EINVAL, "not an ELF object (0 bytes)");
}

static int soname_file(const char *path, char *out, size_t outlen, struct error *err)
{
    *err = (struct error){ 0 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = elf_soname_fd(fd, out, outlen, err);
    close(fd);
    return r;
}

static void test_elf_real(const char *root)
{
    char name[256], path[4200];
    struct error err;
    CHECK(soname_file(LIBDIR "/libc.so.6", name, sizeof(name), &err) == 1);
    CHECK_STR(name, "libc.so.6");
    CHECK(soname_file("/bin/true", name, sizeof(name), &err) == 0);
    CHECK(soname_file("/dev/null", name, sizeof(name), &err) == -EINVAL);

    _cleanup_free_ char *libc = NULL;
    size_t len = 0;
    CHECK(read_file_bounded(LIBDIR "/libc.so.6", 64u << 20, &libc, &len, NULL) == 0);
    if (!libc)
        return;
    uint8_t *b = (uint8_t *)libc;
    CHECK(soname_of(b, len, name, sizeof(name), &err) == 1);
    CHECK_STR(name, "libc.so.6");
    /* stripped of its section headers (as sstrip leaves it): the program-header path */
    memset(b + offsetof(Elf64_Ehdr, e_shoff), 0, 8);
    memset(b + offsetof(Elf64_Ehdr, e_shnum), 0, 2);
    CHECK(soname_of(b, len, name, sizeof(name), &err) == 1);
    CHECK_STR(name, "libc.so.6");
    snprintf(path, sizeof(path), "%s/libc-sstripped.so", root);
    CHECK(write_file_atomic(path, b, len, 0644, false) == 0);
    CHECK(soname_file(path, name, sizeof(name), &err) == 1);
    CHECK_STR(name, "libc.so.6");
    CHECK(soname_file(path, name, 9, &err) == -E2BIG);

    /* cut short: the tables run past the end */
    free(TAKE_PTR(libc));
    CHECK(read_file_bounded(LIBDIR "/libc.so.6", 64u << 20, &libc, &len, NULL) == 0);
    static const size_t cuts[] = { 0, 10, 63, 64, 1000, 100000 };
    snprintf(path, sizeof(path), "%s/libc-cut.so", root);
    for (size_t i = 0; libc && i < ELEMENTSOF(cuts); i++) {
        CHECK(write_file_atomic(path, libc, cuts[i], 0644, false) == 0);
        CHECK(soname_file(path, name, sizeof(name), &err) == -EINVAL);
        CHECK(err.code == -EINVAL && err.msg[0] && !strchr(err.msg, '\n'));
        fprintf(stderr, "libc cut at %zu: %s\n", cuts[i], err.msg);
    }
    free(TAKE_PTR(libc));
    CHECK(unlink(path) == 0);
    /* /bin/true without its section headers: still no SONAME */
    CHECK(read_file_bounded("/bin/true", 64u << 20, &libc, &len, NULL) == 0);
    if (libc) {
        memset(libc + offsetof(Elf64_Ehdr, e_shoff), 0, 8);
        memset(libc + offsetof(Elf64_Ehdr, e_shnum), 0, 2);
        CHECK(soname_of((uint8_t *)libc, len, name, sizeof(name), &err) == 0);
    }
}

int main(void)
{
    const char *root = scratch_dir("test-driver-parsers-");
    test_ldcache_handmade();
    test_ldcache_system();
    test_ldcache_ldconfig(root);
    test_elf_handmade();
    test_elf_real(root);
    CHECK(scratch_remove(root) == 0);
    return test_failures ? 1 : 0;
}
