/* Scratch directories for the C tests and fuzz targets: one home for "leave nothing
 * behind in $TMPDIR" (tests/common/scratch.py is the Python side).
 *
 * scratch_dir() makes $TMPDIR/<prefix>XXXXXX ($TMPDIR unset or empty: /tmp). Every
 * directory not yet removed with scratch_remove() is removed with all it holds at exit()
 * and on SIGTERM (meson's timeout and Ctrl-C), SIGINT, SIGHUP and SIGABRT (a failed
 * assert, a sanitizer report with abort_on_error) before the signal goes on to its
 * previous handler or default action, so the exit status and libFuzzer's own handlers
 * are unchanged. Only the process that made a directory removes it: a forked child
 * that exits leaves its parent's alone.
 *
 * GDP_KEEP_TMP=1 (any non-empty value) keeps them and prints each path when made.
 * Single-threaded use; the signal path uses only async-signal-safe calls. */
#pragma once

/* The new directory's path, valid until scratch_remove() or exit; aborts with a
 * message when it cannot be made (a test cannot go on without it). */
const char *scratch_dir(const char *prefix);
/* The same for a directory of sockets: under /tmp when $TMPDIR is longer than
 * SCRATCH_SOCKET_TMPDIR_MAX bytes, so a long $TMPDIR cannot push a socket's path past the
 * 108 bytes of sun_path (as tests/common/scratch.py's socket_dir). */
#define SCRATCH_SOCKET_TMPDIR_MAX 32
const char *scratch_socket_dir(const char *prefix);

/* Removes dir (from scratch_dir) and everything below it now. 0, or -errno. */
int scratch_remove(const char *dir);
