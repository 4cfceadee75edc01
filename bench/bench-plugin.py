#!/usr/bin/python3
"""bench-plugin: figures for the product targets, measured on the real binary.

Runs DIR/src/gpu-device-plugin on the simulated NVML (a rendered a100 host) against a
benchmark kubelet served in this process with grpcio, and prints a table plus one JSON
line per figure (lines starting with `{`):

  1. start -> registered (fork/exec -> Register arrives; and the plugin's own log clock)
  2. RSS after registration and after 10,000 Allocate calls
  3. Allocate latency, Python grpcio client and the grpc-go client, pinned and unpinned
  4. re-registration after a kubelet restart
  5. health event (Xid through the simulator's control FIFO) -> ListAndWatch update
  6. idle context switches per thread with an open ListAndWatch stream

The benchmark kubelet answers Register at once and does not dial back, so the figures
measure the plugin; the "dial-back" variants behave like the real kubelet (dial the
endpoint, GetDevicePluginOptions, ListAndWatch) and are reported separately.

This is a benchmark, not a test: it prints figures and asserts nothing about time. It
fails (exit 1) only when the plugin does not do the thing being measured.

With --metrics every plugin runs with its metrics listener on (--metrics-address
127.0.0.1:0), so the figures can be set side by side with the default (off); the idle
section then scrapes /metrics once and keeps that keep-alive connection open through the
idle window.

Usage: bench-plugin.py --build DIR [--quick] [--only NAME[,NAME...]] [--profile P] [--metrics]
"""

import argparse
import http.client
import json
import os
import re
import resource
import subprocess
import sys
import time

# The harness; re-exported, since bench-rss.py and link-order.py load this file as `bp`.
from benchlib import *  # noqa: E402,F401,F403
from benchlib import dpapi  # noqa: E402

