#!/usr/bin/python3
"""benchlib: the harness the benchmarks share (bench-plugin.py, bench-rss.py,
link-order.py): a rendered simulated host, the plugin process and its log, the benchmark
kubelet served with grpcio, a ListAndWatch reader, and the start sequence up to the first
device list. It measures nothing itself."""

import json
import math
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools", "test-kubelet"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "common"))
import dpapi  # noqa: E402
import scratch  # noqa: E402  (the host's directory: removed at exit and on SIGTERM/SIGINT)

pb = dpapi.pb
DATA = os.environ.get("GDP_TEST_DATA") or os.path.join(SOURCE, "tests", "data")
RESOURCE = "nvidia.com/gpu"
ENDPOINT = "nvidia-gpu.sock"
WAIT = 20.0          # upper bound for any one expected event; only guards against hangs

# klog header: Lmmdd hh:mm:ss.uuuuuu
KLOG_RE = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")


class BenchError(Exception):
    pass


# ------------------------------------------------------------------ figures

def pct(values, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(math.ceil(p / 100.0 * len(s))) - 1))
    return s[k]


class Report:
    def __init__(self):
        self.rows = []

    def add(self, name, unit, values=None, target=None, reference=None, note="", **fields):
        rec = {"bench": name, "unit": unit}
        if values is not None:
            rec.update({"n": len(values), "p50": round(pct(values, 50), 3),
                        "p99": round(pct(values, 99), 3), "max": round(max(values), 3)})
        rec.update(fields)
        if target is not None:
            rec["target"] = target
        if reference is not None:
            rec["nvidia"] = reference
        if note:
            rec["note"] = note
        self.rows.append(rec)
        print(json.dumps(rec, sort_keys=False), flush=True)

    def table(self):
        print()
        print("%-46s %6s %10s %10s %10s %8s %10s %s" % (
            "figure", "n", "p50", "p99", "max/value", "unit", "target", "nvidia"))
        print("-" * 116)
        for r in self.rows:
            if "p50" in r:
                p50, p99, mx = "%.3f" % r["p50"], "%.3f" % r["p99"], "%.3f" % r["max"]
            else:
                p50 = p99 = ""
                mx = "%s" % r.get("value", "")
            extra = ""
            if "plugin_cpu_us_per_call" in r:
                extra = "  (CPU/call: plugin %s us, client %s us)" % (
                    r["plugin_cpu_us_per_call"], r["client_cpu_us_per_call"])
            print("%-46s %6s %10s %10s %10s %8s %10s %s%s" % (
                r["bench"], r.get("n", ""), p50, p99, mx, r["unit"],
                r.get("target", ""), r.get("nvidia", ""), extra))


# ------------------------------------------------------------------ host + plugin

