/* Scratch directories for the C tests: see scratch.h. The registry is a fixed table and
 * the removal uses openat/getdents64/unlinkat only, so the signal handler can run it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getdents64, struct dirent64 */
#endif
#include "scratch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCRATCH_MAX 32       /* live at once; fuzz targets remove theirs per input */
#define SCRATCH_PATH 512     /* a longer $TMPDIR is refused, not truncated */
#define SCRATCH_DEPTH 32     /* deeper than any tree a test renders */

static struct {
    pid_t owner; /* 0: free slot */
    char path[SCRATCH_PATH];
} slots[SCRATCH_MAX];

static const int signals[] = { SIGTERM, SIGINT, SIGHUP, SIGABRT };
static struct sigaction previous[sizeof(signals) / sizeof(signals[0])];
static bool installed[sizeof(signals) / sizeof(signals[0])];
static bool set_up;

static bool keep(void)
{
    const char *k = getenv("GDP_KEEP_TMP");
    return k && *k;
}

/* Removes name (relative to dirfd) and, for a directory, everything below it. */
static int rm_at(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -errno;
    if (depth > SCRATCH_DEPTH)
        return -ELOOP;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES && fchmodat(dirfd, name, S_IRWXU, 0) == 0)
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* Entries removed while reading may make the directory stream skip others: read it
     * again until rmdir succeeds, a few passes at most. */
    for (int pass = 0; pass < 4; pass++) {
        char buf[4096] __attribute__((aligned(8)));
        ssize_t n;
        if (lseek(fd, 0, SEEK_SET) < 0)
            break;
        while ((n = getdents64(fd, buf, sizeof(buf))) > 0)
            for (ssize_t off = 0; off < n;) {
                const struct dirent64 *e = (const struct dirent64 *)(buf + off);
                off += e->d_reclen;
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                    (void)rm_at(fd, e->d_name, depth + 1);
            }
        if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
            close(fd);
            return 0;
        }
        if (errno != ENOTEMPTY)
            break;
    }
    int r = -errno;
    close(fd);
    return r;
}

static int rm_rf(const char *path)
{
    return rm_at(AT_FDCWD, path, 0);
}

static void remove_all(void)
{
    pid_t self = getpid();
    for (size_t i = 0; i < SCRATCH_MAX; i++)
        if (slots[i].owner == self) {
            (void)rm_rf(slots[i].path);
            slots[i].owner = 0;
        }
}

static void on_signal(int sig)
{
    int saved = errno;
    remove_all();
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (signals[i] == sig && installed[i]) {
            sigaction(sig, &previous[i], NULL);
            installed[i] = false;
        }
    /* Blocked until this handler returns; then the previous handler or the default
     * action sees it as if we had never been here. */
    raise(sig);
    errno = saved;
}

static void set_up_once(void)
{
    if (set_up)
        return;
    set_up = true;
    atexit(remove_all);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        sigaddset(&sa.sa_mask, signals[i]);
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
        if (sigaction(signals[i], NULL, &previous[i]) < 0 || previous[i].sa_handler == SIG_IGN)
            continue; /* ignored on purpose (nohup): leave it so */
        installed[i] = sigaction(signals[i], &sa, NULL) == 0;
    }
}

static const char *make_dir(const char *tmp, const char *prefix)
{
    size_t i;
    for (i = 0; i < SCRATCH_MAX && slots[i].owner; i++)
        ;
    int n = i < SCRATCH_MAX ? snprintf(slots[i].path, SCRATCH_PATH, "%s/%sXXXXXX", tmp, prefix) : -1;
    if (n < 0 || n >= SCRATCH_PATH) {
        fprintf(stderr, "scratch: no room for another directory %s/%s...\n", tmp, prefix);
        abort();
    }
    /* Registered before it exists: a signal while mkdtemp runs must not leak it (until
     * then the name does not exist and removing it is a no-op). */
    if (!keep())
        set_up_once();
    slots[i].owner = getpid();
    if (!mkdtemp(slots[i].path)) {
        slots[i].owner = 0;
        fprintf(stderr, "scratch: cannot make %s: %s\n", slots[i].path, strerror(errno));
        abort();
    }
    if (keep())
        fprintf(stderr, "GDP_KEEP_TMP: keeping %s\n", slots[i].path);
    return slots[i].path;
}

static const char *tmpdir(void)
{
    const char *tmp = getenv("TMPDIR");
    return tmp && *tmp ? tmp : P_tmpdir;
}

const char *scratch_dir(const char *prefix)
{
    return make_dir(tmpdir(), prefix);
}

const char *scratch_socket_dir(const char *prefix)
{
    const char *tmp = tmpdir();
    return make_dir(strlen(tmp) <= SCRATCH_SOCKET_TMPDIR_MAX ? tmp : "/tmp", prefix);
}

int scratch_remove(const char *dir)
{
    for (size_t i = 0; i < SCRATCH_MAX; i++)
        if (slots[i].owner && strcmp(slots[i].path, dir) == 0) {
            int r = keep() ? 0 : rm_rf(dir);
            slots[i].owner = 0;
            return r;
        }
    return -ENOENT;
}
