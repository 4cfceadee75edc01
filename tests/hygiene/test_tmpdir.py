#!/usr/bin/python3
"""Tests leave nothing in $TMPDIR, however they end (docs/testing.md).

Runs, each with a fresh, private TMPDIR that must be empty afterwards and with no process
left that names it:
  - real tests: a C test and its Python peer (grpc-client, grpc-client-vs-grpcio), the
    grpcio interop test (grpctest.Server), one integration test case (the harness, the
    plugin, the test kubelet whose protobuf classes are built from api/*.proto),
    the output test with a proc root and a device root (test-cdi);
  - a harness test stopped mid-test the way meson stops one on timeout or Ctrl-C
    (SIGTERM to its process group) and by a SIGINT to the test process alone (its
    children must go too);
  - the C helper (scratch-probe: exit, SIGTERM, SIGINT, SIGHUP, abort, a forked child's
    exit) and the Python one (SIGTERM and SIGINT with an adopted child), each still
    ending the way the signal says;
  - GDP_KEEP_TMP=1: the directory stays and its path is printed.

usage: test_tmpdir.py <scratch-probe> <test-grpc-client> <grpc-test-server>
       test_tmpdir.py --hold      (the harness test the signal cases stop)"""
import os
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("GDP_BUILD_DIR", "")
PY = "/usr/bin/python3"
WAIT = 30.0

sys.path.insert(0, os.path.join(SOURCE, "tests", "common"))
import scratch  # noqa: E402

failures = []


def fail(what):
    print("FAIL: " + what, flush=True)
    failures.append(what)


def processes_naming(path):
    """PIDs (not ours) whose command line or working directory is under path."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink("/proc/%s/cwd" % pid)
        except OSError:
            continue
        if path in cmd or cwd.startswith(path):
            out.append("%s (%s)" % (pid, cmd.strip()[:120]))
    return out


def clean_after(name, tmpdir, wait_procs=5.0):
    """Fails if tmpdir holds anything or a process still names it; empties it for the
    next case."""
    deadline = time.monotonic() + wait_procs
    while processes_naming(tmpdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = sorted(os.listdir(tmpdir))
    if left:
        fail("%s left in TMPDIR: %s" % (name, ", ".join(left)))
    procs = processes_naming(tmpdir)
    if procs:
        fail("%s left processes behind: %s" % (name, "; ".join(procs)))
        for p in procs:
            try:
                os.kill(int(p.split()[0]), signal.SIGKILL)
            except OSError:
                pass
    for e in left:
        scratch.remove(os.path.join(tmpdir, e))


def env_with(tmpdir, **extra):
    env = dict(os.environ, TMPDIR=tmpdir, **extra)
    env.pop("GDP_KEEP_TMP", None)
    env.update(extra)
    return env


def run(name, tmpdir, argv, ok=(0,), timeout=120, **extra):
    r = subprocess.run(argv, env=env_with(tmpdir, **extra), capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode not in ok:
        fail("%s: exit %d (want %s)\n%s%s" % (name, r.returncode, ok, r.stdout[-2000:],
                                            r.stderr[-3000:]))
    clean_after(name, tmpdir)
    return r


def start(tmpdir, argv, **extra):
    # Its own process group, as meson gives each test; SIGINT not inherited as ignored.
    return subprocess.Popen(argv, env=env_with(tmpdir, **extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_line(p, prefix, what):
    """The first stdout line starting with prefix (the child prints it when ready)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if line.startswith(prefix):
            return line[len(prefix):].strip()
        if not line and p.poll() is not None:
            break
    p.kill()
    fail("%s: no %r line (exit %s): %s" % (what, prefix, p.poll(), p.stderr.read()[-3000:]))
    return None


def stopped_by(name, tmpdir, p, sig, group, want_rc):
    (os.killpg if group else os.kill)(p.pid, sig)
    try:
        rc = p.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        rc = p.wait()
        fail("%s: still running %.0f s after %s" % (name, WAIT, signal.Signals(sig).name))
    if rc != want_rc:
        fail("%s: exit status %s, want %s\n%s" % (name, rc, want_rc, p.stderr.read()[-3000:]))
    p.stdout.close()
    p.stderr.close()
    clean_after(name, tmpdir)


def real_tests(tmpdir, client, server):
    run("grpc-client", tmpdir, [client])
    run("grpc-client-vs-grpcio", tmpdir,
        [PY, os.path.join(SOURCE, "tests", "grpc", "test_client_vs_grpcio.py"), client])
    run("grpc-interop-grpcio", tmpdir,
        [PY, os.path.join(SOURCE, "tests", "grpc", "test_grpc_interop.py"), server])
    run("integration-allocate (one case)", tmpdir,
        [PY, os.path.join(SOURCE, "tests", "integration", "test_allocate.py"),
         "Allocate.test_unknown_id"])
    run("output cdi", tmpdir, [os.path.join(BUILD, "tests", "output", "test-cdi")])


