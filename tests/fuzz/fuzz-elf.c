/* Fuzz target: bytes as an ELF object whose DT_SONAME is asked for (src/node/elf.c; the
 * driver libraries are files of the driver root). Both entry points run on every input,
 * elf_soname_buf over the bytes and elf_soname_fd over a memfd holding them, and must
 * agree exactly: result, name and message (they share one parser, but only the buffer
 * path is cheap enough to fuzz alone, and the file path is the one the plugin uses). A
 * small output buffer must give -E2BIG exactly when the name does not fit. The input is
 * copied into a buffer of its exact size (see fuzz-ldcache.c for why).
 * Seeds (tests/fuzz/corpus/elf): a small shared object built with gcc -shared
 * -Wl,-soname and stripped, the same without section headers, cut short, and hand-made
 * 32-bit and big-endian objects. */
#include <stdio.h>
#include <sys/mman.h>

#include "core/error.h"
#include "node/elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = xmalloc(size ? size : 1);
    memcpy(copy, data, size);

    char name[256], name_fd[256], small[8];
    struct error err = { 0 }, err_fd = { 0 };
    int r = elf_soname_buf(copy, size, name, sizeof(name), &err);
    if (r == 1 && (!name[0] || strlen(name) >= sizeof(name)))
        abort();
    if (r < 0 && (err.code != r || !err.msg[0] || strchr(err.msg, '\n')))
        abort();
    if (r != 1 && r != 0 && r != -EINVAL && r != -E2BIG)
        abort();

    int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);
    if (fd < 0)
        abort();
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, copy + off, size - off);
        if (n <= 0)
            abort();
        off += (size_t)n;
    }
    int r_fd = elf_soname_fd(fd, name_fd, sizeof(name_fd), &err_fd);
    close(fd);
    if (r_fd != r || (r == 1 && strcmp(name, name_fd) != 0) ||
        (r < 0 && strcmp(err.msg, err_fd.msg) != 0)) {
        fprintf(stderr, "buffer: %d %s\nfile:   %d %s\n", r, r < 0 ? err.msg : name, r_fd,
                r_fd < 0 ? err_fd.msg : name_fd);
        abort();
    }

    int r_small = elf_soname_buf(copy, size, small, sizeof(small), NULL);
    if (r == 1 ? r_small != (strlen(name) < sizeof(small) ? 1 : -E2BIG) : r_small != r)
        abort();
    if (r_small == 1 && strcmp(small, name) != 0)
        abort();
    free(copy);
    return 0;
}
