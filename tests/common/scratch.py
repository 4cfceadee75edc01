"""Scratch directories for the Python tests, harnesses and benches: one home for "leave
nothing behind in $TMPDIR".

    import scratch
    d = scratch.mkdtemp("gdp-it-")      # $TMPDIR/gdp-it-XXXXXXXX, removed at exit
    scratch.adopt(popen)                # a child that writes into it: killed before removal
    scratch.remove(d)                   # now, e.g. at the end of one test
    with scratch.directory("gdp-x-") as d: ...

A directory is removed when its owner removes it, at interpreter exit (atexit: normal
exit, sys.exit, an uncaught exception) and on SIGTERM, SIGINT and SIGHUP: meson sends
SIGTERM to a test's process group on timeout and on Ctrl-C, and Python's default SIGTERM
action would skip every finally, addCleanup and atexit. The handler kills the adopted
children first (they would otherwise write into a directory being removed, or outlive a
harness that alone was signalled), removes the directories, then lets the signal do what
it did before (the previous handler, e.g. KeyboardInterrupt, or the default action, so
the exit status still says which signal ended the process). meson gives a test 0.5 s
between SIGTERM and SIGKILL: the handler does nothing slow.

GDP_KEEP_TMP=1 (any non-empty value) keeps every directory and prints its path when it
is made.
"""

import atexit
import contextlib
import os
import shutil
import signal
import stat
import sys
import tempfile

KEEP = bool(os.environ.get("GDP_KEEP_TMP"))
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_dirs = {}        # path -> pid that made it (a forked child must not remove its parent's)
_children = []    # subprocess.Popen objects to kill before removal
_previous = {}    # signal -> handler before ours


def mkdtemp(prefix="gdp-", dir=None):
    """A new directory under dir (default: $TMPDIR, else /tmp), removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix, dir=dir)
    if KEEP:
        print("GDP_KEEP_TMP: keeping %s" % path, file=sys.stderr, flush=True)
        return path
    _dirs[path] = os.getpid()
    return path


# A socket's path holds 108 bytes (sun_path) and the plugin's DRA directories at most 78:
# a directory for sockets goes under /tmp when $TMPDIR is longer than this.
SOCKET_TMPDIR_MAX = 32


def socket_dir(prefix="gdp-sock-"):
    """A new directory for sockets, removed at exit: under $TMPDIR when that is short,
    else under /tmp, so a long $TMPDIR cannot push a socket path past its bound."""
    base = tempfile.gettempdir()
    return mkdtemp(prefix, dir=base if len(base) <= SOCKET_TMPDIR_MAX else "/tmp")


def remove(path):
    """Removes path and everything below it now (kept under GDP_KEEP_TMP)."""
    _dirs.pop(path, None)
    if not KEEP:
        _rmtree(path)


@contextlib.contextmanager
def directory(prefix="gdp-", dir=None):
    path = mkdtemp(prefix, dir)
    try:
        yield path
    finally:
        remove(path)


def adopt(proc):
    """proc (a subprocess.Popen) is killed and reaped before the directories go."""
    _children[:] = [p for p in _children if p.returncode is None]
    _children.append(proc)
    return proc


def _kill_children():
    for p in _children:
        try:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=0.3)
        except Exception:  # noqa: BLE001 -- best effort on the way out, never raise here
            pass
    del _children[:]


def _rmtree(path):
    def retry(_func, p, _exc):
        # A test may leave a directory without write or search permission (root ignores
        # that, other users do not): open it up and try once more.
        try:
            os.chmod(os.path.dirname(p), stat.S_IRWXU)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, stat.S_IRWXU)
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=retry)


def _cleanup():
    pid = os.getpid()
    mine = [d for d, owner in list(_dirs.items()) if owner == pid]
    if mine:
        _kill_children()
    for d in mine:
        _dirs.pop(d, None)
        _rmtree(d)


def _on_signal(signum, frame):
    _cleanup()
    prev = _previous.get(signum, signal.SIG_DFL)
    signal.signal(signum, prev)
    if callable(prev):
        prev(signum, frame)
    elif prev != signal.SIG_IGN:
        os.kill(os.getpid(), signum)


def _install():
    """At import, from the main thread (signal handlers can only be set there; harnesses
    make directories from worker threads too). With nothing made, the handler only
    passes the signal on."""
    atexit.register(_cleanup)
    for sig in SIGNALS:
        try:
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN or prev is None:
                continue  # ignored on purpose (nohup) or set from C: leave it
            signal.signal(sig, _on_signal)
            _previous[sig] = prev
        except ValueError:
            pass  # imported from another thread: atexit still removes them


_install()
