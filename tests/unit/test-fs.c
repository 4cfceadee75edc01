/* core/fs: mkdir_p. An existing directory is success, its mode untouched; missing
 * parents are made with the mode; a component that is a file fails with -ENOTDIR, at
 * once and after the first missing parent alike; nothing is left behind. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "tests/common/check.h"

int test_failures;

static mode_t mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? st.st_mode & 07777 : (mode_t)-1;
}

int main(void)
{
    const char *base = getenv("TMPDIR");
    char root[4096];
    snprintf(root, sizeof(root), "%s/test-fs.XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(root) != NULL);
    umask(022);

    char a[4200], abc[4200], file[4200], under[4200], deeper[4200];
    snprintf(a, sizeof(a), "%s/a", root);
    snprintf(abc, sizeof(abc), "%s/a/b/c", root);
    snprintf(file, sizeof(file), "%s/f", root);
    snprintf(under, sizeof(under), "%s/f/x", root);
    snprintf(deeper, sizeof(deeper), "%s/a/f2/x/y", root);

    /* missing parents made, with the mode */
    CHECK(mkdir_p(abc, 0750) == 0);
    CHECK(mode_of(abc) == 0750);
    CHECK(mode_of(a) == 0750);
    /* already there: success, the mode left as it was */
    CHECK(mkdir_p(abc, 0700) == 0);
    CHECK(mode_of(abc) == 0750);
    CHECK(mkdir_p(root, 0700) == 0);

    /* a file where a directory should be */
    int fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK(mkdir_p(under, 0755) == -ENOTDIR);
    char f2[4200];
    snprintf(f2, sizeof(f2), "%s/a/f2", root);
    fd = open(f2, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK(mkdir_p(deeper, 0755) == -ENOTDIR);

    unlink(f2);
    unlink(file);
    rmdir(abc);
    snprintf(abc, sizeof(abc), "%s/a/b", root);
    rmdir(abc);
    rmdir(a);
    CHECK(rmdir(root) == 0);
    return test_failures ? 1 : 0;
}
