#!/usr/bin/python3
"""bench-dra: what DRA (serve --dra) costs: resident memory with and without it, idle
wakeups with it, and the latency of preparing a one-GPU claim.

Everything runs on this machine: the rendered 8-GPU a100 host with the simulated NVML
(benchlib.Host), the benchmark kubelet for the device-plugin side (benchlib.Kubelet), the
fake API server of tests/kube (DIR/tests/kube/fake-apiserver: TLS 1.2 + HTTP/2, Node n1;
it validates every ResourceSlice write and serves the claims), and the kubelet stand-in of
tests/dra/dra_kubelet.py for the DRA side (registration through the registrar
directory, NodePrepareResources / NodeUnprepareResources with grpcio).

  rss      VmRSS / RssAnon after the start settled, median of --runs starts, for: `serve`
           alone; `serve` with the API client on (--kubeconfig, --node-name, Events) but no
           DRA; `serve --dra` (every GPU through DRA, the slice published, registered with
           the kubelet stand-in); and the last again after the prepare round below.
  idle     context switches of all threads of `serve --dra` over --idle seconds, registered
           and its slice watch open, with no health stream open (then with one open: the
           re-send every 15 s, DRA_HEALTH_RESEND_MS).
  prepare  --claims claims of one GPU each (gpu-<i mod 8>), each prepared then unprepared,
           one claim per call, --pace seconds apart (a kubelet prepares when a pod starts,
           not in a loop: each GET finds a token of the API client's 5 QPS rate limit),
           timed from this process (grpcio's own overhead included): a first Prepare (GET
           of the claim, CDI spec and checkpoint written), a repeated Prepare (answered from
           the checkpoint), an Unprepare; then 30 first Prepares back to back, which the
           rate limit paces once the burst of 10 is spent. Then the same paced round
           with grpc-go, the kubelet's own gRPC library (DIR/tools/go-client/go-client
           bench-prepare, which paces and times in its own process): the figure for the
           goal, since grpcio spends most of a millisecond of its own per call once this
           process has slept between claims. Then the floor under a first
           Prepare, paced the same: the GET of a claim alone through our API client
           (tests/kube/kube-probe, timed from this process) and the probe's own pipe round
           trip (the GET's time to the server and back is the difference).

  mig      DynamicMIG (issue 31; --only mig, FEATURE_GATES=DynamicMIG=true, the run-time MIG
           state shared through MOCK_NVML_STATE, capability files rendered): on
           sim/profiles/dynamic/h100-8-mig-off.yaml (8 MIG-capable H100s, MIG mode off,
           208 devices, 9 slices at 1.36.3) the pool's publish time from start, median of
           --runs starts: from spawning the process to its "up to date" log line, and from
           its first log line to that one (the plugin's own clock, exec and dynamic loading
           left out), with the API client's default rate limit (5 QPS, burst 10, as NVIDIA's)
           and with --kube-api-qps 1000 --kube-api-burst 1000; VmRSS / RssAnon after the
           publish settled and after the prepare round; Prepare of a claim of one 1g.10gb
           placement (gpu-<i mod 8>-mig-1g10gb-19-0: MIG mode switched on, GPU and compute
           instance made, CDI spec with the caps nodes, checkpoint), prepared again,
           unprepared (instances destroyed, MIG mode off again), paced as above, from
           grpcio and from grpc-go.

  shares   GPU shares (issue 32; --only shares, --dra-consumable-capacity, API server v1.36.3)
           on sim/profiles/dynamic/h100-8-mig-off.yaml without DynamicMIG (8 full H100 80GB,
           each offered as shares), with the MPS runner (`mps-control-daemon --dra`, the
           simulator's nvidia-cuda-mps-control stand-in from the rendered driver root, a
           no-op nvidia-smi on its PATH): one 8Gi share per GPU prepared first and kept, so
           every GPU's daemon is up (the first share's Prepare, which starts the daemon and
           waits for it, timed apart); then --claims claims of one 8Gi share of
           gpu-<i mod 8> each (shareID, consumedCapacity as the scheduler writes them),
           prepared, prepared again, unprepared, paced as above, from grpcio and from
           grpc-go; VmRSS / RssAnon after the start settled, with the 8 daemons' shares
           held, and after the round (median of --runs starts); context switches over
           --idle seconds with the 8 shares held (no health stream), beside the same
           profile's `serve --dra` without shares, and the runner's own.

A benchmark: it prints figures and asserts nothing. Goals (issue 20): the whole daemon with
DRA on <= 3.5 MiB on this profile; no idle wakeups without a health stream; Prepare of a
1-GPU claim <= 2 ms p50. Issue 31 (DynamicMIG): Prepare of a 1g placement <= 3 ms p50,
the 8xH100 pool published <= 50 ms from start, RSS with 8 MIG-capable GPUs <= 4 MiB. Issue 32
(shares): Prepare of a share <= 5 ms p50 when its GPU's daemon is up, no idle wakeups added,
RSS with 8 GPUs shared <= 4 MiB.

The load average at the start and at the end is printed with the figures (the machine may
be shared: the latencies are upper bounds under that load).

Usage: bench-dra.py --build DIR [--runs N] [--idle S] [--claims N] [--pace S]
                    [--only rss,prepare,idle,mig,shares] [--plugin-arg ARG ...] [--json]
"""

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "kube"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "dra"))
import benchlib as bl  # noqa: E402
from benchlib import median, switches  # noqa: E402
from benchshares import SharesBench  # noqa: E402
import dra_kubelet as ds  # noqa: E402  (the kubelet stand-in, the claim objects)
import kubetest as kt  # noqa: E402

