/* Small filesystem helpers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

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
