/* Small filesystem helpers, and the two atomic writers of files others read: a new
 * temporary file renamed over the old (write_file_atomic, fs_stage_*), and a spare that
 * trades names with it (fs_write_exchange), for a file rewritten on a hot path. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/error.h"

/* mkdir -p: create path and its missing parents with mode. Returns 0 or -errno. */
int mkdir_p(const char *path, mode_t mode);

/* Everything left to read on fd, NUL-terminated (*len excludes the NUL), at most max
 * bytes (-EFBIG past that); hint (the file's size when known) sizes the first buffer.
 * Returns 0 or -errno. */
int read_fd_bounded(int fd, size_t hint, size_t max, char **out, size_t *len);

/* The whole of a regular file, NUL-terminated (*len excludes the NUL), at most max bytes.
 * Opened non-blocking, so a FIFO or device named by someone else fails the regular-file
 * check (-EINVAL) instead of blocking the loop; -EFBIG past max. st (optional) gets the
 * file's stat. Returns 0 or -errno. */
int read_file_bounded(const char *path, size_t max, char **out, size_t *len, struct stat *st);
/* read_file_bounded with more flags for open(2): O_NOFOLLOW where the caller owns the name
 * and a symlink there must not be read through (-ELOOP). */
int read_file_bounded_flags(const char *path, int flags, size_t max, char **out, size_t *len,
                            struct stat *st);

/* What a file is, by its mode, for messages: "a regular file", "a directory", "a FIFO", ... */
const char *fs_type_name(mode_t mode);

/* Sets path aside under a name that says why: renamed to path+suffix ("<path>.corrupt"),
 * replacing a file of that name (only the last one is kept). Where a directory blocks that
 * name (or path is a directory and a file does), the next of path+suffix+".1" ...
 * ".FS_ASIDE_MAX" (bounded: a node that keeps putting directories there fails at last).
 * The link itself moves, never what it points to. *aside (malloc'd): the name used.
 * 0 or -errno. */
#define FS_ASIDE_MAX 8
int fs_move_aside(const char *path, const char *suffix, char **aside);

/* The same file as before, by identity and change time: device, inode and ctime. A file
 * unlinked and created again may get the same inode number back (tmpfs reuses them),
 * never the same ctime; a rewrite in place changes the ctime too. For the stat()-based
 * checks that stand in for inotify when it cannot be had. */
bool fs_same_file(const struct stat *a, const struct stat *b);

/* Replace path with len bytes of data atomically: a hidden temporary file beside it
 * (mode), renamed over path. Every reader sees the old file or the new one, whole, also
 * after the writer crashes. sync: also fsync the file before the rename and the directory
 * after it, for what must survive an OS crash or power loss as well. On failure path is
 * unchanged and the temporary file removed. 0 or -errno. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, bool sync);

/* write_file_atomic in two steps, for a writer that can make the file before it knows the
 * content: fs_stage_open creates the hidden temporary file beside path (a new inode, the
 * costly part on ext4), fs_stage_commit writes, (fsyncs,) renames and closes it later.
 * fs_stage_abort removes an open stage; on a closed one (zeroed, committed, aborted) it
 * does nothing, so it can run on every path out. Open while tmp is set: a zeroed struct
 * is closed, and its fd 0 is never taken for ours. */
struct fs_stage {
    int fd;
    char *path, *tmp;
};
/* 0 or -errno (-ENOENT: path's directory is missing). Opening an open stage aborts it first. */
int fs_stage_open(struct fs_stage *s, const char *path);
/* 0 or -errno; the stage is closed either way, and on failure path is unchanged. */
int fs_stage_commit(struct fs_stage *s, const void *data, size_t len, mode_t mode, bool sync);
void fs_stage_abort(struct fs_stage *s);

/* What is at path when it is not a regular file (a FIFO, a symlink, a directory; put there
 * by someone else) moved aside to path+suffix (fs_move_aside), for a person to look at: a
 * file of ours must never block its opener (a FIFO), lead it outside its directory (a
 * symlink) or stop it for good. 1 when moved (*what: fs_type_name of it, *aside
 * (malloc'd): where it went), 0 when path is a regular file or missing, -errno when it
 * cannot be moved (*what set). The link itself moves, never what it points to. */
int fs_aside_irregular(const char *path, const char *suffix, const char **what, char **aside);

/* write_file_atomic's other form, for a file rewritten on a hot path (DRA's checkpoint, at
 * every Prepare): no file is created, removed or renamed over another. The new content
 * goes into `spare`, a second name beside path that holds the version before the last
 * (nothing reads it), truncated to it, which then trades names with path in one
 * renameat2(RENAME_EXCHANGE). A process killed at any point leaves path as it was or as
 * new, whole: only the spare is ever torn. Where nothing is at path to trade with (the
 * first write) or the filesystem cannot exchange, the spare is renamed to path, as
 * atomic. On failure path is unchanged.
 * Why not a temporary file renamed over: ext4 (auto_da_alloc, on by default) allocates
 * and submits the data of a file renamed over another inside the rename, ~0.9 ms on this
 * project's VM, and every write created and removed an inode (ext4's allocator then
 * skips recently freed inodes one by one); this way ~0.15 ms against ~0.65
 * (docs/benchmarks.md, "DRA").
 * Never fsynced: for a file whose reader discards it after an OS crash (another boot),
 * where only a killed process is guarded against and the page cache survives that.
 * What is not a regular file at either name is moved aside first (fs_aside_irregular, to
 * <name><aside_suffix>; the spare's found by its open, which neither blocks nor follows a
 * symlink, path's by one lstat): the exchange would carry it into the spare's name, to be
 * found there at the next write under a name that is not where it was put. Each move is
 * told to on_aside (may be NULL) and the write goes on. 0 or -errno, err saying
 * "writing <noun> <path>: ..." or "<noun> <path> is ..., and moving it aside failed". */
struct fs_exchange {
    const char *path, *spare;
    const char *noun;           /* names the file in errors: "checkpoint" */
    const char *aside_suffix;   /* ".not-regular" */
    mode_t mode;                /* exactly this, whatever the umask or the spare had */
    void (*on_aside)(const char *path, const char *what, const char *aside, void *userdata);
    void *userdata;
};
int fs_write_exchange(const struct fs_exchange *x, const void *data, size_t len, struct error *err);
