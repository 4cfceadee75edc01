#!/usr/bin/python3
"""bench-rss: where the plugin's resident memory goes, mapping by mapping.

Starts DIR/src/gpu-device-plugin the way bench-plugin.py does (rendered a100 host,
simulated NVML, benchmark kubelet in this process), waits for registration and the first
ListAndWatch list on one open stream, then reads /proc/<pid>/smaps and prints, per
object (library, executable, [heap], thread stacks, other anonymous mappings), the
resident KiB split into file-backed pages (page cache, shared with every process that
maps the same file; a freshly linked binary's pages are dirty until written back) and
anonymous pages (relocated GOT/.data, .bss, heap, stacks: this process's own). Totals are given with and without the simulated
libnvidia-ml.so.1 (the real NVML is loaded in production too; its figure is not ours).

This is a benchmark: it prints figures and asserts nothing.

With --metrics the metrics listener is on and scraped once (its keep-alive connection
open) before the figures are taken. --runs N starts the plugin N times and prints the
median of each row and of the totals: file-backed pages vary from run to run with what the
page cache holds (the kernel maps up to 64 KiB around each faulting page if it is cached).

With --api every cluster feature is on against the fake API server of tests/kube
(DIR/tests/kube/fake-apiserver: TLS 1.2 + HTTP/2, a Node with status and managedFields like a
real one): --kubeconfig, --node-name, per-node config from a --config-dir (the Node's
label selects it, so the Node watch stays open), --node-labels-patch and Events. With
--idle S the plugin is then left alone for S seconds and the context switches of all its
threads are counted (/proc/PID/task/*/status): the idle wakeups.

Usage: bench-rss.py --build DIR [--runs N] [--metrics] [--api] [--idle S] [--vma] [--json]
                    [-- EXTRA PLUGIN ARGS...]
"""

import argparse
import http.client
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_plugin", os.path.join(HERE, "bench-plugin.py"))
bp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bp)

SIM = "libnvidia-ml.so.1"


def read_smaps(pid):
    """[(start, end, perms, name, {field: kB})]"""
    maps = []
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                name = parts[5].strip() if len(parts) > 5 else ""
                maps.append((lo, hi, parts[1], name, {}))
            elif first.endswith(":") and len(line.split()) >= 2 and maps:
                try:
                    maps[-1][4][first[:-1]] = int(line.split()[1])
                except ValueError:
                    pass
    return maps


