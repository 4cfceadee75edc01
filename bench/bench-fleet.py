#!/usr/bin/python3
"""What a fleet of plugins costs the control plane (issue 18 item 8): N plugin processes, each
its own simulated node (the simulated NVML, a node name of its own, labels patched onto its
Node, per-node config, Events on; no kubelet: registration retries, which the API never
sees), against ONE real kube-apiserver + etcd (the kube-apiserver test suite's fixture:
the e2e cache's v1.20, or $KUBE_BIN_DIR's, any release 1.20-1.36; with an audit log of
every request), and a kubelet-like status writer PATCHing
each Node's status (conditions + images, ~10 KB) every --status-period seconds.

Measured (figures only, nothing judged; a Markdown table at the end):
  - requests per node per minute at steady state, by verb (the audit log, user agent
    gpu-device-plugin/*), after the start has settled;
  - watch requests per minute over the run (renewals: spread, not in lock-step);
  - the reconnect curve after an API-server restart: plugin requests per second for 60 s;
  - the API server's CPU (share of one core) and RSS over the steady window;
  - bytes the plugins received per node per minute (their sockets to the API server,
    tcp_info bytes_received through `ss`) while the status writer runs;
  - the plugins' mean RSS.

usage: python3 bench/bench-fleet.py [--nodes N] [--steady SECONDS] [--status-period S]
                                    [--build DIR]
Defaults: 300 nodes, 600 s steady (the first watch renewals come 300-600 s after the
start), 10 s. Raises fs.inotify.max_user_instances for itself (each plugin watches its
config directory) and restores it. Needs root for that, the e2e cache's kube-apiserver and
Debian's etcd; takes the kube-apiserver test suite's lock (its ports are fixed)."""
import argparse
import collections
import datetime
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "kube"))
import kubetest as kt  # noqa: E402
import test_kube_apiserver as ta  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, ".."))
UA = "gpu-device-plugin/"
INOTIFY = "/proc/sys/fs/inotify/max_user_instances"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
- level: Metadata
"""


class AuditedCluster(ta.Cluster):
    """The test suite's etcd + kube-apiserver, with every request in an audit log (one
    RequestReceived line each)."""

    def start(self, name, argv):
        if name == "kube-apiserver":
            policy = os.path.join(self.dir, "audit-policy.yaml")
            with open(policy, "w") as f:
                f.write(AUDIT_POLICY)
            self.audit = os.path.join(self.dir, "audit.log")
            argv = argv + ["--audit-policy-file", policy, "--audit-log-path", self.audit,
                           "--audit-log-maxsize", "0", "--max-requests-inflight", "800",
                           "--max-mutating-requests-inflight", "400"]
        super().start(name, argv)

    def pid(self):
        return self.procs["kube-apiserver"].pid


def audit_events(path, since_offset=0):
    """(end offset, [(unix time, verb, resource, user agent)]) of the plugins' requests."""
    out = []
    with open(path, "rb") as f:
        f.seek(since_offset)
        data = f.read()
    end = since_offset + data.rfind(b"\n") + 1
    for line in data[:end - since_offset].splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        ua = ev.get("userAgent", "")
        if not ua.startswith(UA):
            continue
        t = datetime.datetime.strptime(ev["requestReceivedTimestamp"][:26].rstrip("Z"),
                                       "%Y-%m-%dT%H:%M:%S.%f").replace(
                                           tzinfo=datetime.timezone.utc).timestamp()
        res = ev.get("objectRef", {}).get("resource", "")
        sub = ev.get("objectRef", {}).get("subresource")
        out.append((t, ev.get("verb", ""), res + ("/" + sub if sub else "")))
    return end, out


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    return kt.rss_kib(pid) / 1024.0


def bytes_received(port, pids):
    """Sum of tcp_info bytes_received over the processes' established connections to port
    (not the status writer's, nor the API server's own loopback client)."""
    r = subprocess.run(["ss", "-Htinp", "state", "established", "( dport = :%d )" % port],
                       capture_output=True, text=True)
    total, mine = 0, False
    for line in r.stdout.splitlines():
        m = re.search(r"pid=(\d+)", line)
        if m:
            mine = int(m.group(1)) in pids
        if mine:
            total += sum(int(x) for x in re.findall(r"bytes_received:(\d+)", line))
    return total