class Host:
    """Temp dir T with the rendered host, the device-plugin dir and the control FIFO."""

    def __init__(self, build, profile):
        self.build = os.path.abspath(build)
        self.plugin = os.path.join(self.build, "src", "gpu-device-plugin")
        self.sim_dir = os.path.join(self.build, "sim", "nvml")
        self.profile = profile
        for p in (self.plugin, os.path.join(self.sim_dir, "nvml-sim-render")):
            if not os.path.exists(p):
                raise BenchError("not built: %s" % p)
        self.tmp = scratch.mkdtemp("gdp-bench-")
        self.dp = os.path.join(self.tmp, "dp")
        os.makedirs(self.dp)
        self.ctl = os.path.join(self.tmp, "nvml.ctl")
        os.mkfifo(self.ctl, 0o600)
        roots = {k: os.path.join(self.tmp, k) for k in ("sys", "proc", "dev")}
        render = [os.path.join(self.sim_dir, "nvml-sim-render"), "--profile", profile,
                  "--sysfs-root", roots["sys"], "--proc-root", roots["proc"],
                  "--dev-root", roots["dev"]]
        # A packaged driver's files (the stand-ins), so that every CDI spec carries what it
        # carries on a real node and its cost is measured. A build from before the driver
        # root stand-ins renders without one (and its specs carry no driver files anyway).
        driver = os.path.join(self.tmp, "driver")
        # Its libnvidia-ml is the simulator the plugin loaded before (not the stand-in a
        # container gets), so the plugin's own figures stay comparable with older runs.
        r = subprocess.run(render + ["--driver-root", driver, "--libnvidia-ml",
                                     os.path.join(self.sim_dir, "libnvidia-ml.so.1")],
                           capture_output=True, text=True)
        if r.returncode != 0 and "driver-root" in r.stdout + r.stderr:
            driver = None
            r = subprocess.run(render, capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError("nvml-sim-render failed: %s%s" % (r.stdout, r.stderr))
        self.roots = roots
        self.driver_root = driver
        self.extra_args = []   # given to every plugin (--metrics)
        self.kubelet_socket = os.path.join(self.dp, dpapi.KUBELET_SOCKET)
        self.plugin_socket = os.path.join(self.dp, ENDPOINT)

    def cleanup(self):
        scratch.remove(self.tmp)

    def env(self, extra=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GDP_"))}
        env.update({"LD_LIBRARY_PATH": self.sim_dir, "MOCK_NVML_CONFIG": self.profile,
                    "MOCK_NVML_CONTROL": self.ctl})
        env.update(extra or {})
        return env

    def args(self, extra=()):
        driver = ["--driver-root", self.driver_root, "--driver-root-ctr-path",
                  self.driver_root] if self.driver_root else []
        return ["--kubelet-socket", self.kubelet_socket, "--sysfs-root", self.roots["sys"],
                "--proc-root", self.roots["proc"], "--dev-root", self.roots["dev"]] + \
            driver + self.extra_args + list(extra)

    def inject(self, line):
        # The simulator holds the FIFO open O_RDWR, so this open never blocks once the
        # plugin has loaded NVML.
        fd = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


class Plugin:
    def __init__(self, host, extra_args=(), log_name="plugin.log"):
        self.log_path = os.path.join(host.tmp, log_name)
        self.log = open(self.log_path, "wb")
        self.t_spawn = time.monotonic()
        self.t_spawn_wall = time.time()  # against its log lines' own (local) timestamps
        self.proc = scratch.adopt(subprocess.Popen(
            [host.plugin] + host.args(extra_args), env=host.env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.log, close_fds=True))
        self.pid = self.proc.pid

    def log_lines(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()

    def wait_log(self, needle, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.log_lines()
            if any(needle in l for l in lines):
                return lines
            if self.proc.poll() is not None:
                break
            time.sleep(0.002)
        raise BenchError("plugin never logged %r; log:\n%s" % (needle, "\n".join(self.log_lines()[-20:])))

    def threads(self):
        return [int(t) for t in os.listdir("/proc/%d/task" % self.pid)]

    def status(self, tid=None):
        path = "/proc/%d/status" % self.pid if tid is None else "/proc/%d/task/%d/status" % (self.pid, tid)
        out = {}
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                out[k] = v.strip()
        return out

    def rss_kib(self):
        s = self.status()
        return int(s["VmRSS"].split()[0]), int(s["VmHWM"].split()[0])

    def rss_split(self):
        """RssAnon (the plugin's own pages) and RssFile (shared library pages)."""
        s = self.status()
        return {k: round(int(s[k].split()[0]) / 1024, 2) for k in ("RssAnon", "RssFile", "RssShmem")}

    def rss_by_mapping(self):
        """KiB of RSS per mapped file ([heap], [stack], anon, libraries) from smaps."""
        out = {}
        name = "anon"
        with open("/proc/%d/smaps" % self.pid) as f:
            for line in f:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    parts = line.split(None, 5)
                    name = os.path.basename(parts[5].strip()) if len(parts) > 5 else "anon"
                    name = name or "anon"
                elif first == "Rss:":
                    out[name] = out.get(name, 0) + int(line.split()[1])
        return out

    def cpu_ns(self):
        """CPU time of all threads so far, ns (schedstat: no tick granularity)."""
        total = 0
        for tid in self.threads():
            try:
                with open("/proc/%d/task/%d/schedstat" % (self.pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
        return total

    def set_affinity(self, cpus):
        for tid in self.threads():
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                pass

    def stop(self, kill=False):
        """SIGTERM (SIGKILL with kill); returns seconds until the process was gone."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return time.monotonic() - t0


def set_own_affinity(cpus):
    """Every thread of this process (grpcio's pollers included)."""
    for t in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(t), cpus)
        except (ProcessLookupError, OSError):
            pass


def klog_time(line):
    """Seconds since the start of the year from a klog header (only differences matter)."""
    m = KLOG_RE.match(line)
    if not m:
        return None
    mo, d, hh, mm, ss, us = (int(x) for x in m.groups())
    return ((((mo * 31 + d) * 24 + hh) * 60 + mm) * 60 + ss) + us / 1e6


# ------------------------------------------------------------------ the benchmark kubelet

class Kubelet:
    """Registration server. Records the monotonic arrival time of every Register. With
    dial_back it then behaves like the kubelet: dials the endpoint, asks for the options
    before answering, and watches ListAndWatch, recording the first list's time."""

    def __init__(self, host, dial_back=False):
        self.host = host
        self.dial_back = dial_back
        self.server = None
        self.registers = queue.Queue()      # (t_arrival, RegisterRequest)
        self.lists = queue.Queue()          # t of the first ListAndWatch list per dial-back
        self.channels = []
        self.generation = 0

    def _register(self, req, context):
        t = time.monotonic()
        self.registers.put((t, req))
        if self.dial_back:
            ch = dpapi.dial(os.path.join(self.host.dp, req.endpoint))
            self.channels.append(ch)
            stub = dpapi.PluginStub(ch)
            stub.GetDevicePluginOptions(pb.Empty(), timeout=10)
            threading.Thread(target=self._watch, args=(stub,), daemon=True).start()
        return pb.Empty()

    def _watch(self, stub):
        try:
            for _ in stub.ListAndWatch(pb.Empty()):
                self.lists.put(time.monotonic())
                break
        except grpc.RpcError:
            pass

    def serve(self):
        """Serves kubelet.sock; returns T0, the time right after the socket file exists.
        grpcio binds and listens under a temporary name which is renamed into place, so
        the plugin's inotify sees a socket that already accepts (the kubelet's net.Listen
        is bind+listen back to back; grpcio's add_port/start is much slower)."""
        self.generation += 1
        tmp = os.path.join(self.host.dp, ".kubelet-%d.sock" % self.generation)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((dpapi.registration_handler(self._register),))
        server.add_insecure_port(dpapi.unix_target(tmp))
        server.start()
        os.rename(tmp, self.host.kubelet_socket)
        t0 = time.monotonic()
        self.server = server
        return t0

    def stop(self):
        if self.server is not None:
            self.server.stop(grace=None).wait(10)
            self.server = None
        for ch in self.channels:
            ch.close()
        self.channels = []

    def restart(self):
        """Stop, wipe the sockets of the directory like the kubelet does, serve again."""
        self.stop()
        for name in os.listdir(self.host.dp):
            path = os.path.join(self.host.dp, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            except FileNotFoundError:
                pass
        return self.serve()

    def drain(self):
        for q in (self.registers, self.lists):
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break

    def next_register(self, timeout=WAIT):
        try:
            t, req = self.registers.get(timeout=timeout)
        except queue.Empty:
            raise BenchError("no Register within %.0f s" % timeout)
        if req.resource_name != RESOURCE:
            return self.next_register(timeout)
        return t, req

    def next_list(self, timeout=WAIT):
        try:
            return self.lists.get(timeout=timeout)
        except queue.Empty:
            raise BenchError("no ListAndWatch list within %.0f s" % timeout)


class Watch:
    """Our own ListAndWatch stream on the plugin socket; keeps (t, {id: health})."""

    def __init__(self, channel):
        self.cond = threading.Condition()
        self.updates = []
        self.call = dpapi.PluginStub(channel).ListAndWatch(pb.Empty())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for resp in self.call:
                t = time.monotonic()
                devs = {d.ID: d.health for d in resp.devices}
                with self.cond:
                    self.updates.append((t, devs))
                    self.cond.notify_all()
        except grpc.RpcError:
            pass

    def mark(self):
        with self.cond:
            return len(self.updates)

    def wait_for(self, pred, start, timeout=WAIT):
        deadline = time.monotonic() + timeout
        with self.cond:
            i = start
            while True:
                while i < len(self.updates):
                    if pred(self.updates[i][1]):
                        return i, self.updates[i][0]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError("ListAndWatch: expected update did not come; last: %s" % (
                        self.updates[-1:] if self.updates else "none"))
                self.cond.wait(left)

    def close(self):
        self.call.cancel()


def wait_socket(path, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise BenchError("%s never appeared" % path)
        time.sleep(0.001)


def serve_and_list(host, extra=()):
    """A benchmark kubelet and the plugin, once the plugin registered and the first
    ListAndWatch list arrived: (kubelet, plugin, channel, watch). The caller stops the
    plugin and the kubelet; on a failure here they are stopped before raising."""
    kub = Kubelet(host)
    kub.serve()
    p = Plugin(host, list(extra))
    try:
        kub.next_register()
        wait_socket(host.plugin_socket)
        ch = dpapi.dial(host.plugin_socket)
        watch = Watch(ch)
        watch.wait_for(lambda d: len(d) > 0, 0)
    except BaseException:
        p.stop()
        kub.stop()
        raise
    return kub, p, ch, watch


def metrics_port(p):
    """The port the plugin's metrics listener logged (--metrics-address HOST:0)."""
    line = [l for l in p.wait_log("Serving metrics and probes on") if "(port " in l][0]
    return int(re.search(r"\(port (\d+)\)", line).group(1))


# ------------------------------------------------------------------ 1. start -> registered


def median(values):
    """The middle value (the upper one of an even count)."""
    s = sorted(values)
    return s[len(s) // 2]


def switches(pid):
    """Context switches of every thread of pid so far."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                n += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            pass
    return n