NODE = ds.NODE


MIG_PROFILE = os.path.join(SOURCE, "sim", "profiles", "dynamic", "h100-8-mig-off.yaml")
SHARES_PROFILE = MIG_PROFILE  # without DynamicMIG: 8 full H100 80GB
UP_TO_DATE = "ResourceSlices of node %s are up to date" % NODE


def seconds_of_day(t):
    """Seconds of the local day of time.time() t, as log_time reads a klog line."""
    lt = time.localtime(t)
    return lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (t % 1.0)


def log_time(line):
    """Seconds of the day of a klog line (I1207 15:30:01.788692 ...), or None."""
    f = line.split()
    if len(f) < 2 or len(f[0]) != 5:
        return None
    try:
        h, m, sec = f[1].split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    except ValueError:
        return None


class Bench(SharesBench):
    def __init__(self, build, profile, plugin_args=(), mig=False, shares=False, api_keys="rsa2048"):
        self.build = build
        self.register_timeout = 1  # the GetInfo's: bench/link-order.py's callgrind runs wait longer
        self.host = bl.Host(build, profile)
        if mig:
            # DynamicMIG: the host's MIG state shared (this bench reads nothing of it, the
            # plugin makes and destroys through it), the capability files written under the
            # rendered roots
            host, env = self.host, self.host.env
            extra = {"MOCK_NVML_STATE": os.path.join(host.tmp, "nvml-state"),
                     "MOCK_NVML_PROC_ROOT": host.roots["proc"], "MOCK_NVML_DEV_ROOT": host.roots["dev"],
                     "FEATURE_GATES": "DynamicMIG=true"}
            host.env = lambda more=None: env(dict(extra, **(more or {})))
        d = os.path.join(self.host.tmp, "api")
        os.mkdir(d)
        self.srv = kt.LineProc([os.path.join(build, "tests", "kube", "fake-apiserver"), d],
                               env=dict(os.environ, FAKE_APISERVER_KEYS=api_keys))
        port = int(self.srv.expect(r"^listening (\d+)$").group(1))
        self.cmd("add " + NODE)
        kc = kt.write_kubeconfig(os.path.join(d, "kubeconfig"), "https://127.0.0.1:%d" % port,
                                 ca=os.path.join(d, "ca.crt"), token="tok1")
        self.api_args = ["--kubeconfig", kc, "--node-name", NODE]
        if shares:
            # an MPS daemon's socket, <plugins>/gpu.nvidia.com/mps/share-<16 hex>/pipe/control,
            # within 108 bytes (as /var/lib/kubelet/plugins/... is, at 104)
            socks = kt.scratch.socket_dir("gs-")
            self.registrar, self.plugins_dir = os.path.join(socks, "r"), os.path.join(socks, "p")
        else:
            socks = kt.scratch.socket_dir("gdp-bench-dra-")  # the DRA directories' 78-byte bound
            self.registrar = os.path.join(socks, "reg")
            self.plugins_dir = os.path.join(socks, "plugins")
        self.dra_args = self.api_args + [
            "--dra", "--kubelet-registrar-directory-path", self.registrar,
            "--kubelet-plugins-directory-path", self.plugins_dir,
            "--cdi-root", os.path.join(self.host.tmp, "cdi")] + list(plugin_args)

    def cmd(self, line):
        self.srv.send(line)
        self.srv.expect(r"^ok %s$" % line.split()[0])

    def close(self):
        self.srv.stop()
        self.host.cleanup()

    def start_dp(self, extra):
        """serve (no DRA) up to its first ListAndWatch list: (plugin, closer)."""
        kub, p, ch, watch = bl.serve_and_list(self.host, extra)

        def close():
            watch.close()
            ch.close()
            p.stop()
            kub.stop()
        return p, close

    def start_dra(self, extra=()):
        """serve --dra up to its slice published and its registration: (plugin, kubelet
        stand-in, closer). The slices of an earlier start are wiped first, as the kubelet
        does at its start, so every start publishes."""
        self.cmd("rs-delete all")
        kub = bl.Kubelet(self.host)
        kub.serve()
        p = bl.Plugin(self.host, self.dra_args + list(extra))
        kl = ds.Kubelet(self.registrar)

        def close():
            kl.close()
            p.stop()
            kub.stop()
        try:
            p.wait_log("ResourceSlices of node %s are up to date" % NODE)
            p.t_published = time.monotonic()
            kl.register(timeout=self.register_timeout)
            p.wait_log("registered with the kubelet")
        except BaseException:
            close()
            raise
        return p, kl, close

    # ---- the figures
    def rss(self, runs, settle, claims):
        rows = {"serve": [], "serve + API client": [], "serve --dra": [],
                "serve --dra after %d prepares" % claims: []}
        for _ in range(runs):
            for name, extra in (("serve", []), ("serve + API client", self.api_args)):
                p, close = self.start_dp(extra)
                time.sleep(settle)
                rows[name].append(self.rss_of(p))
                close()
            p, kl, close = self.start_dra()
            time.sleep(settle)
            rows["serve --dra"].append(self.rss_of(p))
            self.prepare_round(kl, claims)
            time.sleep(settle)
            rows["serve --dra after %d prepares" % claims].append(self.rss_of(p))
            close()
        return {k: {"VmRSS_KiB": median([v[0] for v in vs]), "RssAnon_KiB": median([v[1] for v in vs]),
                    "runs_VmRSS_KiB": [v[0] for v in vs]} for k, vs in rows.items()}

    @staticmethod
    def rss_of(p):
        st = p.status()
        return int(st["VmRSS"].split()[0]), int(st["RssAnon"].split()[0])

    def idle(self, seconds):
        p, kl, close = self.start_dra()
        try:
            time.sleep(1.0)
            c0 = switches(p.pid)
            time.sleep(seconds)
            quiet = switches(p.pid) - c0
            w = kl.watch_health()
            ds.Kubelet.wait_health(w, lambda m: len(m) == 8, "8 devices")
            time.sleep(0.5)
            c0 = switches(p.pid)
            time.sleep(seconds)
            watched = switches(p.pid) - c0
            return {"seconds": seconds, "no_health_stream": quiet, "health_stream_open": watched}
        finally:
            close()

    device = "gpu-%d"  # the device of claim i: % (i mod 8)
    share = None  # shares: each claim's consumedCapacity (a shareID each)

    def load_claims(self, n, first_uid=0):
        base = ds.obj("resourceclaim-from-template-allocated")
        refs = []
        for i in range(first_uid, first_uid + n):
            o = ds.on_node(base, name="bench-%d" % i, uid="bbbbbbbb-0000-0000-0000-%012d" % i)
            o["status"]["allocation"]["devices"]["results"][0]["device"] = self.device % (i % 8)
            if self.share:
                o["status"]["allocation"]["devices"]["results"][0].update(
                    shareID=str(uuid.uuid4()), consumedCapacity=dict(self.share))
            self.cmd("rc-json " + json.dumps(o, separators=(",", ":")))
            refs.append(ds.ref(o))
        return refs

    def prepare_round(self, kl, n, pace=0.0, first_uid=0):
        """Each claim prepared, prepared again, unprepared, the next one pace seconds later:
        three lists of ms."""
        refs = self.load_claims(n, first_uid)
        first, again, unprep = [], [], []
        for r in refs:
            time.sleep(pace)
            t0 = time.perf_counter()
            res = kl.prepare(r)
            t1 = time.perf_counter()
            if res[r[2]]["error"]:
                raise bl.BenchError("prepare %s: %s" % (r[1], res[r[2]]["error"]))
            kl.prepare(r)
            t2 = time.perf_counter()
            if kl.unprepare(r)[r[2]]:
                raise bl.BenchError("unprepare %s failed" % r[1])
            t3 = time.perf_counter()
            first.append((t1 - t0) * 1e3)
            again.append((t2 - t1) * 1e3)
            unprep.append((t3 - t2) * 1e3)
        return first, again, unprep

    def go_round(self, n, pace, first_uid):
        """The same as prepare_round, driven by go-client bench-prepare: grpc-go, the
        kubelet's own gRPC library, pacing and timing in that process. Three lists of ms,
        or None when DIR/tools/go-client/go-client is not built (needs Debian's grpc-go)."""
        client = os.path.join(self.build, "tools", "go-client", "go-client")
        if not os.access(client, os.X_OK):
            return None
        refs = self.load_claims(n, first_uid)
        sock = os.path.join(self.plugins_dir, "gpu.nvidia.com", "dra.sock")
        r = subprocess.run([client, "bench-prepare", sock, "%g" % (pace * 1e3)],
                           input="".join("%s %s %s\n" % ref for ref in refs),
                           capture_output=True, text=True, timeout=60 + n * (pace + 1))
        if r.returncode != 0:
            raise bl.BenchError("go-client bench-prepare: %s" % r.stderr.strip())
        rows = [[int(x) / 1e3 for x in line.split()] for line in r.stdout.splitlines()]
        if len(rows) != n:
            raise bl.BenchError("go-client bench-prepare: %d results for %d claims" % (len(rows), n))
        return [list(col) for col in zip(*rows)]

    def get_round(self, n, pace):
        """The floor under a first Prepare: the GET of a claim alone through our API client
        (tests/kube/kube-probe, the client on our loop, the plugin's kubeconfig) to the same
        fake server, one every pace seconds, and the probe's own pipe round trip (a request
        line it refuses before any network), each timed from this process: two lists of ms."""
        refs = self.load_claims(n, first_uid=1000000)
        probe = kt.Probe(os.path.join(self.build, "tests", "kube", "kube-probe"),
                         *self.api_args[:2])
        get, pipe = [], []
        try:
            path = "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s"
            probe.request("GET", path % refs[0][:2])  # connected before timing starts
            for ns, name, _ in refs:
                time.sleep(pace)
                t0 = time.perf_counter()
                status, _ = probe.request("GET", path % (ns, name))
                t1 = time.perf_counter()
                if status != 200:
                    raise bl.BenchError("GET %s/%s: status %d" % (ns, name, status))
                time.sleep(pace)
                t2 = time.perf_counter()
                probe.send("req pipe NONE /")
                probe.expect(r"^error bad req$")
                t3 = time.perf_counter()
                get.append((t1 - t0) * 1e3)
                pipe.append((t3 - t2) * 1e3)
        finally:
            probe.stop()
        return get, pipe

    def mig(self, runs, settle, n, pace):
        """DynamicMIG on 8 H100s (see the module's doc): publish times, RSS, a 1g Prepare."""
        self.cmd("version v1.36.3")
        self.device = "gpu-%d-mig-1g10gb-19-0"
        out = {"publish": {}}
        for name, extra in (("default rate limit (5 QPS, burst 10)", []),
                            ("--kube-api-qps 1000 --kube-api-burst 1000",
                             ["--kube-api-qps", "1000", "--kube-api-burst", "1000"])):
            spawn, own, stamped = [], [], []
            for _ in range(runs):
                p, kl, close = self.start_dra(extra)
                try:
                    lines = p.log_lines()
                    done = next(l for l in lines if UP_TO_DATE in l)
                    spawn.append((p.t_published - p.t_spawn) * 1e3)
                    own.append((log_time(done) - log_time(lines[0])) * 1e3)
                    stamped.append((log_time(done) - seconds_of_day(p.t_spawn_wall)) * 1e3)
                    if "208 devices" not in done:
                        raise bl.BenchError("not the 8xH100 pool: %s" % done)
                    self.srv.send("rs-dump")
                    slices = int(self.srv.expect(r"^rs-count (\d+)$").group(1))
                    self.srv.expect(r"^ok rs-dump$")
                finally:
                    close()
            out["publish"][name] = {"from_spawn_ms": round(median(spawn), 1),
                                    "from_first_log_line_ms": round(median(own), 1),
                                    "spawn_to_its_line_ms": round(median(stamped), 1),
                                    "runs_spawn_to_its_line_ms": [round(x, 1) for x in stamped],
                                    "runs_from_spawn_ms": [round(x, 1) for x in spawn]}
        out["slices"] = slices
        rss, rss_after = [], []
        prep = None
        for run in range(runs):
            p, kl, close = self.start_dra()
            try:
                time.sleep(settle)
                rss.append(self.rss_of(p))
                kl.prepare()  # the channel is connected before timing starts
                if run == 0:
                    first, again, unprep = self.prepare_round(kl, n, pace)
                    go = self.go_round(n, pace, first_uid=n)
                    prep = {"prepare (GET, MIG made, CDI spec, checkpoint)": first,
                            "prepare again (from the checkpoint)": again,
                            "unprepare (MIG destroyed)": unprep,
                            "grpc-go: prepare (GET, MIG made, CDI spec, checkpoint)": go and go[0],
                            "grpc-go: prepare again": go and go[1],
                            "grpc-go: unprepare": go and go[2]}
                else:
                    self.prepare_round(kl, min(n, 50), pace / 10, first_uid=2 * n + run * 100)
                time.sleep(settle)
                rss_after.append(self.rss_of(p))
            finally:
                close()
        out["rss"] = {"serve --dra, DynamicMIG, 8 H100": {
                          "VmRSS_KiB": median([v[0] for v in rss]), "RssAnon_KiB": median([v[1] for v in rss]),
                          "runs_VmRSS_KiB": [v[0] for v in rss]},
                      "... after a prepare round": {
                          "VmRSS_KiB": median([v[0] for v in rss_after]),
                          "RssAnon_KiB": median([v[1] for v in rss_after]),
                          "runs_VmRSS_KiB": [v[0] for v in rss_after]}}
        out["prepare"] = {k: {"n": len(v), "p50_ms": round(bl.pct(v, 50), 3), "p99_ms": round(bl.pct(v, 99), 3),
                              "max_ms": round(max(v), 3)} for k, v in prep.items() if v}
        return out

    def prepare(self, n, pace):
        p, kl, close = self.start_dra()
        try:
            kl.prepare()  # the channel is connected before timing starts
            first, again, unprep = self.prepare_round(kl, n, pace)
            # The same back to back: past the burst, the API client's rate limit
            # (--kube-api-qps 5, --kube-api-burst 10, as NVIDIA's) paces the GETs.
            b2b = self.prepare_round(kl, 30, first_uid=n)[0]
            go = self.go_round(n, pace, first_uid=n + 30)
        finally:
            close()
        get, pipe = self.get_round(n, pace)
        fig = {}
        for name, v in (("prepare (GET, CDI spec, checkpoint)", first),
                        ("prepare again (from the checkpoint)", again), ("unprepare", unprep),
                        ("prepare, 30 back to back", b2b),
                        ("grpc-go: prepare (GET, CDI spec, checkpoint)", go and go[0]),
                        ("grpc-go: prepare again", go and go[1]),
                        ("grpc-go: unprepare", go and go[2]),
                        ("GET of a claim alone (kube-probe)", get),
                        ("kube-probe's pipe round trip", pipe)):
            if not v:
                continue  # go-client not built
            fig[name] = {"n": len(v), "p50_ms": round(bl.pct(v, 50), 3),
                         "p99_ms": round(bl.pct(v, 99), 3), "max_ms": round(max(v), 3)}
        return fig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--profile", default=os.path.join(bl.DATA, "nvml-mock-profiles", "a100.yaml"))
    ap.add_argument("--runs", type=int, default=3, help="starts per RSS row (median)")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds before reading RSS")
    ap.add_argument("--idle", type=float, default=30, help="seconds per idle window (0: skip)")
    ap.add_argument("--claims", type=int, default=200, help="claims in the prepare round")
    ap.add_argument("--pace", type=float, default=0.25,
                    help="seconds between two claims (> 1/--kube-api-qps: each GET finds a token)")
    ap.add_argument("--only", default="rss,prepare,idle",
                    help="comma-separated figures to run: rss, prepare, idle, mig, shares")
    ap.add_argument("--plugin-arg", action="append", default=[],
                    help="one more argument for serve --dra (repeat it), e.g. "
                         "--plugin-arg=--kube-api-qps=1000 for back to back GETs")
    ap.add_argument("--api-keys", default="rsa2048", choices=("rsa2048", "ecdsa-p256"),
                    help="the fake API server's CA and serving keys: RSA 2048 as kubeadm makes "
                         "them by default, or ECDSA P-256 (two ECDSA verifications in mbedtls "
                         "per handshake, ~2 ms each)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    only = a.only.split(",")
    out = {"load_at_start": open("/proc/loadavg").read().split()[:3], "api_keys": a.api_keys}
    if "mig" in only:
        b = Bench(os.path.abspath(a.build), MIG_PROFILE, a.plugin_arg, mig=True, api_keys=a.api_keys)
        try:
            out["mig"] = b.mig(a.runs, a.settle, a.claims, a.pace)
        finally:
            b.close()
        only = [o for o in only if o != "mig"]
    if "shares" in only:
        b = Bench(os.path.abspath(a.build), SHARES_PROFILE,
                  a.plugin_arg + ["--dra-consumable-capacity"], shares=True, api_keys=a.api_keys)
        try:
            out["shares"] = b.shares(a.runs, a.settle, a.claims, a.pace, a.idle)
        finally:
            b.close()
        only = [o for o in only if o != "shares"]
    b = Bench(os.path.abspath(a.build), a.profile, a.plugin_arg, api_keys=a.api_keys)
    try:
        if "rss" in only:
            out["rss"] = b.rss(a.runs, a.settle, min(a.claims, 50))
        if "prepare" in only:
            out["prepare"] = b.prepare(a.claims, a.pace)
        if "idle" in only and a.idle > 0:
            out["idle"] = b.idle(a.idle)
        out["load_at_end"] = open("/proc/loadavg").read().split()[:3]
    finally:
        b.close()
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("Load average (1, 5, 15 min): %s at the start, %s at the end" % (
        " ".join(out["load_at_start"]), " ".join(out["load_at_end"])))
    if "rss" in out:
        print("RSS (KiB, median of %d starts; 8-GPU a100 profile, simulated NVML):" % a.runs)
        for k, v in out["rss"].items():
            print("  %-34s VmRSS %5d (%.2f MiB)  RssAnon %5d  runs %s" % (
                k, v["VmRSS_KiB"], v["VmRSS_KiB"] / 1024, v["RssAnon_KiB"], v["runs_VmRSS_KiB"]))
    if "prepare" in out:
        print("Prepare / Unprepare of a 1-GPU claim, one claim per call (ms):")
        for k, v in out["prepare"].items():
            print("  %-38s n %d  p50 %.3f  p99 %.3f  max %.3f" % (k, v["n"], v["p50_ms"],
                                                                v["p99_ms"], v["max_ms"]))
    if "mig" in out:
        m = out["mig"]
        print("DynamicMIG, 8 H100 (sim/profiles/dynamic/h100-8-mig-off.yaml, 208 devices, API server "
              "v1.36.3, %d slices):" % m["slices"])
        for k, v in m["publish"].items():
            print("  publish, %-40s from spawn %.1f ms (runs %s), from its first log line %.1f ms" % (
                k, v["from_spawn_ms"], v["runs_from_spawn_ms"], v["from_first_log_line_ms"]))
            print("  %-49s spawn to its line's own timestamp %.1f ms (runs %s)" % (
                "", v["spawn_to_its_line_ms"], v["runs_spawn_to_its_line_ms"]))
        for k, v in m["rss"].items():
            print("  %-34s VmRSS %5d (%.2f MiB)  RssAnon %5d  runs %s" % (
                k, v["VmRSS_KiB"], v["VmRSS_KiB"] / 1024, v["RssAnon_KiB"], v["runs_VmRSS_KiB"]))
        for k, v in m["prepare"].items():
            print("  %-52s n %d  p50 %.3f  p99 %.3f  max %.3f" % (k, v["n"], v["p50_ms"],
                                                                v["p99_ms"], v["max_ms"]))
    if "shares" in out:
        m = out["shares"]
        print("GPU shares, 8 H100 (sim/profiles/dynamic/h100-8-mig-off.yaml, no DynamicMIG, "
              "--dra-consumable-capacity, API server v1.36.3; 8Gi shares):")
        for k, v in m["rss"].items():
            print("  %-34s VmRSS %5d (%.2f MiB)  RssAnon %5d  runs %s" % (
                k, v["VmRSS_KiB"], v["VmRSS_KiB"] / 1024, v["RssAnon_KiB"], v["runs_VmRSS_KiB"]))
        for k, v in m["prepare"].items():
            print("  %-58s n %d  p50 %.3f  p99 %.3f  max %.3f" % (k, v["n"], v["p50_ms"],
                                                                v["p99_ms"], v["max_ms"]))
        if "idle" in m:
            i = m["idle"]
            print("  idle context switches over %.0f s (all threads, no health stream): %s" % (
                i["seconds"], ", ".join("%s %d" % (k, v) for k, v in i.items() if k != "seconds")))
    if "idle" in out:
        i = out["idle"]
        print("Idle context switches over %.0f s (all threads): %d with no health stream, %d with "
              "one open" % (i["seconds"], i["no_health_stream"], i["health_stream_open"]))


if __name__ == "__main__":
    main()
