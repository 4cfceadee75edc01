/* core/fs: mkdir_p. An existing directory is success, its mode untouched; missing
 * parents are made with the mode; a component that is a file fails with -ENOTDIR, at
 * once and after the first missing parent alike; nothing is left behind.
 * fs_stage: the file appears only at the commit, whole, with the mode, over an old one;
 * until then only a hidden temporary file is there, and an abort or a failed commit
 * leaves neither it nor a changed file; a zeroed stage is closed. Reading a file that is
 * not a regular one, or through a symlink; moving a file aside.
 * fs_write_exchange (DRA's checkpoint, formerly its own copy): the first write renames
 * the spare in, later ones trade names (the spare holds the version before, the inode
 * of path is the spare's: nothing created), a shorter text truncates, the mode is exact;
 * a FIFO or a symlink at either name is moved aside, told to the owner, and the write
 * goes on. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Entries of dir other than . and .. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return d ? n : -1;
}

static char *slurp(const char *path)
{
    static char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n >= 0 ? buf : NULL;
}

static void test_stage(const char *root)
{
    char dir[4200], path[4200], missing[4200];
    snprintf(dir, sizeof(dir), "%s/s", root);
    snprintf(path, sizeof(path), "%s/s/spec.yaml", root);
    snprintf(missing, sizeof(missing), "%s/s/no/spec.yaml", root);
    CHECK(mkdir(dir, 0755) == 0);

    struct fs_stage st = { 0 };
    int fd0 = fcntl(0, F_GETFD);
    fs_stage_abort(&st); /* closed: nothing, and fd 0 untouched */
    CHECK(fcntl(0, F_GETFD) == fd0);
    CHECK(fs_stage_commit(&st, "x", 1, 0644, false) == -EBADF);

    /* staged: a hidden file only; committed: the file, whole, with the mode */
    CHECK(fs_stage_open(&st, path) == 0);
    CHECK(entries(dir) == 1 && access(path, F_OK) < 0);
    CHECK(st.tmp && strncmp(st.tmp, dir, strlen(dir)) == 0 && st.tmp[strlen(dir) + 1] == '.');
    CHECK(fs_stage_commit(&st, "one\n", 4, 0640, false) == 0);
    CHECK(st.tmp == NULL && entries(dir) == 1);
    CHECK(slurp(path) && strcmp(slurp(path), "one\n") == 0);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 07777) == 0640);

    /* over the old file, synced; an abort after it does nothing */
    CHECK(fs_stage_open(&st, path) == 0 && entries(dir) == 2);
    CHECK(fs_stage_commit(&st, "two\n", 4, 0644, true) == 0);
    fs_stage_abort(&st);
    CHECK(entries(dir) == 1 && strcmp(slurp(path), "two\n") == 0);

    /* aborted: the old file as it was, no temporary left; opening again aborts first */
    CHECK(fs_stage_open(&st, path) == 0 && fs_stage_open(&st, path) == 0);
    CHECK(entries(dir) == 2);
    fs_stage_abort(&st);
    CHECK(entries(dir) == 1 && strcmp(slurp(path), "two\n") == 0);

    /* a directory that is not there; a commit whose rename fails (a directory in the way) */
    CHECK(fs_stage_open(&st, missing) == -ENOENT && st.tmp == NULL);
    CHECK(unlink(path) == 0 && mkdir(path, 0755) == 0);
    CHECK(fs_stage_open(&st, path) == 0);
    CHECK(fs_stage_commit(&st, "x", 1, 0644, false) == -EISDIR);
    CHECK(st.tmp == NULL && entries(dir) == 1);
    CHECK(rmdir(path) == 0 && rmdir(dir) == 0);
}

/* read_file_bounded(_flags): a FIFO (no writer) fails the type check at once instead of
 * blocking, O_NOFOLLOW refuses a symlink; fs_type_name; fs_move_aside: a file renamed to
 * path+suffix over the one before, the link itself moved, a name blocked by a directory
 * skipped for the next, bounded. */