class StatusWriter:
    """A kubelet-like writer: every period, a strategic-merge PATCH of each Node's status
    (4 conditions with fresh heartbeats + 60 images, ~10 KB), over a few keep-alive
    connections."""

    def __init__(self, cluster, names, period, threads=4):
        self.cluster, self.period = cluster, period
        self.stop_ev = threading.Event()
        self.writes = 0
        self.failures = 0
        self.lock = threading.Lock()
        self.images = [{"names": ["registry.example/team/image-%d:v1@sha256:%064x" % (j, j)],
                        "sizeBytes": (j + 1) << 20} for j in range(60)]
        self.threads = [threading.Thread(target=self.run, args=(names[i::threads],), daemon=True)
                        for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()

    def conn(self):
        ctx = ssl.create_default_context(cafile=self.cluster.ca)
        return http.client.HTTPSConnection("127.0.0.1", ta.API_PORT, context=ctx, timeout=10)

    def body(self):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        conds = [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now,
                  "lastTransitionTime": "2026-01-01T00:00:00Z"}
                 for t, s, r, m in (("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                     "kubelet has sufficient memory available"),
                                    ("DiskPressure", "False", "KubeletHasNoDiskPressure",
                                     "kubelet has no disk pressure"),
                                    ("PIDPressure", "False", "KubeletHasSufficientPID",
                                     "kubelet has sufficient PID available"),
                                    ("Ready", "True", "KubeletReady",
                                     "kubelet is posting ready status"))]
        return json.dumps({"status": {"conditions": conds, "images": self.images}})

    def run(self, names):
        c = None
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            for n in names:
                if self.stop_ev.is_set():
                    return
                try:
                    c = c or self.conn()
                    c.request("PATCH", "/api/v1/nodes/%s/status" % n, self.body(), {
                        "Authorization": "Bearer " + ta.ADMIN, "User-Agent": "kubelet-like/1",
                        "Content-Type": "application/strategic-merge-patch+json"})
                    r = c.getresponse()
                    r.read()
                    with self.lock:
                        self.writes += 1
                        self.failures += r.status != 200
                except (OSError, http.client.HTTPException):
                    with self.lock:
                        self.failures += 1
                    c = None
            nxt += self.period
            self.stop_ev.wait(max(0.0, nxt - time.monotonic()))

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=15)


def object_sizes(cluster, name):
    """(whole Node, PartialObjectMetadata, its managedFields) of one node as compact JSON."""
    ctx = ssl.create_default_context(cafile=cluster.ca)
    out = []
    for accept in ("application/json",
                   "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"):
        c = http.client.HTTPSConnection("127.0.0.1", ta.API_PORT, context=ctx, timeout=10)
        c.request("GET", "/api/v1/nodes/" + name, headers={"Authorization": "Bearer " + ta.ADMIN,
                                                            "Accept": accept})
        out.append(json.loads(c.getresponse().read()))
        c.close()
    size = lambda o: len(json.dumps(o, separators=(",", ":")))  # noqa: E731
    return size(out[0]), size(out[1]), size(out[1]["metadata"].get("managedFields", []))


