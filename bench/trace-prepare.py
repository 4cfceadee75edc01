#!/usr/bin/python3
"""trace-prepare: where the plugin's own time goes in a paced first Prepare of DRA.

bench-dra.py times a Prepare from the kubelet's side; on this VM its spread between runs is
larger than the plugin's own part. This cuts each first Prepare at the plugin's own system
calls instead, from a kernel trace (`perf record -a --exclude-perf` of raw_syscalls and
sched_switch / sched_wakeup), which the clients' and the server's own costs do not enter:

  request -> GET sent   epoll_wait returning with the request .. the GET's sendto done
  GET wait              .. epoll_wait returning with its answer (the API server's time,
                        and the wake-up of the plugin)
  answer -> reply sent  .. the reply's sendto done (TLS, HTTP/2, the claim's JSON, the CDI
                        spec, the checkpoint)

Same setup as bench-dra.py (its Bench: the fake API server, the kubelet stand-in over
grpcio, the 8-GPU a100 host); --claims claims, each prepared, prepared again and
unprepared, one every --pace seconds. The API connection is the descriptor the plugin
reads with recvfrom (mbedtls's recv); the GET is the first sendto on it after a request,
the reply the next sendto on another descriptor. Needs perf (Debian's linux-perf) and
root. A benchmark: prints medians, asserts nothing.

Usage: trace-prepare.py --build DIR [--claims N] [--pace S]
"""

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("bench_dra", os.path.join(HERE, "bench-dra.py"))
bd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bd)

EVENTS = "raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch,sched:sched_wakeup"
EPOLL_WAIT, SENDTO, RECVFROM = "232", "44", "45"


def spans(lines, pid):
    """[(request->GET, GET wait, answer->reply)] in ms, from `perf script` lines of the
    form "COMM TID [CPU] TIME: EVENT: NR n (args...)"."""
    api_fd = None
    out, state, wake, t_req, t_get, t_ans = [], 0, None, 0.0, 0.0, 0.0
    for line in lines:
        f = line.split()
        if len(f) < 7 or f[1] != pid or f[5] != "NR":
            continue
        t, enter, nr = float(f[3].rstrip(":")), f[4].endswith("sys_enter:"), f[6]
        fd = f[7].strip("(,") if enter and len(f) > 7 else None
        if not enter and nr == EPOLL_WAIT:
            wake = t
        elif enter and nr == RECVFROM and api_fd is None:
            api_fd = fd
        elif enter and nr == SENDTO and fd == api_fd and api_fd is not None and wake is not None:
            state, t_req = 1, wake
        elif not enter and nr == SENDTO and state == 1:
            state, t_get = 2, t
        elif enter and nr == RECVFROM and state == 2:
            state, t_ans = 3, wake
        elif enter and nr == SENDTO and state == 3 and fd != api_fd:
            state = 4
        elif not enter and nr == SENDTO and state == 4:
            state = 0
            out.append(((t_get - t_req) * 1e3, (t_ans - t_get) * 1e3, (t - t_ans) * 1e3))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--claims", type=int, default=40)
    ap.add_argument("--pace", type=float, default=0.25)
    a = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("trace-prepare: perf is not installed (apt-get install linux-perf)")
    b = bd.Bench(os.path.abspath(a.build), os.path.join(bd.bl.DATA, "nvml-mock-profiles", "a100.yaml"))
    data = os.path.join(b.host.tmp, "perf.data")
    try:
        p, kl, close = b.start_dra()
        try:
            refs = b.load_claims(a.claims)
            kl.prepare()  # the channel is connected before tracing starts
            rec = subprocess.Popen(["perf", "record", "-q", "-a", "-e", EVENTS, "--exclude-perf",
                                    "-o", data], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1.5)  # perf is recording
            for r in refs:
                time.sleep(a.pace)
                kl.prepare(r)
                kl.prepare(r)
                kl.unprepare(r)
            rec.send_signal(2)
            _, err = rec.communicate(timeout=60)
            if rec.returncode not in (0, -2):
                sys.exit("trace-prepare: perf record failed: %s" % err.decode(errors="replace")[-300:])
            pid = str(p.pid)
        finally:
            close()
        script = subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,cpu,time,event,trace"],
                                capture_output=True, text=True, check=True).stdout.splitlines()
    finally:
        b.close()
    got = spans(script, pid)
    print("Load average (1 min) at the end: %s" % open("/proc/loadavg").read().split()[0])
    print("First Prepare of a 1-GPU claim, cut at the plugin's system calls, %d of %d, ms:" % (
        len(got), a.claims))
    if not got:
        return
    for i, name in enumerate(("request -> GET sent", "GET wait", "answer -> reply sent")):
        print("  %-22s p50 %.3f" % (name, statistics.median(g[i] for g in got)))
    print("  %-22s p50 %.3f" % ("in the plugin", statistics.median(sum(g) for g in got)))


if __name__ == "__main__":
    main()