static void test_read_and_aside(const char *root)
{
    char dir[4200], path[4200], fifo[4200], link[4200], aside[4300];
    snprintf(dir, sizeof(dir), "%s/r", root);
    snprintf(path, sizeof(path), "%s/r/file", root);
    snprintf(fifo, sizeof(fifo), "%s/r/fifo", root);
    snprintf(link, sizeof(link), "%s/r/link", root);
    CHECK(mkdir(dir, 0755) == 0);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHECK(fd >= 0 && write(fd, "abc", 3) == 3);
    close(fd);
    CHECK(mkfifo(fifo, 0600) == 0 && symlink(path, link) == 0);

    char *text = NULL;
    size_t len = 0;
    struct stat st;
    CHECK(read_file_bounded(link, 10, &text, &len, &st) == 0 && len == 3 && S_ISREG(st.st_mode));
    free(text);
    CHECK(read_file_bounded_flags(link, O_NOFOLLOW, 10, &text, &len, NULL) == -ELOOP);
    CHECK(read_file_bounded_flags(path, O_NOFOLLOW, 10, &text, &len, NULL) == 0 && len == 3);
    free(text);
    CHECK(read_file_bounded(fifo, 10, &text, &len, NULL) == -EINVAL);
    CHECK(read_file_bounded(dir, 10, &text, &len, NULL) == -EINVAL);
    CHECK(read_file_bounded(path, 2, &text, &len, NULL) == -EFBIG);
    CHECK(lstat(fifo, &st) == 0 && strcmp(fs_type_name(st.st_mode), "a FIFO") == 0);
    CHECK(lstat(link, &st) == 0 && strcmp(fs_type_name(st.st_mode), "a symbolic link") == 0);
    CHECK(strcmp(fs_type_name(S_IFDIR | 0755), "a directory") == 0);

    char *got = NULL;
    CHECK(fs_move_aside(link, ".bad", &got) == 0);
    snprintf(aside, sizeof(aside), "%s.bad", link);
    CHECK(got && strcmp(got, aside) == 0 && lstat(aside, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(access(link, F_OK) < 0 && slurp(path) && strcmp(slurp(path), "abc") == 0);
    free(got);
    /* Over the one before: only the last is kept. */
    CHECK(rename(fifo, link) == 0 && fs_move_aside(link, ".bad", &got) == 0);
    CHECK(strcmp(got, aside) == 0 && lstat(aside, &st) == 0 && S_ISFIFO(st.st_mode));
    free(got);
    /* A directory moved where a file is, a file where directories are: the next names. */
    CHECK(mkdir(link, 0700) == 0 && fs_move_aside(link, ".bad", &got) == 0);
    snprintf(aside, sizeof(aside), "%s.bad.1", link);
    CHECK(strcmp(got, aside) == 0 && lstat(aside, &st) == 0 && S_ISDIR(st.st_mode));
    free(got);
    for (int i = 2; i <= FS_ASIDE_MAX; i++) {
        snprintf(aside, sizeof(aside), "%s.bad.%d", link, i);
        CHECK(mkdir(aside, 0700) == 0);
    }
    snprintf(aside, sizeof(aside), "%s.bad", link);
    CHECK(unlink(aside) == 0 && mkdir(aside, 0700) == 0);
    fd = open(link, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    close(fd);
    got = NULL;
    CHECK(fs_move_aside(link, ".bad", &got) == -ENOTEMPTY && !got && access(link, F_OK) == 0);
    CHECK(fs_move_aside(fifo, ".bad", &got) == -ENOENT);
    CHECK(unlink(link) == 0 && rmdir(aside) == 0);
    for (int i = 1; i <= FS_ASIDE_MAX; i++) {
        snprintf(aside, sizeof(aside), "%s.bad.%d", link, i);
        CHECK(rmdir(aside) == 0);
    }
    CHECK(unlink(path) == 0 && entries(dir) == 0 && rmdir(dir) == 0);
}

struct asides {
    int n;
    char last[4200];
};

static void on_aside(const char *path, const char *what, const char *aside, void *userdata)
{
    struct asides *a = userdata;
    a->n++;
    snprintf(a->last, sizeof(a->last), "%s|%s|%s", path, what, aside);
}

static ino_t ino_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_ino : 0;
}

/* A write past what is at `name` (not a regular file): it lands, and the owner is told
 * (the n-th time) that it went to name.not-regular, which is then removed. */
static void write_past(const struct fs_exchange *x, struct asides *a, const char *name,
                       const char *what, const char *text, int n)
{
    char aside[4400], want[9000];
    struct error err = { 0 };
    CHECK(fs_write_exchange(x, text, strlen(text), &err) == 0);
    CHECK_STR(slurp(x->path), text);
    snprintf(aside, sizeof(aside), "%s.not-regular", name);
    snprintf(want, sizeof(want), "%s|%s|%s", name, what, aside);
    CHECK(a->n == n);
    CHECK_STR(a->last, want);
    CHECK(unlink(aside) == 0);
}

static void test_exchange(const char *root)
{
    char dir[4200], path[4300], spare[4300], aside[4400], want[9000];
    snprintf(dir, sizeof(dir), "%s/x", root);
    snprintf(path, sizeof(path), "%s/ckpt", dir);
    snprintf(spare, sizeof(spare), "%s/ckpt.old", dir);
    CHECK(mkdir(dir, 0755) == 0);
    struct asides a = { 0 };
    const struct fs_exchange x = { .path = path, .spare = spare, .noun = "checkpoint",
                                   .aside_suffix = ".not-regular", .mode = 0600,
                                   .on_aside = on_aside, .userdata = &a };
    struct error err = { 0 };

    /* Nothing to trade with: the spare is renamed in. */
    CHECK(fs_write_exchange(&x, "one", 3, &err) == 0);
    CHECK_STR(slurp(path), "one");
    CHECK(access(spare, F_OK) < 0 && errno == ENOENT);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600);
    /* Then the names trade: the spare keeps the one before, path gets the spare's inode. */
    CHECK(fs_write_exchange(&x, "second", 6, &err) == 0);
    CHECK_STR(slurp(path), "second");
    CHECK_STR(slurp(spare), "one");
    ino_t was_path = ino_of(path), was_spare = ino_of(spare);
    CHECK(fs_write_exchange(&x, "3", 1, &err) == 0); /* shorter than what the spare held */
    CHECK_STR(slurp(path), "3");
    CHECK_STR(slurp(spare), "second");
    CHECK(ino_of(path) == was_spare && ino_of(spare) == was_path);
    CHECK(entries(dir) == 2);
    CHECK(a.n == 0);

    /* A FIFO at the spare: never opened blocking. A symlink at path: moved as the link,
     * never followed. Either moved aside, told, and the write goes on. */
    CHECK(unlink(spare) == 0 && mkfifo(spare, 0600) == 0);
    write_past(&x, &a, spare, "a FIFO", "four", 1);
    CHECK(unlink(path) == 0 && symlink("/etc/passwd", path) == 0);
    write_past(&x, &a, path, "a symbolic link", "five", 2);

    /* A directory at the spare (not empty), and one at its aside name: the next aside
     * name is taken (a rename replaces an empty directory: both hold a file). */
    CHECK(access(spare, F_OK) < 0); /* the symlink's write had nothing to trade with */
    char f[4500];
    snprintf(aside, sizeof(aside), "%s.not-regular", spare);
    CHECK(mkdir(spare, 0700) == 0 && mkdir(aside, 0700) == 0);
    snprintf(f, sizeof(f), "%s/f", spare);
    CHECK(close(open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
    snprintf(f, sizeof(f), "%s/f", aside);
    CHECK(close(open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0600)) == 0);
    CHECK(fs_write_exchange(&x, "six", 3, &err) == 0);
    CHECK_STR(slurp(path), "six");
    CHECK(a.n == 3);
    snprintf(want, sizeof(want), "%s|a directory|%s.1", spare, aside);
    CHECK_STR(a.last, want);
    snprintf(f, sizeof(f), "%s.1/f", aside);
    CHECK(unlink(f) == 0);
    snprintf(f, sizeof(f), "%s/f", aside);
    CHECK(unlink(f) == 0);
    snprintf(f, sizeof(f), "%s.1", aside);
    CHECK(rmdir(f) == 0 && rmdir(aside) == 0);
    CHECK(unlink(spare) == 0 && unlink(path) == 0);
    CHECK(rmdir(dir) == 0);
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

    test_stage(root);
    test_read_and_aside(root);
    test_exchange(root);

    unlink(f2);
    unlink(file);
    rmdir(abc);
    snprintf(abc, sizeof(abc), "%s/a/b", root);
    rmdir(abc);
    rmdir(a);
    CHECK(rmdir(root) == 0);
    return test_failures ? 1 : 0;
}