def thread_stacks(pid):
    """{tid: (comm, stack pointer)} from /proc/<pid>/task/<tid>/stat (kstkesp: field 29)
    or, when the kernel hides it, the syscall file's stack pointer."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        tid = int(t)
        try:
            with open("/proc/%d/task/%d/comm" % (pid, tid)) as f:
                comm = f.read().strip()
            with open("/proc/%d/task/%d/syscall" % (pid, tid)) as f:
                fields = f.read().split()
            sp = int(fields[-2], 16) if len(fields) >= 3 else 0
        except (OSError, ValueError):
            comm, sp = "?", 0
        out[tid] = (comm, sp)
    return out


def classify(pid):
    maps = read_smaps(pid)
    stacks = thread_stacks(pid)
    main_tid = pid
    rows = {}

    def add(key, m):
        r = rows.setdefault(key, {"rss": 0, "file": 0, "anon": 0, "size": 0, "perms": set(),
                                  "n": 0})
        f = m[4]
        r["rss"] += f.get("Rss", 0)
        r["file"] += f.get("Rss", 0) - f.get("Anonymous", 0)
        r["anon"] += f.get("Anonymous", 0)
        r["size"] += f.get("Size", 0)
        r["perms"].add(m[2])
        r["n"] += 1

    for i, m in enumerate(maps):
        lo, hi, perms, name, _ = m
        key = None
        for tid, (comm, sp) in stacks.items():
            if lo <= sp < hi:
                key = "[stack %s%s]" % (comm, " (main)" if tid == main_tid else "")
        if key is None:
            if name.startswith("/"):
                key = os.path.basename(name)
            elif name:
                key = name
            else:
                # an anonymous mapping right after a library's last mapping is its .bss
                prev = maps[i - 1] if i else None
                if prev and prev[1] == lo and prev[3].startswith("/"):
                    key = os.path.basename(prev[3]) + " (.bss)"
                elif perms == "---p":
                    key = "guard/reserved"
                else:
                    key = "anon %s %d KiB" % (perms, (hi - lo) // 1024)
        add(key, m)
    return rows


def own_libraries(plugin):
    """Basenames of the shared objects the plugin binary itself loads (ldd)."""
    out = subprocess.run(["ldd", plugin], capture_output=True, text=True, check=True).stdout
    return {os.path.basename(os.path.realpath(p)) for p in re.findall(r"(/\S+) \(0x", out)} | {
        os.path.basename(plugin)}


def nvml_share(key, own):
    """Is this row there only because NVML (here the simulator) is loaded: the library,
    its .bss, libraries only it needs (libyaml when the plugin links it statically), and
    the simulator's control thread's stack."""
    lib = key.split(" (")[0]
    if lib.startswith(SIM) or key.startswith("[stack nvml-sim"):
        return True
    return "." in lib and ".so" in lib and lib not in own


def print_rows(rows, own, out=sys.stdout):
    total = sum(r["rss"] for r in rows.values())
    sim = sum(r["rss"] for k, r in rows.items() if nvml_share(k, own))
    print("%-44s %7s %9s %9s %9s" % ("mapping (* = there for NVML)", "Rss", "file",
                                     "anon", "Size"), file=out)
    for k, r in sorted(rows.items(), key=lambda kv: -kv[1]["rss"]):
        if r["rss"] == 0:
            continue
        print("%-44s %7d %9d %9d %9d" % (("* " if nvml_share(k, own) else "") + k[:42], r["rss"],
                                         r["file"], r["anon"], r["size"]), file=out)
    anon = sum(r["anon"] for r in rows.values())
    print("total Rss %d KiB (%.2f MiB); anonymous %d KiB; without the rows marked * "
          "(the simulated NVML's mappings, its thread, libraries only it loads; its heap "
          "share stays in) %d KiB (%.2f MiB)" % (total, total / 1024, anon, total - sim,
                                                 (total - sim) / 1024), file=out)
    return total, sim


def measure(host, a):
    """One plugin start -> (VmRSS KiB, rows) once registered and settled."""
    kub, p, ch, watch = bp.serve_and_list(host, a.extra)
    try:
        if a.metrics:
            # one scrape, its keep-alive connection left open (as a Prometheus scrape is)
            port = bp.metrics_port(p)
            scrape = http.client.HTTPConnection("127.0.0.1", port, timeout=bp.WAIT)
            scrape.request("GET", "/metrics")
            r = scrape.getresponse()
            if r.status != 200 or b"gpu_device_plugin_build_info" not in r.read():
                raise bp.BenchError("/metrics did not answer")
        cpu_ms = p.cpu_ns() / 1e6  # every thread's CPU time so far: exec to registered
        with open("/proc/%d/stat" % p.pid) as f:
            minflt = int(f.read().rsplit(")", 1)[1].split()[7])
        if a.api:
            wait_api(p)
        time.sleep(a.settle)
        st = p.status()
        rows = classify(p.pid)
        vma = read_smaps(p.pid) if a.vma else []
        if a.idle:
            c0 = task_switches(p.pid)
            time.sleep(a.idle)
            c1 = task_switches(p.pid)
            print("idle %.0f s: %d context switches over %d threads (%s)" % (
                a.idle, sum(c1.values()) - sum(c0.get(t, 0) for t in c1), len(c1),
                ", ".join("%s %d" % (t, c1[t] - c0.get(t, 0)) for t in sorted(c1))))
        stacks = thread_stacks(p.pid) if a.vma else {}
        watch.close()
        ch.close()
        return int(st["VmRSS"].split()[0]), rows, vma, stacks, cpu_ms, minflt
    finally:
        p.stop()
        kub.stop()


def task_switches(pid):
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        n = 0
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if "ctxt_switches" in line:
                    n += int(line.split()[1])
        out[tid] = n
    return out


def start_api(build, d):
    """The fake API server with Node node1 labelled to pick config "ts"; returns
    (server, plugin args)."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "kube"))
    import kubetest as kt
    srv = kt.LineProc([os.path.join(build, "tests", "kube", "fake-apiserver"), d])
    port = int(srv.expect(r"^listening (\d+)$").group(1))
    srv.send("add node1")
    srv.send("label node1 nvidia.com/device-plugin.config=ts")
    kc = kt.write_kubeconfig(os.path.join(d, "kc"), "https://127.0.0.1:%d" % port,
                             ca=os.path.join(d, "ca.crt"), token="tok1")
    cdir = os.path.join(d, "configs")
    os.makedirs(cdir)
    with open(os.path.join(cdir, "default"), "w") as f:
        f.write("version: v1\n")
    with open(os.path.join(cdir, "ts"), "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 2\n")
    return srv, ["--kubeconfig", kc, "--node-name", "node1", "--config-dir", cdir,
                 "--node-labels-patch", "--events=true"]


