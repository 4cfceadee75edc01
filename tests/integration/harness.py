"""Integration harness: a fake host, the test kubelet and the real plugin.

Each test gets its own temporary directory T:
    T/sys, T/proc, T/dev   fake host rendered from an NVML mock profile
    S/dp/                  device-plugin directory (kubelet.sock, nvidia-gpu.sock), S a
                           scratch.socket_dir (T itself unless $TMPDIR is long)
    T/nvml.ctl             FIFO the simulated NVML reads fault-injection lines from
Children (test kubelet, plugin) are always killed on teardown. T is removed at teardown,
and at exit or on SIGTERM/SIGINT/SIGHUP if teardown never ran (tests/common/scratch.py);
GDP_KEEP_TMP=1 keeps it. Everything waits for an event with a timeout; nothing sleeps
and hopes.

Environment (set by meson's test_env): GDP_BUILD_DIR, GDP_SOURCE_DIR, GDP_TEST_DATA.
"""

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import unittest

import yaml

BUILD = os.environ.get("GDP_BUILD_DIR", "")
SOURCE = os.environ.get("GDP_SOURCE_DIR", "")
DATA = os.environ.get("GDP_TEST_DATA") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")

PLUGIN = os.path.join(BUILD, "src", "gpu-device-plugin")
SIM_DIR = os.path.join(BUILD, "sim", "nvml")
SIM_RENDER = os.path.join(SIM_DIR, "nvml-sim-render")
TEST_KUBELET = os.path.join(SOURCE, "tools", "test-kubelet", "test-kubelet")
PROFILES = os.path.join(DATA, "nvml-mock-profiles")  # NVIDIA's, by bare name
PYTHON = "/usr/bin/python3"

RESOURCE = "nvidia.com/gpu"
ENDPOINT = "nvidia-gpu.sock"
REGISTERED_LINE = "Registered device plugin for 'nvidia.com/gpu' with Kubelet"
TIMEOUT = 20.0   # generous upper bound for one expected event (ASan builds are slow)