def per_minute(events, t0, t1):
    return {k: v / ((t1 - t0) / 60.0) for k, v in
            collections.Counter((verb, res) for t, verb, res in events if t0 <= t < t1).items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--steady", type=int, default=600)
    ap.add_argument("--status-period", type=float, default=10.0)
    ap.add_argument("--build", default=os.environ.get("GDP_BUILD_DIR",
                                                      os.path.join(SOURCE, "build-test")))
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    plugin = os.path.join(build, "src", "gpu-device-plugin")
    sim = os.path.join(build, "sim", "nvml")
    api, etcd = ta.find_bins()
    if not api or not etcd or not os.path.exists(plugin):
        sys.exit("needs kube-apiserver (e2e cache), etcd and %s" % plugin)

    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    end = time.monotonic() + ta.LOCK_WAIT
    while True:
        try:
            lock.bind("\0gdp-kube-apiserver.lock")
            break
        except OSError:
            if time.monotonic() > end:
                sys.exit("@gdp-kube-apiserver.lock held by another run")
            time.sleep(0.5)

    with open(INOTIFY) as f:
        inotify_before = int(f.read())
    want = inotify_before + a.nodes + 64
    with open(INOTIFY, "w") as f:
        f.write(str(want))
    cluster = AuditedCluster(api, etcd)
    procs = []
    try:
        run(a, cluster, plugin, sim, procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        cluster.down()
        with open(INOTIFY, "w") as f:
            f.write(str(inotify_before))


def run(a, cluster, plugin, sim, procs):
    n = a.nodes
    d = cluster.dir
    cluster.start_etcd()
    cluster.start_apiserver()
    profile = os.path.join(SOURCE, "tests", "data", "nvml-mock-profiles", "t4.yaml")
    roots = {k: os.path.join(d, "host", k) for k in ("sys", "proc", "dev")}
    subprocess.run([os.path.join(sim, "nvml-sim-render"), "--profile", profile,
                    "--sysfs-root", roots["sys"], "--proc-root", roots["proc"],
                    "--dev-root", roots["dev"]], check=True, capture_output=True)
    configs = os.path.join(d, "configs")
    os.mkdir(configs)
    for name, text in (("default", "version: v1\n"), ("ts", kt.TS_CONFIG)):
        with open(os.path.join(configs, name), "w") as f:
            f.write(text)
    kubeconfig = kt.write_kubeconfig(os.path.join(d, "kubeconfig"),
                                     "https://127.0.0.1:%d" % ta.API_PORT, ca=cluster.ca,
                                     token=ta.ADMIN)
    names = ["fleet-%04d" % i for i in range(n)]
    for i, name in enumerate(names):
        cluster.admin("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {kt.CONFIG_LABEL: "ts"} if i % 2 else {}}})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_NVML", "GDP_"))}
    env.update({"LD_LIBRARY_PATH": sim, "MOCK_NVML_CONFIG": profile})
    t_start = time.time()
    for name in names:
        nd = os.path.join(d, "nodes", name)
        os.makedirs(os.path.join(nd, "dp"))
        log = open(os.path.join(nd, "plugin.log"), "wb")
        procs.append(kt.scratch.adopt(subprocess.Popen(
            [plugin, "--kubelet-socket", os.path.join(nd, "dp", "kubelet.sock"),
             "--sysfs-root", roots["sys"], "--proc-root", roots["proc"], "--dev-root",
             roots["dev"], "--kubeconfig", kubeconfig, "--node-name", name, "--gfd",
             "--node-labels-patch", "--config-dir", configs, "--events=true", "-v", "0"],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)))
        log.close()
    print("%d plugins started in %.1f s" % (n, time.time() - t_start), file=sys.stderr)
    # Settled: every plugin has its watch (the audit log shows N watch requests).
    deadline = time.monotonic() + 300
    while True:
        _, evs = audit_events(cluster.audit)
        if sum(1 for t, v, r in evs if v == "watch") >= n or time.monotonic() > deadline:
            break
        time.sleep(2)
    dead = [p for p in procs if p.poll() is not None]
    if dead:
        raise SystemExit("%d plugins exited; see %s/nodes/*/plugin.log" % (len(dead), d))
    print("watches up %.1f s after the start" % (time.time() - t_start), file=sys.stderr)

    writer = StatusWriter(cluster, names, a.status_period)
    time.sleep(30)  # the start's labels, annotations and Events done
    writer.start()
    t0 = time.time()
    pids = {p.pid for p in procs}
    cpu0, rx0 = cpu_s(cluster.pid()), bytes_received(ta.API_PORT, pids)
    api_rss = []
    while time.time() - t0 < a.steady:
        time.sleep(min(30, a.steady - (time.time() - t0)))
        api_rss.append(rss_mib(cluster.pid()))
    t1 = time.time()
    cpu1, rx1 = cpu_s(cluster.pid()), bytes_received(ta.API_PORT, pids)
    writer.stop()
    sizes = object_sizes(cluster, names[0])
    plugin_rss = [rss_mib(p.pid) for p in procs]
    off, evs = audit_events(cluster.audit)
    steady = per_minute(evs, t0, t1)
    watch_minutes = collections.Counter(int((t - t_start) // 60) for t, v, r in evs if v == "watch")

    # Restart: SIGTERM, start again; the reconnect curve from the audit log.
    t_stop = time.time()
    cluster.stop("kube-apiserver")
    cluster.start_apiserver()
    t_up = time.time()
    time.sleep(60)
    _, after = audit_events(cluster.audit, off)
    curve = collections.Counter(int(t - t_stop) for t, v, r in after if t_stop <= t < t_up + 60)
    by_verb = collections.Counter(v for t, v, r in after if t >= t_stop)

    minutes = (t1 - t0) / 60.0
    total = sum(steady.values())
    print("\n## Fleet: %d plugins, one kube-apiserver v%d.%d + etcd, %d s steady, status writer "
          "every %g s\n" % ((n,) + ta.apiserver_version(cluster.apiserver) + (a.steady, a.status_period)))
    print("| figure | value |")
    print("|---|---|")
    print("| requests per node per minute, steady (all verbs) | %.3f |" % (total / n))
    for (verb, res), v in sorted(steady.items()):
        print("| … %s %s | %.3f per node per minute |" % (verb, res, v / n))
    print("| watch requests per minute since the start (minute: count) | %s |" %
          ", ".join("%d: %d" % (m, c) for m, c in sorted(watch_minutes.items())))
    peak = max(curve.values()) if curve else 0
    print("| after a restart (SIGTERM to ready: %.1f s): plugin requests until 60 s after ready | %d (%.2f per node; busiest second %d) |"
          % (t_up - t_stop, sum(curve.values()), sum(curve.values()) / n, peak))
    print("| … per second since the SIGTERM (s: count) | %s |" %
          ", ".join("%d: %d" % (s, c) for s, c in sorted(curve.items())))
    print("| … by verb | %s |" % ", ".join("%s %d" % kv for kv in sorted(by_verb.items())))
    print("| kube-apiserver CPU, steady (status writer on) | %.1f %% of one core |" %
          (100.0 * (cpu1 - cpu0) / (t1 - t0)))
    print("| kube-apiserver RSS, steady | %.0f-%.0f MiB |" % (min(api_rss), max(api_rss)))
    print("| bytes received per node per minute (status writes: %d, failed %d) | %.0f |" %
          (writer.writes, writer.failures, (rx1 - rx0) / n / minutes))
    print("| one Node as JSON: whole, metadata only (PartialObjectMetadata), its managedFields | %d, %d, %d bytes |" % sizes)
    print("| plugin RSS (mean, max) | %.2f MiB, %.2f MiB |" %
          (sum(plugin_rss) / len(plugin_rss), max(plugin_rss)))
    print("| GFD (issue 18) | 1 GET per node per minute, 37 MiB per process |")


if __name__ == "__main__":
    main()