def wait_api(p):
    """The cluster features' first round is done: the config the Node's label picks is
    applied and the labels are published. Until then the process has not yet run (or
    mapped) what it runs from then on; under valgrind that takes seconds."""
    for needle in ("Applied per-node config", "Published "):
        p.wait_log(needle)


def median(values):
    s = sorted(values)
    return s[len(s) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--profile", default=os.path.join(bp.DATA, "nvml-mock-profiles", "a100.yaml"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--vma", action="store_true", help="also every mapping, one line each")
    ap.add_argument("--metrics", action="store_true",
                    help="metrics listener on (127.0.0.1:0), scraped once before measuring")
    ap.add_argument("--runs", type=int, default=1,
                    help="starts to take the median of (file-backed pages vary with the page cache)")
    ap.add_argument("--settle", type=float, default=0.3, help="seconds after the first list")
    ap.add_argument("--api", action="store_true", help="every cluster feature on (fake API server)")
    ap.add_argument("--idle", type=float, default=0, help="then count wakeups over S seconds")
    ap.add_argument("extra", nargs="*", help="extra plugin arguments (after --)")
    a = ap.parse_args()
    srv = None
    if a.api:
        srv, args = start_api(a.build, bp.scratch.mkdtemp("bench-rss-api-"))
        a.extra = args + a.extra
    if a.metrics:
        a.extra = ["--metrics-address", "127.0.0.1:0"] + a.extra
    host = bp.Host(a.build, a.profile)
    own = own_libraries(host.plugin)
    try:
        runs = [measure(host, a) for _ in range(max(1, a.runs))]
    finally:
        host.cleanup()
        if srv:
            srv.stop()
    # per-row medians over the runs
    keys = {k for _, rows, _, _, _, _ in runs for k in rows}
    rows = {}
    for k in keys:
        rs = [r[1].get(k) for r in runs]
        rs = [r for r in rs if r] or [None]
        rows[k] = {f: median([r[f] if r else 0 for r in rs]) for f in ("rss", "file", "anon", "size")}
    totals = [sum(r["rss"] for r in rws.values()) for _, rws, _, _, _, _ in runs]
    sims = [sum(r["rss"] for k, r in rws.items() if nvml_share(k, own)) for _, rws, _, _, _, _ in runs]
    print("%s, %d run(s)%s%s; VmRSS per run (KiB): %s" % (
        host.plugin, len(runs), ", metrics on" if a.metrics else "",
        ", API features on" if a.api else "", " ".join(str(r[0]) for r in runs)))
    print_rows(rows, own)
    total, without = median(totals), median([t - s for t, s in zip(totals, sims)])
    print("median of the runs: total %d KiB (%.2f MiB), without NVML's share %d KiB (%.2f MiB)" % (
        total, total / 1024, without, without / 1024))
    print("median CPU time from exec to the first device list (all threads, schedstat): "
          "%.2f ms; minor page faults: %d" % (median([r[4] for r in runs]),
                                              median([r[5] for r in runs])))
    if a.vma:
        _, _, vma, stacks, _, _ = runs[-1]
        for lo, hi, perms, name, f in vma:
            print("%012x %7d KiB %s Rss %5d anon %5d %s" % (
                lo, (hi - lo) // 1024, perms, f.get("Rss", 0), f.get("Anonymous", 0), name))
        for tid, (comm, sp) in stacks.items():
            print("thread %d %s sp %x" % (tid, comm, sp))
    if a.json:
        print(json.dumps({"bench": "rss", "runs": len(runs), "metrics": a.metrics,
                          "vmrss_kib": [r[0] for r in runs], "rss_kib": total,
                          "rss_without_nvml_kib": without,
                          "cpu_ms_to_first_list": median([r[4] for r in runs]),
                          "minflt_to_first_list": median([r[5] for r in runs]),
                          "by_mapping": {k: r["rss"] for k, r in rows.items()}}))


if __name__ == "__main__":
    try:
        main()
    except bp.BenchError as e:
        print("bench-rss: %s" % e, file=sys.stderr)
        sys.exit(1)
