#!/usr/bin/python3
"""bench-dra-mig-shares: what shares of DynamicMIG placements cost (issue 32 on issue 31), on
bench-dra.py's machinery (its Bench: the rendered host with the simulated NVML, the fake API
server at v1.36.3, the kubelet stand-in, the MPS runner `mps-control-daemon --dra` with the
simulator's stand-in) and its profile sim/profiles/dynamic/h100-8-mig-off.yaml (8 H100s, MIG
mode off), the plugin as `serve --dra --dra-consumable-capacity` with DynamicMIG on, so that
every placement and every full GPU is offered as shares:

- the publish: devices and slices of the pool, from the "up to date" line;
- the first share of the 3g.40gb placement at memory slice 0 of each GPU, prepared and kept:
  MIG mode switched on, the MIG device made, its MPS daemon started and waited for (timed
  apart: the runner's start of the daemon is most of it);
- then --claims claims of one 8Gi share of gpu-<i mod 8>'s same placement each (its MIG
  device and daemon up: found, not made), prepared, prepared again (from the checkpoint),
  unprepared (the MIG device and daemon kept: the first share holds them), --pace seconds
  apart, from grpcio and from grpc-go (DIR/tools/go-client/go-client, when built);
- VmRSS / RssAnon after the start settled, with the 8 first shares held, and after the
  round (median of --runs starts);
- context switches of the plugin and of the runner over --idle seconds with the 8 first
  shares held (no health stream open).

A benchmark: it prints figures and asserts nothing. Goals (issue 32): Prepare of a share
<= 5 ms p50 when its device's daemon is up; no idle wakeups added; RSS <= 4 MiB with DRA,
MIG and shares on.

Usage: bench-dra-mig-shares.py --build DIR [--runs N] [--claims N] [--pace S] [--idle S] [--json]
"""

import argparse
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_dra", os.path.join(HERE, "bench-dra.py"))
bd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bd)
bl = bd.bl

PLACEMENT = "gpu-%d-mig-3g40gb-9-0"


def row(v):
    return {"VmRSS_KiB": bd.median([x[0] for x in v]), "RssAnon_KiB": bd.median([x[1] for x in v]),
            "runs_VmRSS_KiB": [x[0] for x in v]}


def pcts(v):
    return {"n": len(v), "p50_ms": round(bl.pct(v, 50), 3), "p99_ms": round(bl.pct(v, 99), 3),
            "max_ms": round(max(v), 3)}


class Bench(bd.Bench):
    def mig_shares(self, runs, settle, n, pace, idle):
        self.cmd("version v1.36.3")
        self.device = PLACEMENT
        self.share = {"memory": "8Gi", "compute": "10"}
        out = {}

        def publish(p):
            out["publish"] = next(line for line in p.log_lines() if bd.UP_TO_DATE in line)
        got = self.share_runs(runs, settle, n, pace, idle, publish)
        first, again, unprep, go = got["round"]
        if got["idle"]:
            out["idle"] = got["idle"]
        out["rss"] = {"serve --dra, DynamicMIG + shares, 8 H100": row(got["rss"]),
                      "... 8 first shares held (8 MIG devices, 8 daemons)": row(got["held"]),
                      "... after a prepare round": row(got["after"])}
        prep = {"prepare of a share (MIG device and daemon up: found)": first,
                "prepare again (from the checkpoint)": again,
                "unprepare (MIG device and daemon kept)": unprep,
                "grpc-go: prepare of a share (found)": go and go[0],
                "grpc-go: prepare again": go and go[1],
                "grpc-go: unprepare": go and go[2],
                "prepare of a placement's first share (MIG made, daemon started)": got["cold"]}
        out["prepare"] = {k: pcts(v) for k, v in prep.items() if v}
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=3, help="starts per RSS row (median)")
    ap.add_argument("--settle", type=float, default=0.5, help="seconds before reading RSS")
    ap.add_argument("--claims", type=int, default=100, help="claims in the prepare round")
    ap.add_argument("--pace", type=float, default=0.25, help="seconds between two claims")
    ap.add_argument("--idle", type=float, default=30, help="seconds of the idle window (0: skip)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out = {"load_at_start": open("/proc/loadavg").read().split()[:3]}
    b = Bench(os.path.abspath(a.build), bd.MIG_PROFILE, ["--dra-consumable-capacity"], mig=True, shares=True)
    try:
        out.update(b.mig_shares(a.runs, a.settle, a.claims, a.pace, a.idle))
    finally:
        b.close()
    out["load_at_end"] = open("/proc/loadavg").read().split()[:3]
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print("Load average (1, 5, 15 min): %s at the start, %s at the end" % (
        " ".join(out["load_at_start"]), " ".join(out["load_at_end"])))
    print("Publish: %s" % out["publish"].split("] ", 1)[-1])
    print("RSS (KiB, median of %d starts):" % a.runs)
    for k, v in out["rss"].items():
        print("  %-52s VmRSS %5d (%.2f MiB)  RssAnon %5d  runs %s" % (
            k, v["VmRSS_KiB"], v["VmRSS_KiB"] / 1024, v["RssAnon_KiB"], v["runs_VmRSS_KiB"]))
    if "idle" in out:
        print("Context switches over %g s, 8 first shares held: %s" % (out["idle"]["seconds"], ", ".join(
            "%s %d" % (k, v) for k, v in out["idle"].items() if k != "seconds")))
    print("Shares of a 3g.40gb placement, one claim per call (ms):")
    for k, v in out["prepare"].items():
        print("  %-66s n %3d  p50 %.3f  p99 %.3f  max %.3f" % (k, v["n"], v["p50_ms"], v["p99_ms"], v["max_ms"]))


if __name__ == "__main__":
    main()