def bench_start(host, rep, n):
    kub = Kubelet(host)
    kub.serve()
    spawn, logclock, rpc, sent, stops = [], [], [], [], []
    try:
        for _ in range(n):
            kub.drain()
            p = Plugin(host)
            try:
                t, _ = kub.next_register()
                spawn.append((t - p.t_spawn) * 1000.0)
                lines = p.wait_log("Registered device plugin")
            finally:
                stops.append(p.stop() * 1000.0)
            first = next((klog_time(l) for l in lines if klog_time(l) is not None), None)
            reg = next(l for l in lines if "Registered device plugin" in l)
            logclock.append((klog_time(reg) - first) * 1000.0)
            m = re.search(r"\((\d+) us\)", reg)
            if m:
                rpc.append(int(m.group(1)) / 1000.0)
                sent.append(logclock[-1] - rpc[-1])
    finally:
        kub.stop()
    rep.add("start->Register arrives (fork/exec clock)", "ms", spawn, target=5, reference=10,
            note="time.monotonic() before Popen -> Register handler entered; includes "
                 "Python's fork/exec and grpcio's handler dispatch")
    rep.add("start->Registered (plugin log clock)", "ms", logclock, target=5,
            note="first klog line -> 'Registered' klog line of the same process; "
                 "excludes exec, dynamic loading before main, and includes the Register RPC")
    if rpc:
        rep.add("start->Register sent (plugin log clock)", "ms", sent,
                note="the line above minus the Register RPC: what the plugin itself spends "
                     "before it calls the kubelet")
        rep.add("  Register RPC round trip (plugin's figure)", "ms", rpc,
                note="the '(N us)' of the Registered line: connect + RPC to the bench "
                     "kubelet, i.e. mostly grpcio's server")

    rep.add("SIGTERM->exit", "ms", stops,
            note="SIGTERM -> process reaped; includes removing the socket and closing NVML")

    # The same, against a kubelet that dials back, up to the first device list.
    kub = Kubelet(host, dial_back=True)
    kub.serve()
    lists = []
    try:
        for _ in range(max(5, n // 3)):
            kub.drain()
            p = Plugin(host)
            try:
                kub.next_register()
                lists.append((kub.next_list() - p.t_spawn) * 1000.0)
            finally:
                p.stop()
                kub.stop()
                kub.serve()
    finally:
        kub.stop()
    rep.add("start->first ListAndWatch list (dial-back)", "ms", lists,
            note="fork/exec -> Register -> kubelet dials back, GetDevicePluginOptions, "
                 "ListAndWatch first message (grpcio kubelet costs included)")


# ------------------------------------------------------------------ 2+3. RSS, Allocate

def go_client(host):
    path = os.path.join(host.build, "tools", "go-client", "go-client")
    return path if os.path.exists(path) else None


def run_go(host, n, dev, cpus):
    """grpc-go client run; the child inherits this thread's CPU mask."""
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run([go_client(host), "bench-allocate", host.plugin_socket, str(n), dev],
                           capture_output=True, text=True, timeout=300)
    finally:
        os.sched_setaffinity(0, own)
    if r.returncode != 0:
        raise BenchError("go-client failed: %s" % r.stderr)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # The whole process, warm-up and dial included: an upper bound per call.
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    out["client_cpu_us_per_call"] = round(cpu * 1e6 / (n + 200), 1)
    return out


def py_allocate(p, stub, req, n, warm):
    """Latencies (us) and CPU per call (us) of the plugin and of this process."""
    for _ in range(warm):
        stub.Allocate(req, timeout=10)
    lat = []
    p0, c0 = p.cpu_ns(), time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        stub.Allocate(req, timeout=10)
        lat.append((time.perf_counter() - t0) * 1e6)
    cpu = {"plugin_cpu_us_per_call": round((p.cpu_ns() - p0) / 1e3 / n, 1),
           "client_cpu_us_per_call": round((time.process_time() - c0) * 1e6 / n, 1)}
    return lat, cpu


def bench_allocate(host, rep, n):
    kub, p, ch, watch = serve_and_list(host)
    all_cpus = os.sched_getaffinity(0)
    try:
        dev = sorted(watch.updates[0][1])[0]
        time.sleep(0.2)
        rss, hwm = p.rss_kib()
        rep.add("RSS after registration (VmRSS)", "MiB", value=round(rss / 1024, 2), target=3,
                reference="15-20", **p.rss_split())
        rep.add("RSS after registration (VmHWM)", "MiB", value=round(hwm / 1024, 2), target=3)
        by = sorted(p.rss_by_mapping().items(), key=lambda kv: -kv[1])
        rep.add("RSS by mapping after registration", "KiB", value=sum(v for _, v in by),
                by_mapping=dict(by), note="from /proc/<pid>/smaps; the simulated NVML "
                "(libnvidia-ml.so.1 + its profile data on the heap) counts against the plugin")
        for name, kib in by[:8]:
            rep.add("  %s" % name, "KiB", value=kib)

        stub = dpapi.PluginStub(ch)
        req = dpapi.allocate_request([[dev]])
        lat, cpu = py_allocate(p, stub, req, n, warm=500)
        rss, hwm = p.rss_kib()
        rep.add("RSS after %d Allocate (VmRSS)" % (n + 500), "MiB", value=round(rss / 1024, 2),
                target=3, reference="15-20", **p.rss_split())
        rep.add("RSS after %d Allocate (VmHWM)" % (n + 500), "MiB", value=round(hwm / 1024, 2),
                target=3)
        rep.add("Allocate, Python grpcio, unpinned", "us", lat, target=100, reference=418,
                note="1 GPU per request, sequential on one channel, after 500 warm-up calls",
                **cpu)

        pinned = len(all_cpus) >= 2
        if pinned:
            cpus = sorted(all_cpus)
            p.set_affinity({cpus[1]})
            set_own_affinity({cpus[0]})
            try:
                lat, cpu = py_allocate(p, stub, req, n, warm=500)
            finally:
                set_own_affinity(all_cpus)
            rep.add("Allocate, Python grpcio, pinned", "us", lat, target=100, reference=418,
                    note="plugin threads on CPU %d, every client thread on CPU %d" % (cpus[1], cpus[0]),
                    **cpu)
            p.set_affinity(all_cpus)

        if go_client(host):
            c0 = p.cpu_ns()
            g = run_go(host, n, dev, all_cpus)
            rep.add("Allocate, grpc-go, unpinned", "us", target=100, reference=284, n=g["calls"],
                    p50=g["p50_us"], p99=g["p99_us"], max=g["max_us"],
                    plugin_cpu_us_per_call=round((p.cpu_ns() - c0) / 1e3 / (n + 200), 1),
                    client_cpu_us_per_call=g["client_cpu_us_per_call"],
                    note="go-client bench-allocate (200 warm-up calls)")
            if pinned:
                p.set_affinity({cpus[1]})
                c0 = p.cpu_ns()
                try:
                    g = run_go(host, n, dev, {cpus[0]})
                finally:
                    p.set_affinity(all_cpus)
                rep.add("Allocate, grpc-go, pinned", "us", target=100, reference=284,
                        n=g["calls"], p50=g["p50_us"], p99=g["p99_us"], max=g["max_us"],
                        plugin_cpu_us_per_call=round((p.cpu_ns() - c0) / 1e3 / (n + 200), 1),
                        client_cpu_us_per_call=g["client_cpu_us_per_call"],
                        note="plugin on CPU %d, go-client on CPU %d" % (cpus[1], cpus[0]))
        else:
            rep.add("Allocate, grpc-go", "us", value="skipped",
                    note="DIR/tools/go-client/go-client not built (needs Debian golang + grpc-go)")
        rss, hwm = p.rss_kib()
        rep.add("RSS at the end of the Allocate runs (VmRSS)", "MiB", value=round(rss / 1024, 2),
                target=3)
        watch.close()
        ch.close()
    finally:
        p.stop()
        kub.stop()


# ------------------------------------------------------------------ 4. kubelet restarts

def bench_restart(host, rep, n):
    for dial_back in (False, True):
        kub = Kubelet(host, dial_back=dial_back)
        kub.serve()
        p = Plugin(host)
        reg, lists = [], []
        try:
            kub.next_register()
            if dial_back:
                kub.next_list()
            for _ in range(n if not dial_back else max(10, n // 2)):
                kub.drain()
                t0 = kub.restart()
                t, _ = kub.next_register()
                reg.append((t - t0) * 1000.0)
                if dial_back:
                    lists.append((kub.next_list() - t0) * 1000.0)
        finally:
            p.stop()
            kub.stop()
        if not dial_back:
            rep.add("kubelet restart->Register arrives", "ms", reg, target=2, reference=1.7,
                    note="T0 right after the new kubelet.sock exists (already listening)")
            bench_restart_go(host, rep, n * 20)
        else:
            rep.add("kubelet restart->Register arrives (dial-back)", "ms", reg, target=2,
                    reference=1.7)
            rep.add("kubelet restart->first ListAndWatch list (dial-back)", "ms", lists,
                    note="includes the grpcio kubelet's own dial and GetDevicePluginOptions")


def bench_restart_go(host, rep, n):
    """The kubelet's own way of restarting, by grpc-go: wipe the sockets, net.Listen
    (bind then listen: a plugin dialling at the bind is refused), serve Registration.
    T0 is the Listen call."""
    if not go_client(host):
        print("# (grpc-go kubelet restarts skipped: go-client not built)")
        return
    p = Plugin(host)
    try:
        r = subprocess.run([go_client(host), "kubelet-restarts", host.dp, str(n)],
                           capture_output=True, text=True, timeout=600)
    finally:
        p.stop()
    if r.returncode != 0:
        raise BenchError("go-client kubelet-restarts failed: %s" % r.stderr)
    reg = [int(x) / 1000.0 for x in r.stdout.split()]
    rep.add("kubelet restart->Register (grpc-go kubelet)", "ms", reg, target=2, reference=1.7,
            note="%d restarts; T0 = net.Listen of the new kubelet.sock" % len(reg))


# ------------------------------------------------------------------ 5. health events

HEALTH_CONFIG = """version: v1
health:
  quietPeriod: 10ms
  maxQuietPeriod: 10ms
  flapWindow: 1ms
  xids:
    recover: [48]
"""


def bench_health(host, rep, n):
    cfg = os.path.join(host.tmp, "health.yaml")
    with open(cfg, "w") as f:
        f.write(HEALTH_CONFIG)
    kub, p, ch, watch = serve_and_list(host, ["--config-file", cfg])
    lat = []
    try:
        uuids = sorted(watch.updates[0][1])
        for i in range(n):
            u = uuids[i % len(uuids)]
            mark = watch.mark()
            t0 = time.monotonic()
            host.inject("xid %s 48" % u)
            idx, t = watch.wait_for(lambda d: d.get(u) == "Unhealthy", mark)
            lat.append((t - t0) * 1000.0)
            watch.wait_for(lambda d: all(h == "Healthy" for h in d.values()), idx + 1)
        watch.close()
        ch.close()
    finally:
        p.stop()
        kub.stop()
    rep.add("Xid 48 -> ListAndWatch Unhealthy", "ms", lat, target=1, reference=1.3,
            note="FIFO write -> stream message with that GPU Unhealthy; 48 set to 'recover' "
                 "with a 10ms quiet period so each GPU comes back; GPUs taken in turn")
    if go_client(host):
        bench_health_go(host, rep, n)


def bench_health_go(host, rep, n):
    """The same events, received by the grpc-go client, which stamps each ListAndWatch
    message with CLOCK_MONOTONIC as it arrives: Python's scheduling stays out of the
    figure (its only part is the FIFO write)."""
    cfg = os.path.join(host.tmp, "health-go.yaml")
    with open(cfg, "w") as f:
        f.write(HEALTH_CONFIG)
    kub = Kubelet(host)
    kub.serve()
    p = Plugin(host, ["--config-file", cfg], log_name="plugin-health-go.log")
    lat = []
    watcher = None
    try:
        kub.next_register()
        wait_socket(host.plugin_socket)
        watcher = subprocess.Popen([go_client(host), "watch", host.plugin_socket],
                                   stdout=subprocess.PIPE, text=True)

        def next_line():
            line = watcher.stdout.readline()
            if not line:
                raise BenchError("go-client watch ended")
            t, ids = line.split()
            return int(t), set() if ids == "-" else set(ids.split(","))

        next_line()  # the initial full list
        ch = dpapi.dial(host.plugin_socket)
        w = Watch(ch)
        w.wait_for(lambda d: len(d) > 0, 0)
        uuids = sorted(w.updates[0][1])
        w.close()
        ch.close()
        for i in range(n):
            u = uuids[i % len(uuids)]
            t0 = time.monotonic_ns()
            host.inject("xid %s 48" % u)
            while True:
                t, bad = next_line()
                if u in bad:
                    lat.append((t - t0) / 1e6)
                    break
            while bad:
                _, bad = next_line()
    finally:
        if watcher:
            watcher.kill()
            watcher.wait()
        p.stop()
        kub.stop()
    rep.add("Xid 48 -> ListAndWatch Unhealthy (grpc-go)", "ms", lat, target=1, reference=1.3,
            note="FIFO write -> message received by the grpc-go client (its own clock)")


# ------------------------------------------------------------------ 6. idle wakeups

def ctx_switches(p):
    out = {}
    for tid in p.threads():
        try:
            s = p.status(tid)
        except FileNotFoundError:
            continue
        try:
            with open("/proc/%d/task/%d/wchan" % (p.pid, tid)) as f:
                wchan = f.read().strip()
        except OSError:
            wchan = "?"
        # Threads are unnamed; where each one sleeps tells which it is.
        out[tid] = ("%s (%s)" % (s["Name"], wchan), int(s["voluntary_ctxt_switches"]),
                    int(s["nonvoluntary_ctxt_switches"]))
    return out


def bench_idle(host, rep, seconds):
    idle_run(host, rep, seconds, None)
    # What one periodic NVML wait costs, for comparison with the default.
    idle_run(host, rep, seconds, "1s")


def idle_run(host, rep, seconds, wait_timeout):
    extra = []
    if wait_timeout:
        cfg = os.path.join(host.tmp, "idle.yaml")
        with open(cfg, "w") as f:
            f.write("version: v1\nhealth:\n  waitTimeout: %s\n" % wait_timeout)
        extra = ["--config-file", cfg]
    kub, p, ch, watch = serve_and_list(host, extra)
    scrape = None
    try:
        if host.extra_args:
            # one scrape, and its keep-alive connection left open while idle
            scrape = http.client.HTTPConnection("127.0.0.1", metrics_port(p), timeout=WAIT)
            scrape.request("GET", "/metrics")
            r = scrape.getresponse()
            if r.status != 200 or b"gpu_device_plugin_build_info" not in r.read():
                raise BenchError("/metrics did not answer")
        time.sleep(1.0)
        a = ctx_switches(p)
        time.sleep(seconds)
        b = ctx_switches(p)
        watch.close()
        ch.close()
        if scrape:
            scrape.close()
    finally:
        p.stop()
        kub.stop()
    scale = 60.0 / seconds
    total = 0.0
    per = []
    for tid in sorted(set(a) | set(b)):
        name = (b.get(tid) or a.get(tid))[0]
        va, na = a.get(tid, (name, 0, 0))[1:]
        vb, nb = b.get(tid, (name, va, na))[1:]
        v, nv = (vb - va) * scale, (nb - na) * scale
        total += v + nv
        per.append({"tid": tid, "name": name, "voluntary_per_min": round(v, 1),
                    "nonvoluntary_per_min": round(nv, 1), "new": tid not in a, "gone": tid not in b})
    what = "health.waitTimeout %s" % (wait_timeout or "default")
    rep.add("idle context switches, all threads, %s%s" % (
                what, ", metrics on" if host.extra_args else ""), "per min", value=round(total, 1),
            target=0, reference=633, window_s=seconds, threads=per,
            note="registered, one open ListAndWatch stream%s, nothing else happening" % (
                " and one idle keep-alive /metrics connection" if host.extra_args else ""))
    for t in per:
        rep.add("  thread %d %s" % (t["tid"], t["name"]), "per min",
                value=round(t["voluntary_per_min"] + t["nonvoluntary_per_min"], 1),
                voluntary=t["voluntary_per_min"], nonvoluntary=t["nonvoluntary_per_min"])


# ------------------------------------------------------------------ main

SECTIONS = ("start", "allocate", "restart", "health", "idle")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--quick", action="store_true", help="fewer samples, 10 s idle window")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma list of " + ",".join(SECTIONS))
    ap.add_argument("--profile", default=os.path.join(DATA, "nvml-mock-profiles", "a100.yaml"))
    ap.add_argument("--metrics", action="store_true",
                    help="run the plugin with its metrics listener on (127.0.0.1:0)")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error("unknown section %r" % s)
    if a.quick:
        counts = {"start": 10, "allocate": 2000, "restart": 20, "health": 50, "idle": 8}
    else:
        counts = {"start": 30, "allocate": 10000, "restart": 50, "health": 200, "idle": 60}

    host = Host(a.build, a.profile)
    if a.metrics:
        host.extra_args = ["--metrics-address", "127.0.0.1:0"]
    rep = Report()
    ver = subprocess.run([host.plugin, "--version"], capture_output=True, text=True).stdout.strip()
    print("# bench-plugin: %s (%s), profile %s, %d CPUs, load %s%s" % (
        host.plugin, ver.replace("\n", " "), os.path.basename(a.profile), os.cpu_count(),
        " ".join("%.2f" % x for x in os.getloadavg()), " (quick)" if a.quick else "") +
        (", metrics listener on" if a.metrics else ""), flush=True)
    try:
        for s in only:
            {"start": bench_start, "allocate": bench_allocate, "restart": bench_restart,
             "health": bench_health, "idle": bench_idle}[s](host, rep, counts[s])
    except BenchError as e:
        print("bench-plugin: %s" % e, file=sys.stderr)
        return 1
    finally:
        host.cleanup()
    rep.table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