sys.path.insert(0, os.path.join(SOURCE, "tools", "test-kubelet"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import scratch  # noqa: E402  (T's home: removed at exit and on SIGTERM/SIGINT too)


# ------------------------------------------------------------------ profiles

def profile_path(name):
    return os.path.join(PROFILES, name + ".yaml")


def require_fixtures(paths):
    """A missing fixture is a broken checkout, not a reason to skip: one line naming it,
    exit status 1, before any test starts."""
    for p in paths:
        if not os.path.exists(p):
            sys.exit("%s: missing fixture %s" % (os.path.basename(sys.argv[0]), p))


require_fixtures(profile_path(n) for n in ("a100", "h100", "t4"))


def _norm_bdf(bdf):
    return bdf.strip().lower()


def load_profile(name):
    """What the plugin should see for a profile: a list of GPUs in index order, each
    {"index", "uuid", "bus_id", "numa" (int or None), "name", "memory"}."""
    with open(profile_path(name), encoding="utf-8") as f:
        prof = yaml.safe_load(f)
    defaults = prof.get("device_defaults", {}) or {}
    numa_of = {}
    for rc in (prof.get("pcie_topology", {}) or {}).get("root_complexes", []) or []:
        for bdf in rc.get("devices", []) or []:
            numa_of[_norm_bdf(bdf)] = rc.get("numa_node")
    gpus = []
    for d in prof.get("devices", []) or []:
        bdf = (d.get("pci", {}) or {}).get("bus_id", "")
        mem = d.get("memory", defaults.get("memory", {})) or {}
        gpus.append({
            "index": d.get("index"),
            "uuid": d["uuid"],
            "bus_id": bdf,
            "numa": numa_of.get(_norm_bdf(bdf)),
            "name": d.get("name", defaults.get("name")),
            "memory": mem.get("total_bytes"),
        })
    gpus.sort(key=lambda g: g["index"])
    return gpus


# ------------------------------------------------------------------ processes

class LineReader:
    """Collects the lines of a child's pipe in a thread; waits on them by predicate."""

    def __init__(self, stream, parse_json=False, tee=None):
        self.lines = []
        self.cond = threading.Condition()
        self.eof = False
        self._json = parse_json
        self._tee = tee
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if self._tee is not None:
                self._tee.write(line + "\n")
                self._tee.flush()
            item = line
            if self._json:
                try:
                    item = json.loads(line)
                except ValueError:
                    item = {"event": "unparsed", "line": line}
            with self.cond:
                self.lines.append(item)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait_eof(self, timeout):
        """Until the writer's end of the pipe is closed and every line is read."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.eof, timeout):
                raise AssertionError("pipe still open %.1fs after the child exited" % timeout)

    def close(self, stream):
        """After the child exited: let the reader drain, then close the pipe."""
        self._thread.join(5)
        stream.close()

    def mark(self):
        with self.cond:
            return len(self.lines)

    def wait_for(self, pred, start=0, timeout=TIMEOUT, what="line"):
        """Returns (index, item) of the first item from `start` on that matches."""
        deadline = time.monotonic() + timeout
        with self.cond:
            i = start
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i]):
                        return i, self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError("timed out after %.1fs waiting for %s%s; last lines:\n%s" % (
                        timeout, what, " (stream closed)" if self.eof else "",
                        "\n".join(str(x) for x in self.lines[-15:])))
                self.cond.wait(left)

    def count(self, pred, start=0):
        with self.cond:
            return sum(1 for x in self.lines[start:] if pred(x))

    def text(self):
        with self.cond:
            return "\n".join(str(x) for x in self.lines)


class TestKubelet:
    def __init__(self, directory, log):
        self.dir = directory
        self.proc = scratch.adopt(subprocess.Popen([PYTHON, TEST_KUBELET, "--dir", directory],
                                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   stderr=log, close_fds=True))
        self.events = LineReader(self.proc.stdout, parse_json=True)
        self.wait("serving")

    def send(self, cmd):
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()

    def wait(self, event, start=0, timeout=TIMEOUT, **match):
        def pred(e):
            return e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        return self.events.wait_for(pred, start, timeout, what="event %r %r" % (event, match))[1]

    def wait_index(self, event, start=0, timeout=TIMEOUT, **match):
        def pred(e):
            return e.get("event") == event and all(e.get(k) == v for k, v in match.items())
        return self.events.wait_for(pred, start, timeout, what="event %r %r" % (event, match))

    def call(self, cmd, timeout=TIMEOUT):
        """Sends a command and returns its result event (same name as the command)."""
        start = self.events.mark()
        self.send(cmd)
        name = cmd["cmd"]
        return self.events.wait_for(
            lambda e: e.get("event") in (name, "error") and (e.get("event") == name or e.get("where") == name),
            start, timeout, what="result of %r" % name)[1]

    def count(self, event, start=0, **match):
        return self.events.count(
            lambda e: e.get("event") == event and all(e.get(k) == v for k, v in match.items()), start)

    def registered(self, start=0, timeout=TIMEOUT):
        """Waits for a Register of nvidia.com/gpu and its first device list."""
        i, reg = self.wait_index("register", start, timeout, resource=RESOURCE)
        devs = self.wait("devices", i, timeout, resource=RESOURCE)
        return reg, devs

    def stop(self):
        if self.proc.poll() is None:
            try:
                self.send({"cmd": "quit"})
                self.proc.stdin.close()
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.proc.kill()
                self.proc.wait()
        self.events.close(self.proc.stdout)
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


def run_as(name):
    """A wrap for Plugin / start_plugin that runs the binary under another argv[0] (the
    entrypoints of NVIDIA's image: gpu-feature-discovery, config-manager, ...)."""
    return [sys.executable, "-c",
            "import os, sys; os.execv(sys.argv[1], [%r] + sys.argv[2:])" % name]


class Plugin:
    def __init__(self, args, env, log, wrap=()):
        # wrap: a command that execs its arguments (the pid stays the plugin's).
        self.proc = scratch.adopt(subprocess.Popen(list(wrap) + [PLUGIN] + list(args),
                                                   stdin=subprocess.DEVNULL,
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                   env=env, close_fds=True))
        self.stderr = LineReader(self.proc.stderr, tee=log)
        self.stdout = LineReader(self.proc.stdout)
        self.pid = self.proc.pid

    def wait_log(self, needle, start=0, timeout=TIMEOUT):
        return self.stderr.wait_for(lambda l: needle in l, start, timeout, what="log %r" % needle)

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def fds(self):
        out = {}
        for fd in os.listdir("/proc/%d/fd" % self.pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (self.pid, fd))
            except OSError:
                pass
        return out

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=TIMEOUT):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("plugin did not exit within %.1fs; stderr:\n%s" % (
                timeout, self.stderr.text()))
        # The exit can be reaped before the reader threads have read the last lines from
        # the pipes: a test that counts the lines right after must see all of them.
        self.stderr.wait_eof(timeout)
        self.stdout.wait_eof(timeout)
        return rc

    def alive(self):
        return self.proc.poll() is None

    SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

    def finish(self):
        """Teardown: SIGTERM a running plugin and expect a clean exit 0, then look for
        sanitizer reports in everything it logged. Returns a list of problems."""
        problems = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(TIMEOUT)
                if rc != 0:
                    problems.append("exit status %d after SIGTERM at teardown" % rc)
            except subprocess.TimeoutExpired:
                problems.append("did not exit within %.0fs of SIGTERM at teardown" % TIMEOUT)
        self.kill()
        text = self.stderr.text()
        for mark in self.SANITIZER_MARKS:
            if mark in text:
                problems.append("sanitizer report (%r)" % mark)
        if problems:
            problems.append("stderr tail:\n" + text[-6000:])
        return problems

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.stderr.close(self.proc.stderr)
        self.stdout.close(self.proc.stdout)


# ------------------------------------------------------------------ test base

class PluginTestCase(unittest.TestCase):
    """Per-test temp dir with helpers to render a host, run the kubelet and the plugin."""

    keep = scratch.KEEP

    def setUp(self):
        if not os.path.exists(PLUGIN):
            self.skipTest("plugin binary not built: %s" % PLUGIN)
        self.tmp = scratch.mkdtemp("gdp-it-")
        self.addCleanup(scratch.remove, self.tmp)  # last: after the children are gone
        # The sockets' directory: under /tmp when $TMPDIR is long (a socket path has 108 bytes).
        socks = scratch.socket_dir("gdp-it-")
        self.addCleanup(scratch.remove, socks)
        self.dp = os.path.join(socks, "dp")
        os.makedirs(self.dp)
        self.sys_root = os.path.join(self.tmp, "sys")
        self.proc_root = os.path.join(self.tmp, "proc")
        # --dev-root is a root that contains dev/ (host paths are <root>/dev/nvidia0), while
        # nvml-sim-render --dev-root takes the dev directory itself.
        self.dev_root = os.path.join(self.tmp, "host")
        self.ctl = os.path.join(self.tmp, "nvml.ctl")
        self.log = open(os.path.join(self.tmp, "log.txt"), "w", encoding="utf-8")
        self.addCleanup(self.log.close)
        self.kubelet = None
        self.plugin = None
        self.profile = None

    # -- host
    def render(self, profile):
        if not os.path.exists(SIM_RENDER):
            self.skipTest("simulator helper not built: %s" % SIM_RENDER)
        r = subprocess.run([SIM_RENDER, "--profile", profile_path(profile),
                            "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                            "--dev-root", os.path.join(self.dev_root, "dev")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "nvml-sim-render failed:\n%s%s" % (r.stdout, r.stderr))
        self.profile = profile
        if not os.path.exists(self.ctl):
            os.mkfifo(self.ctl, 0o600)

    def plugin_env(self, profile=None, nvml=True, extra=None):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_LIBRARY_PATH", "MOCK_NVML_CONFIG", "MOCK_NVML_CONTROL",
                            "KUBELET_SOCKET", "FAIL_ON_INIT_ERROR", "GDP_SYSFS_ROOT")}
        profile = profile or self.profile
        if nvml:
            env["LD_LIBRARY_PATH"] = SIM_DIR
        if profile:
            env["MOCK_NVML_CONFIG"] = profile_path(profile)
        env["MOCK_NVML_CONTROL"] = self.ctl
        # Sanitizer builds: a leak report at exit would turn a clean exit into 1 only
        # for leaks, which the sanitizer suites judge on their own.
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        if extra:
            env.update(extra)
        return env

    def plugin_args(self, extra=()):
        return ["--kubelet-socket", os.path.join(self.dp, "kubelet.sock"),
                "--sysfs-root", self.sys_root, "--proc-root", self.proc_root,
                "--dev-root", self.dev_root, "-v", "4"] + list(extra)

    # -- children
    def start_kubelet(self):
        self.kubelet = TestKubelet(self.dp, self.log)
        self.addCleanup(self.kubelet.stop)
        return self.kubelet

    def start_plugin(self, args=(), env=None, nvml=True, extra_env=None, wrap=()):
        p = Plugin(self.plugin_args(args), env or self.plugin_env(nvml=nvml, extra=extra_env),
                   self.log, wrap)
        self.addCleanup(self._finish_plugin, p)
        self.plugin = p
        return p

    def _finish_plugin(self, p):
        problems = p.finish()
        if problems:
            raise AssertionError("plugin pid %d: %s" % (p.pid, "\n".join(problems)))

    def start_all(self, profile="a100", args=()):
        """Renders `profile`, starts the kubelet and the plugin, waits for the first
        registration and device list. Returns (register event, devices event)."""
        self.render(profile)
        self.start_kubelet()
        self.start_plugin(args)
        return self.kubelet.registered()

    def run_plugin(self, args, env=None, timeout=TIMEOUT):
        """Runs the plugin to completion (e.g. `list`); returns CompletedProcess."""
        try:
            r = subprocess.run([PLUGIN] + list(args), env=env or self.plugin_env(),
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise AssertionError("plugin %s did not finish in %.1fs: %s" % (args, timeout, e.stderr))
        for mark in Plugin.SANITIZER_MARKS:
            self.assertNotIn(mark, r.stderr, r.stderr)
        return r

    # -- fault injection
    def inject(self, line, timeout=TIMEOUT):
        """Writes one control line to the simulator's FIFO (waits for its reader)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                break
            except OSError as e:
                # ENXIO: nobody has the FIFO open for reading yet.
                if e.errno != errno.ENXIO or time.monotonic() > deadline:
                    raise AssertionError("cannot open control FIFO %s: %s" % (self.ctl, e))
                time.sleep(0.02)
        try:
            os.write(fd, (line.rstrip("\n") + "\n").encode())
        finally:
            os.close(fd)

    # -- config and health views
    def write_config(self, text, name="config.yaml"):
        """Writes a config file into the test's directory; returns its path."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def health_by_id(self, start):
        """Latest {id: health} over every resource, from the kubelet's events since start."""
        latest = {}
        for e in self.kubelet.events.lines[start:]:
            if e.get("event") == "devices":
                latest[e["resource"]] = {d["id"]: d["health"] for d in e["devices"]}
        return {i: h for devs in latest.values() for i, h in devs.items()}

    def wait_health(self, start, pred, what):
        """Waits until pred({id: health}) holds; returns that view."""
        self.kubelet.events.wait_for(lambda _e: pred(self.health_by_id(start)), start, what=what)
        return self.health_by_id(start)

    # -- assertions
    def expected_devices(self, profile=None):
        return {g["uuid"]: ([g["numa"]] if g["numa"] is not None else None)
                for g in load_profile(profile or self.profile)}

    def plugin_socket(self):
        return os.path.join(self.dp, ENDPOINT)

    def assertSocket(self, path):
        self.assertTrue(os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode),
                        "%s is not a socket" % path)

    def failure_context(self):
        parts = []
        if self.plugin is not None:
            parts.append("plugin stderr:\n" + self.plugin.stderr.text()[-4000:])
        if self.kubelet is not None:
            parts.append("kubelet events:\n" + self.kubelet.events.text()[-4000:])
        return "\n".join(parts)


def main():
    """unittest.main, but exit 77 (meson's "skipped") when every test was skipped, so a
    missing binary shows as SKIP and never as a pass."""
    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    if r.testsRun == 0 or len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0)


__all__ = ["PluginTestCase", "load_profile", "main", "RESOURCE", "ENDPOINT", "REGISTERED_LINE",
           "TIMEOUT", "PLUGIN", "signal"]