def harness_stopped(tmpdir):
    hold = [PY, os.path.abspath(__file__), "--hold"]
    # meson on timeout or Ctrl-C: SIGTERM to the test's process group.
    p = start(tmpdir, hold)
    if wait_line(p, "ready ", "harness hold (SIGTERM)"):
        stopped_by("harness, SIGTERM to its group", tmpdir, p, signal.SIGTERM, True,
                   -signal.SIGTERM)
    # A SIGINT to the test process alone: its plugin and kubelet must not outlive it.
    p = start(tmpdir, hold)
    if wait_line(p, "ready ", "harness hold (SIGINT)"):
        stopped_by("harness, SIGINT to it alone", tmpdir, p, signal.SIGINT, False,
                   -signal.SIGINT)


def c_helper(tmpdir, probe):
    r = run("scratch-probe exit", tmpdir, [probe, "exit"])
    if not r.stdout.startswith("dir " + tmpdir + "/gdp-probe-"):
        fail("scratch-probe did not make its directory under TMPDIR: %r" % r.stdout)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        p = start(tmpdir, [probe, "wait"])
        if wait_line(p, "ready", "scratch-probe wait") is not None:
            stopped_by("scratch-probe, %s" % sig.name, tmpdir, p, sig, False, -sig)
    run("scratch-probe abort", tmpdir, [probe, "abort"], ok=(-signal.SIGABRT,))
    r = run("scratch-probe fork", tmpdir, [probe, "fork"])
    if "kept" not in r.stdout:
        fail("scratch-probe fork: a child's exit removed its parent's directory")
    # TMPDIR unset: P_tmpdir (/tmp), still removed.
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "GDP_KEEP_TMP")}
    r = subprocess.run([probe, "exit"], env=env, capture_output=True, text=True, timeout=30)
    d = r.stdout.split()[1] if r.stdout.startswith("dir ") else None
    if r.returncode != 0 or not d or not d.startswith("/tmp/") or os.path.exists(d):
        fail("scratch-probe without TMPDIR: exit %d, %r left: %s" % (r.returncode, d,
                                                                    d and os.path.exists(d)))


PY_PROBE = """
import os, signal, subprocess, sys, time
sys.path.insert(0, %r)
import scratch
d = scratch.mkdtemp("gdp-pyprobe-")
os.makedirs(os.path.join(d, "a", "b"))
open(os.path.join(d, "a", "b", "f"), "w").close()
os.mkfifo(os.path.join(d, "fifo"))
child = scratch.adopt(subprocess.Popen(["sleep", "60", d]))
print("ready", d, child.pid, flush=True)
time.sleep(60)
""" % os.path.join(SOURCE, "tests", "common")


def py_helper(tmpdir):
    for sig in (signal.SIGTERM, signal.SIGINT):
        p = start(tmpdir, [PY, "-c", PY_PROBE])
        if wait_line(p, "ready", "python probe") is not None:
            stopped_by("scratch.py, %s" % sig.name, tmpdir, p, sig, False, -sig)


def keep(tmpdir, probe):
    r = subprocess.run([probe, "exit"], env=env_with(tmpdir, GDP_KEEP_TMP="1"),
                       capture_output=True, text=True, timeout=30)
    d = r.stdout.split()[1] if r.stdout.startswith("dir ") else ""
    if not (d and os.path.isdir(d) and ("keeping " + d) in r.stderr):
        fail("scratch-probe with GDP_KEEP_TMP=1: %r not kept or not printed (%r)" % (d, r.stderr))
    r = subprocess.run([PY, "-c", "import sys; sys.path.insert(0, %r); import scratch; "
                        "print(scratch.mkdtemp('gdp-keep-'))" % os.path.join(SOURCE, "tests", "common")],
                       env=env_with(tmpdir, GDP_KEEP_TMP="1"), capture_output=True, text=True,
                       timeout=30)
    d = r.stdout.strip()
    if not (d and os.path.isdir(d) and ("keeping " + d) in r.stderr):
        fail("scratch.py with GDP_KEEP_TMP=1: %r not kept or not printed (%r)" % (d, r.stderr))
    for e in os.listdir(tmpdir):
        scratch.remove(os.path.join(tmpdir, e))


def hold():
    """A harness test that brings up the plugin and the test kubelet, then waits to be
    stopped from outside."""
    sys.path.insert(0, os.path.join(SOURCE, "tests", "integration"))
    import harness

    class Hold(harness.PluginTestCase):
        def test_hold(self):
            self.start_all("a100")
            print("ready", self.tmp, flush=True)
            time.sleep(60)

    unittest.TextTestRunner().run(unittest.TestLoader().loadTestsFromTestCase(Hold))
    return 1  # it is always stopped before this


def main():
    if sys.argv[1:] == ["--hold"]:
        return hold()
    probe, client, server = sys.argv[1:4]
    for p in (probe, client, server, os.path.join(BUILD, "tests", "output", "test-cdi")):
        if not os.path.exists(p):
            print("not built: %s" % p, file=sys.stderr)
            return 1
    # The private TMPDIR is itself a scratch directory (short: socket paths live in it).
    tmpdir = scratch.mkdtemp("gdp-hygiene-")
    t0 = time.monotonic()
    c_helper(tmpdir, probe)
    py_helper(tmpdir)
    keep(tmpdir, probe)
    real_tests(tmpdir, client, server)
    harness_stopped(tmpdir)
    print("%d failure(s) in %.1f s" % (len(failures), time.monotonic() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
