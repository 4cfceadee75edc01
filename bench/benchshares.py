"""benchshares: the GPU-shares half of bench-dra.py's Bench (a mixin: it uses the Bench's
fake API server, host, kubelet stand-in and claims): the MPS runner beside the plugin, the
runs of a shares bench (one share per GPU kept, a paced round, RSS, the idle window) and
bench-dra.py's `--only shares` figures. bench-dra-mig-shares.py runs the same on DynamicMIG
placements. See bench-dra.py's docstring for what is measured."""

import json
import os
import subprocess
import sys
import time

import benchlib as bl
import kubetest as kt
from benchlib import median, switches


class SharesBench:
    def start_runner(self):
        """mps-control-daemon --dra on this host's plugins directory, the simulator's MPS
        stand-in and a no-op nvidia-smi on its PATH: (process, closer)."""
        host = self.host
        bindir = os.path.join(host.tmp, "mps-bin")
        if not os.path.isdir(bindir):
            os.mkdir(bindir)
            mps = os.path.join(host.driver_root or "", "usr", "bin", "nvidia-cuda-mps-control")
            if not os.path.exists(mps):
                mps = os.path.join(self.build, "sim", "cuda", "nvidia-cuda-mps-control")
            os.symlink(mps, os.path.join(bindir, "nvidia-cuda-mps-control"))
            with open(os.path.join(bindir, "nvidia-smi"), "w") as f:
                f.write("#!/bin/sh\nexit 0\n")
            os.chmod(os.path.join(bindir, "nvidia-smi"), 0o755)
        log_path = os.path.join(host.tmp, "runner.log")
        log = open(log_path, "wb")
        proc = kt.scratch.adopt(subprocess.Popen(
            [sys.executable, "-c", "import os, sys; os.execv(sys.argv[1], ['mps-control-daemon'] + "
             "sys.argv[2:])", host.plugin, "--sysfs-root", host.roots["sys"], "--proc-root",
             host.roots["proc"], "--dev-root", host.roots["dev"], "--dra",
             "--kubelet-plugins-directory-path", self.plugins_dir],
            env=host.env({"PATH": bindir + ":/usr/bin:/bin", "GDP_SYSFS_ROOT": host.roots["sys"],
                          "GDP_MPS_CONTAINER_ROOT": os.path.join(host.tmp, "mpsroot")}),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log, close_fds=True))

        def close():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
            # what the daemons mounted (their shm), whatever state they were left in
            with open("/proc/self/mounts") as f:
                for line in f:
                    if line.split()[1].startswith(self.plugins_dir):
                        subprocess.run(["umount", "-l", line.split()[1]])
        end = time.monotonic() + bl.WAIT
        while True:
            with open(log_path, "rb") as f:
                if b"running the MPS control daemons of claims" in f.read():
                    break
            if proc.poll() is not None or time.monotonic() > end:
                close()
                raise bl.BenchError("the MPS runner did not start; its log:\n" +
                                    open(log_path).read()[-3000:])
            time.sleep(0.01)
        return proc, close

    def share_runs(self, runs, settle, n, pace, idle, first_start=None):
        """The runs of a shares bench, self.device and self.share set: per run the runner and
        serve --dra started (first_start(p) called on the first), one share of gpu-<i>'s
        device for each of the 8 GPUs prepared and kept (each timed: the first share of a
        device starts its daemon), the paced round (on the first run from grpcio and grpc-go,
        and then the idle window; later runs a shorter one), RSS at the start, with the 8
        kept and after the round. Returns {rss, held, after: [(VmRSS, RssAnon)], cold: [ms],
        round: (first, again, unprepare, grpc-go's or None), idle: {...} or None}."""
        out = {"rss": [], "held": [], "after": [], "cold": [], "round": None, "idle": None}
        for run in range(runs):
            runner, close_runner = self.start_runner()
            try:
                p, kl, close = self.start_dra()
                try:
                    if run == 0 and first_start:
                        first_start(p)
                    time.sleep(settle)
                    out["rss"].append(self.rss_of(p))
                    kl.prepare()  # the channel is connected before timing starts
                    keepers = self.load_claims(8, first_uid=9000000 + run * 10)
                    for r in keepers:
                        time.sleep(pace)
                        t0 = time.perf_counter()
                        res = kl.prepare(r)
                        out["cold"].append((time.perf_counter() - t0) * 1e3)
                        if res[r[2]]["error"]:
                            raise bl.BenchError("prepare %s: %s" % (r[1], res[r[2]]["error"]))
                    time.sleep(settle)
                    out["held"].append(self.rss_of(p))
                    if run == 0:
                        out["round"] = self.prepare_round(kl, n, pace) + (self.go_round(n, pace, first_uid=n),)
                        if idle > 0:
                            time.sleep(1.0)
                            c0, r0 = switches(p.pid), switches(runner.pid)
                            time.sleep(idle)
                            out["idle"] = {"seconds": idle, "serve --dra, 8 shares held": switches(p.pid) - c0,
                                           "mps-control-daemon --dra, 8 daemons": switches(runner.pid) - r0}
                    else:
                        self.prepare_round(kl, min(n, 50), pace / 10, first_uid=2 * n + run * 100)
                    time.sleep(settle)
                    out["after"].append(self.rss_of(p))
                    kl.unprepare(*keepers)  # the daemons stopped: the next run starts clean
                finally:
                    close()
            finally:
                close_runner()
        return out

    def shares(self, runs, settle, n, pace, idle):
        """GPU shares on 8 H100s (see the module's doc)."""
        self.cmd("version v1.36.3")
        self.share = {"memory": "8Gi", "compute": "10"}

        def check(p):
            self.srv.send("rs-dump")
            devs = []
            while True:
                m = self.srv.expect(r"^rs(-count)? (\S+)(?: (.*))?$")
                if m.group(1):
                    self.srv.expect(r"^ok rs-dump$")
                    break
                devs += json.loads(m.group(3))["spec"].get("devices") or []
            shared = [d["name"] for d in devs if d.get("allowMultipleAllocations")]
            if len(shared) != 8:
                raise bl.BenchError("not 8 shared GPUs: %s" % shared)
        got = self.share_runs(runs, settle, n, pace, idle, check)
        first, again, unprep, go = got["round"]
        prep = {"prepare of a share (GET, CDI spec, checkpoint; daemon up)": first,
                "prepare again (from the checkpoint)": again,
                "unprepare (the daemon kept: another share holds it)": unprep,
                "grpc-go: prepare of a share (daemon up)": go and go[0],
                "grpc-go: prepare again": go and go[1],
                "grpc-go: unprepare": go and go[2]}
        out = {"idle": got["idle"]} if got["idle"] else {}
        rss, rss_held, rss_after, cold = got["rss"], got["held"], got["after"], got["cold"]
        self.share = None
        if idle > 0:
            # the same profile without shares, for the comparison
            args = self.dra_args
            self.dra_args = [x for x in args if x != "--dra-consumable-capacity"]
            try:
                p, kl, close = self.start_dra()
            finally:
                self.dra_args = args
            try:
                time.sleep(1.0)
                c0 = switches(p.pid)
                time.sleep(idle)
                out["idle"]["serve --dra, no shares (same profile)"] = switches(p.pid) - c0
            finally:
                close()

        def row(v):
            return {"VmRSS_KiB": median([x[0] for x in v]), "RssAnon_KiB": median([x[1] for x in v]),
                    "runs_VmRSS_KiB": [x[0] for x in v]}
        out["rss"] = {"serve --dra, 8 H100 shared": row(rss),
                      "... 8 shares held (8 daemons)": row(rss_held),
                      "... after a prepare round": row(rss_after)}
        prep["prepare of a GPU's first share (daemon started)"] = cold
        out["prepare"] = {k: {"n": len(v), "p50_ms": round(bl.pct(v, 50), 3), "p99_ms": round(bl.pct(v, 99), 3),
                              "max_ms": round(max(v), 3)} for k, v in prep.items() if v}
        return out
